# Source of data/arithmetic_pairs.jsonl: DPO preference pairs for text/arithmetic with num_ops=1, max_operand=9.
# Regenerate with: python build_arithmetic_pairs.py <this folder>  (deterministic: the same file every time).
# Each line is {"prompt", "chosen", "rejected"}: the prompt is exactly what the env shows (arithmetic.PROMPT,
# the problem, " = ?\n"), chosen is the right "Answer: N", rejected a wrong one (off by one or two, or the
# result of the wrong operator), so a model trained on it can be evaluated in the env itself.
import json
import os
import random
import sys

PROMPT = "Solve the arithmetic problem. Reply with 'Answer: N'.\nProblem: "  # = arithmetic.PROMPT
OPS = {" + ": lambda a, b: a + b, " - ": lambda a, b: a - b, " * ": lambda a, b: a * b}
NUM_PAIRS, MAX_OPERAND, SEED = 48, 9, 0


def pairs():
    rng = random.Random(SEED)
    problems = [(a, op, b) for a in range(1, MAX_OPERAND + 1) for op in OPS for b in range(1, MAX_OPERAND + 1)]
    for a, op, b in rng.sample(problems, NUM_PAIRS):
        right = OPS[op](a, b)
        wrong = sorted(({OPS[o](a, b) for o in OPS} | {right + d for d in (-2, -1, 1, 2)}) - {right})
        yield {"prompt": f"{PROMPT}{a}{op}{b} = ?\n", "chosen": f"Answer: {right}", "rejected": f"Answer: {rng.choice(wrong)}"}


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(out, "arithmetic_pairs.jsonl"), "w", encoding="utf-8") as f:
        for row in pairs():
            f.write(json.dumps(row) + "\n")
