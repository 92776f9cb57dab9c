"""Curves people read and runs compared: the smoothed curve and reference lines, the interquartile mean of a metric
at a budget with its bootstrap interval, settings grouped from config.json, and experiments/compare.py in one
line per setting (or one error line, status 2)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from jaxmarl_llm.run.cli import config_name
from jaxmarl_llm.run.compare import bootstrap_interval, group_runs, iqm, load_run, score_at, summarize
from jaxmarl_llm.run.metrics_log import moving_average, plot_curves
from jaxmarl_llm.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(folder, lr: float, seed: int, finals: float, updates: int = 20):
    """A run folder by hand: team_return climbs linearly to `finals`, config.json with its lr and seed."""
    os.makedirs(folder)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"lr": lr, "seed": seed, "env_name": "mpe/simple_spread", "run": {"out_dir": str(folder)}}, f)
    with open(os.path.join(folder, "metrics.csv"), "w") as f:
        f.write("update,env_steps,team_return\n")
        for u in range(1, updates + 1):
            f.write(f"{u},{100 * u},{finals * u / updates}\n")
    return str(folder)


def test_iqm_drops_a_quarter_at_each_end_and_its_interval_holds_it():
    assert iqm(np.asarray([1.0, 2.0, 3.0, 4.0, 100.0])) == pytest.approx(3.0)  # 1 cut each side of 5
    assert iqm(np.asarray([5.0, 1.0, 3.0, 2.0, 4.0, 100.0, -50.0, 0.0])) == pytest.approx(2.5)  # 2 of 8
    assert bootstrap_interval(np.full(6, 7.0)) == (7.0, 7.0)
    scores = np.random.default_rng(0).normal(size=20)
    low, high = bootstrap_interval(scores)
    assert low < iqm(scores) < high and high - low < 2.0


def test_moving_average_is_a_trailing_mean_that_skips_nan():
    np.testing.assert_allclose(moving_average([1, 2, 3, 4, np.nan, 6], 2), [1, 1.5, 2.5, 3.5, 4, 6])
    np.testing.assert_allclose(moving_average([1, 2, 3], 1), [1, 2, 3])


def test_settings_are_grouped_by_config_and_scored_at_a_budget(tmp_path):
    runs = [load_run(_run(tmp_path / f"a{s}", 1e-3, s, -60.0 - s)) for s in range(3)]
    runs += [load_run(_run(tmp_path / f"b{s}", 3e-3, s, -70.0 - s)) for s in range(3)]
    groups = group_runs(runs)
    assert sorted(groups) == ["lr=0.001", "lr=0.003"] and all(len(g) == 3 for g in groups.values())
    assert score_at(runs[0], "team_return", 1000) == pytest.approx(-30.0)  # update 10 of 20: halfway
    table = summarize(groups, "team_return", 2000)  # each run: the mean of its last 2 of 20 rows, 0.975 x final
    assert table["lr=0.001"]["iqm"] == pytest.approx(-61.0 * 0.975)  # 3 runs: nothing cut
    assert table["lr=0.003"]["iqm"] == pytest.approx(-71.0 * 0.975)
    assert table["lr=0.001"]["low"] <= -61.0 * 0.975 <= table["lr=0.001"]["high"]
    with pytest.raises(ConfigError, match="no column 'episode_return'"):
        score_at(runs[0], "episode_return", 2000)
    with pytest.raises(ConfigError, match="not a run folder"):
        load_run(str(tmp_path))


def test_plot_with_smoothing_references_and_bands(tmp_path):
    xs, ys = list(range(200)), list(np.sin(np.arange(200) / 10.0))
    path = plot_curves({"r": (xs, ys)}, str(tmp_path / "c.png"), "r", "configs/x.py:v, seed 0", smooth=True,
                       references={"random": -1.0}, bands={"r": ([y - 1 for y in ys], [y + 1 for y in ys])})
    assert os.path.getsize(path) > 10_000


def test_config_name_is_the_file_and_variant():
    assert config_name(["train.py", "--config=/home/u/repo/configs/tic_tac_toe.py:scratch"]) == \
        "configs/tic_tac_toe.py:scratch"
    assert config_name(["train.py", "--config=my.py"]) == "my.py"


def test_compare_command_prints_each_setting_and_refuses_a_non_run_folder(tmp_path):
    for s in range(2):
        _run(tmp_path / "runs" / f"a{s}", 1e-3, s, -60.0)
        _run(tmp_path / "runs" / f"b{s}", 3e-3, s, -80.0)
    compare = os.path.join(ROOT, "experiments", "compare.py")
    out = subprocess.run([sys.executable, compare, str(tmp_path / "runs"), f"--out={tmp_path}/c.png"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("team_return at 2000 env steps")
    assert "lr=0.001  -58.5 [-58.5, -58.5]  (2 runs)" in lines[1] and "lr=0.003" in lines[2]
    assert os.path.exists(tmp_path / "c.png")
    os.makedirs(tmp_path / "empty")
    out = subprocess.run([sys.executable, compare, str(tmp_path / "empty")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0 and "neither a run folder" in out.stderr
