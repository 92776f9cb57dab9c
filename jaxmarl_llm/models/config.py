"""Decoder-LM configuration: one frozen dataclass for Llama 3.x, Qwen2/2.5 and Qwen3.

The three families differ only in a few switches:

    llama   untied or tied embeddings, optional "llama3" rope scaling
    qwen2   bias on q/k/v projections
    qwen3   per-head RMSNorm on q and k (before RoPE), explicit head_dim

Presets: `PRESETS["qwen3-0.6b"]`, `PRESETS["qwen3-1.7b"]`, `PRESETS["qwen2.5-0.5b"]`, `PRESETS["llama-3.2-1b"]`,
`PRESETS["qwen3-8b"]`
(real sizes) and `tiny(family)` (hidden 64, 2 layers, vocab 256) for tests.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from jaxmarl_llm.models.attention import BACKENDS as ATTENTION_BACKENDS
from jaxmarl_llm.models.kernels.blocks import MIN_BLOCK

FAMILIES = ("llama", "qwen2", "qwen3")


def valid_attention_block(block: int) -> bool:
    """A Pallas tile size: 0 (the platform's default) or a power of two >= 16."""
    return isinstance(block, int) and (block == 0 or (block >= MIN_BLOCK and block & (block - 1) == 0))


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    family: str = "qwen3"  # one of FAMILIES (the HF `model_type`)
    vocab_size: int = 256
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    # Llama-3 rope scaling: (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings) or None.
    rope_scaling: tuple[float, float, float, int] | None = None
    tie_embeddings: bool = False
    qkv_bias: bool = False  # Qwen2 family
    qk_norm: bool = False  # Qwen3 family
    max_position_embeddings: int = 4096
    dtype: str = "float32"  # compute dtype: "float32" or "bfloat16"
    param_dtype: str = "float32"  # storage dtype of the weights
    attention_backend: str = "xla"  # "xla" | "pallas" | "cudnn" | "auto" (models/attention.py, docs/attention.md)
    attention_block: int = 128  # full-sequence forwards (no cache) attend in causal query blocks of this size (0: one)
    attention_block_q: int = 0  # "pallas" query / key tile sizes (powers of two >= 16); 0: the platform's default
    attention_block_k: int = 0
    scan_unroll: int | bool = 1  # unroll of the scan over layers (True: fully unrolled, slower compile)
    # rematerialise each layer under a gradient: the backward keeps each layer's input [tokens, D] instead of its
    # ~(4 D + 2 Q + 2 KV + 3 F) intermediates per token (19x less at Qwen3-0.6B) and runs the layer again
    remat: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = None
    stop_token_ids: tuple[int, ...] = ()  # every end-of-turn id the checkpoint lists (pass as stop_ids)

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"family={self.family!r} is not supported; expected one of {FAMILIES}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads}")
        if self.dtype not in ("float32", "bfloat16") or self.param_dtype not in ("float32", "bfloat16"):
            raise ValueError("dtype/param_dtype must be 'float32' or 'bfloat16', "
                             f"got {self.dtype!r}/{self.param_dtype!r}")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention_backend={self.attention_backend!r}; expected one of {ATTENTION_BACKENDS}")
        for name in ("attention_block_q", "attention_block_k"):
            if not valid_attention_block(getattr(self, name)):
                raise ValueError(f"{name}={getattr(self, name)} must be 0 (the platform's default) or a power of two >= 16")

    @property
    def compute_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def weight_dtype(self):
        return jnp.dtype(self.param_dtype)

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def replace(self, **kw: Any) -> "ModelConfig":
        return dataclasses.replace(self, **kw)


