"""The LM trainer's objective: advantages by algorithm and the loss on given scores, as pure array functions.

An algorithm is one registry entry, so the trainer never asks `if algo == ...`:

    algo = algorithm(config.algo, config.credit)                  # ALGORITHMS["ppo"], or its token-credit twin
    adv, ret, state = algo.advantages(EstimatorInput(...), hp, state)   # [T, N, A_l(, M)]: the seats that learn
    loss, metrics = lm_loss(algo, Scored(...), hp, ...)

Adding an estimator (docs/forking.md walks through one): write `advantages(x, hp, state)` with the signature
below, add `ALGORITHMS["name"] = Algorithm(advantages, <a policy loss>, critic=False)`, and `--config.algo=name`
works in train.py and sweep.py. `hp` is any object with the fields a function reads (the trainer's LMHParams).
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos import grpo, kl, magrpo, rae, rloo
from jaxmarl_llm.algos.gae import own_turn_gae
from jaxmarl_llm.algos.ppo import PPOCoefs, mesh_sum, ppo_loss, shard_mean
from jaxmarl_llm.algos.token_credit import own_turn_token_gae


class EstimatorInput(NamedTuple):
    """What an advantage estimator may read: every seat's record [T, N, A], and how to keep the seats that learn."""

    reward: jax.Array  # [T, N, A]
    value: jax.Array | None  # [T, N, A] the critic's value at each turn (None without a critic)
    acted: jax.Array | None  # [T, N, A] bool: the seat chose an action
    learns: jax.Array | None  # [N, A] bool: the seat learns in this episode
    to_loss: Callable  # [T, N, A, ...] -> [T, N, A_l, ...]: the seats that enter the loss
    group_size: int = 1  # envs come in groups of this size that share a seed (GRPO / RLOO groups)
    normalize_std: bool = True  # GRPO: divide by the group's std (False: Dr.GRPO)
    axis_name: str | None = None  # the data axis, for estimators that reduce over the whole batch
    token_value: jax.Array | None = None  # [T, N, A_l, M] token-level estimators: each generated token's value
    token_mask: jax.Array | None = None  # [T, N, A_l, M] bool: the tokens that enter the loss
    token_reward: jax.Array | None = None  # [T, N, A_l, M] the part of `reward` the env paid to each token


class Algorithm(NamedTuple):
    # (x: EstimatorInput, hp, state) -> (advantage, value target, new state), each [T, N, A_l] (token-level:
    # [T, N, A_l, M]); `state` is None unless `init_state` is set
    advantages: Callable
    # (logprob, old_logprob, token_adv, token_mask, entropy [B, N, A, M], hp, *, aggregation, axis_name)
    #   -> (loss, metrics)
    policy_loss: Callable
    critic: bool  # learns a value: its loss joins the policy loss (PPO); group baselines need none
    groups: bool = True  # compares the episodes of a group (group_size >= 2): GRPO, RLOO
    # stateful estimators (RAE's running baselines): init_state(num_agents) -> the state the runner carries
    init_state: Callable | None = None
    # the estimator reads a value per generated token (x.token_value): the trainer scores the rollout for it
    token_values: bool = False
    # the KL's reference is a "magnet" adapter that follows the learner slowly (magnetic mirror descent), not the
    # base with adapters off: the trainer keeps it in trainable["magnet"] and moves it after each update
    magnet: bool = False


# ---- advantages ---------------------------------------------------------------------------------------

def turn_gae(x: EstimatorInput, hp, state):
    """PPO: GAE over each seat's own turns (others' moves are part of its environment)."""
    adv, ret = own_turn_gae(x.reward, x.value, x.acted, hp.gamma, hp.gae_lambda)
    return x.to_loss(adv), x.to_loss(ret), state


def token_gae(x: EstimatorInput, hp, state, gamma_per_turn: bool = False):
    """PPO with token-level credit: GAE over each learning seat's generated tokens, turn after turn (the turn's
    reward on its last token, the part paid to tokens on those tokens). -> (adv, ret) [T, N, A_l, M]."""
    adv, ret = own_turn_token_gae(x.to_loss(x.reward), x.token_value, x.token_mask, hp.gamma, hp.gae_lambda,
                                  x.token_reward, gamma_per_turn)
    return adv, ret, state


def _per_episode(estimate: Callable, x: EstimatorInput):
    """Episode returns [N, A] grouped [A, N/G, G] -> `estimate` -> every turn of an episode gets its advantage."""
    returns = x.reward.sum(0)  # [N, A]
    grouped = jnp.moveaxis(returns.reshape(-1, x.group_size, returns.shape[-1]), -1, 0)  # [A, N/G, G]
    adv = jnp.moveaxis(estimate(grouped), 0, -1).reshape(returns.shape)  # [N, A]
    adv = x.to_loss(jnp.broadcast_to(adv[None], x.reward.shape))
    return adv, jnp.zeros_like(adv)


