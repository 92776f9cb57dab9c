"""The checks every trainer's config shares, written once.

Each check raises `ConfigError("config.<key>: <what to do>")` for the first
value that cannot work, before anything compiles; the validators in this
package (one per trainer) call them in their own order.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Iterable

import jax
import ml_collections

from jaxmarl_llm.envs import registry
from jaxmarl_llm.errors import ConfigError  # a leaf module: trainers raise it without importing config

__all__ = ["ConfigError", "check_keys", "check_env_name", "check_positive_ints", "check_positive", "check_non_negative",
           "check_eval_episodes", "check_one_update", "check_mesh", "check_fsdp", "check_model_checkpoint", "check_run",
           "parse_resume", "stop_defaults", "check_stop", "STOP_METRICS", "wandb_defaults", "check_wandb"]


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config.{key}: {message}")


FREE_FORM = ("env_kwargs", "script_kwargs", "references", "eval_targets")  # groups whose keys the config names


def check_keys(config: ml_collections.ConfigDict, schema: ml_collections.ConfigDict, prefix: str = "") -> None:
    """Every key of `config` must exist in `schema` (env_kwargs / script_kwargs: checked by the env / teacher;
    run.references / run.eval_targets: labels and metrics, numbers checked by check_run)."""
    for key in config.keys():
        path = f"{prefix}{key}"
        _require(key in schema, path, f"unknown key; valid keys here: {', '.join(sorted(schema.keys()))}")
        if isinstance(schema[key], ml_collections.ConfigDict) and key not in FREE_FORM:
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
    """mesh.num_devices fits the visible devices, mesh.fsdp (where the trainer has it) divides it, and `config[key]`
    (the rows an update splits, over every device: data x fsdp) is a multiple of num_devices x `per_device`;
    `why(n_dev)` words the second message. Returns num_devices."""
    n_dev = config.mesh.num_devices or len(jax.devices())
    _require(n_dev <= len(jax.devices()), "mesh.num_devices", f"{n_dev} requested, {len(jax.devices())} visible")
    _require(jax.process_count() == 1 or n_dev == len(jax.devices()), "mesh.num_devices",
             f"a run over {jax.process_count()} processes uses every device: 0 or {len(jax.devices())}")
    fsdp = config.mesh.get("fsdp", 1)
    _require(isinstance(fsdp, int) and not isinstance(fsdp, bool) and fsdp >= 1, "mesh.fsdp",
             f"must be an integer >= 1 (the devices each base weight is sharded over; 1 = whole on every device), "
             f"got {fsdp!r}")
    _require(n_dev % fsdp == 0, "mesh.fsdp",
             f"{fsdp} does not divide mesh.num_devices = {n_dev}: the mesh is num_devices / fsdp data rows of fsdp "
             "devices each")
    message = why(n_dev) if why is not None else f"{config[key]} must be a multiple of num_devices = {n_dev}"
    if fsdp > 1:
        message += (f" (mesh.fsdp={fsdp}: each of the {n_dev // fsdp} data rows splits its share over its {fsdp} "
                    "fsdp devices too)")
    _require(config[key] % (n_dev * per_device) == 0, key, message)
    return n_dev


def check_fsdp(config: ml_collections.ConfigDict) -> None:
    """mesh.fsdp > 1 shards the frozen base (every LM trainer): training it is refused."""
    fsdp = config.mesh.get("fsdp", 1)
    if fsdp == 1:
        return
    _require(not config.train_base, "mesh.fsdp",
             f"{fsdp} shards the frozen base, but train_base=True trains it (a replicated float32 copy with Adam "
             "state): set train_base=False (LoRA adapters over the sharded base) or mesh.fsdp=1")


def check_model_checkpoint(config: ml_collections.ConfigDict) -> None:
    """model.checkpoint: "" (a random model) or a local Hugging Face folder; the adapters' rank and LoRA+ ratio."""
    _require(isinstance(config.lora.rank, int) and config.lora.rank > 0, "lora.rank",
             f"must be an integer > 0, got {config.lora.rank!r}")
    _require(isinstance(config.lora.lr_ratio, (int, float)) and config.lora.lr_ratio > 0, "lora.lr_ratio",
             f"must be > 0 (1 = plain LoRA, LoRA+ uses 4-16), got {config.lora.lr_ratio!r}")
    from jaxmarl_llm.models.attention import BACKENDS
    from jaxmarl_llm.models.config import valid_attention_block

    backend = config.model.get("attention_backend", "xla")
    _require(backend in BACKENDS, "model.attention_backend",
             f"{backend!r} is not a backend; choose one of {', '.join(BACKENDS)} (docs/attention.md)")
    for name in ("attention_block_q", "attention_block_k"):
        block = config.model.get(name, 0)
        _require(valid_attention_block(block), f"model.{name}",
                 f"must be 0 (the platform's default) or a power of two >= 16, got {block!r}")
    theta = config.model.get("rope_theta", 0.0)
    _require(isinstance(theta, (int, float)) and theta >= 0, "model.rope_theta",
             f"must be a number >= 0 (0: the family's rotary base), got {theta!r}")
    from jaxmarl_llm.models.config import PRESETS

    preset = config.model.get("preset", "")
    _require(preset == "" or preset in PRESETS, "model.preset",
             f"{preset!r} is not a preset; choose one of {', '.join(sorted(PRESETS))} (or '' for model.* sizes)")
    _require(not (preset and config.model.checkpoint), "model.preset",
             "a preset builds a random model; with model.checkpoint the folder's config.json gives the architecture")
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
    resume_force (continue a run whose config.json differs, run/run_identity.py) is a bool; out_dir is a file
    path, not a URL (a bucket is mounted and named by its mount path, README "Run on a TPU pod")."""
    scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://", str(config.run.out_dir))
    _require(scheme is None, "run.out_dir",
             f"{config.run.out_dir!r} is a URL; run folders are file paths: mount the bucket on every host "
             "(tpu_scripts/install.sh --bucket BUCKET mounts it at /gcs/BUCKET) and pass "
             "--config.run.out_dir=/gcs/BUCKET/runs/NAME")
    out_dir = str(config.run.out_dir)
    _require(not os.path.exists(out_dir) or os.path.isdir(out_dir), "run.out_dir",
             f"{out_dir!r} is a file, not a folder; choose another --config.run.out_dir")
    check_positive_ints(config.run, ("updates_per_chunk", "checkpoint_every", "keep_checkpoints"), prefix="run.")
    for group in ("references", "eval_targets"):  # the plots' lines
        for label, value in dict(config.run.get(group, {})).items():
            _require(isinstance(value, (int, float)) and not isinstance(value, bool), f"run.{group}.{label}",
                     f"must be a number (a line on the plot), got {value!r}")
    _require(isinstance(config.run.overwrite, bool), "run.overwrite",
             f"must be True or False, got {config.run.overwrite!r}")
    resume = parse_resume(config.resume)
    _require(not (config.run.overwrite and resume is not False), "run.overwrite",
             "overwrite=True deletes the earlier run and starts fresh; it cannot be combined with config.resume")
    _require(isinstance(config.get("resume_force", False), bool), "resume_force",
             f"must be True or False, got {config.get('resume_force')!r}")
    for key in ("transcripts_every", "transcript_episodes"):
        if key in config.run:
            value = config.run[key]
            _require(isinstance(value, int) and not isinstance(value, bool) and value >= 0, f"run.{key}",
                     f"must be a count >= 0 (0 = no transcripts), got {value!r}")
    if "wandb" in config.run:
        check_wandb(config.run)
    if "keep_best" in config.run:
        _require(isinstance(config.run.keep_best, str), "run.keep_best",
                 f"must be a metric's name (\"\" = off), got {config.run.keep_best!r}")
        _require(config.run.get("keep_best_mode", "max") in ("max", "min"), "run.keep_best_mode",
                 f"must be max or min, got {config.run.get('keep_best_mode')!r}")


WANDB_MODES = ("auto", "online", "offline")


def wandb_defaults() -> dict:
    """The run group's Weights & Biases keys: off; project, entity and run name (""= the run folder's name);
    mode "auto" = online when WANDB_API_KEY is set, else offline (no network needed; `wandb sync` uploads later)."""
    return {"wandb": False, "wandb_project": "jaxmarl_llm", "wandb_entity": "", "wandb_name": "", "wandb_mode": "auto"}


def check_wandb(run: ml_collections.ConfigDict) -> None:
    """run.wandb is a bool; its mode is known; with wandb on, the package is installed (else one line now, not a
    traceback after compiling)."""
    _require(isinstance(run.wandb, bool), "run.wandb", f"must be True or False, got {run.wandb!r}")
    _require(run.wandb_mode in WANDB_MODES, "run.wandb_mode",
             f"must be one of {', '.join(WANDB_MODES)}, got {run.wandb_mode!r}")
    if run.wandb:
        import importlib.util

        _require(importlib.util.find_spec("wandb") is not None, "run.wandb",
                 "True needs the wandb package, which is not installed: pip install wandb "
                 "(or pip install 'jaxmarl_llm[wandb]')")


# config.stop: bounds past which a run is diverging; the run loop (run/runner.py) stops before it saves the chunk
# that crossed one, keeps the last good checkpoint and exits with status 3. 0 = off.
#   max_param_norm_growth: the global L2 norm of the trainable parameters (LoRA adapters, value heads, critic, MLP
#       nets; the whole model when train_base) over its norm at the start of the run, or at the restored update on
#       a resume (nothing extra is stored in checkpoints); checked at the end of each chunk of updates
#   max_kl: the metric approx_kl (old vs new policy, per update); max_value_loss: the metric value_loss (per update)
STOP_METRICS = {"max_param_norm_growth": "param_norm_growth", "max_kl": "approx_kl", "max_value_loss": "value_loss"}
# 100x the starting norm: healthy shipped runs stay within ~2x (measured: configs/spread.py's 480 LM-PPO updates 1.97x,
# most of it the critic at critic.lr=1e-2; tag.py:lm 1.35x; cooperative_writing.py at lr=1e-2 1.66x; spread_mlp.py's
# 732 updates 1.48x; sft_guess_number.py from scratch 1.31x after 300 of 1200 updates); lr=1e6 is 1e6x at update 1
DEFAULT_MAX_PARAM_NORM_GROWTH = 100.0


def stop_defaults(*keys: str) -> ml_collections.ConfigDict:
    """The `stop` group of a trainer's defaults with the bounds whose metric it logs (all of them when none named):
    the param-norm bound on (DEFAULT_MAX_PARAM_NORM_GROWTH), the others off."""
    keys = keys or tuple(STOP_METRICS)
    defaults = {"max_param_norm_growth": DEFAULT_MAX_PARAM_NORM_GROWTH, "max_kl": 0.0, "max_value_loss": 0.0}
    return ml_collections.ConfigDict({key: defaults[key] for key in keys})


def check_stop(config: ml_collections.ConfigDict) -> None:
    """stop.*: numbers >= 0 (0 = off); a growth factor is 0 or > 1 (the norm starts at 1x its own)."""
    stop = config.get("stop") or {}
    for key in stop.keys():
        value = stop[key]
        _require(isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0, f"stop.{key}",
                 f"must be a number >= 0 (0 = off), got {value!r}")
    growth = stop.get("max_param_norm_growth", 0.0)
    _require(growth == 0 or growth > 1, "stop.max_param_norm_growth",
             f"is a growth factor of the parameter norm: 0 (off) or > 1, got {growth!r}")
