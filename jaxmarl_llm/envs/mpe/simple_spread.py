"""simple_spread (mpe2 `simple_spread_v3`): N agents cover N landmarks without colliding.

Observation of agent i (size 4 + 2N + 2(N-1) + 2(N-1)):
    [vel_i, pos_i, landmark_j - pos_i (all j), pos_k - pos_i (k != i), c_k (k != i)]
Reward: (1 - local_ratio) * -sum_landmarks min_agents dist + local_ratio * -(# agents hit).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.envs.mpe import physics
from jaxmarl_llm.envs.mpe.base import MPEEnv, MPELocalRatioParams, MPEState


class SimpleSpread(MPEEnv):
    def __init__(self, num_agents: int = 3, local_ratio: float = 0.5, max_cycles: int = 25, continuous_actions: bool = False):
        if num_agents < 1:
            raise ValueError(f"num_agents must be at least 1, got {num_agents}")
        if not 0.0 <= local_ratio <= 1.0:
            raise ValueError(f"local_ratio must be in [0, 1], got {local_ratio}")
        n = num_agents
        spec = physics.make_spec(n, n, dim_c=2, agent_size=0.15, landmark_size=0.05, landmark_collide=False, silent=True)
        obs_size = 4 + 2 * n + 2 * (n - 1) + 2 * (n - 1)
        self.local_ratio = float(local_ratio)
        super().__init__(spec, tuple(f"agent_{i}" for i in range(n)), (obs_size,) * n, max_cycles, continuous_actions)

    @property
    def default_params(self) -> MPELocalRatioParams:
        return MPELocalRatioParams(max_steps=self.max_cycles, local_ratio=self.local_ratio)

    def _reset_world(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        p_pos = self._uniform_positions(key, self.spec.num_entities, 1.0)  # [2N, 2]
        return p_pos, jnp.full((self.num_agents,), -1, jnp.int32)

    def _observations(self, state: MPEState, params: MPELocalRatioParams) -> jax.Array:
        n = self.num_agents
        pos = state.p_pos[:n]  # [N, 2]
        landmark_rel = state.p_pos[None, n:] - pos[:, None]  # [N, L, 2]
        other_rel = physics.off_diagonal(pos[None, :] - pos[:, None])  # [N, N-1, 2]
        comm = physics.off_diagonal(jnp.broadcast_to(state.c[None], (n,) + state.c.shape))  # [N, N-1, dim_c]
        return jnp.concatenate(
            [state.p_vel[:n], pos, landmark_rel.reshape(n, -1), other_rel.reshape(n, -1), comm.reshape(n, -1)], axis=1
        )

    def _rewards(self, state: MPEState, params: MPELocalRatioParams) -> jax.Array:
        n = self.num_agents
        pos = state.p_pos[:n]
        dist_al = physics.pairwise_dist(pos, state.p_pos[n:])  # [N, L]
        global_rew = -jnp.sum(jnp.min(dist_al, axis=0))
        dist_aa = physics.off_diagonal(physics.pairwise_dist(pos, pos))  # [N, N-1]
        hits = jnp.sum(dist_aa < 2 * 0.15, axis=1).astype(jnp.float32)  # [N]
        return global_rew * (1.0 - params.local_ratio) + (-hits) * params.local_ratio
