"""REINFORCE with the leave-one-out baseline (RLOO; Kool et al., 2019; Ahmadian et al., 2024).

With G samples per prompt, sample i's baseline is the mean reward of the other
G - 1 samples, which is independent of sample i, so the gradient stays
unbiased:  A_i = r_i - (sum_j r_j - r_i) / (G - 1) = G / (G - 1) * (r_i - mean r).

The loss is plain REINFORCE on the sequence log-prob, -A_i * log pi(y_i | x),
i.e. aggregation "sequence_sum" over tokens (a sequence-level KL penalty goes
into the reward first: r - beta * `kl.sequence_kl(..., kind="k1")`). For several
epochs on one batch use `grpo.grpo_loss` with these advantages instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.grpo import broadcast_advantages
from jaxmarl_llm.algos.kl import KLKind, masked_kl
from jaxmarl_llm.algos.masked import Aggregation, aggregate, where_mask
from jaxmarl_llm.algos.ppo import shard_mean


def rloo_advantages(
    rewards: jax.Array,  # [..., G]
    mask: jax.Array | None = None,  # [..., G] bool: samples that exist
) -> jax.Array:
    """[..., G]: r_i - mean of the group's other valid samples; 0 for a group with < 2 samples. No gradient."""
    rewards = jax.lax.stop_gradient(rewards)
    m = jnp.ones(rewards.shape, bool) if mask is None else mask.astype(bool)
    r = where_mask(rewards, m)
    n = jnp.sum(m, axis=-1, keepdims=True).astype(r.dtype)
    baseline = (jnp.sum(r, axis=-1, keepdims=True) - r) / jnp.maximum(n - 1.0, 1.0)
    return where_mask(r - baseline, m & (n > 1.0))


def rloo_loss(
    log_prob: jax.Array,  # [..., M] current policy, sampled tokens
    advantages: jax.Array,  # [...] per sample, or [..., M]
    mask: jax.Array,  # [..., M] bool
    ref_log_prob: jax.Array | None = None,  # [..., M]; None -> no KL loss term
    *,
    kl_coef: float | jax.Array = 0.0,
    kl_kind: KLKind = "k3",
    aggregation: Aggregation = "sequence_sum",
    max_len: int | None = None,
    axis_name: str | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Per token -A * log pi (+ kl_coef * KL), aggregated (default: mean over samples of the token sum)."""
    m = mask.astype(bool)
    lp = where_mask(log_prob, m)
    adv = where_mask(broadcast_advantages(advantages, lp.shape), m)
    per_token = -adv * lp
    metrics = {"policy_loss": aggregate(per_token, m, aggregation, max_len, axis_name)}
    if ref_log_prob is not None:
        kl = masked_kl(lp, ref_log_prob, m, kl_kind)
        per_token = per_token + kl_coef * kl
        metrics["kl"] = shard_mean(jax.lax.stop_gradient(kl), m, axis_name)
    return aggregate(per_token, m, aggregation, max_len, axis_name), metrics
