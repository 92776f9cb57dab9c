"""Reading a trained run back: a run folder checked before anything is built in it, its latest runner state (or
those of several kept checkpoints), one adapter slot of it (experiments/eval.py, experiments/play.py)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import jax

from jaxmarl_llm.run.checkpoints import Checkpoints
from jaxmarl_llm.run.cli import fail
from jaxmarl_llm.run.run_identity import holds_checkpoints


def check_run_dir(flag: str, run_dir: str) -> None:
    """A run directory must hold a checkpoint before anything is built (or created in it)."""
    if not os.path.isdir(run_dir):
        fail(f"--{flag}={run_dir!r}: no such run directory (a run.out_dir of experiments/train.py)")
    if not holds_checkpoints(run_dir):
        fail(f"--{flag}={run_dir!r}: holds no checkpoint (expected {os.path.join(run_dir, 'checkpoints')}/<update>); "
             "is it a run directory of experiments/train.py that saved one?")


def restore_states(trainer, run_dir: str, steps: Iterable[int | None]) -> Iterator[tuple[int, object]]:
    """(update, runner state) of each of `steps`' checkpoints of `run_dir` (None: the latest), one at a time, from
    one template state and one checkpoint manager (closed when the iteration ends)."""
    like = jax.jit(trainer.init)(jax.random.PRNGKey(0), trainer.hparams)
    ckpt = Checkpoints(os.path.join(run_dir, "checkpoints"))
    try:
        for step in steps:
            step = ckpt.latest_step() if step is None else step
            state = ckpt.restore(like, step)
            print(f"restored {run_dir} at update {step}")
            yield step, state
    finally:
        ckpt.close()


def restore_state(trainer, run_dir: str):
    """The runner state of the latest checkpoint of `run_dir`."""
    (_, state), = restore_states(trainer, run_dir, [None])
    return state


def restore_adapter(trainer, run_dir: str, slot: int):
    """(one adapter slot (no slot axis), the run's trained base or None) from the latest checkpoint of `run_dir`."""
    state = restore_state(trainer, run_dir)
    return jax.tree.map(lambda x: x[slot], state.trainable["lora"]), state.trainable.get("base")
