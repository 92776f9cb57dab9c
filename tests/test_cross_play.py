"""Cross-play and its ratings (jaxmarl_llm/evaluation/cross_play.py): the Bradley-Terry fit on synthetic games,
a tic-tac-toe table of built-in players and a tiny LM, and `experiments/eval.py --cross_play` on a saved pool.

Tiny model (one layer, width 32, rank-4 adapters), legal-move candidates (so no game ends in an illegal move and
tic-tac-toe stays zero-sum), observations without history (32-token transcripts)."""

import csv
import os
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.evaluation import cross_play as cp
from jaxmarl_llm.evaluation import play

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY_POOL = '''
from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name, c.tokenizer = "text/tic_tac_toe", "word"
    c.env_kwargs = {"capacity": 32, "max_action_tokens": 8, "board": "tagged", "history": False}
    c.model.update(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16)
    c.lora.update(rank=4, alpha=8.0, targets=("q", "v"))
    c.policy.actions = "constrained"
    c.algo, c.group_size, c.num_envs, c.num_turns = "ppo", 1, 4, 9
    c.opponent_pool.update(size=3, refresh_every=2)
    c.mesh.num_devices = 1
    return c
'''


def _results(points: np.ndarray, games: int, names: tuple[str, ...]) -> cp.CrossPlay:
    p = len(names)
    return cp.CrossPlay(names, 2 * points - 1, points, np.full((p, p), games), None, None, None)


def _bradley_terry_games(elo: np.ndarray, games: int, seed: int = 0) -> np.ndarray:
    """points [P, P]: each pair's share of `games` wins drawn from the Bradley-Terry odds of the given ratings."""
    rng = np.random.default_rng(seed)
    p = len(elo)
    points = np.full((p, p), np.nan)
    for i in range(p):
        for j in range(i + 1, p):
            wins = rng.binomial(games, 1.0 / (1.0 + 10 ** ((elo[j] - elo[i]) / 400)))
            points[i, j], points[j, i] = wins / games, 1 - wins / games
    return points


def test_ratings_recover_bradley_terry_strengths():
    true = np.array([1000.0, 1250.0, 1600.0, 820.0, 1100.0])
    names = ("random", "a", "b", "c", "d")
    fitted = cp.ratings(_results(_bradley_terry_games(true, 20000), 20000, names))
    assert fitted["random"] == 1000.0  # the anchor
    np.testing.assert_allclose([fitted[n] for n in names], true, atol=20)
    # no "random": the mean is the anchor; differences are unchanged
    unanchored = cp.ratings(_results(_bradley_terry_games(true, 20000), 20000, ("r", *names[1:])))
    assert np.mean(list(unanchored.values())) == pytest.approx(1000.0)
    np.testing.assert_allclose(np.subtract(list(unanchored.values()), unanchored["r"]), true - 1000.0, atol=20)


def test_a_player_who_wins_everything_gets_the_highest_finite_rating():
    points = np.array([[np.nan, 1.0, 1.0, 1.0],  # "champ" wins every game
                       [0.0, np.nan, 0.5, 0.7],
                       [0.0, 0.5, np.nan, 0.6],
                       [0.0, 0.3, 0.4, np.nan]])
    names = ("champ", "random", "b", "c")
    fitted = cp.ratings(_results(points, 50, names))
    assert all(np.isfinite(v) for v in fitted.values())
    assert max(fitted, key=fitted.get) == "champ" and fitted["champ"] > fitted["random"] + 400
    fitted_more = cp.ratings(_results(points, 500, names))  # more evidence, less pull of the virtual draws
    assert np.isfinite(fitted_more["champ"]) and fitted_more["champ"] > fitted["champ"]
    # and one who loses everything: the lowest, finite
    lost = cp.ratings(_results(points.T, 50, names))
    assert min(lost, key=lost.get) == "champ" and np.isfinite(lost["champ"])


def test_ratings_do_not_depend_on_the_order_of_players():
    true = np.array([1000.0, 1300.0, 700.0, 1150.0])
    names = ("random", "a", "b", "c")
    points = _bradley_terry_games(true, 300, seed=1)
    fitted = cp.ratings(_results(points, 300, names))
    for perm in ([3, 1, 0, 2], [2, 3, 1, 0]):
        moved = cp.ratings(_results(points[np.ix_(perm, perm)], 300, tuple(names[i] for i in perm)))
        assert moved == pytest.approx(fitted, abs=1e-6)


