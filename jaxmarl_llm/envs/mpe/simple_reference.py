"""simple_reference (mpe2 `simple_reference_v3`): two agents each know the OTHER's goal
landmark and must tell it, while moving to their own.

Observation of agent i (21): [vel_i, landmark_j - pos_i (3 landmarks), colour of goal_i, c_other].
Goal i is the landmark agent 1-i should reach. Discrete action (50) = say * 5 + move;
continuous (15) = 5 movement entries then 10 comm entries.
Reward: (1 - local_ratio) * mean_i(-d_i) + local_ratio * (-d_i), d_i = |pos_(1-i) - landmark_(goal_i)|.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.mpe import physics
from jaxmarl_llm.envs.mpe.base import MPEEnv, MPELocalRatioParams, MPEState

LANDMARK_COLORS = np.array([[0.75, 0.25, 0.25], [0.25, 0.75, 0.25], [0.25, 0.25, 0.75]], np.float32)


class SimpleReference(MPEEnv):
    def __init__(self, local_ratio: float = 0.5, max_cycles: int = 25, continuous_actions: bool = False):
        if not 0.0 <= local_ratio <= 1.0:
            raise ValueError(f"local_ratio must be in [0, 1], got {local_ratio}")
        spec = physics.make_spec(2, 3, dim_c=10, agent_collide=False, landmark_collide=False)
        self.local_ratio = float(local_ratio)
        super().__init__(spec, ("agent_0", "agent_1"), (21, 21), max_cycles, continuous_actions)

    @property
    def default_params(self) -> MPELocalRatioParams:
        return MPELocalRatioParams(max_steps=self.max_cycles, local_ratio=self.local_ratio)

    def _reset_world(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        key_g, key_p = jax.random.split(key)
        goal = jax.random.randint(key_g, (2,), 0, 3)
        return self._uniform_positions(key_p, self.spec.num_entities, 1.0), goal

    def _goal_onehot(self, state: MPEState) -> jax.Array:
        return jax.nn.one_hot(state.goal, 3, dtype=jnp.float32)  # [2, 3]

    def _observations(self, state: MPEState, params: MPELocalRatioParams) -> jax.Array:
        pos = state.p_pos[:2]
        landmark_rel = (state.p_pos[None, 2:] - pos[:, None]).reshape(2, -1)  # [2, 6]
        goal_color = jnp.sum(self._goal_onehot(state)[:, :, None] * LANDMARK_COLORS[None], axis=1)  # [2, 3]
        other_comm = state.c[::-1]  # [2, 10]: the other agent's utterance
        return jnp.concatenate([state.p_vel[:2], landmark_rel, goal_color, other_comm], axis=1)

    def _rewards(self, state: MPEState, params: MPELocalRatioParams) -> jax.Array:
        goal_pos = jnp.sum(self._goal_onehot(state)[:, :, None] * state.p_pos[None, 2:], axis=1)  # [2, 2]
        local = -jnp.sqrt(jnp.sum(jnp.square(state.p_pos[:2][::-1] - goal_pos), axis=1))  # [2]
        return jnp.mean(local) * (1.0 - params.local_ratio) + local * params.local_ratio

    def _goal_features(self, state: MPEState) -> list[jax.Array]:
        return [self._goal_onehot(state).reshape(-1)]
