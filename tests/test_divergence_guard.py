"""A run that diverges without a NaN stops: past a `config.stop` bound (the trained parameters'
norm growth, approx_kl, value_loss) or at a non-finite metric the runner writes the metrics up to that update, saves
no checkpoint of the diverged chunk (the earlier ones stay byte for byte), and raises DivergenceError naming the
metric, the update and the last checkpoint kept; the command line prints that one line and exits with status 3.

The runs are a stand-in trainer (test_run_safety.py's counter, with parameters that blow up on cue) with
spread_mlp's run group; the last test (slow) is the real MLP trainer at lr=1e6 from the command line."""

import math
import os
import re

import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.errors import DivergenceError
from jaxmarl_llm.parallel.mesh import sharded_chunk
from jaxmarl_llm.run.cli import main_guard
from jaxmarl_llm.run.metrics_log import read_csv
from jaxmarl_llm.run.runner import global_norm, run_training
from jaxmarl_llm.train.config import (ConfigError, dpo_defaults, lm_rl_defaults, mlp_ppo_defaults, sft_defaults,
                                      validate_dpo, validate_lm_rl, validate_mlp_ppo, validate_sft)
from test_run_safety import SPREAD_MLP, _cli, _run_config, _snapshot

NEVER = 10**9


class BlowUp:
    """The runner's smallest trainer with parameters: ones(4) (norm 2), multiplied by `factor` at every update from
    `grow_at` on; value_loss / approx_kl are `big` from `metric_at` on (1.0 / 0.01 before); team_return is NaN
    from `nan_at` on. Compiles in milliseconds."""

    hparams = {"step": np.float32(1.0)}
    state_specs = P()

    def __init__(self, num_updates: int, grow_at: int = NEVER, factor: float = 1e3, metric_at: int = NEVER,
                 big: float = 1e14, nan_at: int = NEVER):
        self.num_updates = num_updates
        self.grow_at, self.factor, self.metric_at, self.big, self.nan_at = grow_at, factor, metric_at, big, nan_at

    def init(self, key, hp):
        return {"params": jnp.ones((4,), jnp.float32), "step": jnp.zeros((), jnp.int32)}

    def update(self, state, hp, axis_name=None):
        step = state["step"] + 1
        params = state["params"] * jnp.where(step >= self.grow_at, self.factor, 1.0)
        late = step >= self.metric_at
        metrics = {"team_return": jnp.where(step >= self.nan_at, jnp.nan, step.astype(jnp.float32)),
                   "value_loss": jnp.where(late, self.big, 1.0), "approx_kl": jnp.where(late, self.big, 0.01)}
        return {"params": params, "step": step}, metrics


def _train(config, trainer: BlowUp) -> dict:
    return run_training(config, trainer, sharded_chunk, 8, trainable=lambda state: state["params"])


def _config(out_dir, per_chunk: int = 1):
    config = _run_config(str(out_dir))  # a checkpoint after every chunk, the last 2 kept
    config.run.updates_per_chunk = per_chunk
    config.run.tensorboard = config.run.plot = False
    return config


def _updates(out_dir) -> list[int]:
    return [int(r["update"]) for r in read_csv(os.path.join(str(out_dir), "metrics.csv"))]


def _checkpoints(out_dir) -> list[int]:
    return sorted(int(name) for name in os.listdir(os.path.join(str(out_dir), "checkpoints")) if name.isdigit())


def _ckpt_dir(out_dir) -> str:
    return os.path.abspath(os.path.join(str(out_dir), "checkpoints"))


# ---------------------------------------------------------------- the parameter norm


