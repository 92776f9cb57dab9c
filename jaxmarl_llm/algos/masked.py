"""Masked reductions shared by the LM losses.

Token-level arrays are `[..., M]`: any leading batch axes (rows, agents,
groups) and M generated tokens, with a mask of the tokens that count. Every
reduction follows `ppo.shard_mean`: with `axis_name` set, the result is this
shard's share of the global value (local sum / global count), so a `psum` over
the mesh gives the exact global number; only counts cross devices.

`where_mask` zeroes masked inputs *before* any arithmetic, so garbage there
(even inf / nan) changes neither the value nor the gradient.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.ppo import shard_mean

# token:        sum over all real tokens / number of real tokens (DAPO "token-mean").
# sequence:     mean over rows of (mean over the row's real tokens) (original GRPO).
# sequence_sum: mean over rows of (sum over the row's real tokens) (REINFORCE on log p(y|x)).
# constant:     mean over rows of (sum over the row's real tokens) / max_len (Dr.GRPO).
# Row means count only rows with at least one real token (inactive agents' rows drop out).
Aggregation = Literal["token", "sequence", "sequence_sum", "constant"]


def where_mask(x: jax.Array, mask: jax.Array | None) -> jax.Array:
    """x where mask, 0 elsewhere (mask broadcasts against x)."""
    return x if mask is None else jnp.where(mask.astype(bool), x, jnp.zeros_like(x))


def row_mask(mask: jax.Array) -> jax.Array:
    """[..., M] -> [...] bool: rows with at least one real token."""
    return jnp.any(mask.astype(bool), axis=-1)


def sequence_sum(x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """[..., M] -> [...]: sum over each row's real tokens."""
    return jnp.sum(where_mask(x, mask), axis=-1)


def sequence_mean(x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """[..., M] -> [...]: mean over each row's real tokens (0 for an empty row)."""
    if mask is None:
        return jnp.mean(x, axis=-1)
    count = jnp.sum(mask.astype(x.dtype), axis=-1)
    return sequence_sum(x, mask) / jnp.maximum(count, 1.0)


def aggregate(
    per_token: jax.Array,  # [..., M]
    mask: jax.Array | None = None,  # [..., M] bool
    how: Aggregation = "token",
    max_len: int | None = None,  # "constant" only; default M
    axis_name: str | None = None,
) -> jax.Array:
    """Reduce a per-token loss to a scalar (this shard's share with axis_name); see `Aggregation`."""
    mask = jnp.ones(per_token.shape, bool) if mask is None else mask.astype(bool)
    per_token = where_mask(per_token, mask)
    if how == "token":
        return shard_mean(per_token, mask, axis_name)
    if how == "sequence":
        per_row = sequence_mean(per_token, mask)
    elif how == "sequence_sum":
        per_row = sequence_sum(per_token, mask)
    elif how == "constant":
        per_row = sequence_sum(per_token, mask) / float(per_token.shape[-1] if max_len is None else max_len)
    else:
        raise ValueError(f"unknown aggregation {how!r}; expected token, sequence, sequence_sum or constant")
    return shard_mean(per_row, row_mask(mask), axis_name)
