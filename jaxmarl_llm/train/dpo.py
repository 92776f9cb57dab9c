"""DPO on preference pairs, with the SFT trainer's interface, runner and checkpoints.

    trainer = make_train(config)                 # same interface as sft / lm_rl
    state = trainer.init(key, trainer.hparams)
    state, metrics = trainer.update(state, trainer.hparams, trainer.base)
    trainer.export(state, "<out_dir>/model")     # HF folder (adapters merged)
    trainer.export_adapter(state, "<out_dir>/adapter")   # PEFT adapter (LoRA runs only)

Pairs come from one of two sources (`config.source`):

  "pairs"  a local JSONL file, one {"prompt", "chosen", "rejected"} object per line.
           Each side is tokenized once, at start-up, as prompt ids + response ids + eos
           (the stop token the sampler learns to emit) into a [2, max_length] buffer;
           only the response and its eos are scored. Each update takes `batch_size`
           pairs of a fresh random permutation per epoch (a function of the step and
           a key in the state, so resume is exact).
  "game"   played inside the compiled update. For each of `batch_size` env seeds every
           player in `config.players` plays one episode on that same seed (same reset,
           same env randomness): "teacher:P" is the scripted teacher (data/teachers.py)
           with exploration noise P, "policy" the current policy sampling. Per agent,
           the transcript with the highest return is chosen, the lowest rejected; pairs
           whose returns tie are masked out. A pair's sequences are whole transcripts:
           the agent's own moves (plus an eos after each, as in SFT) are scored, the
           prompt and the env's feedback are context.

Loss: `algos.dpo.dpo_loss` (sigmoid / conservative / IPO) on sequence log-probs
(sum over the scored tokens; the mean for IPO), plus `sft_coef` x the token-mean
NLL of the chosen responses (RPO; 0 = plain DPO). The reference policy is the
same base with the adapters off (no copy of any weight). With `train_base=True`
every weight is trained and the reference is a frozen copy of the initial
weights, which lives in `trainer.base` (one extra copy of the model in memory).
"""

from __future__ import annotations

import functools
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.algos.dpo import dpo_loss, sequence_log_prob
from jaxmarl_llm.algos.ppo import shard_mean
from jaxmarl_llm.algos.sft import token_log_probs
from jaxmarl_llm.data.collect import collect, policy_script
from jaxmarl_llm.data.files import Pairs, load_pairs
from jaxmarl_llm.data.teachers import make_script
from jaxmarl_llm.parallel.mesh import global_index
from jaxmarl_llm.policies.lm_policy import LMPolicy
from jaxmarl_llm.train.config import ConfigError, parse_players
from jaxmarl_llm.train.lm.setup import setup_lm
from jaxmarl_llm.train.lm.throughput import sequence_work
from jaxmarl_llm.train.lm.weights import base_specs, float32_master, split_weights
from jaxmarl_llm.train.optim import adamw


class DPOHParams(NamedTuple):
    lr: jax.Array
    max_grad_norm: jax.Array
    weight_decay: jax.Array
    beta: jax.Array
    label_smoothing: jax.Array
    sft_coef: jax.Array

    @classmethod
    def from_config(cls, config) -> "DPOHParams":
        return cls(*(jnp.asarray(config[name], jnp.float32) for name in cls._fields))


@struct.dataclass
class DPOState:
    trainable: Any  # {"params": full base} (train_base) or {"lora": one adapter, no agent axis}
    opt_state: Any
    key: jax.Array  # split every update (game episodes)
    data_key: jax.Array  # fixed: the per-epoch permutations of a pairs file
    update_step: jax.Array


class DPOTrainer(NamedTuple):
    env: Any
    config: Any
    hparams: DPOHParams
    policy: LMPolicy
    base: Any  # {"model": base / reference params, "pairs": Pairs of the file or None}
    init: Any
    update: Any  # update(state, hp, base, axis_name=None)
    state_specs: Any
    num_updates: int
    tokenizer: Any
    weights: Any  # weights(state, base) -> (params, trainable or None): what acting needs
    export: Any  # export(state, path) -> path: an HF folder with adapters merged
    export_adapter: Any  # export_adapter(state, path) -> path, or None when every weight is trained
    score: Any  # score(state, base, pairs) -> (policy, reference) sequence log-probs [B, 2] (jittable)
    num_pairs: int  # pairs in the file (0 for source="game")
    base_specs: Any = None  # base_specs(fsdp) -> PartitionSpec prefix of `base` (mesh.fsdp > 1: parallel/mesh.py)


