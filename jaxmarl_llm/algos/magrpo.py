"""Multi-agent GRPO (MAGRPO) advantages for cooperative games with one joint reward.

A agents each draw G samples per group (a group is one prompt / env seed); the k-th samples of all agents play
together, so there are G joint rewards per group, R[..., k]. Every agent's k-th sample gets the group advantage
of R[..., k]:

    adv[a, ..., k] = (R[..., k] - mean_k R) / (std_k R + eps)

(normalize_std=False: the Dr.GRPO variant, no division). The LM trainer's `--config.algo=magrpo` takes the team
return (every seat's summed) as R (algos/lm_objective.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.grpo import group_advantages


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
