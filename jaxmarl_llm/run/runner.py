"""The Python loop around compiled chunks of updates: progress bar, logs, checkpoints, resume.

All learning happens inside `chunk(state, hparams)` (one XLA program of
`run.updates_per_chunk` updates). This loop only moves metrics to the host,
writes them, draws the bar and saves the runner state between chunks. Any
trainer with the small interface below can use it:

    trainer.init(key, hp) -> state          trainer.hparams
    trainer.state_specs                     trainer.num_updates
    chunk_fn(trainer, mesh, K) -> jit fn(state, hp) -> (state, {name: [K]})

A chunk that diverged (a non-finite metric in its last update, or a `config.stop` bound crossed: Stop below) is
never saved: its metrics rows up to the divergence are written, and DivergenceError names the metric, the update
and the last checkpoint kept (experiments/*.py: one line on stderr, exit status 3).
"""

from __future__ import annotations

import difflib
import math
import os
import shutil
import sys
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.errors import ConfigError, DiskFullError, DivergenceError, Interrupted, no_space_cause
from jaxmarl_llm.evaluation import cross_play
from jaxmarl_llm.parallel import mesh as mesh_lib, multihost
from jaxmarl_llm.parallel.device_memory import GIB, compiled_bytes, device_memory_bytes
from jaxmarl_llm.parallel.peak import peak_flops
from jaxmarl_llm.run.checkpoints import BestCheckpoint, Checkpoints
from jaxmarl_llm.run import transcript_log, wandb_log
from jaxmarl_llm.run.metrics_log import MetricsLog, plot_curves, read_csv
from jaxmarl_llm.run.run_identity import (CONFIG_FILE, HISTORY_FILE, SHOWN, check_same_run, config_differences,
                                          current_record, holds_checkpoints, record_resume, run_record, saved_steps,
                                          write_run_record)
from jaxmarl_llm.train.config.common import STOP_METRICS, parse_resume
from jaxmarl_llm.train.lm.episode_sample import EPISODES, take_episodes


# what a run writes into run.out_dir (an SFT / DPO export, model/ and adapter/, is rewritten at the end)
RUN_OUTPUTS = ("checkpoints", "metrics.csv", "tb", "learning_curve.png", "eval_curve.png", "eval.json", CONFIG_FILE,
               HISTORY_FILE, transcript_log.JSONL, transcript_log.PAGE, "wandb", wandb_log.RUN_ID_FILE)


def resume_dir(config) -> str | None:
    """The run directory to continue, from `config.resume` (""/False = fresh, True = run.out_dir, else a path)."""
    resume = parse_resume(config.resume)
    if resume is False:
        return None
    return config.run.out_dir if resume is True else resume


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


def prepare_out_dir(config) -> str:
    """Check the run folder (a fresh run's is free, a resume's config is the run's), then clear it
    (run.overwrite) and record a fresh run's config.json (a resume's config is recorded once its checkpoint is
    restored: run_training); returns it. Under several processes every process checks the folder
    before the primary changes it, and none goes on before it has: all of them see the same folder."""
    check_fresh_out_dir(config)
    out_dir = resume_dir(config) or config.run.out_dir
    if resume_dir(config) is not None:  # a forced resume's warning waits for its restore (run_training)
        check_same_run(config, out_dir, announce=False)
    multihost.barrier("run folder checked")
    if multihost.primary() and resume_dir(config) is None:
        if config.run.overwrite:  # validation refuses overwrite with resume
            removed = clear_run(out_dir)
            if removed:
                print(f"run.overwrite: deleted {', '.join(removed)} of the earlier run in {out_dir}")
        write_run_record(out_dir, run_record(config))  # what the next resume of this run is compared with
    multihost.barrier("run folder ready")
    return out_dir


def _saved_update(config) -> int:
    """The update a resume will continue from, read from the folder's names alone (0 for a fresh run), so that
    the first chunk can be compiled, at the length the run will call it, before the folder is touched."""
    folder = resume_dir(config)
    return max(saved_steps(folder), default=0) if folder else 0


def _say(line: str) -> None:
    """Print once per run: on the primary process."""
    if multihost.primary():
        print(line)


