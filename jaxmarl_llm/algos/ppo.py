"""The PPO clipped-surrogate loss, as a pure function of arrays.

Knows no env or network: callers pass log-probs, values and a mask of the
samples that count (inactive agents, padding and generated-token masks are all
zeros there).

Data parallelism: with `axis_name` set (inside `shard_map`), every mean is this
shard's *share* of the mean over the whole mesh (local sum / global count), so
`psum` of the loss, of its gradient and of each metric over the axis gives the
exact global value however the batch is split. Only parameter-free statistics
(counts, advantage mean and std) cross devices inside the loss, so nothing is
differentiated through a collective.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class PPOCoefs(NamedTuple):
    clip_eps: float | jax.Array = 0.2
    vf_coef: float | jax.Array = 0.5
    ent_coef: float | jax.Array = 0.01
    clip_value: bool = True
    normalize_advantages: bool = True


def mesh_sum(x, axis_name: str | None):
    """x summed over the data axis (x itself without one)."""
    return x if axis_name is None else jax.lax.psum(x, axis_name)


def shard_mean(x: jax.Array, mask: jax.Array | None = None, axis_name: str | None = None) -> jax.Array:
    """This shard's share of the masked mean over the mesh (the mean itself without axis_name)."""
    mask = jnp.ones(x.shape, x.dtype) if mask is None else mask.astype(x.dtype)
    count = jax.lax.stop_gradient(mesh_sum(jnp.sum(mask), axis_name))
    return jnp.sum(x * mask) / jnp.maximum(count, 1.0)


# A spread below this share of |mean| is float32 rounding, not signal (advantages in one batch that are all equal).
FLAT_SPREAD = 1e-5


def normalize(x: jax.Array, mask: jax.Array | None = None, axis_name: str | None = None, eps: float = 1e-8) -> jax.Array:
    """(x - mean) / std with the statistics of the masked entries over the whole mesh.

    Equal entries give 0: their float32 mean is off by rounding (~1e-7 |mean|), and dividing that noise by its own
    std would turn it into advantages of about +-1 that differ from one CPU to the next.
    """
    x = jax.lax.stop_gradient(x)
    mean = mesh_sum(shard_mean(x, mask, axis_name), axis_name)
    var = mesh_sum(shard_mean(jnp.square(x - mean), mask, axis_name), axis_name)
    std = jnp.sqrt(var)
    flat = std <= FLAT_SPREAD * jnp.abs(mean)
    return jnp.where(flat, 0.0, (x - mean) / (std + eps))


def ppo_loss(
    log_prob: jax.Array,  # [...] under the current policy
    old_log_prob: jax.Array,  # [...] recorded when sampling
    advantages: jax.Array,  # [...]
    values: jax.Array,  # [...] current critic
    old_values: jax.Array,  # [...] critic when sampling
    returns: jax.Array,  # [...] value targets
    entropy: jax.Array,  # [...]
    coefs: PPOCoefs,
    mask: jax.Array | None = None,  # [...] bool
    axis_name: str | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """actor - ent_coef * entropy + vf_coef * value loss; returns (loss, metrics), as shard shares."""
    if coefs.normalize_advantages:
        advantages = normalize(advantages, mask, axis_name)
    ratio = jnp.exp(log_prob - old_log_prob)
    surrogate = jnp.minimum(ratio * advantages, jnp.clip(ratio, 1.0 - coefs.clip_eps, 1.0 + coefs.clip_eps) * advantages)
    actor_loss = -shard_mean(surrogate, mask, axis_name)

    value_err = jnp.square(values - returns)
    if coefs.clip_value:
        clipped = old_values + jnp.clip(values - old_values, -coefs.clip_eps, coefs.clip_eps)
        value_err = jnp.maximum(value_err, jnp.square(clipped - returns))
    value_loss = 0.5 * shard_mean(value_err, mask, axis_name)
    ent = shard_mean(entropy, mask, axis_name)

    loss = actor_loss + coefs.vf_coef * value_loss - coefs.ent_coef * ent
    ratio = jax.lax.stop_gradient(ratio)
    metrics = {
        "actor_loss": actor_loss,
        "value_loss": value_loss,
        "entropy": ent,
        "approx_kl": shard_mean((ratio - 1.0) - jnp.log(ratio), mask, axis_name),
        "clip_frac": shard_mean((jnp.abs(ratio - 1.0) > coefs.clip_eps).astype(jnp.float32), mask, axis_name),
    }
    return loss, metrics
