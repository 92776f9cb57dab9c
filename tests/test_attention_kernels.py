"""Attention backends against the "xla" reference: the Pallas kernels (interpret mode on CPU), the decode kernel on
ragged caches, the whole model and a GRPO update with attention_backend="pallas", and the switch's errors.

Tolerances are relative to the reference's largest magnitude: float32 1e-5, bfloat16 2e-2 (both backends
round bf16 products and probabilities, in a different order). On a GPU every test runs at "highest" matmul precision:
XLA's default there multiplies float32 in TF32 (10-bit mantissa), which moved the float32 outputs by up to 8e-4 on an
H200 (tolerance 1e-5): the float32 comparisons would test TF32 rounding rather than the kernels."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.models import attention, config, lora as L, sampling, transformer
from jaxmarl_llm.models.kernels import cudnn_attention, decode_attention, flash_attention, pallas_attention
from jaxmarl_llm.train.lm.episode_sample import take_episodes

TOL = {jnp.float32: 1e-5, jnp.bfloat16: 2e-2}
FLASH, DECODE = 0, 1 << 30  # decode_max_rows that force the flash / the decode forward kernel


@pytest.fixture(autouse=True)
def _full_float32_matmuls():
    if jax.default_backend() == "cpu":  # exact float32 already
        yield
        return
    with jax.default_matmul_precision("highest"):
        yield


def _inputs(b, t, s, hq, hkv, d, dtype, seed=0):
    ks = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(ks[0], (b, t, hq, d), jnp.float32).astype(dtype)
    k = jax.random.normal(ks[1], (b, s, hkv, d), jnp.float32).astype(dtype)
    v = jax.random.normal(ks[2], (b, s, hkv, d), jnp.float32).astype(dtype)
    w = jax.random.normal(ks[3], (b, t, hq, d), jnp.float32)
    return q, k, v, w


def _value_and_grads(fn, q, k, v, pos, w):
    """out and d/d(q, k, v) of sum(out * w): a random-weighted sum, so every output element's gradient counts."""
    def loss(q, k, v):
        return jnp.sum(fn(q, k, v, pos).astype(jnp.float32) * w)

    return jax.jit(lambda q, k, v: (fn(q, k, v, pos), jax.grad(loss, argnums=(0, 1, 2))(q, k, v)))(q, k, v)


def _assert_close(got, want, dtype, what):
    want = np.asarray(want, np.float32)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=0, atol=TOL[dtype] * scale, err_msg=what)


def _check_against_xla(b, t, s, hq, hkv, d, offsets, dtype=jnp.float32, block=(16, 16), paths=(FLASH,)):
    """Forward and dq, dk, dv of "pallas" (each forced forward kernel; the backward is always the flash one)
    equal the "xla" reference. Row r's queries sit at positions offsets[r] + t."""
    q, k, v, w = _inputs(b, t, s, hq, hkv, d, dtype)
    pos = jnp.asarray(offsets, jnp.int32)[:, None] + jnp.arange(t, dtype=jnp.int32)[None]
    ref_out, ref_grads = _value_and_grads(lambda *a: attention.attention(*a, backend="xla"), q, k, v, pos, w)
    for path in paths:
        def fn(q, k, v, pos):
            return pallas_attention.pallas_attention(q, k, v, pos, block_q=block[0], block_k=block[1],
                                                     decode_max_rows=path)

        out, grads = _value_and_grads(fn, q, k, v, pos, w)
        tag = f"{'decode' if path else 'flash'} b={b} t={t} s={s} hq={hq} hkv={hkv} d={d} {jnp.dtype(dtype).name}"
        assert out.dtype == q.dtype and all(g.dtype == x.dtype for g, x in zip(grads, (q, k, v)))
        _assert_close(out, ref_out, dtype, f"out {tag}")
        for name, g, r in zip("qkv", grads, ref_grads):
            _assert_close(g, r, dtype, f"d{name} {tag}")


