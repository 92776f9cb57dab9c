"""Shared text machinery: parsing over token ids (char and HF BPE tokenizers), buffers, rendering."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs.text import buffers, parsing
from jaxmarl_llm.envs.text.codec import Codec
from jaxmarl_llm.tokenizers import CharTokenizer, HFTokenizer, WordTokenizer


@pytest.fixture(scope="module")
def bpe_tokenizer(tmp_path_factory):
    """A small byte-level BPE trained locally on game-like text, saved and reloaded as an HF folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["Guess: 512 too high too low correct", "Move: 5 Your move. Winner: A", "Ask: Is it an animal? Guess: dog"] * 50
    corpus += [f"Guess: {i} Answer: -{i}" for i in range(0, 1024, 7)]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    path = tmp_path_factory.mktemp("bpe")
    fast.save_pretrained(str(path))
    return HFTokenizer(str(path))


def _tokenizers(bpe):
    return [CharTokenizer(), WordTokenizer.from_texts(["Guess: 512 too high", "Answer: 42"]), bpe]


def _action(codec, text, m=24):
    ids = codec.encode(text)
    n = len(ids)
    ids = (ids + [codec.pad_id] * m)[:m]
    return jnp.asarray(ids, jnp.int32), jnp.int32(n)


CASES = [
    ("Guess: 512", 512, True),
    ("guess 7", 7, True),
    ("GUESS:=1023 because", 1023, True),
    ("Guess:   0", 0, True),
    ("I guess: 33 or 34", 33, True),
    ("512", 0, False),  # no keyword
    ("Guess: ", 0, False),
    ("Guess: abc", 0, False),
    ("", 0, False),
    ("Guess: 12345", 0, False),  # more digits than allowed
    ("Gu ess: 5", 0, False),
]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_parse_int_any_tokenizer(bpe_tokenizer, which):
    tok = _tokenizers(bpe_tokenizer)[which]
    codec = Codec(tok)

    @jax.jit
    def parse(tokens, length):
        chars, n = parsing.decode_chars(codec.token_chars, codec.token_nchars, tokens, length)
        return parsing.parse_int(chars, n, keyword="guess", max_digits=4)

    for text, value, ok in CASES:
        v, k = parse(*_action(codec, text))
        assert bool(k) == ok, (text, tok)
        assert int(v) == value, (text, tok)


def test_parse_signed_and_overlong(bpe_tokenizer):
    codec = Codec(bpe_tokenizer)
    chars, n = parsing.decode_chars(codec.token_chars, codec.token_nchars, *_action(codec, "Answer: -417"))
    assert [int(x) for x in parsing.parse_int(chars, n, "answer", signed=True)] == [-417, 1]
    assert [int(x) for x in parsing.parse_int(chars, n, "answer", signed=False)] == [0, 0]
    # an action longer than the action buffer is cut at M tokens; a length beyond M is clipped
    tokens, _ = _action(codec, "Guess: 5" + " filler" * 40, m=8)
    clean, length = buffers.clean_action(tokens[None], jnp.array([1000]), codec.pad_id, codec.eos_id)
    assert int(length[0]) == 8
    chars, n = parsing.decode_chars(codec.token_chars, codec.token_nchars, clean[0], length[0])
    assert [int(x) for x in parsing.parse_int(chars, n, "guess")] == [5, 1]


def test_clean_action_stops_at_eos_and_pads():
    tok = CharTokenizer()
    ids = jnp.asarray([tok.encode("ab") + [tok.eos_id] + tok.encode("cd")], jnp.int32)
    clean, length = buffers.clean_action(ids, jnp.array([5]), tok.pad_id, tok.eos_id)
    assert int(length[0]) == 2
    assert clean[0].tolist() == tok.encode("ab") + [tok.pad_id] * 3
    clean, length = buffers.clean_action(ids, jnp.array([-3]), tok.pad_id, tok.eos_id)
    assert int(length[0]) == 0 and (clean == tok.pad_id).all()


