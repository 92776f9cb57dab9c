"""Grouped-query attention behind one function with a backend switch.

    attention(q, k, v, q_positions, backend="xla", causal_block=0, *, block_q=0, block_k=0,
              whole_sequence=False) -> [B, T, Hq, D]

Layout convention (shared with the KV cache): key slot s holds the token at
position s of its row, and rows are right-padded. So causality alone is the
mask: query at position p sees slots 0..p. Padding queries (p >= length) see
garbage but their outputs are never used; garbage slots sit beyond every real
query's position, so they are never seen.

Backends (a registry, `IMPLEMENTATIONS`; docs/attention.md says which runs where):
  "xla"     the reference: einsum + float32 softmax, hand-written backward (below). Every platform.
  "pallas"  flash / decode kernels (models/kernels/): Triton on GPU, interpret mode on CPU, JAX's shipped
            Mosaic flash attention on TPU for whole sequences.
  "cudnn"   jax.nn.dot_product_attention(implementation="cudnn"): CUDA GPUs with cuDNN, bf16 / fp16.
  "auto"    the best available for the platform: `AUTO` (GPU pallas, TPU pallas where it fits, CPU xla).

The "xla" backward is written by hand (flash-attention's formulas): it keeps the
logsumexp per query and recomputes the [T, S] probabilities, where autodiff of the
softmax stored them per layer and made several more passes over them. On the
tic-tac-toe GRPO loss (16 episodes x 392 tokens, XLA:CPU) one step went ~0.50 s
-> ~0.41 s; the residual memory no longer grows with T x S.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

from jaxmarl_llm.models.kernels.blocks import platform
from jaxmarl_llm.models.kernels.cudnn_attention import cudnn_attention

BACKENDS = ("xla", "pallas", "cudnn", "auto")
AUTO = {"cpu": "xla", "gpu": "pallas", "tpu": "pallas"}  # platform -> backend; anything else: "xla"
MAX_CAUSAL_BLOCKS = 8  # each block is its own pair of products in the program: bounded, so HLO size is too


@dataclasses.dataclass(frozen=True)
class Call:
    """What a backend may need besides the arrays."""
    causal_block: int = 0  # xla: causal query blocks (> 0 also promises a whole sequence)
    block_q: int = 0  # pallas: tile sizes, 0 = the platform's default
    block_k: int = 0
    whole_sequence: bool = False  # q_positions[b] == arange(T) and S == T (no cache)


def resolve_backend(backend: str, whole_sequence: bool = False, where: str | None = None) -> str:
    """The backend that runs: "auto" becomes the platform's best ("pallas" on TPU only where the shipped TPU
    kernel fits, a whole sequence; else "xla"). An unknown name raises ValueError naming the choices."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown attention backend {backend!r}; expected one of {BACKENDS}")
    if backend != "auto":
        return backend
    where = where or platform()
    if where == "tpu" and not whole_sequence:  # the shipped TPU kernel has no cache offsets
        return "xla"
    return AUTO.get(where, "xla")


# XLA:CPU options a program needs when its attention runs the Pallas kernels in interpret mode: jaxlib 0.10.2's
# YNNPACK fusions segfault (a YNNPACK transpose, `slinky::internal::can_fuse`, in an XLA worker thread) running
# the interpreted kernels inside the tic-tac-toe rollout's cached calls; with YNNPACK fusions off it runs and equals
# "xla" (tests/test_attention_kernels.py, the whole-update check). Only for those programs: "xla" runs keep YNNPACK.
CPU_INTERPRET_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}


def compiler_options(backend: str, where: str | None = None) -> dict[str, str] | None:
    """`jax.jit(..., compiler_options=...)` for a program whose attention uses `backend` on this platform:
    CPU_INTERPRET_OPTIONS when that is Pallas in interpret mode (CPU), else None (XLA's defaults)."""
    where = where or platform()
    return dict(CPU_INTERPRET_OPTIONS) if where == "cpu" and resolve_backend(backend, where=where) == "pallas" else None


def attention(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array, backend: str = "xla",
              causal_block: int = 0, *, block_q: int = 0, block_k: int = 0, whole_sequence: bool = False) -> jax.Array:
    """q [B, T, Hq, D], k/v [B, S, Hkv, D], q_positions [B, T] (int) -> [B, T, Hq, D].

    causal_block > 0 promises a whole sequence (q_positions[b, t] == t, S == T, no cache): "xla" then takes
    the queries in blocks of that many and block i reads only the keys up to its last query, so the masked
    upper triangle is never computed (at T = 392 and blocks of 128: 66% of the score entries). At most
    MAX_CAUSAL_BLOCKS blocks: a longer sequence gets wider blocks (8 blocks compute 56% of T x S).
    whole_sequence makes the same promise without asking for blocks (cuDNN's causal mode, the TPU kernel).
    block_q / block_k: the Pallas kernels' tiles (0: the platform's default)."""
    call = Call(causal_block, block_q, block_k, whole_sequence or causal_block > 0)
    return IMPLEMENTATIONS[resolve_backend(backend, call.whole_sequence)](q, k, v, q_positions, call)


def _xla(q, k, v, q_positions, call: Call):
    if 0 < call.causal_block < q.shape[1]:
        t = q.shape[1]
        block = max(call.causal_block, -(-t // MAX_CAUSAL_BLOCKS))  # long sequences: bigger blocks, not more
        return jnp.concatenate([_xla_attention(q[:, lo:lo + block], k[:, :lo + block], v[:, :lo + block],
                                               q_positions[:, lo:lo + block])
                                for lo in range(0, t, block)], axis=1)
    return _xla_attention(q, k, v, q_positions)


def _pallas(q, k, v, q_positions, call: Call):
    from jaxmarl_llm.models.kernels.pallas_attention import pallas_attention  # Pallas loads on first use

    return pallas_attention(q, k, v, q_positions, block_q=call.block_q, block_k=call.block_k,
                            whole_sequence=call.whole_sequence)


def _cudnn(q, k, v, q_positions, call: Call):
    return cudnn_attention(q, k, v, q_positions, whole_sequence=call.whole_sequence)


IMPLEMENTATIONS: dict[str, Callable[..., jax.Array]] = {"xla": _xla, "pallas": _pallas, "cudnn": _cudnn}


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
