"""One entry point per trainer kind, chosen by `config.trainer`; used by experiments/*.py."""

from __future__ import annotations

import json
import os

from jaxmarl_llm.train import dpo, lm_rl, mlp_ppo, sft
from jaxmarl_llm.train.config import ConfigError, validate_dpo, validate_lm_rl, validate_mlp_ppo, validate_sft
from jaxmarl_llm.train.runner import run_training

TRAINERS = ("mlp_ppo", "lm_rl", "sft", "dpo")


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
    if kind == "sft":
        validate_sft(config)
        trainer = sft.make_train(config)
        headline = "episode_return" if config.get("source", "teacher") == "policy" else "move_accuracy"
        return trainer, lm_rl.sharded_chunk, config.num_envs, headline
    if kind == "dpo":
        validate_dpo(config)
        trainer = dpo.make_train(config)
        return trainer, lm_rl.sharded_chunk, config.batch_size, "reward_margin"  # env_steps counts pairs
    raise ConfigError(f"config.trainer: unknown trainer {kind!r}; choose one of {TRAINERS}")


def train_from_config(config):
    trainer, chunk_fn, steps, headline = build(config)
    result = run_training(config, trainer, chunk_fn, steps, headline)
    return after_training(config, trainer, result)


def after_training(config, trainer, result: dict) -> dict:
    """SFT / DPO: write the model to <out_dir>/model (DPO with LoRA: also the PEFT adapter to <out_dir>/adapter).
    LM runs with eval_episodes > 0: greedy held-out results."""
    kind = config.get("trainer", "mlp_ppo")
    if kind == "sft":
        result["model_dir"] = trainer.export(result["state"], sft.model_dir(result["out_dir"]))
        print(f"model written to {result['model_dir']} (RL from it: --config.model.checkpoint={result['model_dir']})")
    if kind == "dpo":
        result["model_dir"] = trainer.export(result["state"], dpo.model_dir(result["out_dir"]))
        result["adapter_dir"] = trainer.export_adapter(result["state"], dpo.adapter_dir(result["out_dir"]))
        print(f"model written to {result['model_dir']}" +
              (f", PEFT adapter to {result['adapter_dir']}" if result["adapter_dir"] else ""))
    if kind in ("lm_rl", "sft", "dpo") and config.get("eval_episodes", 0) > 0:
        from jaxmarl_llm.train.evaluate import evaluate_trainer

        result["eval"] = evaluate_trainer(config, trainer, result["state"])
        with open(os.path.join(result["out_dir"], "eval.json"), "w") as f:
            json.dump(result["eval"], f, indent=2)
        print("held-out greedy eval:", {k: round(v, 4) for k, v in result["eval"].items()})
    return result
