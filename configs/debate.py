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
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config(variant: str = ""):
    if variant not in ("", "rule", "lm"):
        raise ValueError(f"configs/debate.py:{variant}: the variant is 'rule' (default) or 'lm'")
    c = lm_rl_defaults()
    c.env_name = "text/debate"
    rounds = 2
    c.env_kwargs = {"judge": "rule", "rounds": rounds, "capacity": 576, "max_action_tokens": 72}
    c.algo = "grpo"
    c.share_policy = True
    c.num_turns = 2 * rounds  # A, B, A, B
    if variant == "lm":
        c.env_kwargs["judge"] = "lm"
        c.frozen_agents = (2,)  # the judge: the bare base model, never trained
        c.num_turns = 2 * rounds + 1  # ... then the verdict
    c.num_envs = 16
    c.group_size = 8
    c.lr = 1e-3
    c.total_episodes = 16 * 100
    c.run.out_dir = "runs/debate" + ("_lm" if variant == "lm" else "")
    c.run.updates_per_chunk = 5
    return c
