"""Tic-tac-toe: one shared LM policy (its seat, X or O, in the prompt), self-play from an SFT model or RL from scratch.

Default: GRPO over groups of 8 games that share the learner's seat and opponent; the opponents are a pool of 4
snapshots of the learner (the oldest replaced every 10 updates); rank-16 adapters on configs/sft_tic_tac_toe.py's
polished model (a random tiny model writes no legal move, so GRPO gets no signal without it), lr 1e-4, kl_coef 0.05:

    .venv/bin/python experiments/train.py --config=configs/tic_tac_toe.py \\
        --config.model.checkpoint=runs/sft_tic_tac_toe_polish/model

Measured (2 CPU cores, 100 updates x 32 games, ~5 min): self-play sits at its fixed point (99.4% of sampled games
drawn, GRPO's advantages ~0); greedy play stays the SFT model's: loses 4.3% against random, draws 91% vs minimax.

`:scratch`: RL alone from the random tiny model. Legal-move candidates (`policy.actions="constrained"`), a league
of built-in players (`opponent_pool.random=0.5`, `.minimax=0.5`, the learner in a random seat), observations
without history, PPO with a value head on its own Adam, lr 1e-3 annealed to 0, entropy bonus 0.01, 3000 updates
x 32 games, in-graph evaluation every 250 updates (`eval/random_loss`, `eval/minimax_draw` in metrics.csv,
`eval_curve.png`):

    .venv/bin/python experiments/train.py --config=configs/tic_tac_toe.py:scratch

Measured (seed 0, AMD EPYC, 2 idle cores, 8 min 43 s): loses 3.2% against random and draws 83.5% against
minimax at update 2000, 1.8% / 89.8% at 3000 (target: <= 5% / >= 80%; docs/results.md).
Boards are `tagged` (`X5`), word tokenizer, as in the SFT stage. Options: `--config.opponent_pool.size=0` with
`--config.scripted_agents=1:random` (learn X against the random player) or `--config.share_policy=False` (one
adapter per seat, both learn). experiments/eval.py plays a checkpoint against random, minimax or the base model.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config(variant: str = ""):
    if variant not in ("", "scratch"):
        raise ValueError(f"configs/tic_tac_toe.py:{variant}: the variant is 'scratch' (RL from a random model) or none")
    c = lm_rl_defaults()
    c.env_name = "text/tic_tac_toe"
    c.tokenizer = "word"  # the SFT stage's tokenizer: whole words, `X5` one piece
    # longest game: 344 tokens; history=False: each observation is the seat, the board and the status line only
    # (~30 tokens: set capacity=32; an update then costs about half)
    c.env_kwargs = {"capacity": 384, "max_action_tokens": 8, "board": "tagged", "history": True}
    c.algo = "grpo"
    c.share_policy = True
    c.opponent_pool.size = 4
    c.opponent_pool.refresh_every = 10
    c.num_turns = 9  # a game has at most 9 moves
    # between a seat's moves its transcript grows by ~48 tokens (its echoed reply, the opponent's, two
    # boards, two status lines) + up to 8 for longer replies: one prefill chunk of 56 reads them
    c.rollout.chunk = 56
    c.num_envs = 32
    c.group_size = 8
    c.lr = 1e-4  # small, with the KL anchor: RL from the SFT model at 3e-3 without KL collapses to format errors
    c.kl_coef = 0.05
    c.sampling.temperature = 1.0
    c.total_episodes = 32 * 200
    c.run.out_dir = "runs/tic_tac_toe"
    c.run.updates_per_chunk = 10
    c.run.checkpoint_every = 2
    if variant == "scratch":
        c.policy.actions = "constrained"  # legal moves only: the empty cells are the candidates
        # each observation is the seat, the board and the status line (~30 tokens): half the cost of an update
        c.env_kwargs.update({"history": False, "capacity": 32})
        c.algo, c.group_size = "ppo", 1  # a value per move: credit to the move that lost, not the whole game
        # lr 1e-3 annealed to 0 with an entropy bonus over 3000 updates: without the bonus the policy settles on
        # a fixed order of cells
        c.lr, c.anneal_lr, c.ent_coef = 1e-3, True, 0.01
        c.critic.lr, c.kl_coef = 1e-2, 0.0
        c.opponent_pool.update(size=1, random=0.5, minimax=0.5)  # the league: built-in players only
        c.in_graph_eval.update(every=250, episodes=400)
        c.total_episodes = 32 * 3000
        c.run.out_dir = "runs/tic_tac_toe_scratch"
        c.run.eval_targets = {"eval/random_loss": 0.05, "eval/minimax_draw": 0.8}
    return c
