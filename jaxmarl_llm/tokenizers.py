"""Tokenizers shared by text environments and LM policies.

Environments take a tokenizer object (never a model), turn every fixed string
into ids once when they are built, and keep text in fixed-capacity buffers.
Anything with this small interface works:

    tok.encode(text) -> list[int]      tok.decode(ids) -> str
    tok.vocab_size, tok.pad_id, tok.eos_id, tok.bos_id (may be None)

`CharTokenizer` and `WordTokenizer` are built-in, for models trained from
scratch on our games; `HFTokenizer` wraps any Hugging Face tokenizer in a
local folder (no network) and applies its chat template when it has one.
`train_bpe(texts, path)` writes such a folder: a byte-level BPE over the given
texts with Qwen2's pre-tokenizer (every digit its own token), what a real
checkpoint's tokenizer is, at the size of our games (tools/train_tokenizer.py).
`encode_batch(tok, texts, capacity)` turns strings into the fixed-capacity,
right-padded id buffers [N, C] + lengths [N] that models and envs consume.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Mapping, Protocol, Sequence

import numpy as np

from jaxmarl_llm.errors import MissingFileError


class Tokenizer(Protocol):
    vocab_size: int
    pad_id: int
    eos_id: int
    bos_id: int | None

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...


_SPECIALS = ("<pad>", "<eos>", "<bos>", "<unk>")


class _VocabTokenizer:
    """Shared machinery: a fixed list of pieces, specials first."""

    def __init__(self, pieces: Sequence[str]):
        seen: dict[str, int] = {}
        for piece in (*_SPECIALS, *pieces):
            seen.setdefault(piece, len(seen))
        self.pieces = list(seen)
        self.index = seen
        self.pad_id, self.eos_id, self.bos_id, self.unk_id = (seen[s] for s in _SPECIALS)
        self.vocab_size = len(self.pieces)

    def _lookup(self, piece: str) -> int:
        return self.index.get(piece, self.unk_id)

    def decode(self, ids: Iterable[int]) -> str:
        specials = {self.pad_id, self.bos_id}
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i in specials or not 0 <= i < self.vocab_size:
                continue
            out.append(self.pieces[i])
        return self._join(out)

    def _join(self, pieces: list[str]) -> str:
        return "".join(pieces)


class CharTokenizer(_VocabTokenizer):
    """One id per printable ASCII character (plus newline): tiny and covers any game text."""

    def __init__(self, alphabet: str | None = None):
        alphabet = alphabet if alphabet is not None else "".join(chr(c) for c in range(32, 127)) + "\n"
        super().__init__(list(alphabet))

    def encode(self, text: str) -> list[int]:
        return [self._lookup(c) for c in text]


_WORD_RE = re.compile(r"\s+|\w+|[^\w\s]")


class WordTokenizer(_VocabTokenizer):
    """Whole words, punctuation and whitespace runs as pieces; unknown words fall back to characters.

    Build it from the texts a game uses (`WordTokenizer.from_texts`), so prompts
    are short and a from-scratch model has few ids to learn.
    """

    def __init__(self, words: Sequence[str]):
        chars = [chr(c) for c in range(32, 127)] + ["\n"]
        super().__init__([*chars, *words])

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "WordTokenizer":
        words: dict[str, None] = {}
        for text in texts:
            for piece in _WORD_RE.findall(text):
                words.setdefault(piece, None)
        return cls(list(words))

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in _WORD_RE.findall(text):
            if piece in self.index:
                ids.append(self.index[piece])
            else:
                ids.extend(self._lookup(c) for c in piece)
        return ids


class HFTokenizer:
    """A Hugging Face tokenizer loaded from a local folder, with our small interface."""

    REQUIRED_ANY = ("tokenizer.json", "tokenizer.model", "vocab.json")

    def __init__(self, path: str):
        if not os.path.isdir(path):
            raise MissingFileError(f"tokenizer folder {path!r} does not exist; pass a local Hugging Face folder")
        present = set(os.listdir(path))
        if not present.intersection(self.REQUIRED_ANY):
            raise MissingFileError(
                f"tokenizer folder {path!r} has none of {', '.join(self.REQUIRED_ANY)}; "
                "save one with `tokenizer.save_pretrained(path)`"
            )
        from transformers import AutoTokenizer

        self.hf = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.vocab_size = len(self.hf)
        self.eos_id = self.hf.eos_token_id if self.hf.eos_token_id is not None else 0
        self.pad_id = self.hf.pad_token_id if self.hf.pad_token_id is not None else self.eos_id
        self.bos_id = self.hf.bos_token_id

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False))

    def decode(self, ids: Iterable[int]) -> str:
        ids = [int(i) for i in ids]
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        return self.hf.decode(ids, skip_special_tokens=True)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.hf, "chat_template", None))

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        """Ids of a chat in the tokenizer's own template (falls back to plain 'role: content' lines)."""
        if self.has_chat_template:
            ids = self.hf.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=True,
                                              return_dict=False)
            if isinstance(ids, Mapping):  # transformers 5 may still hand back a BatchEncoding
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return self.encode(text + ("assistant: " if add_generation_prompt else ""))


