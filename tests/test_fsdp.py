"""Model sharding (mesh.fsdp, ZeRO-3 over the frozen base): a data x fsdp mesh gives the numbers one device gives,
and each device holds 1/fsdp of the base.

The meshes are 2 x 4 and 4 x 2 (data x fsdp) of the 8 forced host devices (conftest); the batch is split over all
8 devices, so the data-dependent loops around the forwards (greedy decoding that stops per row) must agree over
each fsdp group (models/fsdp.py) or the gathers inside them would not line up.
"""

import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.envs.text.base import TextState
from jaxmarl_llm.models import config as model_config, fsdp
from jaxmarl_llm.models.lora import LoraConfig, init_lora
from jaxmarl_llm.models.sampling import generate
from jaxmarl_llm.models.transformer import forward, init_params, num_bytes, param_shapes
from jaxmarl_llm.parallel import mesh as mesh_lib
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import ConfigError, dpo_defaults, lm_rl_defaults, sft_defaults, validate_lm_rl
from jaxmarl_llm.train.lm.setup import build_tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_lm_rl import CharClassGame, _config  # noqa: E402

MESHES = [(2, 4), (4, 2)]  # data x fsdp
_ONE_DEVICE = {}  # one-device references, computed once per session


def _need_eight():
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 forced host devices (conftest)")


def test_param_specs_shard_each_matrix_on_its_largest_dividing_dimension():
    cfg = model_config.PRESETS["qwen3-8b"]
    specs = fsdp.param_specs(cfg, 8)
    layers = specs["layers"]
    assert specs["embed"] == P("fsdp") and specs["lm_head"] == P(None, "fsdp")  # the vocabulary
    assert layers["q"]["kernel"] == P(None, "fsdp")  # [N, 4096, 4096]: the first of equals; never the layer axis
    assert layers["k"]["kernel"] == P(None, "fsdp")  # [N, 4096, 1024]
    assert layers["gate"]["kernel"] == P(None, None, "fsdp") and layers["down"]["kernel"] == P(None, "fsdp")
    assert layers["attn_norm"] == P() and layers["q_norm"] == P() and specs["final_norm"] == P()  # vectors: whole
    # nothing divides 7 ways: every weight stays whole
    assert all(s == P() for s in jax.tree.leaves(fsdp.param_specs(cfg, 7), is_leaf=lambda x: isinstance(x, P)))
    # each device holds 1/8 of the base, up to the whole norm vectors
    leaves = lambda t: jax.tree.leaves(t, is_leaf=lambda x: isinstance(x, tuple))  # noqa: E731
    total = sum(math.prod(s) for s in leaves(param_shapes(cfg)))
    local = sum(math.prod(s) for s in leaves(fsdp.local_shapes(cfg, 8)))
    assert total / 8 <= local < total / 8 * 1.001


def _tiny():
    cfg = model_config.tiny("qwen3", vocab_size=96)
    params = jax.device_get(init_params(cfg, jax.random.PRNGKey(0), std=0.1))
    lora = jax.tree.map(lambda x: x + 0.02, init_lora(jax.random.PRNGKey(2), cfg, LoraConfig(rank=4)))
    return cfg, params, lora


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_sharded_logits_greedy_tokens_and_adapter_gradients_match_one_device(shape):
    _need_eight()
    cfg, params, lora = _tiny()
    tokens = jax.random.randint(jax.random.PRNGKey(1), (16, 12), 0, cfg.vocab_size)
    lengths = jnp.arange(16, dtype=jnp.int32) % 7 + 5
    stop = tuple(range(0, cfg.vocab_size, 4))  # rows stop at different steps: the decode loop must agree

    def run(p, lo, t, n):
        logits = forward(p, t, cfg)[0]
        greedy = generate(jax.random.PRNGKey(3), p, lo, t, n, cfg, max_new_tokens=10, temperature=0.0,
                          stop_ids=stop, lora_scale=2.0)
        # a loss that adds up over rows: the per-device gradients sum to the whole batch's
        loss = lambda a: jnp.square(forward(p, t, cfg, lora=a, lora_scale=2.0)[0]).mean((1, 2)).sum()  # noqa: E731
        return logits, greedy, jax.grad(loss)(lo)

    if "forward" not in _ONE_DEVICE:  # the one-device reference, shared by both meshes
        _ONE_DEVICE["forward"] = jax.jit(run)(params, lora, tokens, lengths)
    ref_logits, ref_greedy, ref_grads = _ONE_DEVICE["forward"]
    assert len(set(np.asarray(ref_greedy[2]).sum(-1).tolist())) > 2  # rows really stop at different lengths

    mesh = mesh_lib.make_mesh(8, shape[1])
    assert dict(mesh.shape) == {"data": shape[0], "fsdp": shape[1]}
    axes, specs = mesh_lib.batch_axes(mesh), fsdp.param_specs(cfg, shape[1])

    def sharded(p, lo, t, n):
        logits, greedy, grads = run(p, lo, t, n)
        return logits, greedy, jax.lax.psum(grads, axes)

    fn = jax.jit(mesh_lib.shard_over_data(sharded, mesh, (specs, P(), P(axes), P(axes)),
                                          (P(axes), P(axes), P())))
    logits, greedy, grads = fn(mesh_lib.put(params, mesh, specs), lora, tokens, lengths)
    np.testing.assert_allclose(logits, ref_logits, atol=2e-5, rtol=1e-5)
    np.testing.assert_array_equal(greedy[0], ref_greedy[0])  # greedy tokens
    np.testing.assert_array_equal(greedy[2], ref_greedy[2])  # where each row stopped
    np.testing.assert_allclose(greedy[1], ref_greedy[1], atol=2e-5)  # their log-probs
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads)):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-4)