def test_param_norm_blow_up_stops_before_saving_and_keeps_the_checkpoints(tmp_path):
    """3 healthy updates (checkpoints 2 and 3), then a resume whose update 4 multiplies the parameters by 1000:
    the run stops at update 4, the checkpoints are the same files, metrics.csv shows the blow-up row."""
    out_dir = tmp_path / "run"
    _train(_config(out_dir), BlowUp(3))
    before = _snapshot(os.path.join(out_dir, "checkpoints"))
    assert _checkpoints(out_dir) == [2, 3]

    config = _config(out_dir)
    config.resume = "True"
    with pytest.raises(DivergenceError) as err:
        _train(config, BlowUp(6, grow_at=4))
    message = str(err.value)
    assert message == (
        "divergence: param_norm_growth = 1000 at update 4 > bound 100 (config.stop.max_param_norm_growth: "
        f"parameter norm 2000, 2 at update 3); the last good checkpoint is update 3 in {_ckpt_dir(out_dir)}; continue "
        "from it with a lower lr (or max_grad_norm): --config.resume=True --config.resume_force=True --config.lr=...")
    assert (err.value.metric, err.value.update, err.value.last_checkpoint) == ("param_norm_growth", 4, 3)
    assert _snapshot(os.path.join(out_dir, "checkpoints")) == before  # bytes and mtimes: nothing saved or deleted
    assert _updates(out_dir) == [1, 2, 3, 4]

    # the last good checkpoint goes on (here: a trainer that does not blow up) from update 3
    result = _train(config, BlowUp(5))
    assert int(result["state"]["step"]) == 5 and _updates(out_dir) == [1, 2, 3, 4, 5]


def test_growth_is_measured_from_the_start_and_a_fresh_blow_up_names_no_checkpoint(tmp_path):
    """x10 per update from update 1: 10, 100 are within the bound of 100 (checkpoints 1, 2), 1000 at update 3 is
    not; a blow-up in the first chunk has no checkpoint to name."""
    with pytest.raises(DivergenceError, match=r"param_norm_growth = 1000 at update 3 > bound 100 .* the last good "
                                              r"checkpoint is update 2 in "):
        _train(_config(tmp_path / "a"), BlowUp(6, grow_at=1, factor=10.0))
    assert _checkpoints(tmp_path / "a") == [1, 2]

    with pytest.raises(DivergenceError) as err:
        _train(_config(tmp_path / "b"), BlowUp(6, grow_at=1, factor=1e30))
    message = str(err.value)
    assert message.startswith("divergence: param_norm_growth = 1e+30 at update 1 > bound 100 ")
    assert message.endswith("; no checkpoint was saved yet; start again with a lower lr (or max_grad_norm)")
    assert err.value.last_checkpoint is None and _checkpoints(tmp_path / "b") == []
    _train(_config(tmp_path / "b"), BlowUp(2))  # "start again": no checkpoint, so no run.overwrite needed
    assert _updates(tmp_path / "b") == [1, 2]


def test_global_norm_does_not_overflow():
    assert math.isclose(float(global_norm({"a": jnp.full((4,), 4e30), "b": jnp.zeros((3,))})), 8e30, rel_tol=1e-6)
    assert math.isclose(float(global_norm([jnp.ones((2, 2), jnp.bfloat16), jnp.full((5,), 0.0)])), 2.0)
    assert math.isnan(float(global_norm({"a": jnp.array([1.0, jnp.nan])})))
    assert math.isnan(float(global_norm({"a": jnp.array([1.0, jnp.inf])})))


# ---------------------------------------------------------------- KL and value loss


@pytest.mark.parametrize("key,metric", [("max_value_loss", "value_loss"), ("max_kl", "approx_kl")])
def test_metric_bound_stops_mid_chunk_and_writes_the_rows_up_to_it(tmp_path, key, metric):
    """Chunks of 3 updates: the first is saved (3); update 5 of the second crosses the bound: rows 1-5 written,
    nothing of the chunk saved."""
    config = _config(tmp_path, per_chunk=3)
    config.stop[key] = 1e6
    with pytest.raises(DivergenceError) as err:
        _train(config, BlowUp(9, metric_at=5))
    assert str(err.value) == (
        f"divergence: {metric} = 1e+14 at update 5 > bound 1e+06 (config.stop.{key}); the last good checkpoint is "
        f"update 3 in {_ckpt_dir(tmp_path)}; continue from it with a lower lr (or max_grad_norm): "
        "--config.resume=True --config.resume_force=True --config.lr=...")
    assert _updates(tmp_path) == [1, 2, 3, 4, 5] and _checkpoints(tmp_path) == [3]
    assert float(read_csv(os.path.join(tmp_path, "metrics.csv"))[-1][metric]) == np.float32(1e14)  # the curve shows it


