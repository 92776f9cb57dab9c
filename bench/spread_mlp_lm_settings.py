"""Is the LM the slow learner on spread, or are the PPO settings? The MLP job at configs/spread.py's settings.

    python bench/spread_mlp_lm_settings.py                       # every row below, 3 seeds (~10 min, 2 cores)
    python bench/spread_mlp_lm_settings.py --runs=1:480:16 --seeds=1

Runs configs/spread_mlp.py's IPPO on observations quantized to the LM's 16 levels (bench/spread_mlp_quantized.py's
`Quantized`) with 25-step episodes and 5 minibatches, for each `epochs:updates:envs` in --runs, and prints the mean
team return of the last 20 updates per seed and its mean over seeds (docs/results.md: the LM at 1
epoch x 480 updates reaches -64.1, the MLP at the same settings -63.3).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxmarl_llm.envs import registry  # noqa: E402
from jaxmarl_llm.run.cli import load_config_file  # noqa: E402
from jaxmarl_llm.train import mlp_ppo  # noqa: E402
from spread_mlp_quantized import ROOT, Quantized  # noqa: E402

RUNS = "1:480:16,1:320:24,2:480:16,2:360:16,2:300:16,3:240:16,4:180:16"


def last20(epochs: int, updates: int, envs: int, seed: int) -> float:
    c = load_config_file(os.path.join(ROOT, "configs", "spread_mlp.py"))
    c.num_envs, c.num_steps, c.num_minibatches, c.update_epochs, c.mesh.num_devices = envs, 25, 5, epochs, 1
    c.total_timesteps, c.seed = updates * envs * 25, seed
    trainer = mlp_ppo.make_train(c, env=Quantized(registry.make(c.env_name, **c.env_kwargs), 16))
    state = trainer.init(jax.random.PRNGKey(seed), trainer.hparams)
    run = jax.jit(lambda s, hp: jax.lax.scan(lambda r, _: trainer.update(r, hp), s, None, length=trainer.num_updates))
    return float(np.asarray(run(state, trainer.hparams)[1]["team_return"])[-20:].mean())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default=RUNS, help="comma list of epochs:updates:envs")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    for spec in args.runs.split(","):
        epochs, updates, envs = (int(x) for x in spec.split(":"))
        finals = [last20(epochs, updates, envs, seed) for seed in range(args.seeds)]
        print(f"{epochs} epoch(s) x {updates} updates x {envs} envs: last-20 team return per seed "
              f"{' '.join(f'{f:.1f}' for f in finals)}, mean {np.mean(finals):.1f}", flush=True)


if __name__ == "__main__":
    main()