@struct.dataclass
class RaggedState(TextState):
    limit: jax.Array  # [] int: the turn after which this game ends


class RaggedCharClassGame(CharClassGame):
    """CharClassGame (each agent is paid for its class of characters) over 1 to 3 turns, the count drawn per group
    at reset: the games of one device end at other turns than its fsdp neighbours', so the rollout's "every
    local game ended" skip and the scoring's per-turn skips must agree over the group."""

    def reset(self, key, params=None):
        state = RaggedState(**self._base_state(jnp.ones((self.num_agents,), bool)),
                            limit=jax.random.randint(key, (), 1, 4))
        return self.get_obs(state), state

    def _step(self, key, state, tokens, length, params):
        new, reward, _, trunc, info = super()._step(key, state, tokens, length, params)
        return new, reward, new.turn >= state.limit, trunc, info


def _one_update(shape, incremental: bool = True):
    """Adapters / value heads and metrics after one PPO update of the ragged game on a data x fsdp mesh."""
    d, f = shape
    config = _config("ppo", num_envs=16, num_turns=3)
    config.rollout.incremental = incremental
    config.mesh.num_devices, config.mesh.fsdp = d * f, f
    validate_lm_rl(config)
    trainer = lm_rl.make_train(config, env=RaggedCharClassGame(build_tokenizer(config.tokenizer)))
    mesh = mesh_lib.make_mesh(d * f, f)
    state = mesh_lib.put(trainer.init(jax.random.PRNGKey(1), trainer.hparams), mesh, trainer.state_specs)
    state, metrics = mesh_lib.sharded_chunk(trainer, mesh, 1)(state, trainer.hparams)
    return jax.device_get(state.trainable), jax.device_get(metrics)


@pytest.mark.parametrize("shape,incremental", [
    (MESHES[0], True),
    pytest.param(MESHES[1], True, marks=pytest.mark.slow),
    pytest.param(MESHES[0], False, marks=pytest.mark.slow),  # re-read turns: scoring's per-turn skips
], ids=lambda x: f"{x[0]}x{x[1]}" if isinstance(x, tuple) else ("kv_cache" if x else "re_read"))
def test_one_update_on_a_sharded_base_matches_one_device(shape, incremental):
    _need_eight()
    if incremental not in _ONE_DEVICE:
        _ONE_DEVICE[incremental] = _one_update((1, 1), incremental)
    (ref_tr, ref_m), (tr, m) = _ONE_DEVICE[incremental], _one_update(shape, incremental)
    assert 1.5 < float(ref_m["episode_turns"][0]) < 2.5  # games of 1, 2 and 3 turns
    for a, b in zip(jax.tree.leaves(ref_tr), jax.tree.leaves(tr)):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
    assert set(m) == set(ref_m)
    for k in ref_m:
        np.testing.assert_allclose(m[k], ref_m[k], atol=1e-5, rtol=1e-4, err_msg=k)
    moved = max(float(np.abs(v["b"]).max()) for v in tr["lora"].values())
    assert moved > 1e-4  # the update moved the adapters: the equality is not that of two fresh states


