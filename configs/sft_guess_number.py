"""Step 1 of the guess-the-number recipe: SFT a tiny from-scratch model on binary-search transcripts.

    python experiments/train.py --config=configs/sft_guess_number.py             # -> runs/sft_guess_number/model
    python experiments/train.py --config=configs/guess_number.py \\
        --config.model.checkpoint=runs/sft_guess_number/model                      # step 2: GRPO from it

A random model never emits `Guess: N`, so GRPO from scratch gets no signal: the
warm start is needed. The teacher (train/scripted.py) bisects (512, 512 +- 256,
...) with a few random in-interval guesses (not targets) so the student also
sees how to continue after a poor guess. Every weight is trained (train_base);
the model is written with hf.save_pretrained for the RL step. Sized for 2 CPU
cores: char tokenizer, hidden 64, 2 layers, transcripts of 384 tokens.
"""

from jaxmarl_llm.train.config import sft_defaults


def get_config():
    c = sft_defaults()
    c.env_name = "text/guess_number"
    c.env_kwargs = {"capacity": 384, "max_action_tokens": 12}  # prompt 146 + 10 x (11 + 11) tokens fits
    c.model.update({"hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "num_heads": 4,
                    "num_kv_heads": 2, "head_dim": 16, "max_position_embeddings": 512, "init_std": 0.02})
    c.train_base = True
    c.script_noise = 0.05
    c.num_envs = 16
    c.num_turns = 10
    c.total_episodes = 16 * 800
    c.lr = 3e-3
    c.warmup_updates = 20
    c.eval_episodes = 205  # every held-out secret once, greedy
    c.run.out_dir = "runs/sft_guess_number"
    c.run.updates_per_chunk = 25
    c.run.checkpoint_every = 4
    return c
