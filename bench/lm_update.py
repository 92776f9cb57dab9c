"""One LM RL update split into rollout / scoring / backward, with its model FLOPs over the device's peak (MFU), at
the tiny model and at a real-size preset.

    python bench/lm_update.py                                   # tic-tac-toe from scratch, tiny then qwen3-0.6b
    python bench/lm_update.py --config=configs/guess_number.py:scratch --shapes=qwen3-0.6b --num_envs=4
    python bench/lm_update.py --shapes=qwen3-0.6b --num_envs=32 --rollout_only    # decode at batch 32
    python bench/lm_update.py --config=configs/leduc_poker.py:compact --shapes=tiny --num_envs=128 \
        --set rollout.row_buckets=1                                 # a config setting changed (repeatable)

Three programs are compiled and timed (median of --repeats calls after one warm call):
  rollout    the rollout alone (trainer.rollout);
  forward    the rollout + one forward of the loss over every learner turn (the path's scorer, no gradient);
  update     the whole update (rollout, advantages, update_epochs x minibatch gradient steps).
scoring = update_epochs x (forward - rollout); backward = update - rollout - scoring (the backward passes, the
advantages and the optimizer). MFU: model FLOPs (train/lm/throughput.py, models/flops.py) over the measured
matmul peak of this machine in the model's dtype (parallel/peak.py; the spec sheet's on a GPU / TPU).
"""

from __future__ import annotations

import argparse
import ast
import functools
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxmarl_llm.parallel.peak import peak_flops  # noqa: E402
from jaxmarl_llm.run import entry  # noqa: E402
from jaxmarl_llm.run.cli import load_config_file  # noqa: E402
from jaxmarl_llm.train.lm import seats as lm_seats  # noqa: E402
from jaxmarl_llm.train.lm.paths import rollout_path  # noqa: E402
from jaxmarl_llm.train.lm.throughput import update_work  # noqa: E402


