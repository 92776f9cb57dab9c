"""Model FLOPs of a decoder's forward, counted the way MFU is (PaLM, appendix B): the matrix multiplies a token
needs, nothing a kernel, padding or a recomputation adds.

    forward_flops(cfg, tokens, squares, head_tokens)

  * projections: 2 x (q, k, v, o, gate, up, down weights) per token and layer;
  * attention: a token at position p multiplies its query by p keys and p values: 4 x q_size x p per layer, so a
    row of s tokens read from the start costs 2 x q_size x s^2 per layer (`squares` = the sum of s^2 over rows);
  * the LM head: 2 x hidden x vocab, only where logits are taken (`head_tokens`: sampled or scored tokens).
A training step costs 3 forwards (the backward is two). LoRA's rank-r products are left out (< 1% at rank 16).
Every token counts through every layer, as in the convention: a forward that reads only a few positions
(`forward(read_at=)`, a constrained move's loss) runs its last layer there only, so it shows a higher MFU than
its matrix units ran (spread's tiny 2-layer loss: about 1.6x).
"""

from __future__ import annotations

from jaxmarl_llm.models.config import ModelConfig, projection_shapes


def projection_flops_per_token(cfg: ModelConfig) -> int:
    """2 x the projection weights of every layer: the forward FLOPs of one token, attention and head aside."""
    return 2 * cfg.num_layers * sum(i * o for i, o in projection_shapes(cfg).values())


def forward_flops(cfg: ModelConfig, tokens, squares, head_tokens):
    """FLOPs of forwards that read `tokens` tokens in rows whose squared lengths sum to `squares` and take logits
    at `head_tokens` of them (numbers or arrays: traced inside an update)."""
    # float factors: a count of billions overflows the int32 a Python int becomes inside a traced update
    attention = float(2 * cfg.num_layers * cfg.q_size) * squares
    return (float(projection_flops_per_token(cfg)) * tokens + attention
            + float(2 * cfg.hidden_size * cfg.vocab_size) * head_tokens)
