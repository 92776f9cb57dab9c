"""TextArena's tic-tac-toe (its own prompts, rules and parser) through the host bridge, by RL from a random tiny
model against TextArena's game playing a random legal move.

    .venv/bin/python experiments/train.py --config=configs/textarena_tic_tac_toe.py

The game runs in Python (`textarena`, the `[test]` extra) on the host, inside the compiled update
(jaxmarl_llm/envs/host: one callback per step for every game of a device). The learner sits in seat `seed % 2`
of each game; its legal replies (`[0]` .. `[8]`) are TextArena's `Available Moves` line (constrained decoding);
the reward is TextArena's at the end (+1 win, -1 loss, 0 draw), so `episode_return` is wins less losses against
random play. The recipe is configs/tic_tac_toe.py:scratch's (PPO with a value head, lr 1e-3 annealed, entropy
bonus 0.01), on the games' BPE: TextArena's observations are long (a game's transcript reaches ~1700 tokens).
Measured (seed 0, AMD EPYC, 2 cores shared; 52 min): the return against random play, sampled, -0.03 (updates 1-10:
43% wins, 47% losses) -> 0.50 (updates 351-400: 71% wins, 21% losses); docs/results.md.
"""

from jaxmarl_llm.tokenizers import GAMES_BPE
from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name = "host/textarena"
    c.env_kwargs = {"game": "TicTacToe-v0", "opponent": "random", "capacity": 2048, "turn_tokens": 1536,
                    "max_action_tokens": 4}
    c.tokenizer = GAMES_BPE
    c.model.update(max_position_embeddings=2048 + 8)
    c.policy.actions = "constrained"
    c.algo, c.group_size = "ppo", 1
    c.num_turns = 5  # the learner moves at most 5 times
    c.num_envs = 32
    c.lr, c.anneal_lr, c.ent_coef = 1e-3, True, 0.01
    c.critic.lr = 1e-2
    c.total_episodes = 32 * 400
    c.run.out_dir = "runs/textarena_tic_tac_toe"
    c.run.updates_per_chunk = 10
    return c
