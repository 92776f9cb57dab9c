"""tokens_per_second and mfu: the model-FLOP count against XLA's own count of a forward, and the figures a run
writes to metrics.csv."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.models import config as model_config
from jaxmarl_llm.models.flops import forward_flops
from jaxmarl_llm.models.transformer import forward, init_params
from jaxmarl_llm.parallel.peak import peak_flops
from jaxmarl_llm.run import entry
from jaxmarl_llm.run.cli import load_config_file
from jaxmarl_llm.run.metrics_log import read_csv
from jaxmarl_llm.train.lm.throughput import episode_rows, turn_rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("length", [16, 64])
def test_forward_flops_match_xla_cost_analysis(length):
    """Our count of a float32 forward (every position's logits) against the FLOPs XLA counts in the compiled
    program. XLA also counts the norms, rotary, softmax and the masked half of each attention block, so it may
    only be a little higher."""
    cfg = model_config.tiny("qwen3", vocab_size=512, hidden_size=256, intermediate_size=768, num_layers=1,
                            num_heads=4, num_kv_heads=2, head_dim=64)  # one layer: XLA counts a loop's body once
    params = init_params(cfg, jax.random.PRNGKey(0))
    tokens = jnp.zeros((4, length), jnp.int32)
    cost = jax.jit(lambda p, t: forward(p, t, cfg)[0]).lower(params, tokens).compile().cost_analysis()
    xla = (cost[0] if isinstance(cost, list) else cost)["flops"]
    ours = forward_flops(cfg, 4 * length, 4 * length**2, 4 * length)
    assert ours <= xla <= 1.1 * ours, (ours, xla)


def test_rows_count_what_each_path_reads():
    """Re-read: a row per acting turn (prompt + reply); incremental: a row per seat, its longest read."""
    prompt_len = jnp.array([[[5, 0]], [[0, 9]], [[12, 0]]])  # [T=3, N=1, A=2]: seat 0 acts at turns 0 and 2
    generated = jnp.array([[[2, 0]], [[0, 1]], [[3, 0]]])
    who = prompt_len > 0
    np.testing.assert_array_equal(turn_rows(prompt_len, generated, who), [[[7, 0]], [[0, 10]], [[15, 0]]])
    np.testing.assert_array_equal(episode_rows(prompt_len, generated, who), [[15, 10]])


@pytest.mark.parametrize("spec", ["tic_tac_toe.py:scratch", "sft_tic_tac_toe.py"])
def test_runs_write_tokens_per_second_and_mfu(tmp_path, spec):
    """An LM RL run and an SFT run log tokens/s and MFU every update; MFU is a share of the measured peak."""
    config = load_config_file(os.path.join(ROOT, "configs", spec))
    config.num_envs, config.total_episodes, config.mesh.num_devices = 4, 8, 1
    if "in_graph_eval" in config:
        config.in_graph_eval.every = 0
    config.run.update(out_dir=str(tmp_path), progress=False, tensorboard=False, plot=False)
    entry.train_from_config(config)
    rows = read_csv(os.path.join(tmp_path, "metrics.csv"))
    assert len(rows) == 2
    assert peak_flops(config.model.dtype)[0] > 1e9
    for row in rows:
        assert float(row["tokens_loss"]) > 0 and float(row["tokens_per_second"]) > 0
        assert 0.0 < float(row["mfu"]) < 1.0, row["mfu"]


def test_flop_counts_of_billion_parameter_models_do_not_overflow_inside_a_program():
    """Counted inside the update (traced): a 1.7B model's per-token count exceeds int32."""
    cfg = model_config.PRESETS["qwen3-1.7b"]
    tokens = jnp.float32(100.0)
    inside = jax.jit(lambda t: forward_flops(cfg, t, t * 50.0, t))(tokens)
    np.testing.assert_allclose(float(inside), forward_flops(cfg, 100.0, 5000.0, 100.0), rtol=1e-6)
