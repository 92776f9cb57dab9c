"""SFT a tiny from-scratch model on the exact teacher's answers: the warm start for configs/arithmetic.py.

    .venv/bin/python experiments/train.py --config=configs/sft_arithmetic.py      # -> runs/sft_arithmetic/model
    .venv/bin/python experiments/train.py --config=configs/arithmetic.py \\
        --config.model.checkpoint=runs/sft_arithmetic/model                         # then GRPO from it

Seat: the one solver, trained on the `Answer: N` of jaxmarl_llm/data/teachers.py `exact_answer`; with
`script_noise` it sometimes plays an answer off by 1..3 (played, not a target). Same problems as
configs/arithmetic.py (2 operations on 1..9). Every weight trains (train_base) from the default init std 0.1
(a model from std 0.02 is right greedily but much noisier when sampled); 400 updates x 32 problems, lr 3e-3,
then greedy evaluation on 256 problems.
Measured (2 shared CPU cores, 1-operation problems on 1..3, 50 updates): ~80% well-formed and ~25% right samples
at temperature 1 (configs/arithmetic.py has the GRPO step).
Options: `--config.env_kwargs.num_ops`, `--config.env_kwargs.max_operand` (give the RL step the same),
`--config.script_noise`, `--config.total_episodes`, `--config.lr`.
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
