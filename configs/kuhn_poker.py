"""Kuhn poker by self-play from a random tiny model, measured by its exact exploitability.

One shared policy (the seat is in the prompt) plays both seats; its legal actions (pass, bet) are the candidates
(`policy.actions="constrained"`). Each update plays `num_envs` hands per seat of the shared policy against
itself (`share_policy=True`, both seats learn: `opponent_pool.size=0`), magnetic mirror descent (`algo="mmd"`)
with a value head. Every `in_graph_eval.every` updates the compiled update reads the policy's action
distribution at all 12 information sets and computes the exact best response of each seat: `eval/exploitability`
(uniform play: 0.458; an equilibrium: 0), `eval/nash_conv` and per seat, beside greedy hands against the random
and equilibrium players; and the same for the average of the iterates evaluated from update 800 on
(`eval/average_exploitability`), the policy this recipe is judged by.

    .venv/bin/python experiments/train.py --config=configs/kuhn_poker.py

Rewards are chips won (+-1 or +-2); a reply that is not a legal action (free text only) loses 2.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name = "text/kuhn_poker"
    c.tokenizer = "word"
    c.env_kwargs = {"max_action_tokens": 4}  # a reply is one of the 3-token candidates (`Move: bet`)
    c.policy.actions = "constrained"
    c.share_policy = True
    # magnetic mirror descent: PPO + a reverse-KL pull toward a magnet adapter that follows the learner + an
    # entropy bonus (each a mean over the reply's 4 tokens, of which only the action's is free); plain PPO
    # self-play (--config.algo=ppo --config.kl_coef=0) turns deterministic and stays at exploitability 1/3
    c.algo, c.group_size = "mmd", 1
    c.kl_coef, c.magnet_rate = 0.4, 0.05
    c.num_turns = 3  # a hand has at most three moves
    c.num_envs = 64
    c.lr, c.anneal_lr = 2e-3, True
    c.critic.lr = 1e-2
    c.gae_lambda = 1.0  # Monte Carlo returns: the value head is a baseline only, its errors bias nothing
    # the bonus keeps the policy mixed early; held at 0.2 it biases the fixed point (the curve flattens at
    # 0.035-0.04), so it falls to 0.02 over the run
    c.ent_coef, c.ent_coef_end = 0.2, 0.02
    c.sampling.temperature = 1.0
    c.total_episodes = 64 * 1200
    # the last iterate keeps swinging by the sampling noise of 64 hands; the average of the iterates evaluated
    # from update 800 on (t^2-weighted) cancels it
    c.in_graph_eval.update(every=10, episodes=200, opponents=("random", "equilibrium"), average="quadratic",
                           average_from=800)
    c.run.out_dir = "runs/kuhn_poker"
    c.run.updates_per_chunk = 10
    c.run.eval_targets = {"eval/average_exploitability": 0.02}
    return c
