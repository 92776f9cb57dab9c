"""Parity of our decoder with `transformers` (PyTorch, CPU) for Llama 3.x, Qwen2 and Qwen3, plus checkpoint I/O."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from jaxmarl_llm.models import hf, sampling, transformer  # noqa: E402
from jaxmarl_llm.models.testing import build_hf_model  # noqa: E402

# llama: untied + llama3 rope scaling; qwen2: tied + qkv bias; qwen3: qk-norm + explicit head_dim
FAMILIES = {"llama": {}, "qwen2": {"tie_word_embeddings": True}, "qwen3": {}}


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tmp_path_factory):
    family = request.param
    path = str(tmp_path_factory.mktemp(family))
    model = build_hf_model(family, path, **FAMILIES[family])
    cfg, params = hf.load_pretrained(path)
    return family, path, model, cfg, params


def _padded_batch(lengths, width, seed=0, vocab=256):
    rs = np.random.RandomState(seed)
    tokens = np.zeros((len(lengths), width), np.int32)
    for i, n in enumerate(lengths):
        tokens[i, :n] = rs.randint(0, vocab, n)
    return tokens, np.asarray(lengths, np.int32)


def _hf_logits(model, tokens, lengths, hidden=False):
    mask = (np.arange(tokens.shape[1])[None] < lengths[:, None]).astype(np.int64)
    with torch.no_grad():
        out = model(torch.tensor(tokens, dtype=torch.long), attention_mask=torch.tensor(mask), output_hidden_states=hidden)
    return (out.logits.numpy(), out.hidden_states[-1].numpy()) if hidden else out.logits.numpy()


def test_config_translated(pair):
    family, _, model, cfg, _ = pair
    assert cfg.family == family
    assert cfg.qk_norm == (family == "qwen3") and cfg.qkv_bias == (family == "qwen2")
    assert cfg.tie_embeddings == (family == "qwen2")
    assert (cfg.rope_scaling is not None) == (family == "llama")
    assert transformer.num_params(pair[4]) == sum(p.numel() for p in model.parameters())


def test_full_sequence_logits_and_hidden_match_with_padding(pair):
    _, _, model, cfg, params = pair
    tokens, lengths = _padded_batch([11, 4, 7], 11)
    ref, ref_hidden = _hf_logits(model, tokens, lengths, hidden=True)
    logits, hidden, _ = transformer.forward_jit(params, jnp.asarray(tokens), cfg)
    assert hidden.shape == (3, 11, cfg.hidden_size)
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(np.asarray(logits[b, :n]), ref[b, :n], atol=1e-4, rtol=0)
        np.testing.assert_allclose(np.asarray(hidden[b, :n]), ref_hidden[b, :n], atol=1e-4, rtol=0)


def test_cached_decode_equals_full_forward(pair):
    _, _, _, cfg, params = pair
    prompt_len, steps = [5, 2, 8], 6
    full, _ = _padded_batch([n + steps for n in prompt_len], 8 + steps, seed=1)
    ref, _, _ = transformer.forward_jit(params, jnp.asarray(full), cfg)
    lengths = np.asarray(prompt_len, np.int32)
    prompt = np.where(np.arange(8)[None] < lengths[:, None], full[:, :8], 0)
    cache = transformer.init_cache(cfg, 3, 8 + steps)
    logits, _, cache = transformer.forward_jit(params, jnp.asarray(prompt), cfg, cache=cache,
                                               num_new=jnp.asarray(lengths), logit_index=jnp.asarray(lengths - 1))
    rows = np.arange(3)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(ref)[rows, lengths - 1], atol=1e-4, rtol=0)
    step = jax.jit(lambda tok, c: transformer.forward_jit(params, tok, cfg, cache=c))
    for s in range(steps):
        pos = lengths + s
        logits, _, cache = step(jnp.asarray(full[rows, pos])[:, None], cache)
        np.testing.assert_allclose(np.asarray(logits[:, 0]), np.asarray(ref)[rows, pos], atol=1e-4, rtol=0)
    np.testing.assert_array_equal(np.asarray(cache["lengths"]), lengths + steps)


def test_greedy_generation_matches_transformers(pair):
    _, _, model, cfg, params = pair
    tokens, lengths = _padded_batch([5, 9, 3], 9, seed=2)
    ours, logprobs, mask = sampling.generate(jax.random.key(0), params, None, jnp.asarray(tokens), jnp.asarray(lengths),
                                             cfg, max_new_tokens=32, temperature=0.0)
    assert ours.shape == (3, 32) and bool(mask.all())
    # transformers generates the same rows left-padded in one batch (its own padding scheme)
    width = tokens.shape[1]
    left = np.zeros_like(tokens)
    for b, n in enumerate(lengths):
        left[b, width - n :] = tokens[b, :n]
    mask = (np.arange(width)[None] >= (width - lengths)[:, None]).astype(np.int64)
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        ref = model.generate(torch.tensor(left, dtype=torch.long), attention_mask=torch.tensor(mask),
                             max_new_tokens=32, do_sample=False, pad_token_id=0)[:, width:].numpy()
    np.testing.assert_array_equal(np.asarray(ours), ref)
    assert np.all(np.asarray(logprobs) <= 0)


def test_save_pretrained_roundtrip_loads_in_transformers(pair, tmp_path):
    _, _, model, cfg, params = pair
    hf.save_pretrained(str(tmp_path), cfg, params)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    tokens, lengths = _padded_batch([7], 7, seed=4)
    np.testing.assert_allclose(_hf_logits(reloaded, tokens, lengths), _hf_logits(model, tokens, lengths), atol=1e-5)
    cfg2, params2 = hf.load_pretrained(str(tmp_path))
    assert cfg2 == cfg
    jax.tree.map(np.testing.assert_array_equal, params2, params)


def test_sharded_checkpoint(tmp_path):
    model = build_hf_model("qwen3", None, seed=5)
    model.save_pretrained(str(tmp_path), max_shard_size="100KB")
    assert os.path.exists(tmp_path / "model.safetensors.index.json")
    cfg, params = hf.load_pretrained(str(tmp_path))
    tokens, lengths = _padded_batch([6], 6)
    logits, _, _ = transformer.forward_jit(params, jnp.asarray(tokens), cfg)
    np.testing.assert_allclose(np.asarray(logits), _hf_logits(model, tokens, lengths), atol=1e-4)


def test_bfloat16_weights_and_compute_stay_close(tmp_path):
    model = build_hf_model("qwen3", str(tmp_path), seed=7)
    cfg16, params16 = hf.load_pretrained(str(tmp_path), dtype="bfloat16")
    assert params16["embed"].dtype == jnp.bfloat16
    tokens, lengths = _padded_batch([8], 8)
    ref = _hf_logits(model, tokens, lengths)
    out, hidden, _ = transformer.forward_jit(params16, jnp.asarray(tokens), cfg16)
    assert out.dtype == jnp.float32 and hidden.dtype == jnp.bfloat16
    assert float(np.max(np.abs(np.asarray(out) - ref))) < 0.05 * float(np.max(np.abs(ref)))


# ---------------------------------------------------------------- errors name what is wrong


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("errors"))
    build_hf_model("qwen3", path, seed=6)
    return path


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return str(dst)


def test_missing_tensor_is_named(saved, tmp_path):
    from safetensors.numpy import load_file, save_file

    path = _copy(saved, tmp_path / "m")
    tensors = load_file(os.path.join(path, "model.safetensors"))
    del tensors["model.layers.1.self_attn.k_norm.weight"]
    save_file(tensors, os.path.join(path, "model.safetensors"))
    with pytest.raises(hf.CheckpointError, match=r"model\.layers\.1\.self_attn\.k_norm\.weight.*\(32,\)"):
        hf.load_pretrained(path)


def test_shape_mismatch_is_named(saved, tmp_path):
    path = _copy(saved, tmp_path / "m")
    with open(os.path.join(path, "config.json")) as f:
        conf = json.load(f)
    conf["intermediate_size"] = 96
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(conf, f)
    with pytest.raises(hf.CheckpointError, match=r"mlp\.gate_proj\.weight.*\(128, 64\), expected \(96, 64\)"):
        hf.load_pretrained(path)


def test_unsupported_model_type(saved, tmp_path):
    path = _copy(saved, tmp_path / "m")
    with open(os.path.join(path, "config.json")) as f:
        conf = json.load(f)
    conf["model_type"] = "gpt2"
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(conf, f)
    with pytest.raises(hf.CheckpointError, match="model_type='gpt2'.*llama"):
        hf.load_pretrained(path)


def test_missing_files(saved, tmp_path):
    path = _copy(saved, tmp_path / "m")
    os.remove(os.path.join(path, "model.safetensors"))
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        hf.load_pretrained(path)
    os.remove(os.path.join(path, "config.json"))
    with pytest.raises(FileNotFoundError, match="config.json"):
        hf.load_pretrained(path)


def test_random_model_rope_theta_is_built_saved_and_read_by_transformers(tmp_path):
    """`model.rope_theta` sets the random tiny model's rotary base (0: the family's, 1e6 for qwen3); the base
    travels in the saved checkpoint, and transformers reading that folder computes our logits."""
    from jaxmarl_llm.errors import ConfigError
    from jaxmarl_llm.policies.lm_policy import build_model
    from jaxmarl_llm.tokenizers import GAMES_BPE, HFTokenizer
    from jaxmarl_llm.train.config import lm_rl_defaults, validate_lm_rl
    from tiny_configs import TINY_MODEL, tiny_lm_rl

    c = lm_rl_defaults()
    c.model.update(TINY_MODEL)
    tok = HFTokenizer(GAMES_BPE)
    assert build_model(c.model, tok, 0)[0].rope_theta == 1_000_000.0
    c.model.rope_theta = 10_000.0
    cfg, params = build_model(c.model, tok, 0)
    assert cfg.rope_theta == 10_000.0
    hf.save_pretrained(str(tmp_path), cfg, params)
    assert hf.load_pretrained(str(tmp_path))[0].rope_theta == 10_000.0
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    tokens, lengths = _padded_batch([23], 23, seed=5, vocab=cfg.vocab_size)
    logits, _, _ = transformer.forward_jit(params, jnp.asarray(tokens), cfg)
    np.testing.assert_allclose(np.asarray(logits[0]), _hf_logits(model, tokens, lengths)[0], atol=1e-4, rtol=0)
    bad = tiny_lm_rl("text/kuhn_poker", "word", env_kwargs={})
    bad.model.rope_theta = -1.0
    with pytest.raises(ConfigError, match="model.rope_theta: must be a number >= 0"):
        validate_lm_rl(bad)
