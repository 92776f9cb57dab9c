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