def run_training(config, trainer, chunk_fn: Callable, steps_per_update: int, headline: str = "team_return",
                 trainable: Callable[[Any], Any] | None = None,
                 describe: Callable[[int, dict], list[dict]] | None = None) -> dict[str, Any]:
    """Train to `trainer.num_updates`, resuming when asked; returns the final state and last metrics.

    A resume first checks that `config` is the config the run continues with (run/run_identity.py, else
    ConfigError before any file changes) and, once restored, appends any change to config_history.jsonl.
    `trainable(state)`: the trained parameters, whose norm config.stop.max_param_norm_growth bounds (default: the
    accessor run/trainers.py registers for config.trainer). `describe(update, episodes)`: the trainer's records of
    the episodes an update returned beside its metrics (run/transcript_log.py), written every
    run.transcripts_every updates. A divergence raises DivergenceError (module doc).
    Under several processes (parallel/multihost.py) every process runs this loop and saves checkpoints; only the
    primary writes config.json, metrics.csv, TensorBoard and the plots, and draws the bar."""
    mesh = mesh_lib.make_mesh(config.mesh.num_devices, config.mesh.get("fsdp", 1))
    hp = trainer.hparams
    state = mesh_lib.put(jax.jit(trainer.init)(jax.random.PRNGKey(config.seed), hp), mesh, trainer.state_specs)
    per_chunk = config.run.updates_per_chunk
    compiled: dict[int, Callable] = {}
    first = min(per_chunk, trainer.num_updates - _saved_update(config))
    if first > 0:  # compiled and checked against the device's memory before any file changes
        compiled[first] = _compile(config, chunk_fn(trainer, mesh, first), state, hp, first)
        check_keep_best(config, compiled[first])
    out_dir = prepare_out_dir(config)

    ckpt = Checkpoints(os.path.join(out_dir, "checkpoints"), keep=config.run.keep_checkpoints)
    keep_best = str(config.run.get("keep_best", ""))
    try:
        best = BestCheckpoint(out_dir, keep_best, config.run.get("keep_best_mode", "max")) if keep_best else None
    except ConfigError:  # a resume that changed the kept metric: refused before anything is restored
        ckpt.close()
        raise
    start = 0
    if resume_dir(config) is not None:
        start = ckpt.latest_step() or 0
        if start:
            state = _restore(config, ckpt, state, start, out_dir)
            _say(f"resumed {out_dir} at update {start}/{trainer.num_updates}")
        else:
            _say(f"no checkpoint in {out_dir}; starting from update 0")
        check_same_run(config, out_dir, announce=multihost.primary())  # a forced resume's differences, said once
        if multihost.primary():  # only now: a resume that fails to restore leaves the run's record as it was
            record_resume(out_dir, run_record(config), start)
    log = (MetricsLog(out_dir, tensorboard=config.run.tensorboard, resume_from_update=start if start else None)
           if multihost.primary() else None)
    wandb = (wandb_log.WandbLog(config.run, out_dir, config.to_dict(), resumed=bool(start))
             if multihost.primary() and config.run.get("wandb", False) else None)
    transcripts = _transcripts(config, out_dir, describe, start, steps_per_update, log, wandb)

    guard = Guard(config.get("guard")) if multihost.primary() else Guard()  # warnings: once, by the primary
    stop = Stop(config.get("stop"), _trainable_of(config, trainable), state, start)
    bar = _progress(config, trainer.num_updates, start) if multihost.primary() else None
    peak = _peak(config, mesh)
    update, chunks_done, last = start, 0, {}
    try:
        while update < trainer.num_updates:
            k = min(per_chunk, trainer.num_updates - update)
            if k not in compiled:
                compiled[k] = _compile(config, chunk_fn(trainer, mesh, k), state, hp, k)
            t0 = time.perf_counter()
            state, metrics = compiled[k](state, hp)
            metrics = jax.device_get(metrics)
            episodes = take_episodes(metrics)  # {field: [k, ...]}: the sampled episodes (transcripts), not rows
            seconds = time.perf_counter() - t0
            sps = k * steps_per_update / seconds  # the chunk's throughput, on each of its rows
            rows = []
            for i in range(k):
                row = {"update": update + i + 1, "env_steps": (update + i + 1) * steps_per_update}
                row.update({name: float(np.asarray(v)[i]) for name, v in metrics.items()})
                row["steps_per_second"] = sps
                row.update(throughput(row, seconds / k, peak))
                rows.append(row)
            crossed = stop.check_rows(rows)  # the first update past a metric bound: its row is the last written
            if crossed is not None:
                rows = rows[: crossed[0] + 1]
            update += len(rows)
            chunks_done += 1
            if log is not None:
                log.write(rows)
            for i, row in enumerate(rows):  # row by row: W&B's steps only grow, a row's transcripts sit at its step
                if wandb is not None:
                    wandb.write([row])
                if transcripts is not None and episodes:
                    transcripts.write(int(row["update"]), {name: v[i] for name, v in episodes.items()})
            guard.check(rows)
            last = rows[-1]
            if bar is not None:
                bar.update(len(rows))
                bar.set_postfix({headline: f"{last.get(headline, float('nan')):.2f}", "sps": f"{last['steps_per_second']:.0f}",
                                 **({"tok/s": f"{last['tokens_per_second']:.0f}", "mfu": f"{last['mfu']:.1%}"}
                                    if "mfu" in last else {})})
            if crossed is not None:
                raise stop.diverged(*crossed[1:], update, ckpt)
            _check_finite(last, update, ckpt)
            stop.check_params(state, update, ckpt)  # before the save: a chunk past a bound is never saved
            if best is not None:  # before the latest: a kill between the two saves loses no best state
                best.offer(update, last.get(keep_best, math.nan), state)
            if chunks_done % config.run.checkpoint_every == 0 or update == trainer.num_updates:
                ckpt.save(update, state)
    except KeyboardInterrupt:  # Ctrl-C: say where the run stopped and how to go on (its metrics rows are kept)
        raise _interrupted(update, trainer.num_updates, ckpt) from None
    except Exception as err:
        if no_space_cause(err) is None:
            raise
        raise _disk_full(err, out_dir, update, ckpt) from err
    finally:
        if bar is not None:
            bar.close()
        _close_all(log, ckpt, best, wandb)

    if config.run.plot and log is not None:
        rows = read_csv(log.path)
        xs = [float(r["env_steps"]) for r in rows]
        title = _title(config, out_dir)
        plot_curves({headline: (xs, [float(r[headline]) for r in rows])}, os.path.join(out_dir, "learning_curve.png"),
                    headline, title, smooth=True, references=dict(config.run.get("references", {})))
        evals = {name: _played(rows, name) for name in rows[-1] if name.startswith(EVAL_PREFIX) and "_seat" not in name
                 and not name.startswith(cross_play.METRIC_PREFIXES)}
        evals = {name: xy for name, xy in evals.items() if any(y != 0 for y in xy[1])}  # never-seen events: no line
        if evals:  # in-graph evaluation, on its own panel: only the updates that played it
            targets = {f"target {name}": value for name, value in dict(config.run.get("eval_targets", {})).items()}
            plot_curves(evals, os.path.join(out_dir, "eval_curve.png"), "rate (greedy games)", title,
                        references=targets, markers=True)
        league = cross_play.from_metrics(rows)
        if league is not None:  # in-graph cross-play: each player's rating over the run, the last table
            results, elo = league
            rated = {name: _played(rows, cross_play.METRIC_PREFIXES[0] + name) for name in results.names}
            plot_curves(rated, os.path.join(out_dir, "ratings_curve.png"), "Elo (cross-play)", title, markers=True)
            cross_play.plot_scores(results, elo, os.path.join(out_dir, "cross_play.png"), title)
    return {"state": state, "metrics": last, "out_dir": out_dir}