def test_append_clips_at_capacity():
    buf = jnp.zeros((10 + 4,), jnp.int32)
    out = buffers.append(buf, jnp.int32(0), jnp.array([1, 2, 3, 0]), jnp.int32(3), capacity=10)
    assert out.buf[:4].tolist() == [1, 2, 3, 0] and int(out.length) == 3 and not bool(out.overflow)
    out = buffers.append(out.buf, jnp.int32(8), jnp.array([7, 7, 7, 7]), jnp.int32(4), capacity=10)
    assert int(out.length) == 10 and bool(out.overflow)
    with pytest.raises(ValueError):
        buffers.append(jnp.zeros((11,), jnp.int32), jnp.int32(0), jnp.zeros((4,), jnp.int32), jnp.int32(1), capacity=10)


def test_concat_pieces():
    ids = jnp.array([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
    out, total = buffers.concat_pieces(ids, jnp.array([2, 0, 3]), pad_id=0)
    assert int(total) == 5 and out.tolist() == [1, 2, 4, 5, 6, 0, 0, 0, 0]


def test_string_set_match_and_occurs(bpe_tokenizer):
    s = parsing.StringSet(["Is it alive?", "dog", "for example"], alnum_only=True)
    codec = Codec(bpe_tokenizer)
    for text, want in [("is it ALIVE", 0), ("Dog!", 1), ("dogs", -1), ("", -1), ("For example.", 2)]:
        chars, n = parsing.decode_chars(codec.token_chars, codec.token_nchars, *_action(codec, text))
        chars, n = parsing.compact_alnum(chars, n)
        assert int(s.match(chars, n)) == want, text
    markers = parsing.StringSet(["because", "for example"], alnum_only=False)
    chars, n = parsing.decode_chars(codec.token_chars, codec.token_nchars, *_action(codec, "yes, For Example it is"))
    assert markers.occurs(chars, n).tolist() == [False, True]


def test_games_with_hf_tokenizer(bpe_tokenizer):
    """Every token game builds and plays well-formed moves with a BPE tokenizer from a local folder."""
    from jaxmarl_llm.envs.registry import make

    for name in ["text/guess_number", "text/tic_tac_toe", "text/twenty_questions", "text/arithmetic", "text/debate", "text/cooperative_writing"]:
        env = make(name, tokenizer=bpe_tokenizer)
        obs, state = env.reset(jax.random.PRNGKey(0))
        step = jax.jit(env.step)
        key = jax.random.PRNGKey(1)
        for _ in range(3):
            key, k = jax.random.split(key)
            obs, state, reward, term, trunc, info = step(k, state, env.random_action(k, state))
            if "format_error" in info:  # random actions are well-formed
                assert not bool(jnp.any(info["format_error"])), name
        text = env.render(state)
        assert len(text) == env.num_agents and all(isinstance(t, str) and t for t in text)
    # the guess is read back exactly through BPE pieces
    env = make("text/guess_number", tokenizer=bpe_tokenizer, split="all")
    _, state = env.reset_to(700)
    _, state, reward, term, _, info = env.step(jax.random.PRNGKey(0), state, env.guess_action(jnp.int32(700)))
    assert float(reward[0]) == 1.0 and bool(term[0]) and not bool(info["format_error"][0])
    assert "Guess: 700\nCorrect!" in env.render(state)[0]


def test_string_set_occurs_matches_python_substring():
    rng = np.random.default_rng(0)
    markers = ["ab", "abc", "cab", "b c", "a"]
    s = parsing.StringSet(markers, alnum_only=False)
    texts = ["".join(rng.choice(list("abc "), size=rng.integers(0, 20))) for _ in range(300)]
    codes = np.zeros((len(texts), 24), np.int32)
    for i, t in enumerate(texts):
        codes[i, : len(t)] = [ord(ch) for ch in t]
    lens = jnp.asarray([len(t) for t in texts])
    # only the first n characters count: put junk after n
    codes[:, 20:] = ord("a")
    got = np.asarray(jax.jit(jax.vmap(s.occurs))(jnp.asarray(codes), lens))
    want = np.asarray([[m in t for m in markers] for t in texts])
    assert (got == want).all()
