"""SFT on a JSONL file of transcripts, then rejection-sampling fine-tuning on the model's own right answers.

    .venv/bin/python experiments/train.py --config=configs/sft_file_arithmetic.py   # -> runs/sft_file_arithmetic/model
    .venv/bin/python experiments/train.py --config=configs/sft_file_arithmetic.py:policy \\
        --config.model.checkpoint=runs/sft_file_arithmetic/model                      # -> runs/rft_arithmetic/model

Step 1 (default, `:file`, source="file"): next-token loss on jaxmarl_llm/envs/text/data/arithmetic_sft.jsonl,
every one-operation problem on 1..9 with its `Answer: N` (regenerate with build_arithmetic_sft.py there).
Prompts are exactly what text/arithmetic shows with the env_kwargs below, so `eval_episodes` plays the model
greedily in the env. Any JSONL of {"prompt", "completion"} lines works the same way (`--config.data_path=...`),
e.g. transcripts collected elsewhere and filtered by reward; a multi-turn game's transcript is a line
{"turns": [prompt, move, reply, move, ...]}.

Step 2 (`:policy`, source="policy"): expert iteration (ReST / STaR). Each update the current model answers
`num_envs` fresh problems sampling at temperature 1; the right answers (return 1 >= min_return) are the SFT
targets, the rest are dropped. It needs a model that is sometimes right (step 1's): a random model keeps
nothing, and then no step is taken (`kept_fraction` stays 0).

Measured (2 shared CPU cores, 256 greedy episodes each): step 1 reaches 74.2% right (~1.5 min); step 2 takes it
to 82.4% (sampled answers: 43% -> 61% right over its 150 updates). Keep step 2's lr low (3e-4, 64 problems an
update): at 1e-3 with 32 the sampled rate rises but the greedy one falls to 66%, the model narrowing onto the
problems it already gets right. Options: `--config.lr`, `--config.min_return`, `--config.total_episodes`.
"""

import os

from jaxmarl_llm.envs.text.datasets import DATA_DIR
from jaxmarl_llm.train.config import sft_defaults


def get_config(variant: str = ""):
    if variant not in ("", "file", "policy"):
        raise ValueError(f"configs/sft_file_arithmetic.py:{variant}: the variant is 'file' (default) or 'policy'")
    c = sft_defaults()
    c.env_name = "text/arithmetic"
    c.env_kwargs = {"num_ops": 1, "max_operand": 9, "capacity": 96, "max_action_tokens": 12}
    c.model.max_position_embeddings = 128
    c.num_turns = 1
    c.train_base = True  # a from-scratch tiny model; with a real checkpoint, False trains LoRA adapters
    c.num_envs = 32
    c.eval_episodes = 256
    c.run.updates_per_chunk = 25
    if variant == "policy":
        c.source = "policy"
        c.min_return = 1.0  # right answers only (a wrong one returns 0, an unreadable one -1)
        c.num_envs = 64
        c.total_episodes = 64 * 150
        c.lr = 3e-4
        c.warmup_updates = 5
        c.run.out_dir = "runs/rft_arithmetic"
        return c
    c.source = "file"
    c.data_path = os.path.join(DATA_DIR, "arithmetic_sft.jsonl")
    c.max_length = 96  # prompt 74 + "Answer: -8" + eos fits
    c.total_episodes = 32 * 300
    c.lr = 3e-3
    c.warmup_updates = 10
    c.run.out_dir = "runs/sft_file_arithmetic"
    return c
