"""Strings -> fixed id arrays, once, when an env is built.

A `Codec` wraps any tokenizer with the small interface of `jaxmarl_llm.tokenizers`
and gives the two things a jitted text game needs:

- `PieceTable`s: a list of fixed strings (feedback lines, prompts, board
  pictures, word lists) encoded and padded into `ids [K, P]` with `lens [K]`,
  so a game picks "too high" by index inside `jit`.
- a per-vocab character table `token_chars [V, C]`: the lower-cased ASCII codes
  of every token's decoded text, so actions can be parsed inside `jit` as plain
  array ops whatever the tokenizer (char, word, or a BPE from a local folder).

Pieces are encoded separately and concatenated as ids, so a transcript is the
concatenation of its pieces' encodings (for BPE that can differ from encoding
the whole text at once; the renderer decodes either the same way).
"""

from __future__ import annotations

import weakref
from typing import NamedTuple, Sequence

import jax.numpy as jnp
import numpy as np

# Character codes used by the parsers: lower-cased ASCII; whitespace -> SPACE; anything else -> OTHER.
SPACE = 32
OTHER = 127
NONE = 0  # padding, "no character"
DEFAULT_MAX_TOKEN_CHARS = 16


class PieceTable(NamedTuple):
    """K fixed strings as padded ids."""

    ids: jnp.ndarray  # [K, P] int32, padded with pad_id
    lens: jnp.ndarray  # [K] int32

    @property
    def width(self) -> int:
        return int(self.ids.shape[-1])

    def rows(self) -> tuple[tuple[int, ...], ...]:
        """Each piece's ids without padding (build time, outside `jit`): e.g. an env's `action_candidates`."""
        ids, lens = np.asarray(self.ids), np.asarray(self.lens)
        return tuple(tuple(int(t) for t in row[:n]) for row, n in zip(ids, lens))


def char_code(c: str) -> int:
    if c.isspace():
        return SPACE
    o = ord(c.lower())
    return o if 32 < o < 127 else OTHER


def text_codes(text: str) -> np.ndarray:
    """The parser's view of a string: [len(text)] int32 codes."""
    return np.asarray([char_code(c) for c in text], np.int32)


def _decode_vocab(tokenizer) -> list[str]:
    hf = getattr(tokenizer, "hf", None)
    if hf is not None:  # one call instead of V python decodes
        texts = hf.batch_decode([[i] for i in range(tokenizer.vocab_size)], skip_special_tokens=True)
        return [t if i != tokenizer.eos_id else "" for i, t in enumerate(texts)]
    unk = getattr(tokenizer, "unk_id", None)
    texts = [tokenizer.decode([i]) if i != tokenizer.eos_id else "" for i in range(tokenizer.vocab_size)]
    if unk is not None:  # one unknown character, not the five of "<unk>"
        texts[unk] = "\x7f"
    return texts


_VOCAB_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class Codec:
    """A tokenizer plus the arrays text games need; build once per env (vocab tables are cached)."""

    def __init__(self, tokenizer, max_token_chars: int = DEFAULT_MAX_TOKEN_CHARS):
        self.tokenizer = tokenizer
        self.vocab_size = int(tokenizer.vocab_size)
        self.pad_id = int(tokenizer.pad_id)
        self.eos_id = int(tokenizer.eos_id)
        key = (max_token_chars,)
        try:
            cached = _VOCAB_CACHE.setdefault(tokenizer, {})
        except TypeError:  # tokenizer not weak-referenceable
            cached = {}
        if key not in cached:
            cached[key] = self._vocab_chars(tokenizer, max_token_chars)
        self.token_chars, self.token_nchars, self.token_len = cached[key]
        self.max_token_chars = int(self.token_chars.shape[1])

    @staticmethod
    def _vocab_chars(tokenizer, max_token_chars: int) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
        texts = _decode_vocab(tokenizer)
        width = max(1, min(max_token_chars, max((len(t) for t in texts), default=1)))
        chars = np.zeros((len(texts), width), np.int32)
        nchars = np.zeros((len(texts),), np.int32)
        for i, t in enumerate(texts):
            codes = text_codes(t[:width])
            chars[i, : len(codes)] = codes
            nchars[i] = len(codes)
        full = np.asarray([len(t) for t in texts], np.int32)  # untruncated, for length-based rewards
        return jnp.asarray(chars), jnp.asarray(nchars), jnp.asarray(full)

    # ---- build-time encoding -------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text))

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def table(self, strings: Sequence[str], width: int | None = None) -> PieceTable:
        """Encode K strings into a padded table; `width` pads further (never truncates)."""
        encoded = [self.encode(s) for s in strings]
        return self.table_from_ids(encoded, width)

    def table_from_ids(self, encoded: Sequence[Sequence[int]], width: int | None = None) -> PieceTable:
        longest = max((len(e) for e in encoded), default=0)
        if width is not None and width < longest:
            raise ValueError(f"piece table width {width} < longest piece ({longest} tokens)")
        width = max(1, longest if width is None else width)
        ids = np.full((len(encoded), width), self.pad_id, np.int32)
        for i, e in enumerate(encoded):
            ids[i, : len(e)] = e
        return PieceTable(jnp.asarray(ids), jnp.asarray([len(e) for e in encoded], jnp.int32))

    def piece(self, text: str) -> PieceTable:
        """One string as a 1-row table."""
        return self.table([text])


def encode_many(codec: Codec, strings: Sequence[str]) -> list[list[int]]:
    """Batch-encode (fast path for HF tokenizers); used for large tables like board pictures."""
    hf = getattr(codec.tokenizer, "hf", None)
    if hf is not None:
        return [list(x) for x in hf(list(strings), add_special_tokens=False)["input_ids"]]
    return [codec.encode(s) for s in strings]
