"""The tic-tac-toe recipe: SFT a small from-scratch model on minimax self-play transcripts, in two stages.

    python experiments/train.py --config=configs/sft_tic_tac_toe.py          # stage 1 -> runs/sft_tic_tac_toe/model
    python experiments/train.py --config=configs/sft_tic_tac_toe.py:polish   # stage 2 -> runs/sft_tic_tac_toe_polish/model
    python experiments/eval.py --config=configs/tic_tac_toe.py \
        --config.model.checkpoint=runs/sft_tic_tac_toe_polish/model --opponent=minimax --episodes=400
    (and --opponent=random; greedy, half the games in each seat)

A random model never writes a legal `Move: N`, so RL from scratch gets no
signal: the warm start is needed. The teacher (train/scripted.py,
`minimax_selfplay`) plays both seats with exact minimax, breaking ties by the
lowest cell (`tie_break="first"`: every target is a function of the board, so
the loss can reach zero; a random tie-break leaves ~0.9 nats a move of pure
noise); with probability `script_noise` = 0.5 a move is uniformly random
instead, played but not a target, so the student sees the positions a random
opponent (or its own slip) leads to and learns minimax's answer there. Both
seats' moves are targets: one model plays X or O (the seat is in the prompt).
Every weight is trained (train_base); the model is written with hf.save_pretrained.

What made it learn (2 CPU cores): boards drawn `tagged` (`X5`, not `X`) and
read with the `word` tokenizer (one id per cell, a 9-move game in 344 tokens
instead of 523 characters). With attention under RoPE a value carries no
position, so a plain `X` told the model nothing about where it stood; the old
character-level setup (64 wide, 400 updates) stayed at a uniform move digit
(~0.25 nats/token from update 50 on, 67% of games lost to its own illegal move).

Measured, idle-ish 2-core box (greedy, 400 games against each opponent, half per seat):
    stage 1 (1000 updates x 16 games, lr 3e-3, 21 min): move accuracy 0.89 on the
      teacher's noisy positions; against random: loses 11.5% (X 4%, O 19%), illegal
      0.7%; against minimax: draws 80.7% (X 100%, O 61.5%).
    stage 2 (1000 more at lr 1e-3, 19 min): move accuracy 0.98; against random: loses
      4.3% (X 1%, O 7.5%), wins 82.8%, illegal 0%; against minimax: draws 91.0% (X 100%,
      O 82%), illegal 0%. The target (lose <= 5% against random, draw >= 80% against
      minimax) is met; tests/test_sft.py has the recipe as a `slow` test.
Model: hidden 128, 2 layers, 4 heads (2 kv), head_dim 32; max_position_embeddings
512 >= capacity 384 + 8 + 8 (configs/tic_tac_toe.py's RL capacity).
"""

from jaxmarl_llm.train.config import sft_defaults


def get_config(variant: str = ""):
    if variant not in ("", "polish"):
        raise ValueError(f"configs/sft_tic_tac_toe.py:{variant}: the variant is '' (stage 1) or 'polish' (stage 2)")
    c = sft_defaults()
    c.env_name = "text/tic_tac_toe"
    c.tokenizer = "word"
    c.env_kwargs = {"capacity": 384, "max_action_tokens": 8, "board": "tagged"}  # longest game: ~370 tokens
    c.model.update({"hidden_size": 128, "intermediate_size": 512, "num_layers": 2, "num_heads": 4,
                    "num_kv_heads": 2, "head_dim": 32, "max_position_embeddings": 512, "init_std": 0.02})
    c.train_base = True
    c.script_noise = 0.5
    c.script_kwargs = {"tie_break": "first"}
    c.num_envs = 16
    c.num_turns = 9  # a game has at most 9 moves
    c.total_episodes = 16 * 1000
    c.lr = 3e-3
    c.warmup_updates = 20
    c.run.out_dir = "runs/sft_tic_tac_toe"
    c.run.updates_per_chunk = 25
    c.run.checkpoint_every = 4
    if variant == "polish":  # stage 2: the same data, from stage 1's model, at a third of the lr
        c.model.checkpoint = "runs/sft_tic_tac_toe/model"
        c.lr = 1e-3
        c.run.out_dir = "runs/sft_tic_tac_toe_polish"
    return c
