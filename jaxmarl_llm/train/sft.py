"""SFT: next-token loss on transcripts a scripted teacher plays, on a JSONL file, or on the policy's own best episodes.

    trainer = make_train(config)                 # same interface as lm_rl / mlp_ppo
    state = trainer.init(key, trainer.hparams)
    state, metrics = trainer.update(state, trainer.hparams, trainer.base)
    trainer.export(state, "<out_dir>/model")     # HF folder; RL starts from it via model.checkpoint

`config.source` says where each update's `num_envs` rows come from:

  "teacher"  (default) the scripted teacher plays the real env inside the compiled update (below).
  "file"     a local JSONL of transcripts (`load_transcripts`): {"prompt", "completion"} per line, or
             {"turns": [context, move, context, move, ...]} for a multi-turn game. Tokenized once at
             start-up into [rows, max_length] buffers; each update draws `num_envs` rows (with
             replacement) from the key in the runner state, so resume stays exact.
  "policy"   rejection-sampling fine-tuning / expert iteration (ReST, STaR): the current model plays
             `num_envs` episodes at `sampling.temperature`, and each (episode, seat) whose return is at
             least `min_return` becomes a row; the rest get zero weight. When no row is kept anywhere the
             update leaves the weights and the optimizer state alone (Adam's moments would otherwise
             still move the weights on a zero gradient).

One teacher update:
  1. `num_envs` fresh episodes of the teacher (`data/teachers.py`) on the real env,
     `lax.scan` over `num_turns` turns. Data is generated per update inside the
     compiled step, not once at start: it costs a few env steps (no model), every
     update sees new secrets (no memorising a fixed set, no dataset on disk), and
     the data stream is a function of the key in the runner state, so checkpoints
     and resume stay exact.
  2. Each agent's final transcript is one sequence. Targets are that agent's own
     teacher moves, plus an eos after each (the env drops eos from transcripts, so
     the target at the first feedback position is swapped for eos: the sampler's
     stop token is learnt in the same pass, with inputs exactly as RL shows them).
  3. One AdamW step (warmup + cosine) on `algos.sft.sft_loss`.

`target_agents` (teacher / policy rows): only these seats' rows are trained on, e.g. (1,) teaches twenty
questions' answerer alone while the teacher's questioner still plays its side of every game. The other
seats' rows are dropped before the forward (a static gather), so they cost nothing.

Metrics: `move_accuracy` (a move counts when greedy decoding under teacher forcing writes all of it and
its eos) and, in games with several seats (teacher or policy rows), `move_accuracy_<agent>` per trained
seat: one model learning two roles (twenty questions' questioner and answerer) learns them at different speeds.

`train_base=True` trains every weight of the base (a from-scratch tiny model:
LoRA alone cannot teach a random model a format); otherwise only LoRA adapters
over a frozen base (usually a checkpoint), merged into the base on export.
"""

from __future__ import annotations

import functools
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.algos.sft import select_transcripts, sft_loss
from jaxmarl_llm.data.collect import Transcripts, collect, policy_script
from jaxmarl_llm.data.files import load_transcripts
from jaxmarl_llm.data.teachers import make_script
from jaxmarl_llm.parallel.mesh import global_index
from jaxmarl_llm.policies.lm_policy import LMPolicy
from jaxmarl_llm.train.config import ConfigError
from jaxmarl_llm.train.lm.setup import setup_lm
from jaxmarl_llm.train.lm.throughput import sequence_work
from jaxmarl_llm.train.lm.weights import base_specs, float32_master, split_weights
from jaxmarl_llm.train.optim import adamw


class SFTHParams(NamedTuple):
    lr: jax.Array
    max_grad_norm: jax.Array
    weight_decay: jax.Array
    min_return: jax.Array  # source="policy": a transcript is kept when its return >= this (sweepable)

    @classmethod
    def from_config(cls, config) -> "SFTHParams":
        return cls(*(jnp.asarray(config[name], jnp.float32) for name in cls._fields))


@struct.dataclass
class SFTState:
    trainable: Any  # {"params": full base} (train_base) or {"lora": one adapter, no agent axis}
    opt_state: Any
    key: jax.Array
    update_step: jax.Array


