"""The device mesh and the one helper that runs a function data-parallel over it.

Everything runs through `shard_map`, also on one device (a mesh of size 1), so
the single-device and the pod code paths are the same program. Arrays with an
env axis are split over the mesh axis `data`; parameters, optimizer state and
keys are replicated. `sharded_chunk` compiles K updates of any trainer into one call.

Model sharding (`mesh.fsdp` > 1, the LM trainers: RL, SFT, DPO): the mesh is 2-D, `data` x `fsdp` (data = num_devices / fsdp;
the fsdp devices of a data row are neighbours in `jax.devices()` order, so on a GPU cluster or a TPU host they
share the fast links). The frozen base's big weights are sharded over `fsdp` (models/fsdp.py `param_specs`: a
NamedSharding on the base argument, each matrix on its largest dimension that fsdp divides) and replicated over
`data`; inside the one shard_map `forward` all-gathers each layer's weights just before it uses them, in the
layer scan, so one layer is whole at a time (ZeRO-3 / FSDP). The adapters, value heads, critic and optimizer
state stay replicated (a few MB: not worth sharding). The batch (envs, their KV caches, transcripts) is split
over every device, data and fsdp together (`batch_axes`): each device plays and scores its own
num_envs / num_devices episodes and gradients are summed over both axes. The fsdp devices of a row could instead
hold the same episodes, but they would compute the same rollout fsdp times over; splitting costs only that the
few decisions read from local rows around a forward (loop trip counts, width switches) must agree over the group,
which `models/fsdp.agree_max` does (hybrid sharded data parallel: ZeRO-3 inside a row, plain data parallel
across rows).

Why shard_map with explicit all-gathers, not jit with sharding annotations (GSPMD): the whole program (rollout,
sampling loops, per-device batches, the psums of the loss) is already one shard_map with per-device shapes; the
explicit gather puts the weight traffic exactly where it is meant to be (per layer, per forward) with no
partitioner guessing at a `while_loop` full of KV-cache scatters, and with fsdp=1 the program is exactly the
one it was (1-D mesh, axis `data`, no gather). The price: each forward (a prefill or one decode step) gathers the
whole base once, (fsdp-1)/fsdp of its bytes in per device; decoding is bound by that traffic on small batches.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxmarl_llm.models import attention as attention_lib
from jaxmarl_llm.models import fsdp as fsdp_lib
from jaxmarl_llm.parallel import multihost

DATA = "data"
FSDP = fsdp_lib.FSDP  # "fsdp": the axis the LM base's weights are sharded over


def make_mesh(num_devices: int = 0, fsdp: int = 1) -> Mesh:
    """A mesh over the first `num_devices` devices (0: all; under jax.distributed, every process's), Auto axis
    types: 1-D, axis `data`, when fsdp=1; else 2-D, `data` x `fsdp` (num_devices / fsdp rows of fsdp devices)."""
    devices = jax.devices()
    n = len(devices) if num_devices in (0, None) else num_devices
    if n > len(devices):
        raise ValueError(f"mesh.num_devices={n} but only {len(devices)} devices are visible ({devices[0].platform})")
    fsdp = int(fsdp or 1)
    if fsdp == 1:
        return Mesh(np.asarray(devices[:n]), (DATA,), axis_types=(jax.sharding.AxisType.Auto,))
    if fsdp < 1 or n % fsdp:
        raise ValueError(f"mesh.fsdp={fsdp} must divide mesh.num_devices={n}")
    return Mesh(np.asarray(devices[:n]).reshape(n // fsdp, fsdp), (DATA, FSDP),
                axis_types=(jax.sharding.AxisType.Auto,) * 2)


def fsdp_size(mesh: Mesh) -> int:
    """The number of devices the base's weights are sharded over (1: a 1-D mesh)."""
    return int(mesh.shape[FSDP]) if FSDP in mesh.axis_names else 1


def batch_axes(mesh: Mesh) -> str | tuple[str, ...]:
    """The mesh axes the batch is split over and gradients are summed over: `data`, or (`data`, `fsdp`)."""
    return DATA if FSDP not in mesh.axis_names else (DATA, FSDP)


def base_specs(trainer: Any, mesh: Mesh) -> Any:
    """PartitionSpec (prefix) of the trainer's base argument on `mesh`: replicated (P()) without an fsdp axis,
    else the trainer's `base_specs(fsdp)` (LM RL: models/fsdp.param_specs of its model)."""
    n = fsdp_size(mesh)
    if n == 1:
        return P()
    specs = getattr(trainer, "base_specs", None)
    if specs is None:
        raise ValueError(f"{type(trainer).__name__} cannot shard a base over the mesh axis {FSDP!r} (mesh.fsdp={n})")
    return specs(n)


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


def compiler_options(trainer: Any) -> dict[str, str] | None:
    """XLA options for a program of `trainer`'s updates: what its model's attention backend needs here
    (models/attention.compiler_options); None for a trainer without an LM policy."""
    cfg = getattr(getattr(trainer, "policy", None), "cfg", None)
    return None if cfg is None else attention_lib.compiler_options(cfg.attention_backend)


def sharded_chunk(trainer: Updatable, mesh: Mesh, num_updates: int) -> Callable[[Any, Any], tuple[Any, Any]]:
    """chunk(state, hp) = jit(shard_map(scan of `num_updates` updates)) -> (state, metrics [K], replicated).

    The runner state is donated (updated in place); the base weights (if any) go in as a replicated argument,
    or, on a mesh with an fsdp axis, placed once sharded over it (`base_specs`; the update gathers them).
    `chunk.lower(state, hp)` lowers the program without running it (memory analysis)."""
    update = bound_update(trainer)
    axes = batch_axes(mesh)

    def chunk(runner, hp, base):
        return jax.lax.scan(lambda r, _: update(r, hp, base, axis_name=axes), runner, None, length=num_updates)

    specs = base_specs(trainer, mesh)
    fn = jax.jit(shard_over_data(chunk, mesh, in_specs=(trainer.state_specs, P(), specs),
                                 out_specs=(trainer.state_specs, P())), donate_argnums=0,
                 compiler_options=compiler_options(trainer))
    base = getattr(trainer, "base", None)
    if fsdp_size(mesh) > 1:  # each device keeps only its blocks (a host-side base is never whole on a device)
        base = _placed_base(base, mesh, specs)

    def run(runner, hp):
        return fn(runner, hp, base)

    run.lower = lambda runner, hp: fn.lower(runner, hp, base)  # .compile().memory_analysis(): per-device bytes

    def compile(runner, hp):  # ahead of the first call (the runner times it): the compiled chunk, same signature
        executable = fn.lower(runner, hp, base).compile()
        call = lambda r, h: executable(r, h, base)  # noqa: E731
        call.memory_analysis = executable.memory_analysis  # per-device bytes: the runner checks them before a call
        call.out_info = executable.out_info  # (state, metrics) shapes: the runner checks the metrics' names
        return call

    run.compile = compile
    return run


_PLACED: dict[Mesh, tuple[Any, Any]] = {}  # mesh -> (the trainer's base, its sharded copy): placed once a run


def _placed_base(base: Any, mesh: Mesh, specs: Any) -> Any:
    """`base` put on `mesh` by `specs`, once per (base, mesh): a run compiles a chunk per chunk length and
    must not transfer a large base again for each."""
    kept = _PLACED.get(mesh)
    if kept is None or kept[0] is not base:
        kept = _PLACED[mesh] = (base, put(base, mesh, specs))
    return kept[1]
