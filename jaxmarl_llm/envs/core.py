"""The environment protocol and the wrappers every trainer uses.

An environment is a pure state machine over pytrees:

    obs, state = env.reset(key, params)                       # obs: [A, ...]
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)
                                                              # reward/terminated/truncated: [A]

Every per-agent quantity has a leading agent axis of size `env.num_agents`.
Static structure (number of agents, buffer sizes) lives on the env object as
Python values; numbers a sweep may vary live in `params`, a `flax.struct`
dataclass, so `jax.vmap` can map over them. `params=None` means
`env.default_params`.

`env.step` does NOT reset. Wrap with `AutoReset` (which keeps the true final
observation for bootstrapping) and `EpisodeStats` for training.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from jaxmarl_llm.envs import spaces

PyTree = Any


@struct.dataclass
class EnvParams:
    """Numbers an env exposes to sweeps. Subclass per env."""

    max_steps: int = 25


class StepResult(NamedTuple):
    obs: PyTree  # [A, ...]
    state: PyTree
    reward: jax.Array  # [A] float32
    terminated: jax.Array  # [A] bool: the episode ended for a reason inside the game
    truncated: jax.Array  # [A] bool: the episode was cut (time limit); bootstrap from the value
    info: dict


class Env:
    """Base class. Subclasses set `num_agents`, `agents`, spaces and implement reset/step.

    Attributes subclasses define:
      num_agents: int
      agents: tuple[str, ...]            names, for logs and the PettingZoo adapter
      observation_space / action_space   one agent's (padded) space
      obs_sizes / action_sizes           per-agent true sizes, when agents differ
    """

    num_agents: int
    agents: tuple[str, ...]
    observation_space: spaces.Space
    action_space: spaces.Space
    # Structure trainers may exploit (token games set both):
    #   max_movers: at most this many agents are active in any state (None: all may act at once);
    #   appends_actions: observations are transcripts that only grow, and an agent's (cleaned) action is
    #   appended verbatim to its own transcript where its prompt ended, so a policy can keep its KV cache
    #   across turns and score a whole episode from the final transcript.
    max_movers: int | None = None
    appends_actions: bool = False
    # Valid replies, for policies that act only among them (policies/candidates.py, `policy.actions`):
    #   action_candidates: the K replies' token ids (token games; None: any text), fixed when the env is built;
    #   candidate_mask(state) -> bool [A, K]: which of them are valid now (default: all).
    action_candidates: tuple[tuple[int, ...], ...] | None = None

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset(self, key: jax.Array, params: EnvParams | None = None) -> tuple[PyTree, PyTree]:
        raise NotImplementedError

    def step(self, key: jax.Array, state: PyTree, action: PyTree, params: EnvParams | None = None) -> StepResult:
        raise NotImplementedError

    # ---- optional structure a trainer may use -------------------------------------------
    def get_obs(self, state: PyTree, params: EnvParams | None = None) -> PyTree:
        raise NotImplementedError

    def world_state(self, state: PyTree, params: EnvParams | None = None) -> jax.Array:
        """The centralized-critic input for MAPPO, [S]. Default: every agent's observation."""
        obs = self.get_obs(state, params)
        return jnp.concatenate([x.reshape(-1) for x in jax.tree.leaves(obs)]).astype(jnp.float32)

    def active(self, state: PyTree) -> jax.Array:
        """bool[A]: who acts in this state. All agents act unless the env is turn-based."""
        return getattr(state, "active", jnp.ones((self.num_agents,), bool))

    def candidate_mask(self, state: PyTree) -> jax.Array:
        """bool[A, K]: the replies of `action_candidates` valid in this state (default: every one)."""
        return jnp.ones((self.num_agents, len(self.action_candidates or ())), bool)

    @property
    def obs_sizes(self) -> tuple[int, ...]:
        return (int(self.observation_space.shape[0]) if self.observation_space.shape else 1,) * self.num_agents

    @property
    def action_sizes(self) -> tuple[int, ...]:
        space = self.action_space
        size = space.n if isinstance(space, spaces.Discrete) else int(space.shape[0])
        return (size,) * self.num_agents

    @property
    def obs_mask(self) -> jax.Array:
        """bool[A, O]: which observation entries are real (rest is padding)."""
        return spaces.stack_masks(self.obs_sizes, self.observation_space.shape[0])

    @property
    def action_mask(self) -> jax.Array:
        """bool[A, n]: which discrete actions (or continuous dims) each agent really has."""
        padded = max(self.action_sizes)
        return spaces.stack_masks(self.action_sizes, padded)

    def _params(self, params: EnvParams | None) -> EnvParams:
        return self.default_params if params is None else params


