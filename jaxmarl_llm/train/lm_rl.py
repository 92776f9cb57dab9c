"""LM agents playing token games: one compiled rollout + advantages + update (PPO, GRPO, RLOO).

    trainer = make_train(config)                 # same interface as mlp_ppo.make_train
    state = trainer.init(key, trainer.hparams)
    state, metrics = trainer.update(state, trainer.hparams, trainer.base)

One update (`update` below, in this order):
  1. Reset `num_envs` games in groups of `group_size` that share a seed (same secret / problem), so GRPO and
     RLOO can compare samples; decide who sits where (train/lm/seats.py).
  2. Rollout (train/lm/rollout.py): `lax.scan` over turns; every LM seat generates its reply with the
     KV-cache sampler from its own transcript, the env appends actions and feedback.
  3. Advantages by algorithm (algos/lm_objective.py `ALGORITHMS`): PPO = GAE over each seat's own turns
     (or over generated tokens, `credit="token"`) with a value head per seat or the MAPPO critic;
     GRPO / RLOO = group baselines of episode returns, every token of an episode gets its advantage.
  4. `update_epochs` x `num_minibatches` gradient steps on the adapters and value head (train/lm/scoring.py
     scores each minibatch under the current policy); the base model is frozen and passed as an argument
     (with mesh.fsdp > 1 sharded over the fsdp devices and gathered one layer at a time: parallel/mesh.py).

Episodes run to the end inside each update (num_turns >= the game's turn limit): no bootstrapping across
updates. Settings fixed before compiling travel in one `Plan` (train/lm/plan.py). The KL reference is the
same base with adapters off: no weight copy. docs/forking.md walks this file for an ablation.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.algos import value_norm
from jaxmarl_llm.algos.lm_objective import ALGORITHMS, token_advantages
from jaxmarl_llm.models import fsdp
from jaxmarl_llm.policies import central_critic, transcripts
from jaxmarl_llm.policies.lm_policy import LMPolicy, model_weights
from jaxmarl_llm.evaluation import play
from jaxmarl_llm.train.lm import seats as lm_seats
from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.train.lm.plan import LMHParams, Plan
from jaxmarl_llm.train.lm.rollout import episode_metrics, rollout
from jaxmarl_llm.train.lm.scoring import episode_seqs, minibatch_grads, token_values
from jaxmarl_llm.train.lm.setup import setup_lm
from jaxmarl_llm.parallel.mesh import global_index
from jaxmarl_llm.train.optim import linear_decay, lora_plus, optimizer


@struct.dataclass
class LMRunnerState:
    trainable: Any  # {"lora": ..., "value_head": ...}, leaves [S, ...] (S adapter slots); MAPPO adds "critic",
    # train_base adds "base" (the model's own weights, no slot axis)
    opt_state: Any
    key: jax.Array
    update_step: jax.Array
    pool: Any = None  # opponent snapshots: lora leaves [P, ...] (None without a pool)
    algo_state: Any = None  # a stateful estimator's state (RAE: per-role baselines [A]); None for the others
    value_norm: Any = None  # the critic targets' running statistics (algos/value_norm.py); None when off


class LMTrainer(NamedTuple):
    env: Any
    config: Any
    hparams: LMHParams
    policy: LMPolicy
    base: Any  # frozen base params (passed to update as an argument, never closed over)
    init: Any  # init(key, hp) -> LMRunnerState
    update: Any  # update(state, hp, base, axis_name=None) -> (state, metrics)
    state_specs: Any
    num_updates: int
    tokenizer: Any
    slot_of_agent: np.ndarray  # [A] int: the adapter slot each agent acts with
    agent_scale: jax.Array  # [A] float: 0 for frozen agents (adapters off), else 1
    rollout: Any = None  # rollout(key, base, trainable, pool, env_ids) -> (Turns, Seats, final tokens)
    plan: Plan | None = None
    base_specs: Any = None  # base_specs(fsdp) -> PartitionSpec per base leaf (mesh.fsdp > 1: parallel/mesh.py)


def make_plan(config, env, pad_id: int, policy: LMPolicy) -> Plan:
    """Every static setting of the run, checked against the env (ConfigError names the key)."""
    scripted = lm_seats.parse_agent_map(config.scripted_agents)
    lm_seats.check_seats(env, config, scripted, int(config.opponent_pool.size))
    seats = lm_seats.seat_layout(config, env.num_agents, scripted)
    num_lm = len(seats["lm_agents"])
    # token games: keep each seat's KV cache across turns and score an episode in one forward
    incremental = bool(config.rollout.incremental) and bool(getattr(env, "appends_actions", False)) and num_lm > 0
    if policy.actions == "scored":  # several-token candidates are scored by re-reading each turn's prompt
        incremental = False
    m = env.max_action_tokens
    plan = Plan(
        algo=config.algo, num_agents=env.num_agents, num_envs=config.num_envs, group_size=config.group_size,
        num_turns=config.num_turns, update_epochs=config.update_epochs, num_minibatches=config.num_minibatches,
        num_microbatches=int(config.num_microbatches), max_action_tokens=m, pad_id=pad_id, actions=policy.actions,
        **seats,
        incremental=incremental, movers=min(env.max_movers or num_lm, num_lm), chunk=int(config.rollout.chunk),
        widths=transcripts.score_widths(env.capacity + m, config.rollout.min_score_width) if incremental else (),
        min_score_width=config.rollout.min_score_width, central=config.critic.kind in ("mappo", "world_state"),
        world_critic=_world_size(env) if config.critic.kind == "world_state" else 0,
        critic_hidden=config.critic.hidden, token_credit=config.algo == "ppo" and config.credit == "token",
        clip_value=bool(config.clip_value), kl_estimator=config.kl_estimator,
        use_kl=float(config.kl_coef) != 0.0 or float(config.guard.max_kl_ref) > 0,  # the KL guard reads kl_ref
        grpo_normalize_std=bool(config.grpo_normalize_std), grpo_aggregation=config.grpo_aggregation,
        anneal_lr=bool(config.anneal_lr), num_updates=max(int(config.total_episodes // config.num_envs), 1),
        critic_lr=float(config.critic.lr) > 0.0, value_norm=bool(config.critic.value_norm),
        lora_lr_ratio=float(config.lora.lr_ratio), train_base=bool(config.train_base),
        eval_every=int(config.in_graph_eval.every), eval_episodes=int(config.in_graph_eval.episodes),
        eval_opponents=tuple(config.in_graph_eval.opponents), eval_seed=int(config.in_graph_eval.seed),
    )
    _check_minibatches(plan)
    return plan


def make_train(config, env=None) -> LMTrainer:
    setup = setup_lm(config, env)
    plan = make_plan(config, setup.env, setup.tokenizer.pad_id, setup.policy)
    policy = setup.policy

    def init(key: jax.Array, hp: LMHParams) -> LMRunnerState:
        key, k_init = jax.random.split(key)
        trainable = policy.init_trainable(k_init, num_agents=plan.num_slots)
        if plan.train_base:  # every weight of the model learns (a tiny model from scratch); base stays the reference
            trainable["base"] = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), setup.base)
        if plan.central:
            trainable["critic"] = central_critic.critic_init(
                jax.random.fold_in(k_init, 7), plan.num_agents, plan.world_critic or policy.cfg.hidden_size,
                plan.critic_hidden, per_seat=not plan.world_critic)
        pool = lm_seats.init_pool(plan, trainable["lora"])
        init_state = ALGORITHMS[plan.algo].init_state
        algo_state = None if init_state is None else init_state(plan.num_agents)
        return LMRunnerState(trainable, make_tx(plan, hp).init(trainable), key, jnp.zeros((), jnp.int32), pool,
                             algo_state, value_norm.init() if plan.value_norm else None)

    stateful = ALGORITHMS[plan.algo].init_state is not None
    state_specs = LMRunnerState(trainable=P(), opt_state=P(), key=P(), update_step=P(),
                                pool=P() if plan.pool_size else None, algo_state=P() if stateful else None,
                                value_norm=P() if plan.value_norm else None)
    return LMTrainer(
        setup.env, config, LMHParams.from_config(config), policy, setup.base, init,
        functools.partial(update, plan, setup.env, policy), state_specs, int(config.total_episodes // plan.num_envs),
        setup.tokenizer, np.asarray(plan.slot_of_agent), plan.scale(),
        functools.partial(rollout, plan, setup.env, policy), plan, functools.partial(fsdp.param_specs, policy.cfg))


def make_tx(plan: Plan, hp: LMHParams) -> optax.GradientTransformation:
    """Adam on the adapters and value head (and MAPPO critic) only; lr constant or falling linearly to 0.

    With `critic.lr` the critic (central critic or value heads) has its own Adam, lr and gradient clip: a critic
    that starts far from the returns (tens, from 0) need not wait on a step size chosen for the policy."""
    steps_per_update = plan.update_epochs * plan.num_minibatches

    def adam(lr):
        return optimizer(linear_decay(lr, steps_per_update, plan.num_updates, True) if plan.anneal_lr else lr,
                         hp.max_grad_norm)

    policy_tx = lora_plus(adam(hp.lr), plan.lora_lr_ratio)  # LoRA+: B steps lora.lr_ratio x the lr
    if not plan.critic_lr:
        return policy_tx
    return optax.multi_transform({"policy": policy_tx, "critic": adam(hp.critic_lr)}, _critic_labels)


def _critic_labels(trainable) -> dict:
    """"critic" for the central critic and the value heads, "policy" for the adapters."""
    return {k: jax.tree.map(lambda _, k=k: "critic" if k in ("critic", "value_head") else "policy", v)
            for k, v in trainable.items()}


def update(plan: Plan, env, policy: LMPolicy, state: LMRunnerState, hp: LMHParams, base,
           axis_name: str | None = None):
    """One update: rollout -> advantages -> epochs of minibatch steps. Arrays stay [T, N, A, ...]."""
    key, k_roll, k_epochs = jax.random.split(state.key, 3)
    n_local = plan.num_envs if axis_name is None else plan.num_envs // jax.lax.psum(1, axis_name)
    if plan.incremental and n_local % (plan.num_minibatches * plan.num_microbatches):
        raise ConfigError(f"config.num_minibatches x num_microbatches = {plan.num_minibatches} x "
                          f"{plan.num_microbatches} does not divide the {n_local} envs of a device; with "
                          "incremental rollouts a minibatch is a set of whole episodes")
    env_ids = global_index(n_local, axis_name)

    # 1-2. play: seats are drawn inside the rollout; only the seats that learn are kept for the loss
    turns, seats, final_tokens = rollout(plan, env, policy, k_roll, base, state.trainable, state.pool, env_ids)
    train_turns = lm_seats.loss_seats(plan, turns, seats.learns)  # [T, N, A_l, ...]
    seqs = episode_seqs(plan, final_tokens, train_turns, seats.learns) if plan.incremental else None  # [N, A_l, W]

    # 3. advantages [T, N, A_l] (token credit: [T, N, A_l, M]) and value targets
    algo_state, vn = state.algo_state, state.value_norm
    if vn is not None:  # the critic speaks in normalised units: GAE reads returns' units
        turns = turns._replace(value=value_norm.denormalize(vn, turns.value) * turns.acted)
    if plan.token_credit:
        values = token_values(plan, policy, base, state.trainable, train_turns, seqs)
        adv, ret = token_advantages(train_turns.reward, values, train_turns.token_mask(), hp)
        train_turns = train_turns._replace(value=values)  # what value clipping clips around
    else:
        algo, algo_kw = ALGORITHMS[plan.algo], dict(group_size=plan.group_size, normalize_std=plan.grpo_normalize_std)
        if algo.init_state is None:
            adv, ret = algo.advantages(turns.reward, turns.value, turns.acted, hp, **algo_kw)
        else:
            adv, ret, algo_state = algo.advantages(turns.reward, turns.value, turns.acted, hp, **algo_kw,
                                                   state=state.algo_state, learns=seats.learns, axis_name=axis_name)
        adv, ret = lm_seats.loss_view(plan, adv, seats.learns), lm_seats.loss_view(plan, ret, seats.learns)
    if vn is not None:  # the value loss regresses on normalised returns (the statistics include this batch)
        vn = value_norm.update(vn, ret, train_turns.acts, axis_name)
        ret = value_norm.normalize(vn, ret)
        train_turns = train_turns._replace(value=value_norm.normalize(vn, lm_seats.loss_view(
            plan, turns.value, seats.learns)) * train_turns.acts)  # what value clipping clips around

    # 4. epochs of minibatch gradient steps
    tx = make_tx(plan, hp)

    def minibatch_step(carry, batch):
        trainable, opt_state = carry
        mb, mb_adv, mb_ret, mb_seqs = batch
        grads, metrics = minibatch_grads(trainable, plan, policy, base, mb, mb_adv, mb_ret, hp, axis_name, mb_seqs)
        if axis_name is not None:
            grads, metrics = jax.lax.psum((grads, metrics), axis_name)
        metrics = {**metrics, "grad_norm": optax.tree.norm(grads)}  # before clipping (max_grad_norm)
        updates, opt_state = tx.update(grads, opt_state, trainable)
        return (optax.apply_updates(trainable, updates), opt_state), metrics

    data = (train_turns._replace(info={}), adv, ret)

    def epoch(carry, epoch_key):
        if plan.incremental:  # a minibatch is a set of whole episodes (each is scored in one forward)
            order = jnp.arange(n_local) if plan.num_minibatches == 1 else jax.random.permutation(
                jax.random.fold_in(epoch_key, env_ids[0]), n_local)
            batches = (*_episode_minibatches(data, order, plan.num_minibatches),
                       seqs[order].reshape((plan.num_minibatches, n_local // plan.num_minibatches) + seqs.shape[1:]))
        else:  # every env shuffles its own turns; minibatch k takes slice k of each env's order
            batches = (*_turn_minibatches(data, epoch_key, env_ids, plan.num_minibatches), None)
        return jax.lax.scan(minibatch_step, carry, batches)

    (trainable, opt_state), loss_metrics = jax.lax.scan(
        epoch, (state.trainable, state.opt_state), jax.random.split(k_epochs, plan.update_epochs))
    metrics = {k: v.mean() for k, v in loss_metrics.items()}
    if "scored" in loss_metrics:  # minibatches with all-zero advantages were skipped: entropy over those that ran
        ran = loss_metrics.pop("scored")
        metrics["entropy"] = (loss_metrics["entropy"] * ran).sum() / jnp.maximum(ran.sum(), 1.0)
        metrics["scored"] = ran.mean()
    metrics["zero_advantage_share"] = zero_advantage_share(adv, train_turns.acts, axis_name)
    metrics.update(episode_metrics(turns, seats.learns, axis_name))
    if algo_state is not None:  # a stateful estimator's per-role state (RAE: each role's running mean return)
        metrics.update({f"baseline_agent{a}": algo_state[a] for a in range(plan.num_agents)})
    step = state.update_step + 1
    if plan.eval_every:
        metrics.update(in_graph_eval(plan, env, policy, base, trainable, step))
    pool = lm_seats.refresh_pool(plan, state.pool, trainable["lora"], step)
    return LMRunnerState(trainable, opt_state, key, step, pool, algo_state, vn), metrics


def zero_advantage_share(adv: jax.Array, acts: jax.Array, axis_name: str | None) -> jax.Array:
    """The share of learner episodes whose every advantage is 0 (a GRPO group of equal returns): they teach
    nothing, and a share that climbs toward 1 is a run that stopped learning. adv [T, N, A_l(, M)], acts [T, N, A_l]."""
    signal = jnp.abs(adv).reshape(acts.shape + (-1,)).sum(-1) * acts  # [T, N, A_l]
    played = acts.any(0)  # [N, A_l]
    zero = played & (signal.sum(0) == 0)
    counts = jnp.stack([zero.sum(), played.sum()]).astype(jnp.float32)
    if axis_name is not None:
        counts = jax.lax.psum(counts, axis_name)
    return counts[0] / jnp.maximum(counts[1], 1.0)


def in_graph_eval(plan: Plan, env, policy: LMPolicy, base, trainable, step: jax.Array) -> dict[str, jax.Array]:
    """{"eval/<opponent>_<win|draw|loss>", per seat too}: greedy games of the updated adapters against the game's
    built-in players after update 1 and every `plan.eval_every` updates; NaN (not played) in between. Each seat
    plays with its own adapter slot (frozen seats: the bare base). Every device plays the same games."""
    versus = play.versus_builtins(env, policy, plan.num_turns, plan.eval_opponents, plan.eval_episodes, plan.eval_seed)
    seat_loras = tuple(None if plan.agent_scale[a] == 0.0 else jax.tree.map(lambda x, s=s: x[s], trainable["lora"])
                       for a, s in enumerate(plan.slot_of_agent))

    def games():
        return {f"eval/{k}": v for k, v in versus(model_weights(trainable, base), seat_loras).items()}

    def skipped():
        return jax.tree.map(lambda x: jnp.full(x.shape, jnp.nan, x.dtype), jax.eval_shape(games))

    return jax.lax.cond((step % plan.eval_every == 0) | (step == 1), games, skipped)


def _episode_minibatches(tree, order: jax.Array, num_minibatches: int):
    """[T, n, ...] leaves -> [mb, T, n/mb, ...]: envs in `order`, split into minibatches of whole episodes."""
    def split(x):
        x = x[:, order].reshape((x.shape[0], num_minibatches, x.shape[1] // num_minibatches) + x.shape[2:])
        return jnp.moveaxis(x, 1, 0)

    return jax.tree.map(split, tree)


def _turn_minibatches(tree, key: jax.Array, env_ids: jax.Array, num_minibatches: int):
    """[T, n, ...] leaves -> [mb, T/mb, n, ...]: each env's turns shuffled by its own permutation."""
    if num_minibatches == 1:  # one minibatch: order is irrelevant, and turn slices stay whole turns (skippable)
        return jax.tree.map(lambda x: x[None], tree)
    num_turns = jax.tree.leaves(tree)[0].shape[0]
    perms = jax.vmap(lambda i: jax.random.permutation(jax.random.fold_in(key, i), num_turns))(env_ids)  # [n, T]
    idx = perms.T  # [T, n]

    def split(x):
        x = jnp.take_along_axis(x, idx.reshape(idx.shape + (1,) * (x.ndim - 2)), axis=0)
        return x.reshape((num_minibatches, num_turns // num_minibatches) + x.shape[1:])

    return jax.tree.map(split, tree)


def _world_size(env) -> int:
    """The length of env.world_state (the world-state critic's input)."""
    def world(key):
        return env.world_state(env.reset(key)[1])

    return int(jax.eval_shape(world, jax.random.PRNGKey(0)).shape[-1])


def _check_minibatches(plan: Plan) -> None:
    """Minibatch settings that cannot split this run's episodes (or turns) fail before compiling."""
    mb, micro, n_local = plan.num_minibatches, plan.num_microbatches, plan.num_envs
    if plan.incremental and n_local % mb:
        raise ConfigError(f"config.num_minibatches: {mb} must divide the envs of each device (num_envs={n_local}): "
                          "with incremental rollouts a minibatch is a set of whole episodes")
    if micro > 1 and (not plan.incremental or n_local % (mb * micro)):
        raise ConfigError(f"config.num_microbatches: {micro} needs an incremental rollout (a token game) and must "
                          f"divide each minibatch's envs (num_envs={n_local} / num_minibatches={mb} per device)")
    if not plan.incremental and plan.num_turns % mb:
        raise ConfigError(f"config.num_minibatches: {mb} must divide num_turns ({plan.num_turns}): each minibatch "
                          "takes a slice of every episode's turns")
