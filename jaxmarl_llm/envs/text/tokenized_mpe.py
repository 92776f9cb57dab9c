"""Any env with Box observations and Discrete actions (e.g. an MPE world) as a token game.

Each agent's observation vector is clipped to [low, high], quantized into
`bins` levels and written as numbers ("0".."bins-1") after a fixed prompt;
actions are words ("stay left right down up" for MPE's 5 moves, or `action_names`)
read inside `jit`. An unreadable action plays action 0 (no-op in MPE) and
costs `format_penalty`. No history: each observation is the current step only,
so an LM policy reads a fixed-size prompt every step. Reward, termination and
truncation are the wrapped env's.

For a from-scratch model (configs/spread.py): `prompt`, `outro` and `separator` shorten the text,
`field_names` writes each number with its field's name ("a8b8c11": with the word tokenizer one token
per number), `show_step` adds the step count ("t7"). `action_candidates` lists the moves' words, so
a policy with `policy.actions="constrained"` or "scored" always plays one (policies/candidates.py).
`max_action_tokens=0` sizes the reply to the longest move (one token with the word tokenizer): every forward
of the rollout and the loss reads that many action positions, so padding them costs time and changes nothing.
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


def _letters(i: int) -> str:
    """0 -> a, 25 -> z, 26 -> ba, ...: short field names."""
    out = chr(97 + i % 26)
    while i >= 26:
        i //= 26
        out = chr(97 + i % 26) + out
    return out


def _move_width(codec: Codec, names: tuple[str, ...]) -> int:
    """Tokens of the longest move, one more when a move's tokens begin another's (a reply that must be ended)."""
    ids = [tuple(codec.encode(n)) for n in names]
    prefix = any(a != b and b[: len(a)] == a for a in ids for b in ids)
    return max(len(i) for i in ids) + int(prefix)


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
        prompt: str = PROMPT,
        outro: str = OUTRO,
        separator: str = " ",
        field_names: tuple[str, ...] | bool = (),
        show_step: bool = False,
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
        # each number is written as "<level><separator>"; with the word tokenizer and separator "" every number
        # is one token (the model still reads them apart: a level is one id)
        # field_names: each number is written after its field's name ("a8 b8 c11 ..."; True: a, b, c, ...), so
        # with the word tokenizer one token says both which number and its level (a from-scratch model need not
        # learn to tell positions apart to read the observation)
        if field_names is True:
            field_names = tuple(_letters(i) for i in range(obs_dim))
        self.field_names = tuple(field_names or ())
        if self.field_names and len(self.field_names) != obs_dim:
            raise ValueError(f"{len(self.field_names)} field_names for {obs_dim} observation numbers")
        names = self.field_names or ("",)
        self.values = self.codec.table([f"{f}{i}{separator}" for f in names for i in range(self.bins)])
        self.action_set = parsing.StringSet(self.action_names)
        self.max_action_tokens = int(max_action_tokens) or _move_width(self.codec, self.action_names)
        self.actions = self.codec.table(list(self.action_names), width=self.max_action_tokens)
        self.action_candidates = self.actions.rows()  # the moves
        self.prompt = jnp.asarray(self.codec.encode(prompt.format(n=obs_dim, top=self.bins - 1)), jnp.int32)
        self.outro = self.codec.piece(outro.format(names=", ".join(self.action_names)))
        # show_step: the step count as one more field ("t7"): the value of a state depends on the steps left,
        # which MPE observations do not say (a time feature, as in Pardo et al. 2018)
        self.show_step = bool(show_step)
        horizon = int(getattr(env, "max_cycles", 0) or 0) + 1
        self.steps = self.codec.table([f"t{i}{separator}" for i in range(horizon)]) if self.show_step else None
        self.step_width = self.steps.width if self.show_step else 0
        self.capacity = int(self.prompt.shape[0] + obs_dim * self.values.width + self.step_width + self.outro.width)
        self.observation_space = spaces.Tokens(self.capacity, self.codec.vocab_size)
        self.action_space = spaces.Tokens(self.max_action_tokens, self.codec.vocab_size)

    @property
    def name(self) -> str:
        return f"Tokenized{self.inner.name}"

    @property
    def default_params(self):
        return self.inner.default_params

    def tokens_of(self, inner_obs: jax.Array, step: jax.Array | None = None) -> TextObs:
        """[A, O] floats (and the step count) -> TextObs [A, capacity]."""
        levels = quantize(inner_obs, self.bins, self.low, self.high)  # [A, O]
        if self.field_names:  # row field * bins + level of the value table
            levels = levels + self.bins * jnp.arange(levels.shape[-1])[None, :]

        def one(lv):
            ids, n = buffers.concat_pieces(self.values.ids[lv], self.values.lens[lv], self.codec.pad_id)
            p = self.prompt.shape[0]
            buf = jnp.full((self.capacity + self.outro.width + self.step_width,), self.codec.pad_id, jnp.int32)
            buf = buf.at[:p].set(self.prompt).at[p : p + ids.shape[0]].set(ids)
            end = p + n
            if self.show_step:
                t = jnp.minimum(step, self.steps.ids.shape[0] - 1)
                buf = jax.lax.dynamic_update_slice(buf, self.steps.ids[t], (end,))
                end = end + self.steps.lens[t]
            buf = jax.lax.dynamic_update_slice(buf, self.outro.ids[0], (end,))
            return buf[: self.capacity], end + self.outro.lens[0]

        tokens, length = jax.vmap(one)(levels)
        return TextObs(tokens, length)

    def get_obs(self, state, params=None) -> TextObs:
        return self.tokens_of(state.inner_obs, getattr(state.inner, "step", None))

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
        """The wrapped env's world state (with `show_step`, plus the share of the episode played)."""
        world = self.inner.world_state(state.inner, params)
        if not self.show_step:
            return world
        step = state.inner.step.astype(jnp.float32) / max(self.steps.ids.shape[0] - 1, 1)
        return jnp.concatenate([world, step[None]])

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