def _transcripts(config, out_dir: str, describe, start: int, steps_per_update: int, log, wandb):
    """The run's TranscriptLog (the primary's, when the trainer describes episodes and run.transcripts_every > 0),
    its markdown also to TensorBoard's text tab (at env steps, as the scalars) and to W&B (at the update)."""
    every = int(config.run.get("transcripts_every", 0))
    if describe is None or not every or not multihost.primary():
        return None

    def text(tag: str, markdown: str, update: int) -> None:
        if log is not None:
            log.text(tag, markdown, update * steps_per_update)
        if wandb is not None:
            wandb.text(tag, markdown, update)

    return transcript_log.TranscriptLog(out_dir, describe, every, _title(config, out_dir), text, start if start else None)


def _title(config, out_dir: str) -> str:
    """The plots' and the transcripts page's title: run.title (the config file and variant) or the folder, the seed."""
    return f"{config.run.get('title') or os.path.basename(os.path.normpath(out_dir))}, seed {config.seed}"


def _restore(config, ckpt: Checkpoints, like: Any, step: int, out_dir: str) -> Any:
    """Checkpoint `step` into `like`'s shapes; a forced resume whose state does not fit names, in the same line,
    the settings that differ from the run's."""
    try:
        return ckpt.restore(like, step)
    except ConfigError as err:
        try:
            differences = config_differences(current_record(out_dir) or {}, run_record(config))
        except (OSError, ValueError):
            differences = []
        if not differences:
            raise
        raise ConfigError(f"{err}; this config differs from the run's in {'; '.join(differences[:SHOWN])}") from None


