"""IPPO / MAPPO with MLP actor-critics, PureJaxRL style: one compiled update.

    trainer = make_train(config)
    hp = trainer.hparams                                   # numbers a sweep may vary
    state = trainer.init(jax.random.PRNGKey(0), hp)
    state, metrics = trainer.update(state, hp)             # one PPO update (pure)
    state, metrics = trainer.train(jax.random.PRNGKey(0), hp)   # the whole run (pure, for vmap)

An update = rollout scan over `num_steps` env steps in `num_envs` envs ->
GAE (bootstrapping on truncation, not on termination) -> `update_epochs`
passes over `num_minibatches` minibatches. Inside `shard_map` (axis `data`)
each device owns a slice of the envs; gradients and metrics are summed over
the mesh. Randomness is drawn per env from its *global* index and each
minibatch takes the same time steps from every env, so 1 device and 8 devices
compute the same update.

Read top to bottom: nets -> acting -> rollout -> advantages -> loss -> update.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import distrax
import jax
import jax.numpy as jnp
import optax
from flax import nnx, struct
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.algos.gae import gae
from jaxmarl_llm.algos.ppo import PPOCoefs, ppo_loss
from jaxmarl_llm.envs import registry, spaces
from jaxmarl_llm.envs.core import Env, wrap_for_training
from jaxmarl_llm.models import mlp
from jaxmarl_llm.parallel.mesh import DATA, global_index
from jaxmarl_llm.train.optim import linear_decay, optimizer


class HParams(NamedTuple):
    """Numeric hyper-parameters: scalars here, arrays with a leading axis under a vmapped sweep."""

    lr: jax.Array
    clip_eps: jax.Array
    ent_coef: jax.Array
    vf_coef: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    max_grad_norm: jax.Array

    @classmethod
    def from_config(cls, config) -> "HParams":
        return cls(*(jnp.asarray(config[name], jnp.float32) for name in cls._fields))


@struct.dataclass
class RunnerState:
    params: Any  # {"actor": ..., "critic": ...}; leading agent axis when not shared
    opt_state: Any
    env_state: Any  # [N_local, ...]
    obs: jax.Array  # [N_local, A, O]
    key: jax.Array  # replicated PRNGKey
    update_step: jax.Array  # int32 []


class Transition(NamedTuple):
    obs: jax.Array  # [N, A, O]
    critic_in: jax.Array  # [N, A, O] (IPPO) or [N, S] (MAPPO)
    action: jax.Array  # [N, A] or [N, A, D]
    log_prob: jax.Array  # [N, A]
    value: jax.Array  # [N, A]
    reward: jax.Array  # [N, A]
    terminated: jax.Array  # [N, A]
    episode_end: jax.Array  # [N, A]
    final_value: jax.Array  # [N, A] V of the true next state where the episode ended (before auto-reset)
    active: jax.Array  # [N, A]
    info: dict


class _LossBatch(NamedTuple):
    obs: jax.Array
    critic_in: jax.Array | None  # MAPPO only
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    active: jax.Array


class Trainer(NamedTuple):
    env: Env
    config: Any
    hparams: HParams
    init: Any
    update: Any
    train: Any
    state_specs: Any  # PartitionSpec prefix of RunnerState for shard_map
    num_updates: int


def make_train(config, env: Env | None = None) -> Trainer:
    """Build the pure init/update/train functions for `config` (see configs/spread_mlp.py)."""
    env = wrap_for_training(env if env is not None else registry.make(config.env_name, **config.env_kwargs))
    num_agents = env.num_agents
    obs_dim = env.observation_space.shape[0]
    discrete = isinstance(env.action_space, spaces.Discrete)
    action_mask = env.action_mask  # [A, n] or [A, D]
    num_actions = action_mask.shape[-1]
    centralized = config.critic.kind == "mappo"
    shared = config.share_params
    num_envs, num_steps = config.num_envs, config.num_steps
    num_updates = int(config.total_timesteps // (num_envs * num_steps))
    steps_per_minibatch = num_steps // config.num_minibatches
    hidden, activation = tuple(config.network.hidden), config.network.activation

    # ---- nets ---------------------------------------------------------------------------
    def make_actor(rngs):
        cls = mlp.DiscreteActor if discrete else mlp.GaussianActor
        return cls(obs_dim, num_actions, hidden, activation, rngs)

    def make_critic(rngs):
        if centralized:
            return mlp.Critic(world_dim, hidden, activation, rngs, num_values=num_agents)
        return mlp.Critic(obs_dim, hidden, activation, rngs)

    _, probe_state = env.reset(jax.random.PRNGKey(0))
    world_dim = env.world_state(probe_state).shape[-1]
    per_agent = None if shared else num_agents
    actor_def, _ = mlp.init_stacked(make_actor, jax.random.PRNGKey(0), None)
    critic_def, _ = mlp.init_stacked(make_critic, jax.random.PRNGKey(0), None)

    def init_params(key):
        k_actor, k_critic = jax.random.split(key)
        actor = mlp.init_stacked(make_actor, k_actor, per_agent)[1]
        critic = mlp.init_stacked(make_critic, k_critic, None if centralized else per_agent)[1]
        return {"actor": actor, "critic": critic}

    def policy(params, obs):  # obs [..., A, O] -> distribution over [..., A]
        if shared:
            return nnx.merge(actor_def, params["actor"])(obs, action_mask)
        # Stacked per-agent nets: vmap over the agent axis of params (0) and of obs (-2).
        dist_params = jax.vmap(
            lambda p, o, m: _dist_params(nnx.merge(actor_def, p)(o, m)), in_axes=(0, -2, 0), out_axes=-2
        )(params["actor"], obs, action_mask)
        return _dist_from_params(dist_params, discrete)

    def value_fn(params, critic_in):  # -> [..., A]
        critic = lambda p, x: nnx.merge(critic_def, p)(x)  # noqa: E731
        if centralized or shared:
            return critic(params["critic"], critic_in)
        return jax.vmap(critic, in_axes=(0, -2), out_axes=-1)(params["critic"], critic_in)

    def critic_input(obs, env_state):
        return jax.vmap(env.world_state)(env_state) if centralized else obs

    # ---- optimizer (built from traced hyper-parameters, so sweeps can vmap it) ----------
    def make_tx(hp: HParams) -> optax.GradientTransformation:
        steps_per_update = config.update_epochs * config.num_minibatches  # optimizer steps per PPO update
        return optimizer(linear_decay(hp.lr, steps_per_update, num_updates, config.anneal_lr), hp.max_grad_norm)

    # ---- init ---------------------------------------------------------------------------
    def init(key: jax.Array, hp: HParams) -> RunnerState:
        key, k_params, k_reset = jax.random.split(key, 3)
        params = init_params(k_params)
        reset_keys = jax.vmap(lambda i: jax.random.fold_in(k_reset, i))(jnp.arange(num_envs))
        obs, env_state = jax.vmap(env.reset)(reset_keys)
        return RunnerState(params, make_tx(hp).init(params), env_state, obs, key, jnp.zeros((), jnp.int32))

    # ---- one update -----------------------------------------------------------------------
    def update(runner: RunnerState, hp: HParams, axis_name: str | None = None):
        num_local = runner.obs.shape[0]
        env_ids = global_index(num_local, axis_name)  # [N]
        per_env = lambda k: jax.vmap(lambda i: jax.random.fold_in(k, i))(env_ids)  # noqa: E731
        key, k_rollout, k_epochs = jax.random.split(runner.key, 3)

        def env_step(carry, step_key):
            env_state, obs = carry
            k_act, k_env = jax.random.split(step_key)
            dist = policy(runner.params, obs)
            action = _sample_per_env(dist, per_env(k_act), discrete)
            log_prob = dist.log_prob(action)
            critic_in = critic_input(obs, env_state)
            value = value_fn(runner.params, critic_in)
            env_action = action if discrete else jnp.clip(action, env.action_space.low, env.action_space.high)
            active = jax.vmap(env.active)(env_state)
            next_obs, next_state, reward, terminated, truncated, info = jax.vmap(env.step)(
                per_env(k_env), env_state, env_action
            )
            end = jnp.broadcast_to(info["episode_done"][:, None], reward.shape)
            # V(true last state) is needed only where an episode ended; most steps skip the critic pass
            final_in = info["final_world_state"] if centralized else info["final_obs"]
            final_value = jax.lax.cond(
                jnp.any(info["episode_done"]), lambda: value_fn(runner.params, final_in), lambda: jnp.zeros_like(value)
            )
            stats = {k: info[k] for k in ("returned_episode", "returned_episode_team_return", "returned_episode_length")}
            t = Transition(obs, critic_in, action, log_prob, value, reward, terminated, end, final_value, active, stats)
            return (next_state, next_obs), t

        (env_state, obs), traj = jax.lax.scan(
            env_step, (runner.env_state, runner.obs), jax.random.split(k_rollout, num_steps)
        )  # traj: [T, N, ...]

        last_value = value_fn(runner.params, critic_input(obs, env_state))  # [N, A]
        next_values = jnp.concatenate([traj.value[1:], last_value[None]])  # [T, N, A]
        next_values = jnp.where(traj.episode_end, traj.final_value, next_values)
        advantages, returns = gae(
            traj.reward, traj.value, next_values, traj.terminated, traj.episode_end, hp.gamma, hp.gae_lambda
        )
        coefs = PPOCoefs(hp.clip_eps, hp.vf_coef, hp.ent_coef)
        tx = make_tx(hp)

        def loss_fn(params, mb, mb_adv, mb_ret):
            dist = policy(params, mb.obs)
            values = value_fn(params, mb.critic_in if centralized else mb.obs)
            return ppo_loss(
                dist.log_prob(mb.action), mb.log_prob, mb_adv, values, mb.value, mb_ret, dist.entropy(), coefs,
                mask=mb.active, axis_name=axis_name,
            )

        def minibatch_step(carry, mb):
            params, opt_state = carry
            batch, adv, ret = mb
            (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, adv, ret)
            if axis_name is not None:
                grads, metrics = jax.lax.psum((grads, metrics), axis_name)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), metrics

        def epoch(carry, epoch_key):
            # Each env shuffles its own time steps; minibatch k takes slice k of every env's
            # permutation, so a minibatch spans all envs (and all devices) equally.
            perms = jax.vmap(lambda k: jax.random.permutation(k, num_steps))(per_env(epoch_key))  # [N, T]
            # only what the loss reads is shuffled (IPPO's critic input is the obs itself)
            batch = _LossBatch(traj.obs, traj.critic_in if centralized else None, traj.action, traj.log_prob,
                               traj.value, traj.active)
            data = (batch, advantages, returns)
            shuffled = jax.tree.map(lambda x: _gather_time(x, perms), data)
            minibatches = jax.tree.map(
                lambda x: x.reshape(config.num_minibatches, steps_per_minibatch, *x.shape[1:]), shuffled
            )
            return jax.lax.scan(minibatch_step, carry, minibatches)

        (params, opt_state), loss_metrics = jax.lax.scan(
            epoch, (runner.params, runner.opt_state), jax.random.split(k_epochs, config.update_epochs)
        )

        metrics = {k: v.mean() for k, v in loss_metrics.items()}
        metrics.update(_episode_metrics(traj.info, axis_name))
        runner = RunnerState(params, opt_state, env_state, obs, key, runner.update_step + 1)
        return runner, metrics

    def train(key: jax.Array, hp: HParams):
        """The whole run as one pure function; metrics have a leading [num_updates] axis."""
        return jax.lax.scan(lambda r, _: update(r, hp), init(key, hp), None, length=num_updates)

    state_specs = RunnerState(params=P(), opt_state=P(), env_state=P(DATA), obs=P(DATA), key=P(), update_step=P())
    return Trainer(env, config, HParams.from_config(config), init, update, train, state_specs, num_updates)


# ---- small pure helpers --------------------------------------------------------------------
def _gather_time(x: jax.Array, perms: jax.Array) -> jax.Array:
    """x [T, N, ...] reordered per env along time by perms [N, T]."""
    idx = perms.T.reshape(perms.shape[1], perms.shape[0], *([1] * (x.ndim - 2)))
    return jnp.take_along_axis(x, idx, axis=0)


def _sample_per_env(dist, keys: jax.Array, discrete: bool) -> jax.Array:
    """One key per env row, so a sample does not depend on how many envs share the device."""
    if discrete:
        return jax.vmap(lambda k, logits: distrax.Categorical(logits=logits).sample(seed=k))(keys, dist.logits)
    mean, scale = dist.loc, dist.scale_diag
    noise = jax.vmap(lambda k, m: jax.random.normal(k, m.shape, m.dtype))(keys, mean)
    return mean + scale * noise


def _dist_params(dist):
    return {"logits": dist.logits} if hasattr(dist, "logits") else {"loc": dist.loc, "scale": dist.scale_diag}


def _dist_from_params(p, discrete: bool):
    return distrax.Categorical(logits=p["logits"]) if discrete else distrax.MultivariateNormalDiag(p["loc"], p["scale"])


def _episode_metrics(info: dict, axis_name: str | None) -> dict:
    """Mean team return / length of the episodes that finished in this rollout (over the mesh)."""
    done = info["returned_episode"].astype(jnp.float32)  # [T, N]
    sums = (
        jnp.sum(info["returned_episode_team_return"] * done),
        jnp.sum(info["returned_episode_length"] * done),
        jnp.sum(done),
    )
    if axis_name is not None:
        sums = jax.lax.psum(sums, axis_name)
    team, length, count = sums
    count = jnp.maximum(count, 1.0)
    return {"team_return": team / count, "episode_length": length / count, "episodes": sums[2]}
