"""simple_tag (mpe2 `simple_tag_v3`): slow adversaries chase fast good agents among obstacles.

Agents are ordered adversaries first, as in mpe2. Observation of agent i:
    [vel_i, pos_i, obstacle_j - pos_i (all j), pos_k - pos_i (k != i), vel_g (good g != i)]
so a good agent sees one velocity fewer than an adversary; its row is zero-padded
at the end and `obs_sizes` says so.
Rewards: a good agent gets -10 per adversary touching it and a penalty for leaving
the [-0.9, 0.9] box; every adversary gets +10 per (good, adversary) contact.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.mpe import physics
from jaxmarl_llm.envs.mpe.base import MPEEnv, MPEParams, MPEState

ADVERSARY_SIZE, GOOD_SIZE, OBSTACLE_SIZE = 0.075, 0.05, 0.2


def bound_penalty(x: jax.Array) -> jax.Array:
    """mpe2's out-of-area penalty for |coordinate| x, elementwise."""
    return jnp.where(x < 0.9, 0.0, jnp.where(x < 1.0, (x - 0.9) * 10.0, jnp.minimum(jnp.exp(2.0 * x - 2.0), 10.0)))


class SimpleTag(MPEEnv):
    def __init__(self, num_good: int = 1, num_adversaries: int = 3, num_obstacles: int = 2, max_cycles: int = 25, continuous_actions: bool = False):
        for key, value, least in (("num_good", num_good, 1), ("num_adversaries", num_adversaries, 0),
                                  ("num_obstacles", num_obstacles, 0)):
            if value < least:
                raise ValueError(f"{key} must be at least {least}, got {value}")
        self.num_good, self.num_adversaries, self.num_obstacles = num_good, num_adversaries, num_obstacles
        adv = np.arange(num_good + num_adversaries) < num_adversaries
        spec = physics.make_spec(
            num_adversaries + num_good,
            num_obstacles,
            dim_c=2,
            agent_size=np.where(adv, ADVERSARY_SIZE, GOOD_SIZE),
            landmark_size=OBSTACLE_SIZE,
            agent_max_speed=np.where(adv, 1.0, 1.3),
            accel=np.where(adv, 3.0, 4.0),
            silent=True,
        )
        n = spec.num_agents
        base = 4 + 2 * num_obstacles + 2 * (n - 1)
        obs_sizes = (base + 2 * num_good,) * num_adversaries + (base + 2 * (num_good - 1),) * num_good
        names = tuple(f"adversary_{i}" for i in range(num_adversaries)) + tuple(f"agent_{i}" for i in range(num_good))
        super().__init__(spec, names, obs_sizes, max_cycles, continuous_actions)

    def _reset_world(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        key_a, key_l = jax.random.split(key)
        p_pos = jnp.concatenate([self._uniform_positions(key_a, self.num_agents, 1.0), self._uniform_positions(key_l, self.num_obstacles, 0.9)])
        return p_pos, jnp.full((self.num_agents,), -1, jnp.int32)

    def _observations(self, state: MPEState, params: MPEParams) -> jax.Array:
        n, n_adv, n_good = self.num_agents, self.num_adversaries, self.num_good
        pos, vel = state.p_pos[:n], state.p_vel[:n]  # [A, 2]
        obstacle_rel = state.p_pos[None, n:] - pos[:, None]  # [A, L, 2]
        other_rel = physics.off_diagonal(pos[None, :] - pos[:, None])  # [A, A-1, 2]
        good_vel = vel[n_adv:]  # [G, 2]
        vel_seen_by_adv = jnp.broadcast_to(good_vel.reshape(1, -1), (n_adv, 2 * n_good))  # [Adv, 2G]
        vel_seen_by_good = physics.off_diagonal(jnp.broadcast_to(good_vel[None], (n_good, n_good, 2))).reshape(n_good, -1)
        vel_seen_by_good = jnp.pad(vel_seen_by_good, ((0, 0), (0, 2)))  # [G, 2G], last slot is padding
        seen_vel = jnp.concatenate([vel_seen_by_adv, vel_seen_by_good])  # [A, 2G]
        return jnp.concatenate([vel, pos, obstacle_rel.reshape(n, -1), other_rel.reshape(n, -1), seen_vel], axis=1)

    def _rewards(self, state: MPEState, params: MPEParams) -> jax.Array:
        n_adv = self.num_adversaries
        pos = state.p_pos[: self.num_agents]
        good, adv = pos[n_adv:], pos[:n_adv]  # [G, 2], [Adv, 2]
        hit = physics.pairwise_dist(good, adv) < GOOD_SIZE + ADVERSARY_SIZE  # [G, Adv]
        hit = hit.astype(jnp.float32)
        good_rew = -10.0 * hit.sum(axis=1) - bound_penalty(jnp.abs(good)).sum(axis=1)  # [G]
        adv_rew = jnp.full((n_adv,), 10.0 * hit.sum())  # [Adv]
        return jnp.concatenate([adv_rew, good_rew])
