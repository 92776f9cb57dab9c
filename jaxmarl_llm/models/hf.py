"""Hugging Face checkpoints <-> our params, and PEFT adapter export. No network: local folders only.

    config_from_hf(hf_config: dict, dtype=...) -> ModelConfig
    load_pretrained(path, dtype="float32", param_dtype=None) -> (cfg, params)
    save_pretrained(path, cfg, params)                 a folder `transformers` loads
    save_peft_adapter(path, cfg, lora, lora_cfg, base_model_name_or_path="")
                                                       one agent's adapter, PEFT LoRA format

A folder holds config.json and model.safetensors, or a sharded
model.safetensors.index.json. Every error names the file or tensor and what
was expected. Kernels are stored transposed ([in, out]) relative to torch
Linear weights ([out, in]) and stacked over layers.
"""

from __future__ import annotations

import json
import os
from typing import Any

import ml_dtypes
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from jaxmarl_llm.errors import MissingFileError
from jaxmarl_llm.models.config import FAMILIES, ModelConfig
from jaxmarl_llm.models.transformer import PROJECTIONS, Params, param_shapes

ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
_HF_PROJ = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
            "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}
_HF_NORM = {"attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm",
            "q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm"}
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


class CheckpointError(ValueError):
    """A checkpoint folder that does not match what the config says it should hold."""


# ----------------------------------------------------------------------------- config


def _first(x):
    return x[0] if isinstance(x, (list, tuple)) and x else x


def _ids(x) -> tuple[int, ...]:
    if x is None:
        return ()
    return tuple(int(i) for i in x) if isinstance(x, (list, tuple)) else (int(x),)