# (b, t, s, hq, hkv, d, offsets, dtype, paths): batch 1-2, GQA ratios 1/2/4, head_dim 64 (one 128), lengths 1/17/40,
# whole sequences (s == t, offsets 0) and cache offsets (s > t, rows at different offsets, row 1 of the last ones
# running past the cache's end: its padding queries see every slot, as in the reference)
SMALL = [
    (1, 1, 1, 2, 2, 64, [0], jnp.float32, (FLASH, DECODE)),
    (2, 17, 17, 4, 2, 64, [0, 0], jnp.float32, (FLASH, DECODE)),
    (2, 40, 40, 8, 2, 64, [0, 0], jnp.float32, (FLASH,)),
    (2, 17, 40, 4, 1, 128, [3, 30], jnp.float32, (FLASH,)),
    (2, 3, 40, 4, 2, 64, [0, 36], jnp.float32, (DECODE,)),
    (2, 17, 17, 4, 2, 64, [0, 0], jnp.bfloat16, (FLASH,)),
    (2, 17, 40, 4, 1, 64, [3, 30], jnp.bfloat16, (FLASH, DECODE)),
]


@pytest.mark.parametrize("b,t,s,hq,hkv,d,offsets,dtype,paths", SMALL)
def test_pallas_equals_xla_values_and_gradients(b, t, s, hq, hkv, d, offsets, dtype, paths):
    _check_against_xla(b, t, s, hq, hkv, d, offsets, dtype, paths=paths)


