"""Guess the number: one LM agent finds a secret in 0..1023 within 10 turns from "too high" / "too low" answers.

Seat: one guesser, learning. Default: GRPO over groups of 8 games sharing a secret, lr 5e-4, 100 updates x 16
games, LoRA adapters on configs/sft_guess_number.py's model (binary-search teacher, char tokenizer), then
greedy evaluation on the 205 held-out secrets (runs/guess_number/eval.json):

    .venv/bin/python experiments/train.py --config=configs/sft_guess_number.py    # -> runs/sft_guess_number/model
    .venv/bin/python experiments/train.py --config=configs/guess_number.py

Measured (seed 0, 2 CPU cores shared with other jobs): held-out greedy success 97.6% (200/205) for the SFT model,
97.1% (199/205, mean 8.96 turns) after 100 GRPO updates (20 min); sampled success 0.6-1.0 per update. The SFT
warm start does the work; GRPO holds it.

`:scratch`: RL alone from the random tiny model. Every reply is one of the 1024 `Guess: N` (`policy.actions=
"constrained"`, word tokenizer); PPO with a value head, lr 1e-3 annealed, entropy bonus 0.01, 1500 updates x 32:

    .venv/bin/python experiments/train.py --config=configs/guess_number.py:scratch

Measured (seed 0, 2 CPU cores, ~6 min): flat, sampled success 0.74% (updates 1-250) -> 0.91% (1251-1500), about
a uniform guesser's 1%; held-out greedy 0.49%. A win needs bisection, which a random policy almost never plays;
the dense reward `--config.env_kwargs.info_bonus=1.0` (the bits each guess removes) stays flat too, since
whole-word numbers are 1024 unrelated tokens. Use the SFT recipe.
Options: `--config.model.checkpoint=<HF folder> --config.tokenizer=<its tokenizer folder>` (another base),
`--config.lr`, `--config.total_episodes`, `--config.eval_episodes`.
"""

from jaxmarl_llm.train.config import lm_rl_defaults

CAPACITY_WORDS = 176  # prompt 70 + 10 x (a guess, 4 tokens + its answer) <= 170, in word tokens


def get_config(variant: str = ""):
    if variant not in ("", "scratch"):
        raise ValueError(f"configs/guess_number.py:{variant}: the variant is 'scratch' (RL from a random model) or none")
    c = lm_rl_defaults()
    c.env_name = "text/guess_number"
    c.env_kwargs = {"capacity": 384, "max_action_tokens": 12}  # 10 well-formed turns fit in 366 tokens
    c.model.checkpoint = "runs/sft_guess_number/model"
    c.algo = "grpo"
    c.num_turns = 10
    c.num_envs = 16
    c.group_size = 8
    c.total_episodes = 16 * 100
    c.lr = 5e-4
    c.eval_episodes = 205  # every held-out secret once, greedy
    c.run.out_dir = "runs/guess_number"
    if variant == "scratch":
        from_scratch(c)
    return c


def from_scratch(c) -> None:
    """`:scratch`: RL alone from the random tiny model (see the docstring): every reply a number in range."""
    c.model.checkpoint = ""
    c.tokenizer = "word"  # `Guess: 517` is a few tokens, the number one of them: one choice among 1024
    c.policy.actions = "constrained"
    c.env_kwargs = {"capacity": CAPACITY_WORDS, "max_action_tokens": 8, "info_bonus": 0.0}
    # tic-tac-toe's from-scratch recipe: PPO with a value head (credit per guess), lr 1e-3 annealed, entropy bonus
    c.algo, c.group_size = "ppo", 1
    c.lr, c.anneal_lr, c.ent_coef, c.critic.lr, c.kl_coef = 1e-3, True, 0.01, 1e-2, 0.0
    c.num_envs = 32
    c.total_episodes = 32 * 1500
    c.run.out_dir = "runs/guess_number_scratch"