def config_from_hf(hf: dict[str, Any], dtype: str = "float32", param_dtype: str | None = None) -> ModelConfig:
    """Translate a HF config.json dict (transformers 4.x or 5.x layout) into a ModelConfig."""
    family = hf.get("model_type")
    if family not in FAMILIES:
        raise CheckpointError(f"config.json model_type={family!r} is not supported; expected one of {FAMILIES}")
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
        if key not in hf:
            raise CheckpointError(f"config.json has no {key!r} (model_type={family})")
    if hf.get("use_sliding_window"):
        raise CheckpointError("config.json use_sliding_window=true: sliding-window attention is not supported")
    if family in ("llama", "qwen3") and hf.get("attention_bias"):
        raise CheckpointError(f"config.json attention_bias=true is not supported for {family} (o_proj bias)")
    if hf.get("mlp_bias"):
        raise CheckpointError("config.json mlp_bias=true is not supported")
    if hf.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"config.json hidden_act={hf['hidden_act']!r}: only 'silu' (SwiGLU) is supported")

    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    theta = hf.get("rope_theta", rope.get("rope_theta", 10000.0))
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type in (None, "default"):
        scaling = None
    elif rope_type == "llama3":
        scaling = (float(rope["factor"]), float(rope["low_freq_factor"]), float(rope["high_freq_factor"]),
                   int(rope["original_max_position_embeddings"]))
    else:
        raise CheckpointError(f"config.json rope type {rope_type!r} is not supported; expected 'default' or 'llama3'")

    heads = hf["num_attention_heads"]
    return ModelConfig(
        family=family,
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        intermediate_size=hf["intermediate_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=hf.get("num_key_value_heads") or heads,
        head_dim=hf.get("head_dim") or hf["hidden_size"] // heads,
        rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        rope_theta=float(theta),
        rope_scaling=scaling,
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        qkv_bias=family == "qwen2",
        qk_norm=family == "qwen3",
        max_position_embeddings=int(hf.get("max_position_embeddings", 4096)),
        dtype=dtype,
        param_dtype=param_dtype or dtype,
        bos_token_id=_first(hf.get("bos_token_id")),
        eos_token_id=_first(hf.get("eos_token_id")),
        pad_token_id=_first(hf.get("pad_token_id")),
        stop_token_ids=_ids(hf.get("eos_token_id")),
    )


def config_to_hf(cfg: ModelConfig) -> dict[str, Any]:
    """The config.json `transformers` needs to rebuild this model."""
    rope: dict[str, Any] = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if cfg.rope_scaling is not None:
        f, lo, hi, old = cfg.rope_scaling
        rope = {"rope_type": "llama3", "rope_theta": cfg.rope_theta, "factor": f, "low_freq_factor": lo,
                "high_freq_factor": hi, "original_max_position_embeddings": old}
    out = {
        "architectures": [ARCHITECTURES[cfg.family]],
        "model_type": cfg.family,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_parameters": rope,
        "tie_word_embeddings": cfg.tie_embeddings,
        "attention_bias": False,
        "max_position_embeddings": cfg.max_position_embeddings,
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": list(cfg.stop_token_ids) if len(cfg.stop_token_ids) > 1 else cfg.eos_token_id,
        "pad_token_id": cfg.pad_token_id,
        "dtype": cfg.param_dtype,
    }
    if cfg.family == "llama":
        out["mlp_bias"] = False
    return out


# ----------------------------------------------------------------------------- tensors


def shard_path(folder: str, index: str, name: str, fname: str) -> str:
    """Where the index's `weight_map[name] = fname` lives: a file inside `folder`. An index may not point outside
    the folder it came with (`../x.safetensors`, an absolute path); checked by name, so a Hugging Face cache's
    symlinked shards (inside the snapshot folder, resolving to ../../blobs) still load."""
    root = os.path.abspath(folder)
    full = os.path.abspath(os.path.join(root, fname)) if isinstance(fname, str) else root
    if full == root or os.path.commonpath([full, root]) != root:
        raise CheckpointError(f"{index}: weight_map entry {name!r} -> {fname!r} is outside the model folder; "
                              "put the shard in the folder and list it by its file name")
    return os.path.join(folder, fname)


class _Reader:
    """Tensors by name across one or many safetensors files."""

    def __init__(self, path: str):
        single = os.path.join(path, "model.safetensors")
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            weight_map = _read_json(index).get("weight_map")
            if not isinstance(weight_map, dict):
                raise CheckpointError(f"{index}: no 'weight_map' object; write the index transformers saves")
            self.where = {name: shard_path(path, index, name, fname) for name, fname in weight_map.items()}
            for fname in sorted(set(self.where.values())):
                if not os.path.exists(fname):
                    raise MissingFileError(f"shard {fname!r} listed in {index!r} does not exist")
        elif os.path.exists(single):
            self.where = {name: single for name in _safe_open(single).keys()}
        else:
            raise MissingFileError(f"no model.safetensors or model.safetensors.index.json in {path!r}")
        self._open: dict[str, Any] = {}
        self.used: set[str] = set()

    def get(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in self.where:
            raise CheckpointError(f"checkpoint is missing tensor {name!r} (expected shape {shape})")
        fname = self.where[name]
        if fname not in self._open:
            self._open[fname] = _safe_open(fname)
        try:
            x = self._open[fname].get_tensor(name)
        except Exception as err:  # safetensors raises its own error types for a file cut short
            raise CheckpointError(f"{fname}: cannot read tensor {name!r} ({err}); the file looks truncated or "
                                  "corrupt: copy or download it again") from None
        if tuple(x.shape) != tuple(shape):
            raise CheckpointError(f"tensor {name!r} in {os.path.basename(fname)} has shape {tuple(x.shape)}, "
                                  f"expected {tuple(shape)}")
        self.used.add(name)
        return x

    def unused(self) -> list[str]:
        return sorted(n for n in self.where if n not in self.used and not n.endswith(_IGNORED_SUFFIXES))


def _hf_names(cfg: ModelConfig, i: int) -> dict[str, str]:
    """Our per-layer leaf path -> HF tensor name for layer i."""
    pre = f"model.layers.{i}."
    names = {}
    for ours, hf in _HF_NORM.items():
        if ours in ("q_norm", "k_norm") and not cfg.qk_norm:
            continue
        names[ours] = pre + hf + ".weight"
    for p in PROJECTIONS:
        names[f"{p}/kernel"] = pre + _HF_PROJ[p] + ".weight"
        if cfg.qkv_bias and p in ("q", "k", "v"):
            names[f"{p}/bias"] = pre + _HF_PROJ[p] + ".bias"
    return names


def _get_leaf(tree: dict, path: str):
    for part in path.split("/"):
        tree = tree[part]
    return tree


def _set_leaf(tree: dict, path: str, value) -> None:
    parts = path.split("/")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def load_params(path: str, cfg: ModelConfig, host: bool = False) -> Params:
    """Read every tensor cfg expects from the folder, check shapes, and stack layers. host=True: numpy arrays in
    host memory (a base to be sharded over devices is never whole on one), else jax arrays on the default device."""
    import jax.numpy as jnp

    reader = _Reader(path)
    shapes = param_shapes(cfg)
    dt = np.dtype(ml_dtypes.bfloat16) if cfg.param_dtype == "bfloat16" else np.dtype(np.float32)

    def cast(x):
        return np.asarray(x).astype(dt)

    params: Params = {
        "embed": cast(reader.get("model.embed_tokens.weight", shapes["embed"])),
        "final_norm": cast(reader.get("model.norm.weight", shapes["final_norm"])),
        "layers": {},
    }
    if not cfg.tie_embeddings:
        params["lm_head"] = cast(reader.get("lm_head.weight", shapes["lm_head"][::-1]).T)
    elif "lm_head.weight" in reader.where:
        reader.used.add("lm_head.weight")  # tied checkpoints sometimes store the copy too
    per_layer: dict[str, list[np.ndarray]] = {}
    for i in range(cfg.num_layers):
        for ours, hf in _hf_names(cfg, i).items():
            shape = _get_leaf(shapes["layers"], ours)[1:]
            if ours.endswith("/kernel"):
                x = reader.get(hf, shape[::-1]).T  # torch [out, in] -> ours [in, out]
            else:
                x = reader.get(hf, shape)
            per_layer.setdefault(ours, []).append(cast(x))
    for ours, xs in per_layer.items():
        _set_leaf(params["layers"], ours, np.stack(xs))
    extra = reader.unused()
    if extra:
        raise CheckpointError(f"checkpoint has tensors this {cfg.family} config does not use: {extra[:5]}"
                              f"{' ...' if len(extra) > 5 else ''}")
    if host:
        return params
    import jax

    return jax.tree.map(jnp.asarray, params)


def read_hf_config(path: str) -> dict[str, Any]:
    fname = os.path.join(path, "config.json")
    if not os.path.exists(fname):
        raise MissingFileError(f"no config.json in {path!r}; expected a Hugging Face model folder")
    return _read_json(fname)


def _read_json(fname: str) -> dict[str, Any]:
    """A model folder's JSON file; a broken one is a CheckpointError naming the file and the place."""
    try:
        with open(fname, encoding="utf-8") as f:
            out = json.load(f)
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{fname}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise CheckpointError(f"{fname}: not UTF-8 text (byte {err.start}); expected a JSON file") from None
    if not isinstance(out, dict):
        raise CheckpointError(f"{fname}: expected a JSON object, got {type(out).__name__}")
    return out


def _safe_open(fname: str):
    """safe_open, with a header that cannot be read (a truncated or corrupt file) named as a CheckpointError."""
    try:
        return safe_open(fname, "numpy")
    except Exception as err:  # safetensors' SafetensorError is not exported under one stable name
        raise CheckpointError(f"{fname}: not a readable safetensors file ({err}); the file looks truncated or "
                              "corrupt: copy or download it again") from None


def load_pretrained(path: str, dtype: str = "float32", param_dtype: str | None = None,
                    host: bool = False) -> tuple[ModelConfig, Params]:
    """Config and params from a local HF folder; weights stored in param_dtype (default: dtype); host: numpy
    arrays (load_params)."""
    cfg = config_from_hf(read_hf_config(path), dtype=dtype, param_dtype=param_dtype)
    return cfg, load_params(path, cfg, host)


def _to_numpy(x) -> np.ndarray:
    x = np.asarray(x)
    return np.ascontiguousarray(x)


def save_pretrained(path: str, cfg: ModelConfig, params: Params) -> None:
    """Write config.json + model.safetensors that `transformers.AutoModelForCausalLM` loads."""
    os.makedirs(path, exist_ok=True)
    tensors: dict[str, np.ndarray] = {
        "model.embed_tokens.weight": _to_numpy(params["embed"]),
        "model.norm.weight": _to_numpy(params["final_norm"]),
    }
    if not cfg.tie_embeddings:
        tensors["lm_head.weight"] = _to_numpy(params["lm_head"]).T
    for i in range(cfg.num_layers):
        for ours, hf in _hf_names(cfg, i).items():
            x = _to_numpy(_get_leaf(params["layers"], ours)[i])
            tensors[hf] = x.T if ours.endswith("/kernel") else x
    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config_to_hf(cfg), f, indent=2)


# ----------------------------------------------------------------------------- PEFT


def save_peft_adapter(path: str, cfg: ModelConfig, lora: Params, rank: int, alpha: float,
                      base_model_name_or_path: str = "") -> None:
    """Write one agent's adapter (leaves [N, in, r] / [N, r, out], no agent axis) as PEFT LoRA.

    PEFT stores lora_A.weight [r, in] and lora_B.weight [out, r] per module and
    scales by lora_alpha / r, as we do.
    """
    os.makedirs(path, exist_ok=True)
    tensors = {}
    for target, ab in lora.items():
        a, b = _to_numpy(ab["a"]).astype(np.float32), _to_numpy(ab["b"]).astype(np.float32)
        if a.shape[0] != cfg.num_layers:
            raise CheckpointError(f"adapter {target!r} has leading axis {a.shape[0]}, expected num_layers="
                                  f"{cfg.num_layers}; pass one agent's adapter (index the agent axis first)")
        for i in range(cfg.num_layers):
            pre = f"base_model.model.model.layers.{i}.{_HF_PROJ[target]}"
            tensors[pre + ".lora_A.weight"] = np.ascontiguousarray(a[i].T)
            tensors[pre + ".lora_B.weight"] = np.ascontiguousarray(b[i].T)
    save_file(tensors, os.path.join(path, "adapter_model.safetensors"), metadata={"format": "pt"})
    hf_targets = [_HF_PROJ[t].split(".")[-1] for t in lora]
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model_name_or_path,
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "target_modules": hf_targets,
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "use_rslora": False,
        "use_dora": False,
        "modules_to_save": None,
    }
    with open(os.path.join(path, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)
