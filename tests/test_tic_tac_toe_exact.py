"""Exact tic-tac-toe results of a policy (evaluation/tic_tac_toe_exact.py): against brute-force enumeration of
games, the minimax player's guarantees, and the moves a greedy LM makes in real matches from the same positions."""

import itertools
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs.text import tic_tac_toe as ttt
from jaxmarl_llm.evaluation import play
from jaxmarl_llm.evaluation import tic_tac_toe_exact as exact


def _uniform_table() -> np.ndarray:
    table = np.zeros((ttt.NUM_BOARDS, 9))
    for b in ttt.reachable_boards():
        empty = [c == 0 for c in b]
        if any(empty):
            table[int(np.dot(b, ttt.POW3))] = np.asarray(empty) / sum(empty)
    return table


def _enumerated_random_play() -> tuple[float, float, float]:
    """P(X wins), P(O wins), P(draw) of two uniform random players, by enumerating every order of the 9 cells:
    a game is the order's prefix up to its end, each order equally likely."""
    counts = np.zeros(3)
    for order in itertools.permutations(range(9)):
        board = [0] * 9
        result = 2
        for t, cell in enumerate(order):
            board[cell] = ttt.X if t % 2 == 0 else ttt.O
            w = ttt._py_winner(board)
            if w:
                result = 0 if w == ttt.X else 1
                break
        counts[result] += 1
    return tuple(counts / counts.sum())


def test_a_uniform_policy_against_random_has_random_plays_outcomes():
    x_wins, o_wins, draws = _enumerated_random_play()
    table = _uniform_table()
    as_x = exact.exact_rates(table, 0, "random")
    as_o = exact.exact_rates(table, 1, "random")
    assert as_x["win"] == pytest.approx(x_wins, abs=1e-12) and as_x["loss"] == pytest.approx(o_wins, abs=1e-12)
    assert as_o["win"] == pytest.approx(o_wins, abs=1e-12) and as_o["loss"] == pytest.approx(x_wins, abs=1e-12)
    assert as_x["draw"] == pytest.approx(draws, abs=1e-12) == as_o["draw"]
    assert 0.58 < x_wins < 0.59 and 0.28 < o_wins < 0.29  # the known 58.5% / 28.8% / 12.7%


def test_the_minimax_player_never_loses_and_an_illegal_reply_does():
    best = ttt.minimax_table()
    for seat in (0, 1):
        assert exact.exact_rates(best, seat, "random")["loss"] == pytest.approx(0.0, abs=1e-12)
        assert exact.exact_rates(best, seat, "minimax") == pytest.approx({"win": 0.0, "draw": 1.0, "loss": 0.0})
        assert exact.blunders(best, seat) == []
    # O replies to a corner opening with nothing legal: every game X opens in a corner is lost (4 of 9)
    table = best.copy()
    for corner in (0, 2, 6, 8):
        table[3 ** corner] = False
    assert exact.exact_rates(table, 1, "random")["loss"] == pytest.approx(4 / 9, abs=1e-12)
    worst = exact.blunders(table, 1)
    assert len(worst) == 4 and all(r["move"] == [] and r["after"] == -1 and r["reach"] == pytest.approx(1 / 9)
                                   for r in worst)


def _enumerated_tactics(seat: int) -> dict[str, float]:
    """Two uniform random players, every game played out move by move (each path with its probability, no board
    merged with another): over the moves `seat` makes where the other threatens to complete a line and it cannot
    complete one, the expected share that takes a threatened cell; over those where it can complete one, the share
    that does. Cell by cell, no code shared with the module."""
    mine, other = (ttt.X, ttt.O) if seat == 0 else (ttt.O, ttt.X)
    counts = np.zeros(4)  # blocks, must-block moves, wins taken, win chances: expected counts per game

    def finishing(board, mark):
        return {c for line in ttt.LINES for c in line
                if board[c] == 0 and sum(board[k] == mark for k in line) == 2}

    def play(board, mover, p):
        empty = [c for c in range(9) if board[c] == 0]
        if mover == mine:
            wins, threats = finishing(board, mine), finishing(board, other)
            if wins:
                counts[2:] += (p * len(wins) / len(empty), p)
            elif threats:
                counts[:2] += (p * len(threats) / len(empty), p)
        for c in empty:
            board[c] = mover
            if not ttt._py_winner(board) and len(empty) > 1:
                play(board, ttt.O if mover == ttt.X else ttt.X, p / len(empty))
            board[c] = 0

    play([0] * 9, ttt.X, 1.0)
    return {"block": counts[0] / counts[1], "take_win": counts[2] / counts[3]}


