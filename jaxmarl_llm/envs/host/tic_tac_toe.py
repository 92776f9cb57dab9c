"""Tic-tac-toe as a Python game on the host: the same texts, rules and rewards as the jitted
envs/text/tic_tac_toe.py (`history=True`), so the two can be compared move for move and timed against each other.

    env = make("host/tic_tac_toe", tokenizer=tokenizer)
"""

from __future__ import annotations

import re

from jaxmarl_llm.envs.host.bridge import HostTextEnv, Turn
from jaxmarl_llm.envs.text import tic_tac_toe as ttt

_MOVE = re.compile(r"move", re.IGNORECASE)


def parse_move(reply: str, exact: bool = False) -> int | None:
    """Cell 0..8 from `Move: N` (N 1..9: the keyword, then ':' / '=' / spaces, one or two digits); None if
    malformed. `exact`: nothing else in the reply but spaces."""
    found = _MOVE.search(reply)
    if found is None:
        return None
    rest = reply[found.end():].lstrip(" \t\n:=")
    digits = re.match(r"\d+", rest)
    if digits is None or len(digits.group()) > 2 or not 1 <= int(digits.group()) <= 9:
        return None
    if exact and (reply[: found.start()].strip() or rest[digits.end():].strip()):
        return None
    return int(digits.group()) - 1


class PyTicTacToe:
    """One game: X (player 0) moves first; a win +1 / -1, a draw 0, an illegal or unparsable move -2 to the mover
    and the end of the game."""

    def __init__(self, board_style: str = "grid", exact: bool = False):
        self.style, self.exact = board_style, exact

    def reset(self, seed: int) -> tuple[list[str], int]:
        self.board, self.mover = [ttt.EMPTY] * 9, 0
        empty = ttt.board_picture(self.board, self.style)
        return [ttt.PROMPT.format(mark=m) + empty + ttt.STATUS[s]
                for m, s in (("X", ttt.YOUR_MOVE), ("O", ttt.THEIR_MOVE))], 0

    def step(self, action: str) -> Turn:
        me = self.mover
        cell = parse_move(action, self.exact)
        legal = cell is not None and self.board[cell] == ttt.EMPTY
        no = [False, False]
        if not legal:
            texts = ["\n" + ttt.STATUS[ttt.ILLEGAL_YOU if p == me else ttt.ILLEGAL_THEM] for p in (0, 1)]
            rewards = [-2.0 if p == me else 0.0 for p in (0, 1)]
            info = {"format_error": [cell is None and p == me for p in (0, 1)], "illegal": [p == me for p in (0, 1)],
                    "won": no, "draw": no}
            return Turn(texts, rewards, True, 1 - me, info)
        self.board[cell] = me + 1
        board = tuple(self.board)
        won = ttt._py_winner(board) == me + 1
        draw = not won and all(board)
        texts = [ttt.board_picture(board, self.style) + ttt.STATUS[ttt.status_after(board, p)] for p in (0, 1)]
        rewards = [(1.0 if p == me else -1.0) if won else 0.0 for p in (0, 1)]
        self.mover = 1 - me
        info = {"format_error": no, "illegal": no, "won": [won and p == me for p in (0, 1)], "draw": [draw, draw]}
        return Turn(texts, rewards, won or draw, self.mover, info)

    def legal(self) -> list[str]:
        """The empty cells' moves; none once someone has won."""
        if ttt._py_winner(tuple(self.board)):
            return []
        return [f"Move: {c + 1}" for c in range(9) if self.board[c] == ttt.EMPTY]


class HostTicTacToe(HostTextEnv):
    """envs/text/tic_tac_toe.py's game (with history) played in Python through the bridge."""

    def __init__(self, tokenizer=None, capacity: int = 640, max_action_tokens: int = 8, board: str = "grid",
                 exact: bool = False, turn_tokens: int = 48):
        super().__init__(lambda: PyTicTacToe(board, exact), "tic_tac_toe", ("x", "o"), tokenizer, capacity,
                         max_action_tokens, turn_tokens, info_keys=("format_error", "illegal", "won", "draw"),
                         candidates=tuple(f"Move: {c + 1}" for c in range(9)))
