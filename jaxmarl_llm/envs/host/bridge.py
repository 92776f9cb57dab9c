"""A Python text game played inside the compiled update: the host-environment bridge.

    env = HostTextEnv(PyTicTacToe, "tic_tac_toe", ("x", "o"), tokenizer, capacity=640, max_action_tokens=8,
                      turn_tokens=48)
    obs, state = jax.vmap(env.reset)(keys)                     # the trainer's calls, unchanged
    obs, state, reward, term, trunc, info = jax.vmap(env.step)(keys, state, action)

A game (`HostGame`: TextArena's shape, one player moves at a time) lives in Python; the env is a `TextEnv` whose
state holds the transcripts and a handle to the game on the host. Each step appends the mover's reply to its own
transcript (as every token game does), sends the replies to the host in one `io_callback` for the whole batch
(callback.py), where the mover's tokens are decoded, the game steps, and each player's new text comes back
tokenized and appended. Texts longer than the room for them are cut and said: `overflow` (the episode ends
truncated, as a token game's does), never silently.

Episodes start and end inside an update, so nothing on the host needs saving: a resumed run resets fresh games.
A game seeded by the reset key (`HostGame.reset(seed)`) makes runs repeat by seed. An error raised by the game
stops the run with `HostEnvError` naming the game, the episode and its seed (experiments/*.py print that line).
"""

from __future__ import annotations

import collections
import dataclasses
import concurrent.futures
import threading
import time
from typing import Callable, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxmarl_llm.envs.host.callback import batched
from jaxmarl_llm.envs.text import buffers
from jaxmarl_llm.envs.text.base import TextEnv, TextParams, TextState
from jaxmarl_llm.errors import HostEnvError


class Turn(NamedTuple):
    """What a game says after a move."""

    texts: list[str]  # per player: what it reads next (appended to its transcript)
    rewards: list[float]  # per player
    done: bool
    next_player: int  # the player to move (ignored when done)
    info: dict[str, list[bool]] = {}  # per player, keys among the env's `info_keys` (e.g. won, illegal)


class HostGame(Protocol):
    """A turn-based text game in Python; one instance per episode. With the env's `candidates` the game also says
    which of them the player to move may reply now (`legal`): constrained decoding then works as for a token game."""

    def reset(self, seed: int) -> tuple[list[str], int]:
        """Each player's opening text, and the player to move first."""

    def step(self, action: str) -> Turn:
        """The player to move replies `action` (the decoded text of its reply)."""

    def legal(self) -> list[str]:
        """The replies among the env's `candidates` legal for the player to move (only asked with candidates)."""


@struct.dataclass
class HostState(TextState):
    handle: jax.Array  # [] int32: the episode's game on the host (-1: none)
    valid: jax.Array  # [A, K] bool: the candidates legal now (K = 0 without candidates)


@dataclasses.dataclass
class _Episode:
    game: HostGame
    seed: int
    mover: int  # the player to move
    turn: int = 0  # moves played


