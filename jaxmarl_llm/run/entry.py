"""One entry point for every trainer kind, chosen by `config.trainer` (run/trainers.py); used by experiments/*.py."""

from __future__ import annotations

from typing import Any, Callable

import jax

from jaxmarl_llm.errors import Interrupted
from jaxmarl_llm.parallel import multihost
from jaxmarl_llm.parallel.mesh import sharded_chunk
from jaxmarl_llm.run.run_identity import check_same_run
from jaxmarl_llm.run.run_lock import RunLock
from jaxmarl_llm.run.runner import check_fresh_out_dir, resume_dir, run_training
from jaxmarl_llm.run.trainers import TRAINERS, TrainerSpec
from jaxmarl_llm.train.config import ConfigError


def spec_of(config) -> TrainerSpec:
    """The registry entry `config.trainer` names (absent: the MLP PPO trainer)."""
    kind = config.get("trainer", "mlp_ppo")
    if kind not in TRAINERS:
        raise ConfigError(f"config.trainer: unknown trainer {kind!r}; choose one of {tuple(TRAINERS)}")
    return TRAINERS[kind]


def build(config) -> tuple[Any, Callable, int, str]:
    """Validate `config` and return (trainer, chunk_fn, steps_per_update, headline metric)."""
    spec = spec_of(config)
    spec.validate(config)
    trainer = spec.make_train(config)
    return trainer, sharded_chunk, spec.steps_per_update(config), spec.headline(config)


def train_from_config(config) -> dict:
    """Train, holding the run folder's lock (run/run_lock.py) from before the first look at the folder to after
    its last file (the config is validated first: a run folder that cannot be one is refused before it is made)."""
    spec_of(config).validate(config)
    if resume_dir(config) is not None:  # a folder with no run, or another run's, is refused before the lock makes
        check_same_run(config, resume_dir(config), announce=False)  # the folder (run_training checks again, and warns)
    with RunLock(resume_dir(config) or config.run.out_dir, jax.process_index()):
        return _train(config)


def _train(config) -> dict:
    check_fresh_out_dir(config)  # before building: an occupied run folder is refused in seconds, not after compiling
    trainer, chunk_fn, steps, headline = build(config)
    spec = spec_of(config)
    if spec.check_memory is not None:  # before compiling: a run that cannot fit is refused in seconds
        plan = spec.check_memory(config, trainer)
        if multihost.primary():  # its last entry is the peak estimate
            print(f"memory plan: {list(plan.values())[-1] / 2**30:.2f} GiB per device (train/lm/memory.py)")
    describe = spec.transcripts(config, trainer) if spec.transcripts is not None else None
    result = run_training(config, trainer, chunk_fn, steps, headline, trainable=spec.trainable, describe=describe)
    try:
        return after_training(config, trainer, result)
    except KeyboardInterrupt:  # Ctrl-C after the last update: the training is saved, only its evaluation is lost
        raise Interrupted(f"interrupted during what follows the training (held-out evaluation, export); its "
                          f"{trainer.num_updates} updates are saved in {result['out_dir']}; evaluate them with "
                          f"experiments/eval.py --checkpoint={result['out_dir']}") from None


def after_training(config, trainer, result: dict) -> dict:
    """The trainer's outputs after the run (SFT / DPO: the exported model; LM runs: held-out greedy results).
    Under several processes every process runs the hook: the held-out evaluation gathers the state from all of
    them and, with mesh.fsdp > 1, plays over the whole mesh; files and prints are the primary's."""
    return spec_of(config).after_training(config, trainer, result)
