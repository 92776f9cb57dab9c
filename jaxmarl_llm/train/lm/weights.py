"""The frozen base and what trains on it, shared by the LM trainers: which weights a forward runs, how the base is
sharded over `fsdp` devices (SFT, DPO), and the float32 copy a run that trains every weight steps."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.models import fsdp as fsdp_lib


def split_weights(trainable, base, train_base: bool) -> tuple[Any, Any]:
    """(base params, {"lora": adapters} or None) of a trainable tree: the trained base itself, or the
    frozen `base["model"]` plus the adapters."""
    if train_base:
        return trainable["params"], None
    return base["model"], {"lora": trainable["lora"]}


def base_specs(cfg, fsdp: int, data: str = "rows") -> dict:
    """The base argument's sharding over `fsdp` devices (LoRA SFT, DPO): the model's weights as models/fsdp
    shards them, the file's `data` (SFT rows, DPO pairs) whole on every device."""
    return {"model": fsdp_lib.param_specs(cfg, fsdp), data: P()}


def float32_master(params) -> Any:
    """A float32 copy of the model's weights, for training all of them: the optimizer steps float32 weights (a
    bfloat16 model computes in bfloat16 from them; models/transformer.py casts at each use)."""
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)
