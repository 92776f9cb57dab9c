"""Decoder LMs (Llama 3.x / Qwen2 / Qwen3) as pure functions over params pytrees, with LoRA and sampling.

    from jaxmarl_llm.models import ModelConfig, PRESETS, tiny, init_params, forward, load_pretrained
    cfg, params = load_pretrained("/path/to/hf_folder")          # or: cfg = tiny("qwen3"); params = init_params(cfg, key)
    logits, hidden, cache = forward(params, tokens, cfg, lora=None, cache=None)
    tokens, logprobs, mask = generate(key, params, lora, prompt, prompt_lengths, cfg, max_new_tokens=32)

(`mlp.py`, the small MLP nets, is separate and owned by the trainer side.)
"""

from jaxmarl_llm.models.config import PRESETS, ModelConfig, tiny
from jaxmarl_llm.models.hf import CheckpointError, load_pretrained, save_peft_adapter, save_pretrained
from jaxmarl_llm.models.lora import LoraConfig, export_peft, forward_agents, init_lora, merge
from jaxmarl_llm.models.sampling import SamplingConfig, generate, generate_with_state, sampling_logprobs
from jaxmarl_llm.models.transformer import forward, forward_jit, init_cache, init_params

__all__ = [
    "PRESETS", "ModelConfig", "tiny", "CheckpointError", "load_pretrained", "save_pretrained", "save_peft_adapter",
    "LoraConfig", "export_peft", "forward_agents", "init_lora", "merge", "SamplingConfig", "generate",
    "generate_with_state", "sampling_logprobs", "forward", "forward_jit", "init_cache", "init_params",
]
