"""Run a test's long computation in a fresh process compiled at XLA's default optimization level.

tests/conftest.py compiles at level 0 (most tests only compile); a learning run of a hundred updates runs ~3x slower
that way, so it runs here instead: same code, same seed, the optimized CPU program users get."""

import multiprocessing
import os
from typing import Any, Callable

from conftest import FAST_COMPILE_FLAG


def run_optimized(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) in a spawned process without the fast-compile flag; fn must be importable (module level) and
    return something picklable (numbers, lists, numpy arrays)."""
    saved = os.environ.get("XLA_FLAGS")
    os.environ["XLA_FLAGS"] = " ".join(f for f in (saved or "").split() if f != FAST_COMPILE_FLAG)
    try:  # the child reads os.environ as it is at spawn
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            return pool.apply(fn, args)
    finally:
        if saved is None:
            os.environ.pop("XLA_FLAGS")
        else:
            os.environ["XLA_FLAGS"] = saved
