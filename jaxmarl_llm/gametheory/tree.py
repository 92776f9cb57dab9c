"""An extensive-form game unfolded into static arrays, built once from its rules.

    tree = build_tree(rules)          # numpy, outside jit
    tree.child[n, a]                  # the node after action (or chance outcome) a at node n; `tree.sink` if none

Nodes are numbered breadth first, so the nodes of one depth are one contiguous range (`levels`); every
information set's histories have one depth (true of the poker games: a key holds the whole betting sequence),
which lets a backward pass treat a level at a time. Node `sink` (= N) is an extra absorbing row every missing
child points to; arrays indexed by node have N + 1 rows, by information set I + 1 (row I: none).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence

import numpy as np

CHANCE, TERMINAL = -1, -2


class Rules(Protocol):
    """A game over histories (tuples of ints: actions and chance outcomes, OpenSpiel's numbering)."""

    num_actions: int  # the widest choice: actions, and chance outcomes
    action_names: tuple[str, ...]  # one letter per action, used in information-set keys

    def to_move(self, h: tuple[int, ...]) -> int: ...  # 0 / 1, CHANCE or TERMINAL
    def outcomes(self, h: tuple[int, ...]) -> list[tuple[int, float]]: ...  # chance: (outcome, probability)
    def legal(self, h: tuple[int, ...]) -> list[int]: ...
    def returns(self, h: tuple[int, ...]) -> tuple[float, float]: ...
    def info_key(self, h: tuple[int, ...]) -> str: ...  # the mover's information set


@dataclasses.dataclass(frozen=True, eq=False)
class GameTree:
    player: np.ndarray  # [N + 1] int32: 0 / 1 to move, CHANCE, TERMINAL (the sink: TERMINAL)
    child: np.ndarray  # [N + 1, A] int32: the next node, `sink` where there is none
    chance: np.ndarray  # [N + 1, A] float32: outcome probabilities at chance nodes, 0 elsewhere
    infoset: np.ndarray  # [N + 1] int32: the mover's information set (I at chance / terminal nodes)
    payoff: np.ndarray  # [N + 1, 2] float32: returns at terminal nodes, 0 elsewhere
    levels: tuple[tuple[int, int], ...]  # [start, stop) node ranges by depth, root first
    histories: tuple[tuple[int, ...], ...]  # [N] each node's history
    keys: tuple[str, ...]  # [I] each information set's key
    infoset_player: np.ndarray  # [I + 1] int32 (row I: -1)
    infoset_legal: np.ndarray  # [I + 1, A] bool (row I: none)
    action_names: tuple[str, ...]

    @property
    def sink(self) -> int:
        return len(self.histories)

    @property
    def num_infosets(self) -> int:
        return len(self.keys)

    @property
    def num_actions(self) -> int:
        return self.child.shape[1]

    def index(self, key: str) -> int:
        """The information set of `key` (KeyError naming a few keys if unknown)."""
        try:
            return self._key_index[key]
        except KeyError:
            raise KeyError(f"no information set {key!r}; keys look like {self.keys[:3]}") from None

    @property
    def _key_index(self) -> dict[str, int]:
        if "_index" not in self.__dict__:
            object.__setattr__(self, "_index", {k: i for i, k in enumerate(self.keys)})
        return self.__dict__["_index"]

    def node(self, history: Sequence[int]) -> int:
        """The node of a history (KeyError if the game never reaches it)."""
        if "_nodes" not in self.__dict__:
            object.__setattr__(self, "_nodes", {h: n for n, h in enumerate(self.histories)})
        return self.__dict__["_nodes"][tuple(history)]


def build_tree(rules: Rules) -> GameTree:
    """Unfold `rules` breadth first from the empty history."""
    a = rules.num_actions
    histories: list[tuple[int, ...]] = [()]
    edges: list[dict[int, int]] = []
    probs: list[dict[int, float]] = []
    depth = [0]
    n = 0
    while n < len(histories):  # breadth first: children are appended after every node of this depth
        h = histories[n]
        mover = rules.to_move(h)
        kids, p = {}, {}
        if mover == CHANCE:
            moves = rules.outcomes(h)
            p = {o: pr for o, pr in moves}
            moves = [o for o, _ in moves]
        elif mover == TERMINAL:
            moves = []
        else:
            moves = rules.legal(h)
        for m in moves:
            if not 0 <= m < a:
                raise ValueError(f"history {h}: move {m} outside 0..{a - 1}")
            kids[m] = len(histories)
            histories.append(h + (m,))
            depth.append(depth[n] + 1)
        edges.append(kids)
        probs.append(p)
        n += 1
    num = len(histories)
    player = np.full(num + 1, TERMINAL, np.int32)
    child = np.full((num + 1, a), num, np.int32)
    chance = np.zeros((num + 1, a), np.float32)
    payoff = np.zeros((num + 1, 2), np.float32)
    infoset = np.zeros(num + 1, np.int32)
    keys: dict[str, int] = {}
    key_player: list[int] = []
    key_legal: list[tuple[int, ...]] = []
    key_depth: list[int] = []
    for i, h in enumerate(histories):
        mover = rules.to_move(h)
        player[i] = mover
        for m, c in edges[i].items():
            child[i, m] = c
        for m, pr in probs[i].items():
            chance[i, m] = pr
        if mover == TERMINAL:
            payoff[i] = rules.returns(h)
        infoset[i] = -1
        if mover in (0, 1):
            key = rules.info_key(h)
            if key not in keys:
                keys[key] = len(keys)
                key_player.append(mover)
                key_legal.append(tuple(sorted(edges[i])))
                key_depth.append(depth[i])
            j = keys[key]
            if (key_player[j], key_legal[j], key_depth[j]) != (mover, tuple(sorted(edges[i])), depth[i]):
                raise ValueError(f"information set {key!r}: its histories differ in mover, legal moves or depth")
            infoset[i] = j
    num_i = len(keys)
    infoset[infoset < 0] = num_i
    legal = np.zeros((num_i + 1, a), bool)
    for j, moves in enumerate(key_legal):
        legal[j, list(moves)] = True
    starts = [0] + [i for i in range(1, num) if depth[i] != depth[i - 1]] + [num]
    return GameTree(player=player, child=child, chance=chance, infoset=infoset, payoff=payoff,
                    levels=tuple(zip(starts[:-1], starts[1:])), histories=tuple(histories), keys=tuple(keys),
                    infoset_player=np.asarray(key_player + [-1], np.int32), infoset_legal=legal,
                    action_names=tuple(rules.action_names))


def history_features(tree: GameTree) -> np.ndarray:
    """[N + 1, F] float32: each node's whole history as one-hots, what no seat sees alone: the k-th chance
    outcome (the cards) and the j-th move, each over `num_actions` values (zeros where not yet drawn or made),
    then the mover (two, zeros at chance and terminal nodes; the sink row all zeros). A centralized critic's
    input (envs/text/poker.py `world_state`): a value that knows every card is a baseline without the noise of
    the opponent's hand."""
    a = tree.num_actions
    draws = moves = 0
    kinds = []  # per node: (chance outcomes, moves) along its history
    for h in tree.histories:
        node, outcomes, acts = 0, [], []
        for x in h:
            (outcomes if tree.player[node] == CHANCE else acts).append(x)
            node = tree.child[node, x]
        kinds.append((outcomes, acts))
        draws, moves = max(draws, len(outcomes)), max(moves, len(acts))
    out = np.zeros((tree.sink + 1, (draws + moves) * a + 2), np.float32)
    for n, (outcomes, acts) in enumerate(kinds):
        for k, x in enumerate(outcomes + [None] * (draws - len(outcomes)) + acts):
            if x is not None:
                out[n, k * a + x] = 1.0
        if tree.player[n] in (0, 1):
            out[n, -2 + tree.player[n]] = 1.0
    return out
