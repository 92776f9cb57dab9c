"""Does quantizing MPE observations to the LM's 16 levels limit what PPO learns? The MLP job, both ways.

    python bench/spread_mlp_quantized.py            # [--steps=144000]

Runs configs/spread_mlp.py's IPPO at configs/spread.py's batch sizes (16 envs x 25 steps, 5 minibatches,
2 epochs) on simple_spread's raw observations and on the same observations quantized as
`text/tokenized_mpe` writes them for the LM (16 levels over [-2, 2], read back as bin centres), in one
process, and prints the team-return curve of each and the ratio of their final returns.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxmarl_llm.envs import registry  # noqa: E402
from jaxmarl_llm.envs.text.tokenized_mpe import quantize  # noqa: E402
from jaxmarl_llm.run.cli import load_config_file  # noqa: E402
from jaxmarl_llm.train import mlp_ppo  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Quantized:
    """An env whose observations are snapped to `bins` levels over [low, high] (0 bins: unchanged)."""

    def __init__(self, env, bins: int, low: float = -2.0, high: float = 2.0):
        self.env, self.bins, self.low, self.high = env, bins, low, high

    def __getattr__(self, name):
        return getattr(self.env, name)

    def _snap(self, obs):
        if not self.bins:
            return obs
        level = quantize(obs, self.bins, self.low, self.high).astype(jnp.float32)
        return self.low + (level + 0.5) * (self.high - self.low) / self.bins

    def reset(self, key, params=None):
        obs, state = self.env.reset(key, params)
        return self._snap(obs), state

    def step(self, key, state, action, params=None):
        out = self.env.step(key, state, action, params)
        return out._replace(obs=self._snap(out.obs))


def curve(bins: int, steps: int) -> np.ndarray:
    c = load_config_file(os.path.join(ROOT, "configs", "spread_mlp.py"))
    c.num_envs, c.num_steps, c.num_minibatches, c.update_epochs, c.mesh.num_devices = 16, 25, 5, 2, 1
    c.total_timesteps = steps
    trainer = mlp_ppo.make_train(c, env=Quantized(registry.make(c.env_name, **c.env_kwargs), bins))
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    run = jax.jit(lambda s, hp: jax.lax.scan(lambda r, _: trainer.update(r, hp), s, None, length=trainer.num_updates))
    return np.asarray(run(state, trainer.hparams)[1]["team_return"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=144_000)
    args = parser.parse_args()
    finals = {}
    for bins in (0, 16):
        t = curve(bins, args.steps)
        block = max(len(t) // 10, 1)
        means = [round(float(t[i:i + block].mean()), 1) for i in range(0, len(t), block)]
        finals[bins] = float(t[-block:].mean())
        print(f"{'raw' if not bins else f'{bins} levels'}: team return per {block * 400} env steps {means}")
    print(f"final team return, quantized / raw: {finals[16]:.1f} / {finals[0]:.1f} = {finals[16] / finals[0]:.3f}")


if __name__ == "__main__":
    main()
