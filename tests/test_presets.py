"""Real-size architectures by name (`--config.model.preset`): the published sizes, built through the config path."""

import math

import jax
import pytest

from jaxmarl_llm.models.config import PRESETS, param_shapes
from jaxmarl_llm.models.transformer import init_params
from jaxmarl_llm.policies.lm_policy import preset_config
from jaxmarl_llm.tokenizers import CharTokenizer
from jaxmarl_llm.train.config import ConfigError, lm_rl_defaults, validate_lm_rl

# (total, non-embedding) parameters as the model cards state them (tied embeddings counted once)
PUBLISHED = {
    "qwen3-0.6b": (596_049_920, 440_467_456),  # "0.6B, 0.44B non-embedding"
    "qwen3-1.7b": (1_720_574_976, 1_409_410_048),  # "1.7B, 1.4B non-embedding"
    "qwen2.5-0.5b": (494_032_768, 357_898_112),  # "0.49B, 0.36B non-embedding"
    "llama-3.2-1b": (1_235_814_400, 973_146_112),  # "1.23B"
    "qwen3-8b": (8_190_735_360, 6_946_075_648),  # "8.2B, 6.95B non-embedding"
}


def _count(shapes) -> int:
    return sum(math.prod(s) for s in jax.tree.leaves(shapes, is_leaf=lambda x: isinstance(x, tuple)))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_presets_have_the_published_sizes(name):
    cfg = PRESETS[name]
    total = _count(param_shapes(cfg))
    embedding = cfg.vocab_size * cfg.hidden_size * (1 if cfg.tie_embeddings else 2)
    assert (total, total - embedding) == PUBLISHED[name]


def test_a_preset_config_builds_that_architecture_in_its_dtype():
    """The config path (`model.preset`, `model.dtype`) gives the preset's exact shapes, vocabulary included, and
    weights in bf16 (shapes only: nothing of 0.6B parameters is allocated here)."""
    config = lm_rl_defaults()
    config.model.preset, config.model.dtype, config.mesh.num_devices = "qwen3-0.6b", "bfloat16", 1
    validate_lm_rl(config)
    cfg = preset_config(config.model, CharTokenizer())
    assert cfg.vocab_size == 151936 and cfg.num_layers == 28 and cfg.tie_embeddings
    assert cfg.replace(dtype="float32", param_dtype="float32") == PRESETS["qwen3-0.6b"]
    params = jax.eval_shape(lambda: init_params(cfg, jax.random.PRNGKey(0)))
    shapes = jax.tree.map(lambda x: x.shape, params)
    assert shapes == jax.tree.map(tuple, param_shapes(cfg), is_leaf=lambda x: isinstance(x, tuple))
    assert {str(x.dtype) for x in jax.tree.leaves(params)} == {"bfloat16"}
    assert _count(param_shapes(cfg)) == PUBLISHED["qwen3-0.6b"][0]


@pytest.mark.parametrize("preset,checkpoint,match", [
    ("qwen3-0.5b", "", "config.model.preset: 'qwen3-0.5b' is not a preset; choose one of"),
    ("qwen3-0.6b", "/some/folder", "config.model.preset: a preset builds a random model"),
])
def test_preset_errors_name_the_key(preset, checkpoint, match):
    config = lm_rl_defaults()
    config.model.preset, config.model.checkpoint, config.mesh.num_devices = preset, checkpoint, 1
    with pytest.raises(ConfigError, match=match):
        validate_lm_rl(config)
