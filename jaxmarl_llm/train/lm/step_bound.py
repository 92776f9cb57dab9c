"""A bound on how far one update moves the policy: the KL of its step on the batch it learnt from.

With one epoch of one minibatch (the LM default) PPO's clip never acts: the ratio is 1 at the only gradient step,
so nothing bounds the step but the lr. Adam's step is normalised per weight, and two updates that push the same
way add up (its momentum): measured on the calculator, one such step moved where every reply put its `*` (`calc:
583*9`, three digits before it where two belong) and every episode broke its format at once.
`config.max_step_kl` scores the batch once more under the stepped weights and, when KL(rollout policy || stepped
policy) on its tokens exceeds the bound, scales the policy's step back by sqrt(bound / KL) (a KL grows as the
step's square), as TRPO's line search would in one try. The critic's step is kept whole; Adam's moments are as
the full step left them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos import kl
from jaxmarl_llm.algos.ppo import mesh_sum
from jaxmarl_llm.train.lm.plan import LMHParams, Plan, Turns

CRITIC_KEYS = ("critic", "value_head")  # trainable parts that are not the policy (never scaled; the critic's Adam)


def bounded_step(plan: Plan, score, policy, base, before: dict, after: dict, turns: Turns, seqs,
                 hp: LMHParams, axis_name: str | None) -> tuple[dict, dict]:
    """(trainable, metrics): `after` with the policy's step from `before` held to KL <= hp.max_step_kl on
    `turns`' tokens (`score` = the rollout path's scorer). Metrics: `step_kl` (the full step's) and `step_scale`."""
    logprob, _, _ = score(plan, policy, base, after, turns, seqs)  # [T, N, A_l, M] under the stepped weights
    step_kl = mesh_sum(kl.mean_kl(turns.logprob, jax.lax.stop_gradient(logprob), turns.token_mask(), kind="k3",
                                  axis_name=axis_name), axis_name)
    scale = jnp.minimum(1.0, jnp.sqrt(hp.max_step_kl / jnp.maximum(step_kl, 1e-30)))
    # b + 1.0 * (a - b) is not a in floating point: a step the bound does not reach is kept as it is
    held = {k: v if k in CRITIC_KEYS else jax.tree.map(lambda b, a: jnp.where(scale < 1.0, b + scale * (a - b), a),
                                                      before[k], v)
            for k, v in after.items()}
    return held, {"step_kl": step_kl, "step_scale": scale}
