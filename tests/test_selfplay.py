"""Opponents inside the LM trainer on tic-tac-toe: scripted seats, the snapshot pool, and eval.py end to end.

Tiny model (one layer, width 32, rank-4 adapters on q/v) and a short board
buffer so each test compiles and runs in seconds; PPO with an entropy bonus so
adapters move even when every game of a from-scratch model ends in an
illegal first move (all returns equal, zero advantages).
"""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import ConfigError, validate_lm_rl
from tiny_configs import apply_fields, tiny_lm_rl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(**kw):
    c = tiny_lm_rl("text/tic_tac_toe", env_kwargs={"capacity": 320, "max_action_tokens": 8})
    c.algo, c.group_size, c.num_envs, c.num_turns = "ppo", 1, 4, 3
    c.ent_coef, c.lr = 0.05, 1e-2
    apply_fields(c, kw)
    validate_lm_rl(c)
    return c


def _steps(trainer, n: int, seed: int = 0):
    """The runner state after each of n single updates (one compiled update, called n times)."""
    state = trainer.init(jax.random.PRNGKey(seed), trainer.hparams)
    step = jax.jit(trainer.update)
    states, metrics = [state], []
    for _ in range(n):
        state, m = step(state, trainer.hparams, trainer.base)
        states.append(state)
        metrics.append(jax.device_get(m))
    return states, metrics


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_pool_refreshes_every_k_updates_with_the_learner_adapter():
    size, k = 2, 2
    trainer = lm_rl.make_train(_config(opponent_pool={"size": size, "refresh_every": k}))
    states, metrics = _steps(trainer, 6)
    learner = lambda s: jax.tree.map(lambda x: x[0], s.trainable["lora"])  # noqa: E731
    expected = [learner(states[0])] * size  # the pool starts as copies of the initial learner
    for u in range(1, 7):
        if u % k == 0:
            expected[(u // k - 1) % size] = learner(states[u])  # the oldest snapshot is overwritten
        for p in range(size):
            got = jax.tree.map(lambda x: x[p], states[u].pool)
            for a, b in zip(_leaves(got), _leaves(expected[p])):
                np.testing.assert_array_equal(a, b, err_msg=f"update {u}, snapshot {p}")
    # non-vacuous: the learner moved between refreshes, so a stale or early copy would have failed above
    assert any(np.abs(a - b).max() > 0 for a, b in zip(_leaves(learner(states[2])), _leaves(learner(states[4]))))
    assert all(np.isfinite(m["episode_return"]) for m in metrics)


def test_scripted_rows_never_enter_the_loss():
    """Scripted X (random legal moves) vs learning O: X's own adapter slot receives no gradient at all."""
    trainer = lm_rl.make_train(_config(share_policy=False, scripted_agents="0:random"))
    states, metrics = _steps(trainer, 3)
    first, last = states[0].trainable, states[-1].trainable
    for a, b in zip(_leaves(jax.tree.map(lambda x: x[0], first)), _leaves(jax.tree.map(lambda x: x[0], last))):
        np.testing.assert_array_equal(a, b)  # slot 0 (the scripted seat) never moves
    moved = [np.abs(a - b).max() for a, b in zip(_leaves(jax.tree.map(lambda x: x[1], first)),
                                                  _leaves(jax.tree.map(lambda x: x[1], last)))]
    assert max(moved) > 0  # the learner's slot does
    for m in metrics:  # X's random move is legal, so every game reaches O's (garbage) move and ends there
        assert float(m["episode_turns"]) == 2.0
        assert float(m["episode_return"]) == -2.0 and float(m["illegal_rate"]) == 1.0


def test_seat_settings_fail_at_start_naming_the_key():
    with pytest.raises(ConfigError, match="config.scripted_agents"):
        _config(scripted_agents="1:perfect")
    with pytest.raises(ConfigError, match="config.in_graph_eval.cross_play"):
        lm_rl.make_train(_config(share_policy=False, opponent_pool={"size": 2},
                                 in_graph_eval={"every": 1, "episodes": 4, "cross_play": 2}))
    with pytest.raises(ConfigError, match="config.scripted_agents"):
        lm_rl.make_train(_config(scripted_agents="0:random,1:minimax"))


def _jiggle(tree, key, scale=0.3):
    """Every leaf plus noise: adapters that differ per slot (at init B = 0 makes every slot the base model)."""
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    return jax.tree.unflatten(treedef, [x + scale * jax.random.normal(k, x.shape, x.dtype)
                                        for x, k in zip(leaves, keys)])


@pytest.mark.parametrize("incremental", [True, False])
def test_seat_adapters_score_each_episode_with_the_adapter_its_learner_seat_played(incremental):
    """share_policy=False with a pool: X and O have their own adapter slots. The loss scores each episode with
    the slot of its learner's seat: the log-probs and values it computes equal those the rollout sampled with,
    token for token, in both seats, on both rollout paths; scoring every episode with slot 0 does not."""
    import jax.numpy as jnp

    from jaxmarl_llm.train.lm import seats as lm_seats
    from jaxmarl_llm.train.lm.paths import rollout_path

    trainer = lm_rl.make_train(_config(share_policy=False, num_envs=16, rollout={"incremental": incremental},
                                       opponent_pool={"size": 2, "random": 0.25, "refresh_every": 1}))
    plan, path = trainer.plan, rollout_path(trainer.plan)
    assert plan.seat_adapters and plan.num_slots == 2 and plan.slot_of_agent == (0, 1)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    trainable = {**state.trainable, "lora": _jiggle(state.trainable["lora"], jax.random.PRNGKey(1)),
                 "value_head": _jiggle(state.trainable["value_head"], jax.random.PRNGKey(2))}
    pool = _jiggle(state.pool, jax.random.PRNGKey(3))
    assert jax.tree.leaves(pool)[0].shape[0] == 4  # 2 snapshots x 2 seats
    turns, seats, final = trainer.rollout(jax.random.PRNGKey(4), trainer.base, trainable, pool, jnp.arange(16))
    learner = np.asarray(seats.learns).argmax(-1)
    assert 0 < learner.sum() < 16  # both seats learn in this batch
    np.testing.assert_array_equal(np.asarray(turns.slot[0])[np.arange(16), learner], learner)
    train = lm_seats.loss_seats(plan, turns, seats.learns)
    seqs = path.episode_seqs(plan, final, train, seats.learns)
    score = jax.jit(lambda tr: path.score(plan, trainer.policy, trainer.base, tr, train, seqs))
    lp, _, value = jax.device_get(score(trainable))
    mask = np.asarray(train.token_mask())
    acts = np.asarray(train.acts)
    assert mask.sum() > 0
    np.testing.assert_allclose(lp[mask], np.asarray(train.logprob)[mask], atol=2e-4)
    np.testing.assert_allclose(value[..., 0][acts], np.asarray(train.value)[acts], atol=2e-4)
    # the slot matters: every episode scored with X's adapter misses O's tokens
    lp_x = jax.device_get(score({k: jax.tree.map(lambda x: jnp.stack([x[0], x[0]]), v)
                                 for k, v in trainable.items()})[0])
    o_tokens = mask & (learner == 1)[None, :, None, None]
    assert np.abs(lp_x[o_tokens] - np.asarray(train.logprob)[o_tokens]).max() > 1e-2


def test_seat_adapters_learn_apart_and_refresh_the_pool_per_seat():
    """Each seat's adapter moves by the gradient of its own episodes only: with every learner game as X
    (seat_weights (1, 0)) O's slot never moves while X's does; a refresh writes both seats' adapters."""
    trainer = lm_rl.make_train(_config(share_policy=False, num_envs=8,
                                       opponent_pool={"size": 2, "refresh_every": 1, "seat_weights": (1, 0)}))
    states, metrics = _steps(trainer, 2)
    first, last = states[0].trainable, states[-1].trainable
    slot = lambda tree, s: _leaves(jax.tree.map(lambda x: x[s], tree))  # noqa: E731
    for a, b in zip(slot(first, 1), slot(last, 1)):
        np.testing.assert_array_equal(a, b)  # O never learned: no episode had its learner as O
    assert max(np.abs(a - b).max() for a, b in zip(slot(first, 0), slot(last, 0))) > 0
    # update 2 refreshed snapshot index (2 // 1 - 1) % 2 = 1: rows 2 and 3 are slots 0 and 1 of the learner
    for s in (0, 1):
        for a, b in zip(_leaves(jax.tree.map(lambda x: x[2 + s], states[2].pool)),
                        _leaves(jax.tree.map(lambda x: x[s], states[2].trainable["lora"]))):
            np.testing.assert_array_equal(a, b)
    assert all(np.isfinite(m["episode_return"]) for m in metrics)


def test_eval_script_runs_end_to_end(tmp_path):
    args = [sys.executable, os.path.join(ROOT, "experiments", "eval.py"), f"--config={ROOT}/configs/tic_tac_toe.py",
            "--opponent=minimax", "--episodes=4", "--transcripts=1", "--config.mesh.num_devices=1",
            "--config.model.num_layers=1", "--config.model.hidden_size=32", "--config.model.intermediate_size=64",
            "--config.env_kwargs.capacity=320"]
    env = {**os.environ, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "seat 0 (x): win" in out.stdout and "seat 1 (o): win" in out.stdout
    assert "overall: win" in out.stdout
    assert "Tic-tac-toe." in out.stdout  # a rendered transcript


def test_pool_self_play_on_eight_devices_matches_one():
    """Seats, snapshots and scripted moves are drawn from global env ids: the split over devices changes nothing."""
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 forced host devices (conftest)")
    from jaxmarl_llm.parallel import mesh as mesh_lib

    outs = []
    for n in (1, 8):
        # vf_coef 0: equal advantages normalize to exactly 0 (a trained value head would make them roundoff / roundoff)
        config = _config(num_envs=8, vf_coef=0.0, opponent_pool={"size": 2, "refresh_every": 1})
        config.mesh.num_devices = n
        trainer = lm_rl.make_train(config)
        mesh = mesh_lib.make_mesh(n)
        state = mesh_lib.put(trainer.init(jax.random.PRNGKey(3), trainer.hparams), mesh, trainer.state_specs)
        state, metrics = mesh_lib.sharded_chunk(trainer, mesh, 2)(state, trainer.hparams)
        outs.append(jax.device_get((state.trainable, state.pool, metrics)))
    for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)


TINY_SCRATCH = '''
from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name, c.tokenizer = "text/tic_tac_toe", "word"
    c.env_kwargs = {"capacity": 384, "max_action_tokens": 8, "board": "tagged"}
    c.model.update(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16)
    c.lora.update(rank=4, alpha=8.0, targets=("q", "v"))
    c.policy.actions = "constrained"
    c.algo, c.group_size, c.num_envs, c.num_turns, c.total_episodes, c.lr = "rae", 1, 8, 9, 8, 1e-2
    c.opponent_pool.update(size=1, minimax=1.0)  # a league of one: every learner game is against minimax
    c.in_graph_eval.update(every=1, episodes=8, opponents=("random",), seed=3)
    c.mesh.num_devices = 1
    c.run.update(progress=False, tensorboard=False, plot=False)
    return c
'''


@pytest.mark.parametrize("share_policy", [True, False])
def test_league_and_in_graph_eval_agree_with_eval_py(tmp_path, share_policy):
    """A league whose built-in share is 1: the learner never wins (minimax cannot lose), in both seats. The
    run's in-graph evaluation after its update equals experiments/eval.py on the saved checkpoint, same seed
    (with seat adapters, each seat played by its own slot in both)."""
    from jaxmarl_llm.run import entry
    from jaxmarl_llm.run.cli import load_config_file
    from jaxmarl_llm.run.metrics_log import read_csv

    path = tmp_path / "tiny_scratch.py"
    seats = f"c.mesh.num_devices = 1\n    c.share_policy = {share_policy}"
    path.write_text(TINY_SCRATCH.replace("c.mesh.num_devices = 1", seats))
    config = load_config_file(str(path))
    assert config.share_policy == share_policy
    config.run.out_dir = str(tmp_path / "run")
    result = entry.train_from_config(config)
    row = read_csv(os.path.join(result["out_dir"], "metrics.csv"))[-1]
    assert float(row["won_rate"]) == 0.0 and float(row["episode_turns"]) >= 5  # legal moves only: no game ends early
    assert float(row["return_agent0"]) <= 0.0 and float(row["return_agent1"]) <= 0.0
    args = [sys.executable, os.path.join(ROOT, "experiments", "eval.py"), f"--config={path}", "--opponent=random",
            "--episodes=8", "--seed=3", "--transcripts=0", f"--checkpoint={result['out_dir']}"]
    env = {**os.environ, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    overall = dict(kv.split() for kv in out.stdout.split("overall: ")[1].split(" (")[0].split(", "))
    for name in ("win", "draw", "loss"):
        assert float(overall[name]) == pytest.approx(float(row[f"eval/random_{name}"]), abs=1e-3), (name, out.stdout)
    for seat in (0, 1):
        line = [ln for ln in out.stdout.splitlines() if ln.startswith(f"seat {seat}")][0]
        assert f"loss {float(row[f'eval/random_seat{seat}_loss']):.3f}" in line, line
    if not share_policy:  # a slot the checkpoint lacks: one line, status 2
        bad = subprocess.run(args[:-1] + ["--slot=2"] + args[-1:], capture_output=True, text=True, timeout=300,
                             cwd=str(tmp_path), env=env)
        assert bad.returncode == 2 and "--slot=2: " in bad.stderr and "has 2 adapter slots (0..1)" in bad.stderr, \
            bad.stderr[-2000:]


def test_league_shares_are_drawn_per_group():
    """opponent_pool.random / .minimax: about that share of groups face each built-in player, the rest a snapshot;
    every env of a group faces the same one."""
    from jaxmarl_llm.train.lm import seats as lm_seats

    trainer = lm_rl.make_train(_config(num_envs=8, group_size=2, algo="grpo",
                                       opponent_pool={"size": 2, "random": 0.25, "minimax": 0.5}))
    plan = trainer.plan
    assert plan.league == (("random", 0.25), ("minimax", 0.5))
    kinds = np.asarray(lm_seats.league_opponents(plan, jax.random.PRNGKey(0), np.arange(20000)))
    np.testing.assert_allclose(np.bincount(kinds, minlength=3) / kinds.size, [0.25, 0.25, 0.5], atol=0.015)
    seats = lm_seats.draw_seats(plan, jax.random.PRNGKey(1), np.arange(8))
    builtin = np.asarray(seats.builtin).reshape(4, 2)
    assert (builtin[:, 0] == builtin[:, 1]).all()
    with pytest.raises(ConfigError, match="config.opponent_pool.random"):
        _config(opponent_pool={"size": 2, "random": 0.75, "minimax": 0.5})
    with pytest.raises(ConfigError, match="config.opponent_pool.minimax"):
        _config(opponent_pool={"size": 0, "minimax": 0.5})


def test_seat_weights_give_the_learner_each_seat_in_proportion():
    """opponent_pool.seat_weights=(1, 3): the learner sits in seat 1 (O) in three groups of four, one seat per group;
    weights that cannot work are refused naming the key."""
    from jaxmarl_llm.train.lm import seats as lm_seats

    trainer = lm_rl.make_train(_config(num_envs=8, group_size=2, algo="grpo",
                                       opponent_pool={"size": 1, "random": 0.5, "minimax": 0.5,
                                                      "seat_weights": (1.0, 3.0)}))
    seats = lm_seats.draw_seats(trainer.plan, jax.random.PRNGKey(0), np.arange(40000))
    learner_seat = np.argmax(np.asarray(seats.learns), axis=1)  # [N]
    assert (np.asarray(seats.learns).sum(axis=1) == 1).all()
    assert abs(learner_seat.mean() - 0.75) < 0.015
    assert (learner_seat.reshape(-1, 2)[:, 0] == learner_seat.reshape(-1, 2)[:, 1]).all()  # per group
    with pytest.raises(ConfigError, match="config.opponent_pool.seat_weights"):
        _config(opponent_pool={"size": 1, "seat_weights": (-1.0, 2.0)})
    with pytest.raises(ConfigError, match="config.opponent_pool.seat_weights: one weight per seat"):
        lm_rl.make_train(_config(opponent_pool={"size": 1, "seat_weights": (1.0, 1.0, 1.0)}))
    # a two-seat game's in-graph evaluation plays half its games in each seat: an odd count is refused
    with pytest.raises(ConfigError, match="config.in_graph_eval.episodes: a game of 2 seats plays an even number"):
        lm_rl.make_train(_config(in_graph_eval={"every": 1, "episodes": 7, "opponents": ("random",)}))
