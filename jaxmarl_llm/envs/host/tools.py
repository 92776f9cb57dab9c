"""Tool use on the host: a product to find, a calculator and a Python interpreter to call, and a checker.

    env = make("host/tools", tokenizer=tokenizer, digits=4, checker=True)

The solver is asked `What is 4821 * 3719?`. Each of its replies (at most `max_turns`) is a tool call or the
answer, and what a tool returns is appended to its transcript before its next turn:

- `calc: 4821*3719` (also `+`, `-`): the calculator, `= 17929299`;
- `python: print(4821 * 3719)`: the code runs in the sandbox (sandbox.run: no network, no files outside its own
  folder, CPU, memory and output limits) and what it prints comes back, cut to `tool_chars` characters; an
  exception as its last line (`ZeroDivisionError: ...`), a run stopped by a limit as `(timeout)`, `(cpu)`, ...;
- `Answer: N`.

Anything else is a format error (-1, an `Invalid.` line, the turn is spent). Without a checker the answer ends the
episode: +1 when N is the product. With `checker=True` a second agent reads the solver's replies and the tools'
results and replies `Accept` or `Reject`: an accepted answer ends the episode (the solver +1 if it is right); a
rejected one sends the solver back (`Rejected. Try again.`) while it has turns left. The checker earns +1 for a
verdict that is right (accepting the product, rejecting anything else) and -1 otherwise; a reply besides the two
words is a rejection and a format error. `tools` chooses which tools exist (a call to another is a format error).
The same products as the jitted `text/calculator` (its calculator gives the same numbers); this one runs in
Python through the host bridge, where any tool can live.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from jaxmarl_llm.envs.host.bridge import HostTextEnv, Turn
from jaxmarl_llm.envs.host.sandbox import Limits, run

TOOLS = ("calc", "python")
CALL = re.compile(r"\s*calc\s*:?\s*(\d{1,9})\s*([-+*])\s*(\d{1,9})\s*", re.IGNORECASE)
PYTHON = re.compile(r"\s*python\s*:(.*)", re.IGNORECASE | re.DOTALL)
ANSWER = re.compile(r"\s*answer\s*:?\s*(-?\d{1,18})\s*", re.IGNORECASE)
VERDICT = re.compile(r"\s*(accept|reject)\s*\.?\s*", re.IGNORECASE)
INFO_KEYS = ("solved", "called", "format_error", "verdict_right")


def solver_prompt(tools: tuple[str, ...]) -> str:
    ways = {"calc": "'calc: A*B' to use a calculator", "python": "'python: <code>' to run Python"}
    return "Multiply. Reply " + ", ".join(ways[t] for t in tools) + (", or " if tools else "") + "'Answer: N'.\n"


CHECKER_PROMPT = "You check a solver's answer to a product. After its answer reply 'Accept' or 'Reject'.\n"


def operands(rng: np.random.Generator, digits: int) -> tuple[int, int]:
    """Two operands of `digits` digits (one digit: 2..9), as text/calculator draws them."""
    low = 2 if digits == 1 else 10 ** (digits - 1)
    a, b = rng.integers(low, 10 ** digits, size=2)
    return int(a), int(b)


class ToolTask:
    """One episode (HostGame): a product, the solver's tool calls and answers, the checker's verdicts."""

    def __init__(self, digits: int, tools: tuple[str, ...], checker: bool, max_turns: int, tool_chars: int,
                 limits: Limits):
        self.digits, self.tools, self.checker, self.max_turns = digits, tools, checker, max_turns
        self.tool_chars, self.limits = tool_chars, limits

    def reset(self, seed: int) -> tuple[list[str], int]:
        self.a, self.b = operands(np.random.default_rng(seed), self.digits)
        self.turns, self.answer = 0, None
        problem = f"What is {self.a} * {self.b}?\n"
        texts = [solver_prompt(self.tools) + problem]
        if self.checker:
            texts.append(CHECKER_PROMPT + problem)
        return texts, 0

    def _turn(self, solver: str, checker: str, rewards: tuple[float, float], done: bool, mover: int,
              **info: tuple[bool, bool]) -> Turn:
        n = 2 if self.checker else 1
        flags = {k: list(info.get(k, (False, False)))[:n] for k in INFO_KEYS}
        return Turn([solver, checker][:n], list(rewards)[:n], done, mover, flags)

    def _tool(self, reply: str) -> str | None:
        """What a tool call returns (None: the reply is no call of an available tool)."""
        call = CALL.fullmatch(reply)
        if call and "calc" in self.tools:
            x, op, y = int(call.group(1)), call.group(2), int(call.group(3))
            return f"= {x + y if op == '+' else x - y if op == '-' else x * y}\n"
        code = PYTHON.fullmatch(reply)
        if code and "python" in self.tools:
            ran = run(code.group(1).strip(), self.limits)
            out = ran.output[: self.tool_chars] + (f"({ran.failure})" if ran.failure else "")
            return out if out.endswith("\n") else out + "\n"
        return None

    def step(self, action: str) -> Turn:
        return self._verdict(action) if self.checker and self.answer is not None else self._solve(action)

    def _solve(self, reply: str) -> Turn:
        self.turns += 1
        last = self.turns >= self.max_turns
        seen = f"Solver: {reply.strip()}\n"  # what the checker reads of this turn
        said = self._tool(reply)
        if said is not None:
            return self._turn("\n" + said, seen + said, (0.0, 0.0), last, 0, called=(True, False))
        answer = ANSWER.fullmatch(reply)
        if answer is None:
            text = "\nInvalid. Reply a tool call or 'Answer: N'.\n"
            return self._turn(text, seen, (-1.0, 0.0), last, 0, format_error=(True, False))
        value = int(answer.group(1))
        right = value == self.a * self.b
        if not self.checker:
            return self._turn("\n", "", (float(right), 0.0), True, 0, solved=(right, False))
        self.answer = value
        return self._turn("\n", seen + "Accept or reject?\n", (0.0, 0.0), False, 1)

    def _verdict(self, reply: str) -> Turn:
        verdict = VERDICT.fullmatch(reply)
        accept = verdict is not None and verdict.group(1).lower() == "accept"
        right = self.answer == self.a * self.b
        good = accept == right  # accept the product, reject anything else
        self.answer = None
        flags = {"verdict_right": (False, good), "format_error": (False, verdict is None)}
        if accept:
            return self._turn("\n", "\n", (float(right), 1.0 if good else -1.0), True, 0, solved=(right, False),
                              **flags)
        last = self.turns >= self.max_turns
        return self._turn("\nRejected. Try again.\n", "\n", (0.0, 1.0 if good else -1.0), last, 0, **flags)


class ToolEnv(HostTextEnv):
    def __init__(self, tokenizer=None, digits: int = 4, tools: tuple[str, ...] = TOOLS, checker: bool = False,
                 max_turns: int = 3, capacity: int = 512, max_action_tokens: int = 32, turn_tokens: int = 96,
                 tool_chars: int = 64, workers: int = 4, cpu_seconds: int = 1, wall_seconds: float = 3.0):
        if not 1 <= int(digits) <= 9:
            raise ValueError(f"digits must be in 1..9, got {digits}")
        unknown = sorted(set(tools) - set(TOOLS))
        if unknown:
            raise ValueError(f"tools: {', '.join(unknown)} unknown; the tools are {', '.join(TOOLS)}")
        limits = Limits(cpu_seconds=int(cpu_seconds), wall_seconds=float(wall_seconds))
        game = functools.partial(ToolTask, int(digits), tuple(tools), bool(checker), int(max_turns), int(tool_chars),
                                 limits)
        agents = ("solver", "checker") if checker else ("solver",)
        super().__init__(game, "tools", agents, tokenizer, capacity, max_action_tokens, turn_tokens,
                         info_keys=INFO_KEYS, workers=workers)
