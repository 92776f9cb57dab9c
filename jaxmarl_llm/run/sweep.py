"""Hyper-parameter sweeps as one program: `jax.vmap` of the trainer over runs.

Every numeric hyper-parameter in `trainer.hparams` (lr, clip, entropy, ...)
and the seed can vary; each run is one row of a grid, and all rows advance
together in one compiled chunk of updates. Results are a table and one plot.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.models import fsdp
from jaxmarl_llm.parallel.mesh import bound_update, compiler_options
from jaxmarl_llm.run.metrics_log import plot_curves
from jaxmarl_llm.train.config import ConfigError

SWEEP_TABLE = "sweep.csv"  # with sweep.png, what a sweep writes into its out_dir
SWEEP_CURVES = "sweep_curves.csv"  # the headline metric of every row at every update that logged it


def parse_values(text: str, key: str) -> list[float]:
    try:
        return [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"sweep.{key}: expected comma-separated numbers, got {text!r}") from None


def make_grid(hparams, overrides: dict[str, Sequence[float]], seeds: int, base_seed: int) -> tuple[list[dict], object, jax.Array]:
    """The cartesian grid of `overrides` x seeds -> (rows, stacked HParams [R], keys [R])."""
    unknown = sorted(set(overrides) - set(hparams._fields))
    if unknown:
        raise ConfigError(f"sweep.{unknown[0]}: not a numeric hyper-parameter; choose from {', '.join(hparams._fields)}")
    names = sorted(overrides)
    rows = []
    for values in itertools.product(*(overrides[n] for n in names)):
        for s in range(seeds):
            rows.append({**dict(zip(names, values)), "seed": base_seed + s})
    stacked = type(hparams)(
        *(jnp.asarray([row.get(f, float(getattr(hparams, f))) for row in rows], jnp.float32) for f in hparams._fields)
    )
    keys = jnp.stack([jax.random.PRNGKey(row["seed"]) for row in rows])
    return rows, stacked, keys


def runs_chunk(trainer, num_updates: int, together: bool = True):
    """(state [R], hp [R], base) -> (state, metrics [R, K]): K updates of every run, vmapped over axis
    `fsdp.SWEEP`. The runs take each branch of the update together (models/fsdp.py `over_sweep`): a decision
    per run (`together=False`, what bench/sweep_branches.py and the tests compare with) makes every `lax.cond` /
    `lax.switch` run all its branches (the evaluation at every update, every loss width)."""
    step = bound_update(trainer)

    def one(s, hp, b):
        with fsdp.sweep_runs() if together else contextlib.nullcontext():
            return jax.lax.scan(lambda r, _: step(r, hp, b), s, None, length=num_updates)

    return jax.vmap(one, in_axes=(0, 0, None), axis_name=fsdp.SWEEP)


def run_sweep(trainer, rows, hparams, keys, steps_per_update: int, out_dir: str, updates_per_chunk: int = 10,
              headline: str = "team_return", progress: bool = True) -> dict:
    """Train every row to the end; returns {"rows", "curves" [R, U], "final" [R]} and writes a PNG + CSV.

    `headline` may be any metric of the update; one logged only now and then (NaN between, e.g. an in-graph
    evaluation's) is drawn and averaged over the updates that logged it."""
    init = jax.jit(jax.vmap(trainer.init))
    state = init(keys, hparams)
    # LM trainers take their frozen base weights as an argument (shared by every run, never a constant)
    base, step = getattr(trainer, "base", None), bound_update(trainer)
    logged = jax.eval_shape(lambda s, hp: step(s, hp, base)[1], jax.tree.map(lambda x: x[0], state),
                            jax.tree.map(lambda x: x[0], hparams))
    if headline not in logged:
        raise ConfigError(f"sweep.metric: the update logs no {headline!r}; it logs {', '.join(sorted(logged))}")

    def chunk(k):
        fn = jax.jit(runs_chunk(trainer, k), donate_argnums=0, compiler_options=compiler_options(trainer))
        return lambda s, hp: fn(s, hp, base)

    compiled, history, done = {}, [], 0
    t0 = time.perf_counter()
    while done < trainer.num_updates:
        k = min(updates_per_chunk, trainer.num_updates - done)
        if k not in compiled:
            compiled[k] = chunk(k)
        state, metrics = compiled[k](state, hparams)
        history.append(np.asarray(jax.device_get(metrics[headline])))  # [R, k]
        done += k
        if progress:
            seen = np.concatenate(history, axis=1)
            latest = seen[:, np.isfinite(seen).any(0)][:, -1:]  # [R, 1]: each row's latest logged value
            span = f"{latest.min():.3g}..{latest.max():.3g}" if latest.size else "-"
            print(f"\rupdate {done}/{trainer.num_updates}  {headline} {span}  "
                  f"{done * steps_per_update * len(rows) / (time.perf_counter() - t0):.0f} steps/s", end="", flush=True)
    if progress:
        print()
    curves = np.concatenate(history, axis=1)  # [R, U]
    logged_at = np.flatnonzero(np.isfinite(curves).any(0))  # updates that logged the metric
    tail = max(1, len(logged_at) // 10)
    final = curves[:, logged_at[-tail:]].mean(axis=1)

    os.makedirs(out_dir, exist_ok=True)
    xs = list((logged_at + 1) * steps_per_update)
    labels = [", ".join(f"{k}={v:g}" for k, v in row.items()) for row in rows]
    plot_curves({lab: (xs, list(c[logged_at])) for lab, c in zip(labels, curves)}, os.path.join(out_dir, "sweep.png"),
                headline, "sweep")
    with open(os.path.join(out_dir, SWEEP_CURVES), "w") as f:  # every logged point of every row
        f.write(",".join(["update", *labels]).replace(", ", " ") + "\n")
        for u in logged_at:
            f.write(",".join([str(u + 1), *(f"{c:.6g}" for c in curves[:, u])]) + "\n")
    with open(os.path.join(out_dir, SWEEP_TABLE), "w") as f:
        names = list(rows[0].keys())
        f.write(",".join([*names, f"final_{headline}"]) + "\n")
        for row, value in zip(rows, final):
            f.write(",".join([*(f"{row[n]:g}" for n in names), f"{value:.4f}"]) + "\n")
    return {"rows": rows, "curves": curves, "final": final, "state": state}


def format_table(rows: list[dict], final: np.ndarray, headline: str, minimize: bool = False) -> str:
    """One line per row, the best first (the highest, or the lowest with `minimize`)."""
    names = list(rows[0].keys())
    lines = [" | ".join([*names, f"final {headline}"])]
    for row, value in sorted(zip(rows, final), key=lambda rv: rv[1] if minimize else -rv[1]):
        lines.append(" | ".join([*(f"{row[n]:g}" for n in names), f"{value:.2f}"]))
    return "\n".join(lines)
