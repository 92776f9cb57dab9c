"""A run's best state by a metric (run.keep_best) and branches of a run at a checkpoint (experiments/branch.py):
the kept state is the best chunk end's, a branch trained on reproduces the original run's numbers past its point,
and each mistake is one line."""

import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import spread_mlp
from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.run import entry
from jaxmarl_llm.run.branch import branch_point, branch_run
from jaxmarl_llm.run.checkpoints import BestCheckpoint, Checkpoints
from jaxmarl_llm.run.metrics_log import read_csv
from jaxmarl_llm.run.runner import run_training
from tiny_configs import tiny_lm_rl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(out_dir, **run):
    c = spread_mlp.get_config()
    c.num_envs, c.num_steps, c.total_timesteps = 8, 16, 8 * 16 * 8
    c.mesh.num_devices = 1
    c.run.update({"out_dir": str(out_dir), "updates_per_chunk": 2, "checkpoint_every": 1, "keep_checkpoints": 4,
                  "progress": False, "tensorboard": False, "plot": False, **run})
    return c


def _train(config):
    return run_training(config, *entry.build(config))


def _best_end(rows):
    """The row keep_best="team_return" keeps: the highest chunk end's (updates 2, 4, ...), the earlier on a tie."""
    ends = [r for r in rows if int(r["update"]) % 2 == 0]  # the chunk ends: the states that are saved
    return max(ends, key=lambda r: (float(r["team_return"]), -int(r["update"])))


@pytest.mark.parametrize("mode", ["max", "min"])
def test_best_checkpoint_keeps_the_best_offer_and_reads_it_back(tmp_path, mode):
    state = {"w": jnp.arange(3.0)}
    best = BestCheckpoint(str(tmp_path), "eval/solved", mode)
    offers = [(10, 0.5), (20, math.nan), (30, 0.7), (40, 0.6), (50, 0.3)]
    kept = [best.offer(u, v, {"w": state["w"] + u}) for u, v in offers]
    want = 30 if mode == "max" else 50
    assert kept == ([True, False, True, False, False] if mode == "max" else [True, False, False, False, True])
    assert best.best() == (want, pytest.approx(dict(offers)[want]))
    best.close()
    again = BestCheckpoint(str(tmp_path), "eval/solved", mode)  # a resumed run competes with its past
    assert again.best()[0] == want
    assert not again.offer(60, dict(offers)[want], state)  # a tie keeps the earlier state
    assert not again.offer(25, 9.0 if mode == "max" else -9.0, state)  # an update before the kept one: a replay
    restored = again.ckpt.restore(state, want)
    np.testing.assert_array_equal(restored["w"], np.arange(3.0) + want)
    assert sorted(os.listdir(tmp_path / "best")) == [str(want)]  # one state on disk
    again.close()


def test_keep_best_keeps_the_best_chunk_end_and_a_branch_trains_on_to_the_runs_numbers(tmp_path):
    full = _train(_config(tmp_path / "full", keep_best="team_return"))
    rows = read_csv(os.path.join(full["out_dir"], "metrics.csv"))
    top = _best_end(rows)
    assert os.listdir(tmp_path / "full" / "best") == [top["update"]]
    with pytest.raises(ConfigError, match=f"no checkpoint of update 3 \\(kept: 2, 4, 6, 8; best: {top['update']}\\)"):
        branch_point(str(tmp_path / "full"), "3")  # an update inside a chunk is never saved

    for at, want in (("best", int(top["update"])), ("2", 2)):
        out = tmp_path / f"branch_{at}"
        assert branch_run(full["out_dir"], at, str(out)) == want
        assert os.listdir(out / "checkpoints") == [str(want)]
        config = _config(out, keep_best="team_return")
        config.resume = "True"
        resumed = _train(config)
        for a, b in zip(jax.tree.leaves(full["state"].params), jax.tree.leaves(resumed["state"].params)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        branched = read_csv(os.path.join(out, "metrics.csv"))
        assert [r["team_return"] for r in branched] == [r["team_return"] for r in rows]
        own = _best_end([r for r in rows if int(r["update"]) > want])
        assert os.listdir(out / "best") == [own["update"]]  # the branch's best: its own training's

    # a resume that changes the kept metric: refused at once
    config = _config(tmp_path / "full", keep_best="value_loss", keep_best_mode="min")
    config.resume, config.total_timesteps = "True", 8 * 16 * 10
    with pytest.raises(ConfigError, match="keeps the best state by team_return; keep that metric, or branch"):
        _train(config)


def test_branch_mistakes_are_one_line_and_touch_nothing(tmp_path):
    run = tmp_path / "run"
    for step in (50, 100):
        (run / "checkpoints" / str(step)).mkdir(parents=True)
    (run / "metrics.csv").write_text("update\n")
    assert branch_point(str(run), "latest") == (100, str(run / "checkpoints" / "100"))
    for at, match in (("best", "keeps no best checkpoint .*keep_best=METRIC.*50, 100"),
                      ("75", "no checkpoint of update 75 \\(kept: 50, 100\\)"), ("last", "latest, best or")):
        with pytest.raises(ConfigError, match=match):
            branch_run(str(run), at, str(tmp_path / "b"))
    assert not (tmp_path / "b").exists()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("")
    with pytest.raises(ConfigError, match="not an empty folder"):
        branch_run(str(run), "latest", str(tmp_path / "taken"))

    proc = subprocess.run([sys.executable, os.path.join(ROOT, "experiments", "branch.py"), f"--run={run}",
                           "--at=best", f"--out={tmp_path / 'c'}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "keeps no best checkpoint" in proc.stderr
    assert not (tmp_path / "c").exists()


def test_keep_best_of_a_metric_the_run_does_not_log_is_refused_before_the_folder(tmp_path):
    config = _config(tmp_path / "typo", keep_best="team_retrun")
    with pytest.raises(ConfigError, match="no metric 'team_retrun' \\(did you mean team_return"):
        _train(config)
    assert not (tmp_path / "typo").exists()


def test_keep_best_settings_are_checked_at_start():
    from jaxmarl_llm.train.config import validate_lm_rl

    c = tiny_lm_rl("text/tic_tac_toe", in_graph_eval={"every": 7})
    c.run.keep_best = "eval/win_rate_vs_random"
    with pytest.raises(ConfigError, match="in_graph_eval.every to a multiple of run.updates_per_chunk"):
        validate_lm_rl(c)
    c.in_graph_eval.every = 2 * c.run.updates_per_chunk
    validate_lm_rl(c)
    c.run.keep_best_mode = "highest"
    with pytest.raises(ConfigError, match="run.keep_best_mode"):
        validate_lm_rl(c)
