"""A resume continues the same run: each run records its config (and a fingerprint of its base
model folder) in config.json; a resume with another lr, env or base model is refused before any file changes,
one with a larger budget or other run.* settings goes on, and resume_force=True goes on with a warning.

The runs are test_run_safety.py's stand-in trainer (a counter compiled in milliseconds) with spread_mlp's config;
the base-model tests give that config a `model.checkpoint` group (the runner only fingerprints the folder)."""

import json
import os
import shutil

import jax
import ml_collections
import pytest

from jaxmarl_llm.models import hf, transformer
from jaxmarl_llm.models.config import tiny
from jaxmarl_llm.run import run_identity
from jaxmarl_llm.run.run_identity import (FINGERPRINT_KEY, config_differences, model_fingerprint, run_record,
                                            safetensors_digest)
from jaxmarl_llm.run.runner import RUN_OUTPUTS
from jaxmarl_llm.train.config import (ConfigError, dpo_defaults, lm_rl_defaults, mlp_ppo_defaults, sft_defaults,
                                      validate_mlp_ppo)
from test_run_safety import SPREAD_MLP, _cli, _one_line_error, _run_config, _snapshot, _train
from tiny_configs import TINY_MODEL

LR = 1e-3  # spread_mlp's


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """A finished 2-update run of the stand-in trainer (checkpoints 1 and 2, metrics, config.json); copied by
    the tests that resume it."""
    out_dir = str(tmp_path_factory.mktemp("started") / "run")
    _train(_run_config(out_dir), updates=2)
    return out_dir


def _copy(run: str, tmp_path) -> str:
    """A private copy of a run (copytree keeps mtimes)."""
    out_dir = str(tmp_path / "run")
    shutil.copytree(run, out_dir)
    return out_dir


def _resume_config(out_dir: str):
    config = _run_config(out_dir)
    config.resume = "True"
    return config


def _saved(out_dir: str) -> dict:
    with open(os.path.join(out_dir, "config.json")) as f:
        return json.load(f)


def test_a_run_records_its_resolved_config(started):
    saved = _saved(started)
    assert saved["lr"] == LR and saved["env_name"] == "mpe/simple_spread" and saved["run"]["out_dir"] == started
    assert saved["network"]["hidden"] == [64, 64] and FINGERPRINT_KEY not in saved  # no model group: no fingerprint
    assert "config.json" in RUN_OUTPUTS  # run.overwrite deletes it with the rest


# ---------------------------------------------------------------- (a) a different lr is refused


def test_resume_with_another_lr_is_refused_and_changes_nothing(started, tmp_path):
    out_dir = _copy(started, tmp_path)
    before = _snapshot(out_dir)
    config = _resume_config(out_dir)
    config.lr = 2e-3
    with pytest.raises(ConfigError) as err:
        _train(config, updates=4)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"config.resume: {out_dir} ")
    assert "lr: 0.001 -> 0.002" in message and "--config.resume_force=True" in message
    assert message.count(" -> ") == 1  # lr only: the budget and run.* may differ
    assert _snapshot(out_dir) == before  # bytes and mtimes


def test_cli_refuses_a_resume_with_another_lr_in_one_line(started, tmp_path):
    out_dir = _copy(started, tmp_path)
    before = _snapshot(out_dir)
    line = _one_line_error(_cli(f"--config={SPREAD_MLP}", f"--config.run.out_dir={out_dir}", "--config.resume=True",
                                "--config.mesh.num_devices=1", "--config.lr=0.002"))
    assert "lr: 0.001 -> 0.002" in line and out_dir in line and "--config.resume_force=True" in line, line
    assert _snapshot(out_dir) == before


# ---------------------------------------------------------------- (b) budget and run.* may change


def test_resume_with_a_larger_budget_and_other_run_settings_goes_on(started, tmp_path, capsys):
    out_dir = _copy(started, tmp_path)
    config = _resume_config(out_dir)
    config.total_timesteps *= 2
    config.run.updates_per_chunk, config.run.keep_checkpoints, config.eval_episodes = 2, 3, 5
    result = _train(config, updates=4)
    assert float(result["state"]["count"]) == 4.0  # counted on from the checkpoint at 2
    assert "warning" not in capsys.readouterr().err
    assert _saved(out_dir)["total_timesteps"] != config.total_timesteps  # config.json: what the run started with
    (entry,) = run_identity.read_history(out_dir)  # the budget from update 2 on
    assert entry["update"] == 2 and entry["config"]["total_timesteps"] == config.total_timesteps
    changed = {line.split(":", 1)[0] for line in entry["changes"]}  # run.out_dir too: the test copied the run
    assert changed == {"total_timesteps", "run.updates_per_chunk", "run.keep_checkpoints", "eval_episodes",
                       "run.out_dir"}, entry["changes"]