def _close_all(*files) -> None:
    """Close each of `files`; while an error is stopping the run, an error in closing (the tensorboard writer's
    last flush on a full disk) must not replace it."""
    stopping = sys.exc_info()[1] is not None
    first = None
    for f in files:
        if f is None:  # a process other than the primary keeps no metrics log
            continue
        try:
            f.close()
        except Exception as err:
            first = first or err
    if first is not None and not stopping:
        raise first


def _disk_full(err: BaseException, out_dir: str, update: int, ckpt: Checkpoints) -> DiskFullError:
    """The one line for a write that found the disk full: the file, the update, and how to go on. Nothing is lost:
    the last complete checkpoint stays (orbax writes a save to a temporary folder and renames it when complete),
    and the resume drops metrics.csv rows past it, with a row the failed write tore."""
    cause, path = no_space_cause(err)
    if path is not None:  # orbax writes checkpoint N into N.orbax-checkpoint-tmp/...: name checkpoint N
        path = path.split(".orbax-checkpoint-tmp")[0]
    last = ckpt.latest_step()
    then = (f"continue from update {last} (its last complete checkpoint) with --config.resume=True" if last else
            "run the same command again (no checkpoint was complete, the run starts over)")
    what = str(cause) if isinstance(cause, DiskFullError) else f"no space left on device writing {path or out_dir}"
    return DiskFullError(f"{what} after update {update}: free space on that disk, then {then}", path or out_dir)


def _interrupted(update: int, total: int, ckpt: Checkpoints) -> Interrupted:
    """The one line for Ctrl-C: the updates done, the last complete checkpoint, how to continue. A save the
    interrupt cut short finishes first (orbax renames a checkpoint into place only when it is complete); metrics.csv
    rows past the checkpoint are dropped by the resume, as after kill -9."""
    try:
        ckpt.manager.wait_until_finished()
    except Exception:  # a save that cannot finish is not the checkpoint named below
        pass
    last = ckpt.latest_step()
    then = (f"the last checkpoint is update {last} in {ckpt.directory}; continue with --config.resume=True" if last
            else "no checkpoint was saved yet; run the same command again to start over")
    return Interrupted(f"interrupted after update {update} of {total}; {then}")


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


def _compile(config, chunk: Callable, state: Any, hp: Any, k: int) -> Callable:
    """The chunk of k updates compiled ahead of its first call, so its time is said apart from the run's, and
    checked against the device's memory before it runs (check_compiled_memory)."""
    if not hasattr(chunk, "compile"):  # a chunk function of a test's own: compiled at its first call
        return chunk
    t0 = time.perf_counter()
    executable = chunk.compile(state, hp)
    _say(f"compiled {k} update{'s' if k > 1 else ''} per call in {time.perf_counter() - t0:.1f} s")
    if hasattr(executable, "memory_analysis"):
        check_compiled_memory(config, executable.memory_analysis(), k)
    return executable


