"""The "pallas" backend on TPU: JAX's shipped Mosaic flash attention, for whole causal sequences only.

`jax.experimental.pallas.ops.tpu.flash_attention.flash_attention` is called as it ships (forward and its own
backward kernels). It fits our layout only partly:

  * no GQA: it wants as many K/V heads as query heads, so K/V are repeated G times here (a [B, S, Hq, D] copy
    each; what the GPU kernels avoid);
  * no per-row query positions: its causal mask is `query index >= key index`, right for a whole sequence
    (q_positions[b] == arange(T), S == T) and wrong for a prefill or decode step at a cache offset, so those
    calls raise NotImplementedError (use backend "xla" or "auto" on TPU for sampling);
  * sequences are padded to whole 128-multiple blocks (its kernels tile by 128 lanes).

Not run on a TPU in this repository's tests (none was available); tests/test_attention_kernels.py runs it in
Pallas' TPU interpret mode on CPU."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.models.kernels.blocks import pad_axis, round_up

LANES = 128


def tpu_flash_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, whole_sequence: bool, block_q: int,
                        block_k: int) -> jax.Array:
    """q [B, T, Hq, D], k/v [B, T, Hkv, D] of a whole causal sequence -> [B, T, Hq, D]."""
    if not whole_sequence or k.shape[1] != q.shape[1]:
        raise NotImplementedError(
            "attention backend 'pallas' on TPU covers whole causal sequences only (training, scoring): the shipped "
            "TPU flash attention has no per-row query offsets for a KV cache (prefill at an offset, decode); use "
            "'xla' or 'auto' for cached calls")
    from jax.experimental.pallas.ops.tpu import flash_attention as tpu_fa

    b, t, hq, d = q.shape
    g = hq // k.shape[2]
    bq, bk = round_up(block_q, LANES), round_up(block_k, LANES)
    tp = round_up(t, max(bq, bk))  # both are 128 * 2^n: the larger is a multiple of the smaller
    bq, bk = min(bq, tp), min(bk, tp)

    def heads_first(x):  # [B, T, H, D] -> [B, H, Tp, D]
        return jnp.swapaxes(pad_axis(x, 1, tp), 1, 2)

    sizes = tpu_fa.BlockSizes(block_q=bq, block_k_major=bk, block_k=bk, block_b=1, block_q_major_dkv=bq,
                              block_k_major_dkv=bk, block_k_dkv=bk, block_q_dkv=bq, block_k_major_dq=bk,
                              block_k_dq=bk, block_q_dq=bq)
    out = tpu_fa.flash_attention(heads_first(q), heads_first(jnp.repeat(k, g, axis=2)),
                                 heads_first(jnp.repeat(v, g, axis=2)), causal=True, sm_scale=d ** -0.5,
                                 block_sizes=sizes)
    return jnp.swapaxes(out, 1, 2)[:, :t]
