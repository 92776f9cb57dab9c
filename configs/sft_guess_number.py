"""Step 1 of the guess-the-number recipe: SFT a tiny from-scratch model on binary-search transcripts.

    python experiments/train.py --config=configs/sft_guess_number.py             # -> runs/sft_guess_number/model
    python experiments/train.py --config=configs/guess_number.py \\
        --config.model.checkpoint=runs/sft_guess_number/model                      # step 2: GRPO from it

A random model never emits `Guess: N`, so GRPO from scratch gets no signal: the
warm start is needed. The teacher (train/scripted.py) bisects: 512, then the
previous guess +- 256, 128, ..., 1 toward the answer. Two choices make the
student learn that rule rather than memorise the tree (which reached only 45%
on held-out secrets: the tree writes a held-out leaf only when it is the secret,
so the student never saw those numbers as a final move):

- `recover="step"`: with chance `script_noise` per turn the teacher plays a
  random number in the interval (played, not a target), then keeps stepping
  from it by the schedule. Every number, held-out secrets included, then shows
  up as a target guess after some training secret, while only training secrets
  are ever played. Recovering by the midpoint of the interval instead (the old
  rule) is a second, harder rule the tiny model could not fit (68% even on
  training secrets).
- `digits=4`: guesses are zero-padded ("Guess: 0013", parsed as 13), so each
  digit sits at a fixed place and the +- step is done digit by digit.

Every weight is trained (train_base); the model is written with
hf.save_pretrained for the RL step. Sized for 2 CPU cores: char tokenizer,
hidden 64, 2 layers, transcripts of 384 tokens.

Measured (seed 0, 2 CPU cores shared with other jobs): 16 min wall; greedy on
the 205 held-out secrets 97.6% solved (200/205), mean 8.96 turns (the teacher's
optimum on them is 8.96; 0.996 on the training secrets). Old teacher (plain
numbers, midpoint recovery, 800 updates): 45.4%, 9.10 turns.
"""

from jaxmarl_llm.train.config import sft_defaults


def get_config():
    c = sft_defaults()
    c.env_name = "text/guess_number"
    c.env_kwargs = {"capacity": 384, "max_action_tokens": 12}  # prompt 146 + 10 x (11 + 11) tokens fits
    c.model.update({"hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "num_heads": 4,
                    "num_kv_heads": 2, "head_dim": 16, "max_position_embeddings": 512, "init_std": 0.02})
    c.train_base = True
    c.script_noise = 0.05  # a random move (not a target) in ~40% of the episodes
    c.script_kwargs = {"digits": 4, "recover": "step"}  # see the docstring
    c.num_envs = 16
    c.num_turns = 10
    c.total_episodes = 16 * 1200  # move accuracy (noise moves included) ~0.92 at the end, still rising
    c.lr = 3e-3
    c.warmup_updates = 20
    c.eval_episodes = 205  # every held-out secret once, greedy
    c.run.out_dir = "runs/sft_guess_number"
    c.run.updates_per_chunk = 25
    c.run.checkpoint_every = 4
    return c
