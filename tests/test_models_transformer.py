"""Decoder internals that need no reference model: presets, attention backends, rope scaling."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.models import attention, config, hf, rope, transformer


@pytest.mark.parametrize("name", sorted(config.PRESETS))
def test_presets_have_the_parameter_count_transformers_builds(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = config.PRESETS[name]
    hf_cfg = transformers.AutoConfig.for_model(**hf.config_to_hf(cfg))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_cfg)
    shapes = jax.tree.leaves(transformer.param_shapes(cfg), is_leaf=lambda x: isinstance(x, tuple))
    ours = sum(int(np.prod(s)) for s in shapes)
    assert ours == sum(p.numel() for p in model.parameters())
    assert hf.config_from_hf(hf.config_to_hf(cfg)) == cfg


def test_qwen3_06b_size():
    shapes = transformer.param_shapes(config.PRESETS["qwen3-0.6b"])
    n = sum(int(np.prod(s)) for s in jax.tree.leaves(shapes, is_leaf=lambda x: isinstance(x, tuple)))
    assert 590e6 < n < 600e6  # Qwen3-0.6B: 0.6B total with tied embeddings


def test_attention_backend_switch():
    q = jnp.ones((1, 2, 4, 8))
    k = v = jnp.ones((1, 2, 2, 8))
    pos = jnp.arange(2)[None]
    assert attention.attention(q, k, v, pos, backend="xla").shape == (1, 2, 4, 8)
    with pytest.raises(RuntimeError, match="'cudnn' needs a CUDA GPU"):  # "pallas": tests/test_attention_kernels.py
        attention.attention(q, k, v, pos, backend="cudnn")
    with pytest.raises(ValueError, match="unknown attention backend 'flash'"):
        attention.attention(q, k, v, pos, backend="flash")


def test_attention_is_causal_and_grouped():
    rs = np.random.RandomState(0)
    q, k, v = rs.randn(2, 5, 4, 8), rs.randn(2, 5, 2, 8), rs.randn(2, 5, 2, 8)
    out = np.asarray(attention.attention(*map(jnp.asarray, (q, k, v)), jnp.broadcast_to(jnp.arange(5), (2, 5))))
    for h in range(4):  # naive per-head reference: query head h reads kv head h // 2
        s = np.einsum("btd,bsd->bts", q[:, :, h], k[:, :, h // 2]) / np.sqrt(8)
        s = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        ref = np.einsum("bts,bsd->btd", p / p.sum(-1, keepdims=True), v[:, :, h // 2])
        np.testing.assert_allclose(out[:, :, h], ref, atol=1e-5)


def _naive_attention(q, k, v, pos):
    """Per-head softmax attention, autodiff's business end to end (the reference for the hand-written VJP)."""
    g = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
    s = jnp.einsum("bthd,bshd->bhts", q, k) / jnp.sqrt(q.shape[-1])
    s = jnp.where((jnp.arange(k.shape[1])[None, None, :] <= pos[:, :, None])[:, None], s, -jnp.inf)
    return jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, axis=-1), v)


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 2e-5), (jnp.bfloat16, 3e-2)])
def test_attention_gradients_match_autodiff_of_the_naive_formula(dtype, tol):
    # rows start at different cache offsets (S > T), as a prefill chunk after earlier turns does
    ks = jax.random.split(jax.random.PRNGKey(3), 4)
    b, t, s, hq, hkv, d = 3, 5, 11, 4, 2, 8
    q = jax.random.normal(ks[0], (b, t, hq, d), dtype)
    k = jax.random.normal(ks[1], (b, s, hkv, d), dtype)
    v = jax.random.normal(ks[2], (b, s, hkv, d), dtype)
    w = jax.random.normal(ks[3], (b, t, hq, d))
    pos = jnp.array([0, 3, 6])[:, None] + jnp.arange(t)[None]

    def loss(f):
        return lambda q, k, v: jnp.sum(f(q, k, v, pos).astype(jnp.float32) * w)

    f32 = lambda *xs: [x.astype(jnp.float32) for x in xs]  # noqa: E731
    out, ref = attention.attention(q, k, v, pos), _naive_attention(*f32(q, k, v), pos)
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=tol * float(jnp.max(jnp.abs(ref))))
    grads = jax.grad(loss(attention.attention), argnums=(0, 1, 2))(q, k, v)
    ref_grads = jax.grad(loss(_naive_attention), argnums=(0, 1, 2))(*f32(q, k, v))
    assert all(g.dtype == dtype for g in grads)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(np.asarray(g, np.float32), r, atol=tol * float(jnp.max(jnp.abs(r))))


