"""Turn-level credit on generated tokens: reward placement and token-level GAE (PPO with `credit="token"`).

An LM agent's action is a turn of M generated tokens; the env pays one scalar
per turn. Token-level PPO treats every generated token as a step: the turn
reward sits on the turn's last real token, every token has a value (the value
of the state in which it was chosen, as `LMPolicy.score` returns), and GAE runs
over the real tokens only.

Multi-turn chaining: lay a row's turns end to end, `[B, T, M] -> [B, T*M]`
(rewards from `place_turn_reward(turn_rewards [B, T], mask [B, T, M])`), and
mark episode ends with `dones`. The recursion then flows from a turn's first
token back into the previous turn's last token, and the last real token of a
row bootstraps from `bootstrap_value` (V of the state after the rollout).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.gae import gae
from jaxmarl_llm.algos.masked import where_mask


def last_token_mask(mask: jax.Array) -> jax.Array:
    """[..., M] -> [..., M] bool: True only at the last real token of each row (nowhere in an empty row)."""
    m = mask.astype(bool)
    idx = jnp.arange(m.shape[-1])
    last = jnp.max(jnp.where(m, idx, -1), axis=-1, keepdims=True)  # [..., 1], -1 for an empty row
    return m & (idx == last)


def place_turn_reward(reward: jax.Array, mask: jax.Array) -> jax.Array:
    """reward [...] , mask [..., M] -> [..., M]: the reward on each row's last real token, 0 elsewhere.

    A row with no real token (an inactive agent) gets nothing.
    """
    return jnp.where(last_token_mask(mask), reward[..., None], jnp.zeros((), reward.dtype))


def token_gae(
    rewards: jax.Array,  # [..., N] per-token rewards (turn reward on the last token, KL penalties, ...)
    values: jax.Array,  # [..., N] value of the state in which each token was chosen
    mask: jax.Array,  # [..., N] bool: real generated tokens
    bootstrap_value: jax.Array | None = None,  # [...] value after the row's last real token; None -> 0
    gamma: float | jax.Array = 1.0,  # a scalar, or [..., N]: the discount from each token to the next real one
    lam: float | jax.Array = 1.0,
    dones: jax.Array | None = None,  # [..., N] bool: the episode terminates after this (real) token
) -> tuple[jax.Array, jax.Array]:
    """GAE over the real tokens of each row: returns (advantages, returns), both [..., N], 0 where masked.

    Step k is the k-th real token of a row; masked tokens are skipped, not treated
    as steps (so a mask with holes still chains the tokens around them). The next
    value of the last real token is `bootstrap_value`; after a `dones` token the
    future is 0 and the recursion stops. For a time-limit truncation at a token,
    set `dones` there and add gamma * V(final state) to that token's reward: the
    TD error is then the truncated one exactly.

    Implementation: the real tokens of each row are moved to the front (stable,
    so order is kept), `gae.gae` runs on that prefix, and the result is put back.
    """
    m = mask.astype(bool)
    n = m.shape[-1]
    dtype = jnp.result_type(values.dtype, jnp.float32)
    r = where_mask(rewards.astype(dtype), m)
    v = where_mask(values.astype(dtype), m)
    d = jnp.zeros_like(m) if dones is None else m & dones.astype(bool)
    boot = jnp.zeros(m.shape[:-1], dtype) if bootstrap_value is None else bootstrap_value.astype(dtype)

    order = jnp.argsort(~m, axis=-1, stable=True)  # [..., N]: real tokens first, in order
    take = lambda x: jnp.take_along_axis(x, order, axis=-1)  # noqa: E731
    rc, vc, dc = take(r), take(v), take(d)
    gc = take(jnp.broadcast_to(jnp.asarray(gamma, dtype), m.shape))
    count = jnp.sum(m, axis=-1, keepdims=True)  # [..., 1]
    j = jnp.arange(n)
    valid = j < count
    is_last = j == count - 1
    next_v = jnp.concatenate([vc[..., 1:], jnp.zeros_like(vc[..., :1])], axis=-1)
    next_v = where_mask(jnp.where(is_last, boot[..., None], next_v), valid)
    ended = dc | is_last | ~valid  # padding: delta 0 and no carry, so advantage 0

    to_time = lambda x: jnp.moveaxis(x, -1, 0)  # noqa: E731  gae scans the leading axis
    adv_c, _ = gae(to_time(rc), to_time(vc), to_time(next_v), to_time(dc), to_time(ended), to_time(gc), lam)
    adv = jnp.take_along_axis(jnp.moveaxis(adv_c, 0, -1), jnp.argsort(order, axis=-1), axis=-1)
    adv = where_mask(adv, m)
    return adv, where_mask(adv + v, m)




def credit_to_own_turns(rewards: jax.Array, acted: jax.Array) -> jax.Array:
    """rewards, acted [T, ...] -> [T, ...]: each own turn's reward plus those arriving before the agent's next turn.

    A turn-based game seen as one agent's MDP: what happens while others move is the outcome of the agent's
    last own turn (as in `gae.own_turn_gae`). Rewards before the agent's first turn credit nothing.
    """
    acted_f = acted.astype(rewards.dtype)

    def backward(pending, x):
        r, a = x
        total = pending + r
        return (1.0 - a) * total, a * total

    _, credited = jax.lax.scan(backward, jnp.zeros_like(rewards[0]), (rewards, acted_f), reverse=True)
    return credited


def own_turn_token_gae(
    rewards: jax.Array,  # [T, ...] reward after each turn (0 once the episode is over)
    values: jax.Array,  # [T, ..., M] V of the state in which each generated token was chosen
    mask: jax.Array,  # [T, ..., M] bool: the agent's real generated tokens (empty rows where it did not act)
    gamma: float | jax.Array = 1.0,
    lam: float | jax.Array = 1.0,
    token_rewards: jax.Array | None = None,  # [T, ..., M] the part of each turn's reward paid to its tokens
    gamma_per_turn: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """Token-level GAE over an agent's own turns of one episode: (advantages, returns) [T, ..., M], 0 where masked.

    Every generated token is a step; a turn's credited reward (`credit_to_own_turns`) sits on its last real
    token; the tokens of the agent's successive turns chain into one sequence, and after its last token the
    future is worth 0 (the rollout runs every episode to its end). gamma and lam apply per token; with
    `gamma_per_turn`, gamma only between a turn's last token and the next turn (a reply's tokens undiscounted), so
    gamma=0 grades each reply alone while a penalty on its last token still reaches every token of it. With one
    token per turn both are `gae.own_turn_gae`.
    """
    m = mask.astype(bool)
    credited = credit_to_own_turns(rewards, m.any(-1))
    if token_rewards is None:
        token_r = place_turn_reward(credited, m)  # [T, ..., M]
    else:  # each token its own part, the rest of the turn's reward on its last token
        paid = jnp.where(m, token_rewards, 0.0)
        token_r = place_turn_reward(credited - paid.sum(-1), m) + paid
    seq = lambda x: jnp.moveaxis(x, 0, -2).reshape(x.shape[1:-1] + (-1,))  # noqa: E731  [T, ..., M] -> [..., T*M]
    if gamma_per_turn:
        gamma = jnp.where(last_token_mask(m), jnp.asarray(gamma, jnp.float32), 1.0)  # [T, ..., M]
        gamma = seq(gamma)
    adv, ret = token_gae(seq(token_r), seq(values), seq(m), None, gamma, lam)
    back = lambda x: jnp.moveaxis(x.reshape(x.shape[:-1] + (m.shape[0], m.shape[-1])), -2, 0)  # noqa: E731
    return back(adv), back(ret)
