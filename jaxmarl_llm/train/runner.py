"""The Python loop around compiled chunks of updates: progress bar, logs, checkpoints, resume.

All learning happens inside `chunk(state, hparams)` (one XLA program of
`run.updates_per_chunk` updates). This loop only moves metrics to the host,
writes them, draws the bar and saves the runner state between chunks. Any
trainer with the small interface below can use it:

    trainer.init(key, hp) -> state          trainer.hparams
    trainer.state_specs                     trainer.num_updates
    chunk_fn(trainer, mesh, K) -> jit fn(state, hp) -> (state, {name: [K]})
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import Any, Callable

import jax
import numpy as np

from jaxmarl_llm.train import mesh as mesh_lib
from jaxmarl_llm.train.checkpoints import Checkpoints
from jaxmarl_llm.train.config.common import parse_resume
from jaxmarl_llm.train.errors import ConfigError
from jaxmarl_llm.train.metrics_log import MetricsLog, plot_curves, read_csv
from jaxmarl_llm.train.run_identity import CONFIG_FILE, check_same_run, run_record, write_run_record


# what a run writes into run.out_dir (an SFT / DPO export, model/ and adapter/, is rewritten at the end)
RUN_OUTPUTS = ("checkpoints", "metrics.csv", "tb", "learning_curve.png", "eval_curve.png", "eval.json", CONFIG_FILE)


def resume_dir(config) -> str | None:
    """The run directory to continue, from `config.resume` (""/False = fresh, True = run.out_dir, else a path)."""
    resume = parse_resume(config.resume)
    if resume is False:
        return None
    return config.run.out_dir if resume is True else resume


def holds_checkpoints(out_dir: str) -> bool:
    """Whether `out_dir` holds an earlier run's checkpoints (a finished, killed or diverged run)."""
    directory = os.path.join(out_dir, "checkpoints")
    return os.path.isdir(directory) and bool(os.listdir(directory))


def check_fresh_out_dir(config) -> None:
    """A fresh run must not start in an earlier run's folder: it would delete that run's metrics at once, later
    collide with its checkpoint steps, and a resume would mix the two runs. Touches no file."""
    if resume_dir(config) is not None or config.run.overwrite or not holds_checkpoints(config.run.out_dir):
        return
    raise ConfigError(
        f"config.run.out_dir: {config.run.out_dir!r} holds the checkpoints of an earlier run; continue it with "
        "--config.resume=True, or start fresh in a new --config.run.out_dir or with --config.run.overwrite=True "
        "(deletes that run's checkpoints and metrics)")


def clear_run(out_dir: str) -> list[str]:
    """run.overwrite=True: delete the earlier run's outputs (only RUN_OUTPUTS, never the folder); returns them."""
    removed = []
    for name in RUN_OUTPUTS:
        path = os.path.join(out_dir, name)
        if not os.path.lexists(path):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
        removed.append(name)
    return removed


