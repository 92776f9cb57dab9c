"""The test-sized LM configs: one place to say what "tiny" is.

The LM tests train or play a model of this size, so their time goes to compiling, not computing; a test that
needs another size says only how it differs (`model=`, `lora=`, or `TINY_MODEL | {...}`)."""

from __future__ import annotations

from typing import Any

import ml_collections

# the model: one layer, two query heads over one KV head (config.model's keys; models.config.tiny takes them too)
TINY_MODEL: dict[str, Any] = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "num_heads": 2,
                              "num_kv_heads": 1, "head_dim": 16}
# its adapters: rank 4 on the query and value projections (config.lora's keys)
TINY_LORA: dict[str, Any] = {"rank": 4, "alpha": 8.0, "targets": ("q", "v")}


def apply_fields(c: ml_collections.ConfigDict, fields: dict[str, Any]) -> ml_collections.ConfigDict:
    """Set each field of `c` (in place, and returned): a dict value updates that sub-config (e.g.
    `in_graph_eval={"every": 1}` keeps its other keys), anything else replaces the field."""
    for k, v in fields.items():
        if isinstance(v, dict):
            c[k].update(v)
        else:
            c[k] = v
    return c


def tiny_lm_rl(env_name: str | None = None, tokenizer: str | None = None, env_kwargs: dict[str, Any] | None = None,
               *, model: dict[str, Any] | None = None, lora: dict[str, Any] | None = None,
               **fields: Any) -> ml_collections.ConfigDict:
    """lm_rl_defaults() on one device with the tiny model and adapters: `env_name`, `tokenizer` and `env_kwargs`
    where given (None keeps the default), `model` / `lora` updating TINY_MODEL / TINY_LORA (e.g.
    `model={"max_position_embeddings": 64}`), then `fields` as apply_fields sets them."""
    from jaxmarl_llm.train.config import lm_rl_defaults  # here: importing TINY_MODEL loads no trainer code

    c = lm_rl_defaults()
    if env_name is not None:
        c.env_name = env_name
    if tokenizer is not None:
        c.tokenizer = tokenizer
    if env_kwargs is not None:
        c.env_kwargs = env_kwargs
    c.model.update({**TINY_MODEL, **(model or {})})
    c.lora.update({**TINY_LORA, **(lora or {})})
    c.mesh.num_devices = 1
    return apply_fields(c, fields)
