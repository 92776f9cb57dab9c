"""Leduc poker by self-play from a random tiny model, measured by its exact exploitability.

As configs/kuhn_poker.py on the larger game: six cards, two betting rounds, a public card, raises of 2 and 4
(at most two a round); the legal actions (fold, call, raise) are the candidates. Every `in_graph_eval.every`
updates the update reads the policy at all 936 information sets (one batched forward) and computes both
seats' exact best responses: `eval/exploitability` (uniform play: 2.374; an equilibrium: 0).

    .venv/bin/python experiments/train.py --config=configs/leduc_poker.py

Magnetic mirror descent (`algo="mmd"`): PPO with a reverse-KL pull (kl_coef) toward a magnet adapter that
follows the learner (magnet_rate) and an entropy bonus; `--config.algo=ppo --config.kl_coef=0` is plain
self-play PPO. The observations leave out the rules line (`env_kwargs.rules=False`): every hand re-reads
its observation at every move, so its length is most of an update's cost.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name = "text/leduc_poker"
    c.tokenizer = "word"
    c.env_kwargs = {"rules": False}  # observations without the rules line: 78 tokens on average, not 124
    c.policy.actions = "constrained"
    c.share_policy = True
    c.algo, c.group_size = "mmd", 1
    c.kl_coef, c.magnet_rate, c.ent_coef = 0.4, 0.05, 0.2
    c.num_turns = 8  # at most four moves a round
    c.num_envs = 64
    c.lr, c.anneal_lr = 1e-3, True
    c.critic.lr = 1e-2
    c.sampling.temperature = 1.0
    c.total_episodes = 64 * 2000
    c.in_graph_eval.update(every=100, episodes=200, opponents=("random", "equilibrium"))
    c.run.out_dir = "runs/leduc_poker"
    c.run.updates_per_chunk = 10
    c.run.eval_targets = {"eval/exploitability": 0.2}
    return c
