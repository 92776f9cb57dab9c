"""The small protocol every trainer uses to talk to an agent's policy.

A policy is stateless: its weights come in as two pytrees, `params` (shared,
frozen base; may be None for small nets) and `trainable` (what the optimizer
updates; stacked on a leading agent axis outside, one agent's slice inside).
Trainers `jax.vmap` `sample` / `score` over agents with in_axes (None, 0, ...).

    sample(key, params, trainable, obs_tokens [B, L], obs_lengths [B]) -> Sample
    score(params, trainable, tokens [B, T], lengths [B], action_mask [B, T])
        -> (logprobs [B, T], entropy [B, T], values [B, T])

`score(...).logprobs` at the action positions equals `Sample.logprobs` for the
same tokens: PPO ratios start at exactly one.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax


class Sample(NamedTuple):
    tokens: jax.Array  # [B, M] int32 action tokens
    logprobs: jax.Array  # [B, M] float32 under the sampling distribution
    mask: jax.Array  # [B, M] bool, real (not padding) action tokens
    value: jax.Array  # [B] value of the observation (before acting)


@runtime_checkable
class Policy(Protocol):
    def init_trainable(self, key: jax.Array, num_agents: int | None = None) -> Any: ...

    def sample(self, key: jax.Array, params: Any, trainable: Any, obs_tokens: jax.Array,
               obs_lengths: jax.Array) -> Sample: ...

    def score(self, params: Any, trainable: Any, tokens: jax.Array, lengths: jax.Array,
              action_mask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]: ...
