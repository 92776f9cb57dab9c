"""What every token game shares: the transcript state, action cleaning, the step envelope.

A game subclasses `TextEnv`, builds its piece tables in `__init__`, calls
`self._setup(prompts, widths)` and implements `reset` and `_step`. The base
`step` cleans the action (clip lengths, stop at eos, pad), runs `_step`, and
makes a finished episode absorbing (stepping it again changes nothing and pays
nothing), so `jit`/`vmap` callers need no special case.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from jaxmarl_llm.envs import spaces
from jaxmarl_llm.envs.core import Env, EnvParams, StepResult
from jaxmarl_llm.envs.text import buffers, parsing
from jaxmarl_llm.envs.text.buffers import TextAction, TextObs
from jaxmarl_llm.envs.text.codec import Codec, PieceTable
from jaxmarl_llm.tokenizers import CharTokenizer

# the built-in players a game may offer through `opponent_action(key, state, kind)`: scripted seats, league
# opponents and evaluation matches choose among these
# minimax, tactician: tic-tac-toe; the others: poker
BUILTIN_PLAYERS = ("random", "minimax", "tactician", "equilibrium", "best_response")

# info[TOKEN_REWARD] [A, M] float (optional): the part of a step's reward that the env pays to each token of the
# agent's reply (a calculator call's digits, each paid for itself), already counted in `reward`; token-level
# credit (config.credit="token") places it on those tokens, the rest of the reward on the reply's last token
TOKEN_REWARD = "token_reward"

# rates over moves that games report as a pair of 0/1 info counts, {rate: (hits, tries)}: each game declares its
# own (`declare_info_ratios` at import); the rollout metrics and the evaluators count them for the seat that moved,
# summed over seats, turns and episodes
INFO_RATIOS: dict[str, tuple[str, str]] = {}


def declare_info_ratios(**ratios: tuple[str, str]) -> None:
    """A game's move rates: `rate=(hits, tries)`, two info keys of 0/1 counts per seat."""
    INFO_RATIOS.update(ratios)


@struct.dataclass
class TextState:
    buf: jax.Array  # [A, L + slack] transcripts (uint8/uint16/int32: the smallest that holds the vocab)
    length: jax.Array  # [A] int32
    active: jax.Array  # [A] bool: who moves next
    turn: jax.Array  # [] int32: env steps taken
    done: jax.Array  # [] bool
    overflow: jax.Array  # [A] bool: a transcript was cut at capacity


@struct.dataclass
class TextParams(EnvParams):
    max_steps: int = 10


def _select(pred, on_true, on_false):
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


