"""Write a Python function; hidden tests grade it in the sandbox (MRLM's code-execution environment).

    env = make("host/code", tokenizer=tokenizer, split="train")

One agent, one turn: the prompt is a task (`Write a function that ... def name(args):`), the reply is Python
source, and the reward is the share of the task's hidden tests it passes (sandbox.py: a contained subprocess per
reply; `workers` replies are graded side by side). The tasks ship in data/code_tasks.jsonl (50 short functions,
4-6 asserts each, a reference solution that passes them); `split` keeps every fifth task out for evaluation
("test") or trains on the rest ("train"), "all" plays every task. A reply returning an object whose `==` always
holds would pass a bare `assert f(x) == y`; every shipped task has a test that checks the type too.
"""

from __future__ import annotations

import json
import os

from jaxmarl_llm.envs.host.bridge import HostTextEnv, Turn
from jaxmarl_llm.envs.host.sandbox import Limits, grade

TASKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "code_tasks.jsonl")
SPLITS = ("all", "train", "test")


def load_tasks(path: str = TASKS, split: str = "all") -> list[dict]:
    """The tasks of `path` (JSONL: name, prompt, entry, tests, solution) in `split` (test: every fifth)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    with open(path) as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    keep = {"all": lambda i: True, "train": lambda i: i % 5 != 4, "test": lambda i: i % 5 == 4}[split]
    return [t for i, t in enumerate(tasks) if keep(i)]


class CodeTask:
    """One episode: a task drawn by the seed, one reply, graded."""

    def __init__(self, tasks: list[dict], limits: Limits):
        self.tasks, self.limits, self.task = tasks, limits, tasks[0]

    def reset(self, seed: int) -> tuple[list[str], int]:
        self.task = self.tasks[seed % len(self.tasks)]
        return [self.task["prompt"] + "\n"], 0

    def step(self, action: str) -> Turn:
        graded = grade(action, self.task["tests"], self.limits)
        return Turn([f"\n{graded.passed}/{graded.total} tests passed.\n"], [graded.share], True, 0,
                    {"solved": [graded.passed == graded.total]})


class CodeEnv(HostTextEnv):
    def __init__(self, tokenizer=None, tasks: str = TASKS, split: str = "all", capacity: int = 512,
                 max_action_tokens: int = 256, turn_tokens: int = 32, workers: int = 4, cpu_seconds: int = 2,
                 wall_seconds: float = 5.0):
        chosen = load_tasks(tasks, split)
        limits = Limits(cpu_seconds=int(cpu_seconds), wall_seconds=float(wall_seconds))
        super().__init__(lambda: CodeTask(chosen, limits), "code", ("coder",), tokenizer, capacity, max_action_tokens,
                         turn_tokens, info_keys=("solved",), workers=workers)
        self.tasks = chosen
