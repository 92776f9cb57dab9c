"""Sweeps: every row of a vmapped sweep equals the same run trained alone."""

import jax
import numpy as np
import pytest

from configs import spread_mlp
from jaxmarl_llm.run.sweep import format_table, make_grid, run_sweep
from jaxmarl_llm.train import mlp_ppo
from jaxmarl_llm.train.config import ConfigError


def _config():
    c = spread_mlp.get_config()
    c.num_envs, c.num_steps, c.num_minibatches, c.total_timesteps = 8, 16, 2, 8 * 16 * 4
    return c


def test_sweep_rows_match_single_runs(tmp_path):
    config = _config()
    trainer = mlp_ppo.make_train(config)
    rows, hparams, keys = make_grid(trainer.hparams, {"lr": [1e-3, 5e-3], "ent_coef": [0.0, 0.05]}, seeds=2, base_seed=3)
    assert len(rows) == 8 and hparams.lr.shape == (8,)
    assert {(r["lr"], r["ent_coef"], r["seed"]) for r in rows} == {
        (lr, ent, seed) for lr in (1e-3, 5e-3) for ent in (0.0, 0.05) for seed in (3, 4)}
    result = run_sweep(trainer, rows, hparams, keys, 128, str(tmp_path), updates_per_chunk=3, progress=False)
    assert result["curves"].shape == (8, 4)
    assert not np.allclose(result["curves"][0], result["curves"][7])  # rows really differ
    for i in (5,):
        single = trainer.hparams._replace(lr=hparams.lr[i], ent_coef=hparams.ent_coef[i])
        _, metrics = jax.jit(trainer.train)(keys[i], single)
        np.testing.assert_allclose(result["curves"][i], metrics["team_return"], rtol=1e-4, atol=1e-3)
    assert (tmp_path / "sweep.png").exists() and (tmp_path / "sweep.csv").exists()
    assert "lr" in format_table(rows, result["final"], "team_return")


def test_sweep_rejects_non_numeric_hyperparameter():
    trainer = mlp_ppo.make_train(_config())
    with pytest.raises(ConfigError, match="sweep.num_envs"):
        make_grid(trainer.hparams, {"num_envs": [8, 16]}, seeds=1, base_seed=0)


def test_a_sweep_follows_an_evaluation_metric_logged_now_and_then(tmp_path):
    """--sweep.metric=eval/exploitability on Kuhn poker, evaluated after update 1 and every 2: the curves hold the
    updates that logged it (1, 2, 4), each row equal to the same seed trained alone; a metric the update does not
    log is refused before training, naming what it does log."""
    from test_poker import _kuhn_trainer

    trainer = _kuhn_trainer(total_episodes=8 * 4, in_graph_eval={"every": 2, "episodes": 2, "opponents": ("random",),
                                                                 "seed": 0})
    rows, hparams, keys = make_grid(trainer.hparams, {}, seeds=2, base_seed=0)
    result = run_sweep(trainer, rows, hparams, keys, 24, str(tmp_path), updates_per_chunk=2,
                       headline="eval/exploitability", progress=False)
    curves = result["curves"]
    assert curves.shape == (2, 4) and np.isnan(curves[:, 2]).all() and np.isfinite(curves[:, [0, 1, 3]]).all()
    state = trainer.init(keys[1], trainer.hparams)
    alone = []
    for _ in range(4):
        state, metrics = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
        alone.append(float(metrics["eval/exploitability"]))
    np.testing.assert_allclose(curves[1, [0, 1, 3]], np.asarray(alone)[[0, 1, 3]], rtol=1e-4, atol=1e-5)
    assert result["final"][1] == pytest.approx(curves[1, 3], rel=1e-6)  # the last logged tenth: one point
    lines = (tmp_path / "sweep_curves.csv").read_text().splitlines()
    assert lines[0] == "update,seed=0,seed=1" and [ln.split(",")[0] for ln in lines[1:]] == ["1", "2", "4"]
    assert float(lines[3].split(",")[2]) == pytest.approx(curves[1, 3], rel=1e-5)
    assert format_table(rows, result["final"], "eval/exploitability", minimize=True).splitlines()[1].endswith(
        f"{result['final'].min():.2f}")
    with pytest.raises(ConfigError, match="sweep.metric: the update logs no 'eval/exploitabilty'; it logs .*"
                                          "eval/exploitability"):
        run_sweep(trainer, rows, hparams, keys, 24, str(tmp_path), headline="eval/exploitabilty", progress=False)


