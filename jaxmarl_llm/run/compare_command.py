"""Compare runs: the curves of a metric (mean and a band over seeds per setting) in one plot, and the interquartile
mean at a budget with a 95% bootstrap interval per setting (run/compare.py):

    python experiments/compare.py runs/a runs/b runs/c --metric=team_return --budget=400000 --out=compare.png
    python experiments/compare.py runs/seeds        # a folder of run folders: each of them

Runs whose config.json differ only in the seed (and run.*) are one setting.
"""

from __future__ import annotations

import os

from absl import flags

from jaxmarl_llm.run.cli import fail, main_guard, run_program
from jaxmarl_llm.run.compare import group_runs, load_run, plot_groups, summarize

_METRIC = flags.DEFINE_string("metric", "", "A metrics.csv column ('' = team_return where present, else "
                              "episode_return).")
_BUDGET = flags.DEFINE_float("budget", 0.0, "Env steps at which to score each run (0 = the shortest run's end).")
_OUT = flags.DEFINE_string("out", "compare.png", "The plot's path.")


def run_folders(paths: list[str]) -> list[str]:
    """Each argument a run folder, or a folder whose sub-folders are run folders."""
    out = []
    for path in paths:
        if not os.path.isdir(path):
            fail(f"{path}: no such folder")
        if os.path.isfile(os.path.join(path, "metrics.csv")):
            out.append(path)
            continue
        inner = sorted(os.path.join(path, d) for d in os.listdir(path)
                       if os.path.isfile(os.path.join(path, d, "metrics.csv")))
        if not inner:
            fail(f"{path}: neither a run folder (metrics.csv) nor a folder of run folders")
        out.extend(inner)
    return out


@main_guard
def main(argv):
    if len(argv) < 2:
        fail("name the run folders to compare: compare.py runs/a runs/b ...")
    runs = [load_run(folder) for folder in run_folders(argv[1:])]
    metric = _METRIC.value or ("team_return" if "team_return" in runs[0].rows[0] else "episode_return")
    budget = _BUDGET.value or min(float(run.steps[-1]) for run in runs)
    if budget < 0:
        fail(f"--budget={budget:g}: env steps, 0 or more")
    groups = group_runs(runs)
    table = summarize(groups, metric, budget)
    print(f"{metric} at {budget:g} env steps (mean of the last tenth of the updates), IQM [95% bootstrap interval]:")
    width = max(len(label) for label in table)
    for label, row in sorted(table.items(), key=lambda item: -item[1]["iqm"]):
        print(f"  {label:<{width}}  {row['iqm']:.4g} [{row['low']:.4g}, {row['high']:.4g}]  ({row['runs']} runs)")
    print(f"plot: {plot_groups(groups, metric, _OUT.value, f'{metric}: mean and one std over seeds')}")


def run() -> None:
    """The command (`jaxmarl-compare`, experiments/compare.py)."""
    run_program(main)
