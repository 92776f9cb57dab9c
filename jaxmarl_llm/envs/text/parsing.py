"""Parsing generated actions inside `jit`, for any tokenizer.

Token ids are first turned into the lower-cased character codes of their
decoded text through the codec's per-vocab table (`decode_chars`), then the
parsers work on characters with array ops: find a keyword, read an integer,
match against a fixed list of strings. Nothing here can raise: a malformed
action comes back as `ok=False` / index -1, which the game scores as a format
error.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.text.codec import NONE, SPACE, text_codes

_ZERO, _NINE, _MINUS, _COLON, _EQUAL = ord("0"), ord("9"), ord("-"), ord(":"), ord("=")


def decode_chars(token_chars: jax.Array, token_nchars: jax.Array, tokens: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One action's characters: tokens [M], length [] -> (chars [M*C], n []); chars after n are NONE."""
    m = tokens.shape[0]
    c = token_chars.shape[1]
    valid = jnp.arange(m) < length
    if c == 1:  # at most one character per token (char tokenizers): specials stay as NONE in place
        return jnp.where(valid, token_chars[tokens, 0], NONE), jnp.clip(length, 0, m)
    per_tok = token_chars[tokens]  # [M, C]
    cnt = jnp.where(valid, token_nchars[tokens], 0)  # [M]
    starts = jnp.cumsum(cnt) - cnt
    col = jnp.arange(c)
    dest = jnp.where(col[None, :] < cnt[:, None], starts[:, None] + col[None, :], m * c)  # [M, C]
    chars = jnp.full((m * c,), NONE, jnp.int32).at[dest.reshape(-1)].set(per_tok.reshape(-1), mode="drop")
    return chars, cnt.sum()


def is_digit(chars: jax.Array) -> jax.Array:
    return (chars >= _ZERO) & (chars <= _NINE)