def test_metric_bounds_are_off_by_default(tmp_path):
    """spread_mlp's defaults: value_loss 1e14 and approx_kl 1e14 do not stop a run (their bounds are 0 = off)."""
    result = _train(_config(tmp_path), BlowUp(3, metric_at=1))
    assert int(result["state"]["step"]) == 3 and _checkpoints(tmp_path) == [2, 3]


# ---------------------------------------------------------------- non-finite metrics


def test_nan_names_the_last_checkpoint_kept(tmp_path):
    with pytest.raises(DivergenceError) as err:
        _train(_config(tmp_path), BlowUp(5, nan_at=3))
    assert str(err.value) == (
        "divergence: non-finite team_return at update 3; the last good checkpoint is update 2 in "
        f"{_ckpt_dir(tmp_path)}; continue from it with a lower lr (or max_grad_norm): --config.resume=True "
        "--config.resume_force=True --config.lr=...")
    assert isinstance(err.value, FloatingPointError)  # what the NaN stop raised before
    assert _checkpoints(tmp_path) == [1, 2] and _updates(tmp_path) == [1, 2, 3]


def test_nan_before_any_checkpoint_claims_none(tmp_path):
    with pytest.raises(DivergenceError) as err:
        _train(_config(tmp_path), BlowUp(5, nan_at=1))
    assert str(err.value) == ("divergence: non-finite team_return at update 1; no checkpoint was saved yet; "
                              "start again with a lower lr (or max_grad_norm)")
    assert err.value.last_checkpoint is None and _checkpoints(tmp_path) == []


# ---------------------------------------------------------------- the command line


def test_cli_prints_one_line_and_exits_3(tmp_path, capsys):
    def main(argv):
        _train(_config(tmp_path), BlowUp(4, grow_at=2, factor=1e4))

    with pytest.raises(SystemExit) as exit_:
        main_guard(main)([])
    assert exit_.value.code == 3
    err = capsys.readouterr().err
    assert err == (
        "error: divergence: param_norm_growth = 1e+04 at update 2 > bound 100 (config.stop.max_param_norm_growth: "
        f"parameter norm 2e+04, 2 at update 0); the last good checkpoint is update 1 in {_ckpt_dir(tmp_path)}; "
        "continue from it with a lower lr (or max_grad_norm): --config.resume=True --config.resume_force=True "
        "--config.lr=...\n")


def test_a_healthy_run_with_the_defaults_finishes(tmp_path):
    """x2 per chunk over 6 updates: 64x its start, within the default 100x."""
    result = _train(_config(tmp_path), BlowUp(6, grow_at=1, factor=2.0))
    assert float(result["state"]["params"][0]) == 64.0 and _checkpoints(tmp_path) == [5, 6]


def test_a_resume_may_change_the_bounds(tmp_path):
    """stop.* does not touch the trained state: a resume with other bounds is the same run (run_identity.py)."""
    _train(_config(tmp_path), BlowUp(2))
    config = _config(tmp_path)
    config.resume, config.stop.max_param_norm_growth, config.stop.max_value_loss = "True", 0.0, 5.0
    assert int(_train(config, BlowUp(3))["state"]["step"]) == 3


# ---------------------------------------------------------------- validation


def _valid(kind: str):
    config = {"mlp_ppo": mlp_ppo_defaults, "lm_rl": lm_rl_defaults, "sft": sft_defaults, "dpo": dpo_defaults}[kind]()
    config.mesh.num_devices = 1
    if kind == "dpo":
        config.source = "game"
    return config


VALIDATE = {"mlp_ppo": validate_mlp_ppo, "lm_rl": validate_lm_rl, "sft": validate_sft, "dpo": validate_dpo}
KEYS = {"mlp_ppo": ("max_param_norm_growth", "max_kl", "max_value_loss"),
        "lm_rl": ("max_param_norm_growth", "max_kl", "max_value_loss"),
        "sft": ("max_param_norm_growth",), "dpo": ("max_param_norm_growth",)}  # no approx_kl / value_loss logged


