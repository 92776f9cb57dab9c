"""Kuhn poker (OpenSpiel's `kuhn_poker`): a deck of J, Q, K; each player antes 1 and gets one card; player 0
acts first; actions 0 = pass (check / fold), 1 = bet (bet / call), one bet of 1 at most.

Histories are OpenSpiel's: (card of player 0, card of player 1, actions...), cards 0 = J, 1 = Q, 2 = K.
Information-set key: `"<card>|<public>|<betting>"`, e.g. `"K||pb"`: seat 0 holding K after pass, bet (the
betting's length says whose turn it is); Kuhn has no public card, so the middle field is empty. 12 information
sets, 6 per seat.
"""

from __future__ import annotations

from jaxmarl_llm.gametheory.tree import CHANCE, TERMINAL

CARDS = "JQK"
PASS, BET = 0, 1
_ENDS = ("pp", "bp", "bb", "pbp", "pbb")


class KuhnRules:
    num_actions = 3  # two actions; three chance outcomes (the first card)
    action_names = ("p", "b")

    @staticmethod
    def betting(h) -> str:
        return "".join("pb"[a] for a in h[2:])

    def to_move(self, h) -> int:
        if len(h) < 2:
            return CHANCE
        return TERMINAL if self.betting(h) in _ENDS else (len(h) - 2) % 2

    def outcomes(self, h):
        left = [c for c in range(3) if c not in h]
        return [(c, 1.0 / len(left)) for c in left]

    def legal(self, h):
        return [PASS, BET]

    def returns(self, h) -> tuple[float, float]:
        b = self.betting(h)
        if b in ("bp", "pbp"):  # the other folded: the bettor takes its ante
            win = 0 if b == "bp" else 1
        else:  # showdown for 1 (pp) or 2 (a called bet)
            win = 0 if h[0] > h[1] else 1
        stake = 2.0 if b in ("bb", "pbb") else 1.0
        return (stake, -stake) if win == 0 else (-stake, stake)

    def info_key(self, h) -> str:
        seat = (len(h) - 2) % 2
        return f"{CARDS[h[seat]]}||{self.betting(h)}"