@pytest.mark.parametrize("seat", [0, 1])
def test_tactics_of_a_uniform_player_equal_enumerating_every_game(seat):
    assert exact.tactics(_uniform_table(), seat) == pytest.approx(_enumerated_tactics(seat), abs=1e-12)


def test_a_player_that_wins_then_blocks_scores_one_and_one_that_never_blocks_zero():
    """The one-move tactician (complete a line, else block, else any empty cell) blocks and wins every time; the
    same player with every blocking cell removed where it must block (resigning where only those are left) never
    blocks; both in either seat."""
    finish = exact._finishing_cells()
    boards, _, mover, _, ended, _ = exact._tree()
    sharp, blind = np.zeros((ttt.NUM_BOARDS, 9)), np.zeros((ttt.NUM_BOARDS, 9))
    for b, m, over, f in zip(boards, mover, ended, finish):
        if over:
            continue
        empty = b == ttt.EMPTY
        row = f[m] if f[m].any() else (f[1 - m] if f[1 - m].any() else empty)
        code = int(b @ ttt.POW3)
        sharp[code] = row / row.sum()
        away = empty & ~f[1 - m] if not f[m].any() and f[1 - m].any() else row
        blind[code] = away / max(away.sum(), 1)
    for seat in (0, 1):
        for opp in exact.OPPONENTS:
            assert exact.tactics(sharp, seat, opp)["block"] == pytest.approx(1.0)
        assert exact.tactics(sharp, seat)["take_win"] == pytest.approx(1.0)
        assert exact.tactics(blind, seat)["block"] == pytest.approx(0.0)
        assert exact.tactics(blind, seat)["take_win"] == pytest.approx(1.0)
    # minimax never lets minimax threaten a line it can complete: no such position is reached, nan, not 0
    assert np.isnan(exact.tactics(ttt.minimax_table(), 0, "minimax")["take_win"])
    # sharpened: the uniform player made the tactician where it moves, and nothing else changed
    uniform = _uniform_table()
    for seat in (0, 1):
        at = boards[(mover == seat) & ~ended] @ ttt.POW3
        others = boards[(mover != seat) & ~ended] @ ttt.POW3
        made = exact.sharpened(uniform, seat)
        np.testing.assert_allclose(made[at], sharp[at])
        np.testing.assert_allclose(made[others], uniform[others])
        np.testing.assert_allclose(exact.sharpened(uniform, seat, take_win=False, block=False), uniform)
        assert exact.exact_rates(made, seat, "random")["loss"] < exact.exact_rates(uniform, seat, "random")["loss"]


def test_the_minimax_player_sharpened_is_still_optimal():
    """An immediate win, and the block of a single threat, are always among the optimal moves: making them certain
    keeps the minimax player from ever losing, in either seat."""
    for seat in (0, 1):
        made = exact.sharpened(ttt.minimax_table(), seat)
        assert exact.exact_rates(made, seat, "random")["loss"] == pytest.approx(0.0, abs=1e-12)
        assert exact.exact_rates(made, seat, "minimax") == pytest.approx({"win": 0.0, "draw": 1.0, "loss": 0.0})


@pytest.fixture(scope="module", params=["free", "constrained"])
def lm(request):
    """A tiny LM (random weights, adapters moved off zero) on tic-tac-toe's position-only prompts: in free text (its
    replies do not parse: every game lost) and constrained to the legal moves (every reply a move)."""
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import validate_lm_rl
    from tiny_configs import tiny_lm_rl

    c = tiny_lm_rl("text/tic_tac_toe", "jaxmarl_llm/assets/games_bpe",
                   env_kwargs={"capacity": 40, "max_action_tokens": 8, "board": "grid", "history": False,
                               "exact": False},
                   model={"max_position_embeddings": 64})
    c.policy.actions = request.param
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c)
    lora = jax.tree.map(lambda x: x[0], trainer.init(jax.random.PRNGKey(0), trainer.hparams).trainable["lora"])
    leaves, tree = jax.tree.flatten(lora)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    lora = jax.tree.unflatten(tree, [x + 0.5 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])
    return trainer, lora


