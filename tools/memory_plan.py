"""Per-device memory plans of LM RL runs on real-size models, as the start-up check computes them, without the
weights: docs/byo_checkpoint.md's tables.

    .venv/bin/python tools/memory_plan.py                          # peak per device: models x games x layouts
    .venv/bin/python tools/memory_plan.py --breakdown=qwen3-8b     # every entry of one model's plan (first game)
    .venv/bin/python tools/memory_plan.py --models=qwen3-0.6b --platform=cpu
    .venv/bin/python tools/memory_plan.py --config=configs/qwen3_8b_fsdp.py --models=qwen3-8b --layouts=16x8

For each model (models/config.py PRESETS in bfloat16: the architecture of the checkpoint of that name) and game
config, the trainer is built as experiments/train.py builds it (train/lm_rl.py make_train), with the base's
weights as shapes only (an 8B plan allocates nothing), for each layout (devices, mesh.fsdp). train/lm/memory.py
`trainer_memory` gives the plan the start-up check prints: weights, LoRA adapters, Adam and KV cache exact; the
loss's activations counted by JAX from the trainer's own forward (`loss_residual_bytes`), at 2 bytes for
bfloat16 as a GPU or TPU keeps them (--platform=cpu: 4, as XLA:CPU does); with mesh.fsdp > 1, whose program
rematerialises every layer (models/fsdp.py), the layers' inputs by formula.
Runs on the CPU, in seconds per plan.
"""

from __future__ import annotations

import argparse
import os
import sys
from unittest import mock

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # layouts of up to 8 devices
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from jaxmarl_llm.models import transformer  # noqa: E402
from jaxmarl_llm.policies import lm_policy  # noqa: E402
from jaxmarl_llm.run.cli import load_config_file  # noqa: E402
from jaxmarl_llm.train import lm_rl  # noqa: E402
from jaxmarl_llm.train.lm import memory  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-8b")
# title -> (config file, overrides): each config as shipped, the batch stated in the title
GAMES = {
    "tic-tac-toe (free text), 32 games": ("configs/free_tic_tac_toe.py", {}),
    "guess the number, 64 games": ("configs/guess_number.py", {"num_envs": 64}),  # 8 GRPO groups of 8
}
LAYOUTS = {"1 device": (1, 1), "8 devices, fsdp=1": (8, 1), "8 devices, fsdp=8": (8, 8)}  # (devices, mesh.fsdp)
PERSISTENT = ("base weights (sharded over fsdp)", "adapters + value heads (float32, replicated)",
              "Adam moments (2 x adapters + heads)")


def _abstract_init(cfg, key, std=0.02):
    """init_params as shapes and dtypes only."""
    return jax.eval_shape(lambda k: transformer.init_params(cfg, k, std=std), key)


def plan(config_file: str, overrides: dict, model: str, devices: int, fsdp: int, platform: str = "gpu",
         dtype: str = "bfloat16") -> dict[str, int]:
    """{entry: bytes per device} of `config_file` on the preset `model` over `devices` devices, `fsdp` of them
    sharing each base weight; the last entry is the peak."""
    c = load_config_file(os.path.join(ROOT, config_file))
    c.update(overrides)
    c.model.checkpoint, c.model.preset, c.model.dtype = "", model, dtype
    if c.tokenizer not in ("", "char", "word") and not os.path.isdir(c.tokenizer):
        c.tokenizer = "char"  # a placeholder checkpoint path (configs/qwen3_8b_fsdp.py): buffers are fixed-size,
        # so the plan is the same under any tokenizer whose prompts fit the capacity
    c.mesh.num_devices, c.mesh.fsdp = devices, fsdp
    with mock.patch.object(lm_policy, "init_params", _abstract_init):
        trainer = lm_rl.make_train(c)
    return memory.trainer_memory(trainer, devices, fsdp, platform=platform)


def peak_table(models=MODELS, games=GAMES, layouts=LAYOUTS, platform: str = "gpu") -> str:
    """A markdown table: the peak per device (GiB) and, in brackets, its persistent part (weights, adapters, Adam)."""
    lines = ["| model | game, batch per update | " + " | ".join(layouts) + " |",
             "|---|---|" + "---:|" * len(layouts)]
    for model in models:
        for title, (config_file, overrides) in games.items():
            cells = []
            for devices, fsdp in layouts.values():
                rows = plan(config_file, overrides, model, devices, fsdp, platform)
                persistent = sum(rows[k] for k in PERSISTENT)
                cells.append(f"{rows[memory.PEAK] / memory.GIB:.2f} ({persistent / memory.GIB:.2f})")
            lines.append(f"| {model} | {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated presets (models/config.py)")
    parser.add_argument("--breakdown", default="", help="a preset: print every entry of its plan instead")
    parser.add_argument("--config", default="", help="one config file (configs/NAME.py[:VARIANT]) instead of the "
                        "two games, its batch as shipped")
    parser.add_argument("--layouts", default="", help="comma-separated DEVICESxFSDP (default 1x1,8x1,8x8)")
    parser.add_argument("--platform", default="gpu", choices=("gpu", "tpu", "cpu"),
                        help="whose bytes to count bfloat16 activations at (cpu: 4, gpu / tpu: 2)")
    args = parser.parse_args(argv)
    from jaxmarl_llm.models.config import PRESETS

    models = [m for m in (args.breakdown or args.models).split(",") if m]
    unknown = [m for m in models if m not in PRESETS]
    if unknown:
        print(f"Error: unknown preset(s) {unknown}; choose among {sorted(PRESETS)}", file=sys.stderr)
        return 2
    games = {args.config: (args.config, {})} if args.config else GAMES
    layouts = LAYOUTS
    if args.layouts:
        try:
            pairs = [tuple(int(x) for x in item.split("x")) for item in args.layouts.split(",") if item]
        except ValueError:
            pairs = [()]
        if not pairs or any(len(p) != 2 or p[0] < 1 or p[1] < 1 or p[0] % p[1] for p in pairs):
            print(f"Error: --layouts: expected DEVICESxFSDP items, fsdp dividing devices, got {args.layouts!r}",
                  file=sys.stderr)
            return 2
        layouts = {f"{n} devices, fsdp={f}": (n, f) for n, f in pairs}
    if args.breakdown:
        title = next(iter(games))
        config_file, overrides = games[title]
        print(memory.format_table({name: plan(config_file, overrides, models[0], n, f, args.platform)
                                   for name, (n, f) in layouts.items()}))
    else:
        print(peak_table(models, games, layouts, platform=args.platform))
    return 0


if __name__ == "__main__":
    sys.exit(main())
