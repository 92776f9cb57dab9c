"""Config schema and start-up validation for the MLP PPO trainer.

`configs/*.py` start from `mlp_ppo_defaults()` and change what they need. Every
check here runs before anything compiles, and every message names the key and
says what to do, so a typo on the command line costs seconds, not a run.
"""

from __future__ import annotations

import inspect

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
    c.tokenizer = "char"  # "char" (built-in) or a local Hugging Face tokenizer folder
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
    c.algo = "grpo"  # "ppo" (value head + GAE over turns), "grpo", "rloo"
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
    for key in ("num_envs", "num_turns", "update_epochs", "num_minibatches", "group_size", "total_episodes"):
        _require(isinstance(config[key], int) and config[key] > 0, key, f"must be a positive integer, got {config[key]!r}")
    _require(config.num_turns % config.num_minibatches == 0, "num_minibatches",
             f"must divide num_turns ({config.num_turns}): each minibatch takes a slice of every episode's turns")
    _require(config.algo == "ppo" or config.group_size > 1, "group_size", f"{config.algo} needs groups of at least 2")
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
    """SFT on scripted-teacher transcripts (train/sft.py): model, tokenizer and run groups as in lm_rl."""
    import copy

    rl = lm_rl_defaults()
    c = ml_collections.ConfigDict()
    c.trainer = "sft"
    c.env_name = "text/guess_number"
    c.env_kwargs = ml_collections.ConfigDict({})
    c.tokenizer = "char"
    c.model = copy.deepcopy(rl.model)
    c.lora = copy.deepcopy(rl.lora)
    c.sampling = copy.deepcopy(rl.sampling)  # only used by evaluation (which forces temperature 0)
    c.train_base = True  # every base weight (from scratch); False: LoRA adapters only, merged on export
    c.script_noise = 0.0  # chance per turn the teacher plays a random move (not a target) to show recovery
    c.script_kwargs = ml_collections.ConfigDict({})  # the teacher's own options (train/scripted.py)
    c.seed = 0
    c.num_envs = 32  # teacher episodes per update (fresh each update)
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
    _require(config.env_name in SCRIPTS, "env_name",
             f"no scripted teacher for {config.env_name!r}; SFT can use {sorted(SCRIPTS)}")
    for key in ("num_envs", "num_turns", "total_episodes"):
        _require(isinstance(config[key], int) and config[key] > 0, key, f"must be a positive integer, got {config[key]!r}")
    _require(config.total_episodes >= config.num_envs, "total_episodes", "is less than one update (num_envs episodes)")
    _require(0.0 <= float(config.script_noise) <= 1.0, "script_noise", f"must be in [0, 1], got {config.script_noise}")
    try:
        inspect.signature(SCRIPTS[config.env_name]).bind(None, **config.script_kwargs)
    except TypeError as err:
        raise ConfigError(f"config.script_kwargs: {err} (the teacher is scripted.{SCRIPTS[config.env_name].__name__})") from None
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
