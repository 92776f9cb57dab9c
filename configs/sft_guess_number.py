"""SFT a tiny from-scratch model on binary-search transcripts: the warm start for configs/guess_number.py.

    .venv/bin/python experiments/train.py --config=configs/sft_guess_number.py    # -> runs/sft_guess_number/model
    .venv/bin/python experiments/train.py --config=configs/guess_number.py        # then GRPO from it

Seat: the one guesser. The teacher (jaxmarl_llm/data/teachers.py `binary_search`) bisects: 512, then the
previous guess +- 256, 128, ..., 1 toward the answer. Two teacher options (`script_kwargs`) make the student
learn that rule rather than memorise the tree, so that it also solves the held-out secrets:
- `recover="step"`: with chance `script_noise` (0.05) per turn the teacher plays a random number in the interval
  (played, not a target), then keeps stepping from it by the schedule. Every number, held-out secrets included,
  then shows up as a target guess, while only training secrets are played. `recover="bisect"` (back to the
  interval's midpoint) is a second, harder rule: the tiny model fits it only to 68% on training secrets.
- `digits=4`: guesses are zero-padded ("Guess: 0013", parsed as 13), so each digit sits at a fixed place and
  the +- step is done digit by digit.
Every weight trains (train_base); char tokenizer, hidden 64, 2 layers, 384-token transcripts; 1200 updates x 16
games, lr 3e-3. The model is written with hf.save_pretrained for the RL step.
Measured (seed 0, 2 CPU cores shared with other jobs): 16 min wall; greedy on the 205 held-out secrets 97.6%
solved (200/205), mean 8.96 turns (the teacher's optimum on them: 8.96); 0.996 on the training secrets.
Options: `--config.script_noise`, `--config.script_kwargs`, `--config.total_episodes`, `--config.lr`.
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
