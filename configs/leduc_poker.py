"""Leduc poker by self-play from a random tiny model, measured by its exact exploitability.

As configs/kuhn_poker.py on the larger game: six cards, two betting rounds, a public card, raises of 2 and 4
(at most two a round); the legal actions (fold, call, raise) are the candidates. Every `in_graph_eval.every`
updates the update reads the policy at all 936 information sets (one batched forward) and computes both
seats' exact best responses: `eval/exploitability` (uniform play: 2.374; an equilibrium: 0).

    .venv/bin/python experiments/train.py --config=configs/leduc_poker.py            # 1000 updates, in words
    .venv/bin/python experiments/train.py --config=configs/leduc_poker.py:compact    # 9000 updates, ~40 min

Magnetic mirror descent (`algo="mmd"`): PPO with a reverse-KL pull (kl_coef) toward a magnet adapter that follows
the learner (magnet_rate) and an entropy bonus falling from 0.2 to 0.02; the average of the iterates evaluated from
update 400 on (`:compact`: 3000; `eval/average_exploitability`) is the policy this recipe is judged by;
`--config.algo=ppo --config.kl_coef=0` is plain self-play PPO. `:compact` is the 60-minute recipe: 128 hands an
update, 9000 updates, the average from update 3000, a critic that reads the whole hand (`critic.kind="world_state"`:
both seats' cards and every move, envs/text/poker.py; the policy still reads its own view) and a firm magnet
(kl_coef 2.0): average 0.193 / 0.140 at the end on seeds 0 / 1 (docs/results.md). At kl_coef 1.0 0.182 / 0.2002; with
the critic on each seat's own view (`--config.critic.kind=ippo --config.kl_coef=0.4`) 0.228 / 0.306; with the
world-state critic at kl_coef 0.4 seed 0 reaches 0.172 but seed 1 drifts to 0.84.

The observations leave out the rules line (`env_kwargs.rules=False`): every hand re-reads its observation at
every move, so its length is most of an update's cost. `configs/leduc_poker.py:compact` writes
the same information sets in symbols (`P2:Q:K;+=/+;?`, envs/text/poker.py): 16 tokens on average instead of 78.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config(variant: str = ""):
    if variant not in ("", "compact"):
        raise ValueError(f"configs/leduc_poker.py:{variant}: the variant is 'compact' (views in symbols) or none")
    c = lm_rl_defaults()
    c.env_name = "text/leduc_poker"
    c.tokenizer = "word"
    # observations without the rules line: 78 tokens on average, not 124; a reply is one of the 3-token candidates
    # (`Move: raise`), so 4 reply slots (the default 16 would decode and score 16)
    c.env_kwargs = {"rules": False, "max_action_tokens": 4}
    if variant == "compact":
        c.env_kwargs = {"compact": True, "max_action_tokens": 4}  # the same views in symbols: 16 tokens on average
    c.policy.actions = "constrained"
    c.share_policy = True
    c.algo, c.group_size = "mmd", 1
    c.kl_coef, c.magnet_rate, c.ent_coef = 0.4, 0.05, 0.2
    c.num_turns = 8  # at most four moves a round
    # a hand lasts 4.5 of its 8 turns on average: the loss reads only the rows of hands still running, packed to
    # the fewest of 1/8, 2/8, ..., 8/8 of the rows (8 compiled sizes; the update unchanged to float rounding)
    c.rollout.row_buckets = 8
    c.num_envs = 64
    # configs/kuhn_poker.py's recipe (Monte Carlo returns, the bonus falling to 0.02, a late average) at twice its
    # lr: 0.55 (iterate) / 0.57 (average) at update 1000, against 0.70 for lr 1e-3, bonus 0.2, gae_lambda 0.95
    c.lr, c.anneal_lr = 4e-3, True
    c.critic.lr = 1e-2
    c.gae_lambda = 1.0
    c.ent_coef_end = 0.02
    c.sampling.temperature = 1.0
    c.total_episodes = 64 * 1000
    c.in_graph_eval.update(every=50, episodes=200, opponents=("random", "equilibrium"), average="quadratic",
                           average_from=400)
    if variant == "compact":  # the 60-minute recipe: 128 hands an update, 9000 updates, the average from 3000
        c.num_envs, c.total_episodes = 128, 128 * 9000
        c.in_graph_eval.update(episodes=32, average_from=3000)  # the games are diagnostics; the exploitability exact
        # a critic that knows both hands takes the hidden card's noise out of the advantage; the firm pull keeps
        # the sharper policy from drifting off the mixed equilibrium (seed 1 at kl_coef 0.4: 0.84, at 1.0: 0.2002)
        c.critic.kind, c.kl_coef = "world_state", 2.0
    c.run.out_dir = "runs/leduc_poker" + (f"_{variant}" if variant else "")
    c.run.updates_per_chunk = 10
    c.run.eval_targets = {"eval/average_exploitability": 0.2}
    return c