def test_base_argument_per_device_drops_by_the_fsdp_factor_and_the_backward_keeps_no_whole_layers():
    """memory_analysis of the compiled program (nothing runs): the base argument per device is 1/fsdp of it (up to
    the whole norm vectors), and a gradient through the sharded base keeps no stack of gathered layers alive
    (the layers are rematerialised: temp memory well under the base's size, which keeping them would exceed)."""
    _need_eight()
    cfg = model_config.tiny("qwen3", vocab_size=2048, hidden_size=256, intermediate_size=768, num_layers=8,
                            num_heads=4, num_kv_heads=2, head_dim=64)
    params = jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))
    lora = init_lora(jax.random.PRNGKey(2), cfg, LoraConfig(rank=4))
    tokens = jnp.zeros((8, 32), jnp.int32)
    whole = num_bytes(params)
    args = {}
    for f in (1, 8):  # two compiles; 2 and 4 ways divide it alike
        mesh = mesh_lib.make_mesh(8, f)
        specs = P() if f == 1 else fsdp.param_specs(cfg, f)
        fwd = jax.jit(mesh_lib.shard_over_data(lambda p, t: forward(p, t, cfg)[0], mesh, (specs, P()), P()))
        args[f] = fwd.lower(mesh_lib.put(params, mesh, specs), tokens).compile().memory_analysis().argument_size_in_bytes
        assert whole / f <= args[f] - tokens.nbytes < whole / f * 1.01, (f, args[f], whole)
    specs, axes = fsdp.param_specs(cfg, 8), mesh_lib.batch_axes(mesh)
    loss = lambda lo, p, t: forward(p, t, cfg, lora=lo, lora_scale=2.0)[0].mean()  # noqa: E731
    grad = jax.jit(mesh_lib.shard_over_data(lambda lo, p, t: jax.lax.psum(jax.grad(loss)(lo, p, t), axes), mesh,
                                            (P(), specs, P(axes)), P()))
    temp = grad.lower(lora, mesh_lib.put(params, mesh, specs), tokens).compile().memory_analysis().temp_size_in_bytes
    assert temp < whole / 2, (temp, whole)


def _rl_config(**kw):
    c = lm_rl_defaults()
    c.num_envs, c.group_size = 16, 2
    for k, v in kw.items():
        group, _, key = k.rpartition(".")
        (c[group] if group else c)[key] = v
    return c


@pytest.mark.parametrize("kw,what", [
    ({"mesh.num_devices": 8, "mesh.fsdp": 3}, "does not divide mesh.num_devices = 8"),
    ({"mesh.num_devices": 8, "mesh.fsdp": 0}, "must be an integer >= 1"),
    ({"mesh.num_devices": 8, "mesh.fsdp": -2}, "must be an integer >= 1"),
    ({"mesh.num_devices": 8, "mesh.fsdp": 4, "num_envs": 8}, "each of the 2 data rows"),
    ({"mesh.num_devices": 8, "mesh.fsdp": 4, "train_base": True}, "train_base=True trains it"),
])
def test_config_errors_name_mesh_fsdp_in_one_line(kw, what):
    _need_eight()
    with pytest.raises(ConfigError) as err:
        validate_lm_rl(_rl_config(**kw))
    message = str(err.value)
    assert "mesh.fsdp" in message and what in message and "\n" not in message, message
    validate_lm_rl(_rl_config(**{"mesh.num_devices": 8, "mesh.fsdp": 4}))  # the same run, sharded correctly


def test_every_lm_trainer_has_mesh_fsdp_and_the_mlp_trainer_not():
    from jaxmarl_llm.train.config import mlp_ppo_defaults

    for defaults in (lm_rl_defaults(), sft_defaults(), dpo_defaults()):
        assert defaults.mesh.fsdp == 1
    assert "fsdp" not in mlp_ppo_defaults().mesh  # --config.mesh.fsdp=2 there: "config.mesh.fsdp: unknown key"
    with pytest.raises(ValueError, match="fsdp=3 must divide"):
        mesh_lib.make_mesh(8, 3)
    assert mesh_lib.make_mesh(1, 1).axis_names == ("data",)  # fsdp=1: the 1-D mesh of before


# ---- SFT and DPO over a sharded base (LoRA adapters; the base frozen) -----------------------------------------

def _sft_teacher():
    import test_sft

    return test_sft._config(train_base=False)