# the byte-level BPE of our three natural-language games (tools/train_tokenizer.py writes it): config.tokenizer=GAMES_BPE
GAMES_BPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets", "games_bpe")

# Qwen2's pre-tokenizer (its tokenizer.json): letter runs with at most one leading other character, each digit
# alone, punctuation runs, newlines and spaces; a BPE merge never crosses these pieces, so "1023" is 4 tokens
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s+(?!\S)|\s+")
BPE_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # Qwen's; <|endoftext|> ends a reply and pads


def train_bpe(texts: Iterable[str], path: str, vocab_size: int = 1024, min_frequency: int = 2) -> str:
    """Train a byte-level BPE tokenizer on `texts` and save it as a Hugging Face folder at `path` (tokenizer.json,
    tokenizer_config.json): `HFTokenizer(path)` loads it as it loads a checkpoint's. Deterministic for given
    texts. The vocabulary stops short of `vocab_size` when no pair occurs `min_frequency` times."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(BPE_SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(texts), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=BPE_SPECIALS[0], pad_token=BPE_SPECIALS[0])
    fast.save_pretrained(path)
    return path


def encode_batch(
    tok: Tokenizer, texts: Sequence[str], capacity: int, truncate: str = "error"
) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded int32 ids [N, capacity] and lengths [N]; done once, outside jit.

    truncate: "error" (default, names the text), "left" (keep the end) or "right" (keep the start).
    """
    ids = np.full((len(texts), capacity), tok.pad_id, np.int32)
    lengths = np.zeros((len(texts),), np.int32)
    for i, text in enumerate(texts):
        row = tok.encode(text)
        if len(row) > capacity:
            if truncate == "error":
                raise ValueError(f"text {i} ({text[:40]!r}...) is {len(row)} tokens, over capacity {capacity}")
            row = row[-capacity:] if truncate == "left" else row[:capacity]
        ids[i, : len(row)] = row
        lengths[i] = len(row)
    return ids, lengths


def digit_token_ids(tok: Tokenizer) -> tuple[int, ...]:
    """The ids whose text is a number (digits only, around optional spaces): one per digit in a BPE that splits
    numbers as Qwen's and Llama 3's do, whole numbers in a word vocabulary."""
    ids = []
    for i in range(tok.vocab_size):
        if i in (tok.pad_id, tok.eos_id, tok.bos_id):
            continue
        text = tok.decode([i]).strip()
        if text.isascii() and text.isdigit():
            ids.append(i)
    return tuple(ids)


# named sets of token ids (`--config.entropy_tokens`): which generated tokens a per-token term counts; "all" is none
TOKEN_SETS = {"digits": digit_token_ids}


def token_set(name: str, tok: Tokenizer) -> tuple[int, ...]:
    """The ids of TOKEN_SETS[name] in `tok` (() for "all": every token)."""
    return () if name == "all" else TOKEN_SETS[name](tok)
