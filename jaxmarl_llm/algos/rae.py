"""Role-conditioned advantage estimation (RAE; SPIRAL, Liu et al. 2025) for zero-sum self-play.

One policy plays both roles of a game (X and O); the roles' expected returns differ (the first mover wins
more often), so one shared baseline would credit role, not play. RAE keeps a running mean of the return of
each role and scores an episode against its role's mean:

    b_p <- decay * b_p + (1 - decay) * mean R_p          (the batch's episodes where role p learns)
    A_p  = R_p - b_p

No groups and no critic: every episode counts on its own, so a batch of games with different openings or
opponents is fine. The baselines are the algorithm's state, carried in the runner state across updates.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def init_baselines(num_roles: int) -> jax.Array:
    """[R] float32 zeros: the running mean return of each role before any episode."""
    return jnp.zeros((num_roles,), jnp.float32)


def role_advantages(
    returns: jax.Array,  # [N, R] episode return of each role
    learns: jax.Array,  # [N, R] bool: the role's episode enters the update (the learner's seat)
    baselines: jax.Array,  # [R]
    decay: float | jax.Array,
    axis_name: str | None = None,
) -> tuple[jax.Array, jax.Array]:
    """(advantages [N, R], new baselines [R]). A role with no learning episode in the batch keeps its baseline."""
    returns = jax.lax.stop_gradient(returns)
    w = learns.astype(jnp.float32)
    total, count = (returns * w).sum(0), w.sum(0)  # [R]
    if axis_name is not None:  # every device keeps the same baselines
        total, count = jax.lax.psum((total, count), axis_name)
    batch_mean = total / jnp.maximum(count, 1.0)
    new = jnp.where(count > 0, decay * baselines + (1.0 - decay) * batch_mean, baselines)
    return (returns - new[None, :]) * w, new
