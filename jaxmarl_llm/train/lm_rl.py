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

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.algos import value_norm
from jaxmarl_llm.algos.lm_objective import ALGORITHMS, EstimatorInput, registry_key
from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.evaluation import cross_play, exploitability, per_game, play, tic_tac_toe_exact
from jaxmarl_llm.models import fsdp
from jaxmarl_llm.parallel.mesh import global_index
from jaxmarl_llm.policies import central_critic, transcripts
from jaxmarl_llm.policies.lm_policy import LMPolicy, model_weights
from jaxmarl_llm.tokenizers import token_set
from jaxmarl_llm.train.config.lm_rl import parse_agent_map
from jaxmarl_llm.train.lm import memory
from jaxmarl_llm.train.lm import seats as lm_seats
from jaxmarl_llm.train.lm.episode_sample import sample_episodes
from jaxmarl_llm.train.lm.paths import RolloutPath, rollout_path
from jaxmarl_llm.train.lm.plan import LMHParams, Plan
from jaxmarl_llm.train.lm.rollout import episode_metrics, rollout
from jaxmarl_llm.train.lm.scoring import token_values
from jaxmarl_llm.train.lm.setup import setup_lm, with_remat
from jaxmarl_llm.train.lm.step_bound import CRITIC_KEYS, bounded_step
from jaxmarl_llm.train.lm.throughput import update_work
from jaxmarl_llm.train.lm.weights import float32_master
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
    average: Any = None  # poker: the evaluated iterates' reach-weighted policy sum [I + 1, A]; None when off


class LMTrainer(NamedTuple):
    env: Any
    config: Any
    plan: Plan  # every static setting of the run
    hparams: LMHParams
    policy: LMPolicy
    tokenizer: Any
    base: Any  # frozen base params (passed to update as an argument, never closed over)
    init: Any  # init(key, hp) -> LMRunnerState
    update: Any  # update(state, hp, base, axis_name=None) -> (state, metrics)
    rollout: Any  # rollout(key, base, trainable, pool, env_ids) -> (Turns, Seats, final tokens)
    state_specs: Any  # PartitionSpec prefix of LMRunnerState for shard_map
    base_specs: Any  # base_specs(fsdp) -> PartitionSpec per base leaf (mesh.fsdp > 1: parallel/mesh.py)

    @property
    def num_updates(self) -> int:
        return self.plan.num_updates

    @property
    def slot_of_agent(self) -> np.ndarray:  # [A] int: the adapter slot each agent acts with
        return np.asarray(self.plan.slot_of_agent)

    @property
    def agent_scale(self) -> jax.Array:  # [A] float: 0 for frozen agents (adapters off), else 1
        return self.plan.scale()