class TextEnv(Env):
    """Base of the token games. Subclasses set tables, then call `_setup`."""

    appends_actions = True  # `_step` first appends each agent's cleaned action to its own transcript

    def __init__(self, tokenizer, agents: tuple[str, ...], capacity: int, max_action_tokens: int):
        self.tokenizer = tokenizer if tokenizer is not None else CharTokenizer()
        self.codec = Codec(self.tokenizer)
        self.agents = tuple(agents)
        self.num_agents = len(self.agents)
        self.capacity = int(capacity)
        self.max_action_tokens = int(max_action_tokens)
        self.observation_space = spaces.Tokens(self.capacity, self.codec.vocab_size)
        self.action_space = spaces.Tokens(self.max_action_tokens, self.codec.vocab_size)

    def _setup(self, prompts: list[list[int]], widths: list[int]) -> None:
        """Constant starting transcripts and the slack the widest append needs."""
        self.slack = max([self.max_action_tokens, *widths])
        self.init_buf, self.init_length = buffers.init_buffers(prompts, self.capacity, self.slack, self.codec.pad_id)
        # stored in the smallest integer type that holds the vocab (less memory traffic); obs are int32
        self.init_buf = self.init_buf.astype(buffers.storage_dtype(self.codec.vocab_size))

    # ---- helpers for subclasses ----------------------------------------------------------
    def _base_state(self, active: jax.Array) -> dict:
        return dict(
            buf=self.init_buf,
            length=self.init_length,
            active=active,
            turn=jnp.int32(0),
            done=jnp.bool_(False),
            overflow=jnp.zeros((self.num_agents,), bool),
        )

    def _chars(self, tokens: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
        """[A, M], [A] -> characters [A, M*C], [A]."""
        return jax.vmap(parsing.decode_chars, in_axes=(None, None, 0, 0))(
            self.codec.token_chars, self.codec.token_nchars, tokens, length
        )

    def _token_of_chars(self, tokens: jax.Array, length: jax.Array, num_chars: int) -> jax.Array:
        """[M], [] -> [num_chars] int32: the index of the reply's token that wrote each character (M past its end)."""
        count = jnp.where(jnp.arange(tokens.shape[0]) < length, self.codec.token_nchars[tokens], 0)
        ends = jnp.cumsum(count)  # one past each token's last character
        return jnp.sum(ends[None, :] <= jnp.arange(num_chars)[:, None], axis=1)

    def _first_off_token(self, table: PieceTable, tokens: jax.Array, length: jax.Array) -> jax.Array:
        """[] int32: the first token of a reply [M] after which it is no longer the start of any row of `table`
        (the valid replies): where a refused reply went wrong. Its last token when every prefix is some row's (a
        reply cut short)."""
        m = tokens.shape[0]
        ids = jnp.pad(table.ids, ((0, 0), (0, max(m - table.width, 0))))[:, :m]  # [K, M]
        pos = jnp.arange(m)
        same = (ids == tokens[None, :]) & (pos[None, :] < table.lens[:, None])
        starts = jnp.cumprod(same, axis=1).astype(bool).any(0)  # [M] the reply through token j begins some row
        off = ~starts & (pos < length)
        return jnp.where(off.any(), jnp.argmax(off), jnp.maximum(length - 1, 0)).astype(jnp.int32)

    def _per_token(self, per_char: jax.Array, tokens: jax.Array, length: jax.Array) -> jax.Array:
        """[C] per character -> [M] per token of one reply (each character's amount to the token that wrote it)."""
        token_of = self._token_of_chars(tokens, length, per_char.shape[0])
        return jnp.zeros(tokens.shape, jnp.float32).at[token_of].add(per_char, mode="drop")

    def _append(self, state, pieces: jax.Array, lens: jax.Array):
        """Per-agent append to `state`'s transcripts; lens 0 appends nothing; a finished episode gets nothing."""
        lens = jnp.where(state.done, 0, lens).astype(jnp.int32)  # pieces are pad after their true length
        out = buffers.append_rows(state.buf, state.length, pieces, lens, self.capacity)
        return state.replace(buf=out.buf, length=out.length, overflow=state.overflow | out.overflow)

    def _append_table(self, state, table: PieceTable, index: jax.Array, mask: jax.Array | None = None):
        """Append row `index[a]` of `table` to agent a (where mask)."""
        lens = table.lens[index]
        if mask is not None:
            lens = jnp.where(mask, lens, 0)
        return self._append(state, table.ids[index], lens)

    # ---- Env API ----------------------------------------------------------------------------
    @property
    def default_params(self) -> TextParams:
        return TextParams()

    def get_obs(self, state, params=None) -> TextObs:
        return TextObs(tokens=state.buf[:, : self.capacity].astype(jnp.int32), length=state.length)

    def step(self, key, state, action: TextAction, params=None) -> StepResult:
        params = self._params(params)
        tokens, length = buffers.clean_action(action.tokens, action.length, self.codec.pad_id, self.codec.eos_id)
        length = jnp.where(state.active, length, 0)
        new, reward, terminated, truncated, info = self._step(key, state, tokens, length, params)
        truncated = truncated | new.overflow.any()
        done = terminated | truncated
        new = new.replace(done=done, active=jnp.where(done, False, new.active))
        # a finished episode is absorbing (its transcripts are left alone by `_append`)
        small = {f.name: getattr(new, f.name) for f in dataclasses.fields(new) if f.name not in ("buf", "length", "overflow")}
        old = {k: getattr(state, k) for k in small}
        new = new.replace(**_select(state.done, old, small))
        zeros = jnp.zeros((self.num_agents,), jnp.float32)
        reward = jnp.where(state.done, zeros, reward.astype(jnp.float32))
        a = self.num_agents
        terminated = jnp.broadcast_to(jnp.where(state.done, True, terminated), (a,))
        truncated = jnp.broadcast_to(jnp.where(state.done, False, truncated), (a,))
        info = {k: jnp.where(state.done, jnp.zeros_like(v), v) for k, v in info.items()}
        return StepResult(self.get_obs(new, params), new, reward, terminated & ~truncated, truncated, info)

    def _step(self, key, state, tokens, length, params):
        """Game logic on a cleaned action. Returns (state, reward [A], terminated [], truncated [], info)."""
        raise NotImplementedError

    def random_action(self, key: jax.Array, state) -> TextAction:
        """A well-formed action for every agent (legal where the game has rules): for tests and benchmarks."""
        raise NotImplementedError

    def render(self, state, index: int | None = None) -> list[str]:
        from jaxmarl_llm.envs.text.render import transcripts

        return transcripts(self.tokenizer, state, index)

    # ---- action tables ------------------------------------------------------------------------
    def _action_table(self, strings: list[str]) -> PieceTable:
        """Pre-encoded well-formed actions (for scripted and random policies), width M."""
        table = self.codec.table(strings)
        if table.width > self.max_action_tokens:
            raise ValueError(f"max_action_tokens={self.max_action_tokens} cannot hold the action {strings[0]!r}")
        return self.codec.table(strings, width=self.max_action_tokens)

    def make_action(self, table: PieceTable, index: jax.Array, actor: jax.Array | None = None) -> TextAction:
        """TextAction whose rows are table rows `index` [A] (rows where actor is False are empty)."""
        lens = table.lens[index]
        if actor is not None:
            lens = jnp.where(actor, lens, 0)
        return TextAction(tokens=table.ids[index], length=lens)
