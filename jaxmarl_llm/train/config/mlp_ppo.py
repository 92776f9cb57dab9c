"""Schema and start-up checks of the MLP PPO trainer (train/mlp_ppo.py): IPPO / MAPPO on MPE."""

from __future__ import annotations

import ml_collections

from jaxmarl_llm.envs import registry
from jaxmarl_llm.train.config.common import (ConfigError, _require, check_env_name, check_keys, check_mesh,
                                             check_positive, check_positive_ints, check_run, check_stop,
                                             stop_defaults, wandb_defaults)


def mlp_ppo_defaults() -> ml_collections.ConfigDict:
    """JaxMARL's IPPO-FF hyper-parameters for MPE, plus our run settings."""
    c = ml_collections.ConfigDict()
    c.trainer = "mlp_ppo"
    c.env_name = "mpe/simple_spread"
    c.env_kwargs = ml_collections.ConfigDict(
        {"num_agents": 3, "local_ratio": 0.5, "max_cycles": 25, "continuous_actions": False}
    )
    # the critic (the key the LM trainer uses too): "ippo" = one on each agent's observation, "mappo" = one
    # centralized critic on the world state
    c.critic = ml_collections.ConfigDict({"kind": "ippo"})
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
            "keep_best": "",  # a metric: the state at its best chunk end also kept, in out_dir/best/
            "keep_best_mode": "max",  # or "min"
            "overwrite": False,  # True: a fresh run deletes the earlier run's checkpoints and metrics in out_dir
            "tensorboard": True,
            "plot": True,
            "progress": True,
            "title": "",  # the plots' title (the train command sets the config file and variant)
            "references": {},  # {label: value}: dashed lines on the learning curve
            **wandb_defaults(),  # run.wandb=True: also to Weights & Biases (config/common.py wandb_defaults)
        }
    )
    c.stop = stop_defaults()  # divergence bounds, 0 = off (config/common.py STOP_METRICS; run/runner.py)
    c.resume = ""  # "" (start fresh), "True" (continue run.out_dir), or a run directory to continue
    c.resume_force = False  # True: resume even when this config differs from the run's config.json
    return c


def validate_mlp_ppo(config: ml_collections.ConfigDict) -> None:
    """Raise ConfigError naming the first key that cannot work."""
    check_keys(config, mlp_ppo_defaults())
    check_env_name(config)
    try:
        registry.make(config.env_name, **config.env_kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config.env_kwargs: {err}") from None
    _require(config.critic.kind in ("ippo", "mappo"), "critic.kind",
             f"must be 'ippo' or 'mappo', got {config.critic.kind!r}")
    check_positive_ints(config, ("num_envs", "num_steps", "update_epochs", "num_minibatches"))
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
    check_positive(config, ("lr", "clip_eps", "max_grad_norm"))
    for key in ("gamma", "gae_lambda"):
        _require(0.0 <= float(config[key]) <= 1.0, key, f"must be in [0, 1], got {config[key]}")
    _require(len(config.network.hidden) > 0, "network.hidden", "needs at least one hidden layer size")
    _require(config.network.activation in ("tanh", "relu", "gelu"), "network.activation", "must be tanh, relu or gelu")
    check_run(config)
    check_stop(config)
    check_mesh(config, "num_envs", why=lambda n_dev: (
        f"{config.num_envs} envs do not split evenly over {n_dev} devices; use a multiple of {n_dev} or set mesh.num_devices"))