def make_plan(config, env, tokenizer, policy: LMPolicy) -> Plan:
    """Every static setting of the run, checked against the env (ConfigError names the key)."""
    scripted = parse_agent_map(config.scripted_agents)
    lm_seats.check_seats(env, config, scripted, int(config.opponent_pool.size))
    seats = lm_seats.seat_layout(config, env.num_agents, scripted)
    num_lm = len(seats["lm_agents"])
    # token games: keep each seat's KV cache across turns and score an episode in one forward
    incremental = bool(config.rollout.incremental) and bool(getattr(env, "appends_actions", False)) and num_lm > 0
    if policy.actions == "scored":  # several-token candidates are scored by re-reading each turn's prompt
        incremental = False
    m = env.max_action_tokens
    if config.in_graph_eval.get("average", "none") != "none" and not exploitability.has_infosets(env):
        raise ConfigError(f"config.in_graph_eval.average: {config.env_name} has no tree of information sets to "
                          "average a policy over (the poker games have); set it to 'none'")
    if config.in_graph_eval.get("exact", False) and not tic_tac_toe_exact.applies(env):
        raise ConfigError(f"config.in_graph_eval.exact: {config.env_name} is not tic-tac-toe with position-only "
                          "observations (env_kwargs.history=False); set it to False")
    if config.in_graph_eval.get("cross_play", 0) and (env.num_agents != 2 or hasattr(env, "games")):
        raise ConfigError(f"config.in_graph_eval.cross_play: {config.env_name} is not one two-seat game; cross-play "
                          "rates players of one two-seat game (set it to 0)")
    entropy_tokens = token_set(config.entropy_tokens, tokenizer)
    if config.entropy_tokens != "all" and not entropy_tokens:
        raise ConfigError(f"config.entropy_tokens: the tokenizer has no {config.entropy_tokens} tokens; set 'all'")
    plan = Plan(
        algo=registry_key(config.algo, config.credit), num_agents=env.num_agents, num_envs=config.num_envs,
        group_size=config.group_size, num_turns=config.num_turns, update_epochs=config.update_epochs,
        num_minibatches=config.num_minibatches,
        num_microbatches=1 if config.num_microbatches == "auto" else int(config.num_microbatches),
        max_action_tokens=m, pad_id=tokenizer.pad_id, actions=policy.actions, entropy_tokens=entropy_tokens,
        **seats,
        incremental=incremental, movers=min(env.max_movers or num_lm, num_lm), chunk=int(config.rollout.chunk),
        widths=transcripts.score_widths(env.capacity + m, config.rollout.min_score_width) if incremental else (),
        min_score_width=config.rollout.min_score_width, row_buckets=int(config.rollout.row_buckets),
        central=config.critic.kind in ("mappo", "world_state"),
        world_critic=_world_size(env) if config.critic.kind == "world_state" else 0,
        critic_hidden=config.critic.hidden,
        clip_value=bool(config.clip_value), kl_estimator=config.kl_estimator,
        use_kl=float(config.kl_coef) != 0.0 or float(config.guard.max_kl_ref) > 0,  # the KL guard reads kl_ref
        grpo_normalize_std=bool(config.grpo_normalize_std), loss_aggregation=config.loss_aggregation,
        anneal_lr=bool(config.anneal_lr), num_updates=max(int(config.total_episodes // config.num_envs), 1),
        critic_optimizer=float(config.critic.lr) > 0.0, value_norm=bool(config.critic.value_norm),
        lora_lr_ratio=float(config.lora.lr_ratio), train_base=bool(config.train_base),
        eval_every=int(config.in_graph_eval.every), eval_episodes=int(config.in_graph_eval.episodes),
        eval_opponents=tuple(config.in_graph_eval.opponents), eval_seed=int(config.in_graph_eval.seed),
        eval_average=str(config.in_graph_eval.get("average", "none")),
        eval_average_from=int(config.in_graph_eval.get("average_from", 0)),
        eval_average_every=int(config.in_graph_eval.get("average_every", 0)),
        eval_cross_play=int(config.in_graph_eval.get("cross_play", 0)),
        eval_exact=bool(config.in_graph_eval.get("exact", False)),
        eval_cross_play_temperature=float(config.in_graph_eval.get("cross_play_temperature", 1.0)),
        transcript_episodes=int(config.run.transcript_episodes) if int(config.run.transcripts_every) > 0 else 0,
        bound_step=config.get("max_step_kl") is not None,
    )
    rollout_path(plan).check(plan, plan.num_envs)  # minibatch settings that cannot cut this run's episodes
    return plan


def make_train(config, env=None) -> LMTrainer:
    setup = setup_lm(config, env)
    plan = make_plan(config, setup.env, setup.tokenizer, setup.policy)
    trainer = assemble(config, setup, plan)
    if config.num_microbatches == "auto" or config.model.get("remat", False) == "auto":
        # the cheapest of loss slices and layer rematerialisation whose memory plan fits the device
        trainer = memory.fit_memory(trainer, lambda p, remat: assemble(config, with_remat(setup, remat), p), config)
    return trainer


def assemble(config, setup, plan: Plan) -> LMTrainer:
    """The trainer of `plan`: its functions with the plan bound."""
    policy = dataclasses.replace(setup.policy, entropy_ids=plan.entropy_tokens)  # the entropy the loss scores
    path = rollout_path(plan)  # incremental (KV cache across turns) or re-read: chosen here, once

    def init(key: jax.Array, hp: LMHParams) -> LMRunnerState:
        key, k_init = jax.random.split(key)
        trainable = policy.init_trainable(k_init, num_agents=plan.num_slots)
        if plan.train_base:  # every weight of the model learns (a tiny model from scratch); base stays the reference
            trainable["base"] = float32_master(setup.base)
        if plan.central:
            trainable["critic"] = central_critic.critic_init(
                jax.random.fold_in(k_init, 7), plan.num_agents, plan.world_critic or policy.cfg.hidden_size,
                plan.critic_hidden, per_seat=not plan.world_critic)
        if ALGORITHMS[plan.algo].magnet:  # MMD's magnet starts as the initial adapters (B = 0: the base)
            trainable["magnet"] = jax.tree.map(jnp.copy, trainable["lora"])
        pool = lm_seats.init_pool(plan, trainable["lora"])
        init_state = ALGORITHMS[plan.algo].init_state
        algo_state = None if init_state is None else init_state(plan.num_agents)
        average = exploitability.empty_total(setup.env.tree) if plan.eval_average != "none" else None
        return LMRunnerState(trainable, make_tx(plan, hp).init(trainable), key, jnp.zeros((), jnp.int32), pool,
                             algo_state, value_norm.init() if plan.value_norm else None, average)

    stateful = ALGORITHMS[plan.algo].init_state is not None
    state_specs = LMRunnerState(trainable=P(), opt_state=P(), key=P(), update_step=P(),
                                pool=P() if plan.pool_size else None, algo_state=P() if stateful else None,
                                value_norm=P() if plan.value_norm else None,
                                average=P() if plan.eval_average != "none" else None)
    return LMTrainer(
        env=setup.env, config=config, plan=plan, hparams=LMHParams.from_config(config), policy=policy,
        tokenizer=setup.tokenizer, base=setup.base, init=init,
        update=functools.partial(update, plan, path, setup.env, policy),
        rollout=functools.partial(rollout, plan, path, setup.env, policy), state_specs=state_specs,
        base_specs=functools.partial(fsdp.param_specs, policy.cfg))


def make_tx(plan: Plan, hp: LMHParams) -> optax.GradientTransformation:
    """Adam on the adapters and value head (and MAPPO critic) only; lr constant or falling linearly to 0.

    With `critic.lr` the critic (central critic or value heads) has its own Adam, lr and gradient clip: a critic
    that starts far from the returns (tens, from 0) need not wait on a step size chosen for the policy."""
    steps_per_update = plan.update_epochs * plan.num_minibatches

    def adam(lr):
        return optimizer(linear_decay(lr, steps_per_update, plan.num_updates, True) if plan.anneal_lr else lr,
                         hp.max_grad_norm)

    policy_tx = lora_plus(adam(hp.lr), plan.lora_lr_ratio)  # LoRA+: B steps lora.lr_ratio x the lr
    if not plan.critic_optimizer:
        return policy_tx
    return optax.multi_transform({"policy": policy_tx, "critic": adam(hp.critic_lr)}, _critic_labels)


def _critic_labels(trainable) -> dict:
    """"critic" for the central critic and the value heads, "policy" for the adapters."""
    return {k: jax.tree.map(lambda _, k=k: "critic" if k in CRITIC_KEYS else "policy", v)
            for k, v in trainable.items()}


def update(plan: Plan, path: RolloutPath, env, policy: LMPolicy, state: LMRunnerState, hp: LMHParams, base,
           axis_name: str | None = None):
    """One update: rollout -> advantages -> epochs of minibatch steps. Arrays stay [T, N, A, ...]."""
    key, k_roll, k_epochs = jax.random.split(state.key, 3)
    hp = hp.at_step(state.update_step, plan.num_updates)  # scheduled numbers (the entropy bonus)
    n_local = plan.num_envs if axis_name is None else plan.num_envs // jax.lax.psum(1, axis_name)
    path.check(plan, n_local)
    env_ids = global_index(n_local, axis_name)

    # 1-2. play: seats are drawn inside the rollout; only the seats that learn are kept for the loss
    turns, seats, final_tokens = rollout(plan, path, env, policy, k_roll, base, state.trainable, state.pool, env_ids)
    train_turns = lm_seats.loss_seats(plan, turns, seats.learns)  # [T, N, A_l, ...]
    seqs = path.episode_seqs(plan, final_tokens, train_turns, seats.learns)  # [N, A_l, W] (None: re-read)

    # 3. advantages [T, N, A_l] (token credit: [T, N, A_l, M]) and value targets
    algo_state, vn = state.algo_state, state.value_norm
    if vn is not None:  # the critic speaks in normalised units: GAE reads returns' units
        turns = turns._replace(value=value_norm.denormalize(vn, turns.value) * turns.acted)
    algo = ALGORITHMS[plan.algo]
    token_value = (token_values(plan, path.score, policy, base, state.trainable, train_turns, seqs)
                   if algo.token_values else None)
    adv, ret, algo_state = algo.advantages(EstimatorInput(
        turns.reward, turns.value, turns.acted, seats.learns, lambda x: lm_seats.loss_view(plan, x, seats.learns),
        plan.group_size, plan.grpo_normalize_std, axis_name, token_value, train_turns.token_mask(),
        train_turns.token_reward), hp, algo_state)
    if algo.token_values:
        train_turns = train_turns._replace(value=token_value)  # what value clipping clips around
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
        grads, metrics = path.grads(trainable, plan, policy, base, mb, mb_adv, mb_ret, hp, axis_name, mb_seqs)
        if axis_name is not None:
            grads, metrics = jax.lax.psum((grads, metrics), axis_name)
        metrics = {**metrics, "grad_norm": optax.tree.norm(grads)}  # before clipping (max_grad_norm)
        updates, opt_state = tx.update(grads, opt_state, trainable)
        return (optax.apply_updates(trainable, updates), opt_state), metrics

    data = (train_turns._replace(info={}), adv, ret)

    def epoch(carry, epoch_key):
        return jax.lax.scan(minibatch_step, carry, path.minibatches(plan, data, seqs, epoch_key, env_ids))

    (trainable, opt_state), loss_metrics = jax.lax.scan(
        epoch, (state.trainable, state.opt_state), jax.random.split(k_epochs, plan.update_epochs))
    metrics = {k: v.mean() for k, v in loss_metrics.items()}
    if plan.bound_step:  # no trust region within one step: the policy's step held to max_step_kl on this batch
        trainable, step_metrics = bounded_step(plan, path.score, policy, base, state.trainable, trainable,
                                               train_turns, seqs, hp, axis_name)
        metrics.update(step_metrics)
    if "scored" in loss_metrics:  # minibatches with all-zero advantages were skipped: entropy over those that ran
        ran = loss_metrics.pop("scored")
        metrics["entropy"] = (loss_metrics["entropy"] * ran).sum() / jnp.maximum(ran.sum(), 1.0)
        metrics["scored"] = ran.mean()
    metrics["zero_advantage_share"] = zero_advantage_share(adv, train_turns.acts, axis_name)
    metrics.update(episode_metrics(turns, seats.learns, axis_name))
    # tokens/s and MFU; minibatches skipped for want of signal (all-zero advantages) scored nothing
    metrics.update(update_work(plan, path.rows, policy.cfg, turns, train_turns, axis_name,
                               metrics.get("scored", 1.0)))
    if plan.transcript_episodes:  # a few of this update's episodes, for the run's transcripts (run/transcript_log.py)
        metrics.update(sample_episodes(plan, turns, seats, final_tokens, env_ids, axis_name))
    if algo_state is not None:  # a stateful estimator's per-role state (RAE: each role's running mean return)
        metrics.update({f"baseline_agent{a}": algo_state[a] for a in range(plan.num_agents)})
    if ALGORITHMS[plan.algo].magnet:  # the magnet follows the learner slowly (no gradient reaches it)
        trainable = {**trainable, "magnet": jax.tree.map(lambda m, x: m + hp.magnet_rate * (x - m),
                                                         trainable["magnet"], trainable["lora"])}
    step = state.update_step + 1
    average = state.average
    if plan.eval_every:
        eval_metrics, average = in_graph_eval(plan, env, policy, base, trainable, step, average, state.pool)
        metrics.update(eval_metrics)
    pool = lm_seats.refresh_pool(plan, state.pool, trainable["lora"], step)
    return LMRunnerState(trainable, opt_state, key, step, pool, algo_state, vn, average), metrics


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


def in_graph_eval(plan: Plan, env, policy: LMPolicy, base, trainable, step: jax.Array,
                  average: jax.Array | None = None, pool=None) -> tuple[dict[str, jax.Array], jax.Array | None]:
    """({"eval/<opponent>_<win|draw|loss>", per seat too}, average): greedy games of the updated adapters against
    the game's built-in players after update 1 and every `plan.eval_every` updates; NaN (not played) in between.
    Each seat plays with its own adapter slot (frozen seats: the bare base). Every device plays the same games.
    Games with a tree of information sets (poker) add "eval/exploitability", "eval/nash_conv" and per seat;
    with `plan.eval_average` the evaluated policy joins the running sum `average` [I + 1, A] and the average
    policy's numbers are logged as "eval/average_exploitability", ... . With `plan.eval_cross_play` the learner,
    the pool's snapshots (snap1 = the newest) and the built-in players also play every pair, sampled: a rating
    per player ("eval/rating/<name>") and the matrix of mean returns ("eval/xplay/<row>/<col>")."""
    # a mixture of games (envs/text/mixture.py `games`): each game played alone, logged as eval/<game>/<key>
    # (a one-seat task: played alone, on its held-out starts where it has them)
    versus = per_game.evaluator(env, policy, plan.num_turns, plan.eval_opponents, plan.eval_episodes, plan.eval_seed)
    seat_loras = tuple(None if plan.agent_scale[a] == 0.0 else jax.tree.map(lambda x, s=s: x[s], trainable["lora"])
                       for a, s in enumerate(plan.slot_of_agent))
    if plan.eval_cross_play:
        names = ("learner", *(f"snap{k + 1}" for k in range(plan.pool_size)), *plan.eval_opponents)
        league = cross_play.league(env, play.with_temperature(policy, plan.eval_cross_play_temperature),
                                   plan.num_turns, names, plan.eval_opponents, plan.eval_cross_play, plan.eval_seed)

    # every run of a sweep is at the same step: one decision for all (a per-run one would play every update)
    evaluated = fsdp.over_sweep((step % plan.eval_every == 0) | (step == 1))

    # the updates whose iterate joins the average: every `eval_average_every`-th, else the evaluated ones
    joins = fsdp.over_sweep(step % plan.eval_average_every == 0) if plan.eval_average_every else evaluated

    def add_iterate(total, table):  # [I + 1, A]: the sum with this update's policy table [I, A] in it (if it joins)
        weight = exploitability.AVERAGE_WEIGHTS[plan.eval_average](step) * (step >= plan.eval_average_from) * joins
        return exploitability.accumulate(env.tree, total, table, weight)

    if average is not None and plan.eval_average_every:  # between evaluations too: the policy table alone, no games
        average = jax.lax.cond(joins & ~evaluated, lambda total: add_iterate(
            total, exploitability.policy_table(env, policy, model_weights(trainable, base), seat_loras)),
            lambda total: total, average)

    def games():
        weights = model_weights(trainable, base)
        out, total = versus(weights, seat_loras), average
        if plan.eval_exact:  # tic-tac-toe: exact rates from the greedy move at every position
            out.update(tic_tac_toe_exact.in_graph(env, policy)(weights, seat_loras))
        if exploitability.has_infosets(env):  # poker: the exact distance to equilibrium of the sampling policy
            table = exploitability.policy_table(env, policy, weights, seat_loras)  # [I, A]
            out.update(exploitability.table_metrics(env.tree, table))
            if average is not None:  # the table read once, for the numbers and the average
                total = add_iterate(average, table)
                out.update(exploitability.table_metrics(env.tree, exploitability.average(env.tree, total),
                                                        "average_"))
        if plan.eval_cross_play:  # the pool as refresh_pool left it after the previous update
            loras = jax.tree.map(lambda x, p: jnp.concatenate([x[:1], p]), trainable["lora"],
                                 lm_seats.pool_by_age(plan, pool, step - 1))  # [1 + P, ...]
            out.update(cross_play.league_metrics(names, *league(weights, loras), plan.eval_cross_play))
        return {f"eval/{k}": v for k, v in out.items()}, total

    def skipped():
        shapes = jax.eval_shape(games)[0]
        return jax.tree.map(lambda x: jnp.full(x.shape, jnp.nan, x.dtype), shapes), average

    return jax.lax.cond(evaluated, games, skipped)


def _world_size(env) -> int:
    """The length of env.world_state (the world-state critic's input)."""
    def world(key):
        return env.world_state(env.reset(key)[1])

    return int(jax.eval_shape(world, jax.random.PRNGKey(0)).shape[-1])
