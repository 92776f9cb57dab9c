"""Orbax checkpoints of the whole runner state (params, optimizer, envs, key).

Because the runner state is everything the next update depends on, restoring
it and running on gives bit-for-bit the numbers the uninterrupted run would
have produced.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp


class Checkpoints:
    def __init__(self, directory: str, keep: int = 2):
        self.directory = os.path.abspath(directory)
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False)
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any) -> None:
        self.manager.save(step, args=ocp.args.StandardSave(state), force=True)
        self.manager.wait_until_finished()

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
