"""One LM agent plays guess-the-number (0..1023, 10 turns) with GRPO over groups sharing a secret.

A random tiny model never writes `Guess: N`, so GRPO from scratch gets no
signal: warm-start it with SFT on scripted binary-search transcripts first.
The two-step recipe (2 CPU cores):

    python experiments/train.py --config=configs/sft_guess_number.py
    python experiments/train.py --config=configs/guess_number.py \\
        --config.model.checkpoint=runs/sft_guess_number/model

Step 2 puts LoRA adapters on the SFT model (a local HF folder, char tokenizer)
and reports greedy success and turns on the held-out secrets at the end
(runs/guess_number/eval.json). Any other HF checkpoint works the same way with
`--config.tokenizer=<its tokenizer folder>`.

Measured (seed 0, 2 CPU cores shared with other jobs): from the SFT model at
97.6% held-out greedy success (200/205, 8.96 turns), 100 GRPO updates (20 min
wall) keep it at 97.1% (199/205), mean 8.96 turns (8.92 on solved episodes);
sampled (temperature 1) training success 0.6-1.0 per update. The SFT warm start
does the work; GRPO holds it.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
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
    return c
