"""Schema and start-up checks of SFT (train/sft.py): a scripted teacher's, a file's or the policy's own transcripts."""

from __future__ import annotations

import copy
import inspect
import math
import os

import ml_collections

from jaxmarl_llm.data.teachers import TEACHERS
from jaxmarl_llm.train.config.common import (ConfigError, _require, check_env_name, check_eval_episodes, check_keys,
                                             check_fsdp, check_mesh, check_model_checkpoint, check_non_negative, check_one_update,
                                             check_positive, check_positive_ints, check_run, check_stop, stop_defaults)
from jaxmarl_llm.train.config.lm_rl import lm_rl_defaults


def sft_defaults() -> ml_collections.ConfigDict:
    """SFT (train/sft.py) on a scripted teacher's, a file's or the policy's own transcripts; groups as in lm_rl."""
    rl = lm_rl_defaults()
    c = ml_collections.ConfigDict()
    c.trainer = "sft"
    c.env_name = "text/guess_number"
    c.env_kwargs = ml_collections.ConfigDict({})
    c.tokenizer = "char"
    c.model = copy.deepcopy(rl.model)
    c.lora = copy.deepcopy(rl.lora)
    c.sampling = copy.deepcopy(rl.sampling)  # source="policy" samples with it; evaluation forces temperature 0
    c.train_base = True  # every base weight (from scratch); False: LoRA adapters only, merged on export
    # where each update's rows come from: "teacher" = the scripted teacher plays env_name (data/teachers.py);
    # "file" = rows drawn from data_path; "policy" = the current model plays env_name and its (episode, seat)
    # transcripts with return >= min_return are the targets (rejection-sampling fine-tuning / expert iteration)
    c.source = "teacher"
    c.data_path = ""  # source="file": JSONL, one {"prompt", "completion"} (or {"turns": [...]}) object per line
    c.max_length = 0  # source="file": tokens per row (with the eos after each move); 0 = the env's capacity
    c.min_return = 1.0  # source="policy": the episode return a transcript needs to be kept (1 = solved in most games)
    # source="teacher": "expert" (the game's scripted expert) or "random" (a uniformly random legal player, every
    # move a target: a warm start that teaches the reply's format and no skill, data/teachers.py RANDOM_PLAYERS)
    c.teacher = "expert"
    c.script_noise = 0.0  # chance per turn the teacher plays a random move (not a target) to show recovery
    c.script_kwargs = ml_collections.ConfigDict({})  # the teacher's own options (data/teachers.py)
    # the seats whose moves are targets (teacher / policy rows), e.g. (1,): only twenty questions' answerer learns;
    # the other seats still play (their transcripts are not trained on, nor computed); () = every seat
    c.target_agents = ()
    c.seed = 0
    c.num_envs = 32  # episodes (or file rows) per update (fresh each update)
    c.num_turns = 10  # turns per episode (>= the game's turn limit)
    c.total_episodes = 32 * 300
    c.lr = 3e-3
    c.max_grad_norm = 1.0
    c.weight_decay = 0.0
    c.warmup_updates = 20
    c.anneal_lr = True  # cosine to 10% of lr at the end
    c.eval_episodes = 0  # greedy episodes on the held-out split after training (0 = skip)
    # fsdp: shard the frozen base's weights over this many devices (train_base=False), as in lm_rl_defaults
    c.mesh = ml_collections.ConfigDict({"num_devices": 0, "fsdp": 1})
    c.stop = stop_defaults("max_param_norm_growth")  # no approx_kl / value_loss to bound (config/common.py)
    c.run = copy.deepcopy(rl.run)
    c.run.out_dir = "runs/sft"
    del c.run.transcripts_every, c.run.transcript_episodes  # no sampled episodes to show (lm_rl's)
    c.resume = ""
    c.resume_force = False  # True: resume even when this config differs from the run's config.json
    return c


def validate_sft(config: ml_collections.ConfigDict) -> None:
    """Raise ConfigError naming the first key that cannot work (a data file's lines: when it is loaded)."""
    check_keys(config, sft_defaults())
    check_env_name(config)
    _require(config.source in ("teacher", "file", "policy"), "source",
             f"must be 'teacher', 'file' or 'policy', got {config.source!r}")
    if config.source == "teacher":
        _require(config.teacher in TEACHERS, "teacher", f"must be one of {sorted(TEACHERS)}, got {config.teacher!r}")
        scripts = TEACHERS[config.teacher]
        _require(config.env_name in scripts, "env_name",
                 f"no {config.teacher} teacher for {config.env_name!r}; SFT can use {sorted(scripts)}, or set "
                 "source='file' (a JSONL of transcripts) or source='policy' (the model's own best episodes)")
    check_positive_ints(config, ("num_envs", "num_turns", "total_episodes"))
    check_one_update(config)
    _require(0.0 <= float(config.script_noise) <= 1.0, "script_noise", f"must be in [0, 1], got {config.script_noise}")
    if config.source == "teacher":
        _check_teacher_kwargs(config)
    check_target_agents(config)
    if config.source == "file":
        _require(bool(config.data_path), "data_path",
                 "source='file' needs a JSONL file of {\"prompt\", \"completion\"} lines")
        _require(os.path.isfile(config.data_path), "data_path",
                 f"{config.data_path!r} is not a file; pass the path of a JSONL transcript file")
        _require(isinstance(config.max_length, int) and (config.max_length == 0 or config.max_length > 1), "max_length",
                 f"must be 0 (the env's capacity) or an integer > 1, got {config.max_length!r}")
    if config.source == "policy":
        _require(isinstance(config.min_return, (int, float)) and not math.isnan(config.min_return), "min_return",
                 f"must be a number, got {config.min_return!r}")
    check_positive(config, ("lr", "max_grad_norm"))
    check_non_negative(config, ("weight_decay",))
    check_eval_episodes(config)
    check_mesh(config, "num_envs")
    check_fsdp(config)
    check_run(config)
    check_stop(config)
    check_model_checkpoint(config)


def check_target_agents(config: ml_collections.ConfigDict) -> None:
    """target_agents: distinct agent indices >= 0 (the env checks the upper bound), and only for played rows."""
    seats = config.target_agents
    _require(isinstance(seats, (tuple, list)) and all(isinstance(a, int) and a >= 0 for a in seats)
             and len(set(seats)) == len(seats), "target_agents",
             f"must be distinct agent indices, e.g. (1,), or () for every seat; got {seats!r}")
    _require(not (seats and config.source == "file"), "target_agents",
             "a file's rows have no seats; set it only with source='teacher' or 'policy'")


def _check_teacher_kwargs(config: ml_collections.ConfigDict) -> None:
    """script_kwargs must bind to the teacher's own signature (after its env argument)."""
    try:
        inspect.signature(TEACHERS[config.teacher][config.env_name]).bind(None, **config.script_kwargs)
    except TypeError as err:
        name = TEACHERS[config.teacher][config.env_name].__name__
        raise ConfigError(f"config.script_kwargs: {err} (the teacher is teachers.{name})") from None
