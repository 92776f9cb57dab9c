"""Orbax checkpoints of the whole runner state (params, optimizer, envs, key).

Because the runner state is everything the next update depends on, restoring
it and running on gives bit-for-bit the numbers the uninterrupted run would
have produced. Under several processes (parallel/multihost.py) every process calls save and
restore with the same global state: orbax writes each shard from the process that holds it, and the
metadata from the primary. A restore places every array on the shardings of `like` (never the device ids recorded
at save), so a run saved by N processes resumes with another process count over the same mesh
(tests/test_multiprocess.py).

A save is atomic: a run killed mid-save resumes from the checkpoint before. On a local or shared disk orbax
writes each step to a temporary folder and renames it. On a Cloud Storage FUSE mount (a bucket mounted on every
host of a pod, tpu_scripts/install.sh --bucket) a folder rename is a copy and delete of every file, so there each
step is written in place and marked complete by a `commit_success.txt` (orbax's COMMIT_FILE mode, chosen by
`on_gcsfuse`); a step folder without it is ignored on resume and written over by the next save.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import threading
from typing import Any

import jax
import orbax.checkpoint as ocp
from orbax.checkpoint import options as ocp_options

from jaxmarl_llm.errors import ConfigError, DiskFullError
from jaxmarl_llm.parallel import multihost

MB = 2**20
SHOWN = 5  # arrays named in a mismatch message


@contextlib.contextmanager
def ctrl_c_after():
    """Hold a Ctrl-C (SIGINT) until the block is done, then raise KeyboardInterrupt: a save is never cut in the
    middle of orbax's writes, so the checkpoint an interrupted run names is complete and the manager's close has
    no half-done write to wait on. A second Ctrl-C interrupts at once. Outside the main thread (where no signal
    handler can be set) the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []

    def hold(signum, frame):
        if caught:  # the second Ctrl-C: the user means it
            raise KeyboardInterrupt
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


GCSFUSE = "fuse.gcsfuse"  # the file system type of a Cloud Storage FUSE mount in /proc/mounts


def on_gcsfuse(path: str, mounts: str = "/proc/mounts") -> bool:
    """Does `path` (existing or not) lie on a Cloud Storage FUSE mount: is the deepest mount point containing it
    of type fuse.gcsfuse? False where the mount table cannot be read (not Linux)."""
    try:
        with open(mounts) as f:
            table = [fields[1:3] for fields in map(str.split, f) if len(fields) >= 3]
    except OSError:
        return False
    path = os.path.abspath(path)
    best, kind = "", ""
    for point, fs_type in table:
        point = point.replace("\\040", " ")  # the table escapes spaces in paths
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fs_type
    return kind == GCSFUSE


class Checkpoints:
    """The `keep` latest steps of a folder; with `best_metric`, the `keep` best by that metric instead (orbax's
    best_fn: each step's metrics are saved beside it, so the ranking survives a restart)."""

    def __init__(self, directory: str, keep: int = 2, best_metric: str = "", best_mode: str = "max"):
        self.directory = os.path.abspath(directory)
        # on a Cloud Storage FUSE mount: mark complete steps with a file, no folder renames (module docstring)
        commit = (ocp_options.AtomicityOptions(mode=ocp_options.AtomicityMode.COMMIT_FILE)
                  if on_gcsfuse(self.directory) else None)
        ranked = {"best_fn": lambda metrics: metrics[best_metric], "best_mode": best_mode} if best_metric else {}
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False,
                                               atomicity_options=commit, **ranked)
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any, metrics: dict[str, float] | None = None) -> None:
        """Save `state` as `step` (with its `metrics` where steps are ranked); DiskFullError before writing
        anything when the disk cannot hold it. A Ctrl-C during the save takes effect when it is complete."""
        self.check_space(step, state)
        with ctrl_c_after():
            self.manager.save(step, args=ocp.args.StandardSave(_on_host(state)), metrics=metrics, force=True)
            self.manager.wait_until_finished()

    def size_needed(self, state: Any) -> int:
        """Bytes a new checkpoint will take: the latest one's size on disk, else the state's array bytes, plus a
        tenth and 1 MB for orbax's metadata. The new checkpoint is complete before the oldest is deleted."""
        latest = self.latest_step()
        if latest is not None:
            size = _folder_bytes(os.path.join(self.directory, str(latest)))
        else:
            size = sum(int(getattr(x, "nbytes", 0)) for x in jax.tree.leaves(state))
        return int(size * 1.1) + MB

    def check_space(self, step: int, state: Any) -> None:
        """Refuse a save the disk cannot hold: a save that runs out of space midway fails deep inside orbax's
        writer threads (hundreds of lines), and leaves a temporary folder behind."""
        need, free = self.size_needed(state), shutil.disk_usage(self.directory).free
        if not multihost.agree(free >= need):  # every process saves, or none does
            raise DiskFullError(f"no space for checkpoint {step} in {self.directory}: it needs about "
                                f"{need / MB:.1f} MB and the disk has {free / MB:.1f} MB free", self.directory)

    def restore(self, like: Any, step: int | None = None) -> Any:
        """Restore into the structure, shapes and shardings of `like` (a concrete runner state)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}; start without --config.resume")
        differ = self.mismatches(like, step)
        if differ:  # what a forced resume with another env / model size meets: name the arrays, in one line (orbax
            # would fail deep in its reader threads, and leave their errors printing as the process exits)
            listed = "; ".join(differ[:SHOWN]) + (f"; and {len(differ) - SHOWN} more" if len(differ) > SHOWN else "")
            raise ConfigError(
                f"checkpoint {self.directory}/{step} does not fit this config's runner state (saved -> now): "
                f"{listed}; the run was trained with other settings (its config.json)")
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        try:
            return self.manager.restore(step, args=ocp.args.StandardRestore(abstract))
        except (ValueError, KeyError) as err:
            raise ValueError(
                f"checkpoint {self.directory}/{step} does not match this config's runner state "
                f"(different env, network or num_envs?): {err}"
            ) from err

    def mismatches(self, like: Any, step: int) -> list[str]:
        """`name: saved shape -> this state's shape` for every array whose shape differs or that only one side
        has (names as orbax stores them: `params.lora.q.a`); [] when the checkpoint's metadata cannot be read."""
        try:
            reader = ocp.CheckpointManager(self.directory, item_handlers=ocp.StandardCheckpointHandler())
            saved = {_name(path): tuple(leaf.shape) for path, leaf in
                     jax.tree_util.tree_leaves_with_path(reader.item_metadata(step)) if hasattr(leaf, "shape")}
            reader.close()
        except Exception:  # noqa: BLE001 - only the message's detail depends on it
            return []
        now = {_name(path): tuple(jax.numpy.shape(leaf)) for path, leaf in jax.tree_util.tree_leaves_with_path(like)}
        return [f"{name}: {saved.get(name, '<absent>')} -> {now.get(name, '<absent>')}"
                for name in [*now, *(n for n in saved if n not in now)] if saved.get(name) != now.get(name)]

    def close(self) -> None:
        self.manager.close()


