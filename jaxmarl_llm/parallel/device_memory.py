"""What one device may hold, and what a compiled program asks of it: the two sides of every memory check.

A run that cannot fit used to find out from XLA's RESOURCE_EXHAUSTED after compiling and starting (27 s and a
traceback for configs/spread_mlp.py at num_envs=1000000). LM runs plan their memory before building
(train/lm/memory.py); every run, MLP included, checks XLA's own analysis of its compiled chunk before the first
call (run/runner.py).
"""

from __future__ import annotations

import os

import jax

GIB = 1 << 30


def device_memory_bytes(config) -> int:
    """What one device may hold: mesh.device_memory_gib when set, else an accelerator's own limit, else (CPU) the
    machine's RAM shared by its local devices."""
    gib = float(config.mesh.get("device_memory_gib", 0.0)) if "mesh" in config else 0.0
    if gib > 0:
        return int(gib * GIB)
    device = jax.local_devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // jax.local_device_count()


def compiled_bytes(analysis) -> int:
    """The bytes a compiled program holds on one device at its peak, from `compiled.memory_analysis()`: its
    arguments and outputs (less the donated ones it writes in place) and its scratch."""
    return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes - analysis.alias_size_in_bytes
               + analysis.temp_size_in_bytes)