def test_resume_from_a_run_directory_path_with_another_out_dir_goes_on(started, tmp_path):
    out_dir = _copy(started, tmp_path)
    config = _run_config(str(tmp_path / "elsewhere"))
    config.resume = out_dir
    assert float(_train(config, updates=3)["state"]["count"]) == 3.0


# ---------------------------------------------------------------- (c) resume_force


def test_resume_force_goes_on_with_a_warning(started, tmp_path, capsys):
    out_dir = _copy(started, tmp_path)
    config = _resume_config(out_dir)
    config.lr, config.resume_force = 2e-3, True
    validate_mlp_ppo(config)
    assert float(_train(config, updates=3)["state"]["count"]) == 3.0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "resume_force=True" in warnings[0] and "lr: 0.001 -> 0.002" in warnings[0]
    assert _saved(out_dir)["lr"] == LR  # config.json keeps what the run was started with ...
    (entry,) = run_identity.read_history(out_dir)  # ... and the history what it went on with, from which update
    assert entry["update"] == 2 and entry["config"]["lr"] == 2e-3 and "lr: 0.001 -> 0.002" in entry["changes"]
    # the next resume is compared with the lr the run goes on with: the same lr goes on, the first one is refused
    config = _resume_config(out_dir)
    config.lr, config.total_timesteps = 2e-3, config.total_timesteps * 2
    assert float(_train(config, updates=4)["state"]["count"]) == 4.0
    config.lr = LR
    with pytest.raises(ConfigError, match=r"config_history\.jsonl's last entry\): lr: 0\.002 -> 0\.001"):
        _train(config, updates=5)


def test_a_history_line_torn_by_a_kill_is_skipped(started, tmp_path):
    out_dir = _copy(started, tmp_path)
    config = _resume_config(out_dir)
    config.lr, config.resume_force = 2e-3, True
    _train(config, updates=3)
    with open(os.path.join(out_dir, run_identity.HISTORY_FILE), "a") as f:
        f.write('{"update": 3, "config": {"lr"')  # a kill in the middle of the next line
    assert run_identity.current_record(out_dir)["lr"] == 2e-3


@pytest.mark.parametrize("value", ["True", 1, "yes"])
def test_resume_force_must_be_a_bool(value):
    config = _run_config("unused")
    with config.ignore_type():  # ConfigDict keeps a bool a bool; a hand-built config or a loader might not
        config.resume_force = value
    with pytest.raises(ConfigError, match=r"config\.resume_force: must be True or False"):
        validate_mlp_ppo(config)


@pytest.mark.parametrize("defaults", [mlp_ppo_defaults, lm_rl_defaults, sft_defaults, dpo_defaults])
def test_every_trainer_has_resume_force_off(defaults):
    assert defaults().resume_force is False


# ---------------------------------------------------------------- (d) the base model folder


