"""A PettingZoo AEC game through the host bridge: `make("host/pettingzoo_tic_tac_toe")`.

`PettingZooGame(make_env, describe, replies)` plays one episode of any AEC env with discrete actions: the player
to move reads `describe(agent, observation)` (the env's array observation in words), replies one of `replies`
(reply k is action k; the env's `action_mask` says which are legal, so `policy.actions="constrained"` samples
only those), and each player's return is the sum of the env's rewards to it. A reply that is not a legal one ends
the game: -1 to the mover, 0 to the others (`illegal`). The example is PettingZoo's classic tic-tac-toe
(`pettingzoo[classic]`, in the `[test]` extra): its observation, two 3x3 planes (the mover's marks and the
opponent's), drawn as a board whose cell k + 1 is action k.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxmarl_llm.envs.host.bridge import HostTextEnv, Turn


class PettingZooGame:
    def __init__(self, make_env: Callable[[], object], describe: Callable[[str, dict], str], replies: tuple[str, ...]):
        self.env, self.describe, self.replies = make_env(), describe, tuple(replies)
        self.agents = tuple(self.env.possible_agents)
        self.returns = dict.fromkeys(self.agents, 0.0)

    def _texts(self) -> list[str]:
        mover = self.env.agent_selection
        return [self.describe(mover, self.env.observe(mover)) if a == mover else "" for a in self.agents]

    def reset(self, seed: int) -> tuple[list[str], int]:
        self.env.reset(seed=seed % (1 << 31))
        self.returns = dict.fromkeys(self.agents, 0.0)
        return self._texts(), self.agents.index(self.env.agent_selection)

    def step(self, action: str) -> Turn:
        mover, reply, none = self.env.agent_selection, action.strip(), [False] * len(self.agents)
        if reply not in self.legal():
            rewards = [-1.0 if a == mover else 0.0 for a in self.agents]
            return Turn([""] * len(self.agents), rewards, True, 0, {"illegal": [a == mover for a in self.agents],
                                                                     "won": none})
        self.env.step(self.replies.index(reply))
        rewards = [float(self.env.rewards.get(a, 0.0)) for a in self.agents]
        for a, r in zip(self.agents, rewards):
            self.returns[a] += r
        if all(self.env.terminations.get(a, True) or self.env.truncations.get(a, True) for a in self.agents):
            return Turn([""] * len(self.agents), rewards, True, 0,
                        {"illegal": none, "won": [self.returns[a] > 0 for a in self.agents]})
        return Turn(self._texts(), rewards, False, self.agents.index(self.env.agent_selection),
                    {"illegal": none, "won": none})

    def legal(self) -> list[str]:
        mask = np.asarray(self.env.observe(self.env.agent_selection)["action_mask"], bool)
        return [r for r, ok in zip(self.replies, mask) if ok]


def tic_tac_toe_board(agent: str, observation: dict) -> str:
    """PettingZoo tic-tac-toe's planes in words: the seat, the board (an empty cell shows the number of the reply
    that fills it), the turn. Plane 0 holds the mover's marks, plane 1 the opponent's."""
    planes = np.asarray(observation["observation"])
    mine, theirs = ("X", "O") if agent == "player_1" else ("O", "X")
    rows = []
    for r in range(3):
        cells = []
        for c in range(3):
            k = 3 * r + c  # action k fills observation cell [k // 3, k % 3]
            cells.append(mine if planes[r, c, 0] else theirs if planes[r, c, 1] else str(k + 1))
        rows.append("|".join(cells))
    return f"You are {mine}.\n" + "\n".join(rows) + "\nYour move.\n"


class PettingZooTicTacToe(HostTextEnv):
    """PettingZoo's classic tic-tac-toe (`tictactoe_v3`), replies `Move: 1` .. `Move: 9`."""

    def __init__(self, tokenizer=None, capacity: int = 512, max_action_tokens: int = 8, turn_tokens: int = 48):
        from pettingzoo.classic import tictactoe_v3

        replies = tuple(f"Move: {k + 1}" for k in range(9))
        super().__init__(lambda: PettingZooGame(tictactoe_v3.env, tic_tac_toe_board, replies), "pettingzoo_tic_tac_toe",
                         ("player_1", "player_2"), tokenizer, capacity, max_action_tokens, turn_tokens,
                         info_keys=("illegal", "won"), candidates=replies)
