"""Kuhn and Leduc poker as token games: the tree of jaxmarl_llm/gametheory walked inside jit, in words.

The state is a node of the game's tree (`gametheory.tree.GameTree`: OpenSpiel's rules and histories); a move
follows `tree.child`, chance (the deal, Leduc's public card) samples `tree.chance`. Each seat's observation is
rewritten every move (`appends_actions` False) from what it knows: its card, the table card, the betting so
far, the pot and whose move it is, ending with the result when the hand is over, e.g.

    Leduc poker. Cards J < Q < K, two of each; a pair with the table card beats any other hand.
    You are player 2. Your card: Q. Table card: K.
    Round 1: they raise, you call. Round 2: they raise.
    Pot: 14. Your move: fold, call or raise?

The reply is `Move: <action>` (Kuhn: pass, bet; Leduc: fold, call, raise); anything else, or an action that
is not legal now, loses the hand for the mover: -2 and the opponent 0, as in tic-tac-toe. Legal moves are the
candidates (`policy.actions="constrained"`). Rewards are the chips won or lost at the end of the hand.

An observation depends on the seat's information set only, and cards by rank (suits never matter), so
`infoset_views()` gives the text at every information set of the tree: what the in-graph exploitability reads
the policy at (train/lm_rl.py). Built-in players: `random` (uniform legal), `equilibrium` (CFR+ solved when the
env is built: Kuhn's alpha = 1/3 member, Leduc's to an exploitability below 1e-3).

`rules=False` drops the first line (the game's rules): a model trained from scratch learns them from the
rewards, and reads fewer tokens every move (word tokenizer, mean over views: Kuhn 83 -> 47, Leduc 124 -> 78).
`compact=True` writes the same information in symbols, one token each in the word tokenizer (Leduc 78 -> 16):

    P2:Q:K;+=/+;?          player 2, card Q, table card K; round 1 raise, call; round 2 raise; your move

(`-` fold or pass, `=` call, `+` raise or bet; rounds split by `/`; then `?` your move, `.` theirs, or the
end: the other card at a showdown and the chips won, `;K-3`). Every rewrite reads the whole view, so an
update's time follows its length.
"""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxmarl_llm.envs.text import parsing
from jaxmarl_llm.envs.text.base import TextEnv, TextParams, TextState
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.codec import encode_many
from jaxmarl_llm.gametheory import cfr
from jaxmarl_llm.gametheory.exploitability import exploitability, tabular_policy, uniform_policy
from jaxmarl_llm.gametheory.kuhn import KuhnRules
from jaxmarl_llm.gametheory.leduc import LeducRules, parse
from jaxmarl_llm.gametheory.tree import CHANCE, TERMINAL, GameTree, build_tree, history_features

RANKS = "JQK"


@functools.lru_cache(maxsize=None)
def kuhn_tree() -> GameTree:
    return build_tree(KuhnRules())


@functools.lru_cache(maxsize=None)
def leduc_tree() -> GameTree:
    return build_tree(LeducRules())


def _target_policy(tree: GameTree, spec: str) -> np.ndarray:
    """`best_response_to`: "uniform", or a JSON file of {information-set key: action probabilities} (the key
    format of gametheory/exploitability.py `tabular_policy`; sets it leaves out play uniformly)."""
    if spec == "uniform":
        return uniform_policy(tree)
    try:
        with open(spec) as f:
            table = json.load(f)
        return tabular_policy(tree, table)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"best_response_to={spec!r}: 'uniform' or a JSON file of {{information-set key: action "
                         f"probabilities}} ({type(err).__name__}: {err})") from None


@functools.lru_cache(maxsize=None)
def equilibrium(game: str) -> np.ndarray:
    """[I, A]: an equilibrium of the game (Kuhn: alpha = 1/3; Leduc: CFR+, 2000 iterations)."""
    if game == "kuhn":
        return cfr.kuhn_equilibrium(kuhn_tree(), 1 / 3)
    return np.asarray(cfr.solve(leduc_tree(), 2000))


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _said(acts: list[int], seat: int, names: tuple[str, ...]) -> str:
    """'you pass, they bet' from the seat's point of view (seat 0 moves first in every round)."""
    return ", ".join(("you " if i % 2 == seat else "they ") + names[a] for i, a in enumerate(acts))


