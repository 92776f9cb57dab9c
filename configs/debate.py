"""Debate: two LM debaters argue a motion (31 topics) for and against over 2 rounds; a judge picks the winner.

Seats: debater A (for, speaks first) and debater B (against) learn, one shared
adapter (the stance is in each prompt: self-play of one policy). The judge is
  * the env's rule (default, `judge="rule"`): the debater who used more distinct
    argument markers ("because", "evidence", "for example", ... in
    data/argument_markers.txt) wins. Transparent and cheap, and easy to game:
    expect keyword stuffing, not better arguments; or
  * a frozen LM slot (`judge="lm"`): agent 2, the bare base model (adapters
    off, never trained), reads the whole debate and replies `Winner: A` or
    `Winner: B`. Select it with the variant string, which also sets the seats
    and the extra judging turn:
        python experiments/train.py --config=configs/debate.py:lm
Rewards at the end: winner +1, loser -0.5, draw (or an unreadable verdict) 0.

GRPO over groups of 8 debates that share the motion: the only reward is the
verdict at the end, an episode-level outcome, so group-relative returns are the
natural advantage (per seat: A's samples are compared with A's, B's with B's),
and no value head has to learn the worth of half a debate. Tiny random model
with the character tokenizer: sized for 2 CPU cores (72-token speeches: the env's
canned arguments fit; 576-token transcripts). `--config.model.checkpoint=/path/to/hf_folder
--config.tokenizer=/path/to/hf_folder` starts from a real checkpoint with
rank-16 adapters instead (raise `env_kwargs.max_action_tokens` to 96-160 and
`capacity` to 1536 there); with `:lm` that checkpoint is also the judge.

From scratch a random tiny model writes no marker word and no readable verdict,
every debate is a draw (0 for both) and GRPO gets no signal: this config runs
as is, but learning needs a warm start. Today that is a real checkpoint
(above). There is no scripted teacher for debate in train/scripted.py yet; one
that speaks the env's canned arguments (`Debate.random_action`) would give the
SFT-then-RL recipe of configs/guess_number.py for the rule judge.

`:trained_judge` (issue 17): the judge is a trained LM, frozen while the debaters learn. Step 1
(configs/sft_debate.py) trains a tiny model's judge seat on random debates to name the rule judge's winner;
step 2 seats it as the frozen judge and trains the debaters' shared adapter by GRPO, every seat restricted
to its role's replies (`policy.actions="constrained"`: the canned arguments, or the two verdicts):

    python experiments/train.py --config=configs/sft_debate.py
    python experiments/train.py --config=configs/debate.py:trained_judge              # self-play
    python experiments/train.py --config=configs/debate.py:trained_judge --config.scripted_agents=1:random

Metrics: `judge_agreement` (the frozen judge's verdicts equal to the rule's, on the debates RL plays),
`markers_per_speech` (the rule's currency: 3.0 at best, ~1.7-2.0 for random arguments), `won_rate_agent0/1`.
Measured (seed 0, 2 CPU cores shared with other jobs; the judge of configs/sft_debate.py, ~6 min): the
frozen judge agrees with the rule on 99-100% of the debates RL plays. Debater A against a random B
(`--config.scripted_agents=1:random`, 150 updates, ~1 min): **A's win rate 0.63 (updates 1-15) -> 0.97
(136-150)**, judge agreement 0.99-1.0 throughout. Self-play (the default, both debaters on one adapter):
**markers per speech 2.16 -> 2.99** (3.0 is the best: both learn the two richest arguments), after which
nearly every debate is a rule draw that the judge, never taught draws, gives to B (B's win rate 0.5 ->
0.96-1.0; agreement on the few decided debates 0.13-0.73). With the rule judge the same self-play learns
the same way (tests/test_debate_judge.py). Two settings that failed: lr 1e-2 (with the rule judge: A's win rate 0.95
by update ~50, then 0.29 at 100, once the policy was deterministic), and a judge stopped at 300 SFT updates (it agreed
with the rule on 78% of RL's debates, which repeat arguments more than random ones; A then won by drifting
to arguments it misjudged: markers per speech 1.86 -> 1.69 at a flat win rate).
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
    c.lr = 3e-3  # 1e-2 reached a 0.95 win rate against random, then fell to 0.29 once the policy was deterministic
    c.total_episodes = 16 * 150
