"""Group-relative policy optimization (GRPO) and Dr.GRPO: critic-free, per-token clipped loss.

G samples are drawn per prompt (per env seed); each sample's advantage is its
reward relative to the others of its group, so no value network is needed:

    GRPO     A_i = (r_i - mean_g r) / (std_g r + eps)       (Shao et al., 2024)
    Dr.GRPO  A_i =  r_i - mean_g r                          (Liu et al., 2025)

`std_g` uses `ddof=1` by default (the unbiased std, as TRL and verl compute it).
The sequence advantage is shared by all tokens of the sample, and the loss per
token is the PPO clipped surrogate plus kl_coef * KL(pi || pi_ref) (k3). How the
per-token losses become one number is `aggregation` (see `masked.Aggregation`):
"sequence" is GRPO's per-sample mean then batch mean, which weights tokens of
short answers more; "token" is DAPO's token mean; "constant" is Dr.GRPO's sum
over tokens / max_len, which removes the length bias.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.kl import KLKind, masked_kl
from jaxmarl_llm.algos.masked import Aggregation, aggregate, where_mask
from jaxmarl_llm.algos.ppo import shard_mean


def group_advantages(
    rewards: jax.Array,  # [..., G] the G samples of each group on the last axis
    mask: jax.Array | None = None,  # [..., G] bool: samples that exist (others get 0 and are not counted)
    *,
    normalize_std: bool = True,
    eps: float = 1e-4,
    ddof: int = 1,
) -> jax.Array:
    """[..., G]: (r - group mean) / (group std + eps), or r - group mean without normalize_std (Dr.GRPO).

    A group of identical rewards (or a single sample) gives advantage 0. No gradient.
    """
    rewards = jax.lax.stop_gradient(rewards)
    m = jnp.ones(rewards.shape, bool) if mask is None else mask.astype(bool)
    r = where_mask(rewards, m)
    n = jnp.sum(m, axis=-1, keepdims=True).astype(r.dtype)
    dev = where_mask(r - jnp.sum(r, axis=-1, keepdims=True) / jnp.maximum(n, 1.0), m)
    if not normalize_std:
        return dev
    var = jnp.sum(jnp.square(dev), axis=-1, keepdims=True) / jnp.maximum(n - ddof, 1.0)
    return dev / (jnp.sqrt(var) + eps)


def dr_grpo_advantages(rewards: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """[..., G] -> [..., G]: r - group mean (Dr.GRPO: no std normalization, which would favour easy/hard groups)."""
    return group_advantages(rewards, mask, normalize_std=False)


def clipped_surrogate(
    log_prob: jax.Array,  # [..., M]
    old_log_prob: jax.Array,  # [..., M]
    advantages: jax.Array,  # [..., M]
    clip_eps: float | jax.Array,
    clip_eps_high: float | jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """(min(ratio * A, clip(ratio, 1 - eps, 1 + eps_high) * A), ratio), both [..., M]."""
    ratio = jnp.exp(log_prob - old_log_prob)
    hi = clip_eps if clip_eps_high is None else clip_eps_high
    return jnp.minimum(ratio * advantages, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + hi) * advantages), ratio


def broadcast_advantages(advantages: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Sequence advantages [...] (or token advantages [..., M]) -> [..., M], without gradient."""
    advantages = jax.lax.stop_gradient(advantages)
    if advantages.ndim == len(shape) - 1:
        advantages = advantages[..., None]
    return jnp.broadcast_to(advantages, shape)


def grpo_loss(
    log_prob: jax.Array,  # [..., M] current policy, sampled tokens
    old_log_prob: jax.Array,  # [..., M] when sampling (= stop_gradient(log_prob) for one update per batch)
    advantages: jax.Array,  # [...] per sample (broadcast over its tokens) or [..., M]
    mask: jax.Array,  # [..., M] bool: real generated tokens of active agents
    ref_log_prob: jax.Array | None = None,  # [..., M] reference policy; None -> no KL term
    *,
    clip_eps: float | jax.Array = 0.2,
    clip_eps_high: float | jax.Array | None = None,  # DAPO clip-higher; None -> clip_eps
    kl_coef: float | jax.Array = 0.0,
    kl_kind: KLKind = "k3",
    aggregation: Aggregation = "sequence",
    max_len: int | None = None,  # for aggregation="constant"; default M
    axis_name: str | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Per token: -clipped surrogate + kl_coef * KL; aggregated; returns (loss, metrics) as shard shares.

    Metrics: policy_loss (same aggregation), kl (token mean), clip_frac, approx_kl (old vs new, token means).
    """
    m = mask.astype(bool)
    lp, olp = where_mask(log_prob, m), where_mask(old_log_prob, m)
    adv = where_mask(broadcast_advantages(advantages, lp.shape), m)
    surrogate, ratio = clipped_surrogate(lp, olp, adv, clip_eps, clip_eps_high)
    per_token = -surrogate
    metrics = {"policy_loss": aggregate(per_token, m, aggregation, max_len, axis_name)}
    if ref_log_prob is not None:
        kl = masked_kl(lp, ref_log_prob, m, kl_kind)
        per_token = per_token + kl_coef * kl
        metrics["kl"] = shard_mean(jax.lax.stop_gradient(kl), m, axis_name)
    loss = aggregate(per_token, m, aggregation, max_len, axis_name)
    ratio = jax.lax.stop_gradient(ratio)
    hi = clip_eps if clip_eps_high is None else clip_eps_high
    clipped = (ratio < 1.0 - clip_eps) | (ratio > 1.0 + hi)
    metrics["clip_frac"] = shard_mean(clipped.astype(jnp.float32), m, axis_name)
    metrics["approx_kl"] = shard_mean((ratio - 1.0) - jnp.log(ratio), m, axis_name)
    return loss, metrics
