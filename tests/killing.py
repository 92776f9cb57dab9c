"""Test helper: a chunk function that dies like a killed process, for resume tests."""


class Killed(Exception):
    """Stands for the process being killed mid-run."""


def dying_after(chunk_fn, calls: int):
    """Wrap a runner chunk_fn so the `calls`-th compiled chunk raises `Killed` instead of running."""
    count = {"n": 0}

    def make(trainer, mesh, k):
        fn = chunk_fn(trainer, mesh, k)

        def run(state, hp):
            count["n"] += 1
            if count["n"] == calls:
                raise Killed()
            return fn(state, hp)

        return run

    return make


def assert_resumed_identically(full: dict, resumed: dict, out_dir: str, metric: str, updates: int) -> None:
    """A killed-and-resumed run ends in the uninterrupted run's state, and its metrics.csv (in out_dir) logs
    updates 1..updates once each with the same `metric` values."""
    import os

    import jax
    import numpy as np

    from jaxmarl_llm.run.metrics_log import read_csv

    for a, b in zip(jax.tree.leaves(full["state"]), jax.tree.leaves(resumed["state"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows_full = read_csv(os.path.join(full["out_dir"], "metrics.csv"))
    rows_resumed = read_csv(os.path.join(out_dir, "metrics.csv"))
    assert [r["update"] for r in rows_resumed] == [str(i) for i in range(1, updates + 1)]
    assert [r[metric] for r in rows_full] == [r[metric] for r in rows_resumed]
