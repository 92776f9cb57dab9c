"""A sweep's runs taking each branch of the update together (run/sweep.py `runs_chunk`: one decision for all
runs, models/fsdp.py `over_sweep`) against a plain vmap of the same updates (a decision per run: every `lax.cond`
and `lax.switch` of the update computes all its branches and selects), both in one process.

    python bench/sweep_branches.py                                   # Leduc in symbols, 2 runs, 20 updates
    python bench/sweep_branches.py --config=configs/kuhn_poker.py --runs=4

The in-graph evaluation runs where the config says (Leduc: update 1, then every 50) and the loss reads the rows
of running hands (Leduc's rollout.row_buckets=8); a decision per run computes every one of those branches at
every update. Prints seconds per update per side (the best of --repeats chunks) and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from jaxmarl_llm.run import entry  # noqa: E402
from jaxmarl_llm.run.cli import load_config_file  # noqa: E402
from jaxmarl_llm.run.sweep import make_grid, runs_chunk  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/leduc_poker.py:compact")
    parser.add_argument("--num_envs", type=int, default=128)
    parser.add_argument("--runs", type=int, default=2, help="seeds vmapped in one program")
    parser.add_argument("--updates", type=int, default=20, help="updates a timed chunk")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    config = load_config_file(args.config)
    config.mesh.num_devices, config.num_envs = 1, args.num_envs
    config.total_episodes = args.num_envs * args.updates * (args.repeats + 1)
    trainer = entry.build(config)[0]
    _, hparams, keys = make_grid(trainer.hparams, {}, seeds=args.runs, base_seed=0)
    best = {}
    for name, together in (("per run", False), ("together", True)):
        fn = jax.jit(runs_chunk(trainer, args.updates, together))
        state = jax.jit(jax.vmap(trainer.init))(keys, hparams)
        t0 = time.perf_counter()
        state, _ = jax.block_until_ready(fn(state, hparams, trainer.base))
        compile_s = time.perf_counter() - t0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            state, _ = jax.block_until_ready(fn(state, hparams, trainer.base))
            best[name] = min(best.get(name, float("inf")), (time.perf_counter() - t0) / args.updates)
        print(f"{name}: first chunk (compile included) {compile_s:.1f} s, {best[name]:.3f} s an update", flush=True)
    print(f"{args.config}, {args.runs} runs x {args.num_envs} envs, {args.updates} updates a chunk, on "
          f"{jax.devices()[0].platform}: a decision per run {best['per run']:.3f} s an update, the runs together "
          f"{best['together']:.3f} s, ratio {best['per run'] / best['together']:.2f}x")


if __name__ == "__main__":
    main()
