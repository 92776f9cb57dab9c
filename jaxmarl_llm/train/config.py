"""Config schema and start-up validation for the MLP PPO trainer.

`configs/*.py` start from `mlp_ppo_defaults()` and change what they need. Every
check here runs before anything compiles, and every message names the key and
says what to do, so a typo on the command line costs seconds, not a run.
"""

from __future__ import annotations

import inspect
import math

import jax
import ml_collections

from jaxmarl_llm.envs import registry


def mlp_ppo_defaults() -> ml_collections.ConfigDict:
    """JaxMARL's IPPO-FF hyper-parameters for MPE, plus our run settings."""
    c = ml_collections.ConfigDict()
    c.trainer = "mlp_ppo"
    c.env_name = "mpe/simple_spread"
    c.env_kwargs = ml_collections.ConfigDict(
        {"num_agents": 3, "local_ratio": 0.5, "max_cycles": 25, "continuous_actions": False}
    )
    c.algo = "ippo"  # "ippo": a critic on each agent's observation; "mappo": one critic on the world state
    c.share_params = True  # one net for all agents, or per-agent nets stacked on the agent axis
    c.seed = 0
    c.num_envs = 16
    c.num_steps = 128
    c.total_timesteps = 2_000_000
    c.update_epochs = 4
    c.num_minibatches = 4
    c.lr = 2.5e-4
    c.anneal_lr = True
    c.clip_eps = 0.2
    c.ent_coef = 0.01
    c.vf_coef = 0.5
    c.gamma = 0.99
    c.gae_lambda = 0.95
    c.max_grad_norm = 0.5
    c.network = ml_collections.ConfigDict({"hidden": (64, 64), "activation": "tanh"})
    c.mesh = ml_collections.ConfigDict({"num_devices": 0})  # 0: every visible device
    c.run = ml_collections.ConfigDict(
        {
            "out_dir": "runs/spread",
            "updates_per_chunk": 10,  # updates compiled into one call; logging happens between calls
            "checkpoint_every": 5,  # chunks between checkpoints (and always at the end)
            "keep_checkpoints": 2,
            "tensorboard": True,
            "plot": True,
            "progress": True,
        }
    )
    c.resume = ""  # "" (start fresh), "True" (continue run.out_dir), or a run directory to continue
    return c


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""


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


