"""Several token games in one env: each episode plays one of them, drawn at reset (SPIRAL's multi-game self-play).

    env = registry.make("text/mixture", games=("text/tic_tac_toe", "text/kuhn_poker", "text/negotiation"),
                        weights=(1, 1, 1), game_kwargs={"negotiation": {"rules": False}}, tokenizer=tok)

One policy (one shared adapter) then learns every game in one compiled program. The state holds every game's
state (all reset from the same key; only the drawn one, `state.game`, moves) and mirrors the live game's
transcripts, `active`, `turn`, `done`; `reset` draws the game from `fold_in(key, ...)` with `weights` (default
uniform) and resets each game with `key` itself, `step` passes each game its own key and the action cut to the
game's `max_action_tokens`, so an episode is exactly the drawn game played alone from the same keys (and envs that
share a reset key, a GRPO group, play the same game). Every game is stepped and the live one's result selected
(under `vmap` a `lax.switch` would compute every branch anyway).

Shapes: observations are padded (pad id) to the widest game's capacity, replies to the longest game's
`max_action_tokens`, seats to the game with the most: a game of fewer seats (a one-seat task beside two-seat games)
leaves the others empty (no transcript, never active, reward 0, terminated from the start), and its
`game_<name>` flags only its own seats, so the trainer's returns count the seats that played. `action_candidates` is the union of the games' replies (an identical token sequence, e.g.
`Move: pass` of Kuhn poker and negotiation, listed once; `candidate_index[g]` maps game g's candidate k into it);
`candidate_mask` is the live game's mask in the union's columns, every other game's replies invalid.
`appends_actions` only if every game's transcripts only grow (else the trainer re-reads each observation).
`info`: every key any game reports (zeros where the live game has none) and `game_<name>` (bool [A]: this episode
plays game <name>, what the rollout metrics split by: `episodes_<name>`, `return_<name>`). Built-in players: those
every game has (`random` for the three above); `opponent_action` plays the live game's.

Per-game evaluation reads `games` (the sub-envs) and `game_names` (`tic_tac_toe`, `kuhn_poker`, ...):
evaluation/per_game.py plays each game alone against its own built-in players and, for the poker games, computes
its exact exploitability (`eval/<name>/...` in the trainer's metrics). The game is named in each game's own text
(`Tic-tac-toe.`, `Kuhn poker.`, `Negotiation, ...`) unless a game's options drop its rules (tic-tac-toe
`history=False`, negotiation `rules=False`): then its board or goods lines tell the games apart.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxmarl_llm.envs import spaces
from jaxmarl_llm.envs.core import StepResult
from jaxmarl_llm.envs.text.base import TOKEN_REWARD, TextEnv, TextParams, TextState
from jaxmarl_llm.envs.text import buffers
from jaxmarl_llm.envs.text.buffers import TextAction, TextObs
from jaxmarl_llm.tokenizers import CharTokenizer

GAME_INFO = "game_"  # info["game_<name>"]: bool [A], the episode plays game <name>
DEFAULT_GAMES = ("text/tic_tac_toe", "text/kuhn_poker", "text/negotiation")
_DRAW = 0x6A3E  # folded into the reset key to draw the game (each game is reset with the key itself)


@struct.dataclass
class MixtureState(TextState):
    games: tuple  # every game's own state (all reset; only the live one moves)
    game: jax.Array  # [] int32: the game this episode plays (an index into `env.games`)


def _choose(game: jax.Array, trees: list):
    """trees[game] for a traced index: every leaf selected with `where` (same structure and shapes)."""
    return functools.reduce(lambda acc, g: jax.tree.map(lambda a, b: jnp.where(game == g, b, a), acc, trees[g]),
                            range(1, len(trees)), trees[0])


def _items(kwargs) -> dict:
    return {k: v for k, v in kwargs.items()} if kwargs else {}


class GameMixture(TextEnv):
    """A mixture of token games; each episode one of them (see the module doc)."""

    def __init__(self, games: tuple[str, ...] = DEFAULT_GAMES, weights: tuple[float, ...] | None = None,
                 game_kwargs: dict | None = None, tokenizer=None):
        from jaxmarl_llm.envs import registry

        names = tuple(games)
        if not names:
            raise ValueError("games: name at least one registered token game")
        if "text/mixture" in names:
            raise ValueError("games: a mixture cannot hold a mixture")
        self.env_names = names
        self.game_names = tuple(n.split("/")[-1] for n in names)
        if len(set(self.game_names)) != len(names):
            raise ValueError(f"games: each game once, got {names}")
        kwargs = {k: _items(v) for k, v in _items(game_kwargs).items()}
        unknown = sorted(set(kwargs) - set(self.game_names))
        if unknown:
            raise ValueError(f"game_kwargs: {', '.join(map(repr, unknown))} is no game of this mixture; keys are "
                             f"the games' short names: {', '.join(self.game_names)}")
        tokenizer = tokenizer if tokenizer is not None else CharTokenizer()
        self.games = tuple(registry.make(n, tokenizer=tokenizer, **kwargs.get(s, {}))
                           for n, s in zip(names, self.game_names))
        w = np.ones(len(names)) if weights is None else np.asarray(weights, np.float64)
        if w.shape != (len(names),) or (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"weights: one non-negative weight per game ({len(names)}), not all 0; got {weights}")
        self.weights = tuple(float(x) for x in w / w.sum())
        self.seats = tuple(g.num_agents for g in self.games)  # each game's own seats (the first ones of the mixture)

        # what TextEnv.__init__ sets, shared with the games (one tokenizer, one codec)
        first = self.games[0]
        self.tokenizer, self.codec = tokenizer, first.codec
        self.num_agents = max(self.seats)
        agents = {g.agents for g in self.games}
        self.agents = first.agents if len(agents) == 1 else tuple(f"player_{a + 1}" for a in range(self.num_agents))
        self.capacity = max(g.capacity for g in self.games)
        self.max_action_tokens = max(g.max_action_tokens for g in self.games)
        self.observation_space = spaces.Tokens(self.capacity, self.codec.vocab_size)
        self.action_space = spaces.Tokens(self.max_action_tokens, self.codec.vocab_size)
        self.appends_actions = all(bool(getattr(g, "appends_actions", False)) for g in self.games)
        movers = [getattr(g, "max_movers", None) for g in self.games]
        self.max_movers = None if None in movers else max(movers)
        self.buf_dtype = buffers.storage_dtype(self.codec.vocab_size)  # the games' transcripts' type

        # the union of the games' replies, and where each game's candidates sit in it
        self.action_candidates, self.candidate_index = None, None
        if all(getattr(g, "action_candidates", None) for g in self.games):
            union: dict[tuple[int, ...], int] = {}
            index = []
            for g in self.games:
                index.append(np.asarray([union.setdefault(tuple(c), len(union)) for c in g.action_candidates],
                                        np.int32))
            self.action_candidates = tuple(union)
            self.candidate_index = tuple(index)
        # built-in players: those every game with an opponent has (a one-seat task has none and needs none)
        versus = [g for g in self.games if g.num_agents > 1] or list(self.games)
        has = [set(getattr(g, "builtin_players", ())) if hasattr(g, "opponent_action") else set() for g in versus]
        self.builtin_players = tuple(k for k in getattr(versus[0], "builtin_players", ()) if all(k in h for h in has))

    @property
    def default_params(self) -> TextParams:
        return TextParams(max_steps=max(int(g.default_params.max_steps) for g in self.games))

    # ---- the live game ---------------------------------------------------------------------------------------
    def _seated(self, x: jax.Array, fill) -> jax.Array:
        """[a_g, ...] -> [A, ...]: a game's per-seat array with the seats it lacks set to `fill`."""
        missing = self.num_agents - x.shape[0]
        return jnp.pad(x, ((0, missing),) + ((0, 0),) * (x.ndim - 1), constant_values=fill) if missing else x

    def _pad_obs(self, obs: TextObs) -> TextObs:
        width = self.capacity - obs.tokens.shape[-1]
        tokens = jnp.pad(obs.tokens, ((0, 0), (0, width)), constant_values=self.codec.pad_id)
        return TextObs(self._seated(tokens, self.codec.pad_id), self._seated(obs.length, 0))

    def _mirror(self, game: jax.Array, states: tuple, obs: list[TextObs]) -> MixtureState:
        """The mixture's state: the games' states and the live one's transcripts and flags."""
        live = _choose(game, [dict(obs=self._pad_obs(o), active=self._seated(s.active, False), turn=s.turn,
                                   done=s.done, overflow=self._seated(s.overflow, False))
                              for o, s in zip(obs, states)])
        return MixtureState(buf=live["obs"].tokens.astype(self.buf_dtype), length=live["obs"].length,
                            active=live["active"], turn=live["turn"], done=live["done"], overflow=live["overflow"],
                            games=states, game=game)

    def draw_game(self, key: jax.Array) -> jax.Array:
        """[] int32: the game an episode reset with `key` plays."""
        logits = jnp.log(jnp.asarray(self.weights, jnp.float32))
        return jax.random.categorical(jax.random.fold_in(key, _DRAW), logits).astype(jnp.int32)

    def reset(self, key, params=None):
        game = self.draw_game(key)
        # a game on the host is built only where it is played (the others' steps never reach the host)
        outs = [g.reset(key, live=game == i) if getattr(g, "on_host", False) else g.reset(key)
                for i, g in enumerate(self.games)]
        state = self._mirror(game, tuple(s for _, s in outs), [o for o, _ in outs])
        return self.get_obs(state), state

    def step(self, key, state: MixtureState, action: TextAction, params=None):
        results = []
        for env, sub in zip(self.games, state.games):
            m, a = env.max_action_tokens, env.num_agents  # the game's own reply width (a longer reply is cut, as
            # that game cuts it) and seats
            results.append(env.step(key, sub, TextAction(action.tokens[:a, :m], jnp.minimum(action.length[:a], m))))
        # the live game moves; the others keep their reset state
        states = tuple(jax.tree.map(lambda a, b, g=g: jnp.where(state.game == g, b, a), old, r.state)
                       for g, (old, r) in enumerate(zip(state.games, results)))
        new = self._mirror(state.game, states, [r.obs for r in results])
        reward, terminated, truncated = _choose(state.game, [
            (self._seated(r.reward, 0.0), self._seated(r.terminated, True), self._seated(r.truncated, False))
            for r in results])
        return StepResult(self.get_obs(new), new, reward, terminated, truncated,
                          self._info(state, [r.info for r in results]))

    def _info(self, state: MixtureState, infos: list[dict]) -> dict:
        """Every key any game reports (zeros where the live game has none) and the one-hot `game_<name>`."""
        out = {}
        infos = [{**info, TOKEN_REWARD: self._pad_tokens(info[TOKEN_REWARD])} if TOKEN_REWARD in info else info
                 for info in infos]
        # per-seat values of a game with fewer seats: zeros for the seats it lacks
        infos = [{k: self._seated(v, 0) if jnp.ndim(v) and v.shape[0] == env.num_agents else v
                  for k, v in info.items()} for env, info in zip(self.games, infos)]
        for key in dict.fromkeys(k for info in infos for k in info):
            like = next(info[key] for info in infos if key in info)
            out[key] = _choose(state.game, [jnp.broadcast_to(info[key], like.shape).astype(like.dtype) if key in info
                                            else jnp.zeros_like(like) for info in infos])
        for g, name in enumerate(self.game_names):
            out[GAME_INFO + name] = ((state.game == g) & ~state.done) & (jnp.arange(self.num_agents) < self.seats[g])
        return out

    # ---- candidates and built-in players ---------------------------------------------------------------------
    def candidate_mask(self, state: MixtureState) -> jax.Array:
        """[A, K]: the live game's valid replies, in the union's columns (every other game's replies False)."""
        if self.action_candidates is None:
            raise ValueError(f"a mixture of {', '.join(self.env_names)} has no action candidates: a game lists none")
        k = len(self.action_candidates)
        masks = [jnp.zeros((self.num_agents, k), bool).at[:env.num_agents, idx].set(env.candidate_mask(sub))
                 for env, sub, idx in zip(self.games, state.games, self.candidate_index)]
        return _choose(state.game, masks)

    def _pad_tokens(self, x: jax.Array) -> jax.Array:
        """[A, M_game] -> [A, M] (zeros after the game's own reply width)."""
        return jnp.pad(x, ((0, 0), (0, self.max_action_tokens - x.shape[-1])))

    def _padded_action(self, action: TextAction) -> TextAction:
        width = self.max_action_tokens - action.tokens.shape[-1]
        tokens = jnp.pad(action.tokens, ((0, 0), (0, width)), constant_values=self.codec.pad_id)
        return TextAction(self._seated(tokens, self.codec.pad_id), self._seated(action.length, 0))

    def _no_action(self) -> TextAction:
        """An empty reply in every seat (a game without built-in players is never asked for one)."""
        a = self.num_agents
        return TextAction(jnp.full((a, self.max_action_tokens), self.codec.pad_id, jnp.int32),
                          jnp.zeros((a,), jnp.int32))

    def opponent_action(self, key, state: MixtureState, kind: str = "random") -> TextAction:
        """The live game's built-in player `kind` (one every game of the mixture has: `builtin_players`)."""
        if kind not in self.builtin_players:
            raise ValueError(f"opponent kind {kind!r}: the mixture's games all offer {self.builtin_players or 'none'}")
        return _choose(state.game, [self._padded_action(env.opponent_action(key, sub, kind))
                                    if kind in getattr(env, "builtin_players", ()) else self._no_action()
                                    for env, sub in zip(self.games, state.games)])

    def random_action(self, key, state: MixtureState) -> TextAction:
        return _choose(state.game, [self._padded_action(env.random_action(key, sub))
                                    for env, sub in zip(self.games, state.games)])