def _sft_policy():  # the model plays (the sampler's loop decisions agree over the fsdp group)
    import test_sft

    return test_sft._policy_config(train_base=False, min_return=-100.0)  # every episode kept: the update moves


def _dpo_pairs():
    import test_dpo_trainer

    return test_dpo_trainer._config()


def _dpo_game():  # pairs played in the game by the policy and a noisy teacher
    import test_dpo_trainer

    c = test_dpo_trainer._config(source="game", env_name="text/guess_number", players="teacher:0.0,policy",
                                 batch_size=8)
    c.env_kwargs = {"capacity": 256, "max_action_tokens": 12, "max_turns": 2}
    c.num_turns, c.model.max_position_embeddings = 2, 256
    return c


def _two_updates(make_config, kind: str, shape):
    """Adapters and metrics after two updates of an SFT / DPO config on a data x fsdp mesh."""
    from jaxmarl_llm.train import dpo, sft
    from jaxmarl_llm.train.config import validate_dpo, validate_sft

    d, f = shape
    config = make_config()
    config.mesh.num_devices, config.mesh.fsdp = d * f, f
    (validate_sft if kind == "sft" else validate_dpo)(config)
    trainer = (sft if kind == "sft" else dpo).make_train(config)
    mesh = mesh_lib.make_mesh(d * f, f)
    state = mesh_lib.put(trainer.init(jax.random.PRNGKey(1), trainer.hparams), mesh, trainer.state_specs)
    state, metrics = mesh_lib.sharded_chunk(trainer, mesh, 2)(state, trainer.hparams)
    return jax.device_get(state.trainable), jax.device_get(metrics)


@pytest.mark.parametrize("make_config,kind", [
    (_sft_teacher, "sft"),
    pytest.param(_sft_policy, "sft", marks=pytest.mark.slow),
    (_dpo_pairs, "dpo"),
    pytest.param(_dpo_game, "dpo", marks=pytest.mark.slow),
], ids=["sft_teacher", "sft_policy", "dpo_pairs", "dpo_game"])
def test_sft_and_dpo_on_a_sharded_base_match_one_device(make_config, kind):
    """mesh.fsdp=4 on 2 x 4 devices: the adapters and every metric of two updates equal one device's (the base
    whole). (The same forward's per-device memory: the test above.)"""
    _need_eight()
    (ref_tr, ref_m), (tr, m) = _two_updates(make_config, kind, (1, 1)), _two_updates(make_config, kind, MESHES[0])
    moved = max(float(np.abs(v["b"]).max()) for v in ref_tr["lora"].values())
    assert moved > 1e-4  # the updates moved the adapters
    # Adam's step is ~lr * g / |g|: an entry whose gradient is at rounding level turns the float reordering of the
    # gathers into a visible difference of its step. So: almost every entry to 1e-4, all to 1e-2 of the largest.
    close = []
    for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(ref_tr)[0], jax.tree.leaves(tr)):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-2 * moved, err_msg=jax.tree_util.keystr(path))
        close.append(np.isclose(b, a, rtol=1e-4, atol=2e-5).ravel())
    assert np.mean(np.concatenate(close)) > 0.99
    assert set(m) == set(ref_m)
    for k in ref_m:
        # DPO's accuracy counts margins > 0; before any step the policy is the reference and every margin is
        # rounding noise around 0, so its first value is not compared
        got, want = (m[k][1:], ref_m[k][1:]) if k == "accuracy" else (m[k], ref_m[k])
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4, err_msg=k)


