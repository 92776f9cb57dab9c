"""Jitted generation: padded prefill into a KV cache, then one-token decode steps (a `lax.scan`; with
stop ids a `lax.while_loop` that ends once every row has stopped).

    generate(key, params, lora, prompt_tokens [B, L], prompt_lengths [B], cfg, *,
             max_new_tokens, temperature=1.0, top_k=0, top_p=1.0, stop_ids=(),
             pad_id=0, lora_scale=1.0) -> tokens [B, M], logprobs [B, M], mask [B, M]

    sampling_logprobs(logits [..., V], temperature, top_k, top_p) -> [..., V]

Prompts are right-padded; row b's prompt is prompt_tokens[b, :prompt_lengths[b]].
`logprobs` are under the distribution actually sampled from (temperature,
then top-k, then top-p, as in `transformers`); the policy's `score` calls the
same `sampling_logprobs`, so the log-prob in the loss equals the one recorded
here. Greedy (temperature == 0) records the log-prob under the unprocessed
softmax (a point mass has no useful log-prob). `mask` is 1 for real tokens: up
to and including the first stop id; later slots hold pad_id and log-prob 0.

No Python side effects and static shapes only: `generate` works under
`jax.vmap` over agents (lora in_axes=0, params None) and inside `lax.scan`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from jaxmarl_llm.models import fsdp
from jaxmarl_llm.models.config import ModelConfig
from jaxmarl_llm.models.transformer import Params, forward, init_cache


_MASKED = -1e9  # logit given to tokens outside the top-k / top-p set


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """How a policy turns logits into tokens (static: part of the compiled program)."""

    max_new_tokens: int = 32
    temperature: float = 1.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    stop_ids: tuple[int, ...] = ()
    pad_id: int = 0


def sampling_logprobs(logits: jax.Array, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> jax.Array:
    """Log-probs [..., V] of the sampling distribution (-inf outside the top-k / top-p set)."""
    logits = logits.astype(jnp.float32)
    if temperature > 0:
        logits = logits / temperature
    neg = _MASKED  # finite: exp -> 0 and 0 * logp stays finite, so entropy gradients are not NaN
    if top_k and top_k < logits.shape[-1]:
        kth = jax.lax.top_k(logits, top_k)[0][..., -1:]  # [..., 1]
        logits = jnp.where(logits < kth, neg, logits)
    if top_p < 1.0:
        sorted_logits = jnp.sort(logits, axis=-1)[..., ::-1]  # descending
        probs = jax.nn.softmax(sorted_logits, axis=-1)
        before = jnp.cumsum(probs, axis=-1) - probs  # mass strictly above each token
        keep = before < top_p  # always keeps the first
        cutoff = jnp.min(jnp.where(keep, sorted_logits, jnp.inf), axis=-1, keepdims=True)
        logits = jnp.where(logits < cutoff, neg, logits)
    return jax.nn.log_softmax(logits, axis=-1)


def sample_token(key: jax.Array, logits: jax.Array, temperature: float, top_k: int, top_p: float):
    """One token per row from logits [B, V] -> (tokens [B], logprobs [B])."""
    if temperature == 0:
        tok = jnp.argmax(logits, axis=-1)
        lp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    else:
        lp = sampling_logprobs(logits, temperature, top_k, top_p)
        tok = jax.random.categorical(key, lp, axis=-1)
    tok = tok.astype(jnp.int32)
    return tok, jnp.take_along_axis(lp, tok[:, None], axis=-1)[:, 0]


def _is_stop(tok: jax.Array, stop_ids: Sequence[int]) -> jax.Array:
    if not stop_ids:
        return jnp.zeros(tok.shape, bool)
    return jnp.any(tok[:, None] == jnp.asarray(stop_ids, jnp.int32)[None, :], axis=-1)


_STATIC = ("cfg", "max_new_tokens", "temperature", "top_k", "top_p", "stop_ids", "pad_id", "lora_scale")


@functools.partial(jax.jit, static_argnames=_STATIC)
def generate_with_state(
    key: jax.Array,
    params: Params,
    lora: Params | None,
    prompt_tokens: jax.Array,
    prompt_lengths: jax.Array,
    cfg: ModelConfig,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    stop_ids: tuple[int, ...] = (),
    pad_id: int = 0,
    lora_scale: float = 1.0,
) -> dict[str, Any]:
    """`generate` plus what policies want: prompt_hidden [B, D] (final hidden of the last prompt token)."""
    logits, prompt_hidden, cache, step_fn = prefill(params, lora, prompt_tokens, prompt_lengths, cfg, max_new_tokens,
                                                    lora_scale)
    tokens, logprobs, mask, _ = decode(key, logits, cache, step_fn, max_new_tokens=max_new_tokens,
                                       temperature=temperature, top_k=top_k, top_p=top_p, stop_ids=stop_ids,
                                       pad_id=pad_id, agree=fsdp.agreement(params, cfg))
    return {"tokens": tokens, "logprobs": logprobs, "mask": mask, "prompt_hidden": prompt_hidden}


def prefill(params: Params, lora: Params | None, prompt_tokens: jax.Array, prompt_lengths: jax.Array,
            cfg: ModelConfig, max_new_tokens: int, lora_scale: float = 1.0):
    """Read right-padded prompts [B, L] into a KV cache with room for max_new_tokens more -> (logits [B, V] of
    each prompt's last token, its final hidden state [B, D], the cache, step_fn(tokens [B], cache) -> (logits,
    cache)): what `decode` (or constrained decoding) continues from."""
    b, l = prompt_tokens.shape
    prompt_lengths = prompt_lengths.astype(jnp.int32)
    cache = init_cache(cfg, b, l + max_new_tokens)
    logits, hidden, cache = forward(params, prompt_tokens, cfg, lora=lora, lora_scale=lora_scale, cache=cache,
                                    num_new=prompt_lengths, logit_index=prompt_lengths - 1)
    prompt_hidden = jnp.take_along_axis(hidden, (prompt_lengths - 1)[:, None, None], axis=1)[:, 0]  # [B, D]

    def step_fn(tok, cache):
        logits, _, cache = forward(params, tok[:, None], cfg, lora=lora, lora_scale=lora_scale, cache=cache)
        return logits[:, 0], cache

    return logits, prompt_hidden, cache, step_fn


def decode(key: jax.Array, logits: jax.Array, cache: Any, step_fn, *, max_new_tokens: int, temperature: float = 1.0,
           top_k: int = 0, top_p: float = 1.0, stop_ids: Sequence[int] = (), pad_id: int = 0,
           agree: Callable[[jax.Array], jax.Array] | None = None):
    """Sample max_new_tokens per row from a filled cache.

    key: one key, or one per row [B] (then each row samples as if it were alone in a batch of one).
    logits [B, V] predict the first new token; step_fn(tokens [B], cache) -> (logits [B, V], cache) feeds one
    token per row. Token j (j < M-1) is fed at the row's next cache slot, so after the call the cache holds
    every sampled token but the last. Returns (tokens [B, M], logprobs [B, M], mask [B, M], cache).
    agree: makes the loop's "a row is still running" the same on every device that runs the forward together
    (FSDP-sharded weights, models/fsdp.py `agreement`); None: this device's rows decide.
    """
    b = logits.shape[0]
    stop_ids = tuple(stop_ids)
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    if key.ndim == (1 if typed else 2):  # one key per row: row b's draws do not depend on its batch-mates
        keys = jnp.swapaxes(jax.vmap(lambda k: jax.random.split(k, max_new_tokens))(key), 0, 1)  # [M, B, ...]
        draw = jax.vmap(lambda k, lg: jax.tree.map(lambda x: x[0], sample_token(k, lg[None], temperature, top_k, top_p)))
    else:
        keys = jax.random.split(key, max_new_tokens)
        draw = lambda k, lg: sample_token(k, lg, temperature, top_k, top_p)  # noqa: E731
    tok0, lp0 = draw(keys[0], logits)
    done0 = _is_stop(tok0, stop_ids)

    if not stop_ids:  # nothing can stop a row: a plain scan of M - 1 steps (cheaper than the loop below)
        def step(carry, k):
            cache, tok = carry
            logits, cache = step_fn(tok, cache)
            new, lp = draw(k, logits)
            return (cache, new), (new, lp)

        (cache, _), (toks, lps) = jax.lax.scan(step, (cache, tok0), keys[1:])
        tokens = jnp.concatenate([tok0[:, None], toks.T], axis=1)  # [B, M]
        logprobs = jnp.concatenate([lp0[:, None], lps.T], axis=1)
        return tokens, logprobs, jnp.ones((b, max_new_tokens), bool), cache

    tokens = jnp.full((b, max_new_tokens), pad_id, tok0.dtype).at[:, 0].set(tok0)  # [B, M]
    logprobs = jnp.zeros((b, max_new_tokens), lp0.dtype).at[:, 0].set(lp0)
    mask = jnp.zeros((b, max_new_tokens), bool).at[:, 0].set(True)

    # A while loop, not a scan: it stops once every row has hit a stop id (a `Move: 5` reply of 5 tokens
    # does not pay for max_new_tokens decode steps). Finished rows would only add pads, so the outputs
    # are those of running all M steps; the cache is not written past the last real token.
    def more(carry):
        i, _, _, done, _ = carry
        return (i < max_new_tokens) & (~jnp.all(done) if agree is None else agree(~jnp.all(done)))

    def step(carry):
        i, cache, tok, done, (tokens, logprobs, mask) = carry
        logits, cache = step_fn(tok, cache)
        new, lp = draw(keys[i], logits)
        new = jnp.where(done, pad_id, new)
        lp = jnp.where(done, 0.0, lp)
        out = (tokens.at[:, i].set(new), logprobs.at[:, i].set(lp), mask.at[:, i].set(~done))
        return i + 1, cache, new, done | _is_stop(new, stop_ids), out

    init = (jnp.int32(1), cache, tok0, done0, (tokens, logprobs, mask))
    _, cache, _, _, (tokens, logprobs, mask) = jax.lax.while_loop(more, step, init)
    return tokens, logprobs, mask, cache


def generate(key: jax.Array, params: Params, lora: Params | None, prompt_tokens: jax.Array,
             prompt_lengths: jax.Array, cfg: ModelConfig, **kw: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sample up to max_new_tokens per row -> (tokens [B, M] int32, logprobs [B, M] f32, mask [B, M] bool)."""
    out = generate_with_state(key, params, lora, prompt_tokens, prompt_lengths, cfg, **kw)
    return out["tokens"], out["logprobs"], out["mask"]