class SFTTrainer(NamedTuple):
    env: Any
    config: Any
    hparams: SFTHParams
    policy: LMPolicy  # cfg, LoRA shape and sampling (source="policy" and evaluation)
    # {"model": frozen base params, or {} when the base itself is trained (it lives in the state),
    #  "rows": the file's Transcripts (source="file") or None}: replicated arguments of the compiled chunk
    base: Any
    init: Any
    update: Any  # update(state, hp, base, axis_name=None)
    state_specs: Any
    num_updates: int
    tokenizer: Any
    weights: Any  # weights(state, base) -> (base params, trainable or None): what acting needs
    export: Any  # export(state, path) -> path: an HF folder with adapters merged
    num_rows: int  # rows in the file (0 unless source="file")
    base_specs: Any = None  # base_specs(fsdp) -> PartitionSpec prefix of `base` (mesh.fsdp > 1: parallel/mesh.py)


def shard_rate(hit: jax.Array, where: jax.Array, axis_name: str | None) -> jax.Array:
    """sum(hit & where) over this shard / the count of `where` over all shards: psum of it is the global rate."""
    count = where.sum().astype(jnp.float32)
    if axis_name is not None:
        count = jax.lax.psum(count, axis_name)
    return jnp.sum(hit & where) / jnp.maximum(count, 1.0)


def seat_rows(num_envs: int, num_agents: int, seats: tuple[int, ...]) -> np.ndarray:
    """int32 [num_envs * len(seats)]: the rows of `seats` among `collect`'s (env, seat) rows (row = env * A + seat),
    env-major, in the order `seats` lists them."""
    return np.asarray([e * num_agents + s for e in range(num_envs) for s in seats], np.int32)


def take_rows(data: Transcripts, rows: np.ndarray) -> Transcripts:
    """The listed rows [B'] of every field (a static gather: fewer rows in the forward)."""
    return jax.tree.map(lambda x: x[rows], data)


def target_seats(config, env) -> tuple[int, ...]:
    """`config.target_agents` checked against the env's seats; () means every seat."""
    seats = tuple(int(a) for a in config.target_agents)
    bad = [a for a in seats if a >= env.num_agents]
    if bad:
        raise ConfigError(f"config.target_agents: agent {bad[0]} does not exist ({env.num_agents} agents: "
                          f"{', '.join(env.agents)})")
    return seats or tuple(range(env.num_agents))


def keep_episodes(data: Transcripts, keep: jax.Array) -> Transcripts:
    """Rows with keep [B] False lose every target (zero weight in the loss); shapes stay static."""
    return data._replace(mask=data.mask & keep[:, None], turn_mask=data.turn_mask & keep[:, None, None])


