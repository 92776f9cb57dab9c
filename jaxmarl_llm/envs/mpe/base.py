"""What every MPE scenario shares: the state, the step loop and the spaces.

A scenario subclasses `MPEEnv` and supplies its `WorldSpec`, how to draw an
initial world (`_reset_world`), its observation rows (`_observations`) and its
rewards (`_rewards`). Stepping is mpe2's `SimpleEnv._execute_world_step`:
decode actions, one world step, then rewards and observations of the new
state; every agent is truncated together after `max_steps` steps and nobody
terminates (mpe2's `is_terminal` is off by default).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxmarl_llm.envs import spaces
from jaxmarl_llm.envs.core import Env, EnvParams, StepResult
from jaxmarl_llm.envs.mpe import physics
from jaxmarl_llm.envs.mpe.physics import WorldSpec


@struct.dataclass
class MPEState:
    p_pos: jax.Array  # [E, 2] agents first, then landmarks
    p_vel: jax.Array  # [E, 2]
    c: jax.Array  # [A, dim_c] last utterance of each agent (zeros when silent)
    goal: jax.Array  # [A] int32: index of the agent's goal landmark, -1 if it has none
    step: jax.Array  # [] int32 world steps taken this episode


@struct.dataclass
class MPEParams(EnvParams):
    """max_steps is mpe2's max_cycles."""

    max_steps: int = 25


@struct.dataclass
class MPELocalRatioParams(MPEParams):
    """For scenarios that mix a shared and a per-agent reward (spread, reference)."""

    local_ratio: float = 0.5




class MPEEnv(Env):
    """Base class of the particle worlds; subclasses set `spec`, agent names and obs sizes."""

    spec: WorldSpec
    continuous_actions: bool
    max_cycles: int

    def __init__(self, spec: WorldSpec, agents: tuple[str, ...], obs_sizes: tuple[int, ...], max_cycles: int, continuous_actions: bool):
        assert len(agents) == spec.num_agents == len(obs_sizes)
        self.spec = spec
        self.agents = tuple(agents)
        self.num_agents = spec.num_agents
        self.max_cycles = int(max_cycles)
        self.continuous_actions = bool(continuous_actions)
        self._obs_sizes = tuple(int(s) for s in obs_sizes)
        self._action_sizes = physics.action_sizes(spec, continuous_actions)
        n_act = max(self._action_sizes)
        self.action_space = spaces.Box(0.0, 1.0, (n_act,)) if continuous_actions else spaces.Discrete(n_act)
        self.observation_space = spaces.Box(-np.inf, np.inf, (max(self._obs_sizes),))

    # ---- structure ------------------------------------------------------------------------
    @property
    def default_params(self) -> MPEParams:
        return MPEParams(max_steps=self.max_cycles)

    @property
    def obs_sizes(self) -> tuple[int, ...]:
        return self._obs_sizes

    @property
    def action_sizes(self) -> tuple[int, ...]:
        return self._action_sizes

    @property
    def obs_dim(self) -> int:
        return int(self.observation_space.shape[0])

    # ---- scenario hooks -------------------------------------------------------------------
    def _reset_world(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Initial positions [E, 2] and goals [A] int32."""
        raise NotImplementedError

    def _observations(self, state: MPEState, params: MPEParams) -> jax.Array:
        """[A, O] padded observations of `state`."""
        raise NotImplementedError

    def _rewards(self, state: MPEState, params: MPEParams) -> jax.Array:
        """[A] rewards after the world step that produced `state`."""
        raise NotImplementedError

    # ---- protocol -------------------------------------------------------------------------
    def reset(self, key: jax.Array, params: MPEParams | None = None) -> tuple[jax.Array, MPEState]:
        params = self._params(params)
        p_pos, goal = self._reset_world(key)
        spec = self.spec
        state = MPEState(
            p_pos=p_pos.astype(jnp.float32),
            p_vel=jnp.zeros((spec.num_entities, physics.DIM_P), jnp.float32),
            c=jnp.zeros((spec.num_agents, spec.dim_c), jnp.float32),
            goal=goal.astype(jnp.int32),
            step=jnp.zeros((), jnp.int32),
        )
        return self.get_obs(state, params), state

    def decode_action(self, action: jax.Array) -> tuple[jax.Array, jax.Array]:
        """[A] ints or [A, D] floats -> force u [A, 2] and utterance c [A, dim_c]."""
        if self.continuous_actions:
            return physics.decode_continuous(self.spec, jnp.asarray(action))
        return physics.decode_discrete(self.spec, jnp.asarray(action))

    def step(self, key: jax.Array, state: MPEState, action: jax.Array, params: MPEParams | None = None) -> StepResult:
        params = self._params(params)
        u, c = self.decode_action(action)
        p_pos, p_vel = physics.world_step(self.spec, state.p_pos, state.p_vel, u)
        state = state.replace(p_pos=p_pos, p_vel=p_vel, c=c, step=state.step + 1)
        reward = self._rewards(state, params).astype(jnp.float32)
        obs = self._observations(state, params)
        truncated = jnp.broadcast_to(state.step >= params.max_steps, (self.num_agents,))
        terminated = jnp.zeros((self.num_agents,), bool)
        return StepResult(obs, state, reward, terminated, truncated, {})

    def get_obs(self, state: MPEState, params: MPEParams | None = None) -> jax.Array:
        return self._observations(state, self._params(params)).astype(jnp.float32)

    def world_state(self, state: MPEState, params: MPEParams | None = None) -> jax.Array:
        """Centralized critic input [S]: every position, movable velocities, spoken comm, goals."""
        spec = self.spec
        parts = [state.p_pos.reshape(-1), state.p_vel[np.flatnonzero(spec.movable)].reshape(-1)]
        speakers = np.flatnonzero(~spec.silent)
        if len(speakers) and spec.dim_c:
            parts.append(state.c[speakers].reshape(-1))
        parts.extend(self._goal_features(state))
        return jnp.concatenate(parts).astype(jnp.float32)

    def _goal_features(self, state: MPEState) -> list[jax.Array]:
        """One-hot goals for scenarios that have them (overridden there)."""
        return []

    # ---- helpers for scenarios --------------------------------------------------------------
    def _uniform_positions(self, key: jax.Array, n: int, bound: float) -> jax.Array:
        return jax.random.uniform(key, (n, physics.DIM_P), jnp.float32, -bound, bound)
