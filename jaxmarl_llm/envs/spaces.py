"""Action and observation spaces, shared by every agent (agents that differ are padded).

A space describes ONE agent's slice; the env's arrays carry a leading agent axis.
Per-agent differences (an action set of another size, a shorter observation)
live in the env's masks, not in a list of spaces, so the whole env stays one array
program.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class Discrete:
    """Integers in [0, n)."""

    n: int
    dtype: jnp.dtype = jnp.int32

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def sample(self, key: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        """One sample; `mask` [n] restricts to legal actions."""
        if mask is None:
            return jax.random.randint(key, (), 0, self.n, dtype=self.dtype)
        logits = jnp.where(mask, 0.0, -jnp.inf)
        return jax.random.categorical(key, logits).astype(self.dtype)

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.logical_and(x >= 0, x < self.n)


@dataclasses.dataclass(frozen=True)
class Box:
    """Real vectors with elementwise bounds."""

    low: float
    high: float
    shape: tuple[int, ...]
    dtype: jnp.dtype = jnp.float32

    def sample(self, key: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        x = jax.random.uniform(key, self.shape, self.dtype, self.low, self.high)
        return x if mask is None else jnp.where(mask, x, 0.0)

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.logical_and(jnp.all(x >= self.low), jnp.all(x <= self.high))


@dataclasses.dataclass(frozen=True)
class Tokens:
    """A fixed-capacity token buffer with a length: text observations and actions."""

    capacity: int
    vocab_size: int
    dtype: jnp.dtype = jnp.int32

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.capacity,)

    def sample(self, key: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        return jax.random.randint(key, self.shape, 0, self.vocab_size, dtype=self.dtype)

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.logical_and(jnp.all(x >= 0), jnp.all(x < self.vocab_size))


Space = Discrete | Box | Tokens


def stack_masks(sizes: Sequence[int], padded: int) -> jax.Array:
    """bool[A, padded]: True for the first sizes[i] entries of row i."""
    return jnp.arange(padded)[None, :] < jnp.asarray(sizes)[:, None]