def test_snapshot_steps_follow_the_trainers_pool_refresh():
    """The update each pool slot was taken at, read from the update count alone, is the one refresh_pool wrote."""
    from jaxmarl_llm.train.lm import seats

    for size, every in ((2, 1), (3, 2), (4, 10), (1, 5)):
        plan = types.SimpleNamespace(pool_size=size, refresh_every=every, num_slots=1)
        pool = jnp.zeros((size,), jnp.int32)  # each slot holds the update whose learner it copied
        for step in range(1, 50):
            pool = seats.refresh_pool(plan, pool, jnp.full((1,), step, jnp.int32), jnp.int32(step))
            assert cp.snapshot_steps(step, size, every) == tuple(int(x) for x in pool), (size, every, step)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(config file, trainer, initial runner state) of the tiny self-play config."""
    from jaxmarl_llm.run.cli import load_config_file
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import validate_lm_rl

    path = tmp_path_factory.mktemp("cross_play") / "tiny_pool.py"
    path.write_text(TINY_POOL)
    config = load_config_file(str(path))
    validate_lm_rl(config)
    trainer = lm_rl.make_train(config)
    return str(path), trainer, trainer.init(jax.random.PRNGKey(0), trainer.hparams)


def _nudged(tree, seed: int, scale: float = 0.5):
    """An adapter moved off zero (a freshly initialised adapter is the base model)."""
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    return treedef.unflatten([x + scale * jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, keys)])


def test_minimax_tops_a_tic_tac_toe_table_of_random_and_an_lm(tiny):
    _, trainer, state = tiny
    lora = _nudged(jax.tree.map(lambda x: x[0], state.trainable["lora"]), seed=1)
    players = {"lm": play.Player("lm", lora), "random": play.Player("random"), "minimax": play.Player("minimax")}
    policy = play.with_temperature(trainer.policy, 1.0)
    res = cp.cross_play(trainer.env, policy, trainer.base, players, 9, 40, jax.random.PRNGKey(0))
    i = {n: k for k, n in enumerate(res.names)}
    assert res.names == ("lm", "random", "minimax")
    np.testing.assert_array_equal(res.games, np.where(np.eye(3, dtype=bool), 20, 40))  # self-play: one match
    mm, rnd = i["minimax"], i["random"]
    assert res.score[mm, rnd] > 0.5 and res.loss[mm, rnd] == 0.0 and res.win[rnd, mm] == 0.0
    assert res.loss[mm, i["lm"]] == 0.0
    # zero-sum (legal moves only) and both seat orders from the same key: exactly antisymmetric
    np.testing.assert_array_equal(res.score, -res.score.T)
    np.testing.assert_array_equal(res.points + res.points.T, np.ones((3, 3)))
    assert res.draw[mm, mm] == 1.0  # minimax against itself always draws
    np.testing.assert_allclose(res.win + res.draw + res.loss, 1.0)
    elo = cp.ratings(res)
    assert max(elo, key=elo.get) == "minimax" and elo["random"] == 1000.0
    # a pair's games depend on the two names and the key only, not on who else is in the table
    alone = cp.cross_play(trainer.env, policy, trainer.base, {"minimax": players["minimax"],
                                                              "random": players["random"]}, 9, 40,
                          jax.random.PRNGKey(0), include_self=False)
    assert alone.score[0, 1] == res.score[mm, rnd] and np.isnan(alone.score[0, 0])


def _saved_pool_run(trainer, state, run_dir: str) -> None:
    """A self-play checkpoint after update 4 of a 3-snapshot pool refreshed every 2 updates: slot 0 copied the
    learner of update 2, slot 1 that of update 4 (the learner itself), slot 2 is still the initial learner; and
    the checkpoint of update 3 kept before it (another learner)."""
    from jaxmarl_llm.run.checkpoints import Checkpoints

    learner = _nudged(state.trainable["lora"], seed=4)  # [S, ...]
    at2 = _nudged(jax.tree.map(lambda x: x[0], state.trainable["lora"]), seed=2)
    pool = jax.tree.map(lambda a, b, c: jnp.stack([a, b[0], c]), at2, learner, jax.tree.map(lambda x: x[0],
                                                                                               state.trainable["lora"]))
    saved = state.replace(update_step=jnp.int32(4), trainable={**state.trainable, "lora": learner}, pool=pool)
    ckpt = Checkpoints(os.path.join(run_dir, "checkpoints"))
    try:
        ckpt.save(3, saved.replace(update_step=jnp.int32(3), trainable={**state.trainable, "lora": _nudged(
            state.trainable["lora"], seed=3)}))
        ckpt.save(4, saved)
    finally:
        ckpt.close()


def test_eval_cross_play_writes_the_table_and_ratings(tiny, tmp_path):
    path, trainer, state = tiny
    run_dir = str(tmp_path / "run")
    _saved_pool_run(trainer, state, run_dir)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "experiments", "eval.py"), f"--config={path}",
                          f"--checkpoint={run_dir}", "--cross_play", "--episodes=4"],
                         capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr[-3000:]
    players = "learner, snap@2, snap@0, ckpt@3, random, minimax, tactician"
    assert f"cross-play of {players}: 4 games per pair" in out.stdout, out.stdout
    assert set(os.listdir(run_dir)) >= {"cross_play.csv", "cross_play.png", "ratings.csv"}
    with open(os.path.join(run_dir, "cross_play.csv")) as f:
        rows = list(csv.DictReader(f))
    names = {"learner", "snap@2", "snap@0", "ckpt@3", "random", "minimax", "tactician"}
    assert {(r["player"], r["opponent"]) for r in rows} == {(a, b) for a in names for b in names if a != b}
    assert all(r["games"] == "4" and r["win"] != "" for r in rows)
    with open(os.path.join(run_dir, "ratings.csv")) as f:
        ratings = {r["player"]: float(r["rating"]) for r in csv.DictReader(f)}
    assert set(ratings) == names and ratings["random"] == 1000.0
    assert max(ratings, key=ratings.get) == "minimax"


def test_the_printed_table_names_every_player_in_full():
    """Columns as wide as the longest name: `ckpt@1250` and `ckpt@1000` stay apart, each row's cells align."""
    names = ("ckpt@1250", "ckpt@1000", "random")
    points = np.array([[np.nan, 0.75, 0.9], [0.25, np.nan, 0.8], [0.1, 0.2, np.nan]])
    res = _results(points, 100, names)
    text = cp.table_text(res, cp.ratings(res))
    header, *rows = text.splitlines()
    assert header.split() == ["rating", "ckpt@1250", "ckpt@1000", "random"]
    assert rows[0].split()[0] == "ckpt@1250" and rows[0].split()[2] == "+0.500"  # its score vs ckpt@1000 (self blank)
    assert len({len(r) for r in rows}) == 1


