"""Game data shipped under `text/data/`: nouns with attributes, questions, debate topics, writing prompts."""

from __future__ import annotations

import functools
import os

import numpy as np

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")


def _lines(name: str) -> list[str]:
    with open(os.path.join(DATA_DIR, name), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]


@functools.lru_cache(maxsize=None)
def questions() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(names, texts) of the yes/no questions of twenty questions."""
    rows = [line.split("\t") for line in _lines("questions.tsv")]
    return tuple(r[0] for r in rows), tuple(r[1] for r in rows)


@functools.lru_cache(maxsize=None)
def nouns() -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    """(words, categories, answers bool[W, Q]) with Q in the order of `questions()`."""
    names, _ = questions()
    index = {n: i for i, n in enumerate(names)}
    words, cats, rows = [], [], []
    for line in _lines("nouns.tsv"):
        word, cat, attrs = (line.split("\t") + [""])[:3]
        row = np.zeros((len(names),), bool)
        for a in attrs.split():
            if a not in index:
                raise ValueError(f"nouns.tsv: {word!r} has attribute {a!r} that questions.tsv does not define")
            row[index[a]] = True
        words.append(word)
        cats.append(cat)
        rows.append(row)
    return tuple(words), tuple(cats), np.stack(rows)


@functools.lru_cache(maxsize=None)
def debate_topics() -> tuple[str, ...]:
    return tuple(_lines("debate_topics.txt"))


@functools.lru_cache(maxsize=None)
def writing_prompts() -> tuple[str, ...]:
    return tuple(_lines("writing_prompts.txt"))


@functools.lru_cache(maxsize=None)
def argument_markers() -> tuple[str, ...]:
    """Words the rule-based debate judge credits (see debate.py)."""
    return tuple(_lines("argument_markers.txt"))