def test_causal_blocks_equal_one_block_values_and_gradients():
    ks = jax.random.split(jax.random.PRNGKey(4), 4)
    b, t, hq, hkv, d = 2, 11, 4, 2, 8  # 11 = blocks of 4, 4, 3
    q, k, v = (jax.random.normal(kk, (b, t, h, d)) for kk, h in zip(ks, (hq, hkv, hkv)))
    w = jax.random.normal(ks[3], (b, t, hq, d))
    pos = jnp.broadcast_to(jnp.arange(t), (b, t))

    def run(block):
        f = lambda q, k, v: jnp.sum(attention.attention(q, k, v, pos, causal_block=block) * w)  # noqa: E731
        return attention.attention(q, k, v, pos, causal_block=block), jax.grad(f, argnums=(0, 1, 2))(q, k, v)

    (out1, g1), (out4, g4) = run(0), run(4)
    np.testing.assert_allclose(out4, out1, atol=1e-6)
    for a, r in zip(g4, g1):
        np.testing.assert_allclose(a, r, atol=1e-5)
    # blocks of 1 would be 11 blocks: capped at MAX_CAUSAL_BLOCKS (two products each)
    jaxpr = str(jax.make_jaxpr(lambda q, k, v: attention.attention(q, k, v, pos, causal_block=1))(q, k, v))
    assert 2 < jaxpr.count("dot_general") <= 2 * attention.MAX_CAUSAL_BLOCKS


def test_lora_branch_gradients_match_autodiff():
    # the LoRA branch x @ A @ B has a hand-written backward (transformer._low_rank); plain einsums are the reference
    ks = jax.random.split(jax.random.PRNGKey(5), 4)
    x, a, b = jax.random.normal(ks[0], (3, 7, 12)), jax.random.normal(ks[1], (12, 4)), jax.random.normal(ks[2], (4, 9))
    w = jax.random.normal(ks[3], (3, 7, 9))
    ours = jax.grad(lambda *p: jnp.sum(transformer._low_rank(*p) * w), argnums=(0, 1, 2))(x, a, b)
    ref = jax.grad(lambda x, a, b: jnp.sum(x @ a @ b * w), argnums=(0, 1, 2))(x, a, b)
    for g, r in zip(ours, ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def test_llama3_rope_scaling_matches_transformers():
    pytest.importorskip("torch")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    import transformers

    cfg = config.PRESETS["llama-3.2-1b"]
    hf_cfg = transformers.LlamaConfig(**{k: v for k, v in hf.config_to_hf(cfg).items() if k != "architectures"})
    ref, scale = ROPE_INIT_FUNCTIONS["llama3"](hf_cfg, "cpu")
    assert scale == 1.0
    np.testing.assert_allclose(rope.inv_freq(cfg), ref.numpy(), rtol=1e-6)


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="family='gpt2'"):
        config.ModelConfig(family="gpt2")
    with pytest.raises(ValueError, match="num_kv_heads=3"):
        config.ModelConfig(num_heads=4, num_kv_heads=3)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
