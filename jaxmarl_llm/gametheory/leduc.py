"""Leduc poker (OpenSpiel's `leduc_poker`): six cards (J, Q, K in two suits), an ante of 1 each, one private card
each, two betting rounds with a public card dealt between them; player 0 acts first in each round; actions
0 = fold (only facing a raise), 1 = call (check / call), 2 = raise (2 chips in round 1, 4 in round 2, at most two
raises a round). At showdown a private card that pairs the public card wins, else the higher rank; equal ranks
split.

Histories are OpenSpiel's: (card of player 0, card of player 1, round-1 actions..., public card, round-2
actions...), cards 0..5 with rank card // 2 (0, 1 = J; 2, 3 = Q; 4, 5 = K) and suit card % 2.
Information-set key: `"<card>|<public>|<betting>"`, cards named by rank and suit (`Js Jh Qs Qh Ks Kh`), the
public field empty in round 1, the betting in letters f / c / r with rounds split by `/`: `"Qh|Ks|rc/r"` is
seat 1 holding Qh, Ks on the table, after raise, call; raise. 936 information sets (468 per seat), as OpenSpiel.
"""

from __future__ import annotations

from jaxmarl_llm.gametheory.tree import CHANCE, TERMINAL

FOLD, CALL, RAISE = 0, 1, 2
RAISE_SIZE = (2, 4)
MAX_RAISES = 2


def card_name(card: int) -> str:
    return "JQK"[card // 2] + "sh"[card % 2]


def parse(h):
    """(rounds: lists of actions, public card or None, contributions [2], folded seat or None, round over)."""
    rounds, public, i = [[]], None, 2
    contrib, folded = [1, 1], None
    while i < len(h):
        r = len(rounds) - 1
        acts = rounds[r]
        if round_over(acts) and r == 0 and public is None:
            public = h[i]
            rounds.append([])
            i += 1
            continue
        a = h[i]
        seat = len(acts) % 2
        if a == FOLD:
            folded = seat
        elif a == CALL:
            contrib[seat] = max(contrib)
        else:
            contrib[seat] = max(contrib) + RAISE_SIZE[r]
        acts.append(a)
        i += 1
    return rounds, public, contrib, folded


def round_over(acts) -> bool:
    """A call that answers a raise, or a check after a check; a fold ends the game."""
    return bool(acts) and (acts[-1] == FOLD or (acts[-1] == CALL and len(acts) >= 2))


def strength(card: int, public: int) -> int:
    rank = card // 2
    return 100 + rank if rank == public // 2 else rank


class LeducRules:
    num_actions = 6  # three actions; six chance outcomes (the cards)
    action_names = ("f", "c", "r")

    def to_move(self, h) -> int:
        if len(h) < 2:
            return CHANCE
        rounds, public, _, folded = parse(h)
        if folded is not None:
            return TERMINAL
        if round_over(rounds[-1]):
            return TERMINAL if len(rounds) == 2 else CHANCE
        return len(rounds[-1]) % 2

    def outcomes(self, h):
        left = [c for c in range(6) if c not in h[:2]]
        return [(c, 1.0 / len(left)) for c in left]

    def legal(self, h):
        rounds, _, _, _ = parse(h)
        acts = rounds[-1]
        facing = bool(acts) and acts[-1] == RAISE
        moves = ([FOLD] if facing else []) + [CALL]
        if sum(a == RAISE for a in acts) < MAX_RAISES:
            moves.append(RAISE)
        return moves

    def returns(self, h) -> tuple[float, float]:
        rounds, public, contrib, folded = parse(h)
        if folded is not None:
            loser = folded
        else:
            s0, s1 = strength(h[0], public), strength(h[1], public)
            if s0 == s1:
                return (0.0, 0.0)
            loser = 1 if s0 > s1 else 0
        won = float(contrib[loser])
        return (won, -won) if loser == 1 else (-won, won)

    def info_key(self, h) -> str:
        rounds, public, _, _ = parse(h)
        seat = len(rounds[-1]) % 2
        betting = "/".join("".join("fcr"[a] for a in acts) for acts in rounds)
        return f"{card_name(h[seat])}|{'' if public is None else card_name(public)}|{betting}"
