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

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.models import config as model_config
from jaxmarl_llm.models import lora as lora_lib
from jaxmarl_llm.models.config import ModelConfig
from jaxmarl_llm.models.lora import LoraConfig, init_lora
from jaxmarl_llm.models.sampling import SamplingConfig, generate_with_state, prefill, sampling_logprobs
from jaxmarl_llm.models.transformer import Params, forward, init_params, lm_head
from jaxmarl_llm.policies import candidates as cand_lib
from jaxmarl_llm.policies.base import Sample
from jaxmarl_llm.policies.candidates import Candidates


def value_head_init(cfg: ModelConfig, num_agents: int | None = None) -> Params:
    """A zero linear head hidden [D] -> scalar (zero init: values start at 0)."""
    lead = () if num_agents is None else (num_agents,)
    return {"kernel": jnp.zeros((*lead, cfg.hidden_size), jnp.float32), "bias": jnp.zeros(lead, jnp.float32)}


def value_head_apply(head: Params, hidden: jax.Array) -> jax.Array:
    """hidden [..., D] -> values [...] in float32."""
    return hidden.astype(jnp.float32) @ head["kernel"] + head["bias"]


def value_or_zero(head: Params | None, hidden: jax.Array) -> jax.Array:
    """The value head on hidden [..., D], or zeros [...] without one (the reference policy, SFT adapters)."""
    return jnp.zeros(hidden.shape[:-1], jnp.float32) if head is None else value_head_apply(head, hidden)


