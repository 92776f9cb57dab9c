"""LoRA adapters, stacked on a leading agent axis over one shared, frozen base.

    LoraConfig(rank=16, alpha=32.0, targets=("q", "k", "v", "o", "gate", "up", "down"))
    init_lora(key, cfg, lcfg, num_agents=None) -> lora   leaves [A, N, in, r] ("a"), [A, N, r, out] ("b")
    forward_agents(params, lora, tokens [A, B, T], cfg, lcfg, **kw) -> per-agent `forward` outputs
    merge(params, lora, cfg, lcfg) -> params with W + (alpha/r) A @ B (one agent's adapter)
    agent(lora, i) -> one agent's adapter (no agent axis)
    export_peft(path, cfg, lora, lcfg, agent_index=None)  PEFT folder that `peft` loads

B starts at zero, so a fresh adapter reproduces the base exactly. Only the
LoRA pytree is trained: build the optimizer over it (`optax.adam(lr).init(lora)`)
and differentiate the loss with respect to it; the base `params` are a closed-over
constant. The reference policy for KL terms is `forward(..., lora=None)`: the same
base weights with adapters off, so no second copy exists.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp

from jaxmarl_llm.models.config import ModelConfig
from jaxmarl_llm.models.transformer import PROJECTIONS, Params, forward, projection_shapes


@dataclasses.dataclass(frozen=True)
class LoraConfig:
    rank: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = PROJECTIONS

    def __post_init__(self):
        bad = [t for t in self.targets if t not in PROJECTIONS]
        if bad:
            raise ValueError(f"LoRA targets {bad} are unknown; expected a subset of {PROJECTIONS}")
        if self.rank <= 0:
            raise ValueError(f"LoRA rank must be positive, got {self.rank}")

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


@functools.partial(jax.jit, static_argnames=("cfg", "lcfg", "num_agents", "dtype"))
def init_lora(key: jax.Array, cfg: ModelConfig, lcfg: LoraConfig, num_agents: int | None = None,
              dtype: Any = jnp.float32) -> Params:
    """Fresh adapters: A ~ U(-1/sqrt(in), 1/sqrt(in)) (PEFT's default), B = 0."""
    lead = () if num_agents is None else (num_agents,)
    shapes = projection_shapes(cfg)
    out = {}
    for target, k in zip(lcfg.targets, jax.random.split(key, len(lcfg.targets))):
        d_in, d_out = shapes[target]
        bound = d_in ** -0.5
        a = jax.random.uniform(k, (*lead, cfg.num_layers, d_in, lcfg.rank), jnp.float32, -bound, bound)
        out[target] = {"a": a.astype(dtype), "b": jnp.zeros((*lead, cfg.num_layers, lcfg.rank, d_out), dtype)}
    return out


def agent(lora: Params, i: int) -> Params:
    """One agent's adapter from a stacked tree."""
    return jax.tree.map(lambda x: x[i], lora)


def forward_agents(params: Params, lora: Params, tokens: jax.Array, cfg: ModelConfig, lcfg: LoraConfig,
                   cache: dict | None = None, **kw: Any):
    """`forward` per agent: vmap over lora (and tokens [A, B, T], cache) with the base shared."""

    def one(lo, tok, c):
        return forward(params, tok, cfg, lora=lo, lora_scale=lcfg.scale, cache=c, **kw)

    return jax.vmap(one, in_axes=(0, 0, None if cache is None else 0))(lora, tokens, cache)


forward_agents_jit = jax.jit(forward_agents, static_argnames=("cfg", "lcfg"))


@functools.partial(jax.jit, static_argnames=("cfg", "lcfg"))
def merge(params: Params, lora: Params, cfg: ModelConfig, lcfg: LoraConfig) -> Params:
    """Base params with one agent's adapter folded into the kernels (for export or fast serving)."""
    layers = dict(params["layers"])
    for target, ab in lora.items():
        delta = lcfg.scale * jnp.einsum("nir,nro->nio", ab["a"].astype(jnp.float32), ab["b"].astype(jnp.float32))
        kernel = layers[target]["kernel"]
        layers[target] = {**layers[target], "kernel": (kernel.astype(jnp.float32) + delta).astype(kernel.dtype)}
    return {**params, "layers": layers}


def num_bytes(lora: Params) -> int:
    return sum(int(x.size) * x.dtype.itemsize for x in jax.tree.leaves(lora))


def export_peft(path: str, cfg: ModelConfig, lora: Params, lcfg: LoraConfig, agent_index: int | None = None,
                base_model_name_or_path: str = "") -> None:
    """Write one agent's adapter as adapter_config.json + adapter_model.safetensors."""
    from jaxmarl_llm.models.hf import save_peft_adapter

    one = lora if agent_index is None else agent(lora, agent_index)
    save_peft_adapter(path, cfg, one, lcfg.rank, lcfg.alpha, base_model_name_or_path)