def timed(fn, *args, repeats: int):
    """(compile seconds, median seconds of `repeats` calls after a warm one, last output)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    out = jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    return compile_s, float(np.median(times)), out


def peak_memory() -> str:
    """The process's peak memory: host RSS on a CPU; on an accelerator also the device's peak allocation (what the
    memory plan has to fit), where the runtime reports it."""
    rss = f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB"
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        rss += f", device peak {stats['peak_bytes_in_use'] / 2**30:.1f} GiB"
    return rss


def measure(config, repeats: int, rollout_only: bool = False) -> dict:
    trainer, _, _, _ = entry.build(config)
    plan, policy, base = trainer.plan, trainer.policy, trainer.base
    path = rollout_path(plan)
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), trainer.hparams)
    env_ids = jnp.arange(plan.num_envs)
    key = jax.random.PRNGKey(1)

    def play(state, base):
        return trainer.rollout(key, base, state.trainable, state.pool, env_ids)

    def play_and_score(state, base):
        turns, seats, final = play(state, base)
        train_turns = lm_seats.loss_seats(plan, turns, seats.learns)
        seqs = path.episode_seqs(plan, final, train_turns, seats.learns)
        return path.score(plan, policy, base, state.trainable, train_turns, seqs)[0].sum()

    c_roll, t_roll, _ = timed(play, state, base, repeats=repeats)
    peak, source = peak_flops(config.model.dtype)
    if rollout_only:
        turns = jax.device_get(jax.jit(play)(state, base)[0])
        metrics = update_work(plan, path.rows, policy.cfg, turns, turns, None)
        return {"params": sum(x.size for x in jax.tree.leaves(base)), "dtype": config.model.dtype,
                "compile_s": c_roll, "rollout_s": t_roll, "tokens_rollout": float(metrics["tokens_rollout"]),
                "mfu_rollout": float(metrics["flops_rollout"]) / t_roll / peak, "peak_tflops": peak / 1e12,
                "peak_source": source, "memory": peak_memory()}
    c_fwd, t_fwd, _ = timed(play_and_score, state, base, repeats=repeats)
    c_upd, t_upd, (_, metrics) = timed(lambda s, b: trainer.update(s, trainer.hparams, b), state, base, repeats=repeats)
    metrics = jax.device_get(metrics)
    scoring = plan.update_epochs * max(t_fwd - t_roll, 0.0)
    # a split finer than the timings' noise (the tiny model on a GPU: launch latencies, rollout timed apart
    # running longer than the whole update) is not a measurement: said as such, not printed as a negative time
    resolved = t_upd - t_roll - scoring > 0.05 * t_upd
    return {
        "params": sum(x.size for x in jax.tree.leaves(base)), "dtype": config.model.dtype + (
            ", layers rematerialised" if policy.cfg.remat else ""),
        "compile_s": c_upd, "update_s": t_upd, "rollout_s": t_roll, "scoring_s": scoring,
        "backward_s": t_upd - t_roll - scoring if resolved else float("nan"),
        "tokens_rollout": float(metrics["tokens_rollout"]), "tokens_loss": float(metrics["tokens_loss"]),
        "mfu_rollout": float(metrics["flops_rollout"]) / t_roll / peak,
        "mfu_loss": float(metrics["flops_loss"]) / (t_upd - t_roll) / peak if resolved else float("nan"),
        "mfu": (float(metrics["flops_rollout"]) + float(metrics["flops_loss"])) / t_upd / peak,
        "peak_tflops": peak / 1e12, "peak_source": source,
        "memory": peak_memory(),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/tic_tac_toe.py:scratch", help="an lm_rl config[:variant]")
    parser.add_argument("--shapes", default="tiny,qwen3-0.6b", help="'tiny' (the config's model) and/or presets")
    parser.add_argument("--dtype", default="bfloat16", help="compute dtype at a preset")
    parser.add_argument("--num_envs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rollout_only", action="store_true", help="time the rollout alone (decode at large batch)")
    parser.add_argument("--remat", default="auto", choices=("auto", "on", "off"),
                        help="model.remat: rematerialise the layers in the loss ('auto': where the update would "
                             "not fit the device without)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override, e.g. --set rollout.row_buckets=8 (repeatable)")
    args = parser.parse_args()
    print(f"{jax.devices()[0].device_kind} ({jax.devices()[0].platform}), {args.config}, {args.num_envs} envs",
          flush=True)
    for shape in args.shapes.split(","):
        config = load_config_file(args.config)
        config.mesh.num_devices, config.num_envs = 1, args.num_envs
        config.group_size = min(config.get("group_size", 1), args.num_envs)
        config.in_graph_eval.update(every=0, average="none")  # the update alone
        config.model.remat = args.remat
        for item in args.set:
            key, _, value = item.partition("=")
            *path, leaf = key.split(".")
            node = functools.reduce(getattr, path, config)
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):  # a bare string
                pass
            setattr(node, leaf, value)
        if shape != "tiny":
            config.model.update(preset=shape, dtype=args.dtype, max_position_embeddings=2048)
        r = measure(config, args.repeats, args.rollout_only)
        if args.rollout_only:
            print(f"{shape:>12}: {r['params'] / 1e6:.1f}M params {r['dtype']}, compile {r['compile_s']:.1f} s, "
                  f"rollout {r['rollout_s']:.3f} s, {r['tokens_rollout']:.0f} tokens "
                  f"({r['tokens_rollout'] / r['rollout_s']:.0f}/s); MFU {r['mfu_rollout']:.1%} of "
                  f"{r['peak_tflops']:.3g} TFLOP/s ({r['peak_source']}); {r['memory']}",
                  flush=True)
            continue
        if np.isnan(r["backward_s"]):
            print(f"{shape:>12}: the rollout timed alone ({r['rollout_s']:.3f} s) is not shorter than the update "
                  f"({r['update_s']:.3f} s): this size is below the timings' resolution, no split", flush=True)
        print(f"{shape:>12}: {r['params'] / 1e6:.1f}M params {r['dtype']}, compile {r['compile_s']:.1f} s, "
              f"update {r['update_s']:.3f} s = rollout {r['rollout_s']:.3f} + scoring {r['scoring_s']:.3f} + "
              f"backward {r['backward_s']:.3f}; tokens {r['tokens_rollout']:.0f} rollout, {r['tokens_loss']:.0f} "
              f"loss; MFU rollout {r['mfu_rollout']:.1%}, loss {r['mfu_loss']:.1%}, update {r['mfu']:.1%} of "
              f"{r['peak_tflops']:.3g} TFLOP/s ({r['peak_source']}); {r['memory']}",
              flush=True)


if __name__ == "__main__":
    main()