def score_tokens(sampling: SamplingConfig, logits: jax.Array, targets: jax.Array, hidden: jax.Array,
                 value_head: Params | None, entropy_ids: tuple[int, ...] = ()) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Log-prob and entropy under the sampling distribution, and the value head, at each scored position.

    logits [..., V] (float32) predict targets [...]; hidden [..., D] is the state each target was chosen in.
    The one place that turns logits into what the losses see: `LMPolicy.score` (one forward per turn) and
    `transcripts.score_transcripts` (one per episode) run the same ops. Temperature 0 scores the plain
    softmax (greedy decoding has no distribution of its own to score under). With `entropy_ids` the entropy is
    the choice's among those tokens (the distribution renormalised over them): a bonus on it spreads the choice
    among them and moves no probability to any other token.
    """
    s = sampling
    if s.temperature == 0:
        lp_all = jax.nn.log_softmax(logits, axis=-1)
    else:
        lp_all = sampling_logprobs(logits, s.temperature, s.top_k, s.top_p)  # [..., V]
    lp = jnp.take_along_axis(lp_all, targets[..., None], axis=-1)[..., 0]
    if entropy_ids:  # from the ids' own logits (no other logit enters, not even by rounding); what top-k / top-p
        # cut stays cut, finite: a row with none of the ids left is uniform, not nan
        ids = jnp.asarray(entropy_ids)
        kept = jnp.isfinite(lp_all[..., ids])
        lp_all = jax.nn.log_softmax(jnp.where(kept, logits[..., ids] / (s.temperature or 1.0), -1e30), axis=-1)
    p = jnp.exp(lp_all)
    ent = -jnp.sum(jnp.where(p > 0, p * lp_all, 0.0), axis=-1)
    return lp, ent, value_or_zero(value_head, hidden)


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


def row_keys(key: jax.Array, rows: int) -> jax.Array:
    """One key per row: a batch of one keeps `key` itself (so a row sampled alone or in a batch with its own
    key draws the same), a bigger batch splits it; per-row keys [B] pass through."""
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    if key.ndim == (1 if typed else 2):
        return key
    return key[None] if rows == 1 else jax.random.split(key, rows)


@dataclasses.dataclass(frozen=True)
class LMPolicy:
    """actions: "free" (any text), "constrained" (decoding walks the candidates' trie) or "scored" (a softmax
    over the candidates' sequence log-probs); `candidates` are the env's valid replies (policies/candidates.py)."""

    cfg: ModelConfig
    lora: LoraConfig = LoraConfig()
    sampling: SamplingConfig = SamplingConfig()
    actions: str = "free"
    candidates: Candidates | None = None
    length_normalize: bool = False  # scored: mean instead of summed token log-probs (TWOSOME)
    # free text: the entropy scored is the choice's among these token ids (config.entropy_tokens); () = the whole
    # vocabulary's
    entropy_ids: tuple[int, ...] = ()

    def init_trainable(self, key: jax.Array, num_agents: int | None = None) -> Params:
        """Adapters (B = 0) and a zero value head; leaves [A, ...] when num_agents is given."""
        return {**self.init_adapter(key, num_agents), "value_head": value_head_init(self.cfg, num_agents)}

    def init_adapter(self, key: jax.Array, num_agents: int | None = None) -> Params:
        """{"lora": fresh adapters (B = 0, so the base's outputs)}: what SFT / DPO train, no value head."""
        return {"lora": init_lora(key, self.cfg, self.lora, num_agents)}

    def _lora(self, trainable: Params | None) -> Params | None:
        """trainable["lora"]; a bare adapter tree here would otherwise be read as no adapter (the base model)."""
        if trainable is None:
            return None
        if set(trainable) & set(model_config.PROJECTIONS):
            raise TypeError(f"trainable holds {sorted(trainable)}: an adapter tree; pass {{'lora': adapters}}")
        return trainable.get("lora")

    def logits(self, params: Params, trainable: Params | None, tokens: jax.Array) -> jax.Array:
        """tokens [B, L] -> float32 logits [B, L, V] (position t predicts token t+1); adapters on when given."""
        return forward(params, tokens, self.cfg, lora=self._lora(trainable), lora_scale=self.lora.scale)[0]

    def sample(self, key: jax.Array, params: Params, trainable: Params | None, obs_tokens: jax.Array,
               obs_lengths: jax.Array, valid: jax.Array | None = None) -> Sample:
        """Generate an action (a token sequence) per row; the value is read from the prompt's last hidden state.

        valid [B, K]: the candidates allowed in each row's state (constrained / scored; default all)."""
        if self.actions != "free":
            return self._sample_candidates(key, params, trainable, obs_tokens, obs_lengths, valid)
        s = self.sampling
        out = generate_with_state(key, params, self._lora(trainable), obs_tokens, obs_lengths, self.cfg,
                                  max_new_tokens=s.max_new_tokens, temperature=s.temperature, top_k=s.top_k,
                                  top_p=s.top_p, stop_ids=tuple(s.stop_ids), pad_id=s.pad_id,
                                  lora_scale=self.lora.scale)
        return Sample(out["tokens"], out["logprobs"], out["mask"], self._value(trainable, out["prompt_hidden"]))

    def _value(self, trainable: Params | None, hidden: jax.Array) -> jax.Array:
        return value_or_zero(None if trainable is None else trainable.get("value_head"), hidden)

    def valid_or_all(self, valid: jax.Array | None, rows: tuple[int, ...]) -> jax.Array:
        """valid [*rows, K], or every candidate allowed when not given."""
        return jnp.ones(rows + (self.candidates.size,), bool) if valid is None else valid

    def _sample_candidates(self, key, params, trainable, obs_tokens, obs_lengths, valid) -> Sample:
        """Constrained decoding (walk the trie) or a draw over scored candidates."""
        b = obs_tokens.shape[0]
        s, m = self.sampling, self.sampling.max_new_tokens
        keys, valid = row_keys(key, b), self.valid_or_all(valid, (b,))
        lengths = obs_lengths.astype(jnp.int32)
        if self.actions == "scored":
            scores, hidden = self.candidate_scores(params, trainable, obs_tokens, lengths)
            # the key constrained decoding draws its first token with: one-token replies sample the same
            first_keys = jax.vmap(lambda k: jax.random.split(k, self.candidates.depth)[0])(keys)
            k, lp = cand_lib.scored_pick(first_keys, scores, valid, s.temperature)
            tokens = jnp.asarray(self.candidates.table(m))[k]  # [B, M]
            mask = jnp.arange(m)[None, :] < jnp.asarray(self.candidates.lens)[k][:, None]
            tokens = jnp.where(mask, tokens, s.pad_id)
            return Sample(tokens, jnp.zeros((b, m)).at[:, 0].set(lp), mask, self._value(trainable, hidden))
        logits, prompt_hidden, cache, step_fn = prefill(params, self._lora(trainable), obs_tokens, lengths, self.cfg,
                                                        m, self.lora.scale)
        tokens, logprobs, mask, _ = cand_lib.constrained_decode(keys, logits, cache, step_fn, self.candidates, valid,
                                                                s.temperature, m, s.pad_id)
        return Sample(tokens, logprobs, mask, self._value(trainable, prompt_hidden))

    def candidate_scores(self, params: Params, trainable: Params | None, prompt: jax.Array,
                         lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Every candidate's sequence log-prob after each row's prompt (GLAM / TWOSOME) in one forward:
        prompt [B, L] -> (scores [B, K], the prompt's last hidden state [B, D]). One-token candidates need
        only the prompt; longer ones run B x K rows (prompt + candidate)."""
        c, (b, l) = self.candidates, prompt.shape
        lora, d = self._lora(trainable), c.depth
        last = (lengths - 1).astype(jnp.int32)
        if d == 1:
            _, h, _ = forward(params, prompt, self.cfg, lora=lora, lora_scale=self.lora.scale, read_at=last[:, None])
            h = h[:, 0]  # [B, D]
            logits = jnp.broadcast_to(lm_head(params, h, self.cfg)[:, None, None], (b, c.size, 1, self.cfg.vocab_size))
            return cand_lib.candidate_logprobs(c, logits, self.length_normalize), h
        table = jnp.asarray(c.table())  # [K, D]
        rows = jnp.pad(prompt, ((0, 0), (0, d)))
        rows = jax.vmap(lambda row, n: jax.vmap(lambda t: jax.lax.dynamic_update_slice(row, t, (n,)))(table))(
            rows, lengths)  # [B, K, L + D]
        pos = (last[:, None] + jnp.arange(d)[None, :])  # [B, D] positions predicting the candidate's tokens
        _, h, _ = forward(params, rows.reshape(b * c.size, l + d), self.cfg, lora=lora, lora_scale=self.lora.scale,
                          read_at=jnp.repeat(pos, c.size, axis=0))
        h = h.reshape(b, c.size, d, -1)  # [B, K, D, H]
        return cand_lib.candidate_logprobs(c, lm_head(params, h, self.cfg), self.length_normalize), h[:, 0, 0]

    def candidate_distribution(self, params: Params, trainable: Params | None, prompt: jax.Array,
                               lengths: jax.Array, valid: jax.Array) -> jax.Array:
        """[B, K]: the probability of each candidate reply after each prompt [B, L], over the valid ones [B, K]:
        the policy's acting distribution read out exactly (what a tabular evaluation needs). Constrained: the
        product of the trie walk's token probabilities; scored: the softmax over candidates; free text: each
        candidate's sequence probability, renormalised over the valid candidates (the mass on other replies,
        which do not parse, is left out)."""
        b, k = prompt.shape[0], self.candidates.size
        lengths = lengths.astype(jnp.int32)
        if self.actions == "scored":
            scores, _ = self.candidate_scores(params, trainable, prompt, lengths)
            lp, _ = cand_lib.scored_distribution(scores, valid, self.sampling.temperature)
        else:  # every (row, candidate) pair scored as an action taken after the row's prompt: B x K rows
            m = max(self.sampling.max_new_tokens, self.candidates.depth)
            table = jnp.asarray(self.candidates.table(m))  # [K, M]
            mask = jnp.arange(m)[None, :] < jnp.asarray(self.candidates.lens)[:, None]  # [K, M]
            rep = lambda x: jnp.repeat(x, k, axis=0)  # noqa: E731  row b's K copies, candidate order
            lp_tok, _, _ = self.score_actions(params, trainable, rep(prompt), rep(lengths), jnp.tile(table, (b, 1)),
                                              jnp.tile(mask, (b, 1)), rep(valid))
            lp = lp_tok.sum(-1).reshape(b, k)
        p = jnp.where(valid, jnp.exp(lp), 0.0)
        return p / jnp.maximum(p.sum(-1, keepdims=True), 1e-30)

    def score_logits(self, logits: jax.Array, action: jax.Array, hidden: jax.Array, head: Params | None,
                     valid: jax.Array | None = None) -> tuple[jax.Array, jax.Array, jax.Array]:
        """`score_tokens` for this policy's action mode: logits [..., M, V] predicting action [..., M], hidden
        [..., M, D] -> log-prob, entropy, value [..., M]; constrained: under the trie walk's distribution."""
        if self.actions == "free":
            return score_tokens(self.sampling, logits, action, hidden, head, self.entropy_ids)
        lp, ent = cand_lib.restricted_scores(self.candidates, logits, action,
                                             self.valid_or_all(valid, action.shape[:-1]), self.sampling.temperature)
        return lp, ent, value_or_zero(head, hidden)

    def score_actions(self, params: Params, trainable: Params | None, prompt: jax.Array, lengths: jax.Array,
                      action: jax.Array, action_mask: jax.Array, valid: jax.Array | None = None):
        """Log-probs, entropies and values [B, M] of the actions [B, M] taken after prompts [B, L] (one forward
        per row), under this policy's action mode; value[:, j] is at the context token j was chosen in.
        Scored: the turn is one choice, scored at token 0 (the caller's mask keeps token 0 only)."""
        b, m = action.shape
        head = None if trainable is None else trainable.get("value_head")
        valid = self.valid_or_all(valid, (b,)) if self.actions != "free" else valid
        if self.actions == "scored":
            scores, hidden = self.candidate_scores(params, trainable, prompt, lengths)
            lp_k, ent = cand_lib.scored_distribution(scores, valid, self.sampling.temperature)
            k = cand_lib.candidate_index(self.candidates, action)  # the whole reply (the mask keeps token 0)
            first = lambda x: jnp.zeros((b, m), jnp.float32).at[:, 0].set(x)  # noqa: E731
            lp = jnp.take_along_axis(lp_k, k[:, None], -1)[:, 0]
            return (first(lp) * action_mask, first(ent) * action_mask,
                    first(value_or_zero(head, hidden)) * action_mask)
        tokens, _, _ = append_tokens(prompt, lengths, action, action_mask)
        pos = jnp.clip(lengths[:, None] - 1 + jnp.arange(m)[None, :], 0, tokens.shape[1] - 1)  # [B, M]
        _, h, _ = forward(params, tokens, self.cfg, lora=self._lora(trainable), lora_scale=self.lora.scale,
                          read_at=pos)  # [B, M, D]: the contexts the action's tokens were chosen in
        lp, ent, value = self.score_logits(lm_head(params, h, self.cfg), action, h, head, valid)
        fm = action_mask.astype(jnp.float32)
        return lp * fm, ent * fm, value * fm

    def score(self, params: Params, trainable: Params | None, tokens: jax.Array, lengths: jax.Array,
              action_mask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Log-probs, entropies and values of given tokens [B, T], aligned to the tokens (see module doc)."""
        del lengths  # right padding: causality already hides everything after a row's length
        logits, hidden, _ = forward(params, tokens, self.cfg, lora=self._lora(trainable), lora_scale=self.lora.scale)
        head = None if trainable is None else trainable.get("value_head")
        # position t-1 predicts token t: [B, T-1] each
        lp, ent, v = score_tokens(self.sampling, logits[:, :-1], tokens[:, 1:], hidden[:, :-1], head,
                                  self.entropy_ids)
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


def build_model(mcfg, tokenizer, seed: int, host: bool = False) -> tuple[ModelConfig, Params]:
    """(ModelConfig, params): a checkpoint folder when `mcfg.checkpoint` is set, else a random model sized by `mcfg`.
    host=True: the params as numpy arrays in host memory (a base sharded over devices later, mesh.fsdp > 1)."""
    if mcfg.checkpoint:
        from jaxmarl_llm.models.hf import CheckpointError, load_pretrained

        cfg, params = load_pretrained(mcfg.checkpoint, dtype=mcfg.dtype, host=host)
        if tokenizer.vocab_size > cfg.vocab_size:
            raise CheckpointError(f"the tokenizer has {tokenizer.vocab_size} ids but the checkpoint "
                                  f"{mcfg.checkpoint!r} has {cfg.vocab_size}: pass its own tokenizer, "
                                  "--config.tokenizer=<its folder>")
        return cfg.replace(**attention_settings(mcfg)), params
    if mcfg.get("preset", ""):  # that architecture exactly, its vocabulary included, with random weights
        cfg = preset_config(mcfg, tokenizer)
        params = init_params(cfg, jax.random.PRNGKey(seed), std=mcfg.init_std)
        return cfg, jax.device_get(params) if host else params
    # exactly the tokenizer's ids: a model never samples an id the env cannot decode
    cfg = model_config.tiny(
        mcfg.family, vocab_size=tokenizer.vocab_size, hidden_size=mcfg.hidden_size, intermediate_size=mcfg.intermediate_size,
        num_layers=mcfg.num_layers, num_heads=mcfg.num_heads, num_kv_heads=mcfg.num_kv_heads, head_dim=mcfg.head_dim,
        max_position_embeddings=mcfg.max_position_embeddings, dtype=mcfg.dtype, param_dtype=mcfg.dtype,
        tie_embeddings=bool(mcfg.get("tie_embeddings", False)), **attention_settings(mcfg),
        **({"rope_theta": float(mcfg.rope_theta)} if mcfg.get("rope_theta", 0.0) else {}),
    )
    # std 0.1 (not 0.02): with RMSNorm fixing |h|, LoRA on the blocks can only steer the logits
    # as far as |lm_head rows| allows; a from-scratch base needs room to express preferences.
    params = init_params(cfg, jax.random.PRNGKey(seed), std=mcfg.init_std)
    return cfg, jax.device_get(params) if host else params


def preset_config(mcfg, tokenizer) -> ModelConfig:
    """`model.preset`'s architecture (models/config.py PRESETS) in `model.dtype`, with the group's attention
    settings; the tokenizer's ids must fit its vocabulary."""
    cfg = model_config.PRESETS[mcfg.preset]
    if tokenizer.vocab_size > cfg.vocab_size:
        raise ConfigError(f"the tokenizer has {tokenizer.vocab_size} ids but {mcfg.preset}'s vocab is {cfg.vocab_size}")
    return cfg.replace(dtype=mcfg.dtype, param_dtype=mcfg.dtype, **attention_settings(mcfg))


def attention_settings(mcfg) -> dict:
    """The model group's attention backend and block sizes, and its layer rematerialisation ("auto" starts
    without: train/lm/memory.py fit_memory turns it on where the run would not fit)."""
    return {"attention_backend": str(mcfg.get("attention_backend", "xla")),
            "attention_block_q": int(mcfg.get("attention_block_q", 0)),
            "attention_block_k": int(mcfg.get("attention_block_k", 0)),
            "remat": mcfg.get("remat", "off") == "on"}


def make_policy(cfg: ModelConfig, lora, sampling, tokenizer, max_new_tokens: int, actions: str = "free",
                replies=None, length_normalize: bool = False) -> LMPolicy:
    """The policy of a config's `lora` and `sampling` groups; replies stop at the tokenizer's eos.
    actions != "free" acts among `replies` (the env's `action_candidates`)."""
    cands = None
    if actions != "free":
        cands = cand_lib.build(replies, tokenizer.eos_id, max_new_tokens)
        if actions == "scored" and cands.depth == 1:
            # one-token replies: the softmax over their scores is the softmax over their logits, which is
            # what constrained decoding samples (tests/test_candidates.py); its one-step path is the cheaper
            actions = "constrained"
    return LMPolicy(
        cfg,
        LoraConfig(rank=lora.rank, alpha=lora.alpha, targets=tuple(lora.targets)),
        SamplingConfig(max_new_tokens=max_new_tokens, temperature=sampling.temperature, top_k=sampling.top_k,
                       top_p=sampling.top_p, stop_ids=(tokenizer.eos_id,), pad_id=tokenizer.pad_id),
        actions, cands, bool(length_normalize),
    )


UNSLOTTED = ("critic", "base")  # trainable entries shared by every seat: no leading adapter-slot axis


def slotted(trainable) -> dict:
    """The trainable entries stacked per adapter slot [S, ...] (adapters, value heads): all but UNSLOTTED."""
    return {k: v for k, v in trainable.items() if k not in UNSLOTTED}


def model_weights(trainable, base, reference: bool = False):
    """The base weights the policy runs: its own trained copy with `train_base` (trainable["base"]), else the
    frozen base. The KL reference is always the frozen (initial) base."""
    return base if reference else trainable.get("base", base)
