"""Direct preference optimization (DPO; Rafailov et al., 2023) and its IPO variant.

Inputs are sequence log-probs (summed over the response tokens, see
`sequence_log_prob`) of the chosen and the rejected response under the policy
and the frozen reference. With h = (pc - rc) - (pr - rr), the difference of
implicit rewards divided by beta:

    sigmoid  -(1 - s) log sigmoid(beta h) - s log sigmoid(-beta h)
             (s = label_smoothing: conservative DPO, labels flipped with prob s)
    ipo      (h - 1 / (2 beta))^2   (Azar et al., 2023; usually fed length-averaged
             log-probs: sequence_log_prob(..., average=True))

Metrics: the implicit rewards beta (pc - rc) and beta (pr - rr), their margin,
and accuracy (chosen reward > rejected reward).
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.masked import sequence_mean, sequence_sum
from jaxmarl_llm.algos.ppo import shard_mean


def sequence_log_prob(token_log_prob: jax.Array, mask: jax.Array, average: bool = False) -> jax.Array:
    """[..., M] -> [...]: log p(response) = sum over its real tokens (or the mean, for IPO)."""
    return sequence_mean(token_log_prob, mask) if average else sequence_sum(token_log_prob, mask)


def dpo_loss(
    policy_chosen: jax.Array,  # [B] log pi(y_w | x)
    policy_rejected: jax.Array,  # [B] log pi(y_l | x)
    ref_chosen: jax.Array,  # [B] log pi_ref(y_w | x)
    ref_rejected: jax.Array,  # [B] log pi_ref(y_l | x)
    beta: float | jax.Array = 0.1,
    label_smoothing: float | jax.Array = 0.0,
    loss_type: Literal["sigmoid", "ipo"] = "sigmoid",
    mask: jax.Array | None = None,  # [B] bool: pairs that count
    axis_name: str | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Mean pair loss (a shard share with axis_name) and metrics; the reference gets no gradient."""
    ref_chosen, ref_rejected = jax.lax.stop_gradient(ref_chosen), jax.lax.stop_gradient(ref_rejected)
    z = (lambda x: x) if mask is None else (lambda x: jnp.where(mask, x, jnp.zeros_like(x)))
    chosen_ratio = z(policy_chosen) - z(ref_chosen)  # [B]
    rejected_ratio = z(policy_rejected) - z(ref_rejected)  # [B]
    h = chosen_ratio - rejected_ratio
    if loss_type == "sigmoid":
        log_sig = jax.nn.log_sigmoid
        losses = -(1.0 - label_smoothing) * log_sig(beta * h) - label_smoothing * log_sig(-beta * h)
    elif loss_type == "ipo":
        losses = jnp.square(h - 1.0 / (2.0 * beta))
    else:
        raise ValueError(f"unknown DPO loss_type {loss_type!r}; expected sigmoid or ipo")
    chosen_reward = jax.lax.stop_gradient(beta * chosen_ratio)
    rejected_reward = jax.lax.stop_gradient(beta * rejected_ratio)
    metrics = {
        "chosen_reward": shard_mean(chosen_reward, mask, axis_name),
        "rejected_reward": shard_mean(rejected_reward, mask, axis_name),
        "reward_margin": shard_mean(chosen_reward - rejected_reward, mask, axis_name),
        "accuracy": shard_mean((chosen_reward > rejected_reward).astype(chosen_reward.dtype), mask, axis_name),
    }
    return shard_mean(losses, mask, axis_name), metrics
