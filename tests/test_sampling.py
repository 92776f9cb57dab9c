"""Sampling: logit processing equals transformers' warpers, stop ids, vmap over agents, inside lax.scan."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.models import config, lora as L, sampling, transformer

CFG = config.tiny("qwen3")


@pytest.fixture(scope="module")
def params():
    return transformer.init_params(CFG, jax.random.key(0), std=0.2)


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.7, 0, 1.0), (1.0, 5, 1.0), (1.3, 0, 0.8), (0.5, 20, 0.9)])
def test_processing_matches_transformers_warpers(temperature, top_k, top_p):
    torch = pytest.importorskip("torch")
    from transformers.generation import logits_process as lp

    logits = np.random.RandomState(0).randn(4, 64).astype(np.float32) * 3
    warpers = [lp.TemperatureLogitsWarper(temperature)]
    if top_k:
        warpers.append(lp.TopKLogitsWarper(top_k))
    if top_p < 1:
        warpers.append(lp.TopPLogitsWarper(top_p))
    ref = torch.tensor(logits)
    for w in warpers:
        ref = w(None, ref)
    ref = torch.log_softmax(ref, -1).numpy()
    ours = np.asarray(sampling.sampling_logprobs(jnp.asarray(logits), temperature, top_k, top_p))
    kept = np.isfinite(ref)
    np.testing.assert_array_equal(ours > -1e8, kept)
    np.testing.assert_allclose(ours[kept], ref[kept], atol=1e-5)


def test_samples_follow_the_recorded_distribution(params):
    n = 4000
    prompt = jnp.tile(jnp.asarray([[3, 17, 42]], jnp.int32), (n, 1))
    lengths = jnp.full((n,), 3, jnp.int32)
    kw = dict(max_new_tokens=1, temperature=0.8, top_k=8, top_p=0.95)
    toks, logprobs, _ = sampling.generate(jax.random.key(1), params, None, prompt, lengths, CFG, **kw)
    logits, _, _ = transformer.forward_jit(params, prompt[:1], CFG)
    probs = np.exp(np.asarray(sampling.sampling_logprobs(logits[0, -1], 0.8, 8, 0.95)))
    freq = np.bincount(np.asarray(toks[:, 0]), minlength=CFG.vocab_size) / n
    assert set(np.flatnonzero(freq)) <= set(np.flatnonzero(probs > 0))
    assert np.abs(freq - probs).max() < 4 * np.sqrt(0.25 / n)
    np.testing.assert_allclose(np.asarray(logprobs[:, 0]), np.log(probs[np.asarray(toks[:, 0])]), atol=1e-5)


def test_stop_ids_end_rows_and_mask_the_rest(params):
    prompt = jnp.asarray([[5, 6, 7, 8], [9, 10, 0, 0]], jnp.int32)
    lengths = jnp.asarray([4, 2], jnp.int32)
    free, _, _ = sampling.generate(jax.random.key(0), params, None, prompt, lengths, CFG, max_new_tokens=10,
                                   temperature=0.0)
    stop = int(free[0, 3])
    first = int(np.flatnonzero(np.asarray(free[0]) == stop)[0])
    toks, logprobs, mask = sampling.generate(jax.random.key(0), params, None, prompt, lengths, CFG, max_new_tokens=10,
                                             temperature=0.0, stop_ids=(stop, 255), pad_id=1)
    toks, logprobs, mask = map(np.asarray, (toks, logprobs, mask))
    np.testing.assert_array_equal(mask[0], np.arange(10) <= first)
    np.testing.assert_array_equal(toks[0, : first + 1], np.asarray(free[0, : first + 1]))
    assert np.all(toks[0, first + 1 :] == 1) and np.all(logprobs[0, first + 1 :] == 0)
    row1_stops = np.flatnonzero(np.isin(np.asarray(free[1]), (stop, 255)))
    end1 = row1_stops[0] if len(row1_stops) else 9
    np.testing.assert_array_equal(mask[1], np.arange(10) <= end1)


@pytest.mark.parametrize("per_row_keys", [False, True])
def test_decode_stops_stepping_once_every_row_has_stopped(per_row_keys):
    """A stub model that says token 3 (the stop id) at a row's own step: the loop runs exactly as many model
    steps as the slowest row needs (not max_new_tokens), and the outputs are those of all M steps."""
    vocab, m = 8, 10
    stop_at = jnp.asarray([2, 4, 1], jnp.int32)  # row b samples its stop at decode index stop_at[b]

    def logits_for(index):  # [B, V]: token 3 where this index is the row's stop, else token 5
        tok = jnp.where(index == stop_at, 3, 5)
        return jnp.where(jax.nn.one_hot(tok, vocab) > 0, 0.0, -1e9)

    def step_fn(tok, cache):
        calls, index = cache
        return logits_for(index + 1), (calls + 1, index + 1)

    key = jax.random.split(jax.random.key(0), 3) if per_row_keys else jax.random.key(0)
    toks, lps, mask, (calls, _) = jax.jit(lambda k: sampling.decode(
        k, logits_for(jnp.int32(0)), (jnp.int32(0), jnp.int32(0)), step_fn, max_new_tokens=m, temperature=1.0,
        stop_ids=(3,), pad_id=0))(key)
    assert int(calls) == int(stop_at.max())  # the step that samples the slowest row's stop is the last
    for b, s in enumerate(np.asarray(stop_at)):
        np.testing.assert_array_equal(np.asarray(toks[b]), [5] * s + [3] + [0] * (m - s - 1))
        np.testing.assert_array_equal(np.asarray(mask[b]), np.arange(m) <= s)
        assert np.all(np.asarray(lps[b, s + 1:]) == 0) and np.allclose(np.asarray(lps[b, : s + 1]), 0.0, atol=1e-5)


def test_vmap_over_agents_and_inside_scan(params):
    lcfg = L.LoraConfig(rank=2, alpha=4.0, targets=("q", "up"))
    lora = L.init_lora(jax.random.key(2), CFG, lcfg, num_agents=2)
    lora = jax.jit(lambda t: jax.tree.map(lambda x: x + 0.3 * jax.random.normal(jax.random.key(3), x.shape), t))(lora)
    prompts = jnp.asarray(np.random.RandomState(0).randint(0, 256, (2, 3, 6)), jnp.int32)  # [A, B, L]
    lengths = jnp.asarray([[6, 2, 4], [3, 6, 1]], jnp.int32)
    keys = jax.random.split(jax.random.key(4), 2)
    kw = dict(cfg=CFG, max_new_tokens=5, temperature=1.0, top_k=10, lora_scale=lcfg.scale)

    def gen(key, lo, p, n):
        return sampling.generate(key, params, lo, p, n, **kw)

    toks, lps, mask = jax.jit(jax.vmap(gen))(keys, lora, prompts, lengths)
    assert toks.shape == (2, 3, 5) and lps.shape == (2, 3, 5) and mask.shape == (2, 3, 5)
    for a in range(2):
        t, lp, _ = gen(keys[a], L.agent(lora, a), prompts[a], lengths[a])
        np.testing.assert_array_equal(np.asarray(toks[a]), np.asarray(t))
        np.testing.assert_allclose(np.asarray(lps[a]), np.asarray(lp), atol=1e-5)

    def turn(carry, key):  # two turns of all agents inside one scan
        out = jax.vmap(gen)(jax.random.split(key, 2), lora, prompts, lengths)
        return carry + out[2].sum(), out[0]

    total, per_turn = jax.jit(lambda k: jax.lax.scan(turn, 0, jax.random.split(k, 2)))(jax.random.key(5))
    assert per_turn.shape == (2, 2, 3, 5) and int(total) == 2 * 2 * 3 * 5
