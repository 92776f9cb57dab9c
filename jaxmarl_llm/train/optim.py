"""The one optimizer recipe of every trainer: clip by global norm -> Adam -> (weight decay) -> learning rate.

Built from traced hyper-parameters (hp.lr, hp.max_grad_norm, ...), so a sweep can vmap over them.

    tx = optimizer(hp.lr, hp.max_grad_norm)                              # RL: Adam, eps 1e-5
    tx = optimizer(schedule, hp.max_grad_norm, eps=1e-8, weight_decay=hp.weight_decay)   # SFT / DPO: AdamW
    tx = lora_plus(tx, ratio)                     # LoRA+: the adapters' B matrices step `ratio` x the lr
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import optax

Schedule = Callable[[jax.Array], jax.Array]  # optimizer step count -> learning rate


def optimizer(lr: jax.Array | Schedule, max_grad_norm: jax.Array, *, eps: float = 1e-5,
              weight_decay: jax.Array | None = None) -> optax.GradientTransformation:
    """Adam on global-norm-clipped gradients; with `weight_decay`, decoupled decay (AdamW) before the step.

    `lr` is a number (array) or a schedule of the step count."""
    clip = optax.clip_by_global_norm(max_grad_norm)
    if weight_decay is None:
        return optax.chain(clip, optax.adam(lr, eps=eps))
    schedule = lr if callable(lr) else (lambda count: lr)
    return optax.chain(clip, optax.scale_by_adam(eps=eps), optax.add_decayed_weights(weight_decay),
                       optax.scale_by_schedule(lambda count: -schedule(count)))


def lora_plus(tx: optax.GradientTransformation, ratio: float) -> optax.GradientTransformation:
    """LoRA+ (Hayou et al. 2024): scale the steps of the adapters' B matrices by `ratio`. B starts at 0, and at
    one lr for A and B an adapter's output moves slowly at first; ~4-16 speeds it up. 1 = plain LoRA: `tx`
    itself, so the optimizer state keeps its structure (checkpoints of earlier runs restore)."""
    if ratio == 1.0:
        return tx
    return optax.chain(tx, optax.masked(optax.scale(ratio), lora_b_mask))


def lora_b_mask(tree) -> dict:
    """True on the adapters' B matrices: leaves named "b" under a "lora" key."""
    def mark(path, _):
        keys = [getattr(p, "key", None) for p in path]
        return "lora" in keys and keys[-1] == "b"

    return jax.tree_util.tree_map_with_path(mark, tree)


def warmup_cosine(lr: jax.Array, num_updates: int, warmup_updates: int, anneal: bool) -> Schedule:
    """Linear warmup over `warmup_updates` steps, then cosine to 10% of `lr` at `num_updates` (or constant)."""
    warmup = max(int(warmup_updates), 1)

    def lr_at(count: jax.Array) -> jax.Array:
        warm = jnp.minimum(1.0, (count + 1.0) / warmup)
        frac = jnp.clip(count / max(num_updates, 1), 0.0, 1.0)
        decay = 0.1 + 0.9 * 0.5 * (1.0 + jnp.cos(jnp.pi * frac)) if anneal else 1.0
        return lr * warm * decay

    return lr_at


def linear_decay(lr: jax.Array, steps_per_update: int, num_updates: int, anneal: bool) -> Schedule:
    """PPO's schedule (PureJaxRL / JaxMARL): lr falls linearly to 0 over the updates (or constant)."""

    def lr_at(count: jax.Array) -> jax.Array:
        if not anneal:
            return lr
        return lr * (1.0 - (count // steps_per_update) / num_updates)

    return lr_at


def adamw(hp, num_updates: int, config) -> tuple[optax.GradientTransformation, Schedule]:
    """(tx, lr_at) of SFT and DPO: AdamW (eps 1e-8) on clipped gradients; `config.warmup_updates` of linear
    warmup, then cosine to 10% of hp.lr at the last update (or constant: `config.anneal_lr` False); LoRA+ with
    `config.lora.lr_ratio`."""
    lr_at = warmup_cosine(hp.lr, num_updates, config.warmup_updates, bool(config.anneal_lr))
    tx = optimizer(lr_at, hp.max_grad_norm, eps=1e-8, weight_decay=hp.weight_decay)
    return lora_plus(tx, float(config.lora.lr_ratio)), lr_at
