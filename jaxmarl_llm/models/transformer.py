"""Decoder LM (Llama 3.x / Qwen2 / Qwen3) as pure functions over a params pytree.

Why pure functions: layers are stacked on a leading [N] axis and run with one
`lax.scan` (compile time independent of depth; up to UNROLLED_LAYERS, a Python loop), LoRA adapters are a separate
pytree that `jax.vmap` maps over an agent axis while the base is shared, and the
"adapters off" reference policy is the same call with `lora=None`. A model is a
`ModelConfig` plus a params pytree (a plain dict: what jit, sharding, Orbax and
the HF loader / saver in `hf.py` all take as is); there is no module object.
(The small MLP nets in `mlp.py` are NNX modules, split into pytrees at the edge.)

Entry points

    init_params(cfg, key) -> params
    init_cache(cfg, batch, max_len) -> cache {"k","v": [N, B, S, Hkv, D], "lengths": [B]}
        (k, v may be uint16: the bits of a 16-bit compute-dtype cache, `as_bits`; forward returns them as bits)
    forward(params, tokens, cfg, *, lora=None, lora_scale=1.0, cache=None,
            num_new=None, logit_index=None, read_at=None) -> (logits, hidden, cache)
        lora leaves [N, in, r] (one adapter) or [N, B, in, r] (one per row)
    forward_jit: the same, jitted (cfg and lora_scale static), for eager callers

Shapes: tokens [B, T] right-padded. Without a cache, token t sits at position
t. With a cache, row b's tokens go to slots/positions lengths[b] + t and the
cache's lengths advance by num_new[b] (default T): so a padded prefill and
one-token decode steps are the same call. `hidden` is the final-norm output
[B, T, D] (what the LM head and value heads read). `logits` is [B, T, V] in
float32, or [B, V] at `logit_index` [B] when given (saves the vocab matmul
on every prompt token during prefill). `read_at` [B, M] (no cache): logits and hidden only at those
positions, [B, M, ...], and the last layer computed there only (a loss that reads M of T positions).

Params layout (kernels are [in, out], i.e. the transpose of torch Linear):

    embed [V, D]; final_norm [D]; lm_head [D, V] (absent when tied)
    layers: attn_norm [N, D], mlp_norm [N, D],
            q/k/v/o/gate/up/down: {"kernel": [N, in, out], "bias": [N, out] (q/k/v, Qwen2)},
            q_norm/k_norm [N, head_dim] (Qwen3)

Sharded weights: inside a shard_map over a mesh with an "fsdp" axis the big matrices may be the local blocks
of weights sharded over it (models/fsdp.py, parallel/mesh.py); `forward` and `lm_head` see that from the shapes,
all-gather each weight just before it is used (one layer at a time in the scan) and rematerialise each layer
under a gradient. Whole params run exactly the code above, with no gather.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxmarl_llm.models import fsdp
from jaxmarl_llm.models.attention import attention
from jaxmarl_llm.models.config import ModelConfig, param_shapes
from jaxmarl_llm.models.config import PROJECTIONS, projection_shapes  # noqa: F401 (re-exported: lora.py, hf.py)
from jaxmarl_llm.models.rope import apply_rope, inv_freq

Params = dict[str, Any]
Cache = dict[str, jax.Array]
UNROLLED_LAYERS = 4  # a full-sequence forward of this many layers or fewer runs them as a Python loop, not a scan

HALF = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


@jax.custom_jvp
def _half_bits(w: jax.Array) -> jax.Array:
    """A 16-bit float array's bits as uint16: the form stacked weights enter the layer scan in.

    Why: XLA:CPU carries a bf16 array through a while loop (and slices it) in float32, so a scan over stacked
    bf16 layers converted the whole base to float32 on every call (a fifth of a 0.6B forward, more of its
    backward); integers it leaves alone. The bits carry no gradient, so a differentiated 16-bit weight is
    refused here (train a float32 copy: train/lm/weights.py float32_master)."""
    return jax.lax.bitcast_convert_type(w, jnp.uint16)


@_half_bits.defjvp
def _half_bits_jvp(primals, tangents):
    raise TypeError("forward: 16-bit weights are read as constants (no gradient); differentiate a float32 copy "
                    "of them (train/lm/weights.py float32_master), which forward casts at each use")


def as_bits(x: jax.Array) -> jax.Array:
    """A 16-bit float array's bits as uint16 (other dtypes as they are): for moving, slicing and updating a
    16-bit buffer that carries no gradient (a KV cache), which XLA:CPU otherwise does in float32 (a convert
    of the whole buffer and back around each dynamic slice, update or gather)."""
    return jax.lax.bitcast_convert_type(x, jnp.uint16) if x.dtype in HALF else x


def from_bits(x: jax.Array, dtype: Any) -> jax.Array:
    """The inverse of `as_bits` for an array of `dtype`."""
    return jax.lax.bitcast_convert_type(x, dtype) if jnp.dtype(dtype) in HALF else x


def layers_in(layers: Params) -> tuple[Params, Callable[[Params], Params], Any]:
    """(the stacked layer weights with 16-bit leaves as their bits, the function that reads one layer's slice of
    them, the 16-bit dtype or None). The read turns norms and biases back; kernels stay bits until `_dense`
    reads them, so a backward keeps the scan's own slice, not a 16-bit copy the scan would stack per layer."""
    dtypes = jax.tree.map(lambda a: a.dtype, layers)
    half = {d for d in jax.tree.leaves(dtypes) if d in HALF}
    if len(half) > 1:
        raise ValueError(f"forward: layer weights mix 16-bit dtypes {sorted(map(str, half))}")
    bits = jax.tree.map(lambda a: _half_bits(a) if a.dtype in HALF else a, layers)

    def read(one: Params) -> Params:
        def leaf(path, a, d):
            kernel = jax.tree_util.keystr(path).endswith("['kernel']")
            return a if kernel else from_bits(a, d)

        return jax.tree_util.tree_map_with_path(leaf, one, dtypes)

    return bits, read, (half.pop() if half else None)


