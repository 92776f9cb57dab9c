"""Rotary position embeddings (HF "rotate_half" layout), with Llama-3 frequency scaling.

    inv_freq(cfg) -> [head_dim/2]        frequencies, scaled as the checkpoint says
    apply_rope(x, positions, inv_freq)   x [B, T, H, D], positions [B, T]
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.models.config import ModelConfig


def inv_freq(cfg: ModelConfig) -> np.ndarray:
    """Per-pair rotation frequencies [D/2] in float32 (computed in numpy: a constant under jit)."""
    d = cfg.head_dim
    freq = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.int64).astype(np.float32) / d))
    if cfg.rope_scaling is None:
        return freq.astype(np.float32)
    factor, low, high, old_ctx = cfg.rope_scaling
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    wavelen = 2 * math.pi / freq
    scaled = np.where(wavelen > low_wavelen, freq / factor, freq)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def apply_rope(x: jax.Array, positions: jax.Array, freq: np.ndarray) -> jax.Array:
    """Rotate x [B, T, H, D] by angle positions * freq; math in float32, result in x.dtype."""
    angles = positions.astype(jnp.float32)[..., None] * jnp.asarray(freq)  # [B, T, D/2]
    angles = jnp.concatenate([angles, angles], axis=-1)[:, :, None, :]  # [B, T, 1, D]
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    xf = x.astype(jnp.float32)
    x1, x2 = jnp.split(xf, 2, axis=-1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return (xf * cos + rotated * sin).astype(x.dtype)
