"""Tokenizers: built-in char/word round trips, HF tokenizer from a local folder, chat templates, batch buffers."""

import numpy as np
import pytest

from jaxmarl_llm.tokenizers import CharTokenizer, HFTokenizer, WordTokenizer, encode_batch


def test_char_roundtrip_and_specials():
    tok = CharTokenizer()
    text = "Guess a number: 42!\n"
    ids = tok.encode(text)
    assert len(ids) == len(text) and tok.decode(ids) == text
    assert tok.decode(ids + [tok.eos_id] + tok.encode("junk")) == text
    assert tok.encode("é") == [tok.unk_id]


def test_word_tokenizer_from_texts():
    tok = WordTokenizer.from_texts(["you win", "you lose"])
    ids = tok.encode("you win")
    assert len(ids) == 3 and tok.decode(ids) == "you win"
    assert tok.decode(tok.encode("you zz")) == "you zz"  # unknown word falls back to characters


def test_encode_batch_pads_and_checks_capacity():
    tok = CharTokenizer()
    ids, lengths = encode_batch(tok, ["ab", "abcd"], 5)
    assert ids.shape == (2, 5) and ids.dtype == np.int32
    np.testing.assert_array_equal(lengths, [2, 4])
    assert ids[0, 2:].tolist() == [tok.pad_id] * 3
    with pytest.raises(ValueError, match="over capacity 3"):
        encode_batch(tok, ["abcd"], 3)
    ids, lengths = encode_batch(tok, ["abcd"], 3, truncate="left")
    assert tok.decode(ids[0]) == "bcd"


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<bos>", "<unk>", "<|im_start|>", "<|im_end|>", "user", "assistant", "hello", "world",
             "guess", "a", "number"]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.decoder = decoders.WordPiece()
    core.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    hf = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", pad_token="<pad>", bos_token="<bos>",
                                 unk_token="<unk>")
    hf.chat_template = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
                        "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")
    path = tmp_path_factory.mktemp("tok")
    hf.save_pretrained(str(path))
    return str(path)


def test_hf_tokenizer_from_local_folder(hf_folder):
    tok = HFTokenizer(hf_folder)
    assert (tok.vocab_size, tok.pad_id, tok.eos_id, tok.bos_id) == (13, 0, 1, 2)
    ids = tok.encode("hello world")
    assert ids == [8, 9]
    assert tok.decode(ids + [tok.eos_id, 8]) == "hello world"


def test_hf_chat_template(hf_folder):
    tok = HFTokenizer(hf_folder)
    assert tok.has_chat_template
    ids = tok.apply_chat_template([{"role": "user", "content": "guess a number"}])
    assert ids == [4, 6, 10, 11, 12, 5, 4, 7]
    assert tok.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=False) == [4, 6, 8, 5]


def test_hf_tokenizer_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        HFTokenizer(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        HFTokenizer(str(tmp_path))


def _train_tokenizer_tool():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "train_tokenizer.py")
    spec = importlib.util.spec_from_file_location("train_tokenizer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_games_bpe_loads_as_a_checkpoint_tokenizer_and_reads_digits_one_by_one():
    """The shipped BPE folder through config.tokenizer's loader (the code that loads a checkpoint's tokenizer):
    every game text round-trips, every number is one token per digit, <|endoftext|> ends a reply and pads."""
    pytest.importorskip("transformers")
    from jaxmarl_llm.tokenizers import BPE_SPECIALS, GAMES_BPE
    from jaxmarl_llm.train.lm.setup import build_tokenizer
    corpus = _train_tokenizer_tool().corpus

    tok = build_tokenizer(GAMES_BPE)
    assert isinstance(tok, HFTokenizer) and tok.vocab_size == 1024
    assert tok.eos_id == tok.pad_id == tok.hf.convert_tokens_to_ids(BPE_SPECIALS[0])
    texts = sorted(set(corpus()))
    assert len(texts) > 10_000
    for text in texts:
        assert tok.decode(tok.encode(text)) == text
    digit_ids = [tok.encode(str(d)) for d in range(10)]
    assert all(len(ids) == 1 for ids in digit_ids) and len({ids[0] for ids in digit_ids}) == 10
    for n in (0, 7, 42, 512, 1023, 1024, 987654):
        assert tok.encode(str(n)) == [digit_ids[int(c)][0] for c in str(n)]
        assert tok.encode(f"Guess: {n}")[-len(str(n)):] == [digit_ids[int(c)][0] for c in str(n)]
    assert len(tok.encode("Move: 5")) < len("Move: 5")  # words merge: BPE, not characters
    assert tok.decode(tok.encode("Move: 5") + [tok.eos_id] + tok.encode("junk")) == "Move: 5"


def test_games_bpe_is_what_the_tool_writes(tmp_path):
    """tools/train_tokenizer.py rebuilds the shipped folder exactly (vocabulary and merges): the folder cannot
    drift from the games' texts unnoticed. Retrain it when a game's texts change."""
    import json

    from jaxmarl_llm.tokenizers import GAMES_BPE
    main = _train_tokenizer_tool().main

    assert main(["--out", str(tmp_path)]) == 0
    fresh, shipped = (json.load(open(f"{d}/tokenizer.json")) for d in (tmp_path, GAMES_BPE))
    assert fresh["model"]["vocab"] == shipped["model"]["vocab"]
    assert fresh["model"]["merges"] == shipped["model"]["merges"]
    assert fresh["pre_tokenizer"] == shipped["pre_tokenizer"]
    assert main(["--vocab_size", "100", "--out", str(tmp_path / "x")]) == 2
