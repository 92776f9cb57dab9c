"""Kuhn and Leduc poker's rules, exact exploitability and CFR+, against known values and OpenSpiel."""

import jax
import numpy as np
import pytest

from jaxmarl_llm.gametheory import cfr
from jaxmarl_llm.gametheory import exploitability as ex
from jaxmarl_llm.gametheory.kuhn import KuhnRules
from jaxmarl_llm.gametheory.leduc import LeducRules
from jaxmarl_llm.gametheory.tree import CHANCE, TERMINAL, build_tree

KUHN, LEDUC = build_tree(KuhnRules()), build_tree(LeducRules())
TREES = {"kuhn_poker": KUHN, "leduc_poker": LEDUC}


def test_trees_have_openspiels_sizes():
    # OpenSpiel: kuhn_poker 58 histories and 12 information states, leduc_poker 9457 and 936
    assert (len(KUHN.histories), KUHN.num_infosets) == (58, 12)
    assert (len(LEDUC.histories), LEDUC.num_infosets) == (9457, 936)


@pytest.mark.parametrize("tree,want", [(KUHN, 0.458333), (LEDUC, 2.373611)])
def test_uniform_policy_exploitability_is_the_known_value(tree, want):
    r = jax.jit(lambda p: ex.exploitability(tree, p))(ex.uniform_policy(tree))
    np.testing.assert_allclose(float(r.exploitability), want, atol=2e-5)
    np.testing.assert_allclose(float(r.nash_conv), 2 * want, atol=4e-5)
    np.testing.assert_allclose(float(r.policy_value.sum()), 0.0, atol=1e-6)  # zero-sum


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.25, 1 / 3])
def test_every_member_of_kuhns_equilibrium_family_is_unexploitable(alpha):
    r = ex.exploitability(KUHN, cfr.kuhn_equilibrium(KUHN, alpha))
    assert abs(float(r.exploitability)) < 1e-6
    np.testing.assert_allclose(np.asarray(r.policy_value), [-1 / 18, 1 / 18], atol=1e-6)  # the game's value


def test_a_deviation_from_equilibrium_is_exploited():
    pol = cfr.kuhn_equilibrium(KUHN, 0.2)
    pol[KUHN.index("Q||b"), :2] = (1.0, 0.0)  # seat 1 never calls with Q: bluffs with J now pay
    r = ex.exploitability(KUHN, pol)
    assert float(r.exploitability) > 0.01
    assert int(r.best_response[KUHN.index("J||")]) == 1  # seat 0's best response bets its J


def test_tabular_policy_reads_keys_and_refuses_unknown_ones():
    pol = ex.tabular_policy(KUHN, {"K||": [0.0, 1.0]})
    np.testing.assert_allclose(pol[KUHN.index("K||")], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(pol[KUHN.index("J||")], [0.5, 0.5, 0.0])
    with pytest.raises(KeyError, match="no information set 'K|pb'"):
        ex.tabular_policy(KUHN, {"K|pb": [1.0, 0.0]})
    with pytest.raises(ValueError, match=r"\[12, 3\]"):
        ex.exploitability(KUHN, np.ones((5, 3)))


@pytest.mark.parametrize("name,iterations,bound", [("kuhn_poker", 300, 2e-3), ("leduc_poker", 300, 5e-3)])
def test_cfr_plus_approaches_equilibrium(name, iterations, bound):
    tree = TREES[name]
    avg = cfr.solve(tree, iterations)
    assert float(ex.exploitability(tree, avg).exploitability) < bound


# ---- OpenSpiel, the reference ------------------------------------------------------------------------------
pyspiel = pytest.importorskip("pyspiel")


def _walk(state, visit):
    visit(state)
    if not state.is_terminal():
        moves = [o for o, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
        for a in moves:
            _walk(state.child(a), visit)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_rules_equal_openspiels_at_every_history(name):
    """Every history OpenSpiel reaches is a node of our tree with the same mover, legal moves, chance
    probabilities and returns, and the same information-set partition."""
    tree, seen, keys_of = TREES[name], [0], {}
    game = pyspiel.load_game(name)

    def visit(s):
        n = tree.node(s.history())
        seen[0] += 1
        if s.is_terminal():
            assert tree.player[n] == TERMINAL
            np.testing.assert_allclose(tree.payoff[n], s.returns(), err_msg=str(s.history()))
        elif s.is_chance_node():
            assert tree.player[n] == CHANCE
            for o, p in s.chance_outcomes():
                assert abs(tree.chance[n, o] - p) < 1e-6
        else:
            assert tree.player[n] == s.current_player()
            i = tree.infoset[n]
            assert sorted(np.flatnonzero(tree.infoset_legal[i])) == sorted(s.legal_actions())
            keys_of.setdefault(s.information_state_string(), set()).add(i)

    _walk(game.new_initial_state(), visit)
    assert seen[0] == len(tree.histories)
    assert all(len(v) == 1 for v in keys_of.values()) and len(keys_of) == tree.num_infosets  # a bijection


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_exploitability_equals_openspiels_on_seeded_random_policies(name):
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms import exploitability as os_expl

    tree, game = TREES[name], pyspiel.load_game(name)
    ours_of = {}

    def visit(s):
        if not s.is_terminal() and not s.is_chance_node():
            ours_of[s.information_state_string()] = tree.infoset[tree.node(s.history())]

    _walk(game.new_initial_state(), visit)
    rng = np.random.default_rng(0)
    for _ in range(3):
        pol = rng.random((tree.num_infosets, tree.num_actions)).astype(np.float32) ** 3
        pol = np.asarray(ex.normalize(tree, pol))[:-1]
        ref = os_policy.TabularPolicy(game)
        for key, row in ref.state_lookup.items():
            ref.action_probability_array[row] = pol[ours_of[key], : game.num_distinct_actions()]
        want = os_expl.exploitability(game, ref)
        got = ex.exploitability(tree, pol)
        np.testing.assert_allclose(float(got.exploitability), want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(float(got.nash_conv), os_expl.nash_conv(game, ref), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_the_average_policy_plays_the_mixture_of_its_iterates(name):
    """Kuhn's theorem, numerically: the reach-weighted average of two policies (weights 1 and 3) earns against
    any opponent exactly what drawing one of them per hand (probability 1/4, 3/4) earns, in either seat; the plain
    per-set mean of the two tables does not (where a seat moves twice: its second move's weight depends on its first)."""
    from jaxmarl_llm.evaluation import exploitability as lm_ex

    tree = TREES[name]
    rng = np.random.default_rng(1)
    pols = [np.asarray(ex.normalize(tree, rng.random((tree.num_infosets, tree.num_actions)) ** 3))[:-1]
            for _ in range(3)]
    total = lm_ex.empty_total(tree)
    for pol, w in zip(pols[:2], (1.0, 3.0)):
        total = lm_ex.accumulate(tree, total, pol, w)
    avg, naive = np.asarray(lm_ex.average(tree, total)), 0.25 * pols[0] + 0.75 * pols[1]
    seat_of = tree.infoset_player[:-1, None]
    naive_gap = 0.0
    for seat in (0, 1):
        def value(mine):  # seat plays `mine`, the other seat the third policy
            return float(ex.exploitability(tree, np.where(seat_of == seat, mine, pols[2])).policy_value[seat])

        mixture = 0.25 * value(pols[0]) + 0.75 * value(pols[1])
        assert value(avg) == pytest.approx(mixture, abs=1e-5)
        naive_gap = max(naive_gap, abs(value(naive) - mixture))
    assert naive_gap > 1e-3