def test_cache_write_equals_a_plain_scatter_and_drops_overflow(dtype):
    """16-bit caches are written as their bits; the result must be the scatter's, bit for bit."""
    rng = np.random.default_rng(0)
    cache = jnp.asarray(rng.normal(size=(3, 4, 6, 2, 5)), dtype)  # [L, B, S, H, D]
    new = jnp.asarray(rng.normal(size=(4, 2, 2, 5)), jnp.float32)  # [B, T, H, D], cast on write
    rows = jnp.arange(4)[:, None]
    positions = jnp.asarray([[0, 1], [2, 3], [4, 5], [5, 6]])  # row 3's second token is past the end
    write = jax.jit(transformer._write_cache, static_argnums=5)
    got, layer = write(transformer.as_bits(cache), jnp.int32(1), rows, positions, new, dtype)
    want = cache.at[1, rows, positions].set(new.astype(dtype), mode="drop")
    assert got.dtype == (jnp.uint16 if dtype != jnp.float32 else dtype) and layer.dtype == dtype
    got = transformer.from_bits(got, dtype)
    np.testing.assert_array_equal(np.asarray(got.astype(jnp.float32)), np.asarray(want.astype(jnp.float32)))
    np.testing.assert_array_equal(np.asarray(layer.astype(jnp.float32)), np.asarray(want[1].astype(jnp.float32)))
    assert not np.array_equal(np.asarray(got[1]), np.asarray(cache[1]))  # the write happened


def test_bf16_decode_step_converts_no_cache_or_vocabulary_to_float32():
    """A bf16 decode step (one token a row against a cache) runs on the cache's and the embedding's bits: the
    compiled step holds no float32 array the size of the cache or of the vocabulary matrix (XLA:CPU did every
    cache write and the embedding gather in float32: most of a 0.6B decode step), and equals the float32-cast
    model's step to bf16 rounding."""
    cfg = config.tiny("qwen3", num_layers=6, dtype="bfloat16", param_dtype="bfloat16", vocab_size=4096)
    params = transformer.init_params(cfg, jax.random.PRNGKey(0), std=0.1)
    cache = transformer.init_cache(cfg, 4, 64)
    prompt = jax.random.randint(jax.random.PRNGKey(1), (4, 9), 0, cfg.vocab_size)
    _, _, cache = transformer.forward_jit(params, prompt, cfg, cache=cache)
    tok = jax.random.randint(jax.random.PRNGKey(2), (4, 1), 0, cfg.vocab_size)
    step = jax.jit(lambda p, t, c: transformer.forward(p, t, cfg, cache=c))
    hlo = step.lower(params, tok, cache).compile().as_text()
    sizes = {cache["k"].size, params["embed"].size}
    big = [line for line in hlo.splitlines() if re.search(r"= f32\[[\d,]+\]", line)
           and int(np.prod([int(d) for d in re.search(r"= f32\[([\d,]+)\]", line).group(1).split(",")])) in sizes]
    assert not big, big[:3]
    logits, _, new = step(params, tok, cache)
    f32 = cfg.replace(dtype="float32", param_dtype="float32")
    p32 = jax.tree.map(lambda a: a.astype(jnp.float32), params)
    c32 = {k: (v.astype(jnp.float32) if k != "lengths" else v) for k, v in cache.items()}
    want, _, want_cache = transformer.forward_jit(p32, tok, f32, cache=c32)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(want), atol=0.05 * float(jnp.abs(want).max()))
    assert new["k"].dtype == jnp.bfloat16 and int(new["lengths"][0]) == 10
    np.testing.assert_allclose(np.asarray(new["k"].astype(jnp.float32)), np.asarray(want_cache["k"]), atol=0.05)
    bits = {**cache, "k": transformer.as_bits(cache["k"]), "v": transformer.as_bits(cache["v"])}
    _, _, kept = step(params, tok, bits)  # a cache kept as bits comes back as bits, the same values
    assert kept["k"].dtype == jnp.uint16
    np.testing.assert_array_equal(np.asarray(transformer.from_bits(kept["k"], jnp.bfloat16).astype(jnp.float32)),
                                  np.asarray(new["k"].astype(jnp.float32)))
    with pytest.raises(ValueError, match="uint16 cache"):
        transformer.forward(p32, tok, f32, cache=bits)


