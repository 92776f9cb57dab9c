"""One entry point per trainer kind, chosen by `config.trainer`; used by experiments/*.py."""

from __future__ import annotations

from jaxmarl_llm.train import lm_rl, mlp_ppo
from jaxmarl_llm.train.config import ConfigError, validate_lm_rl, validate_mlp_ppo
from jaxmarl_llm.train.runner import run_training

TRAINERS = ("mlp_ppo", "lm_rl")


def build(config):
    """Validate `config` and return (trainer, chunk_fn, steps_per_update, headline metric)."""
    kind = config.get("trainer", "mlp_ppo")
    if kind == "mlp_ppo":
        validate_mlp_ppo(config)
        trainer = mlp_ppo.make_train(config)
        return trainer, mlp_ppo.sharded_chunk, config.num_envs * config.num_steps, "team_return"
    if kind == "lm_rl":
        validate_lm_rl(config)
        trainer = lm_rl.make_train(config)
        return trainer, lm_rl.sharded_chunk, config.num_envs, "episode_return"
    raise ConfigError(f"config.trainer: unknown trainer {kind!r}; choose one of {TRAINERS}")


def train_from_config(config):
    trainer, chunk_fn, steps, headline = build(config)
    return run_training(config, trainer, chunk_fn, steps, headline)
