"""What the run loop needs to run as one of several processes (jax.distributed, run/cli.py).

Every process runs the same program on its own devices of one global mesh; they must take the same decisions
(run or stop, save or not) in the same order, or the next collective waits forever. So every process reads the
run folder and computes the same metrics, and only the primary process (0) writes the files a run shares
(config.json, metrics.csv, TensorBoard, plots, exports) and prints. Orbax checkpoints are the exception: every
process calls save and restore (orbax writes each array once, from the process that owns it).

With one process every helper here is the identity, a no-op or True: the single-process run is unchanged.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding


def multiprocess() -> bool:
    """Whether this run spans several processes (jax.distributed.initialize joined them)."""
    return jax.process_count() > 1


def primary() -> bool:
    """Whether this process writes the run's shared files and prints (process 0; always true alone)."""
    return jax.process_index() == 0


def barrier(name: str) -> None:
    """Wait until every process reaches `name` (no-op alone): e.g. all have read the run folder before the primary
    rewrites it."""
    if multiprocess():
        multihost_utils.sync_global_devices(f"jaxmarl_llm:{name}")


def agree(flag: bool) -> bool:
    """The primary process's `flag` on every process: a decision each process could take differently (free disk
    space read at slightly different times) must be one decision, or some processes wait in a collective forever."""
    if not multiprocess():
        return flag
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(flag, np.int32)))


def to_host(tree: Any) -> Any:
    """Every leaf of a tree of (global) arrays as the whole numpy array, on every process: an allgather under
    several processes (an array sharded over other processes' devices is not addressable here), device_get alone.
    Every process must call it (a collective)."""
    if not multiprocess():
        return jax.device_get(tree)
    return multihost_utils.process_allgather(tree, tiled=True)


def global_array(value: Any, sharding: NamedSharding) -> jax.Array:
    """An array on `sharding` (which may span other processes' devices) from `value`, the whole array, which every
    process holds identically (computed from the same key): each process keeps the pieces its own devices own.

    jax.device_put would also accept it, but first checks that every process holds the same value with one
    collective (and one compile) per leaf."""
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
