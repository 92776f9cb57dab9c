"""FSDP (ZeRO-3) for the decoder: the big weights live sharded over the mesh axis `fsdp`, and `forward` all-gathers
each one just before it is used.

    specs = param_specs(cfg, fsdp=8)      # PartitionSpec per leaf of param_shapes(cfg): the argument's sharding
    sharded(params, cfg)                  # static: are these the local shards (inside shard_map) or whole weights?
    gather(x, full_shape, dtype)          # cast, then all_gather over "fsdp" along the one dim where x is smaller
    agree_max(x, params, cfg)             # a branch / loop decision made the same on every device of the group
                                          # (and over a sweep's vmapped runs: over_sweep)

Which weights: the matrices (embed [V, D], lm_head [D, V], the q/k/v/o/gate/up/down kernels [N, in, out]), each
on its largest dimension that `fsdp` divides (never the layer axis N: `forward` scans over it); a matrix no
dimension of which divides stays whole. Norm weights and biases are vectors and stay whole on every device.

Why shapes, not a flag: `forward` compares each leaf's shape with `param_shapes(cfg)`. Inside the training
`shard_map` (parallel/mesh.py) a sharded leaf is a local block, smaller on exactly one dimension, and is gathered
(`jax.lax.all_gather(..., "fsdp", tiled=True)`); everywhere else (eval, export, a 1-device mesh, mesh.fsdp=1)
the leaves are whole and `forward` is the unsharded program it always was, gather-free. The models package
knows the axis name and nothing else of meshes.

Memory: in the layer scan only one layer's gathered weights exist at a time. Under a gradient (the loss forward
differentiates the adapters through the frozen base) each layer, and the LM head, is rematerialised
(`jax.checkpoint`, `REMAT_POLICY` = nothing saveable): the forward keeps only each layer's input, and the backward
runs the layer again, its all-gathers included, before differentiating it. Left to autodiff, the backward would
keep every layer's gathered weights alive (they are what x @ W's gradient reads): N whole layers, the base
itself. A policy that saves everything but the gathers is not enough either: any value computed from a whole
weight (its cast, the gather's own unnamed output) is saveable and is saved. Full rematerialisation is also what
a base this size needs for its activations (one layer input [tokens, D] per layer stays alive instead of every
intermediate: at Qwen3-8B sizes ~8 KiB instead of ~150 KiB per token and layer); it costs one more forward of the
base per gradient (about 4 forward-equivalents instead of 3). The base gets no gradient (an argument the loss does
not differentiate), so no reduce-scatter is ever needed.

Agreement: a collective must be reached by every device of its group. The trainers split the batch over the
`fsdp` devices too (parallel/mesh.py), and several decisions around a forward read the local rows: the sampler's
while loop (stop once every row has stopped), the width switches of scoring and caching, the chunked catch-up's
trip count, the rollout's "every local game ended" skip. With sharded weights these go through `agree_max`, the
maximum over the group (a wider width, one more decode step, a chunk more: each already happens to a row whose
batch-mates need it, so the results are those of the group's rows run together on one device). The update's own
decisions (the loss width, skipping a minibatch without signal) already reduce over every device. A decision
missed here gives no wrong number but a hang: the devices that took the other branch never reach the gather
(XLA:CPU aborts after 40 s; tests/test_fsdp.py plays games that end at different turns on each device).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.models.config import ModelConfig, param_shapes

FSDP = "fsdp"  # the mesh axis the weights are sharded over (parallel/mesh.py builds it)
SWEEP = "sweep"  # the vmap axis of a sweep's runs (run/sweep.py): branch decisions agree over it (`over_sweep`)
_IN_SWEEP = contextvars.ContextVar("in_sweep", default=False)  # set while a sweep's update is traced


# `jax.checkpoint` policy of a layer (and of the LM head) over sharded weights: keep nothing but the layer's input
# for the backward pass, which runs the layer again, gathers included (module docstring: Memory)
REMAT_POLICY = jax.checkpoint_policies.nothing_saveable


def _is_shape(x) -> bool:
    return isinstance(x, tuple)


def shard_dim(shape: tuple[int, ...], fsdp: int, stacked: bool) -> int | None:
    """The dimension of a weight of `shape` to shard `fsdp` ways: the largest that `fsdp` divides (the first of
    equals), among the matrix dimensions (not a stacked layer axis); None for vectors, for fsdp=1, or when none
    divides."""
    dims = list(range(1 if stacked else 0, len(shape)))
    if fsdp <= 1 or len(dims) < 2:
        return None
    fits = [d for d in dims if shape[d] % fsdp == 0]
    return max(fits, key=lambda d: (shape[d], -d)) if fits else None


def param_specs(cfg: ModelConfig, fsdp: int) -> Any:
    """PartitionSpec per leaf of `param_shapes(cfg)`: the weight's `shard_dim` over "fsdp", the rest whole."""
    def spec(path, shape):
        d = shard_dim(shape, fsdp, stacked=_under_layers(path))
        return P() if d is None else P(*([None] * d), FSDP)

    return jax.tree_util.tree_map_with_path(spec, param_shapes(cfg), is_leaf=_is_shape)


