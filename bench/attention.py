"""Attention backends: prefill / training time (forward, forward + backward, TFLOP/s) and decode tokens/s.

    python bench/attention.py                                  # GPU: pallas vs xla vs cudnn; CPU: xla only
    python bench/attention.py --lengths 1024,4096,8192 --decode-batches 1,32,128
    python bench/attention.py --backends pallas,xla --out /tmp/attention.md

Shapes are Qwen3-0.6B's attention (config.PRESETS["qwen3-0.6b"]: 16 query heads, 8 kv heads, head_dim 128),
in --dtype (bfloat16 by default).

  prefill   one whole causal sequence per row (no cache), batch = --tokens // length (at least 1); forward and
            forward + backward (d/dq, dk, dv of a weighted sum) of `models.attention.attention`, as the model
            calls it ("xla" with its causal query blocks of ModelConfig.attention_block). TFLOP/s counts the
            causal half only: forward 2 * 2 * B * Hq * L^2 / 2 * D, backward 2.5x that (FlashAttention's count).
  decode    one new token per row against a KV cache of --context slots, rows filled to different lengths
            (uniform in [context/2, context)); tokens/s = batch / (time of one layer's attention x 28 layers),
            GB/s = K and V bytes of the valid slots read per call / time.

Each figure is the best of --repeats calls after a warm-up (compile) call. On CPU only "xla" is timed: "pallas"
runs there in Pallas interpret mode (a correctness tool, not a kernel) and "cudnn" needs a CUDA GPU; the output
says so. A backend that fails on a shape gets its error in the table instead of a time.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.models import attention, config

SHAPE = config.PRESETS["qwen3-0.6b"]
GPU_DEFAULTS = dict(lengths="1024,4096,8192", tokens=16384, decode_batches="1,32,128", context=4096)
CPU_DEFAULTS = dict(lengths="256,1024", tokens=2048, decode_batches="1,32", context=512)


def _best(fn, repeats: int) -> float:
    jax.block_until_ready(fn())  # compile + warm up
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best


def _arrays(b: int, t: int, s: int, dtype, seed: int = 0):
    ks = jax.random.split(jax.random.key(seed), 4)
    hq, hkv, d = SHAPE.num_heads, SHAPE.num_kv_heads, SHAPE.head_dim
    q = jax.random.normal(ks[0], (b, t, hq, d), dtype)
    k = jax.random.normal(ks[1], (b, s, hkv, d), dtype)
    v = jax.random.normal(ks[2], (b, s, hkv, d), dtype)
    return q, k, v, jax.random.normal(ks[3], (b, t, hq, d), dtype)


def prefill_row(backend: str, length: int, batch: int, dtype, repeats: int) -> dict:
    q, k, v, w = _arrays(batch, length, length, dtype)
    pos = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (batch, length))
    block = config.ModelConfig().attention_block

    def attend(q, k, v):
        return attention.attention(q, k, v, pos, backend=backend, causal_block=block, whole_sequence=True)

    fwd = jax.jit(attend)
    grad = jax.jit(jax.grad(lambda q, k, v: jnp.sum(attend(q, k, v).astype(jnp.float32) * w), argnums=(0, 1, 2)))
    flop = 2 * 2 * batch * SHAPE.num_heads * length * length / 2 * SHAPE.head_dim
    row = dict(backend=backend, length=length, batch=batch)
    try:
        row["fwd_ms"] = 1e3 * _best(lambda: fwd(q, k, v), repeats)
        row["fwdbwd_ms"] = 1e3 * _best(lambda: grad(q, k, v), repeats)
        row["fwd_tflops"] = flop / row["fwd_ms"] / 1e9
        row["fwdbwd_tflops"] = 3.5 * flop / row["fwdbwd_ms"] / 1e9
    except Exception as e:  # noqa: BLE001 - a backend that cannot run this shape is a result, not a crash
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return row


def decode_row(backend: str, batch: int, context: int, dtype, repeats: int) -> dict:
    q, k, v, _ = _arrays(batch, 1, context, dtype, seed=1)
    lengths = np.random.RandomState(0).randint(context // 2, context, batch)
    pos = jnp.asarray(lengths - 1, jnp.int32)[:, None]  # the new token's position: it sees slots 0..length-1
    step = jax.jit(lambda q, k, v, pos: attention.attention(q, k, v, pos, backend=backend))
    row = dict(backend=backend, batch=batch, context=context)
    try:
        t = _best(lambda: step(q, k, v, pos), repeats)
        read = 2 * int(lengths.sum()) * SHAPE.num_kv_heads * SHAPE.head_dim * jnp.dtype(dtype).itemsize
        row.update(us=1e6 * t, tokens_s=batch / (t * SHAPE.num_layers), gb_s=read / t / 1e9)
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return row


def tables(prefill: list[dict], decode: list[dict], dtype: str) -> list[str]:
    lines = [f"Prefill / training, one causal sequence per row ({SHAPE.num_heads} q heads, {SHAPE.num_kv_heads} kv "
             f"heads, head_dim {SHAPE.head_dim}, {dtype})", "",
             "| backend | length | batch | fwd ms | fwd TFLOP/s | fwd+bwd ms | fwd+bwd TFLOP/s |",
             "|---|---|---|---|---|---|---|"]
    for r in prefill:
        if "error" in r:
            lines.append(f"| {r['backend']} | {r['length']} | {r['batch']} | {r['error']} | | | |")
        else:
            lines.append(f"| {r['backend']} | {r['length']} | {r['batch']} | {r['fwd_ms']:.2f} | "
                         f"{r['fwd_tflops']:.2f} | {r['fwdbwd_ms']:.2f} | {r['fwdbwd_tflops']:.2f} |")
    lines += ["", f"Decode, one new token per row against a {decode[0]['context'] if decode else 0}-slot cache "
              f"(rows filled to context/2..context), tokens/s over {SHAPE.num_layers} layers' attention", "",
              "| backend | batch | us per layer | tokens/s | K/V GB/s |", "|---|---|---|---|---|"]
    for r in decode:
        if "error" in r:
            lines.append(f"| {r['backend']} | {r['batch']} | {r['error']} | | |")
        else:
            lines.append(f"| {r['backend']} | {r['batch']} | {r['us']:.1f} | {r['tokens_s']:.0f} | {r['gb_s']:.1f} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="", help="comma list; default: pallas,xla,cudnn on GPU, xla elsewhere")
    ap.add_argument("--lengths", default="", help=f"prefill lengths (GPU {GPU_DEFAULTS['lengths']}, "
                                                  f"CPU {CPU_DEFAULTS['lengths']})")
    ap.add_argument("--tokens", type=int, default=0, help="prefill tokens per call: batch = tokens // length")
    ap.add_argument("--decode-batches", default="", help="decode batch sizes")
    ap.add_argument("--context", type=int, default=0, help="decode cache slots")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="", help="also write the tables to this file")
    args = ap.parse_args()

    where = jax.default_backend()
    defaults = GPU_DEFAULTS if where == "gpu" else CPU_DEFAULTS
    backends = args.backends.split(",") if args.backends else (["pallas", "xla", "cudnn"] if where == "gpu" else ["xla"])
    lengths = [int(x) for x in (args.lengths or defaults["lengths"]).split(",")]
    batches = [int(x) for x in (args.decode_batches or defaults["decode_batches"]).split(",")]
    tokens, context = args.tokens or defaults["tokens"], args.context or defaults["context"]
    dtype = jnp.dtype(args.dtype)

    print(f"jax {jax.__version__} on {where} ({jax.devices()[0].device_kind}), {os.cpu_count()} CPUs; "
          f"backends: {', '.join(backends)}", flush=True)
    if where != "gpu":
        print(f"{where}: timing 'xla' only ('pallas' would run in interpret mode, a correctness tool; 'cudnn' needs "
              "a CUDA GPU). Small sizes: the GPU comparison needs a GPU.", flush=True)
    prefill = []
    for length in lengths:
        for backend in backends:
            prefill.append(prefill_row(backend, length, max(1, tokens // length), dtype, args.repeats))
            print(prefill[-1], flush=True)
    decode = []
    for batch in batches:
        for backend in backends:
            decode.append(decode_row(backend, batch, context, dtype, args.repeats))
            print(decode[-1], flush=True)
    text = "\n".join(tables(prefill, decode, args.dtype))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