def digit_run(chars: jax.Array, n: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(digit [C] bool: the digits among the first n characters, the first one's position, the last one's; -1
    without any). For a reply that parsed exactly (`Guess: 517`), its number's digits and their span."""
    pos = jnp.arange(chars.shape[0])
    digit = is_digit(chars) & (pos < n)
    return digit, jnp.argmax(digit), jnp.max(jnp.where(digit, pos, -1))


def is_alnum(chars: jax.Array) -> jax.Array:
    return is_digit(chars) | ((chars >= ord("a")) & (chars <= ord("z")))


def compact_alnum(chars: jax.Array, n: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Keep letters and digits only ('Is it alive?' -> 'isitalive'): robust matching of names."""
    size = chars.shape[0]
    keep = is_alnum(chars) & (jnp.arange(size) < n)
    dest = jnp.where(keep, jnp.cumsum(keep) - 1, size)
    out = jnp.full((size,), NONE, jnp.int32).at[dest].set(chars, mode="drop")
    return out, keep.sum()


def _windows(chars: jax.Array, width: int) -> jax.Array:
    """[N, width]: the characters starting at each position (NONE past the end)."""
    return jnp.stack([_shift(chars, k) for k in range(width)], axis=1)


def _shift(chars: jax.Array, k: int) -> jax.Array:
    """chars[k:] padded with NONE to the same size (static slices, no gather)."""
    if k == 0:
        return chars
    if k >= chars.shape[0]:
        return jnp.zeros_like(chars)
    return jnp.concatenate([chars[k:], jnp.zeros((k,), chars.dtype)])


def find_keyword(chars: jax.Array, n: jax.Array, keyword: str) -> tuple[jax.Array, jax.Array]:
    """First occurrence of `keyword` (case-insensitive): (found [], index just after it [])."""
    kw = jnp.asarray(text_codes(keyword))
    k = kw.shape[0]
    pos = jnp.arange(chars.shape[0])
    hit = jnp.all(_windows(chars, k) == kw[None, :], axis=1) & (pos + k <= n)
    first = jnp.argmax(hit)
    return hit.any(), (first + k).astype(jnp.int32)


def parse_int(
    chars: jax.Array, n: jax.Array, keyword: str | None = None, max_digits: int = 9, signed: bool = False,
    exact: bool = False, min_digits: int = 1,
) -> tuple[jax.Array, jax.Array]:
    """The integer after `keyword` (then optional ':'/'=' and spaces), e.g. 'Guess: 512' -> (512, True).

    Malformed (no keyword, no digits, fewer than `min_digits` or more than `max_digits` digits) -> (0, False):
    `min_digits = max_digits` asks for a number written at a fixed width, zero-padded ('Guess: 0512').
    Text after the number is ignored; `exact`: the reply must be the keyword and the number and nothing else
    (spaces and newlines around them aside), so 'Move: 5 and then' is malformed. An RL policy in free text needs
    it: text a lenient parser ignores costs nothing, and an entropy bonus then rewards filling it with noise.
    """
    if max_digits > 9:
        raise ValueError("max_digits <= 9 keeps the value in int32")
    if keyword is None:
        found, after = jnp.bool_(True), jnp.int32(0)
    else:
        found, after = find_keyword(chars, n, keyword)
    value, ok, first, end = _int_from(chars, n, after, max_digits, signed)
    ok = found & ok & (end - first >= min_digits)
    if exact:
        begin = after - (len(keyword) if keyword is not None else 0)
        ok = ok & _blank_outside(chars, n, begin, end)
    return jnp.where(ok, value, 0).astype(jnp.int32), ok


def _int_from(chars: jax.Array, n: jax.Array, after: jax.Array, max_digits: int, signed: bool
              ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The integer at the first character from `after` on that is not a space, ':' or '=': (value, ok, its first
    digit's position, one past its last digit). ok: 1..max_digits digits there."""
    size = chars.shape[0]
    pos = jnp.arange(size)
    skip = (chars == SPACE) | (chars == _COLON) | (chars == _EQUAL)
    start_ok = (pos >= after) & ~skip & (pos < n)
    q = jnp.argmax(start_ok)
    width = max_digits + 2
    idx = q + jnp.arange(width)
    window = jnp.where((idx < n) & (idx < size), chars[jnp.minimum(idx, size - 1)], NONE)  # [D+2]
    neg = jnp.bool_(signed) & (window[0] == _MINUS)
    digits = jnp.where(neg, window[1:], window[:-1])  # [D+1]
    run = jnp.cumprod(is_digit(digits).astype(jnp.int32))
    nd = run.sum()
    ok = start_ok.any() & (nd >= 1) & (nd <= max_digits)
    place = jnp.where(run.astype(bool), nd - 1 - jnp.arange(max_digits + 1), 0)
    powers = jnp.asarray(10, jnp.int32) ** jnp.clip(place, 0, max_digits - 1)
    value = jnp.sum(jnp.where(run.astype(bool), (digits - _ZERO) * powers, 0))
    value = jnp.where(neg, -value, value)
    first = q + neg.astype(jnp.int32)
    return value, ok, first, first + nd


def _blank_outside(chars: jax.Array, n: jax.Array, begin: jax.Array, end: jax.Array) -> jax.Array:
    """[] bool: every character outside [begin, end) is whitespace (a special token reads as NONE)."""
    pos = jnp.arange(chars.shape[0])
    blank = (chars == SPACE) | (chars == NONE) | (pos >= n)
    return jnp.all(blank | (pos >= begin) & (pos < end))


class Call(NamedTuple):
    """A parsed tool call `keyword: A op B` (`parse_call`); the spans are character positions of the reply."""

    a: jax.Array  # [] int32 (0 when not ok)
    op: jax.Array  # [] int32: the op's index in `ops`
    b: jax.Array  # [] int32
    ok: jax.Array  # [] bool
    a_span: tuple[jax.Array, jax.Array]  # [start, end) of A's digits
    op_at: jax.Array  # [] the op's position
    b_span: tuple[jax.Array, jax.Array]  # [start, end) of B's digits


def parse_call(chars: jax.Array, n: jax.Array, keyword: str, ops: str, max_digits: int = 9) -> Call:
    """A tool call `keyword: A op B` and nothing else (spaces aside), e.g. 'calc: 37*91' with ops "+-*" ->
    a=37, op=2, b=91, ok=True. Malformed -> ok False (the numbers are then 0)."""
    found, after = find_keyword(chars, n, keyword)
    a, ok_a, start_a, end_a = _int_from(chars, n, after, max_digits, signed=False)
    pos = jnp.arange(chars.shape[0])
    q = jnp.argmax((pos >= end_a) & (chars != SPACE))  # the first character after A that is not a space
    sign = chars[q]
    codes = jnp.asarray(text_codes(ops))
    op = jnp.argmax(sign == codes)
    ok_op = jnp.any(sign == codes) & (pos >= end_a).any() & (q < n)
    b, ok_b, start_b, end_b = _int_from(chars, n, q + 1, max_digits, signed=False)
    # B must follow the op (only spaces between): _int_from skips ':' and '=' too, which a call must not have
    between = (pos > q) & (pos < end_b) & ~is_digit(chars)
    no_gap = ~jnp.any(between & (chars != SPACE))
    ok = found & ok_a & ok_op & ok_b & no_gap & _blank_outside(chars, n, after - len(keyword), end_b)
    return Call(jnp.where(ok, a, 0), jnp.where(ok, op, 0), jnp.where(ok, b, 0), ok, (start_a, end_a), q,
                (start_b, end_b))


_B1, _B2 = 131, 1000003


def _hash(codes: np.ndarray, base: int) -> int:
    h = 0
    for x in codes:
        h = (h * base + int(x)) % (1 << 32)
    return h


class StringSet:
    """A fixed list of strings as character codes, for exact and substring matching inside jit."""

    def __init__(self, strings: Sequence[str], alnum_only: bool = True):
        codes = [text_codes(s) for s in strings]
        if alnum_only:
            codes = [c[((c >= _ZERO) & (c <= _NINE)) | ((c >= ord("a")) & (c <= ord("z")))] for c in codes]
        width = max(1, max((len(c) for c in codes), default=1))
        table = np.zeros((len(codes), width), np.int32)
        for i, c in enumerate(codes):
            table[i, : len(c)] = c
        self.codes = jnp.asarray(table)  # [K, S]
        self.lens = jnp.asarray([len(c) for c in codes], jnp.int32)  # [K]
        self.width = width
        self._lens_np = np.asarray([len(c) for c in codes])
        self._h1 = jnp.asarray([_hash(c, _B1) for c in codes], jnp.uint32)
        self._h2 = jnp.asarray([_hash(c, _B2) for c in codes], jnp.uint32)

    def match(self, chars: jax.Array, n: jax.Array) -> jax.Array:
        """Index of the string equal to chars[:n] (first one if repeated), -1 if none."""
        s = self.width
        head = chars[:s] if chars.shape[0] >= s else jnp.pad(chars, (0, s - chars.shape[0]))
        head = jnp.where(jnp.arange(s) < n, head, NONE)
        equal = jnp.all(self.codes == head[None, :], axis=1) & (self.lens == n)
        return jnp.where(equal.any(), jnp.argmax(equal), -1).astype(jnp.int32)

    def occurs(self, chars: jax.Array, n: jax.Array) -> jax.Array:
        """bool[K]: which strings occur as a substring of chars[:n].

        Rolling hashes of every window (two independent 32-bit hashes, so a false match has
        probability ~2**-64), built one character at a time: O((S + K) * N) instead of O(K * S * N).
        """
        pos = jnp.arange(chars.shape[0])
        c = chars.astype(jnp.uint32)
        h1 = jnp.zeros(chars.shape, jnp.uint32)
        h2 = jnp.zeros(chars.shape, jnp.uint32)
        hit = jnp.zeros((self.codes.shape[0],), bool)
        for j in range(self.width):  # h[p] = hash of chars[p : p + j + 1]
            cj = _shift(c, j)
            h1 = h1 * jnp.uint32(_B1) + cj
            h2 = h2 * jnp.uint32(_B2) + cj
            rows = np.nonzero(self._lens_np == j + 1)[0]
            if len(rows):
                fits = pos + j + 1 <= n  # [N]
                same = (h1[None, :] == self._h1[rows][:, None]) & (h2[None, :] == self._h2[rows][:, None]) & fits[None, :]
                hit = hit.at[rows].set(jnp.any(same, axis=1))
        return hit


def match_reply(codec, strings: "StringSet", tokens: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(index, ok): which of `strings` a reply (tokens [M], length []) says, its letters and digits compared;
    index 0 and ok False when it says none. `codec`: the env's (token_chars, token_nchars)."""
    chars, n = decode_chars(codec.token_chars, codec.token_nchars, tokens, length)
    k = strings.match(*compact_alnum(chars, n))
    return jnp.maximum(k, 0), k >= 0


def strip_prefix(chars: jax.Array, n: jax.Array, prefix: str) -> tuple[jax.Array, jax.Array, jax.Array]:
    """If chars[:n] starts with `prefix` (already compacted codes), drop it: (chars, n, had_prefix)."""
    p = jnp.asarray(text_codes(prefix))
    k = p.shape[0]
    has = jnp.all(chars[:k] == p) & (n >= k)
    shifted = jnp.concatenate([chars[k:], jnp.zeros((k,), chars.dtype)])
    return jnp.where(has, shifted, chars), jnp.where(has, n - k, n), has