@pytest.mark.parametrize("num_layers,per_row", [(2, False), (6, True)])
def test_read_at_equals_the_whole_forward_at_those_positions(num_layers, per_row):
    """read_at runs the last layer at the read positions only (a Python loop up to UNROLLED_LAYERS layers, a
    scan above): hidden states, logits and adapter gradients equal the whole forward's at those positions."""
    from jaxmarl_llm.models.lora import LoraConfig, init_lora

    cfg = config.tiny("qwen3", num_layers=num_layers)
    assert (num_layers - 1 <= transformer.UNROLLED_LAYERS) == (num_layers == 2)  # both ways the layers run
    params = transformer.init_params(cfg, jax.random.PRNGKey(0), std=0.1)
    b, t = 5, 12
    lcfg = LoraConfig(rank=4)
    lora = init_lora(jax.random.PRNGKey(1), cfg, lcfg)
    lora = jax.tree.map(lambda x: x + 0.05 * jax.random.normal(jax.random.PRNGKey(2), x.shape), lora)  # B != 0
    if per_row:  # one adapter per row: leaves [N, B, in, r]
        lora = jax.tree.map(lambda x: jnp.stack([x * (1 + 0.1 * i) for i in range(b)], axis=1), lora)
    tokens = jax.random.randint(jax.random.PRNGKey(3), (b, t), 0, cfg.vocab_size)
    at = jnp.array([[3, 4], [11, 0], [0, 1], [7, 7], [10, 11]])  # [B, M]

    def whole(lo):
        logits, hidden, _ = transformer.forward(params, tokens, cfg, lora=lo, lora_scale=lcfg.scale)
        take = lambda x: jnp.take_along_axis(x, at[..., None], axis=1)  # noqa: E731
        return take(logits), take(hidden)

    def read(lo):
        logits, hidden, _ = transformer.forward(params, tokens, cfg, lora=lo, lora_scale=lcfg.scale, read_at=at)
        return logits, hidden

    for got, want in zip(read(lora), whole(lora)):
        assert got.shape == want.shape == (b, 2) + want.shape[2:]
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    loss = lambda f: lambda lo: jnp.sum(jnp.sin(f(lo)[0]))  # noqa: E731
    g_read, g_whole = jax.grad(loss(read))(lora), jax.grad(loss(whole))(lora)
    for got, want in zip(jax.tree.leaves(g_read), jax.tree.leaves(g_whole)):
        # entries reach ~1e2, so a float32 sum in another order moves the small ones by ~1e-6 of the leaf's scale
        scale = float(np.max(np.abs(np.asarray(want))))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=2e-6 * scale)
    with pytest.raises(ValueError, match="read_at"):
        transformer.forward(params, tokens, cfg, read_at=at, logit_index=at[:, 0])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_dense_gradients_match_autodiff_of_the_plain_product(dtype):
    """transformer._dense (a base projection) has a hand-written backward that runs dx in the compute dtype;
    autodiff of the rounded product is the reference, to that dtype's rounding. A float32 master kernel read in
    bf16 gets a float32 gradient; a frozen one none."""
    ks = jax.random.split(jax.random.PRNGKey(6), 3)
    x = jax.random.normal(ks[0], (3, 7, 12)).astype(dtype)
    kernel = jax.random.normal(ks[1], (12, 9), jnp.float32)  # a float32 master, read in `dtype`
    w = jax.random.normal(ks[2], (3, 7, 9))

    def loss(f):
        return lambda x, k: jnp.sum(f(x, k).astype(dtype).astype(jnp.float32) * w)

    plain = lambda x, k: jnp.einsum("...i,io->...o", x, k.astype(x.dtype), preferred_element_type=jnp.float32)  # noqa: E731
    ours = jax.grad(loss(transformer._dense), argnums=(0, 1))(x, kernel)
    ref = jax.grad(loss(plain), argnums=(0, 1))(x, kernel)
    tol = 1e-5 if dtype == jnp.float32 else 2e-2
    for g, r in zip(ours, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        scale = float(jnp.max(jnp.abs(r.astype(jnp.float32))))
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(r, np.float32), atol=tol * scale)
    assert ours[1].dtype == jnp.float32
    jaxpr = str(jax.make_jaxpr(jax.grad(loss(transformer._dense)))(x, kernel))  # x only: no kernel product
    assert jaxpr.count("dot_general") == 2, jaxpr  # the forward's and dx's


