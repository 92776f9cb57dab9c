"""The LM head's backward: ours (models/transformer.py `_head`: dh from the float32 cotangent split into two bf16
halves, no float32 copy of the vocabulary matrix) against autodiff of the same product (dh in float32 against a
float32 copy of the [V, D] matrix), in the gradient of a LoRA loss at a real-size preset, both in one process.

    python bench/lm_head.py                                  # qwen3-0.6b, bf16, 18 rows x 40 tokens, 8 read a row
    python bench/lm_head.py --preset=qwen3-1.7b --rows=8

Prints the best of --repeats timed calls per side, two rounds alternating the sides, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxmarl_llm.models import config, transformer  # noqa: E402
from jaxmarl_llm.models.lora import LoraConfig, init_lora  # noqa: E402


def autodiff_head(h: jax.Array, w: jax.Array, spec: str) -> jax.Array:
    """The head as a plain product: autodiff pulls its float32 cotangent back in float32."""
    return jnp.einsum(spec, h, w.astype(h.dtype), preferred_element_type=jnp.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="qwen3-0.6b")
    parser.add_argument("--rows", type=int, default=18)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--read", type=int, default=8, help="positions a row whose logits the loss reads")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    cfg = config.PRESETS[args.preset].replace(dtype="bfloat16", param_dtype="bfloat16")
    params = jax.jit(lambda k: transformer.init_params(cfg, k))(jax.random.PRNGKey(0))
    lora = jax.tree.map(lambda x: x + 0.01, init_lora(jax.random.PRNGKey(1), cfg, LoraConfig(rank=16)))
    b, t, m = args.rows, args.tokens, args.read
    tokens = jax.random.randint(jax.random.PRNGKey(2), (b, t), 0, cfg.vocab_size)  # [B, T]
    at = jnp.broadcast_to(jnp.arange(t - m, t), (b, m))  # [B, M]
    target = jax.random.randint(jax.random.PRNGKey(3), (b, m), 0, cfg.vocab_size)  # [B, M]

    def loss(lo):
        logits, _, _ = transformer.forward(params, tokens, cfg, lora=lo, read_at=at)  # [B, M, V]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), target[..., None], -1))

    ours = transformer._head
    best = {}
    for name, head in (("autodiff", autodiff_head), ("ours", ours)) * 2:
        transformer._head = head  # read when the gradient is traced
        grad = jax.jit(jax.grad(loss))
        jax.block_until_ready(grad(lora))
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(grad(lora))
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
    transformer._head = ours
    print(f"{args.preset} bf16, LoRA loss gradient, {b} rows x {t} tokens, {m} read a row, on {jax.devices()[0].platform}:"
          f" autodiff head {best['autodiff']:.3f} s, ours {best['ours']:.3f} s, ratio {best['autodiff'] / best['ours']:.2f}x")


if __name__ == "__main__":
    main()
