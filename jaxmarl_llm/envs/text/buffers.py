"""Fixed-capacity token buffers: the observation/action structs and append.

A transcript is `buf [Lp]` with `length []`. The physical size `Lp` is the
capacity `L` plus slack at least as wide as the widest piece ever appended, so
an append is one `dynamic_update_slice` that never has to be clamped; the
length is clipped at `L` and the cut is reported as overflow (the env turns it
into a truncation). Tokens at and after `length` are always `pad_id`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class TextObs:
    """What each agent sees: its transcript so far (the prompt for its next turn)."""

    tokens: jax.Array  # [A, L] int32, pad after length
    length: jax.Array  # [A] int32


@struct.dataclass
class TextAction:
    """What each agent generated this turn; rows of inactive agents are ignored."""

    tokens: jax.Array  # [A, M] int32
    length: jax.Array  # [A] int32


def storage_dtype(vocab_size: int):
    """The smallest unsigned type that holds every id (int32 beyond 65536)."""
    return jnp.uint8 if vocab_size <= 256 else jnp.uint16 if vocab_size <= 65536 else jnp.int32


class Appended(NamedTuple):
    buf: jax.Array  # [Lp]
    length: jax.Array  # []
    overflow: jax.Array  # [] bool: some of the piece did not fit


def append(buf: jax.Array, length: jax.Array, piece: jax.Array, piece_len: jax.Array, capacity: int) -> Appended:
    """Append `piece[:piece_len]` (rest of `piece` must be pad) to one buffer; clip at `capacity`.

    A zero-length append writes its (ignored) piece into the slack past `capacity`, so callers can
    switch appends off per row with `piece_len = 0` without masking the piece.
    """
    width = piece.shape[-1]
    if buf.shape[-1] < capacity + width:
        raise ValueError(f"buffer of size {buf.shape[-1]} lacks slack for capacity {capacity} + piece {width}")
    start = jnp.where(piece_len > 0, jnp.minimum(length, capacity), capacity)
    out = jax.lax.dynamic_update_slice(buf, piece.astype(buf.dtype), (start,))
    total = length + piece_len
    return Appended(out, jnp.minimum(total, capacity), total > capacity)


def append_rows(buf: jax.Array, length: jax.Array, pieces: jax.Array, piece_lens: jax.Array, capacity: int) -> Appended:
    """Per-agent append: buf [A, Lp], length [A], pieces [A, P], piece_lens [A] (0 = append nothing)."""
    return jax.vmap(append, in_axes=(0, 0, 0, 0, None))(buf, length, pieces, piece_lens, capacity)


def clean_action(tokens: jax.Array, length: jax.Array, pad_id: int, eos_id: int) -> tuple[jax.Array, jax.Array]:
    """Clip lengths to [0, M], stop at the first eos, and pad everything after: tokens [A, M], length [A]."""
    m = tokens.shape[-1]
    pos = jnp.arange(m)
    is_eos = tokens == eos_id
    first_eos = jnp.where(is_eos.any(-1), jnp.argmax(is_eos, -1), m)
    length = jnp.clip(jnp.minimum(length, first_eos), 0, m).astype(jnp.int32)
    tokens = jnp.where(pos[None, :] < length[:, None], tokens, pad_id).astype(jnp.int32)
    return tokens, length


def concat_pieces(ids: jax.Array, lens: jax.Array, pad_id: int) -> tuple[jax.Array, jax.Array]:
    """Join K variable-length pieces (ids [K, P], lens [K]) into one: ([K*P], total)."""
    k, p = ids.shape
    ends = jnp.cumsum(lens)
    starts = ends - lens
    j = jnp.arange(k * p)
    which = jnp.minimum(jnp.sum(j[:, None] >= ends[None, :], axis=1), k - 1)  # [K*P]
    offset = j - starts[which]
    total = ends[-1]
    out = jnp.where(j < total, ids[which, jnp.clip(offset, 0, p - 1)], pad_id)
    return out.astype(jnp.int32), total.astype(jnp.int32)


def init_buffers(prompts: list[list[int]], capacity: int, slack: int, pad_id: int) -> tuple[jax.Array, jax.Array]:
    """Constant starting transcripts from per-agent prompt ids: ([A, capacity+slack], [A])."""
    import numpy as np

    buf = np.full((len(prompts), capacity + slack), pad_id, np.int32)  # the caller may narrow the dtype
    lengths = []
    for a, ids in enumerate(prompts):
        if len(ids) > capacity:
            raise ValueError(f"prompt of agent {a} has {len(ids)} tokens > capacity {capacity}; raise `capacity`")
        buf[a, : len(ids)] = ids
        lengths.append(len(ids))
    return jnp.asarray(buf), jnp.asarray(lengths, jnp.int32)