def _select(pred: jax.Array, on_true: PyTree, on_false: PyTree) -> PyTree:
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


class Wrapper(Env):
    """Forwards everything it does not override to the wrapped env."""

    def __init__(self, env: Env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    @property
    def unwrapped(self) -> Env:
        env = self._env
        while isinstance(env, Wrapper):
            env = env._env
        return env

    # Properties defined on Env would shadow __getattr__; forward them explicitly.
    name = property(lambda self: self._env.name)
    default_params = property(lambda self: self._env.default_params)
    obs_sizes = property(lambda self: self._env.obs_sizes)
    action_sizes = property(lambda self: self._env.action_sizes)
    max_movers = property(lambda self: self._env.max_movers)
    appends_actions = property(lambda self: self._env.appends_actions)
    obs_mask = property(lambda self: self._env.obs_mask)
    action_mask = property(lambda self: self._env.action_mask)

    def reset(self, key, params=None):
        return self._env.reset(key, params)

    def step(self, key, state, action, params=None):
        return self._env.step(key, state, action, params)

    def get_obs(self, state, params=None):
        return self._env.get_obs(state, params)

    def world_state(self, state, params=None):
        return self._env.world_state(state, params)

    def active(self, state):
        return self._env.active(state)


class AutoReset(Wrapper):
    """Starts a new episode when every agent is done.

    The returned obs/state belong to the new episode; the true last observation
    of the finished one is kept in `info["final_obs"]` (and the centralized
    critic input in `info["final_world_state"]`) so a truncated episode can be
    bootstrapped from V(s_T).
    """

    appends_actions = False  # a reset replaces the transcripts

    def step(self, key, state, action, params=None):
        key_step, key_reset = jax.random.split(key)
        obs, next_state, reward, terminated, truncated, info = self._env.step(key_step, state, action, params)
        done = jnp.all(terminated | truncated)
        reset_obs, reset_state = self._env.reset(key_reset, params)
        info = dict(info)
        info["final_obs"] = obs
        info["final_world_state"] = self._env.world_state(next_state, params)
        info["episode_done"] = done
        obs = _select(done, reset_obs, obs)
        next_state = _select(done, reset_state, next_state)
        return StepResult(obs, next_state, reward, terminated, truncated, info)


@struct.dataclass
class StatsState:
    env_state: PyTree
    episode_returns: jax.Array  # [A]
    episode_length: jax.Array  # []
    returned_episode_returns: jax.Array  # [A]
    returned_episode_length: jax.Array  # []


class EpisodeStats(Wrapper):
    """Tracks per-agent and team returns and episode length; reports them in `info`.

    Must wrap an `AutoReset` env (it reads `info["episode_done"]`). `info` gets:
      returned_episode: bool, True on the step that ended an episode
      returned_episode_returns: [A] returns of the last finished episode
      returned_episode_team_return: sum over agents of those returns
      returned_episode_length: its length in steps
    """

    def reset(self, key, params=None):
        obs, env_state = self._env.reset(key, params)
        a = self.num_agents
        state = StatsState(env_state, jnp.zeros((a,)), jnp.zeros((), jnp.int32), jnp.zeros((a,)), jnp.zeros((), jnp.int32))
        return obs, state

    def step(self, key, state, action, params=None):
        obs, env_state, reward, terminated, truncated, info = self._env.step(key, state.env_state, action, params)
        done = info["episode_done"] if "episode_done" in info else jnp.all(terminated | truncated)
        returns = state.episode_returns + reward
        length = state.episode_length + 1
        new = StatsState(
            env_state=env_state,
            episode_returns=jnp.where(done, 0.0, returns),
            episode_length=jnp.where(done, 0, length),
            returned_episode_returns=jnp.where(done, returns, state.returned_episode_returns),
            returned_episode_length=jnp.where(done, length, state.returned_episode_length),
        )
        info = dict(info)
        info["returned_episode"] = done
        info["returned_episode_returns"] = new.returned_episode_returns
        info["returned_episode_team_return"] = new.returned_episode_returns.sum()
        info["returned_episode_length"] = new.returned_episode_length
        return StepResult(obs, new, reward, terminated, truncated, info)

    def get_obs(self, state, params=None):
        return self._env.get_obs(state.env_state, params)

    def world_state(self, state, params=None):
        return self._env.world_state(state.env_state, params)

    def active(self, state):
        return self._env.active(state.env_state)


def wrap_for_training(env: Env) -> Env:
    """The standard stack: auto-reset inside, episode statistics outside."""
    return EpisodeStats(AutoReset(env))
