"""LoRA: zero-init equals base, per-agent vmap, merge, optimizer over adapters only, PEFT export parity."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxmarl_llm.models import config, lora as L, transformer

CFG = config.tiny("qwen2")
LCFG = L.LoraConfig(rank=4, alpha=8.0, targets=("q", "k", "v", "o", "gate", "up", "down"))
A = 3


@pytest.fixture(scope="module")
def base():
    return transformer.init_params(CFG, jax.random.key(0), std=0.1)


@jax.jit
def _perturb(lora, key):
    leaves, tree = jax.tree.flatten(lora)
    keys = jax.random.split(key, len(leaves))
    return jax.tree.unflatten(tree, [x + 0.05 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])


def _trained(lora, seed=1):
    """Adapters after 'training': B non-zero so they change the output."""
    return _perturb(lora, jax.random.key(seed))


def _tokens(shape, seed=0):
    return jnp.asarray(np.random.RandomState(seed).randint(0, CFG.vocab_size, shape), jnp.int32)


def test_shapes_and_fresh_adapter_equals_base(base):
    lora = L.init_lora(jax.random.key(1), CFG, LCFG, num_agents=A)
    assert lora["q"]["a"].shape == (A, CFG.num_layers, CFG.hidden_size, 4)
    assert lora["down"]["b"].shape == (A, CFG.num_layers, 4, CFG.hidden_size)
    assert all(float(jnp.abs(ab["b"]).max()) == 0 for ab in lora.values())
    tokens = _tokens((A, 2, 7))
    out, _, _ = L.forward_agents_jit(base, lora, tokens, CFG, LCFG)
    ref, _, _ = transformer.forward_jit(base, tokens.reshape(A * 2, 7), CFG)
    np.testing.assert_allclose(np.asarray(out).reshape(A * 2, 7, -1), np.asarray(ref), atol=1e-5)


def test_vmap_over_agents_equals_each_agent_alone(base):
    lora = _trained(L.init_lora(jax.random.key(1), CFG, LCFG, num_agents=A))
    tokens = _tokens((A, 2, 7))
    out, hidden, _ = L.forward_agents_jit(base, lora, tokens, CFG, LCFG)
    for i in range(A):
        ref, ref_h, _ = transformer.forward_jit(base, tokens[i], CFG, lora=L.agent(lora, i), lora_scale=LCFG.scale)
        np.testing.assert_allclose(np.asarray(out[i]), np.asarray(ref), atol=1e-5)
        np.testing.assert_allclose(np.asarray(hidden[i]), np.asarray(ref_h), atol=1e-5)
    assert float(jnp.abs(out[0] - out[1]).max()) > 1e-3  # agents really differ


def test_per_row_adapters_in_one_batched_call_equal_each_row_alone(base):
    """lora leaves [N, B, in, r]: row b runs with its own adapter (what the rollout's movers use), with a cache."""
    lora = _trained(L.init_lora(jax.random.key(3), CFG, LCFG, num_agents=A))  # [A, N, ...]
    rows = jnp.asarray([2, 0, 1, 2])  # adapter of each row
    per_row = jax.tree.map(lambda x: jnp.swapaxes(x[rows], 0, 1), lora)  # [N, B, ...]
    tokens = _tokens((4, 6), seed=3)
    cache = transformer.init_cache(CFG, 4, 16)
    lengths = jnp.asarray([6, 3, 5, 1])
    out, _, c = transformer.forward_jit(base, tokens, CFG, lora=per_row, lora_scale=LCFG.scale, cache=cache,
                                        num_new=lengths)
    for b in range(4):
        ref, _, rc = transformer.forward_jit(base, tokens[b:b + 1], CFG, lora=L.agent(lora, int(rows[b])),
                                             lora_scale=LCFG.scale, cache=transformer.init_cache(CFG, 1, 16),
                                             num_new=lengths[b:b + 1])
        n = int(lengths[b])
        np.testing.assert_allclose(np.asarray(out[b, :n]), np.asarray(ref[0, :n]), atol=1e-5)
        np.testing.assert_allclose(np.asarray(c["k"][:, b, :n]), np.asarray(rc["k"][:, 0, :n]), atol=1e-5)
    same_tokens = jnp.broadcast_to(tokens[:1], (4, 6))
    out2, _, _ = transformer.forward_jit(base, same_tokens, CFG, lora=per_row, lora_scale=LCFG.scale)
    assert float(jnp.abs(out2[0] - out2[1]).max()) > 1e-3  # rows with different adapters really differ
    np.testing.assert_allclose(np.asarray(out2[0]), np.asarray(out2[3]), atol=1e-6)  # same adapter, same row


def test_merge_equals_adapter(base):
    lora = L.agent(_trained(L.init_lora(jax.random.key(2), CFG, LCFG, num_agents=A)), 2)
    tokens = _tokens((2, 9), seed=3)
    with_adapter, _, _ = transformer.forward_jit(base, tokens, CFG, lora=lora, lora_scale=LCFG.scale)
    merged, _, _ = transformer.forward_jit(L.merge(base, lora, CFG, LCFG), tokens, CFG)
    np.testing.assert_allclose(np.asarray(merged), np.asarray(with_adapter), atol=1e-5)


def test_optimizer_covers_adapters_only_and_base_stays_frozen(base):
    lora = L.init_lora(jax.random.key(3), CFG, LCFG, num_agents=A)
    opt = optax.adam(1e-2)
    state = opt.init(lora)
    opt_leaves = [x for x in jax.tree.leaves(state) if x.ndim > 0]
    assert sum(x.size for x in opt_leaves) == 2 * sum(x.size for x in jax.tree.leaves(lora))  # mu, nu
    tokens = _tokens((A, 2, 6), seed=4)
    base_before = jax.tree.map(np.asarray, base)

    def loss(lo):
        logits, _, _ = L.forward_agents(base, lo, tokens, CFG, LCFG)
        logp = jax.nn.log_softmax(logits[:, :, :-1])
        return -jnp.take_along_axis(logp, tokens[:, :, 1:, None], -1).mean()

    @jax.jit
    def step(lora, state):
        l, grads = jax.value_and_grad(loss)(lora)
        updates, state = opt.update(grads, state, lora)
        return optax.apply_updates(lora, updates), state, l, grads

    lora, state, l0, grads = step(lora, state)
    assert float(jnp.abs(grads["q"]["b"]).max()) > 0  # B gets gradient at zero init
    l1 = step(lora, state)[2]
    assert float(l1) < float(l0)
    jax.tree.map(np.testing.assert_array_equal, base, base_before)


def test_adapters_off_is_the_base_reference(base):
    """lora=None runs the shared base (the KL reference); merging a zero adapter changes nothing."""
    lora = _trained(L.init_lora(jax.random.key(5), CFG, LCFG))
    tokens = _tokens((2, 5), seed=5)
    off, _, _ = transformer.forward_jit(base, tokens, CFG, lora=None)
    on, _, _ = transformer.forward_jit(base, tokens, CFG, lora=lora, lora_scale=LCFG.scale)
    assert float(jnp.abs(on - off).max()) > 1e-3
    zero = jax.tree.map(jnp.zeros_like, lora)
    merged_zero = L.merge(base, zero, CFG, LCFG)
    jax.tree.map(np.testing.assert_array_equal, merged_zero, base)


def test_config_errors():
    with pytest.raises(ValueError, match="qkv"):
        L.LoraConfig(targets=("qkv",))


def test_peft_export_loads_and_matches(tmp_path):
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    from jaxmarl_llm.models import hf
    from jaxmarl_llm.models.testing import build_hf_model

    model = build_hf_model("qwen3", str(tmp_path / "base"))
    cfg, params = hf.load_pretrained(str(tmp_path / "base"))
    lcfg = L.LoraConfig(rank=4, alpha=16.0, targets=("q", "v", "o", "gate", "down"))
    lora = _trained(L.init_lora(jax.random.key(6), cfg, lcfg, num_agents=2), seed=7)
    L.export_peft(str(tmp_path / "adapter"), cfg, lora, lcfg, agent_index=1)
    tokens = _tokens((2, 8), seed=8)
    ours, _, _ = transformer.forward_jit(params, tokens, cfg, lora=L.agent(lora, 1), lora_scale=lcfg.scale)
    peft_model = peft.PeftModel.from_pretrained(model, str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        ref = peft_model(torch.tensor(np.asarray(tokens), dtype=torch.long)).logits.numpy()
    np.testing.assert_allclose(np.asarray(ours), ref, atol=1e-4)
    base_out, _, _ = transformer.forward_jit(params, tokens, cfg)
    assert np.abs(np.asarray(base_out) - ref).max() > 1e-2  # the adapter matters


def test_agents_share_one_base_in_compiled_generation():
    """XLA's plan for A-agent generation: the base is an argument once; scratch holds no copy of it."""
    from jaxmarl_llm.models import sampling

    cfg = config.tiny("qwen3", vocab_size=8192, hidden_size=256, intermediate_size=768, num_heads=4, num_kv_heads=2,
                      head_dim=64)
    lcfg = L.LoraConfig(rank=4, alpha=8.0)
    agents, batch, prompt, new = 4, 2, 8, 8
    params = jax.eval_shape(lambda k: transformer.init_params(cfg, k), jax.random.key(0))
    lora = jax.eval_shape(lambda k: L.init_lora(k, cfg, lcfg, num_agents=agents), jax.random.key(0))

    def gen(keys, params, lora, tokens, lengths):
        one = lambda k, lo, t, n: sampling.generate(k, params, lo, t, n, cfg, max_new_tokens=new,  # noqa: E731
                                                    lora_scale=lcfg.scale)
        return jax.vmap(one)(keys, lora, tokens, lengths)

    keys = jax.eval_shape(lambda: jax.random.split(jax.random.key(0), agents))
    tok = jax.ShapeDtypeStruct((agents, batch, prompt), jnp.int32)
    mem = jax.jit(gen).lower(keys, params, lora, tok, tok.update(shape=(agents, batch))).compile().memory_analysis()
    base, adapters = transformer.num_bytes(params), transformer.num_bytes(lora)
    cache = agents * transformer.num_bytes(jax.eval_shape(lambda: transformer.init_cache(cfg, batch, prompt + new)))
    assert mem.argument_size_in_bytes <= base + adapters + 1024
    assert mem.temp_size_in_bytes < cache + 2 * adapters + 0.25 * base  # no per-agent (or even one) base copy