def _on_host(state: Any) -> Any:
    """The state as host arrays in a single-process run (every run but a pod's; a pod's processes each hold part).

    orbax saves an array replicated over several devices by slicing it among the replicas, each slice a jitted op
    dispatched from the saving thread while its writer threads copy other arrays off the devices; on 8 forced CPU
    devices under load that has hung a save. A host copy has no replicas to split; `restore` puts it back on the
    shardings of the state it restores into, so the checkpoint and the resume are the same.
    """
    return state if multihost.multiprocess() else jax.device_get(state)


def _name(path: tuple) -> str:
    """A tree path as one dotted name, whatever the node types (dicts in the checkpoint, dataclasses in the state)."""
    return ".".join(str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path)


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(base, name)) for base, _, names in os.walk(folder) for name in names)


BEST_DIR = "best"  # <out_dir>/best/<update>: the run's best checkpoint by config.run.keep_best


class BestCheckpoint:
    """The run's best state by one metric (config.run.keep_best), kept beside the latest ones in
    <out_dir>/best/<update>: a run whose greedy evaluation peaks and then falls can be continued, evaluated or
    branched (experiments/branch.py --at=best) from its peak. Only a chunk's last update is a candidate: its state
    is the one saved. The best so far is read back from the folder, so a resumed run competes with its past."""

    def __init__(self, out_dir: str, metric: str, mode: str = "max"):
        self.metric, self.sign = metric, 1.0 if mode == "max" else -1.0
        self.ckpt = Checkpoints(os.path.join(out_dir, BEST_DIR), keep=1, best_metric=metric, best_mode=mode)
        for step in self.ckpt.manager.all_steps():  # a resume that changed the metric: the kept one is not comparable
            saved = self.ckpt.manager.metrics(step) or {}
            if metric not in saved:
                self.close()
                raise ConfigError(f"run.keep_best={metric}: {self.ckpt.directory} keeps the best state by "
                                  f"{', '.join(saved) or 'another metric'}; keep that metric, or branch the run "
                                  "(experiments/branch.py) and keep another in the branch")

    def best(self) -> tuple[int, float] | None:
        """(update, value) of the best state kept, None before the first."""
        step = self.ckpt.manager.best_step()
        if step is None:
            return None
        return step, float(self.ckpt.manager.metrics(step)[self.metric])

    def offer(self, update: int, value: float, state: Any) -> bool:
        """Keep `state` (at `update`) when `value` beats the best so far (a NaN, an update not played, never
        does); True when kept. A tie keeps the earlier state."""
        if not math.isfinite(value):
            return False
        kept = self.best()
        if kept is not None and (update <= kept[0] or self.sign * value <= self.sign * kept[1]):
            return False
        self.ckpt.save(update, state, metrics={self.metric: float(value)})
        return True

    def close(self) -> None:
        self.ckpt.close()