def epoch_indices(key: jax.Array, step: jax.Array, batch: int, n: int) -> jax.Array:
    """int[batch]: pairs `step * batch ...` of an endless stream of per-epoch permutations of n (batch <= n)."""
    g = step * batch + jnp.arange(batch)
    e0 = (step * batch) // n
    first = jax.random.permutation(jax.random.fold_in(key, e0), n)
    second = jax.random.permutation(jax.random.fold_in(key, e0 + 1), n)
    return jnp.where(g // n == e0, first[g % n], second[g % n])


def pair_episodes(returns: jax.Array, tokens: jax.Array, targets: jax.Array, mask: jax.Array) -> Pairs:
    """Players' transcripts of the same rows ([G, B] returns, [G, B, L] buffers) -> best vs worst, ties masked."""
    best, worst = jnp.argmax(returns, axis=0), jnp.argmin(returns, axis=0)  # [B]
    pick = lambda x, i: jnp.take_along_axis(x, i[None, :, None], axis=0)[0]  # noqa: E731
    both = lambda x: jnp.stack([pick(x, best), pick(x, worst)], axis=1)  # noqa: E731  [B, 2, L]
    m = both(mask)
    valid = (returns.max(0) > returns.min(0)) & m.any(-1).all(-1)
    return Pairs(tokens=both(tokens), targets=both(targets), mask=m, valid=valid)


def make_train(config, env=None) -> DPOTrainer:
    tokenizer, env, cfg, base_params, policy = setup_lm(config, env)
    train_base = bool(config.train_base)
    batch, num_updates = int(config.batch_size), int(config.total_updates)
    average = config.loss_type == "ipo"
    loss_type = str(config.loss_type)

    file_pairs, players, scripts = None, [], []
    if config.source == "pairs":
        file_pairs = load_pairs(config.pairs_path, tokenizer, int(config.max_length))
        n_pairs = int(file_pairs.valid.shape[0])
        if batch > n_pairs:
            raise ConfigError(f"config.batch_size: {batch} is more than the {n_pairs} pairs in {config.pairs_path}; "
                              f"use at most {n_pairs}")
        if int(config.max_length) > cfg.max_position_embeddings:
            raise ConfigError(f"config.max_length: {config.max_length} exceeds the model's "
                              f"max_position_embeddings ({cfg.max_position_embeddings})")
        file_pairs = Pairs(*(jnp.asarray(x) for x in file_pairs))
    else:
        players = parse_players(config.players)
        scripts = [make_script(config.env_name, env, noise=p) if kind == "teacher" else None for kind, p in players]
        n_pairs = 0

    def weights(state: DPOState, base) -> tuple[Any, Any]:
        """(params, adapter trainable or None) that act and score."""
        return split_weights(state.trainable, base, train_base)

    def init(key: jax.Array, hp: DPOHParams) -> DPOState:
        key, k_init, k_data = jax.random.split(key, 3)
        trainable = {"params": float32_master(base_params)} if train_base else policy.init_adapter(k_init)
        return DPOState(trainable, adamw(hp, num_updates, config)[0].init(trainable), key, k_data,
                        jnp.zeros((), jnp.int32))

    def token_lp(params, adapter, data: Pairs) -> jax.Array:
        """[B, 2, L]: log p of each scored token (0 elsewhere); adapter {"lora": ...} or None (adapters off)."""
        b, _, length = data.tokens.shape
        flat = lambda x: x.reshape(b * 2, length)  # noqa: E731
        logits = policy.logits(params, adapter, flat(data.tokens))  # [2B, L, V]
        return token_log_probs(logits, flat(data.targets), flat(data.mask)).reshape(b, 2, length)

    def seq_log_probs(params, adapter, data: Pairs) -> jax.Array:
        """[B, 2]: log p(response | prompt) of the chosen and the rejected side."""
        return sequence_log_prob(token_lp(params, adapter, data), data.mask, average=average)

    def loss_fn(trainable, base, data: Pairs, ref: jax.Array, hp: DPOHParams, axis_name):
        lp = token_lp(*split_weights(trainable, base, train_base), data)
        pol = sequence_log_prob(lp, data.mask, average=average)
        loss, metrics = dpo_loss(pol[:, 0], pol[:, 1], ref[:, 0], ref[:, 1], beta=hp.beta,
                                 label_smoothing=hp.label_smoothing, loss_type=loss_type, mask=data.valid,
                                 axis_name=axis_name)
        # RPO's extra term: token-mean NLL of the chosen responses of the pairs that count
        chosen_nll = shard_mean(-lp[:, 0], data.mask[:, 0] & data.valid[:, None], axis_name)
        metrics = {**metrics, "dpo_loss": loss, "chosen_nll": jax.lax.stop_gradient(chosen_nll)}
        loss = loss + hp.sft_coef * chosen_nll
        pol = jax.lax.stop_gradient(pol)
        metrics = {**metrics, "loss": loss,
                   "chosen_logp": shard_mean(pol[:, 0], data.valid, axis_name),
                   "rejected_logp": shard_mean(pol[:, 1], data.valid, axis_name),
                   "logp_gap": shard_mean(pol[:, 0] - pol[:, 1], data.valid, axis_name)}
        return loss, metrics

    def play_pairs(key, state: DPOState, base, n_local: int, axis_name) -> tuple[Pairs, dict]:
        """Every player on the same `n_local` env seeds; best vs worst return per (env, agent)."""
        env_ids = global_index(n_local, axis_name)
        params, trainable = weights(state, base)
        k_env, k_act = jax.random.split(key)
        outs = []
        for g, script in enumerate(scripts):
            if script is None:
                script = policy_script(env, policy, params, trainable)
            # same k_env for every player: same resets and env randomness; own actor randomness
            outs.append(collect(k_env, env, script, int(config.num_turns), env_ids, tokenizer.eos_id,
                                all_moves=True, act_key=jax.random.fold_in(k_act, g)))
        stack = lambda name: jnp.stack([getattr(o, name) for o in outs])  # noqa: E731  [G, B, ...]
        returns = stack("returns")
        pairs = pair_episodes(returns, stack("tokens"), stack("targets"), stack("mask"))
        best, worst = returns.max(0), returns.min(0)
        sums = {"pairs": pairs.valid.sum().astype(jnp.float32), "rows": jnp.float32(pairs.valid.shape[0]),
                "chosen_return": jnp.sum(jnp.where(pairs.valid, best, 0.0)),
                "rejected_return": jnp.sum(jnp.where(pairs.valid, worst, 0.0)),
                "mean_return": returns.mean(0).sum()}
        for g, (kind, p) in enumerate(players):
            sums[f"return_{g}_{kind}"] = returns[g].sum()
        return pairs, sums

    def update(state: DPOState, hp: DPOHParams, base, axis_name: str | None = None):
        key, k_play = jax.random.split(state.key)
        n_local = batch if axis_name is None else batch // jax.lax.psum(1, axis_name)
        sums = {}
        if file_pairs is None:
            data, sums = play_pairs(k_play, state, base, n_local, axis_name)
        else:
            pairs = base["pairs"]
            idx = epoch_indices(state.data_key, state.update_step, batch, pairs.valid.shape[0])
            idx = idx[global_index(n_local, axis_name)]
            data = jax.tree.map(lambda x: x[idx], pairs)
        # the reference: the base with adapters off (LoRA) or the frozen initial weights (train_base)
        ref = jax.lax.stop_gradient(seq_log_probs(base["model"], None, data))
        grads, metrics = jax.grad(loss_fn, has_aux=True)(state.trainable, base, data, ref, hp, axis_name)
        if axis_name is not None:
            grads, metrics, sums = jax.lax.psum((grads, metrics, sums), axis_name)
        if sums:
            rows, pairs_n = sums.pop("rows"), sums.pop("pairs")
            per_pair = {k: sums.pop(k) / jnp.maximum(pairs_n, 1.0) for k in ("chosen_return", "rejected_return")}
            metrics = {**metrics, **per_pair, "pair_fraction": pairs_n / rows,
                       **{k: v / rows for k, v in sums.items()}}
        tx, lr_at = adamw(hp, num_updates, config)
        updates, opt_state = tx.update(grads, state.opt_state, state.trainable)
        trainable = optax.apply_updates(state.trainable, updates)
        metrics = {**metrics, "lr": lr_at(state.update_step.astype(jnp.float32)),
                   **sequence_work(policy.cfg, data.mask, 4, axis_name)}  # a step (3 forwards) + the reference
        return DPOState(trainable, opt_state, key, state.data_key, state.update_step + 1), metrics

    def score(state: DPOState, base, data: Pairs) -> tuple[jax.Array, jax.Array]:
        return seq_log_probs(*weights(state, base), data), seq_log_probs(base["model"], None, data)

    def export(state: DPOState, path: str) -> str:
        """Write the trained model (adapters merged) as an HF folder `lm_rl` / `sft` load via model.checkpoint."""
        return policy.export(path, *weights(jax.device_get(state), {"model": base_params}))

    def export_adapter(state: DPOState, path: str) -> str | None:
        """The LoRA adapter as a PEFT folder (adapter_config.json + adapter_model.safetensors); None if train_base."""
        if train_base:
            return None
        return policy.export_adapter(path, state.trainable, base_model_name_or_path=config.model.checkpoint)

    state_specs = DPOState(trainable=P(), opt_state=P(), key=P(), data_key=P(), update_step=P())
    base_arg = {"model": base_params, "pairs": file_pairs}  # replicated arguments of the compiled chunk
    return DPOTrainer(env, config, DPOHParams.from_config(config), policy, base_arg, init, update, state_specs,
                      num_updates, tokenizer, weights, export, export_adapter, score, n_pairs,
                      functools.partial(base_specs, cfg, data="pairs"))


def model_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "model")


def adapter_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "adapter")