def check_keep_best(config, executable: Any) -> None:
    """ConfigError (one line) when config.run.keep_best names a metric the compiled chunk does not return: a
    misspelt name would otherwise keep nothing, silently, for the whole run."""
    metric = str(config.run.get("keep_best", ""))
    out = getattr(executable, "out_info", None)
    if not metric or out is None:  # off, or a test's own chunk function (no compiled outputs to read)
        return
    names = sorted(n for n in out[1] if not n.startswith(EPISODES))  # the transcripts' fields are not rows
    if metric not in names:
        close = difflib.get_close_matches(metric, names, n=3)
        raise ConfigError(f"config.run.keep_best: this run logs no metric {metric!r}"
                          + (f" (did you mean {' or '.join(close)}?)" if close else "")
                          + f"; its metrics: {', '.join(names)}")


def check_compiled_memory(config, analysis, k: int) -> None:
    """ConfigError (one line) when XLA's analysis of the compiled chunk asks more of a device than it has, before
    the chunk runs: a run too big fails in seconds with what it needs, not with RESOURCE_EXHAUSTED mid-call. The
    hint scales num_envs by the share that fits (a chunk's memory grows about linearly with the batch)."""
    if analysis is None:  # a backend without the analysis
        return
    need, have = compiled_bytes(analysis), device_memory_bytes(config)
    if need <= have:
        return
    envs = int(config.get("num_envs", 0))
    devices = max(int(config.mesh.get("num_devices", 0)) or jax.device_count(), 1) if "mesh" in config else 1
    fits = int(0.95 * envs * have / need) // devices * devices  # 5% for what does not grow with the batch
    hint = (f"num_envs={fits} or fewer would fit" if fits >= 1 else "a smaller num_envs, num_steps or model")
    raise ConfigError(f"memory: a chunk of {k} update{'s' if k > 1 else ''} needs {need / GIB:.1f} GiB per device "
                      f"(XLA's analysis of the compiled program), the device has {have / GIB:.1f} GiB "
                      f"(mesh.device_memory_gib to set it); {hint}")


def _peak(config, mesh) -> float | None:
    """The mesh's peak matmul FLOP/s in the model's compute dtype (parallel/peak.py); None for runs without a
    model (MLP) or on a device with no known peak."""
    if "model" not in config:
        return None
    try:
        one, source = peak_flops(config.model.get("dtype", "float32"))
    except ValueError as err:
        _say(f"mfu not reported: {err}")
        return None
    _say(f"mfu over {one * mesh.size / 1e12:.3g} TFLOP/s ({source}, x{mesh.size} devices)")
    return one * mesh.size


def throughput(row: dict[str, float], seconds: float, peak: float | None) -> dict[str, float]:
    """tokens_per_second (what the update's forwards read: rollout + loss) and mfu (its model FLOPs over the
    peak) from the update's own counts (train/lm/throughput.py) and its share of the chunk's wall time."""
    flops = sum(v for k, v in row.items() if k.startswith("flops_"))
    if not flops:
        return {}
    out = {"tokens_per_second": (row.get("tokens_rollout", 0.0) + row.get("tokens_loss", 0.0)) / seconds}
    if peak:
        out["mfu"] = flops / seconds / peak
    return out


EVAL_PREFIX = "eval/"  # metrics of the in-graph evaluation: NaN in the rows of updates that did not play it


def _played(rows: list[dict[str, str]], name: str) -> tuple[list[float], list[float]]:
    kept = [r for r in rows if np.isfinite(float(r[name]))]
    return [float(r["env_steps"]) for r in kept], [float(r[name]) for r in kept]


def _progress(config, total: int, start: int):
    if not config.run.progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=start, desc="updates", dynamic_ncols=True)


def _check_finite(row: dict, update: int, ckpt: Checkpoints) -> None:
    """A non-finite metric in the chunk's last update (eval/ metrics are NaN between evaluations) -> DivergenceError."""
    bad = [k for k, v in row.items() if isinstance(v, float) and not np.isfinite(v) and k != "steps_per_second"
           and not (k.startswith(EVAL_PREFIX) and np.isnan(v))]
    if bad:
        raise DivergenceError(f"divergence: non-finite {', '.join(bad)} at update {update}; {_kept(ckpt)}",
                              metric=bad[0], update=update, last_checkpoint=ckpt.latest_step())