def validate_mlp_ppo(config: ml_collections.ConfigDict) -> None:
    """Raise ConfigError naming the first key that cannot work."""
    check_keys(config, mlp_ppo_defaults())
    _require(config.env_name in registry.registered(), "env_name", f"unknown env; choose one of {registry.registered()}")
    try:
        registry.make(config.env_name, **config.env_kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config.env_kwargs: {err}") from None
    _require(config.algo in ("ippo", "mappo"), "algo", f"must be 'ippo' or 'mappo', got {config.algo!r}")
    for key in ("num_envs", "num_steps", "update_epochs", "num_minibatches"):
        _require(isinstance(config[key], int) and config[key] > 0, key, f"must be a positive integer, got {config[key]!r}")
    _require(
        config.num_steps % config.num_minibatches == 0,
        "num_minibatches",
        f"must divide num_steps ({config.num_steps}): each minibatch takes num_steps/num_minibatches steps of every env",
    )
    _require(
        config.total_timesteps >= config.num_envs * config.num_steps,
        "total_timesteps",
        f"{config.total_timesteps} is less than one update (num_envs * num_steps = {config.num_envs * config.num_steps})",
    )
    for key in ("lr", "clip_eps", "max_grad_norm"):
        _require(float(config[key]) > 0, key, f"must be > 0, got {config[key]}")
    for key in ("gamma", "gae_lambda"):
        _require(0.0 <= float(config[key]) <= 1.0, key, f"must be in [0, 1], got {config[key]}")
    _require(len(config.network.hidden) > 0, "network.hidden", "needs at least one hidden layer size")
    _require(config.network.activation in ("tanh", "relu", "gelu"), "network.activation", "must be tanh, relu or gelu")
    _require(config.run.updates_per_chunk > 0, "run.updates_per_chunk", "must be a positive integer")

    n_dev = config.mesh.num_devices or len(jax.devices())
    _require(n_dev <= len(jax.devices()), "mesh.num_devices", f"{n_dev} requested, {len(jax.devices())} visible")
    _require(
        config.num_envs % n_dev == 0,
        "num_envs",
        f"{config.num_envs} envs do not split evenly over {n_dev} devices; use a multiple of {n_dev} or set mesh.num_devices",
    )


def lm_rl_defaults() -> ml_collections.ConfigDict:
    """LM agents on a token game: a tiny random model by default, a checkpoint folder when given."""
    c = ml_collections.ConfigDict()
    c.trainer = "lm_rl"
    c.env_name = "text/guess_number"
    c.env_kwargs = ml_collections.ConfigDict({})
    c.tokenizer = "char"  # "char" / "word" (built-in; "word" is built from the env's texts) or a local HF tokenizer folder
    c.model = ml_collections.ConfigDict(
        {
            "checkpoint": "",  # a local HF folder (config.json + safetensors); "" = random tiny model below
            "dtype": "float32",
            "family": "qwen3",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_layers": 2,
            "num_heads": 4,
            "num_kv_heads": 2,
            "head_dim": 16,
            "max_position_embeddings": 4096,
            "init_seed": 0,
            "init_std": 0.1,
        }
    )
    c.lora = ml_collections.ConfigDict({"rank": 16, "alpha": 32.0, "targets": ("q", "k", "v", "o", "gate", "up", "down")})
    c.sampling = ml_collections.ConfigDict({"temperature": 1.0, "top_k": 0, "top_p": 1.0})
    # incremental: on token games each seat keeps its KV cache across turns (reads only new tokens, `chunk`
    # at a time) and an episode is scored in one forward over its final transcript; False re-reads the whole
    # transcript every turn (the reference path; envs whose observations are not growing transcripts use it)
    # (the loss forward runs at the narrowest of min_score_width x 1, 2, 4, ... or the capacity that fits)
    c.rollout = ml_collections.ConfigDict({"incremental": True, "chunk": 64, "min_score_width": 128})
    c.algo = "grpo"  # "ppo" (value head + GAE over turns), "grpo", "rloo"
    # PPO's critic: "ippo" = a value head on each seat's own adapter trunk; "mappo" = one centralized critic,
    # an MLP (hidden units below) over every seat's transcript summary (policies/central_critic.py)
    c.critic = ml_collections.ConfigDict({"kind": "ippo", "hidden": 256})
    # PPO's credit: "turn" = GAE over the seat's turns, every token of a turn gets its turn's advantage;
    # "token" = GAE over generated tokens (turn reward on the turn's last token, a value per token)
    c.credit = "turn"
    c.clip_value = False  # PPO value clipping (by clip_eps) around the values the advantages used
    c.share_policy = True  # one adapter for every learning agent, or one per agent
    c.frozen_agents = ()  # agent indices played by the bare base model and never trained
    # agent index -> the game's built-in player ("random" | "minimax"), e.g. "1:minimax"; never trained
    c.scripted_agents = ""
    # self-play against P frozen snapshots of the learner (0 = off); the oldest is replaced every K updates
    c.opponent_pool = ml_collections.ConfigDict({"size": 0, "refresh_every": 10})
    c.seed = 0
    c.num_envs = 16  # episodes per update
    c.group_size = 4  # envs sharing a seed (GRPO/RLOO groups); 1 for PPO
    c.num_turns = 10  # turns per episode in the rollout (>= the game's turn limit)
    c.total_episodes = 1600
    c.update_epochs = 1
    c.num_minibatches = 1
    # gradient accumulation: each minibatch's forward/backward runs over this many slices of its episodes
    # in turn (same gradient, activation memory / num_microbatches; costs one extra forward)
    c.num_microbatches = 1
    c.lr = 1e-3
    c.clip_eps = 0.2
    c.ent_coef = 0.0
    c.vf_coef = 0.5
    c.kl_coef = 0.0
    c.kl_estimator = "k3"
    c.gamma = 1.0
    c.gae_lambda = 0.95
    c.max_grad_norm = 1.0
    c.grpo_normalize_std = True  # False: Dr.GRPO advantages
    c.grpo_aggregation = "sequence"  # "token", "sequence", "sequence_sum", "constant" (Dr.GRPO)
    c.eval_episodes = 0  # greedy episodes on the held-out split after training (0 = skip; train/evaluate.py)
    c.mesh = ml_collections.ConfigDict({"num_devices": 0})
    c.run = ml_collections.ConfigDict(
        {"out_dir": "runs/lm", "updates_per_chunk": 5, "checkpoint_every": 5, "keep_checkpoints": 2,
         "tensorboard": True, "plot": True, "progress": True}
    )
    c.resume = ""
    return c


def validate_lm_rl(config: ml_collections.ConfigDict) -> None:
    check_keys(config, lm_rl_defaults())
    _require(config.env_name in registry.registered(), "env_name", f"unknown env; choose one of {registry.registered()}")
    _require(config.algo in ("ppo", "grpo", "rloo"), "algo", f"must be ppo, grpo or rloo, got {config.algo!r}")
    for key in ("num_envs", "num_turns", "update_epochs", "num_minibatches", "num_microbatches", "group_size",
                "total_episodes"):
        _require(isinstance(config[key], int) and config[key] > 0, key, f"must be a positive integer, got {config[key]!r}")
    for key in ("chunk", "min_score_width"):
        _require(isinstance(config.rollout[key], int) and config.rollout[key] > 0, f"rollout.{key}",
                 f"must be a positive integer, got {config.rollout[key]!r}")
    _require(config.algo == "ppo" or config.group_size > 1, "group_size", f"{config.algo} needs groups of at least 2")
    _require(config.critic.kind in ("ippo", "mappo"), "critic.kind", f"must be 'ippo' or 'mappo', got {config.critic.kind!r}")
    _require(config.critic.kind == "ippo" or config.algo == "ppo", "critic.kind",
             f"a centralized critic is for algo='ppo' ({config.algo} has no critic)")
    _require(config.credit in ("turn", "token"), "credit", f"must be 'turn' or 'token', got {config.credit!r}")
    _require(config.credit == "turn" or (config.algo == "ppo" and config.critic.kind == "ippo"), "credit",
             "token-level credit is PPO with per-seat value heads (algo='ppo', critic.kind='ippo')")
    _require(isinstance(config.critic.hidden, int) and config.critic.hidden > 0, "critic.hidden",
             f"must be a positive integer, got {config.critic.hidden!r}")
    n_dev = config.mesh.num_devices or len(jax.devices())
    _require(n_dev <= len(jax.devices()), "mesh.num_devices", f"{n_dev} requested, {len(jax.devices())} visible")
    _require(config.num_envs % (n_dev * config.group_size) == 0, "num_envs",
             f"{config.num_envs} must be a multiple of num_devices x group_size = {n_dev} x {config.group_size}")
    _require(config.total_episodes >= config.num_envs, "total_episodes", "is less than one update (num_envs episodes)")
    _require(config.kl_estimator in ("k1", "k2", "k3"), "kl_estimator", "must be k1, k2 or k3")
    try:
        from jaxmarl_llm.train.lm_rl import parse_agent_map

        kinds = parse_agent_map(config.scripted_agents)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config.scripted_agents: {err}; write e.g. '1:minimax'") from None
    for agent, kind in kinds.items():
        _require(kind in ("random", "minimax"), "scripted_agents", f"agent {agent}: kind must be random or minimax, got {kind!r}")
    pool = config.opponent_pool
    _require(isinstance(pool.size, int) and pool.size >= 0, "opponent_pool.size", f"must be an integer >= 0, got {pool.size!r}")
    _require(isinstance(pool.refresh_every, int) and pool.refresh_every > 0, "opponent_pool.refresh_every",
             f"must be a positive integer, got {pool.refresh_every!r}")
    _require(pool.size == 0 or config.share_policy, "opponent_pool.size",
             "a snapshot pool is self-play of one shared policy; set share_policy=True")
    if config.model.checkpoint:
        import os

        _require(os.path.isdir(config.model.checkpoint), "model.checkpoint",
                 f"{config.model.checkpoint!r} is not a folder; pass a local Hugging Face model folder")


def sft_defaults() -> ml_collections.ConfigDict:
    """SFT (train/sft.py) on a scripted teacher's, a file's or the policy's own transcripts; groups as in lm_rl."""
    import copy

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
    # where each update's rows come from: "teacher" = the scripted teacher plays env_name (train/scripted.py);
    # "file" = rows drawn from data_path; "policy" = the current model plays env_name and its (episode, seat)
    # transcripts with return >= min_return are the targets (rejection-sampling fine-tuning / expert iteration)
    c.source = "teacher"
    c.data_path = ""  # source="file": JSONL, one {"prompt", "completion"} (or {"turns": [...]}) object per line
    c.max_length = 0  # source="file": tokens per row (with the eos after each move); 0 = the env's capacity
    c.min_return = 1.0  # source="policy": the episode return a transcript needs to be kept (1 = solved in most games)
    c.script_noise = 0.0  # chance per turn the teacher plays a random move (not a target) to show recovery
    c.script_kwargs = ml_collections.ConfigDict({})  # the teacher's own options (train/scripted.py)
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
    c.mesh = ml_collections.ConfigDict({"num_devices": 0})
    c.run = copy.deepcopy(rl.run)
    c.run.out_dir = "runs/sft"
    c.resume = ""
    return c


def validate_sft(config: ml_collections.ConfigDict) -> None:
    from jaxmarl_llm.train.scripted import SCRIPTS

    check_keys(config, sft_defaults())
    _require(config.env_name in registry.registered(), "env_name", f"unknown env; choose one of {registry.registered()}")
    _require(config.source in ("teacher", "file", "policy"), "source",
             f"must be 'teacher', 'file' or 'policy', got {config.source!r}")
    if config.source == "teacher":
        _require(config.env_name in SCRIPTS, "env_name",
                 f"no scripted teacher for {config.env_name!r}; SFT can use {sorted(SCRIPTS)}, or set "
                 "source='file' (a JSONL of transcripts) or source='policy' (the model's own best episodes)")
    for key in ("num_envs", "num_turns", "total_episodes"):
        _require(isinstance(config[key], int) and config[key] > 0, key, f"must be a positive integer, got {config[key]!r}")
    _require(config.total_episodes >= config.num_envs, "total_episodes", "is less than one update (num_envs episodes)")
    _require(0.0 <= float(config.script_noise) <= 1.0, "script_noise", f"must be in [0, 1], got {config.script_noise}")
    if config.source == "teacher":
        try:
            inspect.signature(SCRIPTS[config.env_name]).bind(None, **config.script_kwargs)
        except TypeError as err:
            raise ConfigError(f"config.script_kwargs: {err} (the teacher is scripted.{SCRIPTS[config.env_name].__name__})") from None
    if config.source == "file":  # the file itself is checked line by line when it is loaded (train/sft.py)
        import os

        _require(bool(config.data_path), "data_path",
                 "source='file' needs a JSONL file of {\"prompt\", \"completion\"} lines")
        _require(os.path.isfile(config.data_path), "data_path",
                 f"{config.data_path!r} is not a file; pass the path of a JSONL transcript file")
        _require(isinstance(config.max_length, int) and (config.max_length == 0 or config.max_length > 1), "max_length",
                 f"must be 0 (the env's capacity) or an integer > 1, got {config.max_length!r}")
    if config.source == "policy":
        _require(isinstance(config.min_return, (int, float)) and not math.isnan(config.min_return), "min_return",
                 f"must be a number, got {config.min_return!r}")
    for key in ("lr", "max_grad_norm"):
        _require(float(config[key]) > 0, key, f"must be > 0, got {config[key]}")
    _require(float(config.weight_decay) >= 0, "weight_decay", f"must be >= 0, got {config.weight_decay}")
    _require(isinstance(config.eval_episodes, int) and config.eval_episodes >= 0, "eval_episodes",
             "must be a non-negative integer")
    n_dev = config.mesh.num_devices or len(jax.devices())
    _require(n_dev <= len(jax.devices()), "mesh.num_devices", f"{n_dev} requested, {len(jax.devices())} visible")
    _require(config.num_envs % n_dev == 0, "num_envs", f"{config.num_envs} must be a multiple of num_devices = {n_dev}")
    if config.model.checkpoint:
        import os

        _require(os.path.isdir(config.model.checkpoint), "model.checkpoint",
                 f"{config.model.checkpoint!r} is not a folder; pass a local Hugging Face model folder")


def dpo_defaults() -> ml_collections.ConfigDict:
    """DPO on preference pairs (train/dpo.py): from a JSONL file, or played in a token game each update."""
    import copy

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
    c.mesh = ml_collections.ConfigDict({"num_devices": 0})
    c.run = copy.deepcopy(rl.run)
    c.run.out_dir = "runs/dpo"
    c.resume = ""
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
    import os

    from jaxmarl_llm.train.scripted import SCRIPTS

    check_keys(config, dpo_defaults())
    _require(config.env_name in registry.registered(), "env_name", f"unknown env; choose one of {registry.registered()}")
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
    for key in ("batch_size", "total_updates", "num_turns"):
        _require(isinstance(config[key], int) and config[key] > 0, key, f"must be a positive integer, got {config[key]!r}")
    _require(config.loss_type in ("sigmoid", "ipo"), "loss_type", f"must be 'sigmoid' or 'ipo', got {config.loss_type!r}")
    _require(float(config.beta) > 0, "beta", f"must be > 0, got {config.beta}")
    _require(0.0 <= float(config.label_smoothing) < 0.5, "label_smoothing", f"must be in [0, 0.5), got {config.label_smoothing}")
    _require(config.loss_type == "sigmoid" or float(config.label_smoothing) == 0.0, "label_smoothing",
             "only the sigmoid loss has label smoothing; set it to 0 for ipo")
    for key in ("lr", "max_grad_norm"):
        _require(float(config[key]) > 0, key, f"must be > 0, got {config[key]}")
    _require(float(config.weight_decay) >= 0, "weight_decay", f"must be >= 0, got {config.weight_decay}")
    _require(float(config.sft_coef) >= 0, "sft_coef", f"must be >= 0, got {config.sft_coef}")
    _require(isinstance(config.eval_episodes, int) and config.eval_episodes >= 0, "eval_episodes",
             "must be a non-negative integer")
    n_dev = config.mesh.num_devices or len(jax.devices())
    _require(n_dev <= len(jax.devices()), "mesh.num_devices", f"{n_dev} requested, {len(jax.devices())} visible")
    _require(config.batch_size % n_dev == 0, "batch_size", f"{config.batch_size} must be a multiple of num_devices = {n_dev}")
    if config.model.checkpoint:
        _require(os.path.isdir(config.model.checkpoint), "model.checkpoint",
                 f"{config.model.checkpoint!r} is not a folder; pass a local Hugging Face model folder")
