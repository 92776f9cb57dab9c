"""A device's peak matmul FLOP/s, the denominator of MFU: the spec sheet's dense figure on a GPU or TPU, a
measured one on a CPU (whose peak depends on the cores a run is given, not on the model name).

    flops, source = peak_flops("bfloat16")
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp

# dense (no sparsity) tensor-core / MXU peaks per device, FLOP/s, by `device_kind` prefix; (bfloat16, float32).
# float32 on NVIDIA: TF32 tensor cores, what XLA uses for float32 matmuls by default
SPEC_SHEET = {
    "NVIDIA H200": (989e12, 494.5e12),
    "NVIDIA H100": (989e12, 494.5e12),  # SXM; the PCIe card is 756 / 378
    "NVIDIA A100": (312e12, 156e12),
    "NVIDIA L4": (121e12, 60e12),
    "TPU v6": (918e12, 918e12),
    "TPU v5p": (459e12, 459e12),
    "TPU v5 lite": (197e12, 197e12),
    "TPU v5e": (197e12, 197e12),
    "TPU v4": (275e12, 275e12),
}


def peak_flops(dtype: str = "bfloat16", device: jax.Device | None = None) -> tuple[float, str]:
    """(peak FLOP/s of one device for matmuls in `dtype`, where the figure comes from)."""
    device = device or jax.devices()[0]
    kind = device.device_kind
    for name, (bf16, f32) in SPEC_SHEET.items():
        if kind.startswith(name):
            return (bf16 if dtype == "bfloat16" else f32), f"spec sheet, {kind}"
    if device.platform != "cpu":
        raise ValueError(f"no peak FLOP/s known for {kind!r}: add it to parallel/peak.py SPEC_SHEET")
    return measured_matmul_flops(dtype), f"measured matmul, {kind}"


@functools.lru_cache(maxsize=None)
def measured_matmul_flops(dtype: str = "bfloat16", size: int = 2048, repeats: int = 8) -> float:
    """The best of `repeats` timed [size, size] x [size, size] products on the default device (FLOP/s): what this
    machine's matmuls reach with the dtype a model computes in (bf16 operands, float32 accumulation)."""
    a = jnp.ones((size, size), dtype)
    matmul = jax.jit(lambda x: jnp.einsum("ij,jk->ik", x, x, preferred_element_type=jnp.float32).astype(x.dtype))
    matmul(a).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        matmul(a).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best