def local_shapes(cfg: ModelConfig, fsdp: int) -> Any:
    """The shape of each leaf's block on one device (what `forward` sees inside the shard_map)."""
    def local(path, shape):
        d = shard_dim(shape, fsdp, stacked=_under_layers(path))
        return shape if d is None else shape[:d] + (shape[d] // fsdp,) + shape[d + 1:]

    return jax.tree_util.tree_map_with_path(local, param_shapes(cfg), is_leaf=_is_shape)


def _under_layers(path) -> bool:
    return bool(path) and getattr(path[0], "key", None) == "layers"


def sharded(params: Any, cfg: ModelConfig) -> bool:
    """Whether `params` holds local blocks of sharded weights (static: from shapes). Only the leaves `forward`
    reads are compared; a trained copy (train_base) or a whole base is not sharded."""
    full = param_shapes(cfg)
    for name in ("embed", "lm_head"):
        if name in full and name in params and tuple(params[name].shape) != full[name]:
            return True
    layers = params.get("layers", {})
    for name, sub in full["layers"].items():
        if isinstance(sub, dict) and name in layers and tuple(layers[name]["kernel"].shape) != sub["kernel"]:
            return True
    return False


def gather(x: jax.Array, full_shape: tuple[int, ...], dtype: Any = None) -> jax.Array:
    """`x` whole: cast to `dtype` (the compute dtype: the caller casts the whole weight to it anyway, and a cast
    block travels in fewer bytes) and all-gathered over "fsdp" along the dimension where it is smaller than
    `full_shape`; `x` itself, uncast, when it is whole already."""
    diff = [d for d, (have, want) in enumerate(zip(x.shape, full_shape)) if have != want]
    if not diff:
        return x
    if len(diff) > 1 or len(x.shape) != len(full_shape):
        raise ValueError(f"a weight of shape {tuple(x.shape)} is not a one-dimension block of {full_shape}")
    return jax.lax.all_gather(x if dtype is None else x.astype(dtype), FSDP, axis=diff[0], tiled=True)


def gather_layer(lp: Any, layer_shapes: Any, dtype: Any = None) -> Any:
    """One layer's weights (a slice of params["layers"], no layer axis) made whole (sharded ones cast to `dtype`);
    `layer_shapes` is param_shapes(cfg)["layers"] (with the layer axis, dropped here)."""
    return jax.tree.map(lambda x, s: gather(x, s[1:], dtype), lp, {k: layer_shapes[k] for k in lp})


@contextlib.contextmanager
def sweep_runs():
    """Trace the code inside as one run of a sweep vmapped over axis `SWEEP` (run/sweep.py): `over_sweep`
    decisions then agree over the runs."""
    token = _IN_SWEEP.set(True)
    try:
        yield
    finally:
        _IN_SWEEP.reset(token)


def over_sweep(x: jax.Array) -> jax.Array:
    """`x` (an int or bool decision) as its maximum over a sweep's runs while one is traced (`sweep_runs`), `x`
    itself otherwise. Under vmap a per-run branch index makes `lax.switch` / `lax.cond` run every branch and
    select; one index for all runs runs one (the widest any run needs: each run's numbers are those of its rows
    read at that width, equal to float rounding)."""
    x = jnp.asarray(x)
    if not _IN_SWEEP.get():
        return x
    if x.dtype == jnp.bool_:
        return jax.lax.pmax(x.astype(jnp.int32), SWEEP) > 0
    return jax.lax.pmax(x, SWEEP)


def agree_max(x: jax.Array, params: Any, cfg: ModelConfig) -> jax.Array:
    """`x` (an int or bool decision) as the maximum over the fsdp group when `params` are sharded, so that every
    device takes the same branch / trip count around the forwards' collectives, and over a sweep's runs
    (`over_sweep`); `x` itself otherwise."""
    x = over_sweep(x)
    if not sharded(params, cfg):
        return x
    if x.dtype == jnp.bool_:
        return jax.lax.pmax(x.astype(jnp.int32), FSDP) > 0
    return jax.lax.pmax(x, FSDP)


def agree_all(x: jax.Array, params: Any, cfg: ModelConfig) -> jax.Array:
    """A bool that holds on every device of the fsdp group (when sharded; else `x`)."""
    return ~agree_max(~x, params, cfg)


def agreement(params: Any, cfg: ModelConfig):
    """None when `params` are whole (nothing to agree on), else x -> agree_max(x): for loops such as the
    sampler's that take the decision as a function."""
    if not sharded(params, cfg):
        return None
    return lambda x: agree_max(x, params, cfg)
