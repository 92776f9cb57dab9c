"""One host call per batch: `io_callback` that `vmap` hands the whole batch at once.

`jax.vmap` of a plain `io_callback` calls the host once per element. `batched(fn, shapes)` wraps it in a
`custom_vmap` whose rule makes one call with the batch on a leading axis, so `jax.vmap(env.step)` over N envs
(what the trainer does) is one callback per turn per device. A vmap over that (a sweep over seeds) calls once per
outer element. The callback is unordered: its order follows the data (a step reads the state the last step
returned), and it is never removed as dead code.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.experimental import io_callback


def batched(fn: Callable[..., Any], shapes: Callable[[int], Any]) -> Callable[..., Any]:
    """g(*arrays) -> fn(*arrays [B, ...]) computed on the host, B the vmapped batch (1 without vmap).

    fn takes numpy arrays with a leading batch axis and returns a pytree of arrays [B, ...]; shapes(B) is that
    pytree's `jax.ShapeDtypeStruct`s."""

    def host(batch: tuple[int, ...]):
        def run(*args):
            flat = [np.asarray(a).reshape(math.prod(batch), *np.shape(a)[len(batch):]) for a in args]  # [B, ...]
            out = fn(*flat)
            return jax.tree.map(lambda x: np.asarray(x).reshape(*batch, *np.shape(x)[1:]), out)

        return run

    def call(args, batch: tuple[int, ...]):
        out = shapes(math.prod(batch))  # prod(()) = 1: one game without vmap
        out = jax.tree.map(lambda s: jax.ShapeDtypeStruct((*batch, *s.shape[1:]), s.dtype), out)
        return io_callback(host(batch), out, *args)

    @custom_vmap
    def one(*args):
        return call(args, ())

    @one.def_vmap
    def many(axis_size: int, in_batched, *args):
        args = [a if b else jnp.broadcast_to(a, (axis_size, *jnp.shape(a))) for a, b in zip(args, in_batched)]
        out = call(args, (axis_size,))
        return out, jax.tree.map(lambda _: True, out)

    return one
