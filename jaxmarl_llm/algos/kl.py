"""Per-token KL estimators between the policy and the reference policy.

Both log-probs are of the *sampled* tokens (sampled from the policy), so these
are single-sample Monte-Carlo estimates of KL(pi || pi_ref) (Schulman, "Approximating
KL divergence", 2020). With d = ref_logp - logp = log(pi_ref / pi):

    k1 = -d                      unbiased, high variance, can be negative
    k2 = d^2 / 2                 biased, low variance, >= 0
    k3 = exp(d) - d - 1          unbiased, low variance, >= 0 (GRPO's KL term)

As a reward penalty (PPO-RLHF) k1 is the usual choice; as a loss term (GRPO) k3.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.masked import Aggregation, aggregate, sequence_sum, where_mask

KLKind = Literal["k1", "k2", "k3"]


def kl_k1(logp: jax.Array, ref_logp: jax.Array) -> jax.Array:
    """[...] -> [...]: log pi - log pi_ref."""
    return logp - ref_logp


def kl_k2(logp: jax.Array, ref_logp: jax.Array) -> jax.Array:
    """[...] -> [...]: (log pi - log pi_ref)^2 / 2."""
    return 0.5 * jnp.square(logp - ref_logp)


def kl_k3(logp: jax.Array, ref_logp: jax.Array) -> jax.Array:
    """[...] -> [...]: exp(d) - d - 1 with d = log pi_ref - log pi (expm1 keeps small d exact)."""
    d = ref_logp - logp
    return jnp.expm1(d) - d


_ESTIMATORS = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


def kl_estimate(logp: jax.Array, ref_logp: jax.Array, kind: KLKind = "k3") -> jax.Array:
    """[...] -> [...]: the chosen per-token estimator."""
    try:
        return _ESTIMATORS[kind](logp, ref_logp)
    except KeyError:
        raise ValueError(f"unknown KL estimator {kind!r}; expected k1, k2 or k3") from None


def masked_kl(
    logp: jax.Array,  # [..., M]
    ref_logp: jax.Array,  # [..., M]
    mask: jax.Array | None = None,  # [..., M] bool
    kind: KLKind = "k3",
) -> jax.Array:
    """[..., M]: the per-token estimate, 0 at masked tokens (inputs there are never read)."""
    return where_mask(kl_estimate(where_mask(logp, mask), where_mask(ref_logp, mask), kind), mask)


def sequence_kl(logp: jax.Array, ref_logp: jax.Array, mask: jax.Array | None = None, kind: KLKind = "k1") -> jax.Array:
    """[..., M] -> [...]: KL of each whole sequence (sum over its tokens), e.g. a sequence-level penalty."""
    return sequence_sum(masked_kl(logp, ref_logp, mask, kind), mask)


def mean_kl(
    logp: jax.Array,  # [..., M]
    ref_logp: jax.Array,  # [..., M]
    mask: jax.Array | None = None,  # [..., M] bool
    kind: KLKind = "k3",
    how: Aggregation = "token",
    axis_name: str | None = None,
) -> jax.Array:
    """Scalar: the masked batch reduction (token mean by default), a shard share with axis_name."""
    return aggregate(masked_kl(logp, ref_logp, mask, kind), mask, how, axis_name=axis_name)


def kl_penalized_rewards(
    rewards: jax.Array,  # [..., M] per-token rewards (e.g. `place_turn_reward` output)
    logp: jax.Array,  # [..., M] log-probs of the sampled tokens when sampling
    ref_logp: jax.Array,  # [..., M]
    mask: jax.Array | None = None,  # [..., M] bool
    kl_coef: float | jax.Array = 0.05,
    kind: KLKind = "k1",
) -> jax.Array:
    """[..., M]: rewards - kl_coef * kl per token, 0 at masked tokens.

    The penalty is part of the reward, so no gradient flows through it.
    """
    kl = jax.lax.stop_gradient(masked_kl(logp, ref_logp, mask, kind))
    return where_mask(rewards - kl_coef * kl, mask)
