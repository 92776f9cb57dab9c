# Source of data/arithmetic_sft.jsonl: SFT transcripts for text/arithmetic with num_ops=1, max_operand=9.
# Regenerate with: python build_arithmetic_sft.py <this folder>  (deterministic: the same file every time).
# Each line is {"prompt", "completion"}: the prompt is exactly what the env shows (arithmetic.PROMPT, the
# problem, " = ?\n"), the completion the right "Answer: N". Every one of the 243 problems appears once (in a
# seeded random order), so a model trained on it can be evaluated in the env itself.
import json
import os
import random
import sys

PROMPT = "Solve the arithmetic problem. Reply with 'Answer: N'.\nProblem: "  # = arithmetic.PROMPT
OPS = {" + ": lambda a, b: a + b, " - ": lambda a, b: a - b, " * ": lambda a, b: a * b}
MAX_OPERAND, SEED = 9, 0


def transcripts():
    problems = [(a, op, b) for a in range(1, MAX_OPERAND + 1) for op in OPS for b in range(1, MAX_OPERAND + 1)]
    random.Random(SEED).shuffle(problems)
    for a, op, b in problems:
        yield {"prompt": f"{PROMPT}{a}{op}{b} = ?\n", "completion": f"Answer: {OPS[op](a, b)}"}


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(out, "arithmetic_sft.jsonl"), "w", encoding="utf-8") as f:
        for row in transcripts():
            f.write(json.dumps(row) + "\n")
