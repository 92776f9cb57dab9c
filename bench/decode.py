"""Decode throughput: our jitted `generate` vs `transformers` `model.generate` (PyTorch CPU), same weights.

    python bench/decode.py                       # tiny + Qwen3-0.6B-shaped, batch 1 and 32
    python bench/decode.py --models tiny --new 64
    python bench/decode.py --models qwen3-0.6b --batches 32 --dtype bfloat16   # both sides in bf16

Both sides: the same precision (--dtype, float32 by default; bf16 weights and compute on
both with --dtype bfloat16, where greedy tokens may part ways after a near-tie), greedy,
prompt of --prompt random tokens, exactly --new new tokens (no stop ids), timed end to
end (prefill + decode) after one warm-up call (ours: compiled; theirs: caches warm). tokens/s = batch * new / s.
Weights are random (nothing is downloaded): a `transformers` model is built
from a config, saved as safetensors, and loaded by `jaxmarl_llm.models.hf`.

Then the memory figure: A agents with rank-16 adapters (all 7 projections) on
one Qwen3-0.6B base, from XLA's memory analysis of the compiled, agent-vmapped
`generate` (abstract shapes, nothing allocated), against base + A x adapter + cache.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.models import config, hf, lora as L, sampling, transformer
from jaxmarl_llm.models.testing import build_hf_model

QWEN3_06B_HF = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                    num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                    max_position_embeddings=40960)


def _time(fn, repeats: int) -> float:
    """Best wall time of `repeats` calls (the caller has already warmed fn up)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_model(name: str, batches: list[int], prompt: int, new: int, repeats: int, dtype: str = "float32",
                peer_attn: str = "sdpa") -> list[dict]:
    import torch

    overrides = QWEN3_06B_HF if name == "qwen3-0.6b" else {}
    with tempfile.TemporaryDirectory() as path:
        t0 = time.perf_counter()
        model = build_hf_model("qwen3", path, init_std=0.02, **overrides)
        model.generation_config.eos_token_id = None
        cfg, params = hf.load_pretrained(path, dtype=dtype)
        model = model.to(getattr(torch, dtype))
        model.set_attn_implementation(peer_attn)  # built "eager" (the parity tests' choice); transformers' default is sdpa
        print(f"[{name}] built + saved + loaded in {time.perf_counter() - t0:.1f}s "
              f"({transformer.num_params(params) / 1e6:.1f}M params)", flush=True)
    rows = []
    for b in batches:
        tokens = np.random.RandomState(0).randint(0, cfg.vocab_size, (b, prompt)).astype(np.int32)
        lengths = jnp.full((b,), prompt, jnp.int32)
        jt = jnp.asarray(tokens)

        def ours():
            out = sampling.generate(jax.random.key(0), params, None, jt, lengths, cfg, max_new_tokens=new, temperature=0.0)
            jax.block_until_ready(out)
            return out

        pt = torch.tensor(tokens, dtype=torch.long)

        def theirs():
            with torch.no_grad():
                return model.generate(pt, attention_mask=torch.ones_like(pt), max_new_tokens=new, min_new_tokens=new,
                                      do_sample=False, pad_token_id=0)

        ref = theirs()[:, prompt:].numpy()  # also the warm-up of both sides
        same = bool((np.asarray(ours()[0]) == ref).all())
        t_ours, t_theirs = _time(ours, max(repeats, 2)), _time(theirs, repeats)
        label = name if dtype == "float32" else f"{name} ({dtype})"
        row = dict(model=label, batch=b, ours=b * new / t_ours, theirs=b * new / t_theirs, same=same)
        row["speedup"] = row["ours"] / row["theirs"]
        print(f"[{name}] batch {b}: ours {row['ours']:.1f} tok/s, transformers {row['theirs']:.1f} tok/s, "
              f"x{row['speedup']:.2f}, tokens identical: {same}", flush=True)
        rows.append(row)
    del model, params
    gc.collect()
    return rows


