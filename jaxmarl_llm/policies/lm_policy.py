"""A language-model policy: tokens in, tokens out, with log-probs, entropy and a value head.

    policy = LMPolicy(cfg, LoraConfig(...), SamplingConfig(...))
    trainable = policy.init_trainable(key, num_agents=A)   # {"lora": ..., "value_head": ...}, leaves [A, ...]
    sample = jax.vmap(policy.sample, in_axes=(0, None, 0, 0, 0))(keys, params, trainable, obs, obs_len)
    tokens, lengths, action_mask = append_tokens(obs, obs_len, sample.tokens, sample.mask)
    logp, ent, values = policy.score(params, one_agent_trainable, tokens, lengths, action_mask)

Positions: logprobs[b, t] = log p(tokens[b, t] | tokens[b, :t]) under the same
processed distribution the sampler used (temperature / top-k / top-p);
entropy[b, t] is that distribution's entropy; values[b, t] is the value head on
the final hidden state of token t-1, i.e. the value of the state in which
token t was chosen. All three are zero where action_mask is 0.

The reference policy for KL terms is `score(params, None, ...)` (adapters and
value head off): the same base weights, no copy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxmarl_llm.models.config import ModelConfig
from jaxmarl_llm.models.lora import LoraConfig, init_lora
from jaxmarl_llm.models.sampling import SamplingConfig, generate_with_state, sampling_logprobs
from jaxmarl_llm.models.transformer import Params, forward
from jaxmarl_llm.policies.base import Sample


def value_head_init(cfg: ModelConfig, num_agents: int | None = None) -> Params:
    """A zero linear head hidden [D] -> scalar (zero init: values start at 0)."""
    lead = () if num_agents is None else (num_agents,)
    return {"kernel": jnp.zeros((*lead, cfg.hidden_size), jnp.float32), "bias": jnp.zeros(lead, jnp.float32)}


def value_head_apply(head: Params, hidden: jax.Array) -> jax.Array:
    """hidden [..., D] -> values [...] in float32."""
    return hidden.astype(jnp.float32) @ head["kernel"] + head["bias"]


def append_tokens(prompt: jax.Array, prompt_lengths: jax.Array, response: jax.Array, response_mask: jax.Array):
    """Place each row's response right after its prompt.

    prompt [B, L], response [B, M] -> tokens [B, L+M], lengths [B], action_mask [B, L+M] (bool).
    """
    b, l = prompt.shape
    m = response.shape[1]
    resp = jnp.where(response_mask, response, 0).astype(prompt.dtype)
    buf = jnp.zeros((b, l + m), prompt.dtype)
    buf = jnp.where(jnp.arange(l + m)[None, :] < prompt_lengths[:, None], jnp.pad(prompt, ((0, 0), (0, m))), buf)
    place = jax.vmap(lambda row, r, s: jax.lax.dynamic_update_slice(row, r, (s,)))
    tokens = place(buf, resp, prompt_lengths)  # response starts at each row's prompt length
    action_mask = place(jnp.zeros((b, l + m), bool), response_mask.astype(bool), prompt_lengths)
    lengths = prompt_lengths + response_mask.astype(jnp.int32).sum(-1)
    return tokens, lengths.astype(jnp.int32), action_mask


@dataclasses.dataclass(frozen=True)
class LMPolicy:
    cfg: ModelConfig
    lora: LoraConfig = LoraConfig()
    sampling: SamplingConfig = SamplingConfig()

    def init_trainable(self, key: jax.Array, num_agents: int | None = None) -> Params:
        """Adapters (B = 0) and a zero value head; leaves [A, ...] when num_agents is given."""
        return {"lora": init_lora(key, self.cfg, self.lora, num_agents),
                "value_head": value_head_init(self.cfg, num_agents)}

    def _lora(self, trainable: Params | None) -> Params | None:
        return None if trainable is None else trainable.get("lora")

    def sample(self, key: jax.Array, params: Params, trainable: Params | None, obs_tokens: jax.Array,
               obs_lengths: jax.Array) -> Sample:
        """Generate an action (a token sequence) per row; the value is read from the prompt's last hidden state."""
        s = self.sampling
        out = generate_with_state(key, params, self._lora(trainable), obs_tokens, obs_lengths, self.cfg,
                                  max_new_tokens=s.max_new_tokens, temperature=s.temperature, top_k=s.top_k,
                                  top_p=s.top_p, stop_ids=tuple(s.stop_ids), pad_id=s.pad_id,
                                  lora_scale=self.lora.scale)
        value = jnp.zeros(obs_lengths.shape, jnp.float32)
        if trainable is not None and "value_head" in trainable:
            value = value_head_apply(trainable["value_head"], out["prompt_hidden"])
        return Sample(out["tokens"], out["logprobs"], out["mask"], value)

    def score(self, params: Params, trainable: Params | None, tokens: jax.Array, lengths: jax.Array,
              action_mask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Log-probs, entropies and values of given tokens [B, T], aligned to the tokens (see module doc)."""
        del lengths  # right padding: causality already hides everything after a row's length
        s = self.sampling
        logits, hidden, _ = forward(params, tokens, self.cfg, lora=self._lora(trainable), lora_scale=self.lora.scale)
        if s.temperature == 0:
            lp_all = jax.nn.log_softmax(logits[:, :-1], axis=-1)
        else:
            lp_all = sampling_logprobs(logits[:, :-1], s.temperature, s.top_k, s.top_p)  # [B, T-1, V]
        target = tokens[:, 1:]
        lp = jnp.take_along_axis(lp_all, target[..., None], axis=-1)[..., 0]
        p = jnp.exp(lp_all)
        ent = -jnp.sum(jnp.where(p > 0, p * lp_all, 0.0), axis=-1)
        if trainable is not None and "value_head" in trainable:
            v = value_head_apply(trainable["value_head"], hidden[:, :-1])
        else:
            v = jnp.zeros(target.shape, jnp.float32)
        pad = lambda x: jnp.pad(x, ((0, 0), (1, 0)))  # noqa: E731  token 0 has no prefix
        m = action_mask.astype(jnp.float32)
        return pad(lp) * m, pad(ent) * m, pad(v) * m
