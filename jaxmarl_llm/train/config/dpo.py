"""Schema and start-up checks of DPO (train/dpo.py): preference pairs from a JSONL file or played each update."""

from __future__ import annotations

import copy
import os

import ml_collections

from jaxmarl_llm.data.teachers import SCRIPTS
from jaxmarl_llm.train.config.common import (ConfigError, _require, check_env_name, check_eval_episodes, check_keys,
                                             check_fsdp, check_mesh, check_model_checkpoint, check_non_negative, check_positive,
                                             check_positive_ints, check_run, check_stop, stop_defaults)
from jaxmarl_llm.train.config.lm_rl import lm_rl_defaults


def dpo_defaults() -> ml_collections.ConfigDict:
    """DPO on preference pairs (train/dpo.py): from a JSONL file, or played in a token game each update."""
    rl = lm_rl_defaults()
    c = ml_collections.ConfigDict()
    c.trainer = "dpo"
    c.env_name = "text/guess_number"  # the game (source="game") and the held-out evaluation (eval_episodes)
    c.env_kwargs = ml_collections.ConfigDict({})
    c.tokenizer = "char"
    c.model = copy.deepcopy(rl.model)
    c.lora = copy.deepcopy(rl.lora)
    c.sampling = copy.deepcopy(rl.sampling)  # "policy" players sample with it; evaluation forces temperature 0
    c.train_base = False  # False: LoRA adapters, reference = the base with adapters off; True: every weight
    c.source = "pairs"  # "pairs": a JSONL file of {"prompt","chosen","rejected"}; "game": pairs played each update
    c.pairs_path = ""  # source="pairs": the JSONL file
    c.max_length = 256  # source="pairs": tokens per sequence (prompt + response + eos); longer pairs are an error
    # source="game": who plays the envs of one seed, comma-separated; "teacher:P" = the scripted teacher with
    # exploration noise P, "policy" = the current policy sampling. The best return is chosen, the worst rejected.
    c.players = "teacher:0.0,teacher:0.5"
    c.num_turns = 10  # source="game" and evaluation: turns per episode
    c.beta = 0.1
    c.label_smoothing = 0.0  # conservative DPO (sigmoid loss only)
    c.loss_type = "sigmoid"  # "sigmoid" (DPO) or "ipo" (length-averaged log-probs)
    c.sft_coef = 0.0  # + sft_coef x next-token NLL of the chosen responses (RPO; keeps a from-scratch model on format)
    c.seed = 0
    c.batch_size = 16  # pairs per update
    c.total_updates = 200
    c.lr = 1e-3
    c.max_grad_norm = 1.0
    c.weight_decay = 0.0
    c.warmup_updates = 10
    c.anneal_lr = True
    c.eval_episodes = 0  # greedy episodes of env_name's held-out split after training (0 = skip)
    # fsdp: shard the frozen base's weights over this many devices (train_base=False), as in lm_rl_defaults
    c.mesh = ml_collections.ConfigDict({"num_devices": 0, "fsdp": 1})
    c.stop = stop_defaults("max_param_norm_growth")  # no approx_kl / value_loss to bound (config/common.py)
    c.run = copy.deepcopy(rl.run)
    c.run.out_dir = "runs/dpo"
    del c.run.transcripts_every, c.run.transcript_episodes  # no sampled episodes to show (lm_rl's)
    c.resume = ""
    c.resume_force = False  # True: resume even when this config differs from the run's config.json
    return c


def parse_players(value: str) -> list[tuple[str, float]]:
    """"teacher:0.0,policy" -> [("teacher", 0.0), ("policy", 0.0)]; ValueError on anything else."""
    players = []
    for item in str(value).split(","):
        kind, _, noise = item.strip().partition(":")
        if kind == "policy" and not noise:
            players.append(("policy", 0.0))
        elif kind == "teacher":
            p = float(noise or 0.0)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"teacher noise must be in [0, 1], got {p}")
            players.append(("teacher", p))
        else:
            raise ValueError(f"unknown player {item.strip()!r}; use 'teacher:P' (P in [0, 1]) or 'policy'")
    if len(players) < 2:
        raise ValueError(f"a pair needs at least two players, got {len(players)}")
    return players


def validate_dpo(config: ml_collections.ConfigDict) -> None:
    """Start-up checks; the pairs file itself is checked line by line when it is loaded (train/dpo.py)."""
    check_keys(config, dpo_defaults())
    check_env_name(config)
    _require(config.source in ("pairs", "game"), "source", f"must be 'pairs' or 'game', got {config.source!r}")
    if config.source == "pairs":
        _require(bool(config.pairs_path), "pairs_path",
                 "source='pairs' needs a JSONL file of {\"prompt\", \"chosen\", \"rejected\"} lines")
        _require(os.path.isfile(config.pairs_path), "pairs_path",
                 f"{config.pairs_path!r} is not a file; pass the path of a JSONL preference file")
        _require(isinstance(config.max_length, int) and config.max_length > 1, "max_length",
                 f"must be an integer > 1, got {config.max_length!r}")
    else:
        try:
            players = parse_players(config.players)
        except ValueError as err:
            raise ConfigError(f"config.players: {err}") from None
        _require(config.env_name in SCRIPTS or all(kind == "policy" for kind, _ in players), "players",
                 f"no scripted teacher for {config.env_name!r} (teachers: {sorted(SCRIPTS)}); use 'policy' players")
    check_positive_ints(config, ("batch_size", "total_updates", "num_turns"))
    _require(config.loss_type in ("sigmoid", "ipo"), "loss_type", f"must be 'sigmoid' or 'ipo', got {config.loss_type!r}")
    check_positive(config, ("beta",))
    _require(0.0 <= float(config.label_smoothing) < 0.5, "label_smoothing", f"must be in [0, 0.5), got {config.label_smoothing}")
    _require(config.loss_type == "sigmoid" or float(config.label_smoothing) == 0.0, "label_smoothing",
             "only the sigmoid loss has label smoothing; set it to 0 for ipo")
    check_positive(config, ("lr", "max_grad_norm"))
    check_non_negative(config, ("weight_decay", "sft_coef"))
    check_eval_episodes(config)
    check_mesh(config, "batch_size")
    check_fsdp(config)
    check_run(config)
    check_stop(config)
    check_model_checkpoint(config)
