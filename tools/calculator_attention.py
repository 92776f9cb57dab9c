"""Which problem digits a calculator run's attention heads read while the policy writes its call.

    .venv/bin/python tools/calculator_attention.py --run=runs/calculator
    .venv/bin/python tools/calculator_attention.py --run=runs/calculator --variant=answer --episodes=128

Builds the config's trainer as experiments/train.py does, with the model and env settings of the run's own
config.json (its base model, the problem's layout), restores the run's adapters, plays the expert (a call
naming the problem, then the answer) on `--episodes` training problems and reads the model, teacher-forced on
those transcripts, at the position that writes each digit of the call (a1 a2 * b1 b2: the operands' tens and
units). For each digit and layer it prints how often the greedy token is the right digit and, per head, the share
of attention on the problem digit that digit copies. A digit whose heads put ~0 on the problem is one the policy
gradient cannot teach through that attention: the gradient reaching a softmax weight is proportional to it. A
diagnostic of a run's state, not a trainer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxmarl_llm.data.collect import collect  # noqa: E402
from jaxmarl_llm.data.teachers import make_script  # noqa: E402
from jaxmarl_llm.models import attention  # noqa: E402
from jaxmarl_llm.policies.lm_policy import model_weights  # noqa: E402
from jaxmarl_llm.run.cli import fail, load_config_file  # noqa: E402
from jaxmarl_llm.run.run_dirs import check_run_dir, restore_adapter  # noqa: E402
from jaxmarl_llm.train import lm_rl  # noqa: E402

CALL_DIGITS = ("a1", "a2", "b1", "b2")  # the call's digits in the order written: operands' tens and units


@contextlib.contextmanager
def recorded_attention():
    """Collect every attention call's softmax weights [B, H, T, S] (float32, heads of a KV group adjacent) with
    its query positions [B, T], in call order, while the block runs eagerly (jax.disable_jit)."""
    calls = []
    forward = attention._gqa_forward

    def spy(qg, k, v, q_positions):
        weights = jax.nn.softmax(attention._masked_scores(qg, k, q_positions), axis=-1)  # [B, Hkv, G, T, S]
        b, hkv, g, t, s = weights.shape
        calls.append((np.asarray(q_positions), np.asarray(weights).reshape(b, hkv * g, t, s)))
        return forward(qg, k, v, q_positions)

    attention._gqa_forward = spy
    try:
        with jax.disable_jit():
            yield calls
    finally:
        attention._gqa_forward = forward


def per_layer(calls) -> list[np.ndarray]:
    """Calls (a layer may run as several query blocks) -> one [B, H, L, S] array per layer: a layer starts where
    the query positions start again from 0."""
    layers, blocks = [], []
    for positions, weights in calls:
        if blocks and int(positions[0, 0]) == 0:
            layers.append(blocks)
            blocks = []
        blocks.append(weights)
    layers.append(blocks)
    width = max(w.shape[-1] for w in layers[0])
    return [np.concatenate([np.pad(w, ((0, 0), (0, 0), (0, 0), (0, width - w.shape[-1]))) for w in blocks], axis=2)
            for blocks in layers]


def digit_places(words: list[str]) -> tuple[list[int], list[int]] | None:
    """(the problem's four operand digits, the first call's four digits) as token indices, or None when the
    transcript has no such call. The problem is the line after the prompt, `What is AB * CD?` (or `AB*CD`)."""
    digits = [i for i, w in enumerate(words) if len(w) == 1 and w.isdigit()]
    ask = next((i for i, w in enumerate(words) if w.startswith("?")), None)
    if ask is None:
        return None
    problem = [i for i in digits if i < ask][-4:]
    call = [i for i in digits if i > ask][:4]
    return (problem, call) if len(problem) == 4 and len(call) == 4 else None


def call_attention(trainer, lora, params, episodes: int, seed: int) -> dict:
    """{(digit, layer): (greedy right rate, [H] mean attention on the problem digit it copies, [H] mean attention
    on all four problem digits)} over `episodes` expert transcripts."""
    env = trainer.env
    script = make_script(trainer.config.env_name, env, teacher="expert")
    rows = jax.jit(lambda key: collect(key, env, script, trainer.config.num_turns, jnp.arange(episodes),
                                       env.codec.eos_id))(jax.random.PRNGKey(seed))
    tokens = np.asarray(rows.tokens)  # [N, L]
    with recorded_attention() as calls:
        logits = np.asarray(trainer.policy.logits(params, {"lora": lora}, jnp.asarray(tokens)))  # [N, L, V]
    layers = per_layer(calls)
    found = {}
    for row in range(tokens.shape[0]):
        places = digit_places([env.codec.decode([int(t)]) for t in tokens[row]])
        if places is None:
            continue
        problem, call = places
        for name, copied, written in zip(CALL_DIGITS, problem, call):
            q = written - 1  # the position whose output is this digit
            right = int(np.argmax(logits[row, q])) == int(tokens[row, written])
            for layer, weights in enumerate(layers):
                at = weights[row, :, q]  # [H, S]
                found.setdefault((name, layer), []).append((right, at[:, copied], at[:, problem].sum(-1)))
    return {key: (float(np.mean([r for r, _, _ in v])), np.mean([a for _, a, _ in v], 0),
                  np.mean([s for _, _, s in v], 0)) for key, v in found.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="a calculator run folder (its config.json and checkpoints)")
    ap.add_argument("--config", default="configs/calculator.py", help="the run's config file")
    ap.add_argument("--variant", default="", help="the config's variant (answer, lead; none for the call stage)")
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.episodes < 1:
        fail(f"--episodes={args.episodes}: at least 1")
    check_run_dir("run", args.run)
    config = load_config_file(f"{args.config}:{args.variant}" if args.variant else args.config)
    if config.env_name != "text/calculator":
        fail(f"--config={args.config}: {config.env_name} is not text/calculator")
    config.mesh.num_devices = 1
    with open(os.path.join(args.run, "config.json")) as f:  # what the adapters sit on: the run's base, its env
        saved = json.load(f)
    config.model.update(saved["model"])
    config.env_kwargs.update(saved["env_kwargs"])
    trainer = lm_rl.make_train(config)
    lora, trained_base = restore_adapter(trainer, args.run, 0)
    params = model_weights({} if trained_base is None else {"base": trained_base}, trainer.base)
    found = call_attention(trainer, lora, params, args.episodes, args.seed)
    for (name, layer), (right, own, problem) in sorted(found.items()):
        print(f"{name} layer {layer}: greedy right {right:.2f}; attention per head on the digit it copies "
              f"{_shares(own)}, on the problem's four digits {_shares(problem)}")


def _shares(x: np.ndarray) -> str:
    return " ".join(f"{v:.2f}" for v in x)


if __name__ == "__main__":
    main()
