"""A running normaliser of the value targets (MAPPO's ValueNorm, Yu et al. 2022).

The critic learns returns in standard units: its targets are the returns normalised by running statistics,
and its outputs are mapped back before GAE reads them. Returns of -20..-30 at the start of a run (or growing
as the policy improves) then need no large first steps of the critic, and the value loss keeps one scale.

    vn = init()
    value = denormalize(vn, critic_out)                  # before GAE
    vn = update(vn, returns, mask, axis_name)            # after GAE: the statistics include this batch
    target = normalize(vn, returns)                      # what the value loss regresses on

The statistics are exponential moving averages with a debiasing term (as Adam's): with MAPPO's decay
0.99999 they are, for the length of a run, the mean and variance over every batch seen so far.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

DECAY = 0.99999  # MAPPO's beta
MIN_VAR = 1e-2  # MAPPO's floor on the variance (a std of at least 0.1)


class ValueNorm(NamedTuple):
    mean: jax.Array  # [] running mean of the targets (undebiased)
    mean_sq: jax.Array  # [] running mean of their squares (undebiased)
    debias: jax.Array  # [] 1 - DECAY^n after n updates


def init() -> ValueNorm:
    zero = jnp.zeros((), jnp.float32)
    return ValueNorm(zero, zero, zero)


def stats(vn: ValueNorm) -> tuple[jax.Array, jax.Array]:
    """(mean, std); (0, 1) before the first update, so a fresh critic's outputs are taken as they are."""
    fresh = vn.debias == 0
    d = jnp.where(fresh, 1.0, vn.debias)
    mean = vn.mean / d
    var = jnp.maximum(vn.mean_sq / d - mean ** 2, MIN_VAR)
    return jnp.where(fresh, 0.0, mean), jnp.where(fresh, 1.0, jnp.sqrt(var))


def update(vn: ValueNorm, x: jax.Array, mask: jax.Array, axis_name: str | None = None) -> ValueNorm:
    """Fold the masked entries of x (any shape, mask the same shape) into the statistics, over all devices."""
    m = mask.astype(jnp.float32)
    sums = jnp.stack([(x * m).sum(), (x * x * m).sum(), m.sum()])
    if axis_name is not None:
        sums = jax.lax.psum(sums, axis_name)
    n = jnp.maximum(sums[2], 1.0)
    return ValueNorm(DECAY * vn.mean + (1 - DECAY) * sums[0] / n, DECAY * vn.mean_sq + (1 - DECAY) * sums[1] / n,
                     DECAY * vn.debias + (1 - DECAY))


def normalize(vn: ValueNorm, x: jax.Array) -> jax.Array:
    mean, std = stats(vn)
    return (x - mean) / std


def denormalize(vn: ValueNorm, x: jax.Array) -> jax.Array:
    mean, std = stats(vn)
    return x * std + mean