@pytest.mark.parametrize("tied", [True, False])
def test_head_gradients_match_autodiff_without_a_float32_copy_of_the_vocabulary(tied):
    """The LM head's hand-written backward: in float32 it equals autodiff; in bf16 dh comes from the float32
    cotangent split in two bf16 halves, so it is as close to the float32 gradient as autodiff's float32 path
    (and far closer than one rounded cotangent), with no float32 copy of the [V, D] matrix in the program; a
    trained head weight gets its gradient in its own dtype, a frozen one none."""
    cfg = config.tiny("qwen3", tie_embeddings=tied, vocab_size=96)
    params = transformer.init_params(cfg, jax.random.PRNGKey(0), std=0.5)
    name = "embed" if tied else "lm_head"
    h = jax.random.normal(jax.random.PRNGKey(1), (3, 5, cfg.hidden_size))
    w = jax.random.normal(jax.random.PRNGKey(2), (3, 5, cfg.vocab_size))
    spec = "...d,vd->...v" if tied else "...d,dv->...v"

    def loss(f, dtype):
        return lambda h, m: jnp.sum(jax.nn.log_softmax(f(h.astype(dtype), m)) * w)

    plain = lambda h, m: jnp.einsum(spec, h, m.astype(h.dtype), preferred_element_type=jnp.float32)  # noqa: E731
    ours = lambda h, m: transformer.lm_head({name: m}, h, cfg.replace(dtype=str(h.dtype)))  # noqa: E731
    m = params[name]
    exact = jax.grad(loss(plain, jnp.float32), argnums=(0, 1))(h, m)
    got = jax.grad(loss(ours, jnp.float32), argnums=(0, 1))(h, m)
    for g, r in zip(got, exact):
        assert g.dtype == r.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-5)
    # bf16: the same product's gradient in float32 arithmetic (what autodiff gave, with its float32 copy)
    h16 = h.astype(jnp.bfloat16)
    ref = jax.grad(lambda h: loss(lambda x, m: plain(x.astype(jnp.float32), m.astype(jnp.bfloat16).astype(
        jnp.float32)), jnp.float32)(h, m))(h16.astype(jnp.float32))
    dh = jax.grad(loss(ours, jnp.bfloat16))(h16, m)
    one_rounding = jax.grad(loss(lambda x, m: _rounded_cotangent(x, m, spec), jnp.bfloat16))(h16, m)
    err = float(jnp.max(jnp.abs(dh.astype(jnp.float32) - ref)))
    assert err <= float(jnp.max(jnp.abs(ref))) * 2 ** -7  # dh itself is rounded to bf16 at the end
    assert err < float(jnp.max(jnp.abs(one_rounding.astype(jnp.float32) - ref)))
    jaxpr = jax.make_jaxpr(jax.grad(loss(ours, jnp.bfloat16)))(h16, m.astype(jnp.bfloat16))
    big = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "convert_element_type"
           and e.outvars[0].aval.dtype == jnp.float32 and e.outvars[0].aval.size >= m.size]
    assert not big, big  # no float32 copy of the vocabulary matrix
    assert str(jaxpr).count("dot_general") == 3  # the forward's and dh's two halves: no weight gradient
    dw = jax.grad(loss(ours, jnp.bfloat16), argnums=1)(h16, m)
    assert dw.dtype == m.dtype == jnp.float32


