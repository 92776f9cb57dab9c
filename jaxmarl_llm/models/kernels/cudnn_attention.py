"""The "cudnn" attention backend: `jax.nn.dot_product_attention(..., implementation="cudnn")`.

cuDNN's fused (flash) attention, forward and backward, through JAX's own wrapper. Our mask is expressed in the
cheapest form cuDNN takes for the call:

  whole sequence (no cache)   is_causal=True: cuDNN skips the upper triangle itself;
  one new query per row       key_value_seq_lengths = position + 1 (a padding mask; nothing materialised);
  otherwise (T > 1 at an      a boolean [B, 1, T, S] mask `slot <= q_positions` (JAX turns it into a bias
  offset, S > T)              tensor of that size: correct, not the fast path).

cuDNN's flash attention takes bfloat16 / float16 inputs only and runs only on a CUDA GPU with cuDNN; other
platforms and float32 get one clear error line. Not run in this repository's tests (no GPU was available)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.models.kernels.blocks import platform


def check_cudnn(dtype, where: str | None = None) -> None:
    """Raise, in one line, when cuDNN attention cannot run here."""
    where = where or platform()
    if where != "gpu":
        raise RuntimeError(f"attention backend 'cudnn' needs a CUDA GPU with cuDNN; this platform is {where}: "
                           "use 'xla' or 'auto'")
    if jnp.dtype(dtype) not in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16)):
        raise ValueError(f"attention backend 'cudnn' takes bfloat16 or float16 inputs, not {jnp.dtype(dtype).name}: "
                         "set the model dtype to 'bfloat16' or use 'pallas' / 'xla'")


def cudnn_attention(q: jax.Array, k: jax.Array, v: jax.Array, q_positions: jax.Array, *,
                    whole_sequence: bool = False) -> jax.Array:
    """q [B, T, Hq, D], k/v [B, S, Hkv, D], q_positions [B, T] -> [B, T, Hq, D] (GQA handled by cuDNN)."""
    check_cudnn(q.dtype)
    b, t = q_positions.shape
    s = k.shape[1]
    kw = dict(implementation="cudnn")
    if whole_sequence:
        kw.update(is_causal=True)
    elif t == 1:
        kw.update(query_seq_lengths=jnp.ones((b,), jnp.int32),
                  key_value_seq_lengths=jnp.clip(q_positions[:, 0].astype(jnp.int32) + 1, 1, s))
    else:
        kw.update(mask=(jnp.arange(s)[None, None, :] <= q_positions[:, :, None])[:, None])  # [B, 1, T, S]
    return jax.nn.dot_product_attention(q, k, v, **kw)
