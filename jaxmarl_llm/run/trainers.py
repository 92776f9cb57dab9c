"""The trainer registry: what `config.trainer` names, and every hook the entry points need of it.

    spec = TRAINERS[config.trainer]
    spec.validate(config)                        # ConfigError naming the first bad key
    trainer = spec.make_train(config)            # init / update / state_specs / num_updates / hparams
    chunk = sharded_chunk(trainer, mesh, K)      # one compiled chunk of K updates, the same for every trainer
    spec.steps_per_update(config), spec.headline(config)   # what the runner counts and plots
    spec.trainable(state)                        # the trained parameters (config.stop.max_param_norm_growth)
    spec.transcripts(config, trainer)            # decodes the episodes an update returns (transcripts.jsonl)
    result = spec.after_training(config, trainer, result)  # exports, held-out evaluation

Adding a trainer = its module (make_train), its config module (defaults + validator) and one line below.
experiments/*.py, run/entry.py and evaluation/evaluate.py never branch on the kind.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from typing import Any, Callable, NamedTuple

from jaxmarl_llm.evaluation.evaluate import SeatWeights, evaluate_trainer, shared_seat_weights, slot_seat_weights
from jaxmarl_llm.parallel import multihost
from jaxmarl_llm.train import dpo, lm_rl, mlp_ppo, sft
from jaxmarl_llm.train.config import validate_dpo, validate_lm_rl, validate_mlp_ppo, validate_sft
from jaxmarl_llm.train.lm import memory
from jaxmarl_llm.train.lm.episode_sample import episode_records


def _keep(config, trainer, result: dict) -> dict:
    return result


def _trainable(state) -> Any:
    """The LM trainers' trained parameters: LoRA adapters, value heads, critic (or the whole model, train_base)."""
    return state.trainable


class TrainerSpec(NamedTuple):
    """One trainer kind. Every hook takes the (validated) config; none of them compiles anything."""

    validate: Callable[[Any], None]  # validate(config): raise ConfigError naming the key
    make_train: Callable[[Any], Any]  # make_train(config) -> trainer (init, update, state_specs, hparams, ...)
    steps_per_update: Callable[[Any], int]  # env steps (LM: episodes, DPO: pairs) one update consumes
    headline: Callable[[Any], str]  # the metric the progress bar, the plot and a sweep's table show
    after_training: Callable[[Any, Any, dict], dict] = _keep  # (config, trainer, result) -> result + outputs
    # (trainer, state) -> SeatWeights: what each seat acts with in a held-out greedy evaluation (LM trainers)
    seat_weights: Callable[[Any, Any], SeatWeights] | None = None
    # runner state -> the pytree of trained parameters, whose global norm the runner bounds (config.stop)
    trainable: Callable[[Any], Any] = _trainable
    # (config, trainer) -> the run's memory plan per device ({entry: bytes}, the peak last); ConfigError at
    # start-up when it exceeds a device's memory
    check_memory: Callable[[Any, Any], dict] | None = None
    # (config, trainer) -> describe(update, episodes) -> records: the episodes an update returns beside its metrics,
    # decoded for the run's transcripts (run/transcript_log.py); None: the trainer shows none
    transcripts: Callable[[Any, Any], Callable[[int, dict], list[dict]] | None] | None = None


# ---- after-training hooks -----------------------------------------------------------------------


def heldout_eval(config, trainer, state, num_episodes: int | None = None) -> dict[str, float]:
    """Greedy results of a trained LM run's `state` on its env's held-out split (evaluation/evaluate.py). Under
    several processes every process calls it: the state is gathered from all of them, and with mesh.fsdp > 1 the
    games are played over the whole mesh."""
    weights = TRAINERS[config.get("trainer", "mlp_ppo")].seat_weights(trainer, multihost.to_host(state))
    return evaluate_trainer(config, trainer, weights, num_episodes)


