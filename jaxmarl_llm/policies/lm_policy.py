"""A language-model policy: tokens in, tokens out, with log-probs, entropy and a value head.

    cfg, params = build_model(config.model, tokenizer, seed)     # a checkpoint folder or a random tiny model
    policy = make_policy(cfg, config.lora, config.sampling, tokenizer, max_new_tokens)
    trainable = policy.init_trainable(key, num_agents=A)   # {"lora": ..., "value_head": ...}, leaves [A, ...]
    sample = jax.vmap(policy.sample, in_axes=(0, None, 0, 0, 0))(keys, params, trainable, obs, obs_len)
    tokens, lengths, action_mask = append_tokens(obs, obs_len, sample.tokens, sample.mask)
    logp, ent, values = policy.score(params, one_agent_trainable, tokens, lengths, action_mask)

Trainers that fit the LM itself (SFT, DPO) use the smaller pieces: `policy.init_adapter(key)`
(adapters, no value head), `policy.logits(params, trainable, tokens)` for their own losses, and
`policy.export(path, params, trainable)` / `policy.export_adapter(...)` to write HF / PEFT folders.

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

import jax
import jax.numpy as jnp

from jaxmarl_llm.models import config as model_config
from jaxmarl_llm.models import lora as lora_lib
from jaxmarl_llm.models.config import ModelConfig
from jaxmarl_llm.models.lora import LoraConfig, init_lora
from jaxmarl_llm.models.sampling import SamplingConfig, generate_with_state, sampling_logprobs
from jaxmarl_llm.models.transformer import Params, forward, init_params
from jaxmarl_llm.policies.base import Sample


def value_head_init(cfg: ModelConfig, num_agents: int | None = None) -> Params:
    """A zero linear head hidden [D] -> scalar (zero init: values start at 0)."""
    lead = () if num_agents is None else (num_agents,)
    return {"kernel": jnp.zeros((*lead, cfg.hidden_size), jnp.float32), "bias": jnp.zeros(lead, jnp.float32)}


def value_head_apply(head: Params, hidden: jax.Array) -> jax.Array:
    """hidden [..., D] -> values [...] in float32."""
    return hidden.astype(jnp.float32) @ head["kernel"] + head["bias"]


def score_tokens(sampling: SamplingConfig, logits: jax.Array, targets: jax.Array, hidden: jax.Array,
                 value_head: Params | None) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Log-prob and entropy under the sampling distribution, and the value head, at each scored position.

    logits [..., V] (float32) predict targets [...]; hidden [..., D] is the state each target was chosen in.
    The one place that turns logits into what the losses see: `LMPolicy.score` (one forward per turn) and
    `transcripts.score_transcripts` (one per episode) run the same ops. Temperature 0 scores the plain
    softmax (greedy decoding has no distribution of its own to score under).
    """
    s = sampling
    if s.temperature == 0:
        lp_all = jax.nn.log_softmax(logits, axis=-1)
    else:
        lp_all = sampling_logprobs(logits, s.temperature, s.top_k, s.top_p)  # [..., V]
    lp = jnp.take_along_axis(lp_all, targets[..., None], axis=-1)[..., 0]
    p = jnp.exp(lp_all)
    ent = -jnp.sum(jnp.where(p > 0, p * lp_all, 0.0), axis=-1)
    if value_head is None:
        value = jnp.zeros(targets.shape, jnp.float32)
    else:
        value = value_head_apply(value_head, hidden)
    return lp, ent, value


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
        return {**self.init_adapter(key, num_agents), "value_head": value_head_init(self.cfg, num_agents)}

    def init_adapter(self, key: jax.Array, num_agents: int | None = None) -> Params:
        """{"lora": fresh adapters (B = 0, so the base's outputs)}: what SFT / DPO train, no value head."""
        return {"lora": init_lora(key, self.cfg, self.lora, num_agents)}

    def _lora(self, trainable: Params | None) -> Params | None:
        return None if trainable is None else trainable.get("lora")

    def logits(self, params: Params, trainable: Params | None, tokens: jax.Array) -> jax.Array:
        """tokens [B, L] -> float32 logits [B, L, V] (position t predicts token t+1); adapters on when given."""
        return forward(params, tokens, self.cfg, lora=self._lora(trainable), lora_scale=self.lora.scale)[0]

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
        logits, hidden, _ = forward(params, tokens, self.cfg, lora=self._lora(trainable), lora_scale=self.lora.scale)
        head = None if trainable is None else trainable.get("value_head")
        # position t-1 predicts token t: [B, T-1] each
        lp, ent, v = score_tokens(self.sampling, logits[:, :-1], tokens[:, 1:], hidden[:, :-1], head)
        pad = lambda x: jnp.pad(x, ((0, 0), (1, 0)))  # noqa: E731  token 0 has no prefix
        m = action_mask.astype(jnp.float32)
        return pad(lp) * m, pad(ent) * m, pad(v) * m

    def export(self, path: str, params: Params, trainable: Params | None = None) -> str:
        """Write the model as an HF folder (`model.checkpoint` loads it), adapters merged into the base."""
        from jaxmarl_llm.models.hf import save_pretrained

        if trainable is not None:
            params = lora_lib.merge(params, trainable["lora"], self.cfg, self.lora)
        save_pretrained(path, self.cfg, jax.device_get(params))
        return path

    def export_adapter(self, path: str, trainable: Params, base_model_name_or_path: str = "") -> str:
        """Write one agent's adapters as a PEFT folder (adapter_config.json + adapter_model.safetensors)."""
        lora_lib.export_peft(path, self.cfg, jax.device_get(trainable["lora"]), self.lora,
                             base_model_name_or_path=base_model_name_or_path)
        return path


