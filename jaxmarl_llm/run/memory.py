"""Per-device memory of an LM RL run, by arithmetic: what the base, the adapters, Adam, the KV cache and the loss's
activations take on each device, for a model, a mesh (num_devices, mesh.fsdp) and a batch.

    rows = lm_rl_memory(cfg, num_devices=16, fsdp=8, num_envs=128, lm_seats=2, context=1664, ...)
    print(format_table(rows))

For planning a layout (configs/qwen3_8b_fsdp.py's docstring is this table), not a measurement: XLA adds its own
buffers, copies and fragmentation, so leave a margin. The exact entries (base, adapters, Adam, KV cache) follow
the arrays the trainer builds; the activation entries are estimates of the largest live set, stated with their
formula below. Bytes, per device.
"""

from __future__ import annotations

import math
from typing import Sequence

from jaxmarl_llm.models import fsdp as fsdp_lib
from jaxmarl_llm.models.config import ModelConfig, param_shapes, projection_shapes

GIB = 1 << 30


def _bytes(shapes, dtype_bytes: int) -> int:
    return sum(math.prod(s) * dtype_bytes for s in _leaves(shapes))


def _leaves(tree) -> list[tuple[int, ...]]:
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in _leaves(v)]
    return [tree]


def lm_rl_memory(cfg: ModelConfig, *, num_devices: int, fsdp: int, num_envs: int, lm_seats: int, context: int,
                 loss_seats: int, scored_tokens: int, movers: int | None = None, adapter_slots: int = 1,
                 lora_rank: int = 16,
                 lora_targets: Sequence[str] = ("q", "k", "v", "o", "gate", "up", "down"),
                 num_minibatches: int = 1, num_microbatches: int = 1) -> dict[str, int]:
    """{entry: bytes per device}, in the order format_table prints them; the last entry is the peak estimate.

    num_envs episodes per update over num_devices (num_envs / num_devices each: data and fsdp split the batch);
    lm_seats: LM seats per episode (KV-cache rows); movers: the seats that act in a turn (1 in turn-based games;
    default all); context: a row's KV capacity (env capacity + max action tokens) and the loss forward's width;
    loss_seats: learning seats per episode (rows of the loss);
    scored_tokens: action tokens a learning seat scores per episode (where the loss computes logits)."""
    wb, cb = cfg.weight_dtype.itemsize, cfg.compute_dtype.itemsize
    d, q, kv, f, n, v = (cfg.hidden_size, cfg.q_size, cfg.kv_size, cfg.intermediate_size, cfg.num_layers,
                         cfg.vocab_size)
    envs = num_envs // num_devices
    full = param_shapes(cfg)
    out: dict[str, int] = {}
    # exact: each device's blocks of the base (models/fsdp.py param_specs), in the stored dtype
    out["base weights (sharded over fsdp)"] = _bytes(fsdp_lib.local_shapes(cfg, fsdp), wb)
    # transient: the whole weights a forward gathers (in the compute dtype), one layer at a time; the embedding
    # and the LM head are gathered on their own, and are bigger than a layer at large vocabularies
    sharded = fsdp > 1
    out["one gathered layer (transient)"] = _bytes(full["layers"], cb) // n if sharded else 0
    out["gathered embedding or LM head (transient)"] = v * d * cb if sharded else 0
    # exact: float32 LoRA A [N, in, r] and B [N, r, out] per target and slot, a value head [D] + bias per slot
    shapes = projection_shapes(cfg)
    lora = adapter_slots * sum(n * (shapes[t][0] + shapes[t][1]) * lora_rank for t in lora_targets) * 4
    heads = adapter_slots * (d + 1) * 4
    out["adapters + value heads (float32, replicated)"] = lora + heads
    out["Adam moments (2 x adapters + heads)"] = 2 * (lora + heads)
    out["gradients (transient)"] = lora + heads
    # exact: the rollout's KV cache, [N, rows, context, Hkv, head_dim] for keys and for values
    out["KV cache (rollout)"] = 2 * n * envs * lm_seats * context * kv * cb
    # the movers' rows are taken out of it for a turn (train/lm/rollout.py act_incremental): a copy
    out["KV cache: movers' rows (transient copy)"] = 2 * n * envs * (movers or lm_seats) * context * kv * cb
    # estimate, the loss of one microbatch (train/lm/scoring.py): `tokens` = rows x width. A layer's
    # intermediates are ~(4 D + 2 Q + 2 KV + 3 F) values a token (norms, q/k/v, attention out, the MLP's three;
    # attention keeps only a logsumexp). Sharded (fsdp > 1) every layer is rematerialised (models/fsdp.py): only
    # its input [tokens, D] stays for the backward; whole (fsdp = 1) autodiff keeps every layer's intermediates.
    # One layer's intermediates and their gradients are live at a time; logits are float32 at the scored
    # positions only (x3: logits, log-softmax, its gradient)
    rows = envs * loss_seats // (num_minibatches * num_microbatches)
    tokens = rows * context
    per_token_layer = (4 * d + 2 * q + 2 * kv + 3 * f) * cb
    out["loss: kept for the backward (all layers)"] = n * tokens * (d * cb if sharded else per_token_layer)
    out["loss: one layer's intermediates + grads"] = 2 * tokens * per_token_layer
    out["loss: logits at scored tokens (float32, x3)"] = 3 * rows * scored_tokens * v * 4
    persistent = (out["base weights (sharded over fsdp)"] + out["adapters + value heads (float32, replicated)"]
                  + out["Adam moments (2 x adapters + heads)"])
    gathered = max(out["one gathered layer (transient)"], out["gathered embedding or LM head (transient)"])
    rollout = out["KV cache (rollout)"] + out["KV cache: movers' rows (transient copy)"] + gathered
    loss = (out["loss: kept for the backward (all layers)"] + out["loss: one layer's intermediates + grads"]
            + out["loss: logits at scored tokens (float32, x3)"] + out["gradients (transient)"] + gathered)
    out["peak estimate: persistent + max(rollout, loss)"] = persistent + max(rollout, loss)
    return out


def format_table(columns: dict[str, dict[str, int]]) -> str:
    """{column title: lm_rl_memory(...)} -> a text table, one line per entry, GiB with two decimals per column
    (what a config's docstring shows)."""
    names = list(next(iter(columns.values())))
    width = max(len(k) for k in names)
    head = " " * width + "".join(f"  {title:>12}" for title in columns)
    lines = [f"{k:<{width}}" + "".join(f"  {col[k] / GIB:8.2f} GiB" for col in columns.values()) for k in names]
    return "\n".join([head.rstrip(), *lines])