@functools.partial(jax.jit, static_argnames=("cfg", "std"))
def init_params(cfg: ModelConfig, key: jax.Array, std: float = 0.02) -> Params:
    """Random weights (normal(std) matrices, unit norms, zero biases) in cfg.param_dtype."""
    shapes = param_shapes(cfg)
    is_shape = lambda x: isinstance(x, tuple)  # noqa: E731
    leaves, treedef = jax.tree.flatten(shapes, is_leaf=is_shape)
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree.flatten_with_path(shapes, is_leaf=is_shape)[0]]
    keys = jax.random.split(key, len(leaves))
    out = []
    for path, shape, k in zip(paths, leaves, keys):
        if "norm" in path:
            out.append(jnp.ones(shape, cfg.weight_dtype))
        elif "bias" in path:
            out.append(jnp.zeros(shape, cfg.weight_dtype))
        else:
            out.append((std * jax.random.normal(k, shape, jnp.float32)).astype(cfg.weight_dtype))
    return jax.tree.unflatten(treedef, out)


def init_cache(cfg: ModelConfig, batch: int, max_len: int, dtype: Any = None) -> Cache:
    """An empty KV cache of capacity max_len per row, in the compute dtype unless given."""
    dtype = dtype or cfg.compute_dtype
    shape = (cfg.num_layers, batch, max_len, cfg.num_kv_heads, cfg.head_dim)
    return {"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype), "lengths": jnp.zeros((batch,), jnp.int32)}


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """RMSNorm over the last axis, computed in float32, returned in x.dtype."""
    xf = x.astype(jnp.float32)
    xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (weight.astype(jnp.float32) * xf).astype(x.dtype)


@jax.custom_vjp
def _low_rank(x: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """x [..., in] @ A [in, r] @ B [r, out], with a hand-written backward.

    Why: left to autodiff, XLA:CPU computes dB^T = dy^T @ low and materialises dy^T, fusing the
    SwiGLU backward into that transposed copy, which ran at ~160 MB/s (79 ms for one [6272, 512]
    activation of the tic-tac-toe loss). The same gradients written out below cut the MLP's
    forward + backward from ~500 ms to ~300 ms on that shape (equal to 1e-6, relative)."""
    return _low_rank_fwd(x, a, b)[0]


def _low_rank_fwd(x, a, b):
    low = jnp.einsum("...i,ir->...r", x, a)
    return jnp.einsum("...r,ro->...o", low, b), (x, a, b, low)


def _low_rank_bwd(res, dy):
    x, a, b, low = res
    dlow = jnp.einsum("...o,ro->...r", dy, b)
    db = jnp.einsum("...r,...o->ro", low, dy)
    # dA^T = dlow^T x, transposed after: the big activation x is the dot's right operand as it lies, where
    # x^T dlow had XLA:CPU copy x into a transposed [in, tokens] layout first (17 ms per [6272, 512] x)
    da = jnp.einsum("...r,...i->ri", dlow, x).T
    dx = jnp.einsum("...r,ir->...i", dlow, a)
    return dx, da, db


_low_rank.defvjp(_low_rank_fwd, _low_rank_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _dense(x: jax.Array, kernel: jax.Array, half: Any = None) -> jax.Array:
    """x [..., in] @ kernel [in, out] in x.dtype with float32 accumulation: float32 [..., out], which the caller
    rounds to x.dtype. A uint16 kernel holds the bits of a `half` (16-bit) one (`layers_in`).

    Why the hand-written backward: autodiff of a bf16 x bf16 -> f32 dot pulls back a float32 cotangent, so
    the dx product ran in float32 against a float32 copy of every kernel, and a frozen kernel's gradient was
    computed and stacked over the layers anyway. The caller's rounding makes the cotangent exact in x.dtype,
    so dx runs on the native bf16 path with float32 accumulation; a kernel gets a gradient only when it is
    differentiated (symbolic zeros), in its own dtype (float32 master weights keep a float32 gradient)."""
    return jnp.einsum("...i,io->...o", x, _kernel(kernel, half, x.dtype), preferred_element_type=jnp.float32)


def _kernel(kernel: jax.Array, half: Any, dtype: Any) -> jax.Array:
    """The kernel in `dtype`, read from its bits when it arrives as uint16."""
    if kernel.dtype == jnp.uint16:
        kernel = from_bits(kernel, half)
    return kernel.astype(dtype)


def _dense_fwd(x, kernel, half):
    out = _dense(x.value, kernel.value, half)
    return out, (x.value, kernel.value, x.perturbed, kernel.perturbed)


def _dense_bwd(half, res, dy):
    x, kernel, x_perturbed, kernel_perturbed = res
    dy = dy.astype(x.dtype)
    dx = dk = None
    if x_perturbed:
        dx = jnp.einsum("...o,io->...i", dy, _kernel(kernel, half, x.dtype), preferred_element_type=jnp.float32)
        dx = dx.astype(x.dtype)
    if kernel_perturbed:
        dk = jnp.einsum("...i,...o->io", x, dy, preferred_element_type=jnp.float32).astype(kernel.dtype)
    return dx, dk


_dense.defvjp(_dense_fwd, _dense_bwd, symbolic_zeros=True)


def _linear(x: jax.Array, p: Params, lora: Params | None, scale: float, half: Any = None) -> jax.Array:
    """x [B, T, in] @ kernel [in, out] (+ bias) (+ scale * x @ A @ B).

    A [in, r] / B [r, out] are shared by every row; A [B, in, r] / B [B, r, out] give each row its own
    adapter (rows of one batch acting for different agents or opponent snapshots, in one batched call)."""
    # float32 out of the dot, rounded once to x.dtype (a no-op in fp32): XLA:CPU runs bf16 x bf16 -> f32 on
    # its native bf16 path but a bf16-out product ~2.2x slower (Zen 4, [32, 1024] x [1024, 3072])
    y = _dense(x, p["kernel"], half)
    if "bias" in p:
        y = y + p["bias"].astype(jnp.float32)
    y = y.astype(x.dtype)
    if lora is not None:
        a, b = lora["a"].astype(x.dtype), lora["b"].astype(x.dtype)
        if a.ndim == 2:
            y = y + scale * _low_rank(x, a, b)
        else:
            low = jnp.einsum("bti,bir->btr", x, a)
            y = y + scale * jnp.einsum("btr,bro->bto", low, b)
    return y


def _write_cache(cache: jax.Array, layer: jax.Array, rows: jax.Array, positions: jax.Array, new: jax.Array,
                 dtype: Any) -> tuple[jax.Array, jax.Array]:
    """cache[layer, rows, positions] = new (out-of-range positions dropped) -> (cache, cache[layer] in `dtype`).

    A 16-bit float cache arrives as its bits (`as_bits`: uint16) and is sliced, scattered and written back as
    bits: XLA:CPU has no bf16 scatter, and a bf16 dynamic update of the stacked cache converts all of it to f32
    and back (every layer, every decode step)."""
    new = as_bits(new.astype(dtype))
    one = jax.lax.dynamic_index_in_dim(cache, layer, 0, keepdims=False)  # [B, S, H, D]
    one = one.at[rows, positions].set(new, mode="drop")
    cache = jax.lax.dynamic_update_index_in_dim(cache, one, layer, 0)
    return cache, from_bits(one, dtype)


def lm_head(params: Params, hidden: jax.Array, cfg: ModelConfig) -> jax.Array:
    """hidden [..., D] -> float32 logits [..., V] (tied or untied head).

    With FSDP-sharded params (models/fsdp.py) the head's weight is all-gathered here, under a remat that keeps
    only its shard for the backward pass."""
    if fsdp.sharded(params, cfg):
        name = "embed" if cfg.tie_embeddings else "lm_head"
        full = param_shapes(cfg)[name]

        def head(w, h):
            return lm_head({name: fsdp.gather(w, full, cfg.compute_dtype)}, h, cfg)

        return jax.checkpoint(head, policy=fsdp.REMAT_POLICY)(params[name], hidden)
    hidden = hidden.astype(cfg.compute_dtype)
    if cfg.tie_embeddings:
        return _head(hidden, params["embed"], "...d,vd->...v")
    return _head(hidden, params["lm_head"], "...d,dv->...v")


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _head(h: jax.Array, w: jax.Array, spec: str) -> jax.Array:
    """float32 logits h [..., D] x w (embed [V, D] or lm_head [D, V], `spec`), the product in h.dtype.

    Why the hand-written backward: the logits stay float32 (the loss's softmax), so their cotangent is float32
    and autodiff ran dh in float32 against a float32 copy of the whole vocabulary matrix (151936 x 1024 at
    Qwen3-0.6B). Here a 16-bit h gets dh from two 16-bit products, the cotangent split into its rounding and
    the remainder (hi + lo carries ~16 of float32's 24 mantissa bits), with float32 accumulation and no copy of
    w; a frozen w gets no gradient (symbolic zeros), a trained one its gradient in its own dtype."""
    return jnp.einsum(spec, h, w.astype(h.dtype), preferred_element_type=jnp.float32)


def _head_fwd(h, w, spec):
    return _head(h.value, w.value, spec), (h.value, w.value, h.perturbed, w.perturbed)


def _head_bwd(spec, res, g):
    h, w, h_perturbed, w_perturbed = res
    ins, out = spec.split("->")
    h_spec, w_spec = ins.split(",")
    dh = dw = None
    if h_perturbed:
        back = f"{out},{w_spec}->{h_spec}"
        wc = w.astype(h.dtype)
        if h.dtype in HALF:
            hi = g.astype(h.dtype)
            lo = (g - hi.astype(jnp.float32)).astype(h.dtype)
            dh = (jnp.einsum(back, hi, wc, preferred_element_type=jnp.float32)
                  + jnp.einsum(back, lo, wc, preferred_element_type=jnp.float32))
        else:
            dh = jnp.einsum(back, g, wc, preferred_element_type=jnp.float32)
        dh = dh.astype(h.dtype)
    if w_perturbed:
        dw = jnp.einsum(f"{h_spec},{out}->{w_spec}", h.astype(jnp.float32), g).astype(w.dtype)
    return dh, dw


_head.defvjp(_head_fwd, _head_bwd, symbolic_zeros=True)


def forward(
    params: Params,
    tokens: jax.Array,
    cfg: ModelConfig,
    *,
    lora: Params | None = None,
    lora_scale: float = 1.0,
    cache: Cache | None = None,
    num_new: jax.Array | None = None,
    logit_index: jax.Array | None = None,
    read_at: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, Cache | None]:
    """Run the decoder on tokens [B, T]; see the module docstring for modes and shapes."""
    if read_at is not None and (cache is not None or logit_index is not None):
        raise ValueError("read_at is for a forward without a cache or logit_index")
    b, t = tokens.shape
    cdt = cfg.compute_dtype
    steps = jnp.arange(t, dtype=jnp.int32)[None, :]
    start = jnp.zeros((b,), jnp.int32) if cache is None else cache["lengths"]
    positions = start[:, None] + steps  # [B, T]
    freq = inv_freq(cfg)
    eps = cfg.rms_norm_eps
    lora_layers = {} if lora is None else lora
    # FSDP (models/fsdp.py): sharded weights are gathered where they are used, one layer at a time
    full = param_shapes(cfg) if fsdp.sharded(params, cfg) else None

    embed = params["embed"] if full is None else fsdp.gather(params["embed"], full["embed"], cdt)
    # whole 16-bit layers enter the scans as their bits (layers_in); sharded ones are gathered as they are
    stacked, read, half = (params["layers"], lambda lp: lp, None) if full is not None else layers_in(params["layers"])
    # a 16-bit table is gathered as its bits: XLA:CPU gathers bf16 in float32, converting the whole vocabulary
    # matrix on every call
    table = _half_bits(embed) if embed.dtype in HALF else embed
    x = from_bits(jnp.take(table, tokens, axis=0), embed.dtype).astype(cdt)  # [B, T, D]

    def block(x, lp, ll, kv_fn, at=None):
        """One decoder layer. kv_fn(k, v) -> (keys, values to attend to, cache state to return).
        at [B, M]: only the queries at those positions go on (keys and values from every position)."""
        if full is not None:
            lp = fsdp.gather_layer(lp, full["layers"], cdt)
        h = rms_norm(x, lp["attn_norm"], eps)
        q_pos, hq = positions, h
        if at is not None:
            q_pos, hq = at, jnp.take_along_axis(h, at[..., None], axis=1)
            x = jnp.take_along_axis(x, at[..., None], axis=1)
        tq = q_pos.shape[1]
        q = _linear(hq, lp["q"], ll.get("q"), lora_scale, half).reshape(b, tq, cfg.num_heads, cfg.head_dim)
        k = _linear(h, lp["k"], ll.get("k"), lora_scale, half).reshape(b, t, cfg.num_kv_heads, cfg.head_dim)
        v = _linear(h, lp["v"], ll.get("v"), lora_scale, half).reshape(b, t, cfg.num_kv_heads, cfg.head_dim)
        if cfg.qk_norm:
            q = rms_norm(q, lp["q_norm"], eps)
            k = rms_norm(k, lp["k_norm"], eps)
        q = apply_rope(q, q_pos, freq)
        k = apply_rope(k, positions, freq)
        k, v, state = kv_fn(k, v)
        whole = cache is None and at is None
        a = attention(q, k, v, q_pos, backend=cfg.attention_backend,
                      causal_block=cfg.attention_block if whole else 0, block_q=cfg.attention_block_q,
                      block_k=cfg.attention_block_k, whole_sequence=whole)  # [B, T, Hq, hd]
        x = x + _linear(a.reshape(b, tq, cfg.q_size), lp["o"], ll.get("o"), lora_scale, half)
        h = rms_norm(x, lp["mlp_norm"], eps)
        gate = _linear(h, lp["gate"], ll.get("gate"), lora_scale, half)
        up = _linear(h, lp["up"], ll.get("up"), lora_scale, half)
        x = x + _linear(jax.nn.silu(gate) * up, lp["down"], ll.get("down"), lora_scale, half)
        return x, state

    if cache is None:
        def layer_nocache(x, xs, at=None):
            lp, ll = xs
            return block(x, read(lp), ll, lambda k, v: (k, v, None), at)[0], None

        # a backward pass re-gathers each layer's weights instead of keeping all N whole (fsdp), or recomputes
        # each layer's intermediates from its input instead of keeping them (cfg.remat)
        layers = (stacked, lora_layers)
        remat = full is not None or cfg.remat
        # read_at: the last layer runs its queries, output projection and MLP at those positions only (what
        # is read: 1 of 23 positions per row in the spread loss); the layers below feed its keys and values
        scanned = cfg.num_layers - (read_at is not None)
        if remat:  # outside a scan XLA would merge the recomputation with the forward (CSE) unless prevented
            looped = jax.checkpoint(layer_nocache, policy=fsdp.REMAT_POLICY, prevent_cse=True)
            in_scan = jax.checkpoint(layer_nocache, policy=fsdp.REMAT_POLICY, prevent_cse=False)
        else:
            looped = in_scan = layer_nocache
        if scanned <= UNROLLED_LAYERS and not remat:
            # a Python loop: autodiff keeps each layer's activations as they are, where a scan writes them
            # into buffers stacked over layers (8% of the 2-layer spread update, bench/lm_config_step.py).
            # Rematerialised layers stay in the scan: unrolled, XLA schedules every recomputation early and
            # keeps them all (tests/test_memory.py)
            for i in range(scanned):
                x, _ = looped(x, jax.tree.map(lambda a, i=i: a[i], layers))
        else:
            x, _ = jax.lax.scan(in_scan, x, jax.tree.map(lambda a: a[:scanned], layers), unroll=cfg.scan_unroll)
        if read_at is not None:
            x, _ = looped(x, jax.tree.map(lambda a: a[-1], layers), read_at)
        new_k = new_v = None
    else:
        # The whole cache rides in the scan carry; new keys/values are scattered into it at
        # [layer, row, lengths[row] + t] (in place on a loop carry), so no second cache exists.
        rows = jnp.arange(b)[:, None]  # [B, 1]

        def layer(carry, xs):
            x, ck, cv = carry
            lp, ll, i = xs
            lp = read(lp)

            def kv_fn(k, v):
                ck2, k_all = _write_cache(ck, i, rows, positions, k, kdt)
                cv2, v_all = _write_cache(cv, i, rows, positions, v, vdt)
                return k_all.astype(cdt), v_all.astype(cdt), (ck2, cv2)

            x, (ck, cv) = block(x, lp, ll, kv_fn)
            return (x, ck, cv), None

        idx = jnp.arange(cfg.num_layers)
        # a 16-bit cache rides as its bits (as_bits): each layer's write is an integer update of the carry. A
        # caller that keeps its cache as bits across calls (uint16: the bits of a compute-dtype cache) gets bits
        # back, with no conversion of the whole cache per call
        given_bits = cache["k"].dtype == jnp.uint16
        if given_bits and jnp.dtype(cdt) not in HALF:
            raise ValueError(f"forward: a uint16 cache holds the bits of a 16-bit cache, but compute dtype is {cdt}")
        kdt, vdt = (cdt, cdt) if given_bits else (cache["k"].dtype, cache["v"].dtype)
        (x, new_k, new_v), _ = jax.lax.scan(layer, (x, as_bits(cache["k"]), as_bits(cache["v"])),
                                            (stacked, lora_layers, idx), unroll=cfg.scan_unroll)
        if not given_bits:
            new_k, new_v = from_bits(new_k, kdt), from_bits(new_v, vdt)
    hidden = rms_norm(x, params["final_norm"], eps)  # [B, T, D] ([B, M, D] at read_at)

    head_in = hidden if logit_index is None else jnp.take_along_axis(hidden, logit_index[:, None, None], axis=1)[:, 0]
    logits = lm_head(params, head_in, cfg)

    new_cache = None
    if cache is not None:
        added = jnp.full((b,), t, jnp.int32) if num_new is None else num_new.astype(jnp.int32)
        new_cache = {"k": new_k, "v": new_v, "lengths": cache["lengths"] + added}
    return logits, hidden, new_cache


forward_jit = jax.jit(forward, static_argnames=("cfg", "lora_scale"))
"""`forward` compiled once per (cfg, lora_scale, shapes): for eager callers; inside jit use `forward`."""


def num_params(params: Params) -> int:
    return sum(int(x.size) for x in jax.tree.leaves(params))


def num_bytes(tree: Any) -> int:
    return sum(int(x.size) * x.dtype.itemsize for x in jax.tree.leaves(tree))
