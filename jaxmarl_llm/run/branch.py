"""A new run folder that starts where another run stood at one of its checkpoints: its latest, its best
(config.run.keep_best) or any kept update. The branch holds the run's records and that one checkpoint; training
it with `--config.resume=True` continues from there, and the resume drops the records past the checkpoint, as
after a kill. Branching is how a run is continued from its peak, or forked into ablations from a shared point,
without touching the original."""

from __future__ import annotations

import os
import shutil

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.run.checkpoints import BEST_DIR
from jaxmarl_llm.run.run_identity import saved_steps
from jaxmarl_llm.run.run_lock import LOCK_FILE

CHECKPOINTS = "checkpoints"
NOT_COPIED = {CHECKPOINTS, BEST_DIR, "tb", "wandb"}  # written afresh by the branch's own training


def branch_point(run_dir: str, at: str) -> tuple[int, str]:
    """(update, its checkpoint folder) of `at` in `run_dir`: "latest", "best" or an update that is kept;
    ConfigError naming what is kept otherwise."""
    latest, best = saved_steps(run_dir), saved_steps(run_dir, BEST_DIR)
    kept = f"kept: {', '.join(map(str, sorted(latest)))}" if latest else "no checkpoint kept"
    if at == "latest":
        if not latest:
            raise ConfigError(f"--at=latest: {run_dir} holds no checkpoint")
        step = max(latest)
    elif at == "best":
        if not best:
            raise ConfigError(f"--at=best: {run_dir} keeps no best checkpoint (train it with "
                              "--config.run.keep_best=METRIC); its checkpoints: " + kept)
        return max(best), os.path.join(run_dir, BEST_DIR, str(max(best)))
    elif at.isdigit():
        step = int(at)
        if step not in latest:
            if step in best:
                return step, os.path.join(run_dir, BEST_DIR, str(step))
            raise ConfigError(f"--at={at}: {run_dir} keeps no checkpoint of update {step} ({kept}"
                              + (f"; best: {max(best)}" if best else "") + ")")
    else:
        raise ConfigError(f"--at={at!r}: latest, best or an update number")
    return step, os.path.join(run_dir, CHECKPOINTS, str(step))


def branch_run(run_dir: str, at: str, out_dir: str) -> int:
    """Make `out_dir` a copy of `run_dir` at `at` (branch_point): its files but the checkpoints, TensorBoard and
    W&B folders and the lock, and the one checkpoint, as <out_dir>/checkpoints/<update>. The branch's best
    (config.run.keep_best) is its own training's, by whichever metric it keeps. Returns the update."""
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise ConfigError(f"--out={out_dir}: exists and is not an empty folder; branch into a new one")
    step, source = branch_point(run_dir, at)
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(run_dir):
        path = os.path.join(run_dir, name)
        if name not in NOT_COPIED and name != LOCK_FILE and os.path.isfile(path):
            shutil.copy2(path, os.path.join(out_dir, name))
    shutil.copytree(source, os.path.join(out_dir, CHECKPOINTS, str(step)))
    return step