class _PokerText:
    """How a game's histories read to a seat (rules of text only: the numbers come from the tree)."""

    marks: tuple[str, ...] = ()  # each move's symbol in a compact view

    def __init__(self, tree: GameTree, intro: str, moves: tuple[str, ...], rules: bool = True,
                 compact: bool = False):
        self.tree, self.intro, self.moves, self.compact = tree, intro if rules else "", moves, compact

    def header(self, seat_line: str) -> list[str]:
        return [self.intro, seat_line] if self.intro else [seat_line]

    def view(self, n: int, seat: int) -> str:
        raise NotImplementedError

    def ending(self, n: int, seat: int, folded: int | None, other_card: str) -> str:
        won = float(self.tree.payoff[n, seat])
        chips = f"{abs(won):g} chip" + ("" if abs(won) == 1 else "s")
        result = f"You win {chips}." if won > 0 else f"You lose {chips}." if won < 0 else "A tie: nobody wins."
        if folded is not None:
            return ("You fold. " if folded == seat else "They fold. ") + result
        return f"Showdown: they hold {other_card}. {result}"

    def symbols(self, n: int, seat: int, card: str, table: str | None, rounds: list[list[int]], other: str,
                folded: int | None) -> str:
        """The compact view: `P<seat>:<card>[:<table>];<round>/<round>;<? | . | end>`."""
        head = f"P{seat + 1}:{card}" + ("" if table is None else f":{table}")
        bets = "/".join("".join(self.marks[a] for a in acts) for acts in rounds)
        if self.tree.player[n] == TERMINAL:
            tail = ("" if folded is not None else other) + f"{float(self.tree.payoff[n, seat]):+g}"
        else:
            tail = "?" if self.tree.player[n] == seat else "."
        return f"{head};{bets};{tail}\n"

    def turn(self, n: int, seat: int, pot: int) -> str:
        player = self.tree.player[n]
        if player == seat:
            legal = np.flatnonzero(self.tree.infoset_legal[self.tree.infoset[n]])
            return f"Pot: {pot}. Your move: {_join([self.moves[a] for a in legal])}?"
        return f"Pot: {pot}. Their move."


class _KuhnText(_PokerText):
    marks = ("-", "+")  # pass (check or fold), bet (or call)

    def __init__(self, tree, rules=True, compact=False):
        super().__init__(tree, "Kuhn poker. Cards J < Q < K; each player antes 1; one bet of 1.", ("pass", "bet"),
                         rules, compact)

    def view(self, n, seat):
        h = self.tree.histories[n]
        acts = list(h[2:])
        folded = {"bp": 1, "pbp": 0}.get("".join("pb"[a] for a in acts))  # the seat that passed facing a bet
        if self.compact:
            return self.symbols(n, seat, RANKS[h[seat]], None, [acts], RANKS[h[1 - seat]], folded)
        lines = self.header(f"You are player {seat + 1}. Your card: {RANKS[h[seat]]}.")
        lines.append("Betting: " + (_said(acts, seat, self.moves) if acts else "none yet") + ".")
        pot = 2 + sum(acts)
        if self.tree.player[n] == TERMINAL:
            lines.append(self.ending(n, seat, folded, RANKS[h[1 - seat]]))
        else:
            lines.append(self.turn(n, seat, pot))
        return "\n".join(lines) + "\n"