class HostTextEnv(TextEnv):
    """`game()` builds a fresh `HostGame`; `turn_tokens` bounds the tokens a player reads per move; `candidates`
    lists every reply the game may call legal (`policy.actions="constrained"` then samples only the legal ones);
    `workers` threads step the games of a batch side by side."""

    max_movers = 1  # one player moves per step
    on_host = True  # reset takes `live`: a mixture resets the games an episode does not play without the host

    def __init__(self, game: Callable[[], HostGame], name: str, agents: tuple[str, ...], tokenizer, capacity: int,
                 max_action_tokens: int, turn_tokens: int, info_keys: tuple[str, ...] = (), max_live: int = 1 << 16,
                 candidates: tuple[str, ...] = (), workers: int = 1):
        super().__init__(tokenizer, agents, capacity, max_action_tokens)
        # workers > 1: the games of a step move in that many threads (a game that waits on a subprocess, such
        # as the code grader, lets the others run); results are gathered in order, so runs repeat the same
        self.pool = concurrent.futures.ThreadPoolExecutor(int(workers)) if int(workers) > 1 else None
        self.candidates = {text: k for k, text in enumerate(candidates)}
        if candidates:
            self.action_candidates = self._action_table(list(candidates)).rows()
        self.game, self.game_name, self.turn_tokens = game, name, int(turn_tokens)
        self.info_keys, self.max_live = tuple(info_keys), int(max_live)
        self.slack = max(self.max_action_tokens, self.turn_tokens)
        self.dtype = buffers.storage_dtype(self.codec.vocab_size)
        self.live: collections.OrderedDict[int, _Episode] = collections.OrderedDict()
        self.count = 0
        self.lock = threading.Lock()  # devices call from their own threads
        self.host_batches: list[int] = []  # the batch of every host call (reset and step), in order
        self.host_seconds = 0.0  # time spent in host calls (what the bridge costs an update)
        self.games_started = 0  # games built on the host (live resets)
        self._reset = batched(self._host_reset, self._reset_shapes)
        self._step_host = batched(self._host_step, self._step_shapes)

    def _reset_shapes(self, n: int) -> dict:
        """What a reset of n games returns: each handle, each player's opening text (`tokens`, `lens`, `cut`), the
        mover, the legal candidates."""
        a, k = self.num_agents, len(self.candidates)
        return {"handle": jax.ShapeDtypeStruct((n,), jnp.int32),
                "tokens": jax.ShapeDtypeStruct((n, a, self.capacity), jnp.int32),
                "lens": jax.ShapeDtypeStruct((n, a), jnp.int32), "cut": jax.ShapeDtypeStruct((n, a), bool),
                "active": jax.ShapeDtypeStruct((n, a), bool), "valid": jax.ShapeDtypeStruct((n, a, k), bool)}

    def _step_shapes(self, n: int) -> dict:
        """What a step of n games returns: each player's new text (`tokens`, `lens`, `cut`), rewards, ends, the next
        mover, the legal candidates, the info flags."""
        a, k = self.num_agents, len(self.candidates)
        return {"tokens": jax.ShapeDtypeStruct((n, a, self.turn_tokens), jnp.int32),
                "lens": jax.ShapeDtypeStruct((n, a), jnp.int32), "cut": jax.ShapeDtypeStruct((n, a), bool),
                "reward": jax.ShapeDtypeStruct((n, a), jnp.float32), "done": jax.ShapeDtypeStruct((n,), bool),
                "active": jax.ShapeDtypeStruct((n, a), bool), "valid": jax.ShapeDtypeStruct((n, a, k), bool),
                "info": {key: jax.ShapeDtypeStruct((n, a), bool) for key in self.info_keys}}

    def _empty(self, shapes: dict) -> dict:
        """Host arrays for `shapes`: zeros, text rows of pad (an appended piece is pad past its length)."""
        out = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)
        out["tokens"][:] = self.codec.pad_id
        return out

    @property
    def default_params(self) -> TextParams:
        return TextParams(max_steps=1 << 30)  # the game says when it ends

    # ---- the compiled side --------------------------------------------------------------------------------
    def reset(self, key, params=None, live: jax.Array | bool = True):
        """A fresh game on the host; `live=False`: none (an empty, finished episode that steps never send to the
        host: a mixture's games that this episode does not play)."""
        data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
        live = jnp.asarray(live, bool)
        out = self._reset(data.astype(jnp.uint32), live)
        buf = jnp.full((self.num_agents, self.capacity + self.slack), self.codec.pad_id, self.dtype)
        buf = buf.at[:, : self.capacity].set(out["tokens"].astype(self.dtype))
        state = HostState(buf=buf, length=out["lens"], active=out["active"], turn=jnp.int32(0), done=~live,
                          overflow=out["cut"], handle=out["handle"], valid=out["valid"])
        return self.get_obs(state), state

    def candidate_mask(self, state) -> jax.Array:
        """[A, K]: the candidates the game calls legal now (every seat gets the mover's)."""
        return state.valid

    def _step(self, key, state, tokens, length, params):
        new = self._append(state, tokens, length)  # the mover's reply, in its own transcript
        out = self._step_host(state.handle, state.done, tokens, length)
        new = self._append(new, out["tokens"], out["lens"])
        new = new.replace(turn=state.turn + 1, active=out["active"], overflow=new.overflow | out["cut"],
                          valid=out["valid"])
        return new, out["reward"], out["done"], jnp.bool_(False), dict(out["info"])

    # ---- the host side (numpy in, numpy out; one call per batch) -----------------------------------------
    def _write(self, out: dict, i: int, texts: list[str]) -> None:
        """Game i's texts, one per player, tokenized into `out`'s rows; a text past the row's room is cut and said."""
        room = out["tokens"].shape[-1]
        for p, text in enumerate(texts):
            ids = self.codec.encode(text)
            out["tokens"][i, p, : min(len(ids), room)], out["lens"][i, p] = ids[:room], min(len(ids), room)
            out["cut"][i, p] = len(ids) > room

    def _legal(self, game: HostGame) -> np.ndarray:
        """[K] the candidates legal for the player to move (a finished game's answer is read by no one)."""
        mask = np.zeros((len(self.candidates),), bool)
        if not self.candidates:
            return mask
        for text in game.legal():
            mask[self.candidates[text]] = True
        return mask

    def _fail(self, handle: int, episode: _Episode | None, err: Exception) -> HostEnvError:
        where = f"episode {handle}" + ("" if episode is None else f" (seed {episode.seed}, after {episode.turn} moves)")
        return HostEnvError(f"host env {self.game_name}: {where}: {type(err).__name__}: {err}")

    def _host_reset(self, keys: np.ndarray, live: np.ndarray):
        start = time.perf_counter()
        out = self._empty(self._reset_shapes(keys.shape[0]))
        out["handle"][:] = -1
        with self.lock:
            for i, key in enumerate(keys):
                if not live[i]:
                    continue
                self.games_started += 1
                seed = (int(key[0]) << 32) | int(key[1])
                handle, self.count = self.count, (self.count + 1) & 0x7FFFFFFF
                game = self.game()
                try:
                    texts, mover = game.reset(seed)
                    out["valid"][i] = self._legal(game)
                except Exception as err:
                    raise self._fail(handle, _Episode(game, seed, 0), err) from err
                self.live[handle] = _Episode(game, seed, int(mover))
                while len(self.live) > self.max_live:  # episodes a rollout stopped early are never finished
                    self.live.popitem(last=False)
                out["handle"][i] = handle
                out["active"][i, int(mover)] = True
                self._write(out, i, texts)
            self._count(keys.shape[0], start)
        return out

    def _count(self, n: int, start: float) -> None:
        self.host_batches.append(n)
        self.host_seconds += time.perf_counter() - start

    def _host_step(self, handles: np.ndarray, done: np.ndarray, tokens: np.ndarray, length: np.ndarray):
        start = time.perf_counter()
        n = handles.shape[0]
        out = self._empty(self._step_shapes(n))  # a finished game's row is left as is: the base step keeps its state
        with self.lock:
            moves = []  # (row, handle, episode, reply) of every game still playing
            for i in range(n):
                handle = int(handles[i])
                if done[i]:  # a finished episode is absorbing: the base step keeps its state
                    continue
                episode = self.live.get(handle)
                if episode is None:
                    raise self._fail(handle, None, KeyError("no such episode on the host (evicted: more than "
                                                            f"max_live={self.max_live} unfinished episodes)"))
                mover = episode.mover
                moves.append((i, handle, episode, self.codec.decode(tokens[i, mover, : length[i, mover]])))

            def play(move):
                i, handle, episode, reply = move
                try:
                    turn = episode.game.step(reply)
                    return turn, self._legal(episode.game)
                except Exception as err:
                    raise self._fail(handle, episode, err) from err

            played = list(self.pool.map(play, moves)) if self.pool is not None else [play(m) for m in moves]
            for (i, handle, episode, _), (turn, legal) in zip(moves, played):
                out["valid"][i] = legal
                episode.turn += 1
                episode.mover = int(turn.next_player)
                self._write(out, i, turn.texts)
                out["reward"][i] = turn.rewards
                out["done"][i] = bool(turn.done)
                for k, v in turn.info.items():
                    out["info"][k][i] = v
                if turn.done:
                    del self.live[handle]
                else:
                    out["active"][i, episode.mover] = True
            self._count(n, start)
        return out
