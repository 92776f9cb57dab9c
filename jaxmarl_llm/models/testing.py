"""Tiny random `transformers` models saved to a local folder: the reference for parity tests and benches.

Needs torch + transformers (test/bench extras). Nothing is downloaded.

    build_hf_model(family, path, **overrides) -> torch model (eval, float32), saved at path
"""

from __future__ import annotations

from typing import Any

TINY_HF = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)


def hf_config(family: str, **overrides: Any):
    import transformers

    kw: dict[str, Any] = dict(TINY_HF)
    if family == "llama":
        cls = transformers.LlamaConfig
        kw.update(rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    elif family == "qwen2":
        cls = transformers.Qwen2Config
        kw.update(rope_theta=1_000_000.0)
    elif family == "qwen3":
        cls = transformers.Qwen3Config
        kw.update(head_dim=32, rope_theta=1_000_000.0)
    else:
        raise ValueError(f"unknown family {family!r}")
    kw.update(overrides)
    return cls(**kw)


def build_hf_model(family: str, path: str | None = None, seed: int = 0, init_std: float = 0.1, **overrides: Any):
    """A random float32 HF causal LM of `family`; saved as safetensors at `path` when given.

    init_std is larger than HF's 0.02 so that logits are peaked and greedy
    decoding has no near-ties.
    """
    import torch
    import transformers

    cfg = hf_config(family, initializer_range=init_std, **overrides)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
    with torch.no_grad():  # norms start at one; perturb them so their loading is tested too
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    if path is not None:
        model.save_pretrained(path)
    return model