def tiny(family: str = "qwen3", **kw: Any) -> ModelConfig:
    """A test-sized model of `family` (hidden 64, 2 layers, vocab 256)."""
    base = dict(family=family, vocab_size=256, hidden_size=64, intermediate_size=128, num_layers=2,
                num_heads=4, num_kv_heads=2, head_dim=16)
    if family == "qwen2":
        base.update(qkv_bias=True, rope_theta=1_000_000.0)
    elif family == "qwen3":
        base.update(qk_norm=True, head_dim=32, rope_theta=1_000_000.0)
    elif family == "llama":
        base.update(rope_theta=500_000.0, rope_scaling=(8.0, 1.0, 4.0, 64))
    base.update(kw)
    return ModelConfig(**base)


PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")


def projection_shapes(cfg: ModelConfig) -> dict[str, tuple[int, int]]:
    """(in, out) of each linear in a layer: what LoRA adapters and HF loading check against."""
    d, f = cfg.hidden_size, cfg.intermediate_size
    return {"q": (d, cfg.q_size), "k": (d, cfg.kv_size), "v": (d, cfg.kv_size), "o": (cfg.q_size, d),
            "gate": (d, f), "up": (d, f), "down": (f, d)}


def param_shapes(cfg: ModelConfig) -> dict[str, Any]:
    """The exact shape of every parameter leaf (a pytree of tuples)."""
    n = cfg.num_layers
    layers: dict[str, Any] = {"attn_norm": (n, cfg.hidden_size), "mlp_norm": (n, cfg.hidden_size)}
    for name, (i, o) in projection_shapes(cfg).items():
        layers[name] = {"kernel": (n, i, o)}
        if cfg.qkv_bias and name in ("q", "k", "v"):
            layers[name]["bias"] = (n, o)
    if cfg.qk_norm:
        layers["q_norm"] = (n, cfg.head_dim)
        layers["k_norm"] = (n, cfg.head_dim)
    shapes: dict[str, Any] = {"embed": (cfg.vocab_size, cfg.hidden_size), "layers": layers,
                              "final_norm": (cfg.hidden_size,)}
    if not cfg.tie_embeddings:
        shapes["lm_head"] = (cfg.hidden_size, cfg.vocab_size)
    return shapes


PRESETS: dict[str, ModelConfig] = {
    "qwen3-8b": ModelConfig(  # too big for one 16 GiB device in bf16: shard it (mesh.fsdp, configs/qwen3_8b_fsdp.py)
        family="qwen3", vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_layers=36,
        num_heads=32, num_kv_heads=8, head_dim=128, rope_theta=1_000_000.0, tie_embeddings=False,
        qk_norm=True, max_position_embeddings=40960, bos_token_id=151643, eos_token_id=151645,
        stop_token_ids=(151645, 151643)),
    "qwen3-1.7b": ModelConfig(
        family="qwen3", vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_layers=28,
        num_heads=16, num_kv_heads=8, head_dim=128, rope_theta=1_000_000.0, tie_embeddings=True,
        qk_norm=True, max_position_embeddings=40960, bos_token_id=151643,
        eos_token_id=151645, stop_token_ids=(151645, 151643)),
    "qwen3-0.6b": ModelConfig(
        family="qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_layers=28,
        num_heads=16, num_kv_heads=8, head_dim=128, rope_theta=1_000_000.0, tie_embeddings=True,
        qk_norm=True, max_position_embeddings=40960, bos_token_id=151643,
        eos_token_id=151645, stop_token_ids=(151645, 151643)),
    "qwen2.5-0.5b": ModelConfig(
        family="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864, num_layers=24,
        num_heads=14, num_kv_heads=2, head_dim=64, rope_theta=1_000_000.0, tie_embeddings=True,
        qkv_bias=True, max_position_embeddings=32768, bos_token_id=151643,
        eos_token_id=151643, stop_token_ids=(151643,)),
    "llama-3.2-1b": ModelConfig(
        family="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_layers=16,
        num_heads=32, num_kv_heads=8, head_dim=64, rope_theta=500_000.0, rope_scaling=(32.0, 1.0, 4.0, 8192),
        tie_embeddings=True, rms_norm_eps=1e-5, max_position_embeddings=131072,
        bos_token_id=128000, eos_token_id=128001, stop_token_ids=(128001, 128008, 128009)),
}
