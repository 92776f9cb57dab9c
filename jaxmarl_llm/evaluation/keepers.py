"""Roles a person plays that are not seats of the game: the env's own part, answered by a person (play.py).

Guess the number has one seat, the guesser; the secret lives in the env. To let a person keep the secret, each of
the agent's guesses is answered by the person (too high / too low / correct), and before the env steps, its secret
is set to a number that gives that answer and agrees with every earlier one. The env then writes its own
feedback, so the agent reads exactly the transcript the game would have shown it; an answer that contradicts the
earlier ones is refused and asked again.

    keeper = KEEPERS[type(env).__name__]
    secret = keeper.secret(state, guess, answer)    # ValueError: the answer contradicts the earlier ones
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple


class Keeper(NamedTuple):
    role: str  # what the person is ("the secret keeper")
    answers: dict[str, str]  # what the person may type -> the answer it stands for
    question: str  # printed before each answer, formatted with the agent's move: {move}
    move: Callable[[str], int | None]  # the agent's reply -> its move (None: the env refuses it, nothing to answer)
    secret: Callable[[object, int, str], int]  # (env state, move, answer) -> the env's secret for that answer


HIGH, LOW, CORRECT = "too high", "too low", "correct"


def guess_of(reply: str) -> int | None:
    """The number of a `Guess: N` reply (None when there is none; the env then says the reply is invalid)."""
    found = re.search(r"\d+", reply)
    return int(found.group()) if found else None


def guess_number_secret(state, guess: int, answer: str) -> int:
    """A secret in the interval the earlier answers leave ([state.low, state.high]) that makes `guess` get
    `answer`: the interval's low end for too high, its high end for too low, the guess for correct."""
    low, high = int(state.low), int(state.high)
    ok = {HIGH: low < guess, LOW: guess < high, CORRECT: low <= guess <= high}[answer]
    if not ok:
        raise ValueError(f"{answer!r} contradicts your earlier answers: the number is from {low} to {high}")
    return {HIGH: low, LOW: high, CORRECT: guess}[answer]


KEEPERS: dict[str, Keeper] = {
    "GuessNumber": Keeper(
        role="the secret keeper", answers={"h": HIGH, "high": HIGH, "l": LOW, "low": LOW, "c": CORRECT,
                                           "correct": CORRECT},
        question="the agent guesses {move}: too high (h), too low (l) or correct (c)?> ",
        move=guess_of, secret=guess_number_secret),
}
