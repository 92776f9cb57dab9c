"""The device mesh and the one helper that runs a function data-parallel over it.

Everything runs through `shard_map`, also on one device (a mesh of size 1), so
the single-device and the pod code paths are the same program. Arrays with an
env axis are split over the mesh axis `data`; parameters, optimizer state and
keys are replicated. `sharded_chunk` compiles K updates of any trainer into one call.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxmarl_llm.train import multihost

DATA = "data"


def make_mesh(num_devices: int = 0) -> Mesh:
    """A 1-D mesh over the first `num_devices` devices (0: all; under jax.distributed, every process's), axis
    `data`, Auto axis type."""
    devices = jax.devices()
    n = len(devices) if num_devices in (0, None) else num_devices
    if n > len(devices):
        raise ValueError(f"mesh.num_devices={n} but only {len(devices)} devices are visible ({devices[0].platform})")
    return Mesh(np.asarray(devices[:n]), (DATA,), axis_types=(jax.sharding.AxisType.Auto,))


def shard_over_data(fn: Callable, mesh: Mesh, in_specs: Any, out_specs: Any) -> Callable:
    """`shard_map` with classic collective semantics (we psum grads ourselves)."""
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def put(tree: Any, mesh: Mesh, specs: Any) -> Any:
    """Place a pytree on the mesh: `specs` is a PartitionSpec pytree prefix of `tree`. Under several processes
    every process holds the whole `tree` (the same init) and keeps the pieces of its own devices."""
    shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda x: isinstance(x, P))
    if not multihost.multiprocess():
        return jax.device_put(tree, shardings)
    return jax.tree.map(lambda s, sub: jax.tree.map(lambda x: multihost.global_array(x, s), sub), shardings, tree,
                        is_leaf=lambda x: isinstance(x, NamedSharding))


def global_index(num_local: int, axis_name: str | None) -> jax.Array:
    """int[num_local]: the global index of each local row, so per-row randomness ignores the split."""
    offset = 0 if axis_name is None else jax.lax.axis_index(axis_name) * num_local
    return offset + jax.numpy.arange(num_local)


class Updatable(Protocol):
    """What `sharded_chunk` / a sweep need of a trainer (mlp_ppo.Trainer, lm_rl.LMTrainer, sft, dpo)."""

    update: Callable  # update(state, hp, axis_name=None), or update(state, hp, base, axis_name=None) with a base
    state_specs: Any  # PartitionSpec prefix of the runner state


def bound_update(trainer: Updatable) -> Callable[..., Any]:
    """update(state, hp, base, axis_name=None) for every trainer: LM trainers take their frozen base weights as an
    argument (shared, never a constant folded into the program); a trainer with no `base` (None) ignores it."""
    if getattr(trainer, "base", None) is None:
        return lambda state, hp, base, axis_name=None: trainer.update(state, hp, axis_name=axis_name)
    return lambda state, hp, base, axis_name=None: trainer.update(state, hp, base, axis_name=axis_name)


def sharded_chunk(trainer: Updatable, mesh: Mesh, num_updates: int) -> Callable[[Any, Any], tuple[Any, Any]]:
    """chunk(state, hp) = jit(shard_map(scan of `num_updates` updates)) -> (state, metrics [K], replicated).

    The runner state is donated (updated in place); the base weights (if any) go in as a replicated argument."""
    update = bound_update(trainer)

    def chunk(runner, hp, base):
        return jax.lax.scan(lambda r, _: update(r, hp, base, axis_name=DATA), runner, None, length=num_updates)

    fn = jax.jit(shard_over_data(chunk, mesh, in_specs=(trainer.state_specs, P(), P()),
                                 out_specs=(trainer.state_specs, P())), donate_argnums=0)
    base = getattr(trainer, "base", None)
    return lambda runner, hp: fn(runner, hp, base)
