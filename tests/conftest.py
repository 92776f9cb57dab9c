"""Test-session setup: 8 forced host devices so mesh tests run on one CPU, XLA's cheapest CPU code generation, and
one persistent XLA compilation cache shared by the session's workers and the processes tests launch.

Most tests run a tiny model for a few updates: their time is compiling, not running. XLA's backend optimization
level 0 compiles them ~1.6x faster; the few tests whose time is running (the long learning runs) run their
program in a fresh process at the default level (tests/fresh_process.py). The golden numbers
(tests/golden/trainers.json) are recorded under these flags.

Many tests also compile the same program again (a run and its resume, the CLI tests' identical start-ups): the
cache serves it compiled once. With a size bound, jax guards each entry with a file lock, so the two xdist workers
can share it. XLA_FLAGS or JAX_COMPILATION_CACHE_DIR set beforehand (the latter to "" for none) win."""

import os
import tempfile

DEVICES_FLAG = "--xla_force_host_platform_device_count=8"
FAST_COMPILE_FLAG = "--xla_backend_optimization_level=0"

# ordered collectives: run/cli.py CPU_ORDERED_COLLECTIVES_FLAG (fsdp programs deadlock without it on XLA:CPU),
# written out here: importing the package would import jax before these variables are set
ORDERED_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
os.environ.setdefault("XLA_FLAGS", f"{DEVICES_FLAG} {FAST_COMPILE_FLAG} {ORDERED_FLAG}")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), "jaxmarl_llm_xla_cache")):
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")  # skip the many tiny programs
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 << 30))  # LRU-evicted beyond 4 GiB; file locks
