"""Several games, one adapter: self-play on tic-tac-toe, Kuhn poker and negotiation at once (as SPIRAL trains).

`text/mixture` (envs/text/mixture.py) draws one game per episode (uniform weights); one shared policy (the seat is
in each game's prompt) plays both seats of every game, the legal moves of the drawn game its candidates
(`policy.actions="constrained"`: the union of the three games' replies, the other games' masked out). Magnetic
mirror descent with a value head, as configs/kuhn_poker.py and configs/negotiation.py. The observations are the
short ones of each game's from-scratch config: tic-tac-toe the seat, the `tagged` board and the status line
(`history=False`), negotiation without its rules lines (`rules=False`), Kuhn poker its own; every observation is
padded to the widest (negotiation's), and the word tokenizer's vocabulary covers all three games' texts.

Every `in_graph_eval.every` updates the compiled update evaluates each game alone (evaluation/per_game.py):
greedy games against the built-in players each game has (tic-tac-toe: random and minimax; Kuhn poker: random and
equilibrium; negotiation: random), `eval/<game>/<opponent>_<win|draw|loss>` (and per seat), and Kuhn poker's exact
`eval/kuhn_poker/exploitability`. The rollout logs `episodes_<game>` (each game's share of the update's episodes)
and `return_<game>` (its mean return; per seat `return_<game>_agent<i>`).

    .venv/bin/python experiments/train.py --config=configs/multi_game.py

Options: `--config.env_kwargs.weights='(2, 1, 1)'` (tic-tac-toe in half the episodes); another set of games in
`env_kwargs.games` with `num_turns` the longest game's moves.

Variants `:tic_tac_toe`, `:kuhn_poker`, `:negotiation`: the same recipe on that game alone (a mixture of one, the
same observations and evaluation), the single-game side of "does training on several games help each?":

    .venv/bin/python experiments/train.py --config=configs/multi_game.py:kuhn_poker
"""

from jaxmarl_llm.train.config import lm_rl_defaults


GAMES = ("tic_tac_toe", "kuhn_poker", "negotiation")
MOVES = {"tic_tac_toe": 9, "kuhn_poker": 3, "negotiation": 6}  # a game's most moves: num_turns
OPPONENTS = {"tic_tac_toe": ("random", "minimax"), "kuhn_poker": ("random", "equilibrium"),
             "negotiation": ("random",)}  # the built-in players each game has


def get_config(variant: str = ""):
    if variant not in ("",) + GAMES:
        raise ValueError(f"configs/multi_game.py:{variant}: the variants are {', '.join(GAMES)} (one game alone) "
                         "or none (all three)")
    c = lm_rl_defaults()
    c.env_name = "text/mixture"
    c.tokenizer = "word"  # built from every game's texts
    c.env_kwargs = {
        "games": ("text/tic_tac_toe", "text/kuhn_poker", "text/negotiation"),
        "weights": (1.0, 1.0, 1.0),
        "game_kwargs": {
            "tic_tac_toe": {"board": "tagged", "history": False, "capacity": 32},
            "negotiation": {"max_moves": 6, "zero_sum": True, "rules": False},
        },
    }
    c.policy.actions = "constrained"
    c.share_policy = True
    c.algo, c.group_size = "mmd", 1
    c.kl_coef, c.magnet_rate = 0.4, 0.05
    c.num_turns = 9  # the longest game: tic-tac-toe's 9 moves (Kuhn poker 3, negotiation 6)
    c.num_envs = 64
    c.lr, c.anneal_lr = 1e-3, True
    c.critic.lr = 1e-2
    c.ent_coef = 0.05
    c.sampling.temperature = 1.0
    c.total_episodes = 64 * 2000
    c.in_graph_eval.update(every=25, episodes=200, opponents=("random", "minimax", "equilibrium"))
    c.run.out_dir = "runs/multi_game"
    c.run.updates_per_chunk = 10
    if variant:  # one game alone, its own observations and evaluation, everything else as above
        kw = c.env_kwargs
        kw.games, kw.weights = (f"text/{variant}",), (1.0,)
        kw.game_kwargs = {k: v for k, v in kw.game_kwargs.items() if k == variant}
        c.num_turns = MOVES[variant]
        c.in_graph_eval.opponents = OPPONENTS[variant]
        c.run.out_dir = f"runs/multi_game_{variant}"
    return c