class _LeducText(_PokerText):
    marks = ("-", "=", "+")  # fold, call, raise

    def __init__(self, tree, rules=True, compact=False):
        super().__init__(tree, "Leduc poker. Cards J < Q < K, two of each; a pair with the table card beats any "
                               "other hand.", ("fold", "call", "raise"), rules, compact)

    def view(self, n, seat):
        h = self.tree.histories[n]
        rounds, public, contrib, folded = parse(h)
        if self.compact:
            return self.symbols(n, seat, RANKS[h[seat] // 2], None if public is None else RANKS[public // 2],
                                rounds, RANKS[h[1 - seat] // 2], folded)
        lines = self.header(f"You are player {seat + 1}. Your card: {RANKS[h[seat] // 2]}."
                            + ("" if public is None else f" Table card: {RANKS[public // 2]}."))
        said = [f"Round {r + 1}: " + _said(acts, seat, self.moves) + "." for r, acts in enumerate(rounds) if acts]
        lines.append(" ".join(said) if said else "No bets yet.")
        if self.tree.player[n] == TERMINAL:
            lines.append(self.ending(n, seat, folded, RANKS[h[1 - seat] // 2]))
        else:
            lines.append(self.turn(n, seat, sum(contrib)))
        return "\n".join(lines) + "\n"


@struct.dataclass
class PokerState(TextState):
    node: jax.Array  # [] int32: the node of the game tree


class _Poker(TextEnv):
    """A poker game's tree as a token game (subclasses name the tree and its words)."""

    max_movers = 1
    appends_actions = False  # every observation is rewritten from the seat's information
    game = ""

    def __init__(self, tree: GameTree, text: _PokerText, tokenizer=None, capacity: int | None = None,
                 max_action_tokens: int = 16, best_response_to: str = "uniform"):
        super().__init__(tokenizer, ("player_1", "player_2"), capacity or 1, max_action_tokens)
        self.tree = tree
        self.best_response_to = _target_policy(tree, best_response_to)  # [I, A]: what 'best_response' exploits
        n = tree.sink
        # every (node, seat) view, encoded once; rows repeat across nodes a seat cannot tell apart
        texts, row_of = [], {}
        view_row = np.zeros((n + 1, 2), np.int32)
        for node in range(n):
            if tree.player[node] == CHANCE:
                continue  # never observed: chance moves are taken inside the step that reaches them
            for seat in (0, 1):
                t = text.view(node, seat)
                view_row[node, seat] = row_of.setdefault(t, len(texts))
                if view_row[node, seat] == len(texts):
                    texts.append(t)
        self.view_texts = tuple(texts)
        self.views = self.codec.table_from_ids(encode_many(self.codec, texts))
        if capacity is None:  # the longest observation in this tokenizer
            self.capacity = self.views.width
            self.observation_space = type(self.observation_space)(self.capacity, self.codec.vocab_size)
        if self.views.width > self.capacity:
            raise ValueError(f"capacity={capacity} cannot hold the longest observation ({self.views.width} tokens)")
        self.view_row = jnp.asarray(view_row)
        self.move_words = text.moves
        self.moves = self._action_table([f"Move: {w}" for w in text.moves])
        self.action_candidates = self.moves.rows()  # candidate k: action k
        self.move_set = parsing.StringSet([f"move{w}" for w in text.moves])
        legal = np.zeros((n + 1, len(text.moves)), bool)
        for node in range(n):
            if tree.player[node] in (0, 1):
                legal[node] = tree.infoset_legal[tree.infoset[node], : len(text.moves)]
        self.legal = jnp.asarray(legal)  # [N + 1, K]
        self.child = jnp.asarray(tree.child)
        self.chance_probs = jnp.asarray(tree.chance)
        self.player = jnp.asarray(tree.player)
        self.payoff = jnp.asarray(tree.payoff)
        self.node_infoset = jnp.asarray(tree.infoset)  # [N + 1]
        self.node_features = jnp.asarray(history_features(tree))  # [N + 1, F]: `world_state`
        self._setup([list(self.views.ids[0, : int(self.views.lens[0])])], [self.views.width])

    @property
    def default_params(self) -> TextParams:
        return TextParams(max_steps=len(self.tree.levels))

    # ---- tree walking ---------------------------------------------------------------------------------------
    def _through_chance(self, key: jax.Array, node: jax.Array) -> jax.Array:
        """Follow chance nodes (at most two in a row: the deal) to the next decision or the end."""
        for _ in range(2):
            key, k = jax.random.split(key)
            probs = self.chance_probs[node]
            pick = jax.random.categorical(k, jnp.log(jnp.maximum(probs, 1e-30)))
            node = jnp.where(self.player[node] == CHANCE, self.child[node, pick], node)
        return node

    def _observe(self, state, node):
        rows = self.view_row[node]  # [2]
        width = state.buf.shape[1]
        ids = jnp.pad(self.views.ids[rows], ((0, 0), (0, width - self.views.width)),
                      constant_values=self.codec.pad_id).astype(state.buf.dtype)
        return state.replace(buf=ids, length=self.views.lens[rows].astype(jnp.int32))

    def reset(self, key, params=None):
        node = self._through_chance(key, jnp.int32(0))
        state = PokerState(**self._base_state(jnp.arange(2) == self.player[node]), node=node)
        state = self._observe(state, node)
        return self.get_obs(state), state

    def state_at(self, history) -> PokerState:
        """The state at a decision or terminal node given by its history (OpenSpiel's action numbers, cards
        included): for tests, analysis and replaying a hand."""
        node = jnp.int32(self.tree.node(tuple(history)))
        if self.tree.player[int(node)] == CHANCE:
            raise ValueError(f"history {tuple(history)} stops at a chance node")
        state = PokerState(**self._base_state(jnp.arange(2) == self.player[node]), node=node)
        state = state.replace(done=self.player[node] == TERMINAL)
        return self._observe(state, node)

    def parse_move(self, tokens: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Action index from `Move: <word>` (tokens [M], length []); ok False if it names no action."""
        return parsing.match_reply(self.codec, self.move_set, tokens, length)

    def _step(self, key, state, tokens, length, params):
        me = self.player[state.node]  # a decision node: 0 or 1
        move, parsed = self.parse_move(tokens[me], length[me])
        legal = parsed & self.legal[state.node, move]
        node = self._through_chance(key, self.child[state.node, move])
        seat = jnp.arange(2)
        is_me = seat == me
        over = self.player[node] == TERMINAL
        reward = jnp.where(legal, jnp.where(over, self.payoff[node], 0.0), jnp.where(is_me, -2.0, 0.0))
        new = self._observe(state, jnp.where(legal, node, state.node))
        new = new.replace(turn=state.turn + 1, node=jnp.where(legal, node, state.node),
                          active=legal & ~over & (seat == self.player[node]))
        info = {"format_error": ~parsed & is_me, "illegal": ~legal & is_me,
                "won": legal & over & (self.payoff[node] > 0), "draw": jnp.broadcast_to(legal & over & (
                    self.payoff[node][0] == 0), (2,))}
        return new, reward, ~legal | over, jnp.bool_(False), info

    def world_state(self, state, params=None) -> jax.Array:
        """[F]: the hand so far as one-hots (every card dealt, every move, the mover; gametheory/tree.py
        `history_features`): the input of a centralized critic (`critic.kind="world_state"`), whose value then
        knows both hands, a baseline without the noise of the card a seat cannot see. The policy reads its own
        view only."""
        return self.node_features[state.node]

    # ---- candidates and built-in players --------------------------------------------------------------------
    def candidate_mask(self, state) -> jax.Array:
        """[2, K]: the legal actions (for both seats: only the mover acts)."""
        return jnp.broadcast_to(self.legal[state.node], (2, self.legal.shape[1]))

    def legal_action_mask(self, state) -> jax.Array:
        return self.legal[state.node]

    def move_action(self, state, move: jax.Array) -> TextAction:
        actor = jnp.arange(2) == self.player[state.node]
        return self.make_action(self.moves, jnp.broadcast_to(move, (2,)), actor)

    def policy_action(self, key, state, policy: jax.Array) -> TextAction:
        """The mover's action drawn from a tabular policy [I, A] (as in gametheory.exploitability)."""
        probs = policy[jnp.minimum(self.node_infoset[state.node], policy.shape[0] - 1), : self.legal.shape[1]]
        probs = jnp.where(self.legal[state.node], probs, 0.0)
        probs = jnp.where(probs.sum() > 0, probs, self.legal[state.node])
        move = jax.random.categorical(key, jnp.log(jnp.maximum(probs, 1e-30)) + jnp.where(probs > 0, 0.0, -1e30))
        return self.move_action(state, move)

    builtin_players = ("random", "equilibrium", "best_response")  # the kinds `opponent_action` plays

    def opponent_action(self, key, state, kind: str = "random") -> TextAction:
        """A built-in player for the seat to move: 'random' (uniform legal), 'equilibrium' (a Nash policy) or
        'best_response' (the exact best response to the env's `best_response_to` policy: what a player who knows
        that policy wins against it, the yardstick of how exploitable it is)."""
        if kind == "random":
            return self.policy_action(key, state, jnp.asarray(self.tree.infoset_legal, jnp.float32))
        if kind == "equilibrium":
            with jax.ensure_compile_time_eval():  # solved once, on first use (Leduc: CFR+, a few seconds)
                policy = jnp.asarray(equilibrium(self.game))
            return self.policy_action(key, state, policy)
        if kind == "best_response":
            with jax.ensure_compile_time_eval():  # the best action at each information set, computed once
                best = exploitability(self.tree, self.best_response_to).best_response  # [I]
                policy = jax.nn.one_hot(best, self.tree.infoset_legal.shape[1], dtype=jnp.float32)
            return self.policy_action(key, state, policy)
        raise ValueError(f"opponent kind must be one of {', '.join(self.builtin_players)}, got {kind!r}")

    def random_action(self, key, state) -> TextAction:
        return self.opponent_action(key, state, "random")

    def infoset_views(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows [I] into `self.views`, seats [I]): the observation at each information set of the tree."""
        first = np.full(self.tree.num_infosets, -1)
        for node in range(self.tree.sink - 1, -1, -1):
            i = self.tree.infoset[node]
            if i < self.tree.num_infosets:
                first[i] = node
        seats = self.tree.infoset_player[:-1]
        return np.asarray(self.view_row)[first, seats], seats


class KuhnPoker(_Poker):
    game = "kuhn"

    def __init__(self, tokenizer=None, capacity: int | None = None, max_action_tokens: int = 16, rules: bool = True,
                 best_response_to: str = "uniform", compact: bool = False):
        tree = kuhn_tree()
        super().__init__(tree, _KuhnText(tree, rules, compact), tokenizer, capacity, max_action_tokens,
                         best_response_to)


class LeducPoker(_Poker):
    game = "leduc"

    def __init__(self, tokenizer=None, capacity: int | None = None, max_action_tokens: int = 16, rules: bool = True,
                 best_response_to: str = "uniform", compact: bool = False):
        tree = leduc_tree()
        super().__init__(tree, _LeducText(tree, rules, compact), tokenizer, capacity, max_action_tokens,
                         best_response_to)
