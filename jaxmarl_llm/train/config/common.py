"""The checks every trainer's config shares, written once.

Each check raises `ConfigError("config.<key>: <what to do>")` for the first
value that cannot work, before anything compiles; the validators in this
package (one per trainer) call them in their own order.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable

import jax
import ml_collections

from jaxmarl_llm.envs import registry
from jaxmarl_llm.train.errors import ConfigError  # a leaf module: trainers raise it without importing config

__all__ = ["ConfigError", "check_keys", "check_env_name", "check_positive_ints", "check_positive", "check_non_negative",
           "check_eval_episodes", "check_one_update", "check_mesh", "check_model_checkpoint", "check_run",
           "parse_resume"]


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config.{key}: {message}")


def check_keys(config: ml_collections.ConfigDict, schema: ml_collections.ConfigDict, prefix: str = "") -> None:
    """Every key of `config` must exist in `schema` (env_kwargs / script_kwargs: checked by the env / teacher)."""
    for key in config.keys():
        path = f"{prefix}{key}"
        _require(key in schema, path, f"unknown key; valid keys here: {', '.join(sorted(schema.keys()))}")
        if isinstance(schema[key], ml_collections.ConfigDict) and key not in ("env_kwargs", "script_kwargs"):
            _require(isinstance(config[key], ml_collections.ConfigDict), path, "must be a group of keys")
            check_keys(config[key], schema[key], prefix=f"{path}.")


def check_env_name(config: ml_collections.ConfigDict) -> None:
    """env_name is a registered env (its kwargs are checked by whoever builds it)."""
    _require(config.env_name in registry.registered(), "env_name", f"unknown env; choose one of {registry.registered()}")


def check_positive_ints(group: ml_collections.ConfigDict, keys: Iterable[str], prefix: str = "") -> None:
    """Counts (envs, steps, epochs, ...): `group[key]` an int > 0; `prefix` names the group (e.g. "rollout.")."""
    for key in keys:
        _require(isinstance(group[key], int) and group[key] > 0, f"{prefix}{key}",
                 f"must be a positive integer, got {group[key]!r}")


def check_positive(config: ml_collections.ConfigDict, keys: Iterable[str]) -> None:
    """Step sizes and scales (lr, max_grad_norm, clip_eps, beta): > 0."""
    for key in keys:
        _require(float(config[key]) > 0, key, f"must be > 0, got {config[key]}")


def check_non_negative(config: ml_collections.ConfigDict, keys: Iterable[str]) -> None:
    """Optional penalties (weight_decay, sft_coef): >= 0, 0 turns them off."""
    for key in keys:
        _require(float(config[key]) >= 0, key, f"must be >= 0, got {config[key]}")


def check_eval_episodes(config: ml_collections.ConfigDict) -> None:
    """The held-out greedy evaluation after training: a count, 0 = skip."""
    _require(isinstance(config.eval_episodes, int) and config.eval_episodes >= 0, "eval_episodes",
             "must be a non-negative integer")


def check_one_update(config: ml_collections.ConfigDict) -> None:
    """LM trainers count episodes: the run must hold at least one update's num_envs."""
    _require(config.total_episodes >= config.num_envs, "total_episodes", "is less than one update (num_envs episodes)")


def check_mesh(config: ml_collections.ConfigDict, key: str, per_device: int = 1,
               why: Callable[[int], str] | None = None) -> int:
    """mesh.num_devices fits the visible devices and `config[key]` (the rows an update splits) is a multiple of
    num_devices x `per_device`; `why(n_dev)` words the second message. Returns num_devices."""
    n_dev = config.mesh.num_devices or len(jax.devices())
    _require(n_dev <= len(jax.devices()), "mesh.num_devices", f"{n_dev} requested, {len(jax.devices())} visible")
    message = why(n_dev) if why is not None else f"{config[key]} must be a multiple of num_devices = {n_dev}"
    _require(config[key] % (n_dev * per_device) == 0, key, message)
    return n_dev


def check_model_checkpoint(config: ml_collections.ConfigDict) -> None:
    """model.checkpoint: "" (a random model) or a local Hugging Face folder."""
    if config.model.checkpoint:
        _require(os.path.isdir(config.model.checkpoint), "model.checkpoint",
                 f"{config.model.checkpoint!r} is not a folder; pass a local Hugging Face model folder")


_RESUME_FLAGS = {"": False, "false": False, "true": True}  # "" is the defaults' "start fresh"


def parse_resume(value: bool | str | None) -> bool | str:
    """config.resume -> False (fresh), True (continue run.out_dir) or the run directory to continue.

    Only true / false or an existing directory: a typo (`--config.resume=yes`) must not become a new run in ./yes."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip()
    if text.lower() in _RESUME_FLAGS:
        return _RESUME_FLAGS[text.lower()]
    _require(os.path.isdir(text), "resume",
             f"{value!r} is neither True / False nor an existing run directory; pass --config.resume=True to continue "
             "run.out_dir, or the path of the run directory to continue")
    return text


def check_run(config: ml_collections.ConfigDict) -> None:
    """run.*: the chunk, checkpoint cadence and checkpoints kept are counts (0 would divide by zero or keep
    nothing); resume is readable; overwrite (delete the earlier run) and resume (continue it) exclude each other;
    resume_force (continue a run whose config.json differs, train/run_identity.py) is a bool."""
    check_positive_ints(config.run, ("updates_per_chunk", "checkpoint_every", "keep_checkpoints"), prefix="run.")
    _require(isinstance(config.run.overwrite, bool), "run.overwrite",
             f"must be True or False, got {config.run.overwrite!r}")
    resume = parse_resume(config.resume)
    _require(not (config.run.overwrite and resume is not False), "run.overwrite",
             "overwrite=True deletes the earlier run and starts fresh; it cannot be combined with config.resume")
    _require(isinstance(config.get("resume_force", False), bool), "resume_force",
             f"must be True or False, got {config.get('resume_force')!r}")
