"""Negotiation by self-play from a random tiny model, measured against the random trader.

One shared policy (the seat is in the prompt) plays both seats of `text/negotiation` (envs/text/negotiation.py):
trade wood, stone and gold one unit for one over 6 moves, each seat with its own private values. Its legal moves
(6 offers, accept, pass) are the candidates (`policy.actions="constrained"`), so every reply is a move. Each update
plays `num_envs` games of the shared policy against itself (`share_policy=True`, both seats learn,
`opponent_pool.size=0`) with magnetic mirror descent (`algo="mmd"`, as configs/kuhn_poker.py) and a value head.
Zero-sum scoring (each seat is paid half the difference of the two gains), the rewards at the end of the game.
Every `in_graph_eval.every` updates the compiled update plays greedy games against the random trader, half in each
seat: `eval/random_win` (gained strictly more), `eval/random_draw`, `eval/random_loss` in metrics.csv.

    .venv/bin/python experiments/train.py --config=configs/negotiation.py

Options: `--config.env_kwargs.zero_sum=False` (each seat is paid its own gain: trades both seats value help both),
`--config.env_kwargs.max_moves=4` (shorter games; set `num_turns` to match).
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name = "text/negotiation"
    c.tokenizer = "word"  # whole words: a goods line is ~20 tokens
    # rules=False: the header is the seat only (the rules' 150 tokens are the same in every prompt, and a model
    # from scratch learns the game from its rewards): observations of ~100-185 tokens instead of ~250-330
    c.env_kwargs = {"max_moves": 6, "zero_sum": True, "rules": False}
    c.policy.actions = "constrained"
    c.share_policy = True
    # magnetic mirror descent: PPO + a reverse-KL pull toward a magnet adapter that follows the learner + an
    # entropy bonus; in a zero-sum game of private values plain self-play PPO drifts to deterministic play
    c.algo, c.group_size = "mmd", 1
    c.kl_coef, c.magnet_rate = 0.4, 0.05
    c.num_turns = 6  # a game is max_moves moves
    c.num_envs = 64
    c.lr, c.anneal_lr = 1e-3, True
    c.critic.lr = 1e-2
    c.ent_coef = 0.05
    c.sampling.temperature = 1.0
    c.total_episodes = 64 * 1000
    c.in_graph_eval.update(every=25, episodes=200, opponents=("random",))
    c.run.out_dir = "runs/negotiation"
    c.run.updates_per_chunk = 10
    return c