def _rounded_cotangent(x, m, spec):
    """The head with the float32 cotangent rounded once to bf16 before dh (the cheaper alternative)."""
    @jax.custom_vjp
    def f(x):
        return jnp.einsum(spec, x, m.astype(x.dtype), preferred_element_type=jnp.float32)

    def fwd(x):
        return f(x), None

    def bwd(_, g):
        back = spec.split("->")[1] + "," + spec.split(",")[1].split("->")[0] + "->" + spec.split(",")[0]
        return (jnp.einsum(back, g.astype(x.dtype), m.astype(x.dtype), preferred_element_type=jnp.float32
                           ).astype(x.dtype),)

    f.defvjp(fwd, bwd)
    return f(x)


def test_bf16_layers_run_from_their_bits_and_refuse_a_gradient():
    """16-bit layer weights enter the layer scan as their bits (XLA:CPU otherwise carries a float32 copy of
    the whole stack through the loop, and a frozen kernel's gradient was stacked per layer): the forward equals
    the float32-cast model's to bf16 rounding, the LoRA gradient's program holds no float32 or per-layer copy
    of a kernel stack, and differentiating the bf16 weights themselves is refused (a float32 copy trains)."""
    from jaxmarl_llm.models.lora import LoraConfig, init_lora

    cfg = config.tiny("qwen3", num_layers=6, dtype="bfloat16", param_dtype="bfloat16")
    assert cfg.num_layers - 1 > transformer.UNROLLED_LAYERS  # the scan
    params = transformer.init_params(cfg, jax.random.PRNGKey(0), std=0.1)
    lcfg = LoraConfig(rank=4)
    lora = jax.tree.map(lambda x: x + 0.05, init_lora(jax.random.PRNGKey(1), cfg, lcfg))
    tokens = jax.random.randint(jax.random.PRNGKey(3), (4, 10), 0, cfg.vocab_size)
    at = jnp.full((4, 2), 8)

    def hidden(p, lo):
        return transformer.forward(p, tokens, cfg, lora=lo, lora_scale=lcfg.scale, read_at=at)[1]

    master = jax.tree.map(lambda a: a.astype(jnp.float32), params)  # float32 storage, bf16 compute
    np.testing.assert_allclose(np.asarray(hidden(params, lora), np.float32),
                               np.asarray(hidden(master, lora), np.float32), atol=0.05)
    loss = lambda lo, p: jnp.sum(hidden(p, lo).astype(jnp.float32) ** 2)  # noqa: E731
    g16, g32 = jax.grad(loss)(lora, params), jax.grad(loss)(lora, master)
    for a, b in zip(jax.tree.leaves(g16), jax.tree.leaves(g32)):  # the same values, read the same way
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-3 * float(jnp.max(jnp.abs(b))))
    text = jax.jit(jax.grad(loss)).lower(lora, params).compile().as_text()
    d, f = cfg.hidden_size, cfg.intermediate_size
    stacks = {s for n in (cfg.num_layers - 1, cfg.num_layers) for s in ((n, d, f), (n, f, d))}  # scanned / all
    made = [(dt, op) for dt, shape, op in re.findall(r"= (\w+)\[([\d,]+)\]\{[^}]*\} ([\w-]+)\(", text)
            if tuple(map(int, shape.split(","))) in stacks and dt in ("f32", "bf16") and op != "parameter"]
    assert not made, made  # no float32 copy of a kernel stack, no kernel-shaped stack built in the loop
    with pytest.raises(TypeError, match="16-bit weights are read as constants"):
        jax.grad(lambda p: loss(lora, p))(params)
    assert jax.tree.leaves(jax.grad(lambda p: loss(lora, p))(master))[0].dtype == jnp.float32
