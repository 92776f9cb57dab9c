"""Seconds per update of an LM config at its own sizes: compile + first update, then each later update.

    python bench/lm_config_step.py --config=configs/debate.py --updates=3
    python bench/lm_config_step.py --config=configs/twenty_questions.py:lm --updates=2

Builds the config as experiments/train.py does (`entry.build`: validate + make_train) on one device and
times `mesh.sharded_chunk` calls of one update each; prints the metrics of every update.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxmarl_llm.parallel import mesh as mesh_lib  # noqa: E402
from jaxmarl_llm.run import entry  # noqa: E402
from jaxmarl_llm.run.cli import load_config_file  # noqa: E402
from jaxmarl_llm.train.lm.episode_sample import take_episodes  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="configs/NAME.py[:VARIANT] (an lm_rl config)")
    parser.add_argument("--updates", type=int, default=3)
    args = parser.parse_args()
    config = load_config_file(args.config)
    config.mesh.num_devices = 1
    trainer, chunk_fn, _, _ = entry.build(config)
    mesh = mesh_lib.make_mesh(1)
    state = mesh_lib.put(jax.jit(trainer.init)(jax.random.PRNGKey(0), trainer.hparams), mesh, trainer.state_specs)
    step = chunk_fn(trainer, mesh, 1)
    times = []
    for i in range(args.updates):
        t0 = time.perf_counter()
        state, metrics = step(state, trainer.hparams)
        metrics = jax.device_get(metrics)
        take_episodes(metrics)  # the sampled episodes (transcripts) are not metrics
        times.append(time.perf_counter() - t0)
        label = "compile + update" if i == 0 else "update"
        print(f"{label} {i + 1}: {times[-1]:.3f} s",
              {k: round(float(np.asarray(v)[-1]), 4) for k, v in metrics.items()}, flush=True)
    if len(times) > 1:
        print(f"median update (2-{len(times)}): {np.median(times[1:]):.4f} s", flush=True)


if __name__ == "__main__":
    main()
