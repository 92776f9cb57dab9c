"""Small two-player zero-sum games of imperfect information, solved exactly.

A game's rules (`kuhn.py`, `leduc.py`: pure Python over action histories) unfold once into a `GameTree` of
static arrays (`tree.py`); on that tree `exploitability.py` computes, in JAX with static shapes, each seat's
exact best response to a tabular policy, NashConv and exploitability, and `cfr.py` solves the game (CFR+).
The token games of envs/text/poker.py walk the same trees, so what a trained LM plays can be measured against
a Nash equilibrium inside the compiled update.
"""
