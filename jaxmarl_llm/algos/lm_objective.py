"""The LM trainer's objective: advantages by algorithm and the loss on given scores, as pure array functions.

An algorithm is one registry entry, so the trainer never asks `if algo == ...`:

    algo = ALGORITHMS[config.algo]
    adv, ret = algo.advantages(reward, value, acted, hp, group_size=G, normalize_std=True)   # [T, N, A]
    loss, metrics = lm_loss(algo, Scored(...), hp, ...)

Adding an estimator (docs/forking.md walks through one): write `advantages(...)` with the signature below,
add `ALGORITHMS["name"] = Algorithm(advantages, <a policy loss>, critic=False)`, and `--config.algo=name`
works in train.py and sweep.py. `hp` is any object with the fields a function reads (the trainer's LMHParams).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos import grpo, kl, rae, rloo
from jaxmarl_llm.algos.gae import own_turn_gae
from jaxmarl_llm.algos.ppo import PPOCoefs, ppo_loss, shard_mean
from jaxmarl_llm.algos.token_credit import own_turn_token_gae


class Algorithm(NamedTuple):
    # (reward [T, N, A], value [T, N, A], acted [T, N, A] bool, hp, *, group_size, normalize_std)
    #   -> (advantage [T, N, A], value target [T, N, A]); envs come in groups of `group_size` that share a seed
    advantages: Callable
    # (logprob, old_logprob, token_adv, token_mask, entropy [B, N, A, M], hp, *, aggregation, axis_name)
    #   -> (loss, metrics)
    policy_loss: Callable
    critic: bool  # learns a value: its loss joins the policy loss (PPO); group baselines need none
    groups: bool = True  # compares the episodes of a group (group_size >= 2): GRPO, RLOO
    # stateful estimators (RAE's running baselines): init_state(num_agents) -> state; `advantages` then also
    # takes state=, learns= [N, A] bool, axis_name= and returns (advantage, value target, new state)
    init_state: Callable | None = None


# ---- advantages ---------------------------------------------------------------------------------------

def turn_gae(reward, value, acted, hp, *, group_size: int, normalize_std: bool):
    """PPO: GAE over each seat's own turns (others' moves are part of its environment)."""
    del group_size, normalize_std
    return own_turn_gae(reward, value, acted, hp.gamma, hp.gae_lambda)


def _per_episode(estimate: Callable, reward: jax.Array, group_size: int):
    """Episode returns [N, A] grouped [A, N/G, G] -> `estimate` -> every turn of an episode gets its advantage."""
    returns = reward.sum(0)  # [N, A]
    grouped = jnp.moveaxis(returns.reshape(-1, group_size, returns.shape[-1]), -1, 0)  # [A, N/G, G]
    adv = jnp.moveaxis(estimate(grouped), 0, -1).reshape(returns.shape)  # [N, A]
    adv = jnp.broadcast_to(adv[None], reward.shape)
    return adv, jnp.zeros_like(adv)


def group_normalized(reward, value, acted, hp, *, group_size: int, normalize_std: bool):
    """GRPO: the episode return minus its group's mean (divided by the group's std unless Dr.GRPO)."""
    del value, acted, hp
    return _per_episode(lambda g: grpo.group_advantages(g, normalize_std=normalize_std), reward, group_size)


def leave_one_out(reward, value, acted, hp, *, group_size: int, normalize_std: bool):
    """RLOO: the episode return minus the mean of the other episodes of its group."""
    del value, acted, hp, normalize_std
    return _per_episode(rloo.rloo_advantages, reward, group_size)


def role_baselines(reward, value, acted, hp, *, group_size: int, normalize_std: bool, state, learns, axis_name):
    """RAE: the episode return minus a running mean of its role's returns (algos/rae.py); state = baselines [A]."""
    del value, acted, group_size, normalize_std
    adv, state = rae.role_advantages(reward.sum(0), learns, state, hp.rae_decay, axis_name)  # [N, A]
    adv = jnp.broadcast_to(adv[None], reward.shape)
    return adv, jnp.zeros_like(adv), state


def token_advantages(reward, token_value, token_mask, hp):
    """PPO with token-level credit: GAE over each seat's generated tokens, turn after turn (the turn's reward on
    its last token). reward [T, N, A], token_value / token_mask [T, N, A, M] -> (adv, ret) [T, N, A, M]."""
    return own_turn_token_gae(reward, token_value, token_mask, hp.gamma, hp.gae_lambda)


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


ALGORITHMS: dict[str, Algorithm] = {
    "ppo": Algorithm(turn_gae, clipped_ppo, critic=True, groups=False),
    "grpo": Algorithm(group_normalized, clipped_grpo, critic=False),
    "rloo": Algorithm(leave_one_out, reinforce, critic=False),
    "rae": Algorithm(role_baselines, clipped_grpo, critic=False, groups=False, init_state=rae.init_baselines),
}


# ---- the loss on given scores ---------------------------------------------------------------------------

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
    ref_logprob: jax.Array | None  # the reference policy's (adapters off), or None without KL


def lm_loss(algo: Algorithm, s: Scored, hp, *, aggregation: str, kl_estimator: str, clip_value: bool,
            axis_name: str | None):
    """policy loss (+ vf_coef x value loss when the algorithm has a critic) (+ kl_coef x KL to the reference)."""
    token_adv = s.adv if s.adv.ndim == s.logprob.ndim else jnp.broadcast_to(s.adv[..., None], s.logprob.shape)
    loss, metrics = algo.policy_loss(s.logprob, s.old_logprob, token_adv, s.token_mask, s.entropy, hp,
                                     aggregation=aggregation, axis_name=axis_name)
    if "entropy" not in metrics:  # logged for every algorithm: a falling entropy precedes a collapse
        metrics = {**metrics, "entropy": shard_mean(jax.lax.stop_gradient(s.entropy), s.token_mask, axis_name)}
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
