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
    gamma: float | jax.Array,  # a scalar, or [T, ...]: the discount from each step to the next
    lam: float | jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Returns (advantages, returns = advantages + values), both [T, ...]."""
    not_term = 1.0 - terminated.astype(values.dtype)
    not_end = 1.0 - episode_end.astype(values.dtype)
    deltas = rewards + gamma * next_values * not_term - values  # [T, ...]
    gammas = jnp.broadcast_to(jnp.asarray(gamma, deltas.dtype), deltas.shape)

    def backward(carry, x):
        delta, cont, g = x
        adv = delta + g * lam * cont * carry
        return adv, adv

    _, adv = jax.lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, not_end, gammas), reverse=True)
    return adv, adv + values


def own_turn_gae(
    rewards: jax.Array,  # [T, ...] reward after each turn (0 once the episode is over)
    values: jax.Array,  # [T, ...] V at the turns where the agent acted (ignored elsewhere)
    acted: jax.Array,  # [T, ...] bool: the agent chose an action at this turn
    gamma: float | jax.Array,
    lam: float | jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """GAE over an agent's own turns of one episode (a turn-based game seen as that agent's MDP).

    The rewards that arrive while others move are credited to the agent's last own turn before
    them; the next state is the agent's next own turn (discounted once per own turn); after its
    last turn the future is worth 0 (the rollout runs every episode to its end). Returns
    (advantages, returns), both [T, ...] and 0 where the agent did not act.
    """
    acted_f = acted.astype(values.dtype)

    def backward(carry, x):
        next_value, next_adv, pending = carry
        r, v, a = x
        pending = pending + r
        delta = pending + gamma * next_value - v
        adv = delta + gamma * lam * next_adv
        keep = lambda new, old: a * new + (1.0 - a) * old  # noqa: E731
        carry = (keep(v, next_value), keep(adv, next_adv), keep(jnp.zeros_like(pending), pending))
        return carry, adv * a

    zeros = jnp.zeros_like(values[0])
    _, adv = jax.lax.scan(backward, (zeros, zeros, zeros), (rewards, values, acted_f), reverse=True)
    return adv, (adv + values) * acted_f
