"""Decode attention: a few new queries per row against a KV cache, split-K (flash-decoding), Triton-style Pallas.

    decode_forward(q, k, v, q_positions, ...) -> (out [B, T, Hq, D], lse [B, Hq, T] float32)

One program per (row, kv head, split): its query tile is every query of that row that reads this kv head, the
T new tokens times the G query heads folded into one [T * G, D] tile (so a one-token step still fills the
16-row minimum of a Triton dot, and K/V are read once per kv head, never repeated per query head). Row b's valid
slots are 0..max(q_positions[b]); they are cut into `num_splits` ranges of whole key tiles that run in parallel,
each program reads only its range of the valid part (slots beyond a row's length are never loaded), and a last
XLA step merges the splits' partial softmaxes (running max m, sum l, unnormalised output). Each query keeps its
own causal limit (slot <= its position) inside the tile, so T > 1 new tokens per row are exact.

Written here rather than calling `jax.experimental.pallas.ops.gpu.decode_attention.gqa`, whose signature fits
(q [B, Hq, D], cache [B, S, Hkv, D], per-row kv_seq_len) but whose body does not:

  * it swaps the cache to [B, Hkv, S, D] (`jnp.swapaxes`) before its kernel, a copy of the whole cache, all S
    slots, for every layer and every token, which costs more memory traffic than the reference reads; here the
    BlockSpec index map reads the cache in place in our [B, S, Hkv, D] layout;
  * one query per row: T > 1 new tokens would need T calls (one per causal limit);
  * S must be a multiple of k_splits * 16 and of its block_k, and its splits are fixed ranges of the capacity S,
    so with short rows most splits idle; here splits divide each row's valid length.

Lowering as in flash_attention.py: Triton on GPU, `interpret=True` on CPU."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from jaxmarl_llm.models.kernels.blocks import MIN_BLOCK, fit, head_dim_padded, next_pow2, pad_axis, round_up
from jaxmarl_llm.models.kernels.flash_attention import MASK, num_warps, online_softmax_step, visible_blocks


def _decode_kernel(q_ref, pos_ref, k_ref, v_ref, o_ref, m_ref, l_ref, *, scale: float, block_k: int,
                   num_splits: int):
    """Grid (row b, kv head h, split j). q [M, D] (T * G rows, padded), pos [M], K/V refs the row's whole
    padded cache of kv head h; writes this split's unnormalised o [M, D], running max m and sum l [M]."""
    q, pos = q_ref[...], pos_ref[...]
    rows, d = q.shape
    valid = visible_blocks(pos, block_k, k_ref.shape[0] // block_k)  # key tiles of the row's valid part
    per_split = lax.div(valid + num_splits - 1, num_splits)
    lo = pl.program_id(2) * per_split
    hi = jnp.minimum(lo + per_split, valid)

    def body(j, carry):
        tile = pl.ds(j * block_k, block_k)
        return online_softmax_step(q, k_ref[tile, :], v_ref[tile, :], pos, j * block_k, scale, carry)

    init = (jnp.zeros((rows, d), jnp.float32), jnp.full((rows,), MASK, jnp.float32), jnp.zeros((rows,), jnp.float32))
    o, m, l = lax.fori_loop(lo, hi, body, init)  # an idle split (lo >= hi) leaves m = MASK, l = 0: weight 0 below
    o_ref[...] = o
    m_ref[...] = m
    l_ref[...] = l


@functools.partial(jax.jit, static_argnames=("block_k", "num_splits", "interpret"))
def decode_forward(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array, *, block_k: int,
                   num_splits: int, interpret: bool = False) -> tuple[jax.Array, jax.Array]:
    """q [B, T, Hq, D] (T small), cache k/v [B, S, Hkv, D], q_positions [B, T] -> (out [B, T, Hq, D] in q's
    dtype, logsumexp [B, Hq, T] float32). Positions are clipped to [0, S - 1] as in flash_attention."""
    b, t, hq, d = q.shape
    s, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    bk = fit(block_k, s)
    sp, dp, m = round_up(s, bk), head_dim_padded(d), max(MIN_BLOCK, next_pow2(t * g))
    splits = max(1, min(num_splits, sp // bk))
    # [B, T, Hq, D] -> [B, Hkv, T * G, D]: row r of kv head h is query t = r // G of head h * G + r % G
    qr = jnp.swapaxes(q.reshape(b, t, hkv, g, d), 1, 2).reshape(b, hkv, t * g, d)
    qr = pad_axis(pad_axis(qr, 2, m), 3, dp)  # [B, Hkv, M, Dp]
    pos = pad_axis(jnp.repeat(jnp.clip(q_positions.astype(jnp.int32), 0, s - 1), g, axis=1), 1, m)  # [B, M]
    kp = pad_axis(pad_axis(k, 1, sp), 3, dp)  # [B, Sp, Hkv, Dp]; no copy when S % bk == 0 and D is 2^n
    vp = pad_axis(pad_axis(v, 1, sp), 3, dp)

    kv_spec = pl.BlockSpec((None, sp, None, dp), lambda r, h, j: (r, 0, h, 0))
    part_spec = pl.BlockSpec((None, None, None, m), lambda r, h, j: (r, h, j, 0))
    o, mx, l = pl.pallas_call(
        functools.partial(_decode_kernel, scale=d ** -0.5, block_k=bk, num_splits=splits),
        grid=(b, hkv, splits),
        in_specs=[pl.BlockSpec((None, None, m, dp), lambda r, h, j: (r, h, 0, 0)),
                  pl.BlockSpec((None, m), lambda r, h, j: (r, 0)), kv_spec, kv_spec],
        out_specs=[pl.BlockSpec((None, None, None, m, dp), lambda r, h, j: (r, h, j, 0, 0)), part_spec, part_spec],
        out_shape=[jax.ShapeDtypeStruct((b, hkv, splits, m, dp), jnp.float32),
                   jax.ShapeDtypeStruct((b, hkv, splits, m), jnp.float32),
                   jax.ShapeDtypeStruct((b, hkv, splits, m), jnp.float32)],
        compiler_params=plgpu.CompilerParams(num_warps=num_warps(dp), num_stages=2),
        interpret=interpret,
        name="decode_attention",
    )(qr, pos, kp, vp)

    top = jnp.max(mx, axis=2)  # [B, Hkv, M]: merge the splits' partial softmaxes
    weight = jnp.exp(mx - top[:, :, None])  # [B, Hkv, splits, M]
    total = jnp.sum(l * weight, axis=2)  # [B, Hkv, M]
    out = jnp.sum(o * weight[..., None], axis=2) / total[..., None]  # [B, Hkv, M, Dp]
    lse = top + jnp.log(total)
    out = jnp.swapaxes(out[:, :, :t * g, :d].reshape(b, hkv, t, g, d), 1, 2).reshape(b, t, hq, d)
    lse = jnp.swapaxes(lse[:, :, :t * g].reshape(b, hkv, t, g), 2, 3).reshape(b, hq, t)
    return out.astype(q.dtype), lse