@pytest.mark.parametrize("kind", list(VALIDATE))
def test_every_trainer_has_the_stop_bounds(kind):
    config = _valid(kind)
    VALIDATE[kind](config)
    defaults = {"max_param_norm_growth": 100.0, "max_kl": 0.0, "max_value_loss": 0.0}  # only the norm bound on
    assert config.stop.to_dict() == {key: defaults[key] for key in KEYS[kind]}


@pytest.mark.parametrize("kind,key", [(kind, key) for kind, keys in KEYS.items() for key in keys])
@pytest.mark.parametrize("value", [-1.0, math.nan])
def test_stop_bounds_must_be_non_negative(kind, key, value):
    config = _valid(kind)
    config.stop[key] = value
    with pytest.raises(ConfigError, match=rf"config\.stop\.{key}: must be a number >= 0 \(0 = off\), got {value}"):
        VALIDATE[kind](config)


@pytest.mark.parametrize("value", [0.5, 1.0])
def test_growth_factor_is_off_or_above_one(value):
    config = _valid("mlp_ppo")
    config.stop.max_param_norm_growth = value
    with pytest.raises(ConfigError, match=r"config\.stop\.max_param_norm_growth: is a growth factor .* "
                                          r"0 \(off\) or > 1"):
        validate_mlp_ppo(config)


def test_sft_has_no_kl_bound():
    config = _valid("sft")
    config.stop.max_kl = 1.0  # a hand-built config: the command line refuses the unknown key before
    with pytest.raises(ConfigError, match=r"config\.stop\.max_kl: unknown key; valid keys here: max_param_norm_growth"):
        validate_sft(config)


def test_lm_rl_bounds_need_their_metric():
    config = _valid("lm_rl")  # grpo: no critic
    config.stop.max_value_loss = 10.0
    with pytest.raises(ConfigError, match=r"config\.stop\.max_value_loss: grpo has no critic and logs no value_loss"):
        validate_lm_rl(config)
    config.stop.max_value_loss, config.stop.max_kl, config.algo = 0.0, 1.0, "rloo"
    with pytest.raises(ConfigError, match=r"config\.stop\.max_kl: rloo has no old-vs-new ratio"):
        validate_lm_rl(config)
    config.algo, config.group_size, config.stop.max_value_loss = "ppo", 1, 10.0
    validate_lm_rl(config)


@pytest.mark.parametrize("value", [0.0, -1.0])
def test_lm_rl_max_grad_norm_must_be_positive(value):
    config = _valid("lm_rl")
    config.max_grad_norm = value
    with pytest.raises(ConfigError, match=r"config\.max_grad_norm: must be > 0"):
        validate_lm_rl(config)


# ---------------------------------------------------------------- the real MLP trainer, from the command line


@pytest.mark.slow  # ~15-20 s on 2 shared cores (a process, one MLP compile); test_runner.py's lr=1e30 run: the NaN path
def test_cli_mlp_at_lr_1e6_stops_on_the_parameter_norm_with_status_3(tmp_path):
    """spread_mlp at lr=1e6 (value loss ~1e14 and exit 0 before): the norm bound stops it at update 1, nothing is
    saved, one line on stderr, exit status 3."""
    out = _cli(f"--config={SPREAD_MLP}", "--config.num_envs=2", "--config.num_steps=4", "--config.update_epochs=1",
               "--config.num_minibatches=1", "--config.total_timesteps=24", "--config.network.hidden=(8,)",
               "--config.lr=1e6", "--config.mesh.num_devices=1", f"--config.run.out_dir={tmp_path}",
               "--config.run.updates_per_chunk=1", "--config.run.checkpoint_every=1", "--config.run.progress=False",
               "--config.run.tensorboard=False", "--config.run.plot=False")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 3 and len(lines) == 1, (out.returncode, out.stderr)
    assert re.fullmatch(r"error: divergence: param_norm_growth = \S+ at update 1 > bound 100 \(config\.stop\."
                        r"max_param_norm_growth: parameter norm \S+, \S+ at update 0\); no checkpoint was saved yet; "
                        r"start again with a lower lr \(or max_grad_norm\)", lines[0]), lines[0]
    assert _checkpoints(tmp_path) == [] and _updates(tmp_path) == [1]
