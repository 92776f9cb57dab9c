"""Arithmetic: one LM solver answers a generated problem (`(7 + 2) * 3 = ?`) with `Answer: N` in one turn, by GRPO.

Seats: one solver (`num_agents=1`), learning. Reward 1 right, 0 wrong, -1 when no `Answer: N` can be read.
GRPO: groups of 8 samples share a problem and the group-normalized return is the advantage (no critic).
Problems: 2 operations (+, -, *) on 1..9, so every answer is in -999..999. Tiny random model with the character
tokenizer, sized for 2 CPU cores. A random tiny model never writes `Answer: N` (every sample scores -1, no
signal), so learning starts from configs/sft_arithmetic.py's model (jaxmarl_llm/data/teachers.py `exact_answer`):

    .venv/bin/python experiments/train.py --config=configs/sft_arithmetic.py      # -> runs/sft_arithmetic/model
    .venv/bin/python experiments/train.py --config=configs/arithmetic.py \\
        --config.model.checkpoint=runs/sft_arithmetic/model

Keep `tokenizer="char"` with that SFT model.
Measured (2 shared CPU cores, 1-operation problems on 1..3): 50 SFT updates x 32 episodes give ~80% well-formed
and ~25% right samples at temperature 1; 40 GRPO updates x 64 samples (lr 3e-3) then move success 0.24 -> 0.32
and format errors 0.19 -> 0.12 (first vs last 5 updates), inside the per-update noise (success 0.05-0.56).
The SFT model's init matters: from std 0.02 (the default is 0.1) it samples ~65% malformed replies, and GRPO at
lr >= 6e-3 drives it to 100% format errors, where every group ties.
Options: `--config.env_kwargs.num_ops=3 --config.env_kwargs.max_operand=20` (harder problems), `--config.lr`,
`--config.total_episodes`; `--config.model.checkpoint=/path/to/hf_folder --config.tokenizer=/path/to/hf_folder`
starts from a real checkpoint with rank-16 adapters.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name = "text/arithmetic"
    c.env_kwargs = {"num_ops": 2, "max_operand": 9, "capacity": 96, "max_action_tokens": 12}
    c.algo = "grpo"
    c.num_turns = 1
    c.num_envs = 64
    c.group_size = 8
    c.lr = 1e-3
    c.total_episodes = 64 * 300
    c.run.out_dir = "runs/arithmetic"
    c.run.updates_per_chunk = 10
    return c