def group_normalized(x: EstimatorInput, hp, state):
    """GRPO: the episode return minus its group's mean (divided by the group's std unless Dr.GRPO)."""
    return (*_per_episode(lambda g: grpo.group_advantages(g, normalize_std=x.normalize_std), x), state)


def leave_one_out(x: EstimatorInput, hp, state):
    """RLOO: the episode return minus the mean of the other episodes of its group."""
    return (*_per_episode(rloo.rloo_advantages, x), state)


def team_group_normalized(x: EstimatorInput, hp, state):
    """MAGRPO (aligned): one joint reward per episode, the team's return (every seat's summed); each seat's sample is
    credited with the team return's group advantage, for cooperative games."""
    team = jnp.broadcast_to(x.reward.sum(-1, keepdims=True), x.reward.shape)  # [T, N, A]

    def estimate(grouped):  # [A, N/G, G], every seat the same team return
        return magrpo.aligned_advantages(grouped[0], grouped.shape[0], normalize_std=x.normalize_std)

    return (*_per_episode(estimate, x._replace(reward=team)), state)


def agent_turn_grouped(x: EstimatorInput, hp, state):
    """AT-GRPO (PettingLLMs): each turn's return to go, normalised within its group among the episodes in which
    the same seat moved at the same turn: a seat's early and late moves, and different seats, are never compared.
    (PettingLLMs also branches the group at every turn; here a group shares its start, the env's seed.)"""
    to_go = jnp.flip(jnp.cumsum(jnp.flip(x.reward, 0), 0), 0)  # [T, N, A]
    t, n, a = to_go.shape

    def grouped(v):  # [T, N, A] -> [T, A, N/G, G]
        return jnp.moveaxis(v.reshape(t, n // x.group_size, x.group_size, a), -1, 1)

    moved = x.acted.astype(bool)
    adv = grpo.group_advantages(grouped(to_go), grouped(moved), normalize_std=x.normalize_std)
    adv = jnp.moveaxis(adv, 1, -1).reshape(t, n, a) * moved  # [T, N, A]
    adv = x.to_loss(adv)
    return adv, jnp.zeros_like(adv), state


def role_baselines(x: EstimatorInput, hp, state):
    """RAE: the episode return minus a running mean of its role's returns (algos/rae.py); state = baselines [A]."""
    adv, state = rae.role_advantages(x.reward.sum(0), x.learns, state, hp.rae_decay, x.axis_name)  # [N, A]
    adv = x.to_loss(jnp.broadcast_to(adv[None], x.reward.shape))
    return adv, jnp.zeros_like(adv), state


# ---- policy losses ------------------------------------------------------------------------------------

def clipped_ppo(logprob, old_logprob, token_adv, token_mask, entropy, hp, *, aggregation: str, axis_name):
    """Token-level clipped surrogate, advantages normalised over the minibatch, entropy bonus."""
    del aggregation
    coefs = PPOCoefs(hp.clip_eps, 0.0, hp.ent_coef, clip_value=False, normalize_advantages=True)
    zeros = jnp.zeros_like(logprob)
    return ppo_loss(logprob, old_logprob, token_adv, zeros, zeros, zeros, entropy, coefs, mask=token_mask,
                    axis_name=axis_name)


def clipped_grpo(logprob, old_logprob, token_adv, token_mask, entropy, hp, *, aggregation: str, axis_name):
    """GRPO's clipped surrogate, token losses aggregated as `aggregation` says (token / sequence / Dr.GRPO)."""
    del entropy
    return grpo.grpo_loss(logprob, old_logprob, token_adv, token_mask, None, clip_eps=hp.clip_eps,
                          aggregation=aggregation, max_len=logprob.shape[-1], axis_name=axis_name)


def reinforce(logprob, old_logprob, token_adv, token_mask, entropy, hp, *, aggregation: str, axis_name):
    """REINFORCE with the given baseline (RLOO's loss): no ratio, no clip."""
    del old_logprob, entropy, hp, aggregation
    return rloo.rloo_loss(logprob, token_adv, token_mask, axis_name=axis_name)


# `--config.algo` picks an entry; `--config.credit=token` picks the entry's token-level twin, "<algo>/token"
ALGORITHMS: dict[str, Algorithm] = {
    "ppo": Algorithm(turn_gae, clipped_ppo, critic=True, groups=False),
    "ppo/token": Algorithm(token_gae, clipped_ppo, critic=True, groups=False, token_values=True),
    # the same with gamma between turns only (`credit="token_by_turn"`)
    "ppo/token_by_turn": Algorithm(functools.partial(token_gae, gamma_per_turn=True), clipped_ppo, critic=True,
                                   groups=False, token_values=True),
    "grpo": Algorithm(group_normalized, clipped_grpo, critic=False),
    "rloo": Algorithm(leave_one_out, reinforce, critic=False),
    "magrpo": Algorithm(team_group_normalized, clipped_grpo, critic=False),
    "at_grpo": Algorithm(agent_turn_grouped, clipped_grpo, critic=False),
    "rae": Algorithm(role_baselines, clipped_grpo, critic=False, groups=False, init_state=rae.init_baselines),
    # magnetic mirror descent (Sokota et al. 2023): PPO + kl_coef x KL(policy || magnet) + the entropy bonus,
    # the magnet moving toward the learner by magnet_rate a update; approaches Nash in two-player zero-sum games
    "mmd": Algorithm(turn_gae, clipped_ppo, critic=True, groups=False, magnet=True),
}


CREDITS = ("turn", "token", "token_by_turn")  # `--config.credit`: per turn, or per token (gamma per token or per turn)


def registry_key(algo: str, credit: str = "turn") -> str:
    """The `ALGORITHMS` key of `--config.algo` with `--config.credit`: "ppo", or "ppo/token" for token credit."""
    return algo if credit == "turn" else f"{algo}/{credit}"


def algo_names() -> tuple[str, ...]:
    """The values `--config.algo` takes (credit variants are chosen by `--config.credit`)."""
    return tuple(k for k in ALGORITHMS if "/" not in k)


# ---- the loss on given scores ---------------------------------------------------------------------------

def entropy_only_at(entropy: jax.Array, token_mask: jax.Array, entropy_mask: jax.Array,
                    axis_name: str | None) -> jax.Array:
    """entropy [B, N, A, M] re-weighted so that its mean over `token_mask` (what every policy loss takes) is its
    mean over `entropy_mask` (a subset): the bonus counts those tokens alone, each as a token of the mean."""
    count = lambda m: jax.lax.stop_gradient(mesh_sum(m.astype(entropy.dtype).sum(), axis_name))  # noqa: E731
    scale = count(token_mask) / jnp.maximum(count(entropy_mask), 1.0)
    return jnp.where(entropy_mask, entropy * scale, 0.0)


class Scored(NamedTuple):
    """One minibatch as the loss sees it; every field [B, N, A, M] unless marked."""

    logprob: jax.Array  # under the current policy
    entropy: jax.Array
    value: jax.Array  # [B, N, A] per turn, or [B, N, A, M] per token (token credit)
    old_logprob: jax.Array  # recorded at acting
    old_value: jax.Array  # what the advantages were computed with (value clipping clips around it)
    adv: jax.Array  # [B, N, A] per turn, or [B, N, A, M] per token
    ret: jax.Array  # value targets, shaped as value
    token_mask: jax.Array  # bool: generated tokens of seats that learn
    value_mask: jax.Array  # bool, shaped as value: where the value loss counts
    ref_logprob: jax.Array | None  # the reference policy's (adapters off, or MMD's magnet), or None without KL
    entropy_mask: jax.Array | None = None  # bool: the tokens the entropy bonus counts (None: token_mask's)


def lm_loss(algo: Algorithm, s: Scored, hp, *, aggregation: str, kl_estimator: str, clip_value: bool,
            axis_name: str | None):
    """policy loss (+ vf_coef x value loss when the algorithm has a critic) (+ kl_coef x KL to the reference)."""
    token_adv = s.adv if s.adv.ndim == s.logprob.ndim else jnp.broadcast_to(s.adv[..., None], s.logprob.shape)
    entropy = s.entropy
    if s.entropy_mask is not None:
        entropy = entropy_only_at(s.entropy, s.token_mask, s.entropy_mask, axis_name)
    # the bonus pays only below entropy_max (the minibatch's mean): once every reply has broken the format (all
    # returns equal, no advantage) it alone would carry the policy on to uniform noise
    entropy_share = shard_mean(jax.lax.stop_gradient(entropy), s.token_mask, axis_name)
    hp = hp._replace(ent_coef=jnp.where(mesh_sum(entropy_share, axis_name) < hp.entropy_max, hp.ent_coef, 0.0))
    loss, metrics = algo.policy_loss(s.logprob, s.old_logprob, token_adv, s.token_mask, entropy, hp,
                                     aggregation=aggregation, axis_name=axis_name)
    if "entropy" not in metrics:  # logged for every algorithm: a falling entropy precedes a collapse
        metrics = {**metrics, "entropy": entropy_share}
    metrics = {**metrics, "ent_coef": hp.ent_coef / mesh_sum(1.0, axis_name)}  # the bonus paid (a shard's share)
    if algo.critic:
        err = jnp.square(s.value - s.ret)
        if clip_value:  # PPO's value clipping around the values the advantages were computed with
            old = s.old_value
            err = jnp.maximum(err, jnp.square(old + jnp.clip(s.value - old, -hp.clip_eps, hp.clip_eps) - s.ret))
        vl = 0.5 * shard_mean(err, s.value_mask, axis_name)
        loss = loss + hp.vf_coef * vl
        metrics = {**metrics, "value_loss": vl}
    if s.ref_logprob is not None:
        kl_term = kl.mean_kl(s.logprob, s.ref_logprob, s.token_mask, kind=kl_estimator, axis_name=axis_name)
        loss = loss + hp.kl_coef * kl_term
        metrics = {**metrics, "kl_ref": kl_term}
    return loss, metrics