def test_pool_by_age_puts_the_newest_snapshot_first():
    """After each update the reordered pool's steps (as snapshot_steps dates them) never rise: index 0 is the
    snapshot refresh_pool wrote last."""
    from jaxmarl_llm.train.lm import seats

    for size, every in ((3, 2), (4, 1), (1, 5)):
        plan = types.SimpleNamespace(pool_size=size, refresh_every=every, num_slots=1)
        pool = jnp.zeros((size,), jnp.int32)
        for step in range(1, 30):
            pool = seats.refresh_pool(plan, pool, jnp.full((1,), step, jnp.int32), jnp.int32(step))
            aged = [int(x) for x in seats.pool_by_age(plan, pool, jnp.int32(step))]
            assert aged == sorted(cp.snapshot_steps(step, size, every), reverse=True), (size, every, step)


def _league_players(state):
    """The learner and three snapshots (all different adapters), stacked [4, ...], with their names."""
    slot0 = jax.tree.map(lambda x: x[0], state.trainable["lora"])
    loras = [_nudged(slot0, seed=s) for s in (11, 12, 13, 14)]
    return ("learner", "snap1", "snap2", "snap3"), loras, jax.tree.map(lambda *x: jnp.stack(x), *loras)


def test_the_in_graph_league_plays_the_games_cross_play_plays(tiny):
    """`league` inside jit gives the table `cross_play` gives for the same players, names and seed, and
    `league_metrics`' ratings equal `ratings` (float32 against float64)."""
    _, trainer, state = tiny
    lm_names, loras, stacked = _league_players(state)
    names = (*lm_names, "random", "minimax")
    policy = play.with_temperature(trainer.policy, 1.0)
    players = {**{n: play.Player("lm", lora) for n, lora in zip(lm_names, loras)},
               "random": play.Player("random"), "minimax": play.Player("minimax")}
    host = cp.cross_play(trainer.env, policy, trainer.base, players, 9, 8, jax.random.PRNGKey(3), include_self=False)
    table = cp.league(trainer.env, policy, 9, names, ("random", "minimax"), 8, seed=3)
    score, points = jax.jit(table)(trainer.base, stacked)
    np.testing.assert_allclose(np.asarray(score), host.score, atol=1e-6)
    np.testing.assert_allclose(np.asarray(points), host.points, atol=1e-6)
    assert np.isnan(np.diag(np.asarray(score))).all()
    metrics = jax.jit(lambda s, p: cp.league_metrics(names, s, p, 8))(score, points)
    elo = cp.ratings(host)
    for name in names:
        assert float(metrics[f"rating/{name}"]) == pytest.approx(elo[name], abs=0.05), name
    assert float(metrics["xplay/minimax/random"]) == pytest.approx(host.score[5, 4], abs=1e-6)
    assert host.score[5, 4] > 0.5  # minimax beats random: the table is a real one


