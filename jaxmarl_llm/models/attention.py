"""Grouped-query attention behind one function with a backend switch.

    attention(q, k, v, q_positions, backend="xla") -> [B, T, Hq, D]

Layout convention (shared with the KV cache): key slot s holds the token at
position s of its row, and rows are right-padded. So causality alone is the
mask: query at position p sees slots 0..p. Padding queries (p >= length) see
garbage but their outputs are never used; garbage slots sit beyond every real
query's position, so they are never seen.

Backends: "xla" is the reference (einsum + float32 softmax). "pallas" and
"cudnn" are reserved names; they raise until implemented.

The "xla" backward is written by hand (flash-attention's formulas): it keeps the
logsumexp per query and recomputes the [T, S] probabilities, where autodiff of the
softmax stored them per layer and made several more passes over them. On the
tic-tac-toe GRPO loss (16 episodes x 392 tokens, XLA:CPU) one step went ~0.50 s
-> ~0.41 s; the residual memory no longer grows with T x S.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

BACKENDS = ("xla", "pallas", "cudnn")
MAX_CAUSAL_BLOCKS = 8  # each block is its own pair of products in the program: bounded, so HLO size is too


def attention(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array, backend: str = "xla",
              causal_block: int = 0) -> jax.Array:
    """q [B, T, Hq, D], k/v [B, S, Hkv, D], q_positions [B, T] (int) -> [B, T, Hq, D].

    causal_block > 0 promises a whole sequence (q_positions[b, t] == t, S == T, no cache): queries then go
    in blocks of that many and block i reads only the keys up to its last query, so the masked upper
    triangle is never computed (at T = 392 and blocks of 128: 66% of the score entries). At most
    MAX_CAUSAL_BLOCKS blocks: a longer sequence gets wider blocks (8 blocks compute 56% of T x S)."""
    if backend == "xla":
        if 0 < causal_block < q.shape[1]:
            t = q.shape[1]
            causal_block = max(causal_block, -(-t // MAX_CAUSAL_BLOCKS))  # long sequences: bigger blocks, not more
            return jnp.concatenate([_xla_attention(q[:, lo:lo + causal_block], k[:, :lo + causal_block],
                                                   v[:, :lo + causal_block], q_positions[:, lo:lo + causal_block])
                                    for lo in range(0, t, causal_block)], axis=1)
        return _xla_attention(q, k, v, q_positions)
    if backend in BACKENDS:
        raise NotImplementedError(f"attention backend {backend!r} is reserved but not implemented yet; use 'xla'")
    raise ValueError(f"unknown attention backend {backend!r}; expected one of {BACKENDS}")


def _xla_attention(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array) -> jax.Array:
    b, t, hq, d = q.shape
    hkv = k.shape[2]
    qg = q.reshape(b, t, hkv, hq // hkv, d)  # [B, T, Hkv, G, D]
    out = _gqa(qg, k, v, q_positions)
    return out.reshape(b, t, hq, d)


def _masked_scores(qg, k, q_positions):
    """Scaled scores [B, Hkv, G, T, S] in float32, -inf-like where the slot is after the query."""
    d, s = qg.shape[-1], k.shape[1]
    scores = jnp.einsum("btkgd,bskd->bkgts", qg, k, preferred_element_type=jnp.float32) * (d ** -0.5)
    visible = jnp.arange(s)[None, None, :] <= q_positions[:, :, None]  # [B, T, S]
    return jnp.where(visible[:, None, None], scores, jnp.finfo(jnp.float32).min)


@jax.custom_vjp
def _gqa(qg, k, v, q_positions):
    return _gqa_forward(qg, k, v, q_positions)[0]


def _gqa_forward(qg, k, v, q_positions):
    """-> (out [B, T, Hkv, G, D] in q's dtype, logsumexp [B, Hkv, G, T] float32).

    The softmax is normalised after the value product (one pass less over the [T, S] tensor)."""
    scores = _masked_scores(qg, k, q_positions)
    top = jnp.max(scores, axis=-1, keepdims=True)
    e = jnp.exp(scores - top)
    total = jnp.sum(e, axis=-1)  # [B, Hkv, G, T]
    out = jnp.einsum("bkgts,bskd->btkgd", e.astype(v.dtype), v, preferred_element_type=jnp.float32)
    out = out / jnp.moveaxis(total, -1, 1)[..., None]
    return out.astype(qg.dtype), top[..., 0] + jnp.log(total)


def _gqa_fwd(qg, k, v, q_positions):
    out, lse = _gqa_forward(qg, k, v, q_positions)
    return out, (qg, k, v, q_positions, out, lse)


def _gqa_bwd(res, dout):
    """Softmax-attention gradients from the saved logsumexp (the [T, S] probabilities are recomputed,
    not stored): dS = P * (dO V^T - rowsum(dO * O))."""
    qg, k, v, q_positions, out, lse = res
    d = qg.shape[-1]
    p = jnp.exp(_masked_scores(qg, k, q_positions) - lse[..., None])  # [B, Hkv, G, T, S]
    dout32 = dout.astype(jnp.float32)
    dp = jnp.einsum("btkgd,bskd->bkgts", dout, v, preferred_element_type=jnp.float32)
    delta = jnp.moveaxis(jnp.sum(dout32 * out.astype(jnp.float32), axis=-1), 1, -1)  # [B, Hkv, G, T]
    ds = (p * (dp - delta[..., None]) * (d ** -0.5)).astype(qg.dtype)
    dq = jnp.einsum("bkgts,bskd->btkgd", ds, k, preferred_element_type=jnp.float32).astype(qg.dtype)
    dk = jnp.einsum("bkgts,btkgd->bskd", ds, qg, preferred_element_type=jnp.float32).astype(k.dtype)
    dv = jnp.einsum("bkgts,btkgd->bskd", p.astype(v.dtype), dout, preferred_element_type=jnp.float32).astype(v.dtype)
    return dq, dk, dv, None


_gqa.defvjp(_gqa_fwd, _gqa_bwd)