def build_model(mcfg, tokenizer, seed: int) -> tuple[ModelConfig, Params]:
    """(ModelConfig, params): a checkpoint folder when `mcfg.checkpoint` is set, else a random model sized by `mcfg`."""
    if mcfg.checkpoint:
        from jaxmarl_llm.models.hf import load_pretrained

        cfg, params = load_pretrained(mcfg.checkpoint, dtype=mcfg.dtype)
        if tokenizer.vocab_size > cfg.vocab_size:
            raise ValueError(f"tokenizer has {tokenizer.vocab_size} ids but the checkpoint's vocab is {cfg.vocab_size}")
        return cfg, params
    # exactly the tokenizer's ids: a model never samples an id the env cannot decode
    cfg = model_config.tiny(
        mcfg.family, vocab_size=tokenizer.vocab_size, hidden_size=mcfg.hidden_size, intermediate_size=mcfg.intermediate_size,
        num_layers=mcfg.num_layers, num_heads=mcfg.num_heads, num_kv_heads=mcfg.num_kv_heads, head_dim=mcfg.head_dim,
        max_position_embeddings=mcfg.max_position_embeddings, dtype=mcfg.dtype, param_dtype=mcfg.dtype,
    )
    # std 0.1 (not 0.02): with RMSNorm fixing |h|, LoRA on the blocks can only steer the logits
    # as far as |lm_head rows| allows; a from-scratch base needs room to express preferences.
    return cfg, init_params(cfg, jax.random.PRNGKey(seed), std=mcfg.init_std)


def make_policy(cfg: ModelConfig, lora, sampling, tokenizer, max_new_tokens: int) -> LMPolicy:
    """The policy of a config's `lora` and `sampling` groups; replies stop at the tokenizer's eos."""
    return LMPolicy(
        cfg,
        LoraConfig(rank=lora.rank, alpha=lora.alpha, targets=tuple(lora.targets)),
        SamplingConfig(max_new_tokens=max_new_tokens, temperature=sampling.temperature, top_k=sampling.top_k,
                       top_p=sampling.top_p, stop_ids=(tokenizer.eos_id,), pad_id=tokenizer.pad_id),
    )
