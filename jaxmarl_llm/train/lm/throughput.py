"""The work of one LM update, counted inside it: tokens the rollout and the loss read, and their model FLOPs
(models/flops.py). The runner divides by the update's wall time: `tokens_per_second` and `mfu` (the `flops_*`
entries over the time and the device's peak) in metrics.csv.

A rollout path's forwards read rows: the re-read path one row per acting seat and turn (its whole prompt and
reply), the incremental path one row per seat and episode (its transcript, through the KV cache). `rows`
functions give each row's length; the counts follow from them, so a path's redundant reading shows as lower
MFU, not as more useful work.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.models.flops import forward_flops
from jaxmarl_llm.train.lm.plan import Plan, Turns


def turn_rows(prompt_len: jax.Array, generated: jax.Array, who: jax.Array) -> jax.Array:
    """[T, N, A] -> [T, N, A]: a row per turn where `who` acted: its prompt and reply."""
    return (prompt_len + generated) * who


def episode_rows(prompt_len: jax.Array, generated: jax.Array, who: jax.Array) -> jax.Array:
    """[T, N, A] -> [N, A]: a row per seat, its transcript up to its last reply."""
    return jnp.max((prompt_len + generated) * who, axis=0)


def update_work(plan: Plan, rows, cfg, turns: Turns, train_turns: Turns, axis_name: str | None,
                ran=1.0) -> dict:
    """{"tokens_rollout", "tokens_loss", "flops_rollout", "flops_loss"} of the update over every device.

    rows: the path's row function (above); turns [T, N, A, ...], train_turns [T, N, A_l, ...]. The loss reads its
    rows update_epochs times: a forward and backward (3 forwards), plus the reference's forward with KL; `ran`:
    the share of minibatches that were scored (the others had no signal and were skipped)."""
    lm = jnp.zeros((plan.num_agents,), bool).at[jnp.asarray(plan.lm_agents, jnp.int32)].set(True)
    generated = turns.action_mask.sum(-1)  # [T, N, A]
    read = rows(turns.prompt_len, generated, turns.acted & lm).astype(jnp.float32)
    head = (generated * (turns.acted & lm)).astype(jnp.float32)
    scored = rows(train_turns.prompt_len, train_turns.action_mask.sum(-1), train_turns.acts).astype(jnp.float32)
    scored_head = train_turns.token_mask().sum().astype(jnp.float32)
    passes = plan.update_epochs * (3 + int(plan.use_kl))
    out = {
        "tokens_rollout": read.sum(),
        "tokens_loss": ran * plan.update_epochs * scored.sum(),
        "flops_rollout": forward_flops(cfg, read.sum(), jnp.square(read).sum(), head.sum()),
        "flops_loss": ran * passes * forward_flops(cfg, scored.sum(), jnp.square(scored).sum(), scored_head),
    }
    return out if axis_name is None else jax.lax.psum(out, axis_name)


def sequence_work(cfg, mask: jax.Array, passes: int, axis_name: str | None) -> dict:
    """{"tokens_loss", "flops_loss"} of a batch of sequences read `passes` forwards each (a gradient step 3, a
    reference 1) up to their last target token; mask [..., L] bool: the target tokens (SFT / DPO)."""
    mask = mask.reshape(-1, mask.shape[-1])
    last = mask.shape[-1] - jnp.argmax(mask[:, ::-1], axis=-1)  # [B] one past the last target
    lengths = jnp.where(mask.any(-1), last, 0).astype(jnp.float32)
    out = {"tokens_loss": lengths.sum(),
           "flops_loss": passes * forward_flops(cfg, lengths.sum(), jnp.square(lengths).sum(),
                                                 mask.sum().astype(jnp.float32))}
    return out if axis_name is None else jax.lax.psum(out, axis_name)
