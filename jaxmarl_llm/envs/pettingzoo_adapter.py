"""Drive any of our envs from ordinary PettingZoo code: `ParallelEnv` over one env instance.

Per-agent padding is removed on the way out (each agent sees its true
observation size and action set); `reset(seed=...)` is reproducible. This is
for interop and debugging, not speed: every call is one jitted step on one env.
"""

from __future__ import annotations

try:
    import gymnasium
    from pettingzoo import ParallelEnv
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the PettingZoo adapter needs `pip install pettingzoo` (in the [test] extra)") from err

import jax
import numpy as np

from jaxmarl_llm.envs import spaces
from jaxmarl_llm.envs.core import Env


class PettingZooParallelEnv(ParallelEnv):
    def __init__(self, env: Env, seed: int = 0, params=None):
        self.env = env
        self.params = params
        self.possible_agents = list(env.agents)
        self.agents: list[str] = []
        self.metadata = {"name": env.name, "render_modes": [], "is_parallelizable": True}
        self._key = jax.random.PRNGKey(seed)
        self._reset = jax.jit(env.reset)
        self._step = jax.jit(env.step)
        self._state = None
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._obs_spaces = {a: self._make_obs_space(i) for a, i in self._index.items()}
        self._act_spaces = {a: self._make_action_space(i) for a, i in self._index.items()}

    def _make_obs_space(self, i: int):
        space = self.env.observation_space
        if isinstance(space, spaces.Box):
            return gymnasium.spaces.Box(-np.inf, np.inf, (self.env.obs_sizes[i],), np.float32)
        return gymnasium.spaces.Box(0, space.vocab_size - 1, space.shape, np.int32)

    def _make_action_space(self, i: int):
        space = self.env.action_space
        if isinstance(space, spaces.Discrete):
            return gymnasium.spaces.Discrete(self.env.action_sizes[i])
        return gymnasium.spaces.Box(space.low, space.high, (self.env.action_sizes[i],), np.float32)

    def observation_space(self, agent):
        return self._obs_spaces[agent]

    def action_space(self, agent):
        return self._act_spaces[agent]

    def _split_obs(self, obs) -> dict:
        out = {}
        for agent, i in self._index.items():
            row = jax.tree.map(lambda x: np.asarray(x[i]), obs)
            if isinstance(self.env.observation_space, spaces.Box):
                row = row[: self.env.obs_sizes[i]].astype(np.float32)
            out[agent] = row
        return out

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._key = jax.random.PRNGKey(seed)
        self._key, key = jax.random.split(self._key)
        obs, self._state = self._reset(key, self.params)
        self.agents = list(self.possible_agents)
        return self._split_obs(obs), {a: {} for a in self.agents}

    def step(self, actions: dict):
        space = self.env.action_space
        if isinstance(space, spaces.Discrete):
            batch = np.zeros((self.env.num_agents,), np.int32)
        else:
            batch = np.zeros((self.env.num_agents, space.shape[0]), np.float32)
        for agent, action in actions.items():
            i = self._index[agent]
            if isinstance(space, spaces.Discrete):
                batch[i] = int(action)
            else:
                batch[i, : self.env.action_sizes[i]] = np.asarray(action, np.float32)
        self._key, key = jax.random.split(self._key)
        obs, self._state, reward, terminated, truncated, _ = self._step(key, self._state, batch, self.params)
        obs = self._split_obs(obs)
        live = list(self.agents)
        rewards = {a: float(reward[self._index[a]]) for a in live}
        terms = {a: bool(terminated[self._index[a]]) for a in live}
        truncs = {a: bool(truncated[self._index[a]]) for a in live}
        self.agents = [a for a in live if not (terms[a] or truncs[a])]
        return {a: obs[a] for a in live}, rewards, terms, truncs, {a: {} for a in live}

    def render(self):
        return None

    def close(self):
        pass
