"""Several runs side by side: curves with the mean and a band over seeds, and the interquartile mean (IQM) of a
metric at a budget with a 95% bootstrap interval, as rliable reports (Agarwal et al. 2021): the IQM drops the best
and worst quarter of runs, so one lucky or broken seed moves it less than the mean, and the interval says how much
the figure would move with other seeds.

Runs are grouped by their config.json: runs whose configs differ only in the seed (and run.*, the resume flags)
are one setting; a group's label names what sets it apart from the others.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import numpy as np

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.run.metrics_log import plot_curves, read_complete_rows
from jaxmarl_llm.run.run_identity import CONFIG_FILE, FINGERPRINT_KEY, flatten

IGNORED = ("seed", "run", "resume", "resume_force", FINGERPRINT_KEY)  # what does not make another setting


class Run(NamedTuple):
    folder: str
    config: dict[str, Any]  # flattened config.json, less IGNORED
    steps: np.ndarray  # [U] env steps
    rows: list[dict[str, str]]


def load_run(folder: str) -> Run:
    """A run folder's metrics and config; ConfigError (one line) when it is not a run folder."""
    metrics, record = os.path.join(folder, "metrics.csv"), os.path.join(folder, CONFIG_FILE)
    if not os.path.isfile(metrics) or not os.path.isfile(record):
        raise ConfigError(f"{folder}: not a run folder (metrics.csv and {CONFIG_FILE} of experiments/train.py)")
    rows = read_complete_rows(metrics)
    if not rows:
        raise ConfigError(f"{metrics}: no complete row")
    with open(record) as f:
        config = {k: v for k, v in flatten(json.load(f)).items() if k.split(".", 1)[0] not in IGNORED}
    return Run(folder, config, np.asarray([float(r["env_steps"]) for r in rows]), rows)


def group_runs(runs: list[Run]) -> dict[str, list[Run]]:
    """{label: runs of one setting}; the label is what differs between settings (`lr=0.003`), the folder's name
    when there is one setting per run and nothing differs."""
    settings: dict[str, list[Run]] = {}
    for run in runs:
        settings.setdefault(json.dumps(run.config, sort_keys=True, default=str), []).append(run)
    keys = sorted({k for run in runs for k in run.config})
    differing = [k for k in keys if len({json.dumps(r.config.get(k), default=str) for r in runs}) > 1]
    out = {}
    for members in settings.values():
        label = ", ".join(f"{k}={members[0].config.get(k)}" for k in differing) or os.path.basename(
            os.path.normpath(members[0].folder))
        out[label] = members
    return out


def score_at(run: Run, metric: str, budget: float) -> float:
    """The mean of `metric` over the last tenth of the run's updates up to `budget` env steps."""
    if metric not in run.rows[0]:
        raise ConfigError(f"{run.folder}: metrics.csv has no column {metric!r}; its columns: "
                          f"{', '.join(k for k in run.rows[0] if k not in ('update', 'env_steps'))}")
    values = np.asarray([float(r[metric]) for r, s in zip(run.rows, run.steps) if s <= budget])
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ConfigError(f"{run.folder}: no value of {metric} at or before {budget:g} env steps")
    return float(values[-max(1, values.size // 10):].mean())


def iqm(scores: np.ndarray) -> float:
    """The interquartile mean: the mean after dropping floor(n / 4) scores at each end (scipy's trim_mean(0.25))."""
    scores = np.sort(np.asarray(scores, np.float64))
    cut = scores.size // 4
    return float(scores[cut: scores.size - cut].mean())


def bootstrap_interval(scores: np.ndarray, reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the IQM, resampling runs with replacement."""
    rng = np.random.default_rng(seed)
    scores = np.asarray(scores, np.float64)
    draws = [iqm(rng.choice(scores, scores.size, replace=True)) for _ in range(reps)]
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def summarize(groups: dict[str, list[Run]], metric: str, budget: float) -> dict[str, dict[str, float]]:
    """{label: {"iqm", "low", "high", "runs"}} of `metric` at `budget`."""
    out = {}
    for label, members in groups.items():
        scores = np.asarray([score_at(run, metric, budget) for run in members])
        low, high = bootstrap_interval(scores)
        out[label] = {"iqm": iqm(scores), "low": low, "high": high, "runs": len(members)}
    return out


def plot_groups(groups: dict[str, list[Run]], metric: str, path: str, title: str = "") -> str:
    """Each group's mean curve over its runs (on the updates all of them reached) with a band of one standard
    deviation, each curve smoothed."""
    curves, bands = {}, {}
    for label, members in groups.items():
        n = min(len(run.rows) for run in members)
        ys = np.asarray([[float(r[metric]) for r in run.rows[:n]] for run in members])  # [R, U]
        mean, std = ys.mean(axis=0), ys.std(axis=0)
        xs = list(members[0].steps[:n])
        name = f"{label} ({len(members)} run{'s' if len(members) > 1 else ''})"
        curves[name] = (xs, list(mean))
        bands[name] = (list(mean - std), list(mean + std))
    return plot_curves(curves, path, metric, title, smooth=True, bands=bands)
