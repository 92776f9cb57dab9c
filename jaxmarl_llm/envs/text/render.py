"""Readable transcripts from any text-game state or observation (logs, eval, debugging)."""

from __future__ import annotations

import numpy as np


def _arrays(x):
    if hasattr(x, "buf"):  # a TextState (or subclass)
        return x.buf, x.length
    if hasattr(x, "tokens"):  # TextObs
        return x.tokens, x.length
    if hasattr(x, "env_state"):  # wrapped state (EpisodeStats)
        return _arrays(x.env_state)
    raise TypeError(f"cannot render {type(x).__name__}: expected a text state or TextObs")


def transcripts(tokenizer, state_or_obs, index: int | None = None) -> list[str]:
    """One decoded string per agent. `index` picks one env from a batched (vmapped) state."""
    tokens, length = (np.asarray(a) for a in _arrays(state_or_obs))
    if index is not None:
        tokens, length = tokens[index], length[index]
    if tokens.ndim != 2:
        raise ValueError(f"expected tokens [A, L], got shape {tokens.shape}; pass `index` for a batch of envs")
    return [tokenizer.decode(tokens[a, : int(length[a])].tolist()) for a in range(tokens.shape[0])]
