"""The two stages of a free-text recipe from a format-only warm start (configs/free_*.py), one protocol for every
game: stage 1 (`:format`, sft) teaches a random tiny model the reply format from a uniformly random legal player's
transcripts (every move a target, so the format and no skill); stage 2 (lm_rl) is PPO in free text on that
model's adapters. A config sets its game and what differs (rewards, opponents, exploration) on what this returns.
"""

from __future__ import annotations

import ml_collections

from jaxmarl_llm.tokenizers import GAMES_BPE
from jaxmarl_llm.train.config.lm_rl import lm_rl_defaults
from jaxmarl_llm.train.config.sft import sft_defaults


def free_text_defaults(variant: str, name: str, env_name: str, env_kwargs: dict, model: dict, num_turns: int,
                       format_updates: int, rl_updates: int) -> ml_collections.ConfigDict:
    """configs/`name`.py[:`variant`]: "format" (stage 1, written to runs/`name`_format/model) or "" (stage 2, from
    that model, to runs/`name`), the games' BPE tokenizer, `env_kwargs` and `model` sizes for both stages."""
    if variant not in ("", "format"):
        raise ValueError(f"configs/{name}.py:{variant}: the variant is 'format' (stage 1, SFT) or none (RL)")
    c = sft_defaults() if variant == "format" else lm_rl_defaults()
    c.env_name = env_name
    c.tokenizer = GAMES_BPE
    c.env_kwargs = dict(env_kwargs)
    c.model.update(model)
    c.num_turns = num_turns
    if variant == "format":
        c.teacher = "random"  # a uniformly random legal player's moves, every one a target
        c.train_base = True
        c.num_envs = 16
        c.total_episodes = 16 * format_updates
        c.lr = 3e-3
        c.run.out_dir = f"runs/{name}_format"
        c.run.updates_per_chunk = 25
        return c
    c.model.checkpoint = f"runs/{name}_format/model"
    c.policy.actions = "free"
    c.algo, c.group_size = "ppo", 1  # a value per move: credit to the move, not the whole game
    c.lr, c.anneal_lr = 1e-3, True
    c.critic.lr = 1e-2
    c.num_envs = 32
    c.total_episodes = 32 * rl_updates
    c.run.out_dir = f"runs/{name}"
    c.run.updates_per_chunk = 10
    return c