def _eval_if_asked(config, trainer, result: dict) -> dict:
    """LM runs with eval_episodes > 0: greedy held-out results in result["eval"] and <out_dir>/eval.json (every
    process evaluates, the primary writes and prints)."""
    if config.get("eval_episodes", 0) > 0:
        result["eval"] = heldout_eval(config, trainer, result["state"])
        if multihost.primary():
            with open(os.path.join(result["out_dir"], "eval.json"), "w") as f:
                json.dump(result["eval"], f, indent=2)
            print("held-out greedy eval:", {k: round(v, 4) for k, v in result["eval"].items()})
    return result


# a Hugging Face tokenizer folder's files: an exported model carries its run's tokenizer, as a downloaded one does
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "chat_template.json")


def _with_tokenizer(config, model_dir: str) -> str:
    """Copy the run's tokenizer files (config.tokenizer a folder) beside the exported weights."""
    if os.path.isdir(config.tokenizer):
        for name in TOKENIZER_FILES:
            if os.path.exists(os.path.join(config.tokenizer, name)):
                shutil.copy(os.path.join(config.tokenizer, name), os.path.join(model_dir, name))
    return model_dir


def _export_sft(config, trainer, result: dict) -> dict:
    """The model (adapters merged) and its tokenizer to <out_dir>/model, ready for an RL run's model.checkpoint
    (by the primary process)."""
    if multihost.primary():
        result["model_dir"] = _with_tokenizer(config, trainer.export(result["state"], sft.model_dir(result["out_dir"])))
        print(f"model written to {result['model_dir']} (RL from it: --config.model.checkpoint={result['model_dir']})")
    return _eval_if_asked(config, trainer, result)


def _export_dpo(config, trainer, result: dict) -> dict:
    """The model to <out_dir>/model and, when only LoRA adapters trained, the PEFT adapter to <out_dir>/adapter
    (by the primary process)."""
    if multihost.primary():
        result["model_dir"] = _with_tokenizer(config, trainer.export(result["state"], dpo.model_dir(result["out_dir"])))
        result["adapter_dir"] = trainer.export_adapter(result["state"], dpo.adapter_dir(result["out_dir"]))
        print(f"model written to {result['model_dir']}" +
              (f", PEFT adapter to {result['adapter_dir']}" if result["adapter_dir"] else ""))
    return _eval_if_asked(config, trainer, result)


def _sft_headline(config) -> str:
    """source="policy" keeps the episodes it plays: their return is what improves; else the teacher's moves."""
    return "episode_return" if config.get("source", "teacher") == "policy" else "move_accuracy"


def _lm_headline(config) -> str:
    """MPE worlds: the team return (comparable with the MLP job's); games: the learners' mean episode return."""
    return "team_return" if config.env_name == "text/tokenized_mpe" else "episode_return"


def _lm_transcripts(config, trainer) -> Callable[[int, dict], list[dict]] | None:
    """LM RL: the sampled episodes' records (train/lm/episode_sample.py), when the run keeps some."""
    if not trainer.plan.transcript_episodes:
        return None
    whole = bool(getattr(trainer.env, "appends_actions", False))  # else the final transcript is the last observation
    return functools.partial(episode_records, trainer.plan, trainer.tokenizer, tuple(trainer.env.agents), whole)


# ---- the registry -------------------------------------------------------------------------------

TRAINERS: dict[str, TrainerSpec] = {
    "mlp_ppo": TrainerSpec(validate_mlp_ppo, mlp_ppo.make_train, lambda c: c.num_envs * c.num_steps,
                           lambda c: "team_return", trainable=lambda state: state.params),
    # env_steps: env steps the rollout scans (num_envs x num_turns; an episode that ends early counts them all)
    "lm_rl": TrainerSpec(validate_lm_rl, lm_rl.make_train, lambda c: c.num_envs * c.num_turns, _lm_headline,
                         _eval_if_asked, slot_seat_weights,
                         check_memory=lambda config, trainer: memory.check_fits(trainer, config),
                         transcripts=_lm_transcripts),
    "sft": TrainerSpec(validate_sft, sft.make_train, lambda c: c.num_envs, _sft_headline, _export_sft,
                       shared_seat_weights),
    # env_steps counts preference pairs
    "dpo": TrainerSpec(validate_dpo, dpo.make_train, lambda c: c.batch_size, lambda c: "reward_margin", _export_dpo,
                       shared_seat_weights),
}