@pytest.mark.parametrize("seat", [0, 1])
def test_the_greedy_table_is_the_move_the_lm_makes_in_a_match_from_that_position(lm, seat):
    """From each position (position_state), one turn of play.make_match with the LM to move: the cell it takes is
    the table's, and where the table has none the match records a format error or an illegal move."""
    trainer, lora = lm
    env = trainer.env
    table = exact.greedy_table(env, trainer.policy, trainer.base, lora, seat)
    boards = exact.positions(seat)[::7]
    arr = jnp.asarray(boards, jnp.int32)
    kinds = ("lm", "random") if seat == 0 else ("random", "lm")
    match = play.make_match(env, play.with_temperature(trainer.policy, 0.0), kinds, 1,
                            start=lambda i: exact.position_state(env, arr[i]))
    loras = (lora, None) if seat == 0 else (None, lora)
    state, outcomes = match(jax.random.PRNGKey(0), trainer.base, loras, len(boards))
    after = np.asarray(state.board)
    lost = np.asarray(outcomes.illegal[:, seat] | outcomes.format_error[:, seat])
    moved = 0
    for i, b in enumerate(boards):
        row = table[int(np.dot(b, ttt.POW3))]
        changed = np.flatnonzero(after[i] != np.asarray(b))
        if row.any():
            assert not lost[i] and list(changed) == list(np.flatnonzero(row)), (b, changed, np.flatnonzero(row))
            moved += 1
        else:
            assert lost[i] and len(changed) == 0, b
    if trainer.policy.actions == "free":
        assert lost.all()  # a random model does not write `Move: N`
    else:
        assert moved == len(boards) and len({tuple(np.flatnonzero(after[i] != b)) for i, b in enumerate(boards)}) > 3


def test_exact_rates_refuse_an_unknown_opponent_and_positions_need_a_position_only_prompt():
    with pytest.raises(ValueError, match="opponent"):
        exact.exact_rates(ttt.minimax_table(), 0, "perfect")
    env = ttt.TicTacToe(history=True)
    with pytest.raises(ValueError, match="history=False"):
        exact.position_state(env, jnp.zeros((9,), jnp.int32))


def test_the_in_graph_rates_equal_the_host_computation(lm):
    """`in_graph` (jitted backward induction over arrays) gives what `exact_rates(greedy_table(...))` gives on
    the host, per seat and opponent, with a different adapter in each seat."""
    trainer, lora = lm
    other = jax.tree.map(lambda x: -x, lora)
    metrics = jax.jit(exact.in_graph(trainer.env, trainer.policy))(trainer.base, (lora, other))
    for seat, adapter in ((0, lora), (1, other)):
        table = exact.greedy_table(trainer.env, trainer.policy, trainer.base, adapter, seat)
        for opp in exact.OPPONENTS:
            for name, value in {**exact.exact_rates(table, seat, opp), **exact.tactics(table, seat, opp)}.items():
                assert float(metrics[f"exact_{opp}_seat{seat}_{name}"]) == pytest.approx(value, abs=1e-5, nan_ok=True), \
                    (seat, opp, name)
    if trainer.policy.actions == "constrained":  # every reply a move: the rates are not all losses
        assert float(metrics["exact_random_win"]) > 0.1


def test_a_run_logs_the_exact_rates_of_its_updated_adapters():
    """in_graph_eval.exact: the update's eval/exact_* are the host computation's for the adapters it ends with;
    refused with one line where positions are not observations."""
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import ConfigError, validate_lm_rl
    from tiny_configs import tiny_lm_rl

    c = tiny_lm_rl("text/tic_tac_toe", "jaxmarl_llm/assets/games_bpe",
                   env_kwargs={"capacity": 40, "max_action_tokens": 8, "board": "grid", "history": False},
                   model={"max_position_embeddings": 64})
    c.policy.actions, c.algo, c.group_size, c.num_envs, c.num_turns, c.lr = "constrained", "ppo", 1, 4, 9, 5e-2
    c.share_policy = False
    c.in_graph_eval.update(every=1, episodes=4, exact=True)
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    state, metrics = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
    for seat in (0, 1):
        lora = jax.tree.map(lambda x, s=seat: x[s], state.trainable["lora"])
        table = exact.greedy_table(trainer.env, trainer.policy, trainer.base, lora, seat)
        for opp in exact.OPPONENTS:
            rates = exact.exact_rates(table, seat, opp)
            assert float(metrics[f"eval/exact_{opp}_seat{seat}_loss"]) == pytest.approx(rates["loss"], abs=1e-5)
            assert float(metrics[f"eval/exact_{opp}_seat{seat}_draw"]) == pytest.approx(rates["draw"], abs=1e-5)
    c.env_kwargs = {**c.env_kwargs, "history": True, "capacity": 320}
    with pytest.raises(ConfigError, match="config.in_graph_eval.exact: text/tic_tac_toe is not tic-tac-toe with"):
        lm_rl.make_train(c)