def test_held_out_evaluation_on_a_sharded_base_plays_the_same_games_as_one_device():
    """eval_episodes > 0 with mesh.fsdp > 1: `evaluate_trainer` plays sharded (evaluation/evaluate.py evaluate_sharded),
    13 held-out secrets of configs/guess_number.py:scratch (constrained guesses: every move is a number) over 8
    devices (padded to 16, the extra dropped); with random adapters, the same results as the whole base on one
    device."""
    _need_eight()
    from jaxmarl_llm.run import entry, trainers
    from jaxmarl_llm.run.cli import load_config_file

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = []
    for fsdp_ways in (1, 4):
        config = load_config_file(os.path.join(root, "configs", "guess_number.py:scratch"))
        config.mesh.num_devices, config.mesh.fsdp, config.eval_episodes = 8, fsdp_ways, 13
        config.env_kwargs.info_bonus = 1.0  # a return that is the bits every guess found: it reads the moves
        trainer, _, _, _ = entry.build(config)
        state = trainer.init(jax.random.PRNGKey(1), trainer.hparams)
        noise = lambda x: x + 0.5 * jax.random.normal(jax.random.PRNGKey(2), x.shape, x.dtype)  # noqa: E731
        state = state.replace(trainable={**state.trainable, "lora": jax.tree.map(noise, state.trainable["lora"])})
        results.append(trainers.heldout_eval(config, trainer, state))
    one, sharded = results
    assert one["episodes"] == sharded["episodes"] == 13
    assert one["format_error_rate"] == 0.0 and 1.0 < one["mean_turns"]  # real games of several guesses
    assert 0.0 < one["episode_return"] < 1.0  # some of each secret's bits found, by these adapters' guesses
    for k in one:
        np.testing.assert_allclose(sharded[k], one[k], rtol=1e-6, err_msg=k)  # (NaN equals NaN here)


def test_cli_sft_on_a_sharded_base_runs_a_chunk_of_several_updates(tmp_path):
    """experiments/train.py, LoRA SFT of configs/sft_guess_number.py at mesh.fsdp=4 on 8 host devices, its 4 updates
    in one chunk: XLA:CPU deadlocked there (an fsdp group's all-gather against an all-device all-reduce, run in
    different orders) until the CLI orders the collectives (run/cli.py order_cpu_collectives). A child process
    with only the device flag, as a user runs it."""
    import subprocess

    from jaxmarl_llm.run.cli import CPU_ORDERED_COLLECTIVES_FLAG, order_cpu_collectives

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    done = subprocess.run(
        [sys.executable, os.path.join(root, "experiments", "train.py"), "--config=configs/sft_guess_number.py",
         "--config.train_base=False", "--config.mesh.fsdp=4", "--config.eval_episodes=0",
         "--config.total_episodes=64", f"--config.run.out_dir={tmp_path / 'run'}", "--config.run.progress=False"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'update': 4" in done.stdout and os.path.isdir(tmp_path / "run" / "model")
    # the flag is added only for sharded runs, and never over the user's own setting of the option
    flags = {"XLA_FLAGS": "--a"}
    order_cpu_collectives(sft_defaults(), flags)
    assert flags["XLA_FLAGS"] == "--a"
    c = sft_defaults()
    c.mesh.fsdp = 2
    order_cpu_collectives(c, flags)
    assert flags["XLA_FLAGS"] == f"--a {CPU_ORDERED_COLLECTIVES_FLAG}"
    mine = {"XLA_FLAGS": "--xla_cpu_enable_concurrency_optimized_scheduler=true"}
    order_cpu_collectives(c, mine)
    assert mine["XLA_FLAGS"] == "--xla_cpu_enable_concurrency_optimized_scheduler=true"


@pytest.mark.parametrize("defaults,extra", [(sft_defaults, {}), (dpo_defaults, {"train_base": True})])
def test_sft_and_dpo_refuse_training_a_sharded_base_in_one_line(defaults, extra):
    """SFT's default trains every weight (train_base=True): with mesh.fsdp > 1 that is one line naming the fix."""
    _need_eight()
    import test_dpo_trainer

    from jaxmarl_llm.train.config import validate_dpo, validate_sft

    c = defaults() if defaults is sft_defaults else test_dpo_trainer._config()
    c.mesh.num_devices, c.mesh.fsdp = 8, 4
    for k, v in extra.items():
        c[k] = v
    with pytest.raises(ConfigError) as err:
        (validate_sft if defaults is sft_defaults else validate_dpo)(c)
    message = str(err.value)
    assert "mesh.fsdp" in message and "train_base=False" in message and "\n" not in message, message


def test_qwen3_8b_config_validates_up_to_the_checkpoint_and_its_table_is_computed():
    _need_eight()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from configs import qwen3_8b_fsdp

    config = qwen3_8b_fsdp.get_config()
    with pytest.raises(ConfigError, match="config.model.checkpoint"):
        validate_lm_rl(config)  # every other key passes on 8 devices (data = 1 row of fsdp = 8)
    assert qwen3_8b_fsdp.memory_table() in qwen3_8b_fsdp.__doc__
    assert "base weights (sharded over fsdp)                    1.91 GiB     15.26 GiB" in qwen3_8b_fsdp.__doc__
