"""Where metrics go between compiled chunks: CSV, TensorBoard and a learning-curve PNG.

The CSV is the source of truth: a resumed run truncates it to the checkpointed
update (dropping a row torn by the kill) and appends, so a killed-and-resumed
run leaves the same file as an uninterrupted one.
"""

from __future__ import annotations

import csv
import io
import math
import os
from typing import Iterable, Mapping

import numpy as np


class MetricsLog:
    """Append-only rows of {name: float}, mirrored to TensorBoard when asked."""

    def __init__(self, out_dir: str, tensorboard: bool = True, resume_from_update: int | None = None):
        os.makedirs(out_dir, exist_ok=True)
        self.path = os.path.join(out_dir, "metrics.csv")
        self.fields: list[str] | None = None
        if resume_from_update is not None and os.path.exists(self.path):
            self._truncate(resume_from_update)
        elif os.path.exists(self.path):
            os.remove(self.path)
        self.tb = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            self.tb = SummaryWriter(os.path.join(out_dir, "tb"), purge_step=resume_from_update)

    def _truncate(self, last_update: int) -> None:
        rows = read_complete_rows(self.path)
        kept = [r for r in rows if int(float(r["update"])) <= last_update]
        if kept:
            self.fields = list(kept[0].keys())
        with open(self.path + ".tmp", "w", newline="") as f:  # then renamed: a full disk or a kill loses no row
            if kept:
                writer = csv.DictWriter(f, fieldnames=self.fields)
                writer.writeheader()
                writer.writerows(kept)
        os.replace(self.path + ".tmp", self.path)

    def write(self, rows: Iterable[Mapping[str, float]]) -> None:
        rows = list(rows)
        if not rows:
            return
        new_file = self.fields is None or not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        if self.fields is None:
            self.fields = list(rows[0].keys())
        added = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in self.fields]
        if added and not new_file:
            self._widen(added)
        else:
            self.fields += added
        with open(self.path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.fields, restval="nan")
            if new_file:
                writer.writeheader()
            writer.writerows(rows)
        if self.tb is not None:
            for row in rows:
                step = int(row["env_steps"])
                for name, value in row.items():
                    if name not in ("update", "env_steps") and value == value:  # NaN: not measured this update
                        self.tb.add_scalar(name, float(value), step)

    def _widen(self, added: list[str]) -> None:
        """New columns (a resumed run whose config logs more, e.g. `max_step_kl`'s `step_kl`): the file is rewritten
        with them, "nan" in the earlier rows (not measured there), so nothing the new config logs is dropped."""
        rows = read_csv(self.path)
        self.fields += added
        with open(self.path + ".tmp", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.fields, restval="nan")
            writer.writeheader()
            writer.writerows(rows)
        os.replace(self.path + ".tmp", self.path)

    def text(self, tag: str, text: str, step: int) -> None:
        """A block of markdown (the sampled transcripts) in TensorBoard's text tab at `step` (env steps)."""
        if self.tb is not None:
            self.tb.add_text(tag, text, step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def read_csv(path: str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_complete_rows(path: str) -> list[dict[str, str]]:
    """The CSV's rows less a torn last one: a kill during a write leaves a partial row (no line end, missing
    or unparsable fields) that would otherwise survive the resume's truncation and break the plot."""
    with open(path, newline="") as f:
        text = f.read()
    rows = list(csv.DictReader(io.StringIO(text)))
    if rows and (not text.endswith("\n") or is_torn(rows[-1])):
        rows.pop()
    return rows


def is_torn(row: dict[str | None, str | None]) -> bool:
    """A row with fewer (restval None) or more (key None) fields than the header, or a value that is no number."""
    if None in row or None in row.values():
        return True
    return not all(_is_number(v) for v in row.values()) or not math.isfinite(float(row.get("update", "nan")))


def _is_number(text: str) -> bool:
    """NaN counts: it is how a row says a metric was not measured that update."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def smooth_window(n: int) -> int:
    """The moving-average window for a curve of n points: about a fiftieth of it (1 = no smoothing)."""
    return max(1, n // 50)


def moving_average(y, window: int) -> np.ndarray:
    """Trailing mean over `window` points (fewer at the start); NaN points are skipped."""
    y = np.asarray(y, np.float64)
    ok = np.isfinite(y)
    sums, counts = np.cumsum(np.where(ok, y, 0.0)), np.cumsum(ok)
    lag = lambda c: np.concatenate([np.zeros(window), c[:-window]]) if window < len(c) else np.zeros(len(c))  # noqa: E731
    count = counts - lag(counts)
    return np.where(count > 0, (sums - lag(sums)) / np.maximum(count, 1), np.nan)


def plot_curves(curves: Mapping[str, tuple[list[float], list[float]]], path: str, ylabel: str, title: str = "",
                smooth: bool = False, references: Mapping[str, float] | None = None,
                bands: Mapping[str, tuple[list[float], list[float]]] | None = None,
                markers: bool = False) -> str:
    """One PNG with a line per (x, y) curve; returns its path. `smooth`: a moving average over the faded raw line;
    `references`: dashed horizontal lines, labelled (a random policy, a target, a peer's figure); `bands`: a
    shaded (low, high) per curve; `markers`: points (sparse curves such as evaluations)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, (x, y)) in enumerate(curves.items()):
        color = f"C{i % 10}"
        window = smooth_window(len(y)) if smooth else 1
        if window > 1:
            ax.plot(x, y, color=color, linewidth=0.8, alpha=0.25)
            ax.plot(x, moving_average(y, window), color=color, linewidth=1.5,
                    label=f"{label} (mean of {window})" if len(curves) == 1 else label)
        else:
            ax.plot(x, y, color=color, linewidth=1.2, label=label, marker="o" if markers else None, markersize=3)
        if bands and label in bands:
            ax.fill_between(x, *bands[label], color=color, alpha=0.15, linewidth=0)
    for i, (label, value) in enumerate((references or {}).items()):
        ax.axhline(float(value), color="0.35", linestyle=(0, (4, 2 + 2 * i)), linewidth=1.0, label=label)
    ax.set_xlabel("env steps")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if len(curves) > 1 or references or smooth:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
