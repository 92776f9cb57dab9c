"""Grouped-query attention behind one function with a backend switch.

    attention(q, k, v, q_positions, backend="xla") -> [B, T, Hq, D]

Layout convention (shared with the KV cache): key slot s holds the token at
position s of its row, and rows are right-padded. So causality alone is the
mask: query at position p sees slots 0..p. Padding queries (p >= length) see
garbage but their outputs are never used; garbage slots sit beyond every real
query's position, so they are never seen.

Backends: "xla" is the reference (einsum + float32 softmax). "pallas" and
"cudnn" are reserved names; they raise until implemented.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

BACKENDS = ("xla", "pallas", "cudnn")


def attention(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array, backend: str = "xla") -> jax.Array:
    """q [B, T, Hq, D], k/v [B, S, Hkv, D], q_positions [B, T] (int) -> [B, T, Hq, D]."""
    if backend == "xla":
        return _xla_attention(q, k, v, q_positions)
    if backend in BACKENDS:
        raise NotImplementedError(f"attention backend {backend!r} is reserved but not implemented yet; use 'xla'")
    raise ValueError(f"unknown attention backend {backend!r}; expected one of {BACKENDS}")


def _xla_attention(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array) -> jax.Array:
    b, t, hq, d = q.shape
    s, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    qg = q.reshape(b, t, hkv, g, d)  # [B, T, Hkv, G, D]
    scores = jnp.einsum("btkgd,bskd->bkgts", qg, k, preferred_element_type=jnp.float32)  # [B, Hkv, G, T, S]
    scores = scores * (d ** -0.5)
    visible = jnp.arange(s)[None, None, :] <= q_positions[:, :, None]  # [B, T, S]
    scores = jnp.where(visible[:, None, None], scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    out = jnp.einsum("bkgts,bskd->btkgd", probs, v, preferred_element_type=jnp.float32)  # [B, T, Hkv, G, D]
    return out.reshape(b, t, hq, d).astype(q.dtype)
