"""Supervised fine-tuning on transcripts, and filtered behaviour cloning's selection.

Positions follow `LMPolicy.score`: logits[b, t] are the model's output after
reading tokens[b, :t+1], so they predict tokens[b, t+1]; `loss_mask[b, t]`
marks tokens[b, t] as a *target* (e.g. the agent's own replies, not the prompt
or the other agents' turns). Position 0 has no prefix and never counts.

Filtered BC / rejection sampling: generate, score, keep the best transcripts
and run SFT on them. `select_transcripts` returns a keep mask instead of a
smaller batch so shapes stay static: `loss_mask & keep[..., None]`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.masked import Aggregation, aggregate, where_mask
from jaxmarl_llm.algos.ppo import shard_mean


def _targets(logits: jax.Array, tokens: jax.Array, loss_mask: jax.Array):
    """Shift so position t of the result is the prediction of tokens[:, t] from logits[:, t-1]."""
    m = loss_mask.astype(bool).at[..., 0].set(False)
    pred = jnp.pad(logits[..., :-1, :], [(0, 0)] * (logits.ndim - 2) + [(1, 0), (0, 0)])  # [..., T, V]
    pred = where_mask(pred.astype(jnp.float32), m[..., None])  # garbage logits never reach log_softmax
    return pred, m


def token_log_probs(logits: jax.Array, tokens: jax.Array, loss_mask: jax.Array | None = None) -> jax.Array:
    """logits [..., T, V], tokens [..., T] -> [..., T] log p(tokens[t] | tokens[:t]) in float32, 0 at t = 0 / masked."""
    loss_mask = jnp.ones(tokens.shape, bool) if loss_mask is None else loss_mask
    pred, m = _targets(logits, tokens, loss_mask)
    tokens = where_mask(tokens, m)  # out-of-range ids at masked positions are never gathered
    lp = jnp.take_along_axis(jax.nn.log_softmax(pred, axis=-1), tokens[..., None].astype(jnp.int32), axis=-1)[..., 0]
    return where_mask(lp, m)


def sft_loss(
    logits: jax.Array,  # [..., T, V]
    tokens: jax.Array,  # [..., T] int
    loss_mask: jax.Array,  # [..., T] bool: target tokens
    aggregation: Aggregation = "token",
    axis_name: str | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Next-token cross-entropy over the target tokens (token mean by default); (loss, metrics) as shard shares.

    Metrics: nll and accuracy (argmax == target), both token means over targets.
    """
    pred, m = _targets(logits, tokens, loss_mask)
    nll = -token_log_probs(logits, tokens, loss_mask)
    correct = (jnp.argmax(pred, axis=-1) == tokens).astype(jnp.float32)
    loss = aggregate(nll, m, aggregation, axis_name=axis_name)
    metrics = {
        "nll": shard_mean(jax.lax.stop_gradient(nll), m, axis_name),
        "accuracy": shard_mean(correct, m, axis_name),
    }
    return loss, metrics


def select_transcripts(
    rewards: jax.Array,  # [..., N] one reward per transcript; top-k is taken along the last axis
    top_k: int | None = None,
    threshold: float | jax.Array | None = None,
    valid: jax.Array | None = None,  # [..., N] bool: transcripts that exist
) -> jax.Array:
    """[..., N] bool: keep the top_k rewards of each row and/or those with reward >= threshold (both: and).

    Ties at the k-th place go to the lower index, so exactly min(top_k, #valid) are kept.
    Invalid transcripts are never kept and take no top-k slot. For a global top-k,
    reshape the rewards to [1, N]; across shards that needs a gather first.
    """
    keep = jnp.ones(rewards.shape, bool) if valid is None else valid.astype(bool)
    if threshold is not None:
        keep = keep & (rewards >= threshold)
    if top_k is not None:
        score = jnp.where(keep, rewards, -jnp.inf)
        order = jnp.argsort(-score, axis=-1, stable=True)  # best first, ties by index
        rank = jnp.argsort(order, axis=-1)
        keep = keep & (rank < top_k)
    return keep