def make_train(config, env=None) -> SFTTrainer:
    tokenizer, env, cfg, base_params, policy = setup_lm(config, env)
    source = str(config.source)
    script, file_rows = None, None
    if source == "teacher":
        try:
            script = make_script(config.env_name, env, noise=float(config.script_noise), teacher=config.teacher,
                                 **config.script_kwargs)
        except ValueError as err:
            raise ConfigError(f"config.script_kwargs: {err}") from None
    if source == "file":
        length = int(config.max_length) or env.capacity
        what = "config.max_length" if config.max_length else "the env's capacity (config.max_length=0)"
        if length > cfg.max_position_embeddings:
            raise ConfigError(f"config.max_length: {what} is {length}, more than the model's max_position_embeddings "
                              f"({cfg.max_position_embeddings})")
        file_rows = Transcripts(*(jnp.asarray(x) for x in load_transcripts(config.data_path, tokenizer, length, what)))
    train_base = bool(config.train_base)
    num_envs, num_turns = config.num_envs, config.num_turns
    num_updates = int(config.total_episodes // num_envs)
    seats = target_seats(config, env)  # the seats whose rows are trained on (played rows), in row order
    # multi-seat games played by a teacher or the policy: per-seat move accuracy (e.g. questioner vs answerer)
    seat_names = tuple(env.agents[a] for a in seats) if source != "file" and env.num_agents > 1 else ()

    def weights(state: SFTState, base) -> tuple[Any, Any]:
        """(base params, adapter trainable or None) that act and score."""
        return split_weights(state.trainable, base, train_base)

    def init(key: jax.Array, hp: SFTHParams) -> SFTState:
        key, k_init = jax.random.split(key)
        trainable = {"params": float32_master(base_params)} if train_base else policy.init_adapter(k_init)
        return SFTState(trainable, adamw(hp, num_updates, config)[0].init(trainable), key, jnp.zeros((), jnp.int32))

    def loss_fn(trainable, base, data: Transcripts, axis_name):
        logits = policy.logits(*split_weights(trainable, base, train_base), data.tokens)  # [B, L, V]
        loss, metrics = sft_loss(logits, data.targets, data.mask, axis_name=axis_name)
        # a move is right when every one of its tokens (and its eos) is the argmax: greedy play under teacher forcing
        wrong = jnp.pad(jnp.argmax(logits[:, :-1], -1) != data.targets[:, 1:], ((0, 0), (1, 0)))  # [B, L]
        moves = data.turn_mask.any(-1)  # [B, T]
        move_ok = ~jnp.any(data.turn_mask & wrong[:, None, :], axis=-1)
        metrics = {**metrics, "move_accuracy": shard_rate(move_ok, moves, axis_name)}
        for i, name in enumerate(seat_names):  # rows are (env, trained seat) pairs, seat-minor: each seat's own moves
            mine = (jnp.arange(moves.shape[0]) % len(seat_names) == i)[:, None]
            metrics[f"move_accuracy_{name}"] = shard_rate(move_ok, moves & mine, axis_name)
        return loss, metrics

    def batch(key: jax.Array, state: SFTState, hp: SFTHParams, base, n_local: int, axis_name):
        """(Transcripts, sums): this shard's rows of one update (`n_local` envs or file rows) and the row sums
        its metrics need."""
        env_ids = global_index(n_local, axis_name)
        if source == "file":
            rows = base["rows"]
            idx = jax.random.randint(key, (num_envs,), 0, rows.mask.shape[0])[env_ids]  # one draw, split by shard
            return jax.tree.map(lambda x: x[idx], rows), {}
        rows = seat_rows(n_local, env.num_agents, seats)  # the trained seats' rows
        if not env.appends_actions:  # one row per turn (data/collect.py turn_rows): those rows of every turn
            rows = np.concatenate([t * n_local * env.num_agents + rows for t in range(num_turns)])
        if source == "teacher":
            data = take_rows(collect(key, env, script, num_turns, env_ids, tokenizer.eos_id), rows)
            return data, {"teacher_success": data.solved.sum()}
        params, trainable = weights(state, base)
        played = take_rows(collect(key, env, policy_script(env, policy, params, trainable), num_turns, env_ids,
                                   tokenizer.eos_id, all_moves=True), rows)
        keep = select_transcripts(played.returns, threshold=hp.min_return)  # [B] (env, seat) rows
        sums = {"kept_fraction": keep.sum().astype(jnp.float32), "episode_return": played.returns.sum(),
                "success_rate": played.solved.sum()}
        return keep_episodes(played, keep), sums

    def update(state: SFTState, hp: SFTHParams, base, axis_name: str | None = None):
        key, k_data = jax.random.split(state.key)
        n_local = num_envs if axis_name is None else num_envs // jax.lax.psum(1, axis_name)
        data, sums = batch(k_data, state, hp, base, n_local, axis_name)
        grads, metrics = jax.grad(loss_fn, has_aux=True)(state.trainable, base, data, axis_name)
        sums = {**sums, "target_tokens": data.mask.sum().astype(jnp.float32), "rows": jnp.float32(data.mask.shape[0])}
        if axis_name is not None:
            grads, metrics, sums = jax.lax.psum((grads, metrics, sums), axis_name)
        rows = sums.pop("rows")
        extra = {name: v / rows for name, v in sums.items()}
        tx, lr_at = adamw(hp, num_updates, config)
        updates, opt_state = tx.update(grads, state.opt_state, state.trainable)
        trainable = optax.apply_updates(state.trainable, updates)
        if source == "policy":  # nothing kept anywhere: no step (Adam would still move on its old moments)
            step = sums["kept_fraction"] > 0
            trainable, opt_state = jax.tree.map(lambda new, old: jnp.where(step, new, old),
                                                (trainable, opt_state), (state.trainable, state.opt_state))
        metrics = {**metrics, **extra, "lr": lr_at(state.update_step.astype(jnp.float32)),
                   **sequence_work(policy.cfg, data.mask, 3, axis_name)}  # tokens/s and MFU (run/runner.py)
        return SFTState(trainable, opt_state, key, state.update_step + 1), metrics

    def export(state: SFTState, path: str) -> str:
        """Write the trained model (adapters merged) as an HF folder `lm_rl` loads via model.checkpoint."""
        return policy.export(path, *weights(jax.device_get(state), {"model": base_params}))

    state_specs = SFTState(trainable=P(), opt_state=P(), key=P(), update_step=P())
    # a trained base lives in the state, not in the argument
    base_arg = {"model": {} if train_base else base_params, "rows": file_rows}
    num_rows = 0 if file_rows is None else int(file_rows.mask.shape[0])
    return SFTTrainer(env, config, SFTHParams.from_config(config), policy, base_arg, init, update, state_specs,
                      num_updates, tokenizer, weights, export, num_rows, functools.partial(base_specs, cfg))


def model_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "model")
