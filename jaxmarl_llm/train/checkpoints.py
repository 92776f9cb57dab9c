"""Orbax checkpoints of the whole runner state (params, optimizer, envs, key).

Because the runner state is everything the next update depends on, restoring
it and running on gives bit-for-bit the numbers the uninterrupted run would
have produced. Under several processes (train/multihost.py) every process calls save and
restore with the same global state: orbax writes each shard from the process that holds it, and the
metadata from the primary. A restore places every array on the shardings of `like` (never the device ids recorded
at save), so a run saved by N processes resumes with another process count over the same mesh
(tests/test_multiprocess.py).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import jax
import orbax.checkpoint as ocp

from jaxmarl_llm.train import multihost
from jaxmarl_llm.train.errors import DiskFullError

MB = 2**20


class Checkpoints:
    def __init__(self, directory: str, keep: int = 2):
        self.directory = os.path.abspath(directory)
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False)
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any) -> None:
        """Save `state` as `step`; DiskFullError before writing anything when the disk cannot hold it."""
        self.check_space(step, state)
        self.manager.save(step, args=ocp.args.StandardSave(state), force=True)
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
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        try:
            return self.manager.restore(step, args=ocp.args.StandardRestore(abstract))
        except (ValueError, KeyError) as err:
            raise ValueError(
                f"checkpoint {self.directory}/{step} does not match this config's runner state "
                f"(different env, network or num_envs?): {err}"
            ) from err

    def close(self) -> None:
        self.manager.close()


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(base, name)) for base, _, names in os.walk(folder) for name in names)
