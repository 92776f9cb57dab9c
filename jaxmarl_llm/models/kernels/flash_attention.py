"""Flash attention for prefill and training: Pallas kernels in the GPU (Triton) style, forward and backward.

    flash_forward(q, k, v, q_positions, ...) -> (out [B, T, Hq, D], lse [B, Hq, T] float32)
    flash_backward(q, k, v, q_positions, out, lse, dout, ...) -> (dq, dk, dv)

Written here rather than calling `jax.experimental.pallas.ops.gpu.attention.mha`, which does not fit our layout:

  * no GQA: `mha` wants as many K/V heads as query heads, so it would need K/V repeated G times in memory;
    here the forward and dq kernels map query head h to K/V head h // G in the BlockSpec index map, and the
    dk/dv kernel runs once per K/V head and loops over its G query heads;
  * no per-row query positions: its causal mask is `query index >= key index`, which is wrong once a row's
    queries start at a cache offset (prefill after earlier turns, S > T) or rows start at different offsets;
    here the mask is `slot <= q_positions[b, t]`, and each query block visits only the key blocks up to its
    largest position (the masked upper triangle is skipped, whatever the offsets);
  * its fused backward needs T and S cut into the same number of blocks (one program id indexes both) and T, S
    multiples of the blocks; here sequences of any length are padded inside the wrappers and the dk/dv and dq
    passes are separate kernels.

The structure (online softmax with running max / sum, logsumexp saved for the backward, delta = rowsum(dO * O)
precomputed, dk/dv accumulated per key block and dq per query block) follows that file and FlashAttention-2.
Inputs may be float32 or bfloat16; products accumulate in float32 and the probabilities are rounded to the
value dtype before the P @ V and P^T @ dO products, as the "xla" reference does.

Lowering: on GPU through Pallas Triton (`plgpu.CompilerParams`); on CPU with `interpret=True` (the tests'
reference check). They are not Mosaic (TPU) kernels: Triton-style `fori_loop`s over dynamically sliced refs
and unaligned tiles do not lower there (models/kernels/tpu_attention.py is the TPU path)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from jaxmarl_llm.models.kernels.blocks import fit, head_dim_padded, pad_axis, round_up

MASK = -0.7 * float(jnp.finfo(jnp.float32).max)  # finite: a fully masked tile gives exp(0) terms, never inf - inf


def num_warps(head_dim: int) -> int:
    return 4 if head_dim <= 64 else 8


def online_softmax_step(q, k, v, pos, start, scale, carry):
    """One key tile of the flash forward: q [bq, D], k/v [bk, D], pos [bq] int, start = the tile's first slot;
    carry (o [bq, D] f32 unnormalised, m [bq] running max, l [bq] running sum)."""
    o, m, l = carry
    s = plgpu.dot(q, k, trans_b=True) * scale  # [bq, bk] float32
    slot = start + jnp.arange(k.shape[0])
    s = jnp.where(slot[None, :] <= pos[:, None], s, MASK)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    correction = jnp.exp(m - m_new)
    p = jnp.exp(s - m_new[:, None])
    l = correction * l + jnp.sum(p, axis=1)
    o = correction[:, None] * o + plgpu.dot(p.astype(v.dtype), v)
    return o, m_new, l


def visible_blocks(pos: jax.Array, block_k: int, num_k_blocks: int) -> jax.Array:
    """How many key tiles hold a slot that one of these queries sees: ceil((max(pos) + 1) / block_k)."""
    return jnp.minimum(lax.div(jnp.max(pos) + block_k, block_k), num_k_blocks)


def _forward_kernel(q_ref, k_ref, v_ref, pos_ref, o_ref, lse_ref, *, scale: float, block_k: int):
    """Grid (query block i, row b, query head h); K/V refs are kv head h // G's whole (padded) sequence."""
    q = q_ref[...]  # [bq, D]
    pos = pos_ref[...]  # [bq]
    block_q, d = q.shape

    def body(j, carry):
        tile = pl.ds(j * block_k, block_k)
        return online_softmax_step(q, k_ref[tile, :], v_ref[tile, :], pos, j * block_k, scale, carry)

    init = (jnp.zeros((block_q, d), jnp.float32), jnp.full((block_q,), MASK, jnp.float32),
            jnp.zeros((block_q,), jnp.float32))
    o, m, l = lax.fori_loop(0, visible_blocks(pos, block_k, k_ref.shape[0] // block_k), body, init)
    o_ref[...] = (o / l[:, None]).astype(o_ref.dtype)
    lse_ref[...] = m + jnp.log(l)


def _dq_kernel(q_ref, k_ref, v_ref, pos_ref, do_ref, lse_ref, delta_ref, dq_ref, *, scale: float, block_k: int):
    """dQ = sum over key tiles of dS K, dS = P (dO V^T - delta) scale; grid as the forward's."""
    q, do = q_ref[...], do_ref[...]  # [bq, D]
    pos, lse, delta = pos_ref[...], lse_ref[...], delta_ref[...]  # [bq]

    def body(j, dq):
        tile = pl.ds(j * block_k, block_k)
        k, v = k_ref[tile, :], v_ref[tile, :]
        s = plgpu.dot(q, k, trans_b=True) * scale
        slot = j * block_k + jnp.arange(block_k)
        s = jnp.where(slot[None, :] <= pos[:, None], s, MASK)
        p = jnp.exp(s - lse[:, None])
        dp = plgpu.dot(do, v, trans_b=True)
        ds = (p * (dp - delta[:, None]) * scale).astype(k.dtype)
        return dq + plgpu.dot(ds, k)

    dq = lax.fori_loop(0, visible_blocks(pos, block_k, k_ref.shape[0] // block_k), body,
                       jnp.zeros(q.shape, jnp.float32))
    dq_ref[...] = dq.astype(dq_ref.dtype)


def _dkv_kernel(q_ref, k_ref, v_ref, pos_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, *, scale: float,
                block_q: int):
    """Grid (key block j, row b, kv head h). The q / dO refs hold the G query heads of kv head h ([T, G, D]),
    lse / delta theirs ([G, T]); the loop runs over (query head, query block) pairs and skips blocks whose
    queries all sit before this key tile. dK, dV of a kv head sum over its G query heads, in registers."""
    k, v = k_ref[...], v_ref[...]  # [bk, D]
    block_k = k.shape[0]
    start = pl.program_id(0) * block_k
    slot = start + jnp.arange(block_k)
    num_q_blocks = q_ref.shape[0] // block_q
    groups = q_ref.shape[1]

    def body(it, carry):
        g, i = lax.div(it, num_q_blocks), lax.rem(it, num_q_blocks)
        rows = pl.ds(i * block_q, block_q)
        pos = pos_ref[rows]

        def visit():
            dk, dv = carry
            q, do = q_ref[rows, g, :], do_ref[rows, g, :]  # [bq, D]
            lse, delta = lse_ref[g, rows], delta_ref[g, rows]  # [bq]
            s = plgpu.dot(q, k, trans_b=True) * scale
            s = jnp.where(slot[None, :] <= pos[:, None], s, MASK)
            p = jnp.exp(s - lse[:, None])  # [bq, bk]
            dv = dv + plgpu.dot(p.astype(do.dtype), do, trans_a=True)
            dp = plgpu.dot(do, v, trans_b=True)
            ds = (p * (dp - delta[:, None]) * scale).astype(q.dtype)
            return dk + plgpu.dot(ds, q, trans_a=True), dv

        return lax.cond(jnp.max(pos) >= start, visit, lambda: carry)

    zeros = jnp.zeros(k.shape, jnp.float32)
    dk, dv = lax.fori_loop(0, groups * num_q_blocks, body, (zeros, zeros))
    dk_ref[...] = dk.astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)


def _padded(q, k, v, q_positions, block_q: int, block_k: int):
    """Pad T to whole query blocks, S to whole key blocks and D to a power of two -> padded arrays and the blocks.

    Query positions are clipped to [0, S - 1]: a query past the cache's end sees every slot (as in the
    reference), padded slots beyond S are never seen, and padded queries (position 0) see slot 0 only, so
    every softmax row has a visible slot and nothing is NaN."""
    t, s, d = q.shape[1], k.shape[1], q.shape[3]
    bq, bk = fit(block_q, t), fit(block_k, s)
    tp, sp, dp = round_up(t, bq), round_up(s, bk), head_dim_padded(d)
    qp = pad_axis(pad_axis(q, 1, tp), 3, dp)  # [B, Tp, Hq, Dp]
    kp = pad_axis(pad_axis(k, 1, sp), 3, dp)  # [B, Sp, Hkv, Dp]
    vp = pad_axis(pad_axis(v, 1, sp), 3, dp)
    pos = pad_axis(jnp.clip(q_positions.astype(jnp.int32), 0, s - 1), 1, tp)  # [B, Tp]
    return qp, kp, vp, pos, bq, bk


@functools.partial(jax.jit, static_argnames=("block_q", "block_k", "interpret"))
def flash_forward(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array, *, block_q: int, block_k: int,
                  interpret: bool = False) -> tuple[jax.Array, jax.Array]:
    """q [B, T, Hq, D], k/v [B, S, Hkv, D], q_positions [B, T] -> (out [B, T, Hq, D] in q's dtype,
    logsumexp [B, Hq, T] float32)."""
    b, t, hq, d = q.shape
    g = hq // k.shape[2]
    qp, kp, vp, pos, bq, bk = _padded(q, k, v, q_positions, block_q, block_k)
    tp, sp, dp = qp.shape[1], kp.shape[1], qp.shape[3]
    q_spec = pl.BlockSpec((None, bq, None, dp), lambda i, r, h: (r, i, h, 0))
    kv_spec = pl.BlockSpec((None, sp, None, dp), lambda i, r, h: (r, 0, h // g, 0))
    out, lse = pl.pallas_call(
        functools.partial(_forward_kernel, scale=d ** -0.5, block_k=bk),
        grid=(tp // bq, b, hq),
        in_specs=[q_spec, kv_spec, kv_spec, pl.BlockSpec((None, bq), lambda i, r, h: (r, i))],
        out_specs=[q_spec, pl.BlockSpec((None, None, bq), lambda i, r, h: (r, h, i))],
        out_shape=[jax.ShapeDtypeStruct(qp.shape, q.dtype), jax.ShapeDtypeStruct((b, hq, tp), jnp.float32)],
        compiler_params=plgpu.CompilerParams(num_warps=num_warps(dp), num_stages=2),
        interpret=interpret,
        name="flash_attention_forward",
    )(qp, kp, vp, pos)
    return out[:, :t, :, :d], lse[:, :, :t]


@functools.partial(jax.jit, static_argnames=("block_q", "block_k", "interpret"))
def flash_backward(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array, out: jax.Array, lse: jax.Array,
                   dout: jax.Array, *, block_q: int, block_k: int, interpret: bool = False):
    """Gradients of the attention output w.r.t. q, k, v from the forward's out and logsumexp (the [T, S]
    probabilities are recomputed tile by tile, never stored) -> (dq, dk, dv) in the inputs' dtypes."""
    b, t, hq, d = q.shape
    hkv = k.shape[2]
    g = hq // hkv
    qp, kp, vp, pos, bq, bk = _padded(q, k, v, q_positions, block_q, block_k)
    tp, sp, dp = qp.shape[1], kp.shape[1], qp.shape[3]
    dop = pad_axis(pad_axis(dout.astype(q.dtype), 1, tp), 3, dp)  # [B, Tp, Hq, Dp]
    delta = jnp.sum(out.astype(jnp.float32) * dout.astype(jnp.float32), axis=-1)  # [B, T, Hq]
    delta = pad_axis(jnp.swapaxes(delta, 1, 2), 2, tp)  # [B, Hq, Tp]
    lse = pad_axis(lse, 2, tp)  # padded rows: dO = 0, so they add nothing
    params = plgpu.CompilerParams(num_warps=num_warps(dp), num_stages=2)

    q_spec = pl.BlockSpec((None, bq, None, dp), lambda i, r, h: (r, i, h, 0))
    kv_spec = pl.BlockSpec((None, sp, None, dp), lambda i, r, h: (r, 0, h // g, 0))
    row_spec = pl.BlockSpec((None, None, bq), lambda i, r, h: (r, h, i))
    dq = pl.pallas_call(
        functools.partial(_dq_kernel, scale=d ** -0.5, block_k=bk),
        grid=(tp // bq, b, hq),
        in_specs=[q_spec, kv_spec, kv_spec, pl.BlockSpec((None, bq), lambda i, r, h: (r, i)), q_spec, row_spec,
                  row_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct(qp.shape, q.dtype),
        compiler_params=params,
        interpret=interpret,
        name="flash_attention_dq",
    )(qp, kp, vp, pos, dop, lse, delta)

    group_spec = pl.BlockSpec((None, tp, g, dp), lambda j, r, h: (r, 0, h, 0))  # the G query heads of kv head h
    tile_spec = pl.BlockSpec((None, bk, None, dp), lambda j, r, h: (r, j, h, 0))
    group_rows = pl.BlockSpec((None, g, tp), lambda j, r, h: (r, h, 0))
    dk, dv = pl.pallas_call(
        functools.partial(_dkv_kernel, scale=d ** -0.5, block_q=bq),
        grid=(sp // bk, b, hkv),
        in_specs=[group_spec, tile_spec, tile_spec, pl.BlockSpec((None, tp), lambda j, r, h: (r, 0)), group_spec,
                  group_rows, group_rows],
        out_specs=[tile_spec, tile_spec],
        out_shape=[jax.ShapeDtypeStruct(kp.shape, k.dtype), jax.ShapeDtypeStruct(vp.shape, v.dtype)],
        compiler_params=params,
        interpret=interpret,
        name="flash_attention_dkv",
    )(qp, kp, vp, pos, dop, lse, delta)
    s = k.shape[1]
    return dq[:, :t, :, :d], dk[:, :s, :, :d], dv[:, :s, :, :d]
