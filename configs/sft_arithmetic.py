"""Step 1 of the arithmetic recipe: SFT a tiny from-scratch model on the exact teacher's answers.

    python experiments/train.py --config=configs/sft_arithmetic.py             # -> runs/sft_arithmetic/model
    python experiments/train.py --config=configs/arithmetic.py \\
        --config.model.checkpoint=runs/sft_arithmetic/model                      # step 2: GRPO from it

A random model never writes `Answer: N`, so GRPO from scratch gets no signal.
The teacher (train/scripted.py `exact_answer`) writes the right answer; with
`script_noise` it sometimes plays one off by 1..3 (not a target). Same
problems as configs/arithmetic.py (2 operations on 1..9). Every weight is
trained (train_base) from the default init (std 0.1: an SFT model from std
0.02 was greedy-right but much noisier when sampled, see configs/arithmetic.py).
"""

from jaxmarl_llm.train.config import sft_defaults


def get_config():
    c = sft_defaults()
    c.env_name = "text/arithmetic"
    c.env_kwargs = {"num_ops": 2, "max_operand": 9, "capacity": 96, "max_action_tokens": 12}
    c.model.max_position_embeddings = 128
    c.train_base = True
    c.num_envs = 32
    c.num_turns = 1
    c.total_episodes = 32 * 400
    c.lr = 3e-3
    c.warmup_updates = 10
    c.eval_episodes = 256
    c.run.out_dir = "runs/sft_arithmetic"
    c.run.updates_per_chunk = 50
    return c