def test_a_self_play_run_rates_its_pool_inside_the_update(tiny, tmp_path):
    """With in_graph_eval.cross_play the update logs every player's rating and the score matrix at evaluations
    (NaN between), equal to `league` played outside the update on the adapters the update evaluated; the runner
    draws ratings_curve.png and cross_play.png."""
    from jaxmarl_llm.parallel import mesh as mesh_lib
    from jaxmarl_llm.run.cli import load_config_file
    from jaxmarl_llm.run.runner import run_training
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import validate_lm_rl
    from jaxmarl_llm.train.lm import seats

    path, _, _ = tiny
    config = load_config_file(path)
    config.in_graph_eval.update(every=2, episodes=4, cross_play=4)
    config.total_episodes = 4 * 3
    config.run.update(out_dir=str(tmp_path / "run"), progress=False, updates_per_chunk=1, tensorboard=False)
    validate_lm_rl(config)
    trainer = lm_rl.make_train(config)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    names = ("learner", "snap1", "snap2", "snap3", "random", "minimax")
    update = jax.jit(trainer.update)
    for step in (1, 2, 3):
        state, metrics = update(state, trainer.hparams, trainer.base)
        played = step != 3  # after update 1 and every 2
        assert set(f"eval/rating/{n}" for n in names) <= set(metrics)
        assert np.isfinite(float(metrics["eval/rating/learner"])) == played, step
    # update 2 again, outside: its learner after the update and the pool as update 1 left it, newest first
    state1 = update(trainer.init(jax.random.PRNGKey(0), trainer.hparams), trainer.hparams, trainer.base)[0]
    state2, metrics2 = update(state1, trainer.hparams, trainer.base)
    loras = jax.tree.map(lambda x, p: jnp.concatenate([x[:1], p]), state2.trainable["lora"],
                         seats.pool_by_age(trainer.plan, state1.pool, jnp.int32(1)))
    table = cp.league(trainer.env, play.with_temperature(trainer.policy, 1.0), 9, names, ("random", "minimax"), 4)
    score, _ = jax.jit(table)(trainer.base, loras)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j:
                assert float(metrics2[f"eval/xplay/{a}/{b}"]) == pytest.approx(float(score[i, j]), abs=1e-6), (a, b)
    assert float(metrics2["eval/rating/random"]) == 1000.0

    out = run_training(config, trainer, mesh_lib.sharded_chunk, config.num_envs, "episode_return")
    assert {"ratings_curve.png", "cross_play.png"} <= set(os.listdir(out["out_dir"]))


@pytest.mark.parametrize("override, message", [
    ({"cross_play": 3}, "must be an even number of games per pair"),
    ({"cross_play": 4, "every": 0}, "set in_graph_eval.every > 0 and opponent_pool.size >= 1"),
    ({"cross_play": 4, "cross_play_temperature": -1.0}, "must be >= 0"),
])
def test_cross_play_settings_are_checked(tiny, override, message):
    from jaxmarl_llm.errors import ConfigError
    from jaxmarl_llm.run.cli import load_config_file
    from jaxmarl_llm.train.config import validate_lm_rl

    config = load_config_file(tiny[0])
    config.in_graph_eval.update({"every": 2, **override})
    with pytest.raises(ConfigError, match=message):
        validate_lm_rl(config)


def test_cross_play_in_training_refuses_a_game_that_is_not_one_two_seat_game():
    from jaxmarl_llm.errors import ConfigError
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.run.cli import load_config_file
    from tiny_configs import TINY_MODEL

    c = load_config_file(os.path.join(ROOT, "configs", "multi_game.py"))  # three games in one env
    c.model.update(TINY_MODEL)
    c.num_envs, c.mesh.num_devices = 4, 1
    c.opponent_pool.size = 2
    c.in_graph_eval.update(every=2, cross_play=4)
    with pytest.raises(ConfigError, match="is not one two-seat game"):
        lm_rl.make_train(c)