def gemm_rows(batch: int, repeats: int = 20) -> list[dict]:
    """The Qwen3-0.6B decode step's matmuls alone: XLA:CPU's dot vs PyTorch's (oneDNN/MKL), same shapes.

    At batch 32 a 0.6B decode step is ~38 GFLOP of these products, so their speed
    bounds what any CPU decode loop reaches; the weighted ratio is that bound.
    """
    import torch

    h = QWEN3_06B_HF
    q, kv = h["num_attention_heads"] * h["head_dim"], h["num_key_value_heads"] * h["head_dim"]
    # (name, in, out, uses per step)
    shapes = [("q_proj", h["hidden_size"], q, h["num_hidden_layers"]),
              ("k_proj / v_proj", h["hidden_size"], kv, 2 * h["num_hidden_layers"]),
              ("o_proj", q, h["hidden_size"], h["num_hidden_layers"]),
              ("gate_proj / up_proj", h["hidden_size"], h["intermediate_size"], 2 * h["num_hidden_layers"]),
              ("down_proj", h["intermediate_size"], h["hidden_size"], h["num_hidden_layers"]),
              ("lm_head", h["hidden_size"], h["vocab_size"], 1)]
    rng = np.random.RandomState(0)
    dot = jax.jit(lambda x, w: x @ w)
    rows = []
    for name, n_in, n_out, uses in shapes:
        x = rng.randn(batch, n_in).astype(np.float32)
        w = (rng.randn(n_in, n_out) * 0.02).astype(np.float32)
        jx, jw = jnp.asarray(x), jnp.asarray(w)
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        n = max(2, repeats // (10 if n_out > 10_000 else 1))
        dot(jx, jw).block_until_ready()
        t_ours = _time(lambda: dot(jx, jw).block_until_ready(), n)
        with torch.no_grad():
            tx @ tw
            t_theirs = _time(lambda: tx @ tw, n)
        flop = 2.0 * batch * n_in * n_out
        rows.append(dict(name=name, shape=f"[{batch}, {n_in}] x [{n_in}, {n_out}]", uses=uses, ours=flop / t_ours / 1e9,
                         theirs=flop / t_theirs / 1e9, t_ours=t_ours * uses, t_theirs=t_theirs * uses))
    return rows


def memory_figure(agents: int, rank: int, batch: int, max_len: int, dtype: str) -> dict:
    """Bytes XLA plans for A-agent generation on one shared base, vs base + A x adapter + cache."""
    cfg = config.PRESETS["qwen3-0.6b"].replace(dtype=dtype, param_dtype=dtype)
    lcfg = L.LoraConfig(rank=rank, alpha=2.0 * rank)
    abstract = lambda tree: jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)  # noqa: E731
    params = jax.eval_shape(lambda k: transformer.init_params(cfg, k), jax.random.key(0))
    lora = jax.eval_shape(lambda k: L.init_lora(k, cfg, lcfg, num_agents=agents), jax.random.key(0))
    prompt = max_len // 2

    def gen(keys, params, lora, tokens, lengths):
        one = lambda k, lo, t, n: sampling.generate(k, params, lo, t, n, cfg, max_new_tokens=max_len - prompt,  # noqa: E731
                                                    temperature=1.0, top_k=50, lora_scale=lcfg.scale)
        return jax.vmap(one)(keys, lora, tokens, lengths)

    keys = jax.eval_shape(lambda: jax.random.split(jax.random.key(0), agents))
    tokens = jax.ShapeDtypeStruct((agents, batch, prompt), jnp.int32)
    lengths = jax.ShapeDtypeStruct((agents, batch), jnp.int32)
    compiled = jax.jit(gen).lower(keys, abstract(params), abstract(lora), tokens, lengths).compile()
    mem = compiled.memory_analysis()
    base = transformer.num_bytes(params)
    adapter = transformer.num_bytes(lora) // agents
    cache = agents * transformer.num_bytes(jax.eval_shape(lambda: transformer.init_cache(cfg, batch, max_len)))
    total = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
    return dict(agents=agents, rank=rank, batch=batch, max_len=max_len, dtype=dtype, base=base, adapter=adapter,
                cache=cache, budget=base + agents * adapter + cache, xla_args=mem.argument_size_in_bytes,
                xla_temp=mem.temp_size_in_bytes, xla_out=mem.output_size_in_bytes, xla_total=total)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="tiny,qwen3-0.6b")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--big-prompt", type=int, default=8, help="prompt length for the 0.6B model (CPU time)")
    ap.add_argument("--big-new", type=int, default=8, help="new tokens for the 0.6B model (CPU time)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="weights and compute, both sides")
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--gemm-batch", type=int, default=32, help="batch of the 0.6B matmul table (0: skip it)")
    ap.add_argument("--peer-attn", default="sdpa", choices=["sdpa", "eager"], help="transformers' attention")
    ap.add_argument("--out", default="", help="also write the markdown tables to this file")
    args = ap.parse_args()
    import torch

    print(f"jax {jax.__version__} ({jax.devices()[0].platform}), torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), {os.cpu_count()} CPUs", flush=True)
    rows = []
    for name in args.models.split(","):
        big = name == "qwen3-0.6b"
        rows += bench_model(name, [int(b) for b in args.batches.split(",")], args.big_prompt if big else args.prompt,
                            args.big_new if big else args.new, 1 if big else args.repeats, args.dtype, args.peer_attn)
    lines = ["| model | batch | ours tok/s | transformers tok/s | speedup | same tokens |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['batch']} | {r['ours']:.1f} | {r['theirs']:.1f} | {r['speedup']:.2f}x | {r['same']} |"
              for r in rows]
    mib = lambda x: f"{x / 2**20:.1f} MiB"  # noqa: E731
    lines += ["", "| agents | rank | batch x len | dtype | base | adapter/agent | cache | base+A*adapter+cache | "
              "XLA plan (args+temp+out) | workspace beyond budget |", "|---|---|---|---|---|---|---|---|---|---|"]
    m = memory_figure(args.agents, 16, 8, 256, "float32")
    lines.append(f"| {m['agents']} | {m['rank']} | {m['batch']} x {m['max_len']} | float32 | {mib(m['base'])} | "
                 f"{mib(m['adapter'])} | {mib(m['cache'])} | {mib(m['budget'])} | {mib(m['xla_total'])} | "
                 f"{mib(m['xla_total'] - m['budget'])} |")
    half = {k: m[k] // 2 for k in ("base", "cache")}
    lines.append(f"| {m['agents']} | {m['rank']} | {m['batch']} x {m['max_len']} | bfloat16 (base, cache) | "
                 f"{mib(half['base'])} | {mib(m['adapter'])} | {mib(half['cache'])} | "
                 f"{mib(half['base'] + m['agents'] * m['adapter'] + half['cache'])} | n/a on CPU (XLA:CPU upcasts "
                 f"bf16 dots to f32) | |")
    if args.gemm_batch:
        g = gemm_rows(args.gemm_batch)
        lines += ["", "| Qwen3-0.6B matmul | shape | per step | XLA:CPU GFLOP/s | PyTorch GFLOP/s | ratio |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['name']} | {r['shape']} | {r['uses']} | {r['ours']:.1f} | {r['theirs']:.1f} | "
                  f"{r['ours'] / r['theirs']:.2f}x |" for r in g]
        t_ours, t_theirs = sum(r["t_ours"] for r in g), sum(r["t_theirs"] for r in g)
        lines.append(f"| all of one decode step | | | {t_ours * 1e3:.0f} ms | {t_theirs * 1e3:.0f} ms | "
                     f"{t_theirs / t_ours:.2f}x |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
