"""Any env with Box observations and Discrete actions (e.g. an MPE world) as a token game.

Each agent's observation vector is clipped to [low, high], quantized into
`bins` levels and written as numbers ("0".."bins-1") after a fixed prompt;
actions are words ("stay left right down up" for MPE's 5 moves, or `action_names`)
read inside `jit`. An unreadable action plays action 0 (no-op in MPE) and
costs `format_penalty`. No history: each observation is the current step only,
so an LM policy reads a fixed-size prompt every step. Reward, termination and
truncation are the wrapped env's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxmarl_llm.envs import spaces
from jaxmarl_llm.envs.core import Env, StepResult
from jaxmarl_llm.envs.text import buffers, parsing
from jaxmarl_llm.envs.text.buffers import TextAction, TextObs
from jaxmarl_llm.envs.text.codec import Codec
from jaxmarl_llm.tokenizers import CharTokenizer

MPE_ACTIONS = ("stay", "left", "right", "down", "up")
PROMPT = "Observation ({n} numbers, 0 to {top}):\n"
OUTRO = "\nAction ({names}): "


@struct.dataclass
class TokenizedState:
    inner: object
    inner_obs: jax.Array  # [A, O] float: the wrapped env's last observation
    format_penalty: jax.Array  # [] float (kept in the state so params stay the inner env's)


def quantize(obs: jax.Array, bins: int, low: float, high: float) -> jax.Array:
    """float [..., O] -> int bin in 0..bins-1 [..., O]."""
    x = (jnp.clip(obs, low, high) - low) / (high - low)
    return jnp.minimum((x * bins).astype(jnp.int32), bins - 1)


class TokenizedMPE(Env):
    def __init__(
        self,
        env: Env | str = "mpe/simple_spread",
        tokenizer=None,
        bins: int = 16,
        low: float = -2.0,
        high: float = 2.0,
        action_names: tuple[str, ...] | None = None,
        max_action_tokens: int = 8,
        format_penalty: float = -0.1,
        **env_kwargs,
    ):
        if isinstance(env, str):
            from jaxmarl_llm.envs.registry import make

            env = make(env, **env_kwargs)
        if not isinstance(env.action_space, spaces.Discrete) or not isinstance(env.observation_space, spaces.Box):
            raise TypeError("TokenizedMPE needs an env with Box observations and Discrete actions")
        self.inner = env
        self.tokenizer = tokenizer if tokenizer is not None else CharTokenizer()
        self.codec = Codec(self.tokenizer)
        self.num_agents, self.agents = env.num_agents, tuple(env.agents)
        self.bins, self.low, self.high = int(bins), float(low), float(high)
        self.format_penalty = float(format_penalty)
        n_act = env.action_space.n
        self.action_names = tuple(action_names) if action_names is not None else (MPE_ACTIONS if n_act == 5 else tuple(f"a{i}" for i in range(n_act)))
        if len(self.action_names) != n_act:
            raise ValueError(f"{len(self.action_names)} action names for {n_act} actions")
        obs_dim = int(env.observation_space.shape[0])
        self.values = self.codec.table([f"{i} " for i in range(self.bins)])
        self.action_set = parsing.StringSet(self.action_names)
        self.max_action_tokens = int(max_action_tokens)
        self.actions = self.codec.table(list(self.action_names), width=self.max_action_tokens)
        self.prompt = jnp.asarray(self.codec.encode(PROMPT.format(n=obs_dim, top=self.bins - 1)), jnp.int32)
        self.outro = self.codec.piece(OUTRO.format(names=", ".join(self.action_names)))
        self.capacity = int(self.prompt.shape[0] + obs_dim * self.values.width + self.outro.width)
        self.observation_space = spaces.Tokens(self.capacity, self.codec.vocab_size)
        self.action_space = spaces.Tokens(self.max_action_tokens, self.codec.vocab_size)

    @property
    def name(self) -> str:
        return f"Tokenized{self.inner.name}"

    @property
    def default_params(self):
        return self.inner.default_params

    def tokens_of(self, inner_obs: jax.Array) -> TextObs:
        """[A, O] floats -> TextObs [A, capacity]."""
        levels = quantize(inner_obs, self.bins, self.low, self.high)  # [A, O]

        def one(lv):
            ids, n = buffers.concat_pieces(self.values.ids[lv], self.values.lens[lv], self.codec.pad_id)
            p = self.prompt.shape[0]
            buf = jnp.full((self.capacity + self.outro.width,), self.codec.pad_id, jnp.int32)
            buf = buf.at[:p].set(self.prompt).at[p : p + ids.shape[0]].set(ids)
            buf = jax.lax.dynamic_update_slice(buf, self.outro.ids[0], (p + n,))
            return buf[: self.capacity], p + n + self.outro.lens[0]

        tokens, length = jax.vmap(one)(levels)
        return TextObs(tokens, length)

    def get_obs(self, state, params=None) -> TextObs:
        return self.tokens_of(state.inner_obs)

    def parse_actions(self, action: TextAction) -> tuple[jax.Array, jax.Array]:
        """Action ids [A] (0 where unreadable) and the format-error mask [A]."""
        tokens, length = buffers.clean_action(action.tokens, action.length, self.codec.pad_id, self.codec.eos_id)

        def one(t, n):
            chars, k = parsing.decode_chars(self.codec.token_chars, self.codec.token_nchars, t, n)
            chars, k = parsing.compact_alnum(chars, k)
            return self.action_set.match(chars, k)

        idx = jax.vmap(one)(tokens, length)
        return jnp.maximum(idx, 0), idx < 0

    def reset(self, key, params=None):
        obs, inner = self.inner.reset(key, params)
        state = TokenizedState(inner, obs, jnp.float32(self.format_penalty))
        return self.get_obs(state), state

    def step(self, key, state, action: TextAction, params=None) -> StepResult:
        acts, bad = self.parse_actions(action)
        obs, inner, reward, terminated, truncated, info = self.inner.step(key, state.inner, acts, params)
        state = state.replace(inner=inner, inner_obs=obs)
        info = dict(info)
        info["format_error"] = bad
        reward = reward + jnp.where(bad, state.format_penalty, 0.0)
        return StepResult(self.get_obs(state), state, reward, terminated, truncated, info)

    def world_state(self, state, params=None):
        return self.inner.world_state(state.inner, params)

    def active(self, state):
        return self.inner.active(state.inner)

    def action_tokens(self, actions: jax.Array) -> TextAction:
        """Discrete actions [A] -> their words as a TextAction."""
        return TextAction(self.actions.ids[actions], self.actions.lens[actions])

    def random_action(self, key, state) -> TextAction:
        return self.action_tokens(jax.random.randint(key, (self.num_agents,), 0, len(self.action_names)))

    def render(self, state, index: int | None = None) -> list[str]:
        from jaxmarl_llm.envs.text.render import transcripts

        obs = self.get_obs(state) if index is None else jax.tree.map(lambda x: x[index], self.get_obs(state))
        return transcripts(self.tokenizer, obs)
