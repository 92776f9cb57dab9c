"""Step 1 of the tic-tac-toe recipe: SFT a tiny from-scratch model on minimax self-play transcripts.

    python experiments/train.py --config=configs/sft_tic_tac_toe.py              # -> runs/sft_tic_tac_toe/model
    python experiments/eval.py --config=configs/tic_tac_toe.py \\
        --config.model.checkpoint=runs/sft_tic_tac_toe/model --opponent=minimax --episodes=200
    python experiments/train.py --config=configs/tic_tac_toe.py \\
        --config.model.checkpoint=runs/sft_tic_tac_toe/model                       # step 2: self-play GRPO from it

A random model never writes a legal `Move: N`, so RL from scratch gets no
signal: the warm start is needed. The teacher (train/scripted.py,
`minimax_selfplay`) plays both seats with exact minimax (random tie-break);
with probability `script_noise` a move is uniformly random instead, played
but not a target, so the student sees the positions a random opponent (or its
own slip) leads to and learns minimax's answer there. Both seats' moves are
targets: one model plays X or O (the seat is in the prompt). Every weight is
trained (train_base); the model is written with hf.save_pretrained.

Sized for 2 CPU cores: char tokenizer, hidden 64, 2 layers. A 9-move game is at
most 523 characters per transcript, so capacity 544 holds every game (and the
eos after the last move); RL (configs/tic_tac_toe.py) uses capacity 640 and
max_action_tokens 8, hence max_position_embeddings 768 >= 640 + 8 + 8.

Measured on 2 shared CPU cores (400 updates, ~13 min wall, ~1.5-2.5 s an update):
the model writes well-formed `Move: N` (0% format errors) but has not learnt the
board yet: greedy, 100 games per seat, it moves illegally in 67% of games
against random (loses 83%) and draws 7.5% against minimax, far from the target
(lose <= 5% against random, draw >= 80% against minimax). The per-token loss
sits at ~0.25 from update ~50 on (lr 3e-3 and 1e-2 alike): the move digit is
still about uniform. Next: a much longer budget (thousands of updates) or a
shorter transcript / deeper model; RL from this checkpoint is not yet useful.

Tried since (2 shared CPU cores): a bigger model (hidden 128, 3 layers, 8 heads,
16 games an update, lr 3e-3) sits on the same plateau (0.26 nats/token, move
accuracy 0.15-0.24 at update 80, ~10 s an update on the loaded box: stopped);
this checkpoint's teacher-forced mass on legal cells is 0.68. GRPO from it
against the random player as X (`configs/tic_tac_toe.py` with
`--config.opponent_pool.size=0 --config.scripted_agents=1:random`, 32 games an
update) did not lower its illegal-move rate in 50 updates (0.69 -> 0.53-0.91).
The model has to read nine cells at fixed offsets back from `Move: `; a
tiny char model does not find that circuit in these budgets.
"""

from jaxmarl_llm.train.config import sft_defaults


def get_config():
    c = sft_defaults()
    c.env_name = "text/tic_tac_toe"
    c.env_kwargs = {"capacity": 544, "max_action_tokens": 8}  # longest 9-move transcript: 523 tokens
    c.model.update({"hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "num_heads": 4,
                    "num_kv_heads": 2, "head_dim": 16, "max_position_embeddings": 768, "init_std": 0.02})
    c.train_base = True
    c.script_noise = 0.3
    c.num_envs = 8
    c.num_turns = 9  # a game has at most 9 moves
    c.total_episodes = 8 * 400
    c.lr = 1e-2
    c.warmup_updates = 20
    c.run.out_dir = "runs/sft_tic_tac_toe"
    c.run.updates_per_chunk = 25
    c.run.checkpoint_every = 4
    return c
