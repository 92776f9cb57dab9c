"""The two ways an LM rollout is played and scored, behind one interface; `rollout_path(plan)` picks one when the
trainer is built, so the update reads a single path.

  * re-read (any env): every LM seat prefills its whole transcript each turn; the loss re-reads each turn's prompt
    + action, a minibatch is a slice of every episode's turns.
  * incremental (token games whose transcripts only grow): each (env, seat) row keeps its KV cache across turns and
    reads only the new tokens; an episode is scored in one forward over its final transcript, a minibatch is a set
    of whole episodes.
Both sample the same replies (each (env, seat) draws from the same key) and score the same log-probs.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.train.lm import rollout as rollout_lib
from jaxmarl_llm.train.lm import scoring, throughput
from jaxmarl_llm.train.lm.plan import Plan


class RolloutPath(NamedTuple):
    # acting: (plan, policy, keys [n], base, weights, obs, active [n, A], cache, valid [n, A, K])
    #   -> (Sample fields [n, A', ...], cache)
    act: Callable
    init_cache: Callable  # (plan, policy, obs) -> what `act` carries from turn to turn (None: nothing)
    keep_prompts: bool  # Turns.prompt holds every turn's prompt (else each is a prefix of the final transcript)
    # scoring: (plan, final tokens [N, A, L], loss-seat turns, learns [N, A]) -> episode sequences [N, A_l, W] | None
    episode_seqs: Callable
    # (plan, policy, base, trainable, turns [T, N, A_l, ...], seqs, reference=False, width=None)
    #   -> (logprob, entropy, value) [T, N, A_l, M]
    score: Callable
    # (plan, (turns, adv, ret), seqs, epoch key, env_ids [n]) -> (turns, adv, ret, seqs) with a leading minibatch axis
    minibatches: Callable
    # (trainable, plan, policy, base, minibatch turns, adv, ret, hp, axis_name, seqs) -> (grads, metrics)
    grads: Callable
    check: Callable  # (plan, envs of a device) -> None: raise ConfigError for minibatches this path cannot cut
    # (prompt_len, generated, who: [T, N, A]) -> the length of each row its forwards read (train/lm/throughput.py)
    rows: Callable


# ---- minibatches --------------------------------------------------------------------------------------------

def turn_minibatches(plan: Plan, data, seqs, key: jax.Array, env_ids: jax.Array):
    """[T, n, ...] leaves -> [mb, T/mb, n, ...]: each env's turns shuffled by its own permutation."""
    del seqs
    if plan.num_minibatches == 1:  # one minibatch: order is irrelevant, and turn slices stay whole turns (skippable)
        return (*jax.tree.map(lambda x: x[None], data), None)
    num_turns = jax.tree.leaves(data)[0].shape[0]
    perms = jax.vmap(lambda i: jax.random.permutation(jax.random.fold_in(key, i), num_turns))(env_ids)  # [n, T]
    idx = perms.T  # [T, n]

    def split(x):
        x = jnp.take_along_axis(x, idx.reshape(idx.shape + (1,) * (x.ndim - 2)), axis=0)
        return x.reshape((plan.num_minibatches, num_turns // plan.num_minibatches) + x.shape[1:])

    return (*jax.tree.map(split, data), None)


def episode_minibatches(plan: Plan, data, seqs: jax.Array, key: jax.Array, env_ids: jax.Array):
    """[T, n, ...] leaves -> [mb, T, n/mb, ...] and seqs [n, ...] -> [mb, n/mb, ...]: whole episodes, shuffled."""
    mb, n_local = plan.num_minibatches, seqs.shape[0]
    order = jnp.arange(n_local) if mb == 1 else jax.random.permutation(jax.random.fold_in(key, env_ids[0]), n_local)

    def split(x):
        x = x[:, order].reshape((x.shape[0], mb, x.shape[1] // mb) + x.shape[2:])
        return jnp.moveaxis(x, 1, 0)

    return (*jax.tree.map(split, data), seqs[order].reshape((mb, n_local // mb) + seqs.shape[1:]))


# ---- what each path cannot split ------------------------------------------------------------------------------

def check_turn_slices(plan: Plan, n_local: int) -> None:
    mb = plan.num_minibatches
    if plan.num_microbatches > 1:
        raise ConfigError(f"config.num_microbatches: {plan.num_microbatches} needs an incremental rollout (a token "
                          f"game) and must divide each minibatch's envs (num_envs={n_local} / num_minibatches={mb} "
                          "per device)")
    if plan.num_turns % mb:
        raise ConfigError(f"config.num_minibatches: {mb} must divide num_turns ({plan.num_turns}): each minibatch "
                          "takes a slice of every episode's turns")


def check_whole_episodes(plan: Plan, n_local: int) -> None:
    mb, micro = plan.num_minibatches, plan.num_microbatches
    if n_local % mb:
        raise ConfigError(f"config.num_minibatches: {mb} must divide the envs of each device (num_envs={n_local}): "
                          "with incremental rollouts a minibatch is a set of whole episodes")
    if micro > 1 and n_local % (mb * micro):
        raise ConfigError(f"config.num_microbatches: {micro} needs an incremental rollout (a token game) and must "
                          f"divide each minibatch's envs (num_envs={n_local} / num_minibatches={mb} per device)")


def no_seqs(plan: Plan, final_tokens, train_turns, learns):
    """The re-read path scores turns, not episodes: no sequences."""
    return None


REREAD = RolloutPath(act=rollout_lib.act_reread, init_cache=rollout_lib.no_cache, keep_prompts=True,
                     episode_seqs=no_seqs, score=scoring.score_reread, minibatches=turn_minibatches,
                     grads=scoring.reread_grads, check=check_turn_slices, rows=throughput.turn_rows)
INCREMENTAL = RolloutPath(act=rollout_lib.act_incremental, init_cache=rollout_lib.init_cache, keep_prompts=False,
                          episode_seqs=scoring.episode_seqs, score=scoring.score_episodes,
                          minibatches=episode_minibatches, grads=scoring.incremental_grads,
                          check=check_whole_episodes, rows=throughput.episode_rows)


def rollout_path(plan: Plan) -> RolloutPath:
    """The path `make_plan` chose (`plan.incremental`: a token game with rollout.incremental on)."""
    return INCREMENTAL if plan.incremental else REREAD
