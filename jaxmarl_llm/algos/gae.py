"""Generalized advantage estimation that tells termination from truncation.

At a terminal step the future is worth 0; at a truncated step (time limit) it
is worth V(s_{t+1}) of the true last observation, which `AutoReset` keeps in
`info["final_obs"]`. Either way the advantage recursion stops at the episode
boundary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(
    rewards: jax.Array,  # [T, ...]
    values: jax.Array,  # [T, ...] V(s_t)
    next_values: jax.Array,  # [T, ...] V(s_{t+1}) of the true next state (before any reset)
    terminated: jax.Array,  # [T, ...] bool: no future after this step
    episode_end: jax.Array,  # [T, ...] bool: terminated or truncated; the recursion stops here
    gamma: float | jax.Array,
    lam: float | jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Returns (advantages, returns = advantages + values), both [T, ...]."""
    not_term = 1.0 - terminated.astype(values.dtype)
    not_end = 1.0 - episode_end.astype(values.dtype)
    deltas = rewards + gamma * next_values * not_term - values  # [T, ...]

    def backward(carry, x):
        delta, cont = x
        adv = delta + gamma * lam * cont * carry
        return adv, adv

    _, adv = jax.lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, not_end), reverse=True)
    return adv, adv + values
