"""What an LM policy returns when it acts: one `Sample` per row (lm_policy.py, transcripts.py).

`LMPolicy.score(...).logprobs` at the action positions equals `Sample.logprobs` for the same tokens, so PPO
ratios start at exactly one.
"""

from __future__ import annotations

from typing import NamedTuple

import jax


class Sample(NamedTuple):
    tokens: jax.Array  # [B, M] int32 action tokens
    logprobs: jax.Array  # [B, M] float32 under the sampling distribution
    mask: jax.Array  # [B, M] bool, real (not padding) action tokens
    value: jax.Array  # [B] value of the observation (before acting)