def run_training(config, trainer, chunk_fn: Callable, steps_per_update: int, headline: str = "team_return") -> dict[str, Any]:
    """Train to `trainer.num_updates`, resuming when asked; returns the final state and last metrics.

    A resume first checks that `config` is the config the run was started with (its config.json, else
    ConfigError before any file changes); every start (re)writes config.json with the current config."""
    check_fresh_out_dir(config)
    out_dir = resume_dir(config) or config.run.out_dir
    if resume_dir(config) is not None:
        check_same_run(config, out_dir)
    elif config.run.overwrite:  # validation refuses overwrite with resume
        removed = clear_run(out_dir)
        if removed:
            print(f"run.overwrite: deleted {', '.join(removed)} of the earlier run in {out_dir}")
    write_run_record(out_dir, run_record(config))  # what the next resume of this run is compared with
    mesh = mesh_lib.make_mesh(config.mesh.num_devices)
    hp = trainer.hparams
    state = mesh_lib.put(jax.jit(trainer.init)(jax.random.PRNGKey(config.seed), hp), mesh, trainer.state_specs)

    ckpt = Checkpoints(os.path.join(out_dir, "checkpoints"), keep=config.run.keep_checkpoints)
    start = 0
    if resume_dir(config) is not None:
        start = ckpt.latest_step() or 0
        if start:
            state = ckpt.restore(state, start)
            print(f"resumed {out_dir} at update {start}/{trainer.num_updates}")
        else:
            print(f"no checkpoint in {out_dir}; starting from update 0")
    log = MetricsLog(out_dir, tensorboard=config.run.tensorboard, resume_from_update=start if start else None)

    guard = Guard(config.get("guard"))
    per_chunk = config.run.updates_per_chunk
    compiled: dict[int, Callable] = {}
    bar = _progress(config, trainer.num_updates, start)
    update, chunks_done, last = start, 0, {}
    try:
        while update < trainer.num_updates:
            k = min(per_chunk, trainer.num_updates - update)
            if k not in compiled:
                compiled[k] = chunk_fn(trainer, mesh, k)
            t0 = time.perf_counter()
            state, metrics = compiled[k](state, hp)
            metrics = jax.device_get(metrics)
            seconds = time.perf_counter() - t0
            sps = k * steps_per_update / seconds  # the chunk's throughput, on each of its rows
            rows = []
            for i in range(k):
                row = {"update": update + i + 1, "env_steps": (update + i + 1) * steps_per_update}
                row.update({name: float(np.asarray(v)[i]) for name, v in metrics.items()})
                row["steps_per_second"] = sps
                rows.append(row)
            update += k
            chunks_done += 1
            log.write(rows)
            guard.check(rows)
            last = rows[-1]
            if bar is not None:
                bar.update(k)
                bar.set_postfix({headline: f"{last.get(headline, float('nan')):.2f}", "sps": f"{last['steps_per_second']:.0f}"})
            _check_finite(last, update)
            if chunks_done % config.run.checkpoint_every == 0 or update == trainer.num_updates:
                ckpt.save(update, state)
    finally:
        if bar is not None:
            bar.close()
        log.close()
        ckpt.close()

    if config.run.plot:
        rows = read_csv(log.path)
        xs = [float(r["env_steps"]) for r in rows]
        plot_curves({headline: (xs, [float(r[headline]) for r in rows])}, os.path.join(out_dir, "learning_curve.png"), headline)
        evals = {name: _played(rows, name) for name in rows[-1] if name.startswith(EVAL_PREFIX) and "_seat" not in name}
        if evals:  # in-graph evaluation: only the updates that played it
            plot_curves(evals, os.path.join(out_dir, "eval_curve.png"), "rate (greedy games)")
    return {"state": state, "metrics": last, "out_dir": out_dir}


class Guard:
    """Warn once per bound when a metric crosses it: what precedes a collapse (config.guard, 0 = off).

    BOUNDS maps a config key to (metric, -1 for a lower bound / +1 for an upper bound, what to do)."""

    BOUNDS = {
        "min_entropy": ("entropy", -1, "the policy is becoming deterministic; lower lr or add ent_coef / kl_coef"),
        "max_kl_ref": ("kl_ref", +1, "the policy is drifting from the reference; lower lr or raise kl_coef"),
    }

    def __init__(self, bounds=None):
        self.bounds = {k: float(v) for k, v in (bounds or {}).items() if float(v) > 0}
        self.warned: set[str] = set()

    def check(self, rows: list[dict[str, float]]) -> list[str]:
        """Warnings issued for `rows` (printed to stderr)."""
        said = []
        for row in rows:
            for key, bound in self.bounds.items():
                metric, sign, advice = self.BOUNDS[key]
                value = row.get(metric)
                if key in self.warned or value is None or row.get("scored", 1.0) == 0.0:  # no minibatch ran
                    continue
                if sign * (value - bound) > 0:
                    self.warned.add(key)
                    said.append(f"warning: {metric} {value:.4g} {'<' if sign < 0 else '>'} guard.{key}={bound:g} at "
                                f"update {int(row['update'])}: {advice} (warned once)")
        for line in said:
            print(line, file=sys.stderr, flush=True)
        return said


EVAL_PREFIX = "eval/"  # metrics of the in-graph evaluation: NaN in the rows of updates that did not play it


def _played(rows: list[dict[str, str]], name: str) -> tuple[list[float], list[float]]:
    kept = [r for r in rows if np.isfinite(float(r[name]))]
    return [float(r["env_steps"]) for r in kept], [float(r[name]) for r in kept]


def _progress(config, total: int, start: int):
    if not config.run.progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=start, desc="updates", dynamic_ncols=True)


def _check_finite(row: dict, update: int) -> None:
    bad = [k for k, v in row.items() if isinstance(v, float) and not np.isfinite(v) and k != "steps_per_second"
           and not (k.startswith(EVAL_PREFIX) and np.isnan(v))]
    if bad:
        raise FloatingPointError(
            f"non-finite {', '.join(bad)} at update {update}; the last checkpoint is kept: lower lr or "
            "max_grad_norm and continue with --config.resume=True"
        )
