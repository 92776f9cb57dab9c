"""LM policy: the log-prob scored for the loss equals the one recorded at sampling; entropy, values, reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.models import config, transformer
from jaxmarl_llm.models.lora import LoraConfig
from jaxmarl_llm.models.sampling import SamplingConfig
from jaxmarl_llm.policies.base import Sample
from jaxmarl_llm.policies.lm_policy import LMPolicy, append_tokens

CFG = config.tiny("qwen3")
A = 2


@pytest.fixture(scope="module")
def setup():
    params = transformer.init_params(CFG, jax.random.key(0), std=0.2)
    policy = LMPolicy(CFG, LoraConfig(rank=4, alpha=8.0),
                      SamplingConfig(max_new_tokens=6, temperature=0.9, top_k=12, top_p=0.9, stop_ids=(7,), pad_id=0))
    trainable = jax.jit(lambda k: jax.tree.map(lambda x: x + 0.05 * jax.random.normal(k, x.shape),
                                               policy.init_trainable(k, num_agents=A)))(jax.random.key(1))
    prompts = jnp.asarray(np.random.RandomState(0).randint(8, 256, (A, 3, 5)), jnp.int32)
    lengths = jnp.asarray([[5, 2, 3], [1, 4, 5]], jnp.int32)
    return params, policy, trainable, prompts, lengths


def test_append_tokens():
    prompt = jnp.asarray([[1, 2, 3], [4, 9, 9]], jnp.int32)
    tokens, lengths, action_mask = append_tokens(prompt, jnp.asarray([3, 1]), jnp.asarray([[5, 6], [7, 8]]),
                                                 jnp.asarray([[True, False], [True, True]]))
    np.testing.assert_array_equal(np.asarray(tokens), [[1, 2, 3, 5, 0], [4, 7, 8, 0, 0]])
    np.testing.assert_array_equal(np.asarray(lengths), [4, 3])
    np.testing.assert_array_equal(np.asarray(action_mask), [[0, 0, 0, 1, 0], [0, 1, 1, 0, 0]])


@pytest.fixture(scope="module")
def rollout(setup):
    params, policy, trainable, prompts, lengths = setup
    keys = jax.random.split(jax.random.key(3), A)
    sample = jax.jit(jax.vmap(policy.sample, in_axes=(0, None, 0, 0, 0)))(keys, params, trainable, prompts, lengths)
    buf = jax.vmap(append_tokens)(prompts, lengths, sample.tokens, sample.mask)
    score = jax.jit(jax.vmap(policy.score, in_axes=(None, 0, 0, 0, 0)))
    return sample, buf, score(params, trainable, *buf)


def test_sample_shapes(rollout):
    sample, _, _ = rollout
    assert isinstance(sample, Sample)
    assert sample.tokens.shape == sample.logprobs.shape == sample.mask.shape == (A, 3, 6)
    assert sample.value.shape == (A, 3)


def test_scored_logprobs_equal_sampled_logprobs(rollout):
    sample, (tokens, lengths, action_mask), (logprobs, entropy, values) = rollout
    for a in range(A):
        for b in range(3):
            got = np.asarray(logprobs[a, b])[np.asarray(action_mask[a, b])]
            want = np.asarray(sample.logprobs[a, b])[np.asarray(sample.mask[a, b])]
            np.testing.assert_allclose(got, want, atol=1e-4)
    assert np.all(np.asarray(logprobs)[~np.asarray(action_mask)] == 0)


def test_entropy_and_values(setup, rollout):
    params, policy, trainable, _, _ = setup
    sample, (tokens, lengths, action_mask), (_, entropy, values) = rollout
    m = np.asarray(action_mask)
    ent = np.asarray(entropy)
    assert np.all(ent[m] > 0) and np.all(ent[m] <= np.log(12) + 1e-5)  # top_k=12 support
    # value at the first action token is the value of the prompt state recorded at sampling
    first = np.argmax(m, axis=-1)
    got = np.take_along_axis(np.asarray(values), first[..., None], -1)[..., 0]
    np.testing.assert_allclose(got, np.asarray(sample.value), atol=1e-4)


def test_reference_policy_is_base_without_adapters(setup, rollout):
    params, policy, trainable, _, _ = setup
    _, (tokens, lengths, action_mask), (logprobs, _, _) = rollout
    ref_score = jax.jit(jax.vmap(policy.score, in_axes=(None, None, 0, 0, 0)))
    ref_lp, _, ref_v = ref_score(params, None, tokens, lengths, action_mask)
    assert float(jnp.abs(ref_v).max()) == 0
    m = np.asarray(action_mask)
    assert np.abs(np.asarray(ref_lp)[m] - np.asarray(logprobs)[m]).max() > 1e-3
    # and it is exactly the base model's processed log-prob of each action token
    logits = np.asarray(transformer.forward_jit(params, tokens[0], CFG)[0])
    from jaxmarl_llm.models.sampling import sampling_logprobs

    s = policy.sampling
    lp_all = np.asarray(sampling_logprobs(jnp.asarray(logits[:, :-1]), s.temperature, s.top_k, s.top_p))
    want = np.take_along_axis(lp_all, np.asarray(tokens[0])[:, 1:, None], -1)[..., 0]
    np.testing.assert_allclose(np.asarray(ref_lp[0])[:, 1:][m[0, :, 1:]], want[m[0, :, 1:]], atol=1e-5)


def test_score_gradients_are_finite(setup, rollout):
    params, policy, trainable, _, _ = setup
    _, (tokens, lengths, action_mask), _ = rollout
    one = jax.tree.map(lambda x: x[0], trainable)

    def loss(tr):
        lp, ent, v = policy.score(params, tr, tokens[0], lengths[0], action_mask[0])
        return -(lp.sum() + 0.01 * ent.sum()) + (v ** 2).sum()

    grads = jax.jit(jax.grad(loss))(one)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
    assert float(jnp.abs(grads["lora"]["q"]["b"]).max()) > 0
