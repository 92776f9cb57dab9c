"""CFR+ (Tammelin 2014) on a `GameTree`: alternating updates, regrets floored at 0, the average strategy
weighted by iteration. Its average policy's exploitability falls roughly as 1/T; used to build the
equilibrium players of the poker games and as a reference point for learning runs.

    average = solve(tree, iterations=1000)     # [I, A], jittable; exploitability(tree, average) ~ 0
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.gametheory.exploitability import _edge_probs, _reach, counterfactual_values, normalize
from jaxmarl_llm.gametheory.tree import GameTree


def regret_matching(tree: GameTree, regret: jax.Array) -> jax.Array:
    """[I + 1, A] regrets -> the policy that plays each legal action in proportion to its positive regret."""
    return normalize(tree, jnp.maximum(regret, 0.0))


def own_reach(tree: GameTree, pi: jax.Array, seat: int) -> jax.Array:
    """[I + 1]: the probability that `seat`'s own moves lead to each of its information sets (perfect recall:
    the same for every history of a set)."""
    probs = _edge_probs(tree, pi)
    player = jnp.asarray(tree.player)
    mine_only = jnp.where((player == seat)[:, None], probs, 1.0)
    reach = _reach(tree, mine_only, None)
    return jax.ops.segment_max(jnp.where(player == seat, reach, 0.0), jnp.asarray(tree.infoset),
                               num_segments=tree.num_infosets + 1)


def reach_weighted(tree: GameTree, pi: jax.Array, weight: jax.Array | float = 1.0) -> jax.Array:
    """[I + 1, A]: `weight` x each set's own reach x pi (every set for its own seat). Summed over iterates and
    normalised (`exploitability.normalize`) it is the behaviour policy of their mixture: picking one iterate
    per hand (with probability proportional to `weight`) and playing it throughout plays exactly this."""
    pi = normalize(tree, pi)
    seat_of = jnp.asarray(tree.infoset_player)
    reach = jnp.where(seat_of == 0, own_reach(tree, pi, 0), own_reach(tree, pi, 1))  # [I + 1]
    return weight * reach[:, None] * pi


@functools.partial(jax.jit, static_argnums=(0, 1))
def solve(tree: GameTree, iterations: int) -> jax.Array:
    """The CFR+ average policy after `iterations` [I, A] (jit caches per tree and iteration count)."""
    n_sets, a = tree.num_infosets + 1, tree.num_actions
    seat_of = jnp.asarray(tree.infoset_player)

    def step(carry, t):
        regret, avg = carry
        for seat in (0, 1):
            pi = regret_matching(tree, regret)
            cf = counterfactual_values(tree, pi, seat)  # [I + 1, A]
            gain = cf - (pi * cf).sum(-1, keepdims=True)
            mine = (seat_of == seat)[:, None]
            regret = jnp.where(mine, jnp.maximum(regret + gain, 0.0), regret)
            avg = avg + jnp.where(mine, t * own_reach(tree, pi, seat)[:, None] * pi, 0.0)
        return (regret, avg), None

    zeros = jnp.zeros((n_sets, a), jnp.float32)
    (_, avg), _ = jax.lax.scan(step, (zeros, zeros), jnp.arange(1, iterations + 1, dtype=jnp.float32))
    return normalize(tree, avg)[:-1]


def kuhn_equilibrium(tree: GameTree, alpha: float = 1 / 3) -> np.ndarray:
    """[I, A]: the member of Kuhn poker's equilibrium family with parameter alpha in [0, 1/3] (Kuhn 1950): seat
    0 bets J with alpha, K with 3 alpha, calls a bet with Q at alpha + 1/3 and K always; seat 1 bets J after a
    pass with 1/3, K always, and calls a bet with Q at 1/3, K always. Every member's exploitability is 0."""
    if not 0.0 <= alpha <= 1 / 3 + 1e-9:
        raise ValueError(f"alpha must be in [0, 1/3], got {alpha}")
    bet = {"J||": alpha, "Q||": 0.0, "K||": 3 * alpha,  # seat 0 opens
           "J||pb": 0.0, "Q||pb": alpha + 1 / 3, "K||pb": 1.0,  # seat 0 facing a bet after passing
           "J||p": 1 / 3, "Q||p": 0.0, "K||p": 1.0,  # seat 1 after a pass
           "J||b": 0.0, "Q||b": 1 / 3, "K||b": 1.0}  # seat 1 facing a bet
    out = np.zeros((tree.num_infosets, tree.num_actions), np.float32)
    for key, p in bet.items():
        out[tree.index(key), :2] = (1.0 - p, p)
    return out