def _tiny_model(path: str, seed: int) -> str:
    cfg = tiny("qwen3", **TINY_MODEL)
    hf.save_pretrained(path, cfg, transformer.init_params(cfg, jax.random.PRNGKey(seed)))
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two tiny model folders of the same shapes, init seeds 0 and 1, and a copy of the first elsewhere."""
    root = tmp_path_factory.mktemp("models")
    a, b = _tiny_model(str(root / "a"), 0), _tiny_model(str(root / "b"), 1)
    moved = str(root / "moved" / "a")
    shutil.copytree(a, moved)
    return a, b, moved


def _with_model(config, folder: str):
    config.model = ml_collections.ConfigDict({"checkpoint": folder})
    return config


def _header(path: str) -> bytes:
    with open(path, "rb") as f:
        prefix = f.read(8)
        return prefix + f.read(int.from_bytes(prefix, "little"))


def test_fingerprint_tells_same_shaped_models_apart(models, tmp_path):
    a, b, moved = models
    weights = "model.safetensors"
    assert model_fingerprint(a) == model_fingerprint(a) == model_fingerprint(moved)
    assert set(model_fingerprint(a)) == {"config.json", weights}
    # same shapes: same sizes and safetensors header, so the header alone could not tell them apart
    assert _header(os.path.join(a, weights)) == _header(os.path.join(b, weights))
    fa, fb = model_fingerprint(a), model_fingerprint(b)
    assert fa["config.json"] == fb["config.json"] and fa[weights]["bytes"] == fb[weights]["bytes"]
    assert fa[weights]["sha256"] != fb[weights]["sha256"]  # the sampled tensor data differs


def test_fingerprint_sees_a_changed_config_or_header(models, tmp_path):
    a = _copy(models[0], tmp_path)
    before = model_fingerprint(a)
    with open(os.path.join(a, "config.json")) as f:
        cfg = json.load(f)
    cfg["rope_theta"] = 1.0
    with open(os.path.join(a, "config.json"), "w") as f:
        json.dump(cfg, f)
    after = model_fingerprint(a)
    assert after["config.json"]["sha256"] != before["config.json"]["sha256"]
    path = os.path.join(a, "model.safetensors")
    with open(path, "r+b") as f:  # one byte of the JSON header ("format": "pt" -> "qt")
        data = f.read()
        f.seek(data.index(b'"pt"') + 1)
        f.write(b"q")
    assert model_fingerprint(a)["model.safetensors"]["sha256"] != after["model.safetensors"]["sha256"]


def test_safetensors_digest_samples_a_large_file(tmp_path):
    """Past SAMPLES x SAMPLE_BYTES of data only samples are read: its first and last bytes count, and so does a
    file that is not safetensors at all."""
    header = b'{"__metadata__":{}}'
    data = bytearray(4 * run_identity.SAMPLES * run_identity.SAMPLE_BYTES)
    path = tmp_path / "x.safetensors"

    def digest(body: bytes, head: bytes = len(header).to_bytes(8, "little") + header) -> str:
        path.write_bytes(head + body)
        return safetensors_digest(str(path))

    base = digest(bytes(data))
    for where in (0, len(data) - 1):
        changed = bytearray(data)
        changed[where] = 1
        assert digest(bytes(changed)) != base
    assert digest(bytes(data), head=b"\xff" * 8) != base  # a header length past the end: hashed as plain bytes


def test_resume_with_another_base_model_of_the_same_shapes_is_refused(models, tmp_path):
    a, b, moved = models
    out_dir = str(tmp_path / "run")
    _train(_with_model(_run_config(out_dir), a), updates=2)
    assert _saved(out_dir)[FINGERPRINT_KEY] == model_fingerprint(a)
    before = _snapshot(out_dir)
    with pytest.raises(ConfigError) as err:
        _train(_with_model(_resume_config(out_dir), b), updates=3)
    message = str(err.value)
    assert "model.checkpoint/model.safetensors.sha256: '" in message and "--config.resume_force=True" in message
    assert "model.checkpoint:" not in message  # the content is compared, not the path
    assert _snapshot(out_dir) == before
    # the same model moved to another folder is the same run
    assert float(_train(_with_model(_resume_config(out_dir), moved), updates=3)["state"]["count"]) == 3.0


# ---------------------------------------------------------------- (e) a run from before config.json


def test_run_without_config_json_resumes_with_a_warning(started, tmp_path, capsys):
    out_dir = _copy(started, tmp_path)
    os.remove(os.path.join(out_dir, "config.json"))
    config = _resume_config(out_dir)
    config.lr = 2e-3  # nothing to compare with
    assert float(_train(config, updates=3)["state"]["count"]) == 3.0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and out_dir in warnings[0] and "no config.json" in warnings[0]
    assert _saved(out_dir)["lr"] == 2e-3  # recorded from now on


def test_unreadable_config_json_is_refused_unless_forced(started, tmp_path, capsys):
    out_dir = _copy(started, tmp_path)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        f.write('{"lr": 0.0')  # torn
    before = _snapshot(out_dir)
    with pytest.raises(ConfigError, match=r"config\.resume: .*config\.json is unreadable .*resume_force=True"):
        _train(_resume_config(out_dir), updates=3)
    assert _snapshot(out_dir) == before
    config = _resume_config(out_dir)
    config.resume_force = True
    assert float(_train(config, updates=3)["state"]["count"]) == 3.0
    assert "is unreadable" in capsys.readouterr().err and _saved(out_dir)["lr"] == LR


def test_overwrite_replaces_the_earlier_runs_config_json(started, tmp_path):
    out_dir = _copy(started, tmp_path)
    config = _run_config(out_dir)
    config.run.overwrite, config.lr = True, 2e-3
    _train(config, updates=1)
    assert _saved(out_dir)["lr"] == 2e-3
    config = _resume_config(out_dir)
    config.lr = 2e-3
    assert float(_train(config, updates=2)["state"]["count"]) == 2.0  # compared with the new run's config


# ---------------------------------------------------------------- the comparison


def test_config_differences():
    saved = {"lr": 0.001, "seed": 0, "gamma": 1, "x": float("nan"), "flag": True, "env_kwargs": {"n": 3, "gone": 1},
             "run": {"out_dir": "a"}, "total_timesteps": 10, "resume": "", "resume_force": False,
             "hidden": [64, 64], "model": {"checkpoint": "/m/a", "dtype": "float32"}}
    now = {"lr": 0.002, "seed": 0, "gamma": 1.0, "x": float("nan"), "flag": 1, "env_kwargs": {"n": 4},
           "run": {"out_dir": "b", "updates_per_chunk": 3}, "total_timesteps": 20, "resume": "True",
           "resume_force": True, "hidden": [64, 32], "model": {"checkpoint": "/m/b", "dtype": "float32"},
           "new_key": "v"}
    assert config_differences(saved, now) == [
        "lr: 0.001 -> 0.002", "flag: True -> 1", "env_kwargs.n: 3 -> 4", "hidden: [64, 64] -> [64, 32]",
        "model.checkpoint: '/m/a' -> '/m/b'", "new_key: <absent> -> 'v'", "env_kwargs.gone: 1 -> <absent>"]
    assert config_differences(saved, saved) == []


def test_config_differences_compare_fingerprints_not_paths():
    fp = {"model.safetensors": {"bytes": 10, "sha256": "a" * 64}, "config.json": {"bytes": 5, "sha256": "c" * 64}}
    other = {**fp, "model.safetensors": {"bytes": 10, "sha256": "b" * 64}}
    saved = {"model": {"checkpoint": "/m/a"}, FINGERPRINT_KEY: fp}
    assert config_differences(saved, {"model": {"checkpoint": "/n/a"}, FINGERPRINT_KEY: fp}) == []
    assert config_differences(saved, {"model": {"checkpoint": "/m/a"}, FINGERPRINT_KEY: other}) == [
        "model.checkpoint/model.safetensors.sha256: 'aaaaaaaaaaaa...' -> 'bbbbbbbbbbbb...'"]
    # a run from a random model resumed from a folder: the path says it
    assert config_differences({"model": {"checkpoint": ""}}, saved) == ["model.checkpoint: '' -> '/m/a'"]


def test_run_record_is_json_round_trip_of_the_config(models):
    config = _with_model(_run_config("out"), models[0])
    record = run_record(config)
    assert json.loads(json.dumps(record)) == record and record["network"]["hidden"] == [64, 64]
    assert record[FINGERPRINT_KEY] == model_fingerprint(models[0])
    assert config_differences(record, run_record(config)) == []


@pytest.mark.parametrize("key", ["mesh.fsdp", "lora.lr_ratio", "critic.value_norm", "train_base"])
def test_a_run_recorded_before_a_later_key_resumes_at_its_old_value(key):
    """A config.json written before `key` existed is the same run as today's config at the value every earlier run
    had (run_identity.LATER_DEFAULTS); another value is a difference."""
    import copy

    from jaxmarl_llm.train.config import lm_rl_defaults
    from jaxmarl_llm.run.run_identity import LATER_DEFAULTS, config_differences, run_record

    now = run_record(lm_rl_defaults())
    older = copy.deepcopy(now)
    *parents, leaf = key.split(".")
    node = older
    for p in parents:
        node = node[p]
    del node[leaf]
    assert config_differences(older, now) == []
    value = not LATER_DEFAULTS[key] if isinstance(LATER_DEFAULTS[key], bool) else LATER_DEFAULTS[key] * 2
    changed = lm_rl_defaults()
    changed.update_from_flattened_dict({key: value})
    assert config_differences(older, run_record(changed)) == [f"{key}: {LATER_DEFAULTS[key]} -> {value}"]
