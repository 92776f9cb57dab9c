"""Training data from files: SFT transcripts and DPO preference pairs as JSONL, tokenized into fixed-width rows.

    rows = load_transcripts(path, tokenizer, max_length)   # Transcripts [N, L]: {"prompt", "completion"} or {"turns"}
    pairs = load_pairs(path, tokenizer, max_length)        # Pairs [N, 2, L]: {"prompt", "chosen", "rejected"}

Every bad line is one ConfigError naming file:line (jsonl.py reads the lines).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from jaxmarl_llm.data import jsonl
from jaxmarl_llm.data.collect import Transcripts
from jaxmarl_llm.errors import ConfigError

PAIR_KEYS = ("prompt", "chosen", "rejected")


class Pairs(NamedTuple):
    """Preference pairs in fixed-width buffers; axis 1 is (chosen, rejected)."""

    tokens: jax.Array  # [N, 2, L] int32 model input
    targets: jax.Array  # [N, 2, L] int32 the token scored at each position (= tokens, except eos after game moves)
    mask: jax.Array  # [N, 2, L] bool: scored positions (the response and its eos)
    valid: jax.Array  # [N] bool: pairs that count (game: the returns differ)


def load_pairs(path: str, tokenizer, max_length: int) -> Pairs:
    """Tokenize a JSONL preference file into [N, 2, max_length] buffers (numpy); ConfigError names file:line."""
    rows = []
    for at, item in jsonl.read_objects(path, f"config.pairs_path: {path}",
                                       '{"prompt": ..., "chosen": ..., "rejected": ...}', "pairs"):
        if not isinstance(item, dict):
            raise ConfigError(f"{at}: expected a JSON object with keys {', '.join(PAIR_KEYS)}")
        for key in PAIR_KEYS:
            if not isinstance(item.get(key), str):
                got = "is missing" if key not in item else f"is {type(item[key]).__name__}, not a string"
                raise ConfigError(f"{at}: key {key!r} {got}; every line needs string "
                                  f"{', '.join(PAIR_KEYS)}")
        if item["chosen"] == item["rejected"]:
            raise ConfigError(f"{at}: chosen and rejected are the same text; drop the line")
        prompt = list(tokenizer.encode(item["prompt"]))
        sides = [list(tokenizer.encode(item[k])) + [tokenizer.eos_id] for k in ("chosen", "rejected")]
        need = len(prompt) + max(len(s) for s in sides)
        if need > max_length:
            raise ConfigError(f"{at}: the pair needs {need} tokens (prompt {len(prompt)} + the longer "
                              f"response and eos) but config.max_length is {max_length}; raise config.max_length "
                              "to at least that or shorten the line")
        if not prompt:
            raise ConfigError(f"{at}: empty prompt; a response is scored after its prompt")
        rows.append((prompt, sides))
    n = len(rows)
    tokens = np.full((n, 2, max_length), tokenizer.pad_id, np.int32)
    mask = np.zeros((n, 2, max_length), bool)
    for i, (prompt, sides) in enumerate(rows):
        for j, response in enumerate(sides):
            seq = prompt + response
            tokens[i, j, : len(seq)] = seq
            mask[i, j, len(prompt): len(seq)] = True
    return Pairs(tokens=tokens, targets=tokens.copy(), mask=mask, valid=np.ones((n,), bool))


FILE_KEYS = ("prompt", "completion")


def _file_row(item, where: str) -> list[tuple[str, bool]]:
    """One JSONL object -> [(text, is_move)]: context and moves in transcript order; ConfigError on bad shape."""
    if not isinstance(item, dict):
        raise ConfigError(f'{where}: expected a JSON object {{"prompt": ..., "completion": ...}} or {{"turns": [...]}}')
    if "turns" in item:
        turns = item["turns"]
        if not (isinstance(turns, list) and len(turns) >= 2 and all(isinstance(t, str) for t in turns)):
            raise ConfigError(f"{where}: 'turns' must be a list of at least two strings (context, move, context, "
                              "move, ...: even entries are the prompt and the env's replies, odd ones the targets)")
        if any(not t for t in turns[::2]):
            raise ConfigError(f"{where}: an empty context entry in 'turns'; the prompt and every reply after a "
                              "move need text (the move's eos target sits on the reply's first token)")
        pieces = [(t, i % 2 == 1) for i, t in enumerate(turns)]
    else:
        for key in FILE_KEYS:
            if not isinstance(item.get(key), str):
                got = "is missing" if key not in item else f"is {type(item[key]).__name__}, not a string"
                raise ConfigError(f"{where}: key {key!r} {got}; every line needs string "
                                  f'{" and ".join(FILE_KEYS)} (or a "turns" list)')
        pieces = [(item["prompt"], False), (item["completion"], True)]
    if not pieces[0][0]:
        raise ConfigError(f"{where}: empty prompt; a target is predicted from the tokens before it")
    return pieces


def load_transcripts(path: str, tokenizer, max_length: int, what: str = "config.max_length") -> Transcripts:
    """Tokenize a JSONL transcript file into [N, max_length] rows (numpy); ConfigError names file:line.

    Each string is encoded on its own (as the env builds transcripts from pre-encoded pieces). Moves
    and an eos after each are targets; the input is the transcript as the env writes it, which has
    no eos, so the eos target sits where the next context starts (at the end, an eos is appended).
    """
    rows = []
    for at, item in jsonl.read_objects(path, f"config.data_path: {path}", '{"prompt": ..., "completion": ...}',
                                       "transcripts"):
        tokens, spans = [], []
        for text, move in _file_row(item, at):
            ids = list(tokenizer.encode(text))
            if move:
                spans.append((len(tokens), len(tokens) + len(ids)))
            tokens += ids
        if spans[-1][1] == len(tokens):  # the last piece is a move: its eos ends the row
            tokens.append(tokenizer.eos_id)
        if len(tokens) > max_length:
            raise ConfigError(f"{at}: the row needs {len(tokens)} tokens (the eos after each move "
                              f"included) but {what} is {max_length}; raise config.max_length to at least "
                              "that or shorten the line")
        rows.append((tokens, spans))
    n, t = len(rows), max(len(spans) for _, spans in rows)
    tokens = np.full((n, max_length), tokenizer.pad_id, np.int32)
    turn_mask = np.zeros((n, t, max_length), bool)
    for i, (seq, spans) in enumerate(rows):
        tokens[i, : len(seq)] = seq
        for j, (s, e) in enumerate(spans):
            turn_mask[i, j, s: e + 1] = True
    targets = tokens.copy()
    ends = [(i, e) for i, (_, spans) in enumerate(rows) for _, e in spans]
    targets[tuple(np.asarray(ends).T)] = tokenizer.eos_id
    zeros = np.zeros((n,), np.float32)
    return Transcripts(tokens=tokens, targets=targets, mask=turn_mask.any(1), turn_mask=turn_mask,
                       solved=zeros, returns=zeros)