def _conds(jaxpr) -> int:
    """How many `cond` equations (lax.cond / lax.switch) a closed jaxpr holds, its sub-jaxprs included."""
    count = 0
    for eqn in jaxpr.jaxpr.eqns if hasattr(jaxpr, "jaxpr") else jaxpr.eqns:
        count += eqn.primitive.name == "cond"
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, (jax.extend.core.ClosedJaxpr, jax.extend.core.Jaxpr)):
                    count += _conds(sub)
    return count


def test_a_sweeps_runs_take_each_branch_of_the_update_together():
    """Kuhn poker with the in-graph evaluation every other update and the loss over running hands' rows
    (row_buckets): vmapped over runs, a decision per run would turn each `cond` (the evaluation, the loss's row
    bucket, the rollout's skip of ended turns) into a select that computes every branch at every update. The
    sweep's program keeps every `cond` of the single update (its rows equal the runs alone: the test above)."""
    from jaxmarl_llm.parallel.mesh import bound_update
    from jaxmarl_llm.run.sweep import runs_chunk
    from test_poker import _kuhn_trainer

    trainer = _kuhn_trainer(total_episodes=8 * 3, in_graph_eval={"every": 2, "episodes": 2, "opponents": ("random",),
                                                                 "seed": 0})
    trainer_rows = _kuhn_trainer(total_episodes=8 * 3, in_graph_eval={"every": 2, "episodes": 2,
                                                                      "opponents": ("random",), "seed": 0},
                                 rollout={"incremental": False, "chunk": 64, "min_score_width": 128,
                                          "row_buckets": 4})
    for tr, least in ((trainer, 2), (trainer_rows, 3)):
        _, hparams, keys = make_grid(tr.hparams, {}, seeds=2, base_seed=0)
        state = jax.vmap(tr.init)(keys, hparams)
        single = jax.make_jaxpr(lambda s, hp: bound_update(tr)(s, hp, tr.base))(
            jax.tree.map(lambda x: x[0], state), tr.hparams)
        swept = jax.make_jaxpr(lambda s, hp: runs_chunk(tr, 1)(s, hp, tr.base))(state, hparams)
        assert _conds(single) >= least and _conds(swept) == _conds(single)

        # the agreement is what keeps them: the same vmap with a decision per run loses the per-run ones
        per_run = jax.make_jaxpr(lambda s, hp: runs_chunk(tr, 1, together=False)(s, hp, tr.base))(state, hparams)
        assert _conds(per_run) < _conds(single)


@pytest.mark.parametrize("setting", [
    {"rollout": {"incremental": False, "chunk": 64, "min_score_width": 128, "row_buckets": 4}},  # row buckets
    {"algo": "grpo", "group_size": 4, "ent_coef": 0.05},  # group baselines, the incremental path
])
def test_runs_that_decide_together_equal_the_runs_alone(tmp_path, setting):
    """Taking each branch with the other runs (the widest row bucket, or loss width, that any of them needs) leaves
    every run's numbers those of the run alone: PPO on the re-read path with row buckets, GRPO on the incremental
    path (where a run without signal, while another has it, gets the skip's zeros)."""
    from test_poker import _kuhn_trainer

    trainer = _kuhn_trainer(total_episodes=8 * 3, num_turns=4, in_graph_eval={"every": 1, "episodes": 2,
                                                                              "opponents": ("random",), "seed": 0},
                            **setting)
    rows, hparams, keys = make_grid(trainer.hparams, {}, seeds=3, base_seed=0)
    result = run_sweep(trainer, rows, hparams, keys, 24, str(tmp_path), updates_per_chunk=3,
                       headline="eval/exploitability", progress=False)
    step = jax.jit(trainer.update)
    for i in range(3):
        state, alone = trainer.init(keys[i], trainer.hparams), []
        for _ in range(3):
            state, metrics = step(state, trainer.hparams, trainer.base)
            alone.append(float(metrics["eval/exploitability"]))
        np.testing.assert_allclose(result["curves"][i], alone, rtol=1e-4, atol=1e-5)
    assert not np.allclose(result["curves"][0], result["curves"][1])  # the runs differ
