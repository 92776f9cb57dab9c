"""TextArena's games through the host bridge: `make("host/textarena", game="TicTacToe-v0")`.

TextArena (pip `textarena`, the `[test]` extra; offline games only) keeps each player's observation as one
growing text (its `LLMObservationWrapper`) and wraps a reply in brackets when it has none (`4` -> `[4]`), as its
own agents see it. `TextArenaGame` plays one episode: a player's transcript gets what its observation gained
since it last moved (TextArena writes the reply into it too, `[Player 1] [4]`, after the reply itself), the
rewards are TextArena's at the end (`close()`), and the legal replies are the last `Available Moves: '[0]', ...`
line of the mover's observation (the board games that print one), so `policy.actions="constrained"` samples only
them. TextArena's own rules stand: in its tic-tac-toe a first invalid move is answered with a request to move
again, a second loses.
"""

from __future__ import annotations

import re

from jaxmarl_llm.envs.host.bridge import HostTextEnv, Turn

_MOVES_LINE = re.compile(r"Available Moves: (.*)")
_MOVE = re.compile(r"'(\[[^\]]*\])'")


class TextArenaGame:
    """One episode of TextArena game `game` (an id such as "TicTacToe-v0") for two players.

    opponent="random": the game plays one seat itself with a uniformly random legal move (its `Available Moves`)
    and the learner, the only agent, sits in seat `seed % 2`; "" (default): both seats are agents."""

    def __init__(self, game: str, opponent: str = ""):
        import random

        import textarena

        if opponent not in ("", "random"):
            raise ValueError(f"opponent must be '' (two agents) or 'random', got {opponent!r}")
        self.env, self.opponent, self.random = textarena.make(game), opponent, random.Random()
        self.seen, self.mover, self.last, self.seat = ["", ""], 0, "", 0

    @property
    def agents(self) -> tuple[int, ...]:
        """The seats the trainer plays."""
        return (self.seat,) if self.opponent else (0, 1)

    def _observe(self) -> list[str]:
        """The mover's new text (what its observation gained since it last moved), nothing for the others."""
        self.mover, obs = self.env.get_observation()
        new = obs[len(self.seen[self.mover]):] if obs.startswith(self.seen[self.mover]) else obs
        self.seen[self.mover], self.last = obs, obs
        return [new if seat == self.mover else "" for seat in self.agents]

    def _opponent_moves(self) -> bool:
        """The built-in opponent plays until the learner is to move; True if the game ended."""
        while self.opponent and self.mover != self.seat:
            done, _ = self.env.step(self.random.choice(self.legal()))
            if done:
                return True
            self.mover, self.last = self.env.get_observation()
        return False

    def reset(self, seed: int) -> tuple[list[str], int]:
        self.env.reset(num_players=2, seed=seed % (1 << 32))
        self.random.seed(seed)
        self.seat = seed % 2 if self.opponent else 0
        self.mover, self.last = self.env.get_observation()
        self._opponent_moves()  # a game cannot end before the learner's first move
        return self._observe(), self.agents.index(self.mover)

    def step(self, action: str) -> Turn:
        me = self.mover
        done, _ = self.env.step(action)
        if not done:
            self.mover, self.last = self.env.get_observation()
            done = self._opponent_moves()
        if not done:
            texts = self._observe()
            return Turn(texts, [0.0] * len(self.agents), False, self.agents.index(self.mover), {})
        rewards, info = self.env.close()
        r = [float(rewards[p]) for p in (0, 1)]
        won = [r[p] > r[1 - p] for p in (0, 1)]
        flags = {"won": [won[p] for p in self.agents], "draw": [r[0] == r[1]] * len(self.agents),
                 "illegal": [bool(info.get(p, {}).get("invalid_move", False)) and p == me for p in self.agents]}
        return Turn([""] * len(self.agents), [r[p] for p in self.agents], True, 0, flags)

    def legal(self) -> list[str]:
        """The replies of the mover's last `Available Moves:` line (none once the game printed none)."""
        lines = _MOVES_LINE.findall(self.last)
        return _MOVE.findall(lines[-1]) if lines else []


class TextArenaEnv(HostTextEnv):
    """A two-player TextArena game, both seats agents or (`opponent="random"`) one agent against TextArena's game
    playing a random legal move; `candidates` lists every reply its `Available Moves` can name (tic-tac-toe: `[0]`
    .. `[8]`), none for free text only."""

    def __init__(self, tokenizer=None, game: str = "TicTacToe-v0", opponent: str = "", capacity: int = 2048,
                 max_action_tokens: int = 8, turn_tokens: int = 512, candidates: tuple[str, ...] | None = None):
        if candidates is None:
            candidates = tuple(f"[{c}]" for c in range(9)) if game.startswith("TicTacToe") else ()
        agents = ("learner",) if opponent else ("player0", "player1")
        TextArenaGame(game, opponent)  # a bad game id or opponent fails here, with TextArena's own message
        super().__init__(lambda: TextArenaGame(game, opponent), game, agents, tokenizer, capacity, max_action_tokens,
                         turn_tokens, info_keys=("won", "draw", "illegal"), candidates=tuple(candidates))
