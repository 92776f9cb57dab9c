"""DPO on the shipped arithmetic preference pairs (right vs wrong `Answer: N`), tiny from-scratch model.

    .venv/bin/python experiments/train.py --config=configs/dpo_arithmetic.py       # -> runs/dpo_arithmetic/model

Pairs: jaxmarl_llm/envs/text/data/arithmetic_pairs.jsonl (48 one-operation problems; regenerate with
build_arithmetic_pairs.py there). Prompts are exactly what text/arithmetic shows with the env_kwargs
below, so `--config.eval_episodes=64` plays the trained model greedily in the env.

A random model cannot speak the format, so this runs RPO: DPO + sft_coef x NLL of the chosen answer,
training every weight (train_base; the reference is a frozen copy of the initial weights). For a real
model, DPO proper on LoRA adapters (the reference is the base with adapters off):

    --config.model.checkpoint=/path/to/hf --config.tokenizer=/path/to/hf --config.train_base=False \\
    --config.sft_coef=0 --config.lr=1e-4 --config.pairs_path=/path/to/pairs.jsonl

Other options: `--config.beta` (0.1), `--config.total_updates`. No measured result is recorded for this config.
"""

import os

from jaxmarl_llm.envs.text.datasets import DATA_DIR
from jaxmarl_llm.train.config import dpo_defaults


def get_config():
    c = dpo_defaults()
    c.env_name = "text/arithmetic"
    c.env_kwargs = {"num_ops": 1, "max_operand": 9, "capacity": 96, "max_action_tokens": 12}
    c.num_turns = 1
    c.source = "pairs"
    c.pairs_path = os.path.join(DATA_DIR, "arithmetic_pairs.jsonl")
    c.max_length = 96  # prompt 74 + "Answer: -72" + eos fits
    c.model.update({"hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "num_heads": 4,
                    "num_kv_heads": 2, "head_dim": 16, "max_position_embeddings": 128, "init_std": 0.02})
    c.train_base = True
    c.sft_coef = 1.0
    c.beta = 0.1
    c.batch_size = 16
    c.total_updates = 300
    c.lr = 3e-3
    c.warmup_updates = 20
    c.run.out_dir = "runs/dpo_arithmetic"
    c.run.updates_per_chunk = 25
    c.run.checkpoint_every = 4
    return c
