"""The "pallas" attention backend: one differentiable function over the flash and decode kernels.

    pallas_attention(q, k, v, q_positions, block_q=0, block_k=0, whole_sequence=False, where=None) -> out

Forward: the decode kernel when a row brings few queries (T * G <= DECODE_MAX_ROWS: one-token decode steps,
short chunks against a cache), else the flash kernel. Both return the logsumexp, so one backward serves both:
the flash dq and dk/dv kernels, wired through `jax.custom_vjp`.

Where it runs (`where`, default jax.default_backend()):
  gpu  Triton kernels (flash_attention.py, decode_attention.py), compiled;
  cpu  the same kernels in Pallas interpret mode (what the tests check against the "xla" reference);
  tpu  whole causal sequences only, through JAX's shipped Mosaic flash attention (tpu_attention.py); a call
       with a cache raises NotImplementedError naming what that kernel lacks."""

from __future__ import annotations

import dataclasses
import functools

import jax

from jaxmarl_llm.models.kernels import tpu_attention
from jaxmarl_llm.models.kernels.blocks import block_sizes, platform
from jaxmarl_llm.models.kernels.decode_attention import decode_forward
from jaxmarl_llm.models.kernels.flash_attention import flash_backward, flash_forward

DECODE_MAX_ROWS = 64  # T * G query rows per (row, kv head) at most: the decode kernel's folded query tile
GPU_TARGET_PROGRAMS = 264  # ~2 per H100 SM: decode splits a row's cache until B * Hkv * splits reaches this
MAX_SPLITS = 16


@dataclasses.dataclass(frozen=True)
class KernelOptions:
    """Static kernel settings (hashable: the custom_vjp's non-differentiable argument)."""
    block_q: int
    block_k: int
    interpret: bool
    decode_splits: int
    decode_max_rows: int = DECODE_MAX_ROWS  # T * G at most this: the decode kernel runs the forward


def decode_splits(batch: int, kv_heads: int, interpret: bool) -> int:
    """Splits of each row's valid cache: enough programs to fill a GPU; two in interpret mode (the merge is
    still exercised, at little cost)."""
    if interpret:
        return 2
    return max(1, min(MAX_SPLITS, -(-GPU_TARGET_PROGRAMS // (batch * kv_heads))))


def pallas_attention(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array, *, block_q: int = 0,
                     block_k: int = 0, whole_sequence: bool = False, where: str | None = None,
                     decode_max_rows: int = DECODE_MAX_ROWS) -> jax.Array:
    """q [B, T, Hq, D], k/v [B, S, Hkv, D], q_positions [B, T] -> [B, T, Hq, D]; block sizes 0 = the platform's.
    whole_sequence promises q_positions[b] == arange(T) and S == T (no cache): the TPU path needs it.
    decode_max_rows: the forward uses the decode kernel when T * G is at most this (tests force either)."""
    where = where or platform()
    bq, bk = block_sizes(block_q, block_k, where)
    if where == "tpu":
        return tpu_attention.tpu_flash_attention(q, k, v, whole_sequence=whole_sequence, block_q=bq, block_k=bk)
    interpret = where == "cpu"
    opts = KernelOptions(bq, bk, interpret, decode_splits(q.shape[0], k.shape[2], interpret), decode_max_rows)
    return _attention(q, k, v, q_positions, opts)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _attention(q, k, v, q_positions, opts: KernelOptions):
    return _forward(q, k, v, q_positions, opts)[0]


def _forward(q, k, v, q_positions, opts: KernelOptions):
    """-> (out [B, T, Hq, D], lse [B, Hq, T]) from the kernel that suits T."""
    if q.shape[1] * (q.shape[2] // k.shape[2]) <= opts.decode_max_rows:
        return decode_forward(q, k, v, q_positions, block_k=opts.block_k, num_splits=opts.decode_splits,
                              interpret=opts.interpret)
    return flash_forward(q, k, v, q_positions, block_q=opts.block_q, block_k=opts.block_k, interpret=opts.interpret)


def _attention_fwd(q, k, v, q_positions, opts: KernelOptions):
    out, lse = _forward(q, k, v, q_positions, opts)
    return out, (q, k, v, q_positions, out, lse)


def _attention_bwd(opts: KernelOptions, res, dout):
    q, k, v, q_positions, out, lse = res
    dq, dk, dv = flash_backward(q, k, v, q_positions, out, lse, dout, block_q=opts.block_q, block_k=opts.block_k,
                                interpret=opts.interpret)
    return dq, dk, dv, None


_attention.defvjp(_attention_fwd, _attention_bwd)