def test_eval_exact_prints_each_seats_rates_tactics_and_what_its_misses_cost(tmp_path):
    """experiments/eval.py --exact on the tiny model constrained to legal moves: each seat's exact rates, its
    tactics and its loss with them made perfect, and the overall rates the mean of the seats'."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tiny = [f"--config.model.{k}={v}" for k, v in (("num_layers", 1), ("hidden_size", 32), ("intermediate_size", 64))]
    out = subprocess.run([sys.executable, os.path.join(root, "experiments", "eval.py"),
                          f"--config={root}/configs/tic_tac_toe.py:scratch", "--exact", "--config.mesh.num_devices=1",
                          *tiny], capture_output=True, text=True, timeout=600, cwd=str(tmp_path),
                         env={**os.environ, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    seat_loss = [float(x) for x in re.findall(r"seat \d \(\w\) vs random, exact: .* loss ([\d.]+)", out.stdout)]
    overall = re.search(r"overall vs random \(half per seat\), exact: .* loss ([\d.]+)", out.stdout)
    tactic_lines = re.findall(r"blocks ([\d.]+) .* completes its line ([\d.]+) .* with every win taken ([\d.]+), "
                              r"with every block made ([\d.]+), with both ([\d.]+)", out.stdout)
    assert len(seat_loss) == 2 and len(tactic_lines) == 2, out.stdout
    assert float(overall.group(1)) == pytest.approx(sum(seat_loss) / 2, abs=1e-4)
    for loss, (block, take, *cost) in zip(seat_loss, tactic_lines):
        assert 0 < float(block) < 1 and 0 < float(take) < 1  # a random model neither always nor never does either
        assert float(cost[-1]) < loss  # both tactics made perfect lose less than the model does


def test_the_tactician_in_the_env_plays_what_the_exact_evaluation_assumes():
    """envs/text/tic_tac_toe's tactician (jitted, what the league and evaluation matches play) chooses, at every
    reachable position, exactly the cells of the host model the exact rates use; its own tactics are perfect."""
    boards, _, mover, _, ended, opp = exact._tree()
    live = ~ended
    marks = np.where(mover == 0, ttt.X, ttt.O)
    moves = jax.jit(jax.vmap(ttt.tactician_moves))(jnp.asarray(boards[live]), jnp.asarray(marks[live]))
    np.testing.assert_array_equal(np.asarray(moves), opp["tactician"][live] > 0)
    finish = jax.jit(jax.vmap(ttt.finishing_cells, in_axes=(0, None)))
    for seat, mark in enumerate((ttt.X, ttt.O)):
        np.testing.assert_array_equal(np.asarray(finish(jnp.asarray(boards), mark)), exact._finishing_cells()[:, seat])
    table = np.zeros((ttt.NUM_BOARDS, 9))
    table[boards @ ttt.POW3] = opp["tactician"]
    for seat in (0, 1):
        assert exact.tactics(table, seat) == pytest.approx({"block": 1.0, "take_win": 1.0})
        # it loses to minimax sometimes (it does not see forks) and to random less than random play does
        assert exact.exact_rates(table, seat, "minimax")["loss"] > 0
        assert exact.exact_rates(table, seat, "random")["loss"] < exact.exact_rates(_uniform_table(), seat, "random")["loss"]
    # the minimax player never loses to it
    assert all(exact.exact_rates(ttt.minimax_table(), s, "tactician")["loss"] == pytest.approx(0, abs=1e-12) for s in (0, 1))
