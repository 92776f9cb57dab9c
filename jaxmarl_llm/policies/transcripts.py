"""Acting on and scoring growing transcripts: a KV cache kept across turns, one forward per episode.

Token games append to each agent's transcript and never rewrite it (`env.appends_actions`):
the prompt of turn t+1 starts with the prompt of turn t followed by the agent's own
(cleaned) action. So an LM policy never needs to re-read what it has already read:

    cache = init_rows(cfg, rows, capacity)                       # one KV row per (env, seat)
    sample, cache = act_rows(policy, key, base, adapters, tokens, length, cache, chunk)
        # prefill only the tokens added since the row last acted, `chunk` at a time, then decode

and a whole episode is scored with one forward over its final transcript (the context of
every turn is a prefix of it):

    lp, ent, value = score_transcripts(policy, base, trainable, seq, prompt_len, action, mask, widths)

Row r's cache slots [0, seen[r]) hold its transcript's keys/values. Slots past `seen` may hold
garbage (chunk padding, an unfed last token); a query at position p attends to slots <= p only,
and every such slot has been rewritten with the true token before it is read.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxmarl_llm.models import fsdp
from jaxmarl_llm.models.sampling import decode
from jaxmarl_llm.models.transformer import as_bits, forward, lm_head
from jaxmarl_llm.policies.base import Sample
from jaxmarl_llm.policies.candidates import constrained_decode
from jaxmarl_llm.policies.lm_policy import LMPolicy, row_keys, score_tokens, value_head_apply


class RowCache(NamedTuple):
    k: jax.Array  # [N_layers, R, S, Hkv, D] (a 16-bit cache as its bits, uint16)
    v: jax.Array  # [N_layers, R, S, Hkv, D]
    seen: jax.Array  # [R] int32: transcript tokens whose keys/values are in the cache


def init_rows(cfg, rows: int, capacity: int) -> RowCache:
    """Empty caches for `rows` transcripts of up to `capacity` tokens (plus generated ones).

    A 16-bit cache is kept as its bits (`as_bits`) from here to the end of the rollout: XLA:CPU gathers, slices
    and updates a bf16 array in float32 (a conversion of the whole cache and back at every row take, width slice
    and layer write), and a bitcast at each forward would copy it per decode step; `forward` reads and returns
    the bits."""
    shape = (cfg.num_layers, rows, capacity, cfg.num_kv_heads, cfg.head_dim)
    zeros = as_bits(jnp.zeros(shape, cfg.compute_dtype))
    return RowCache(zeros, zeros, jnp.zeros((rows,), jnp.int32))


def take_rows(cache: RowCache, rows: jax.Array) -> RowCache:
    return RowCache(cache.k[:, rows], cache.v[:, rows], cache.seen[rows])


def put_rows(cache: RowCache, rows: jax.Array, part: RowCache) -> RowCache:
    return RowCache(cache.k.at[:, rows].set(part.k), cache.v.at[:, rows].set(part.v), cache.seen.at[rows].set(part.seen))


def _row_forward(policy: LMPolicy, base, lora, tokens, k, v, start, logit_index):
    """Forward row b (tokens [B, T]) at positions start[b] + t against its own cache, in one batched call.

    lora: None, shared leaves [N, in, r], or per-row leaves [N, B, in, r] (`_layer_major`)."""
    cache = {"k": k, "v": v, "lengths": start}
    logits, hidden, cache = forward(base, tokens, policy.cfg, lora=lora, lora_scale=policy.lora.scale, cache=cache,
                                    logit_index=logit_index)
    return logits, jnp.take_along_axis(hidden, logit_index[:, None, None], axis=1)[:, 0], cache["k"], cache["v"]


def _layer_major(adapters, per_row: bool):
    """The LoRA tree as `forward` reads it: per-row leaves [B, N, ...] -> [N, B, ...] (once per act)."""
    if adapters is None:
        return None
    lora = adapters["lora"]
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), lora) if per_row else lora


def act_rows(policy: LMPolicy, key: jax.Array, base, adapters, tokens: jax.Array, length: jax.Array,
             cache: RowCache, chunk: int, min_width: int = 128, per_row: bool = True,
             valid: jax.Array | None = None) -> tuple[Sample, RowCache]:
    """Catch each row's cache up to its transcript (tokens [B, L], length [B]), then sample an action.

    adapters: per-row trainable {"lora", "value_head"} with leaves [B, ...] (per_row), one trainable shared by
    every row (per_row=False: no copy per row), or None (the base model).
    key: one key, or one per row (each row then samples independently of its batch-mates).
    valid [B, K]: the candidates allowed per row (`policy.actions == "constrained"`; default all).
    The returned cache holds the transcript plus the action's tokens but the last (the env echoes
    the action, so next turn's catch-up starts there).

    Attention reads only the first W cache slots, W the narrowest of min_width x 1, 2, 4, ... (or the
    whole cache) that holds every row's transcript and action: early turns of a long game do not pay
    for the capacity they have not reached (a `lax.switch`; under `vmap` it would run every width).
    """
    widths = score_widths(cache.k.shape[2], min_width)
    if len(widths) == 1:
        return _act_rows(policy, key, base, adapters, tokens, length, cache, chunk, per_row, valid)
    need = jnp.max(length) + policy.sampling.max_new_tokens
    branch = fsdp.agree_max(width_index(widths, need), base, policy.cfg)  # sharded weights: one width per group

    def at_width(w: int):
        def run(cache: RowCache):
            part = RowCache(cache.k[:, :, :w], cache.v[:, :, :w], cache.seen)
            sample, part = _act_rows(policy, key, base, adapters, tokens, length, part, chunk, per_row, valid)
            return sample, RowCache(cache.k.at[:, :, :w].set(part.k), cache.v.at[:, :, :w].set(part.v), part.seen)
        return run

    return jax.lax.switch(branch, [at_width(w) for w in widths], cache)


def _act_rows(policy: LMPolicy, key: jax.Array, base, adapters, tokens: jax.Array, length: jax.Array,
              cache: RowCache, chunk: int, per_row: bool = True,
              valid: jax.Array | None = None) -> tuple[Sample, RowCache]:
    b, l = tokens.shape
    s_cfg = policy.sampling
    length = length.astype(jnp.int32)
    start = jnp.clip(jnp.minimum(cache.seen, length - 1), 0)  # re-read >= 1 token: its logits start the action
    padded = jnp.pad(tokens, ((0, 0), (0, chunk)), constant_values=s_cfg.pad_id)
    num_chunks = fsdp.agree_max(jnp.max((length - start + chunk - 1) // chunk), base, policy.cfg)
    window = jax.vmap(lambda row, s: jax.lax.dynamic_slice(row, (s,), (chunk,)))

    def prefill(c, carry):
        k, v, logits, hidden = carry
        s = start + c * chunk
        last = jnp.clip(length - 1 - s, 0, chunk - 1)
        lg, hd, k, v = _row_forward(policy, base, lora, window(padded, jnp.minimum(s, l)), k, v, s, last)
        here = (length - 1 >= s) & (length - 1 < s + chunk)  # [B] this chunk holds the row's last token
        return k, v, jnp.where(here[:, None], lg, logits), jnp.where(here[:, None], hd, hidden)

    lora = _layer_major(adapters, per_row)
    v0 = jnp.zeros((b, policy.cfg.vocab_size), jnp.float32)
    h0 = jnp.zeros((b, policy.cfg.hidden_size), policy.cfg.compute_dtype)
    k, v, logits, hidden = jax.lax.fori_loop(0, num_chunks, prefill, (cache.k, cache.v, v0, h0))

    def step_fn(tok, kv):
        (k, v), pos = kv
        lg, _, k, v = _row_forward(policy, base, lora, tok[:, None], k, v, pos, jnp.zeros_like(pos))
        return lg, ((k, v), pos + 1)

    if policy.actions == "constrained":
        valid = policy.valid_or_all(valid, (b,))
        toks, lps, mask, ((k, v), _) = constrained_decode(
            row_keys(key, b), logits, ((k, v), length), step_fn, policy.candidates, valid, s_cfg.temperature,
            s_cfg.max_new_tokens, s_cfg.pad_id)
    else:
        toks, lps, mask, ((k, v), _) = decode(
            key, logits, ((k, v), length), step_fn, max_new_tokens=s_cfg.max_new_tokens,
            temperature=s_cfg.temperature, top_k=s_cfg.top_k, top_p=s_cfg.top_p, stop_ids=s_cfg.stop_ids,
            pad_id=s_cfg.pad_id, agree=fsdp.agreement(base, policy.cfg))
    value = jnp.zeros((b,), jnp.float32)
    if adapters is not None and "value_head" in adapters:
        value = jax.vmap(value_head_apply)(adapters["value_head"], hidden) if per_row else value_head_apply(
            adapters["value_head"], hidden)
    # what the env will echo: the tokens before the first stop id; all but the last were fed to the cache
    stops = jnp.isin(toks, jnp.asarray(s_cfg.stop_ids or (-1,), jnp.int32)) & mask
    echoed = jnp.where(stops.any(-1), jnp.argmax(stops, -1), mask.sum(-1)).astype(jnp.int32)
    # decoding feeds every token but the one drawn at its last step (step M, or the trie's depth D)
    steps = policy.candidates.depth if policy.actions == "constrained" else s_cfg.max_new_tokens
    seen = length + jnp.minimum(echoed, jnp.minimum(mask.sum(-1), steps - 1))
    return Sample(toks, lps, mask, value), RowCache(k, v, seen)


def episode_sequence(final_tokens: jax.Array, last_prompt_len: jax.Array, last_action: jax.Array,
                     last_mask: jax.Array) -> jax.Array:
    """The scored sequence: the final transcript [B, L] with the row's last action written back at its
    prompt length (so an action cut by the capacity is still scored in full) -> [B, L + M]."""
    m = last_action.shape[-1]
    seq = jnp.pad(final_tokens, ((0, 0), (0, m)))
    act = jnp.where(last_mask, last_action, 0).astype(seq.dtype)
    keep = jax.vmap(lambda row, s: jax.lax.dynamic_slice(row, (s,), (m,)))(seq, last_prompt_len)
    act = jnp.where(last_mask, act, keep)
    return jax.vmap(lambda row, a, s: jax.lax.dynamic_update_slice(row, a, (s,)))(seq, act, last_prompt_len)


def score_widths(total: int, smallest: int = 128) -> tuple[int, ...]:
    """Static forward widths to choose from: smallest, 2x, 4x, ... below `total`, then `total` itself.

    A short episode runs at a narrow width (a few compiled branches instead of one per length)."""
    widths, w = [], smallest
    while w < total:
        widths.append(w)
        w *= 2
    return (*widths, total)


def width_index(widths: tuple[int, ...], need: jax.Array) -> jax.Array:
    """The `lax.switch` index of the narrowest of `widths` that holds `need` tokens (the last if none does)."""
    return jnp.minimum(jnp.searchsorted(jnp.asarray(widths), need), len(widths) - 1)


def needed_width(prompt_len: jax.Array, mask: jax.Array) -> jax.Array:
    """The forward width that covers every scored action (prompt_len [..., T], mask [..., T, M])."""
    return jnp.max(jnp.where(mask.any(-1), prompt_len + mask.shape[-1], 1))


def score_transcripts(policy: LMPolicy, base, trainable: Any | None, seq: jax.Array, prompt_len: jax.Array,
                      action: jax.Array, mask: jax.Array, widths: tuple[int, ...], need: jax.Array | None = None,
                      valid: jax.Array | None = None):
    """Log-probs, entropies and values [B, T, M] of every turn's action tokens from one forward per row.

    values[b, t, j] is the value head on the context token j was chosen in ([..., 0]: the turn's value).

    seq [B, W] (episode_sequence), prompt_len [B, T], action / mask [B, T, M]. The forward runs at the
    narrowest width in `widths` that covers every scored position (a `lax.switch`, so compute follows
    the episodes' real length). Zero where mask is 0. Under `vmap`, pass `need` (the width to cover,
    `needed_width` of the whole batch) from outside: a batched switch index would run every branch.
    valid [B, T, K]: each turn's allowed candidates (constrained actions: scored under the trie walk).
    """
    b, t, m = action.shape
    need = needed_width(prompt_len, mask) if need is None else need
    branch = fsdp.agree_max(width_index(widths, need), base, policy.cfg)  # sharded weights: one width per group
    lora = None if trainable is None else trainable.get("lora")
    head = None if trainable is None else trainable.get("value_head")

    def run(width):
        def fn(seq):
            pos = jnp.clip(prompt_len[..., None] + jnp.arange(m) - 1, 0, width - 1).reshape(b, t * m)
            _, h, _ = forward(base, seq[:, :width], policy.cfg, lora=lora, lora_scale=policy.lora.scale,
                              read_at=pos)  # [B, T*M, D]: the last layer runs at the scored contexts only
            # the value at each token's context: token 0's is the turn's
            if policy.actions != "free":
                return policy.score_logits(lm_head(base, h, policy.cfg).reshape(b, t, m, -1), action,
                                           h.reshape(b, t, m, -1), head, valid)
            lp, ent, value = score_tokens(policy.sampling, lm_head(base, h, policy.cfg), action.reshape(b, t * m),
                                          h, head, policy.entropy_ids)
            return lp.reshape(b, t, m), ent.reshape(b, t, m), value.reshape(b, t, m)
        return fn

    lp, ent, value = jax.lax.switch(branch, [run(w) for w in widths], seq)
    fm = mask.astype(jnp.float32)
    return lp * fm, ent * fm, value * fm