def _kept(ckpt: Checkpoints) -> str:
    """What a diverged run left to continue from, and how: the end of DivergenceError's message."""
    last = ckpt.latest_step()
    if last is None:
        return "no checkpoint was saved yet; start again with a lower lr (or max_grad_norm)"
    return (f"the last good checkpoint is update {last} in {ckpt.directory}; continue from it with a lower lr "
            "(or max_grad_norm): --config.resume=True --config.resume_force=True --config.lr=...")


def _trainable_of(config, trainable: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """`trainable`, else the accessor run/trainers.py registers for config.trainer (imported here: the registry
    imports every trainer)."""
    if trainable is not None:
        return trainable
    from jaxmarl_llm.run.trainers import TRAINERS

    spec = TRAINERS.get(config.get("trainer", "mlp_ppo"))
    return spec.trainable if spec is not None else None


@jax.jit
def global_norm(tree) -> jax.Array:
    """The L2 norm of every leaf together, in float32, scaled by the largest |entry| first so that parameters of
    1e30 (a blown-up run) give 1e30-and-more, not an overflowed inf; NaN when an entry is NaN or inf."""
    leaves = [jnp.asarray(x, jnp.float32) for x in jax.tree.leaves(tree)]
    if not leaves:
        return jnp.zeros((), jnp.float32)
    scale = jnp.max(jnp.stack([jnp.max(jnp.abs(x), initial=0.0) for x in leaves]))
    scale = jnp.where(scale > 0, scale, 1.0)
    return scale * jnp.sqrt(sum(jnp.sum(jnp.square(x / scale)) for x in leaves))


class Stop:
    """config.stop: bounds past which the run is diverging (0 = off; config/common.py STOP_METRICS names each
    bound's metric). The runner checks every row of a chunk against the metric bounds and, at the chunk's end, the
    growth of the trained parameters' norm over `reference` (its norm at the start of this run or, on a resume,
    at the restored update: checkpoints store nothing for it), before the chunk is saved; a crossing raises
    DivergenceError. A run whose trained parameters start at norm 0 has no growth factor: that bound is skipped."""

    def __init__(self, bounds, trainable: Callable[[Any], Any] | None, state: Any, start: int):
        self.bounds = {k: float(v) for k, v in (bounds or {}).items() if float(v) > 0}
        self.trainable, self.reference, self.start = None, 0.0, start
        if "max_param_norm_growth" in self.bounds and trainable is not None:
            self.reference = float(global_norm(trainable(state)))
            if self.reference > 0 and np.isfinite(self.reference):
                self.trainable = trainable

    def check_rows(self, rows: list[dict[str, float]]) -> tuple[int, str, float] | None:
        """(index of the first row past a metric bound, its config key, its value), or None."""
        for i, row in enumerate(rows):
            if row.get("scored", 1.0) == 0.0:  # no minibatch ran (lm_rl): no loss, no KL
                continue
            for key, bound in self.bounds.items():
                value = row.get(STOP_METRICS[key])
                if value is not None and value > bound:
                    return i, key, value
        return None

    def check_params(self, state: Any, update: int, ckpt: Checkpoints) -> None:
        """The trained parameters' norm growth after `update` -> DivergenceError past the bound (or non-finite)."""
        if self.trainable is None:
            return
        growth = float(global_norm(self.trainable(state))) / self.reference
        if not growth <= self.bounds["max_param_norm_growth"]:  # NaN too
            raise self.diverged("max_param_norm_growth", growth, update, ckpt)

    def diverged(self, key: str, value: float, update: int, ckpt: Checkpoints) -> DivergenceError:
        metric, bound = STOP_METRICS[key], self.bounds[key]
        norms = (f": parameter norm {value * self.reference:.4g}, {self.reference:.4g} at update {self.start}"
                 if key == "max_param_norm_growth" else "")
        return DivergenceError(f"divergence: {metric} = {value:.4g} at update {update} > bound {bound:g} "
                               f"(config.stop.{key}{norms}); {_kept(ckpt)}",
                               metric=metric, update=update, last_checkpoint=ckpt.latest_step())
