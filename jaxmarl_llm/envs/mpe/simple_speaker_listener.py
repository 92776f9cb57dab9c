"""simple_speaker_listener (mpe2 `simple_speaker_listener_v4`): an immobile speaker sees the
goal colour and talks; a silent listener hears it and must reach the goal landmark.

Agents: speaker_0 (obs 3: goal colour; actions: 3 words), listener_0 (obs 11:
[vel, landmark_j - pos (3 landmarks), speaker's word]; actions: 5 moves).
Rows and actions are padded to the listener's sizes; `obs_sizes` / `action_sizes` hold
the true ones. Both agents get -|listener - goal landmark|^2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.mpe import physics
from jaxmarl_llm.envs.mpe.base import MPEEnv, MPEParams, MPEState

LANDMARK_COLORS = np.array([[0.65, 0.15, 0.15], [0.15, 0.65, 0.15], [0.15, 0.15, 0.65]], np.float32)


class SimpleSpeakerListener(MPEEnv):
    def __init__(self, max_cycles: int = 25, continuous_actions: bool = False):
        spec = physics.make_spec(
            2, 3, dim_c=3, agent_size=0.075, landmark_size=0.04, agent_movable=[False, True],
            agent_collide=False, landmark_collide=False, silent=[False, True],
        )
        super().__init__(spec, ("speaker_0", "listener_0"), (3, 11), max_cycles, continuous_actions)

    def _reset_world(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        key_g, key_p = jax.random.split(key)
        goal = jnp.stack([jax.random.randint(key_g, (), 0, 3), jnp.array(-1)])  # only the speaker has a goal
        return self._uniform_positions(key_p, self.spec.num_entities, 1.0), goal

    def _goal_onehot(self, state: MPEState) -> jax.Array:
        return jax.nn.one_hot(state.goal[0], 3, dtype=jnp.float32)  # [3]

    def _observations(self, state: MPEState, params: MPEParams) -> jax.Array:
        speaker = jnp.sum(self._goal_onehot(state)[:, None] * LANDMARK_COLORS, axis=0)  # [3]
        landmark_rel = (state.p_pos[2:] - state.p_pos[1]).reshape(-1)  # [6]
        listener = jnp.concatenate([state.p_vel[1], landmark_rel, state.c[0]])  # [11]
        return jnp.stack([jnp.pad(speaker, (0, 8)), listener])

    def _rewards(self, state: MPEState, params: MPEParams) -> jax.Array:
        goal_pos = jnp.sum(self._goal_onehot(state)[:, None] * state.p_pos[2:], axis=0)  # [2]
        dist2 = jnp.sum(jnp.square(state.p_pos[1] - goal_pos))
        return jnp.full((2,), -dist2)

    def _goal_features(self, state: MPEState) -> list[jax.Array]:
        return [self._goal_onehot(state)]
