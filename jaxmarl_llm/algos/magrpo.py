"""Multi-agent GRPO (MAGRPO) advantages for cooperative games with one joint reward.

A agents each draw G samples per group (a group is one prompt / env seed);
the env scores *combinations* of samples with one joint reward. Output
advantages have the agent axis first, `[A, ..., G]`: entry [a, ..., i] is the
advantage of agent a's sample i, ready for `grpo.grpo_loss` with each agent's
token log-probs `[A, ..., G, M]`.

aligned: the k-th samples of all agents play together, so there are G joint
    rewards per group, R[..., k]. Every agent's k-th sample gets the group
    advantage of R[..., k]:
        adv[a, ..., k] = (R[..., k] - mean_k R) / (std_k R + eps).

cross: every combination is played, G^A joint rewards R[..., i_0, ..., i_{A-1}]
    (the last A axes; axis a holds agent a's sample index; `cross_combinations`
    lists them in this order). Agent a's sample i is credited with its
    marginal, the mean joint reward over all samples of the other agents,
        m_a[..., i] = mean_{i_b, b != a} R[..., i_0, ..., i_{a-1}, i, i_{a+1}, ...],
    group-normalized over agent a's own G samples:
        adv[a, ..., i] = (m_a[..., i] - mean_i m_a) / (std_i m_a + eps).
    (mean_i m_a is the mean of all G^A rewards, the same for every agent.)

With normalize_std=False both modes give the Dr.GRPO variant (no division).
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.algos.grpo import group_advantages


def cross_combinations(num_agents: int, group_size: int) -> np.ndarray:
    """int [G**A, A]: row c is the sample index of each agent in combination c.

    The order is C order, so flat joint rewards [..., G**A] in this order reshape
    to the cross layout [..., G, ..., G] (A axes).
    """
    grids = np.indices((group_size,) * num_agents).reshape(num_agents, -1)
    return grids.T.astype(np.int32)


def aligned_advantages(
    rewards: jax.Array,  # [..., G] joint reward of the k-th samples of all agents
    num_agents: int,
    *,
    normalize_std: bool = True,
    eps: float = 1e-4,
    ddof: int = 1,
) -> jax.Array:
    """[A, ..., G]: the group advantage of each aligned joint reward, the same for every agent."""
    adv = group_advantages(rewards, normalize_std=normalize_std, eps=eps, ddof=ddof)
    return jnp.broadcast_to(adv, (num_agents, *adv.shape))


def cross_marginals(rewards: jax.Array, num_agents: int) -> jax.Array:
    """[..., G, ..., G] (last num_agents axes) -> [A, ..., G]: each agent's per-sample mean joint reward."""
    lead = rewards.ndim - num_agents
    if lead < 0:
        raise ValueError(f"cross rewards need {num_agents} agent axes, got shape {rewards.shape}")
    agent_axes = tuple(range(lead, rewards.ndim))
    return jnp.stack([jnp.mean(rewards, axis=tuple(x for x in agent_axes if x != lead + a)) for a in range(num_agents)])


def cross_advantages(
    rewards: jax.Array,  # [..., G, ..., G] one axis of G per agent, last
    num_agents: int,
    *,
    normalize_std: bool = True,
    eps: float = 1e-4,
    ddof: int = 1,
) -> jax.Array:
    """[A, ..., G]: each agent's marginal reward per sample, group-normalized over its own G samples."""
    return group_advantages(cross_marginals(rewards, num_agents), normalize_std=normalize_std, eps=eps, ddof=ddof)


def magrpo_advantages(
    rewards: jax.Array,  # aligned: [..., G]; cross: [..., G, ..., G]
    num_agents: int,
    mode: Literal["aligned", "cross"] = "aligned",
    **kw,
) -> jax.Array:
    """[A, ..., G]: dispatch on mode (see module doc for the exact definitions)."""
    if mode == "aligned":
        return aligned_advantages(rewards, num_agents, **kw)
    if mode == "cross":
        return cross_advantages(rewards, num_agents, **kw)
    raise ValueError(f"unknown MAGRPO mode {mode!r}; expected aligned or cross")
