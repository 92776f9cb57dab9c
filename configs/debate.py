"""Debate: two LM debaters argue a motion (31 topics) for and against over 2 rounds; a judge picks the winner. GRPO.

Seats: debater A (for, speaks first) and debater B (against) learn one shared adapter (the stance is in each
prompt: self-play). Rewards at the end: winner +1, loser -0.5, draw or unreadable verdict 0. GRPO over groups of
8 debates sharing the motion (A's samples compared with A's, B's with B's). Tiny random model, character
tokenizer, sized for 2 CPU cores. The judge:
  * default (`:rule`): the env's rule, the debater who used more distinct argument markers
    (data/argument_markers.txt) wins; cheap and easy to game (expect keyword stuffing);
  * `:lm`: agent 2, the bare base model (adapters off, never trained), reads the debate, replies `Winner: A|B`;
  * `:trained_judge`: agent 2 is configs/sft_debate.py's model, taught to name the rule's winner; every seat is
    restricted to its role's replies (`policy.actions="constrained"`: the canned arguments, or the two verdicts).

    .venv/bin/python experiments/train.py --config=configs/debate.py          # or :lm
    .venv/bin/python experiments/train.py --config=configs/sft_debate.py      # the judge -> runs/sft_debate_judge/model
    .venv/bin/python experiments/train.py --config=configs/debate.py:trained_judge [--config.scripted_agents=1:random]

A random tiny model writes no marker and no verdict (every debate a draw, no signal): `:rule` and `:lm` learn
from a real checkpoint; `:trained_judge` learns from scratch.
Measured (`:trained_judge`, seed 0, 2 CPU cores shared with other jobs): the judge agrees with the rule on 99-100%
of RL's debates; A against a random B (150 updates, ~1 min): A's win rate 0.63 -> 0.97; self-play: markers per
speech 2.16 -> 2.99 (3.0 is the best), then rule draws, which the judge (it has no draw verdict) gives to B.
Metrics: `judge_agreement`, `markers_per_speech` (random arguments: ~1.7-2.0), `won_rate_agent0/1`.
Options: `--config.model.checkpoint=/path/to/hf_folder --config.tokenizer=/path/to/hf_folder` (rank-16 adapters;
raise `env_kwargs.max_action_tokens` to 96-160 and `env_kwargs.capacity` to 1536; with `:lm` it also judges);
`--config.lr` (`:trained_judge` 3e-3: at 1e-2 the policy turns deterministic and loses its early gains).
"""

from jaxmarl_llm.train.config import lm_rl_defaults

VARIANTS = ("", "rule", "lm", "trained_judge")


def get_config(variant: str = ""):
    if variant not in VARIANTS:
        raise ValueError(f"configs/debate.py:{variant}: the variant is 'rule' (default), 'lm' or 'trained_judge'")
    c = lm_rl_defaults()
    c.env_name = "text/debate"
    rounds = 2
    c.env_kwargs = {"judge": "rule", "rounds": rounds, "capacity": 576, "max_action_tokens": 72}
    c.algo = "grpo"
    c.share_policy = True
    c.num_turns = 2 * rounds  # A, B, A, B
    if variant in ("lm", "trained_judge"):
        c.env_kwargs["judge"] = "lm"
        c.frozen_agents = (2,)  # the judge: the bare base model, never trained
        c.num_turns = 2 * rounds + 1  # ... then the verdict
    c.num_envs = 16
    c.group_size = 8
    c.lr = 1e-3
    c.total_episodes = 16 * 100
    c.run.out_dir = "runs/debate" + (f"_{variant}" if variant in ("lm", "trained_judge") else "")
    c.run.updates_per_chunk = 5
    if variant == "trained_judge":
        trained_judge(c)
    return c


def trained_judge(c) -> None:
    """`:trained_judge`: the debaters learn by RL in front of an SFT-trained frozen judge (see the docstring)."""
    c.model.checkpoint = "runs/sft_debate_judge/model"  # configs/sft_debate.py: the judge, also the debaters' base
    c.tokenizer = "word"  # that model's: built from the same env texts, the same ids
    c.env_kwargs.update({"capacity": 224, "max_action_tokens": 26})
    c.policy.actions = "constrained"  # debaters: the canned arguments; the judge: `Winner: A` / `Winner: B`
    c.kl_coef = 0.0  # the base never learnt to debate: nothing there worth staying near
    c.lr = 3e-3  # at 1e-2 the policy turns deterministic and loses its early gains
    c.total_episodes = 16 * 150
