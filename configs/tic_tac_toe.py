"""Tic-tac-toe self-play: one shared LM policy (its seat, X or O, is in the prompt) against a pool of its own snapshots.

GRPO over groups of 8 games that share the learner's seat and the opponent
snapshot; 4 snapshots, the oldest replaced by the learner every 10 updates.
Tiny random model with the character tokenizer: sized for 2 CPU cores.

From scratch a tiny model writes garbage, so every game ends at the first move
with the illegal-move penalty (-2), all returns in a group are equal and GRPO
gets no signal: this config runs as is (and is what bench/llm_rollout.py times),
but learning needs a warm start: an SFT stage on scripted-policy transcripts
(configs/sft_tic_tac_toe.py: both seats minimax, 30% random moves that are
played but not targets). The recipe:

    python experiments/train.py --config=configs/sft_tic_tac_toe.py          # writes runs/sft_tic_tac_toe/model
    python experiments/eval.py --config=configs/tic_tac_toe.py --config.model.checkpoint=runs/sft_tic_tac_toe/model \
        --opponent=minimax --episodes=200                                     # greedy, both seats; also --opponent=random
    python experiments/train.py --config=configs/tic_tac_toe.py --config.model.checkpoint=runs/sft_tic_tac_toe/model

Measured (2 shared CPU cores, greedy, 100 games per seat): the SFT stage as
configured (400 updates x 8 games, lr 1e-2, ~13 min) learns the `Move: N`
format (0% format errors) but not yet the board: 67% of games against random
end in its own illegal move; against random it loses 83% (wins 10%, draws 7%),
against minimax it draws 7.5%. The target (lose <= 5% against random, draw
>= 80% against minimax; tests/test_sft.py, the `slow` recipe test) is not met
yet: the per-move loss plateaus at ~0.25 nats/token (the digit about uniform
over 1..9) from update ~50 to 400, at lr 3e-3 as at 1e-2. RL from this
checkpoint has not been run.

The checkpoint's config.json replaces the `model.*` sizes; keep `tokenizer="char"`
(the SFT stage's tokenizer) and a `max_position_embeddings` >= capacity + 8 there
(sft_tic_tac_toe uses 768 for this config's capacity 640).
RL then trains rank-16 adapters over that frozen model, and the pool starts as
copies of it. Variants:
    --config.opponent_pool.size=0 --config.scripted_agents=1:random    learn X against the random player
    --config.opponent_pool.size=0 --config.share_policy=False          one adapter per seat, both learn
Evaluate with experiments/eval.py (win / draw / loss against random, minimax, the base model or a checkpoint).
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name = "text/tic_tac_toe"
    c.tokenizer = "word"  # the SFT stage's tokenizer: whole words, `X5` one piece
    c.env_kwargs = {"capacity": 384, "max_action_tokens": 8, "board": "tagged"}  # longest game: 344 tokens
    c.algo = "grpo"
    c.share_policy = True
    c.opponent_pool.size = 4
    c.opponent_pool.refresh_every = 10
    c.num_turns = 9  # a game has at most 9 moves
    c.num_envs = 32
    c.group_size = 8
    c.lr = 3e-3
    c.sampling.temperature = 1.0
    c.total_episodes = 32 * 200
    c.run.out_dir = "runs/tic_tac_toe"
    c.run.updates_per_chunk = 10
    c.run.checkpoint_every = 2
    return c
