"""Block sizes and padding shared by the Pallas attention kernels.

Why one place: every kernel pads the sequence axes to whole blocks and the head dim to a power of two (Triton's
loads and `tl.dot` want power-of-two tiles of at least 16), and the block sizes come from one table per platform
unless ModelConfig.attention_block_q / attention_block_k set them."""

from __future__ import annotations

import jax
import jax.numpy as jnp

# (block_q, block_k) when the config says 0. GPU: Triton tiles that fit an H100's shared memory at head_dim 128 in
# the backward pass too (not tuned: no GPU was available when these were chosen, see docs/attention.md). TPU: the
# shipped Mosaic kernel wants multiples of 128. CPU (interpret mode): small tiles, so a test's few tokens still span
# several blocks.
PLATFORM_BLOCKS: dict[str, tuple[int, int]] = {"gpu": (64, 64), "tpu": (128, 128), "cpu": (32, 32)}
MIN_BLOCK = 16  # Triton's tl.dot needs every tile dimension >= 16


def platform() -> str:
    """"cpu", "gpu" or "tpu": where the default backend compiles."""
    return jax.default_backend()


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def block_sizes(block_q: int, block_k: int, where: str) -> tuple[int, int]:
    """The config's (block_q, block_k) with each 0 replaced by the platform's default."""
    dq, dk = PLATFORM_BLOCKS.get(where, PLATFORM_BLOCKS["gpu"])
    return block_q or dq, block_k or dk


def fit(block: int, n: int) -> int:
    """A block no longer than n needs (a 5-token sequence gets a 16-row tile, not a 128-row one)."""
    return min(block, max(MIN_BLOCK, next_pow2(n)))


def head_dim_padded(d: int) -> int:
    return max(MIN_BLOCK, next_pow2(d))


def pad_axis(x: jax.Array, axis: int, size: int, value=0) -> jax.Array:
    """x padded at the end of `axis` up to `size` (no copy when it already has that size)."""
    extra = size - x.shape[axis]
    if extra == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths, constant_values=value)