def _grid():
    """batch 1-4, heads 1-8, ratios 1/2/4, head_dim 64/128, lengths 1/17/128/300, whole sequences and offsets."""
    for i, (t, ratio, d, cached) in enumerate(itertools.product((1, 17, 128, 300), (1, 2, 4), (64, 128), (False, True))):
        b, hkv = 1 + i % 4, (1, 2)[i % 2]
        hq = hkv * ratio
        s, offsets = (t + 37, [(7 * r) % 40 for r in range(b)]) if cached else (t, [0] * b)
        dtype = (jnp.float32, jnp.bfloat16)[(i // 2) % 2]
        yield pytest.param(b, t, s, hq, hkv, d, offsets, dtype, id=f"b{b}-t{t}-s{s}-h{hq}x{hkv}-d{d}-{dtype.__name__}")


@pytest.mark.slow
@pytest.mark.parametrize("b,t,s,hq,hkv,d,offsets,dtype", list(_grid()))
def test_pallas_equals_xla_on_the_big_grid(b, t, s, hq, hkv, d, offsets, dtype):
    paths = (FLASH, DECODE) if t * hq // hkv <= 64 else (FLASH,)
    _check_against_xla(b, t, s, hq, hkv, d, offsets, dtype, block=(32, 32), paths=paths)


@pytest.mark.parametrize("t,hq,hkv,splits", [(1, 4, 2, 1), (1, 8, 2, 3), (3, 4, 4, 2)])
def test_decode_kernel_reads_only_each_rows_valid_slots(t, hq, hkv, splits):
    """Caches filled to different lengths per row, slots past each row's length holding large random garbage:
    the decode kernel equals the reference (which masks them), and overwriting the garbage changes nothing."""
    b, s, d = 3, 70, 64
    q, k, v, _ = _inputs(b, t, s, hq, hkv, d, jnp.float32, seed=1)
    lengths = jnp.asarray([1, 33, 70 - t], jnp.int32)  # valid slots before the new queries
    pos = lengths[:, None] + jnp.arange(t, dtype=jnp.int32)[None]  # [B, T]
    past = jnp.arange(s)[None, :, None, None] > pos[:, -1, None, None, None]  # [B, S, 1, 1] beyond the last query

    def run(k, v):
        return decode_attention.decode_forward(q, k, v, pos, block_k=16, num_splits=splits, interpret=True)

    noise = jax.random.normal(jax.random.key(9), k.shape)
    garbage_k, garbage_v = jnp.where(past, 50 * noise, k), jnp.where(past, -50 * noise, v)
    out, lse = run(garbage_k, garbage_v)
    ref = attention.attention(q, garbage_k, garbage_v, pos)
    _assert_close(out, ref, jnp.float32, "decode vs reference")
    qg = q.reshape(b, t, hkv, hq // hkv, d)
    ref_lse = attention._gqa_forward(qg, garbage_k, garbage_v, pos)[1]  # [B, Hkv, G, T]
    np.testing.assert_allclose(np.asarray(lse), np.asarray(ref_lse).reshape(b, hq, t), atol=1e-5)
    other, _ = run(jnp.where(past, 0.0, k), jnp.where(past, 7.0, v))
    np.testing.assert_array_equal(np.asarray(other), np.asarray(out))


def test_decode_kernel_agrees_with_jaxs_shipped_gqa_decode():
    """Where JAX's shipped `decode_attention.gqa` fits (one query per row, S a multiple of its splits), ours
    gives the same numbers: a second reference for the split-K merge."""
    from jax.experimental.pallas.ops.gpu import decode_attention as shipped

    b, s, hq, hkv, d = 2, 64, 4, 2, 64
    q, k, v, _ = _inputs(b, 1, s, hq, hkv, d, jnp.float32, seed=2)
    lengths = jnp.asarray([9, 50], jnp.int32)
    ours, _ = decode_attention.decode_forward(q, k, v, (lengths - 1)[:, None], block_k=16, num_splits=2,
                                              interpret=True)
    theirs = shipped.gqa(q[:, 0], k, v, kv_seq_len=lengths, block_k=16, k_splits=4, interpret=True)
    np.testing.assert_allclose(np.asarray(ours[:, 0]), np.asarray(theirs), atol=1e-5)


def test_flash_forward_skips_nothing_it_needs_across_many_blocks():
    """Blocks of 16 over T = S = 100 (7 x 7 tiles, a padded last one) with rows of different cache offsets: the
    logsumexp the backward reads equals the reference's."""
    b, t, s, hq, hkv, d = 2, 100, 130, 2, 1, 64
    q, k, v, _ = _inputs(b, t, s, hq, hkv, d, jnp.float32, seed=3)
    pos = jnp.asarray([0, 29], jnp.int32)[:, None] + jnp.arange(t, dtype=jnp.int32)[None]
    out, lse = flash_attention.flash_forward(q, k, v, pos, block_q=16, block_k=16, interpret=True)
    ref_out, ref_lse = attention._gqa_forward(q.reshape(b, t, hkv, hq // hkv, d), k, v, pos)
    _assert_close(out, ref_out.reshape(out.shape), jnp.float32, "out")
    np.testing.assert_allclose(np.asarray(lse), np.asarray(ref_lse).reshape(b, hq, t), atol=1e-5)


@pytest.mark.parametrize("b,t,s,hq,hkv,d,dtype", [
    (2, 100, 100, 16, 8, 128, jnp.bfloat16),  # Qwen3-0.6B's heads: flash forward, dq, dk/dv
    (2, 1, 300, 14, 2, 64, jnp.float32),  # Qwen2.5-0.5B's (G = 7): decode forward, flash backward
    (3, 5, 77, 4, 4, 16, jnp.bfloat16),  # head_dim 16, odd lengths
])
def test_kernels_lower_to_triton_for_cuda(b, t, s, hq, hkv, d, dtype):
    """No GPU here, but the Pallas -> Triton lowering runs in Python: exporting the forward + backward for CUDA
    checks every kernel's tiles (powers of two), indexing and control flow lower, vmapped over 2 agents too.
    (Triton's own compile to PTX and the numbers on a GPU are not checked: docs/attention.md.)"""
    from jax import export

    q = jax.ShapeDtypeStruct((b, t, hq, d), dtype)
    k = jax.ShapeDtypeStruct((b, s, hkv, d), dtype)
    pos = jax.ShapeDtypeStruct((b, t), jnp.int32)

    def grads(q, k, v, pos):
        def loss(q, k, v):
            return jnp.sum(pallas_attention.pallas_attention(q, k, v, pos, where="gpu").astype(jnp.float32))

        return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)

    triton = [export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]
    for fn, args in ((grads, (q, k, k, pos)),
                     (jax.vmap(grads), [jax.ShapeDtypeStruct((2, *x.shape), x.dtype) for x in (q, k, k, pos)])):
        module = export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=triton)(*args).mlir_module()
        assert module.count("xla.gpu.triton") == 3  # a forward kernel, dq, dk/dv


# ---- the whole model ------------------------------------------------------------------------------------------

CFG = config.tiny("qwen3")  # 4 query heads, 2 kv heads, head_dim 32
PALLAS = CFG.replace(attention_backend="pallas")


@pytest.fixture(scope="module")
def params():
    return transformer.init_params(CFG, jax.random.key(0), std=0.2)


def test_model_logits_and_greedy_tokens_equal_xla(params):
    tokens = jnp.asarray(np.random.RandomState(0).randint(0, 256, (2, 21)), jnp.int32)
    want = transformer.forward_jit(params, tokens, CFG)[0]
    got = transformer.forward_jit(params, tokens, PALLAS)[0]
    _assert_close(got, want, jnp.float32, "logits")
    # prompts of different lengths: a padded prefill into the cache, then one-token decode steps (decode kernel)
    prompt = jnp.asarray([[5, 6, 7, 8, 9, 10, 11], [9, 10, 0, 0, 0, 0, 0]], jnp.int32)
    lengths = jnp.asarray([7, 2], jnp.int32)
    kw = dict(max_new_tokens=10, temperature=0.0)
    want_toks, want_lps, _ = sampling.generate(jax.random.key(0), params, None, prompt, lengths, CFG, **kw)
    got_toks, got_lps, _ = sampling.generate(jax.random.key(0), params, None, prompt, lengths, PALLAS, **kw)
    np.testing.assert_array_equal(np.asarray(got_toks), np.asarray(want_toks))
    np.testing.assert_allclose(np.asarray(got_lps), np.asarray(want_lps), atol=1e-5)


def test_lora_gradient_of_the_log_likelihood_equals_xla(params):
    """Per-agent adapters (vmap over the agent axis): d log-likelihood / d LoRA through the Pallas backward."""
    lcfg = L.LoraConfig(rank=2, alpha=4.0, targets=("q", "k", "v", "up"))
    lora = L.init_lora(jax.random.key(2), CFG, lcfg, num_agents=2)
    lora = jax.tree.map(lambda x: x + 0.1 * jax.random.normal(jax.random.key(3), x.shape), lora)  # B != 0
    tokens = jnp.asarray(np.random.RandomState(1).randint(0, 256, (2, 2, 19)), jnp.int32)  # [A, B, T]

    def log_likelihood(lo, cfg):
        logits = L.forward_agents(params, lo, tokens, cfg, lcfg)[0]
        logp = jax.nn.log_softmax(logits[..., :-1, :])
        return jnp.take_along_axis(logp, tokens[..., 1:, None], -1).sum()

    grad = jax.jit(jax.grad(log_likelihood), static_argnums=1)
    want, got = grad(lora, CFG), grad(lora, PALLAS)
    for (path, w), g in zip(jax.tree_util.tree_flatten_with_path(want)[0], jax.tree.leaves(got)):
        _assert_close(g, w, jnp.float32, jax.tree_util.keystr(path))


def test_one_grpo_update_gives_the_same_adapters():
    """One GRPO update (incremental rollout: chunked prefill at cache offsets, decode steps, the scoring forward
    and its backward) of tests/test_lm_rl.py's dense-reward game: the same adapters with either backend.
    (guess_number's first update from a random model has equal returns in every group, zero advantages and
    no adapter update to compare; this game's returns differ from the first update.)"""
    import test_lm_rl
    from tiny_configs import TINY_LORA, TINY_MODEL

    def run(backend):
        c = test_lm_rl._config("grpo", num_envs=4, group_size=4, update_epochs=1)
        c.model.update(TINY_MODEL, num_heads=4, num_kv_heads=2,
                       attention_backend=backend)  # what --config.model.attention_backend sets
        c.lora.update(TINY_LORA, targets=("q", "v", "up"))
        trainer = test_lm_rl._make(c)
        assert trainer.policy.cfg.attention_backend == backend
        state, metrics = test_lm_rl._run(trainer, 1)
        return jax.device_get(state.trainable["lora"]), jax.device_get(metrics)

    want, want_metrics = run("xla")
    got, got_metrics = run("pallas")
    moved = max(float(np.abs(leaf["b"]).max()) for leaf in want.values())
    assert moved > 1e-3, "the update must move the adapters for the comparison to mean anything"
    # Adam's first step is lr * g / (|g| + eps): an entry whose gradient is ~eps (1e-8, rounding level) turns a
    # last-bit difference of g into a 1e-3 relative one of its step. So: almost every entry to 1e-4, all to 1e-3
    # of the largest step.
    close = []
    for (path, w), g in zip(jax.tree_util.tree_flatten_with_path(want)[0], jax.tree.leaves(got)):
        g, w = np.asarray(g), np.asarray(w)
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-3 * moved, err_msg=jax.tree_util.keystr(path))
        close.append(np.isclose(g, w, rtol=1e-4, atol=1e-6 * moved).ravel())
    assert np.mean(np.concatenate(close)) > 0.99
    np.testing.assert_allclose(np.asarray(got_metrics["episode_return"]), np.asarray(want_metrics["episode_return"]))


# ---- the switch -----------------------------------------------------------------------------------------------

def _small():
    q, k, v, _ = _inputs(1, 3, 3, 2, 1, 16, jnp.float32)
    return q, k, v, jnp.arange(3, dtype=jnp.int32)[None]


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU's refusal")
def test_cudnn_on_cpu_raises_one_clear_line():
    with pytest.raises(RuntimeError) as err:
        attention.attention(*_small(), backend="cudnn")
    assert str(err.value) == ("attention backend 'cudnn' needs a CUDA GPU with cuDNN; this platform is cpu: "
                              "use 'xla' or 'auto'")
    with pytest.raises(ValueError, match="bfloat16 or float16 inputs, not float32"):  # as on a GPU, in float32
        cudnn_attention.check_cudnn(jnp.float32, where="gpu")


def test_auto_resolves_per_platform():
    assert attention.resolve_backend("auto") == {"cpu": "xla", "gpu": "pallas"}[jax.default_backend()]
    assert attention.resolve_backend("auto", where="cpu") == "xla"
    q, k, v, pos = _small()
    resolved = attention.resolve_backend("auto")  # "auto" is that backend, bit for bit (pallas and xla differ
    np.testing.assert_array_equal(np.asarray(attention.attention(q, k, v, pos, backend="auto")),  # by 1e-8 on a GPU)
                                  np.asarray(attention.attention(q, k, v, pos, backend=resolved)))
    assert attention.resolve_backend("auto", where="gpu") == "pallas"
    assert attention.resolve_backend("auto", whole_sequence=True, where="tpu") == "pallas"
    assert attention.resolve_backend("auto", whole_sequence=False, where="tpu") == "xla"  # a cache: see below
    assert attention.resolve_backend("pallas", where="cpu") == "pallas"
    assert config.tiny(attention_backend="auto").attention_backend == "auto"
    # only interpreted kernels (pallas on CPU) turn XLA:CPU's YNNPACK fusions off (the crash in the last test)
    assert attention.compiler_options("pallas", where="cpu") == attention.CPU_INTERPRET_OPTIONS
    assert all(attention.compiler_options(b, where=w) is None
               for b, w in [("xla", "cpu"), ("auto", "cpu"), ("pallas", "gpu"), ("auto", "gpu"), ("cudnn", "gpu")])


def test_unknown_backend_and_bad_blocks_name_the_choices():
    with pytest.raises(ValueError, match=r"unknown attention backend 'flash'; expected one of \('xla', 'pallas', "
                                         r"'cudnn', 'auto'\)"):
        attention.attention(*_small(), backend="flash")
    with pytest.raises(ValueError, match="attention_backend='flash'; expected one of"):
        config.tiny(attention_backend="flash")
    with pytest.raises(ValueError, match="attention_block_k=24 must be 0"):
        config.tiny(attention_block_k=24)


def test_run_config_names_a_bad_backend_or_block_in_one_line():
    """`--config.model.attention_backend=flash` / a bad block size stop at start-up naming the key."""
    from jaxmarl_llm.train.config import ConfigError, lm_rl_defaults, validate_lm_rl

    for key, value, match in [("attention_backend", "flash", "model.attention_backend: 'flash' is not a backend"),
                              ("attention_block_q", 24, "model.attention_block_q: must be 0")]:
        c = lm_rl_defaults()
        c.mesh.num_devices = 1  # the suite forces 8 host devices; the model group is what is checked here
        c.model[key] = value
        with pytest.raises(ConfigError, match=match):
            validate_lm_rl(c)


def test_config_block_sizes_reach_the_kernels(params):
    """Tiles of 16 (several per sequence) and the platform default give the same logits."""
    tokens = jnp.asarray(np.random.RandomState(2).randint(0, 256, (1, 37)), jnp.int32)
    want = transformer.forward_jit(params, tokens, CFG)[0]
    got = transformer.forward_jit(params, tokens, PALLAS.replace(attention_block_q=16, attention_block_k=16))[0]
    _assert_close(got, want, jnp.float32, "logits, tiles of 16")


def test_tpu_path_is_the_shipped_kernel_for_whole_sequences_and_refuses_a_cache():
    """On TPU "pallas" is JAX's Mosaic flash attention (K/V repeated for GQA), run here in TPU interpret mode;
    a call at a cache offset raises naming what that kernel lacks."""
    from jax.experimental.pallas import tpu as pltpu

    b, t, hq, hkv, d = 1, 40, 4, 2, 64
    q, k, v, w = _inputs(b, t, t, hq, hkv, d, jnp.float32, seed=4)
    pos = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
    ref_out, ref_grads = _value_and_grads(lambda *a: attention.attention(*a, backend="xla"), q, k, v, pos, w)
    with pltpu.force_tpu_interpret_mode():
        out, grads = _value_and_grads(lambda *a: pallas_attention.pallas_attention(*a, whole_sequence=True,
                                                                                   where="tpu"), q, k, v, pos, w)
    _assert_close(out, ref_out, jnp.float32, "tpu out")
    for name, g, r in zip("qkv", grads, ref_grads):
        _assert_close(g, r, jnp.float32, f"tpu d{name}")
    with pytest.raises(NotImplementedError, match="no per-row query offsets"):
        pallas_attention.pallas_attention(q[:, :1], k, v, pos[:, :1] + 5, where="tpu")


def test_tpu_path_lowers_through_mosaic():
    """Exported for TPU (Mosaic lowering runs in Python): Qwen3-0.6B's heads, a length that needs padding."""
    from jax import export

    q = jax.ShapeDtypeStruct((2, 300, 16, 128), jnp.bfloat16)
    k = jax.ShapeDtypeStruct((2, 300, 8, 128), jnp.bfloat16)
    pos = jax.ShapeDtypeStruct((2, 300), jnp.int32)

    def grads(q, k, v, pos):
        def loss(q, k, v):
            out = pallas_attention.pallas_attention(q, k, v, pos, whole_sequence=True, where="tpu")
            return jnp.sum(out.astype(jnp.float32))

        return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)

    module = export.export(jax.jit(grads), platforms=["tpu"])(q, k, k, pos).mlir_module()
    assert module.count("tpu_custom_call") == 3  # forward, dk/dv, dq


# ---- a whole LM RL update through the run config -----------------------------------------------------------

def tic_tac_toe_update(backend: str) -> dict[str, float]:
    """One update of configs/tic_tac_toe.py:scratch (history-free observations: the rollout re-reads each board
    into a cache, prefill at offsets and decode steps) built and compiled as experiments/train.py does ->
    its metrics. Module level: tests run it in a child process."""
    import os

    from jaxmarl_llm.parallel import mesh as mesh_lib

    from jaxmarl_llm.run import entry
    from jaxmarl_llm.run.cli import load_config_file

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    c = load_config_file(os.path.join(root, "configs", "tic_tac_toe.py:scratch"))
    c.mesh.num_devices, c.num_envs, c.total_episodes, c.run.updates_per_chunk = 1, 8, 8, 1
    c.in_graph_eval.every = 0
    c.model.attention_backend = backend
    trainer, chunk_fn, _, _ = entry.build(c)
    mesh = mesh_lib.make_mesh(1)
    state = mesh_lib.put(jax.jit(trainer.init)(jax.random.PRNGKey(c.seed), trainer.hparams), mesh,
                         trainer.state_specs)
    _, metrics = chunk_fn(trainer, mesh, 1)(state, trainer.hparams)
    metrics = jax.device_get(metrics)
    take_episodes(metrics)  # the sampled episodes (transcripts) are not metrics
    return {k: float(np.asarray(v)[0]) for k, v in metrics.items()}


def test_tic_tac_toe_update_runs_on_pallas_and_equals_xla():
    """The CLI path that jaxlib 0.10.2's XLA:CPU crashes without the compiler options: it segfaults in a YNNPACK
    transpose running this update with the interpreted kernels (models/attention.CPU_INTERPRET_OPTIONS turns those
    fusions off for such programs). The pallas run goes in a child process, so a crash fails this test instead of killing the worker;
    its metrics (returns, losses, gradient norm) equal the "xla" run's."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, sys; sys.path.insert(0, 'tests'); import test_attention_kernels as t; "
            "print('METRICS' + json.dumps(t.tic_tac_toe_update('pallas')))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    got = json.loads(done.stdout.split("METRICS")[-1])
    want = tic_tac_toe_update("xla")
    assert want["episode_return"] == got["episode_return"] and want["grad_norm"] > 0
    for name in ("episode_return", "value_loss", "actor_loss", "grad_norm", "entropy", "won_rate"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-3, atol=1e-5, err_msg=name)
