"""Runs that cannot lose or mix data: an earlier run's folder is refused, run / resume / lr settings
that cannot work stop at start-up naming the key, a torn metrics row is dropped on resume, and a sharded model
index cannot reach outside its folder. Command-line mistakes are one line on stderr and exit status 2."""

import json
import math
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from configs import spread_mlp
from jaxmarl_llm.models import hf, transformer
from jaxmarl_llm.models.config import tiny
from jaxmarl_llm.parallel.mesh import sharded_chunk
from jaxmarl_llm.run.cli import main_guard
from jaxmarl_llm.run.metrics_log import MetricsLog, read_csv
from jaxmarl_llm.run.runner import run_training
from jaxmarl_llm.train.config import (ConfigError, dpo_defaults, lm_rl_defaults, mlp_ppo_defaults, parse_resume,
                                      sft_defaults, validate_dpo, validate_lm_rl, validate_mlp_ppo, validate_sft)
from tiny_configs import TINY_MODEL

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "experiments", "train.py")
SPREAD_MLP = os.path.join(ROOT, "configs", "spread_mlp.py")


class Counter:
    """The smallest trainer the runner takes (runner.py's interface): the state counts up by hp["step"] each
    update. It compiles in milliseconds, so the tests below exercise the run loop's files, not a model."""

    hparams = {"step": np.float32(1.0)}
    state_specs = P()

    def __init__(self, num_updates: int):
        self.num_updates = num_updates

    def init(self, key, hp):
        return {"count": jnp.zeros((), jnp.float32)}

    def update(self, state, hp, axis_name=None):
        count = state["count"] + hp["step"]
        return {"count": count}, {"team_return": count}


def _run_config(out_dir, updates: int = 3):
    """The run group of spread_mlp: one update per chunk, a checkpoint after each, the last 2 kept."""
    c = spread_mlp.get_config()
    c.mesh.num_devices = 1
    c.run.out_dir, c.run.updates_per_chunk, c.run.checkpoint_every, c.run.keep_checkpoints = str(out_dir), 1, 1, 2
    c.run.progress = False
    return c


def _train(config, updates: int) -> dict:
    # the counter is the trained state (spread_mlp's config would name the MLP trainer's accessor, state.params)
    return run_training(config, Counter(updates), sharded_chunk, 8, trainable=lambda state: state)


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory):
    """A finished 3-update run (orbax checkpoints 2 and 3, metrics.csv, tb/, learning_curve.png), shared
    read-only by the tests."""
    out_dir = tmp_path_factory.mktemp("earlier") / "run"
    _train(_run_config(out_dir), updates=3)
    return str(out_dir)


def _snapshot(folder: str) -> dict[str, tuple[int, bytes]]:
    """Every file under `folder`: (mtime in ns, bytes)."""
    out = {}
    for base, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = (os.stat(path).st_mtime_ns, f.read())
    return out


def _cli(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, TRAIN, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def _one_line_error(out: subprocess.CompletedProcess) -> str:
    """Exit status 2 and exactly one line on stderr, no traceback; returns the line."""
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (out.returncode, out.stderr)
    return lines[0]


# ---------------------------------------------------------------- 1. an earlier run's folder


def test_fresh_run_in_an_earlier_run_folder_is_refused_and_changes_nothing(earlier_run):
    before = _snapshot(earlier_run)
    assert {"checkpoints/2/_CHECKPOINT_METADATA", "checkpoints/3/_CHECKPOINT_METADATA", "metrics.csv",
            "learning_curve.png"} <= set(before) and any(p.startswith("tb/") for p in before)
    line = _one_line_error(_cli(f"--config={SPREAD_MLP}", f"--config.run.out_dir={earlier_run}"))
    for part in (earlier_run, "--config.resume=True", "--config.run.out_dir", "--config.run.overwrite=True"):
        assert part in line, line
    with pytest.raises(ConfigError, match="config.run.out_dir: .* holds the checkpoints of an earlier run"):
        _train(_run_config(earlier_run), updates=2)  # the library path refuses too, before it touches a file
    assert _snapshot(earlier_run) == before


def test_overwrite_deletes_the_earlier_run_and_starts_fresh(earlier_run, tmp_path):
    out_dir = str(tmp_path / "run")
    shutil.copytree(earlier_run, out_dir)
    old_events = set(os.listdir(os.path.join(out_dir, "tb")))
    with open(os.path.join(out_dir, "notes.txt"), "w") as f:  # not a run output: kept
        f.write("mine")
    config = _run_config(out_dir)
    config.run.overwrite = True
    result = _train(config, updates=2)
    assert float(result["state"]["count"]) == 2.0  # counted from 0, not from the earlier run's 3
    assert sorted(os.listdir(os.path.join(out_dir, "checkpoints"))) == ["1", "2"]  # the earlier run kept 2 and 3
    assert [r["update"] for r in read_csv(os.path.join(out_dir, "metrics.csv"))] == ["1", "2"]
    assert not old_events & set(os.listdir(os.path.join(out_dir, "tb")))
    assert os.path.exists(os.path.join(out_dir, "notes.txt"))


def test_overwrite_and_resume_exclude_each_other(earlier_run):
    config = _run_config(earlier_run)
    config.run.overwrite, config.resume = True, "True"
    with pytest.raises(ConfigError, match="config.run.overwrite: .* cannot be combined with config.resume"):
        validate_mlp_ppo(config)


# ---------------------------------------------------------------- 3, 4. start-up checks of every trainer


def _valid(kind: str):
    """Each trainer's defaults, made to pass validation on one device (DPO: pairs played, no file)."""
    config = {"mlp_ppo": mlp_ppo_defaults, "lm_rl": lm_rl_defaults, "sft": sft_defaults, "dpo": dpo_defaults}[kind]()
    config.mesh.num_devices = 1
    if kind == "dpo":
        config.source = "game"
    return config


VALIDATE = {"mlp_ppo": validate_mlp_ppo, "lm_rl": validate_lm_rl, "sft": validate_sft, "dpo": validate_dpo}


@pytest.mark.parametrize("kind", list(VALIDATE))
def test_every_trainers_defaults_validate(kind):
    VALIDATE[kind](_valid(kind))
    assert _valid(kind).run.overwrite is False


@pytest.mark.parametrize("kind", list(VALIDATE))
@pytest.mark.parametrize("key,value", [("checkpoint_every", 0), ("keep_checkpoints", 0), ("keep_checkpoints", -1),
                                       ("updates_per_chunk", 0)])
def test_run_counts_must_be_positive_integers(kind, key, value):
    config = _valid(kind)
    config.run[key] = value
    with pytest.raises(ConfigError, match=rf"config\.run\.{key}: must be a positive integer, got {value}"):
        VALIDATE[kind](config)


@pytest.mark.parametrize("kind", list(VALIDATE))
@pytest.mark.parametrize("value", [0.0, -1.0, math.nan])
def test_learning_rates_must_be_positive(kind, value):
    config = _valid(kind)
    config.lr = value
    with pytest.raises(ConfigError, match=r"config\.lr: must be > 0"):
        VALIDATE[kind](config)


@pytest.mark.parametrize("kind", ["lm_rl", "sft", "dpo"])
@pytest.mark.parametrize("key,value,match", [("rank", 0, "must be an integer > 0"), ("lr_ratio", 0.0, "must be > 0"),
                                             ("lr_ratio", -4.0, "must be > 0"), ("lr_ratio", math.nan, "must be > 0")])
def test_lora_settings_are_checked(kind, key, value, match):
    config = _valid(kind)
    config.lora[key] = value
    with pytest.raises(ConfigError, match=rf"config\.lora\.{key}: {match}"):
        VALIDATE[kind](config)


@pytest.mark.parametrize("value", [-1.0, math.nan])
def test_critic_lr_must_be_non_negative(value):
    config = _valid("lm_rl")
    config.algo, config.group_size, config.critic.lr = "ppo", 1, value
    with pytest.raises(ConfigError, match=r"config\.critic\.lr: must be a learning rate > 0, or 0"):
        validate_lm_rl(config)


# ---------------------------------------------------------------- 5. resume and config variants


@pytest.mark.parametrize("value,expected", [("", False), ("False", False), ("false", False), (False, False),
                                            ("True", True), (" true ", True), (True, True)])
def test_resume_flags(value, expected):
    assert parse_resume(value) is expected


def test_resume_path_must_be_an_existing_folder(tmp_path):
    assert parse_resume(str(tmp_path)) == str(tmp_path)
    for value in ("yes", "1", str(tmp_path / "nope")):
        with pytest.raises(ConfigError, match=r"config\.resume: .* neither True / False nor an existing run directory"):
            parse_resume(value)


def test_cli_resume_typo_is_one_line_and_writes_nothing(tmp_path):
    line = _one_line_error(_cli(f"--config={SPREAD_MLP}", "--config.resume=yes", cwd=str(tmp_path)))
    assert "config.resume" in line and "'yes'" in line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("url", ["gs://my-bucket/runs/a", "s3://b/x"])
def test_cli_a_url_run_folder_is_one_line_naming_the_mount(tmp_path, url):
    """Run folders go through file paths (orbax, metrics, locks): a URL would become a local folder named 'gs:' on
    each host; it is refused before anything is written, naming the gcsfuse mount to use instead."""
    line = _one_line_error(_cli(f"--config={SPREAD_MLP}", f"--config.run.out_dir={url}", cwd=str(tmp_path)))
    assert "run.out_dir" in line and url in line and "install.sh --bucket" in line and "/gcs/" in line, line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("spec,says", [("debate.py:nope", "the variant is 'rule' (default), 'lm' or 'trained_judge'"),
                                       ("spread_mlp.py:nope", "has no variants")])
def test_cli_unknown_config_variant_is_one_line(spec, says):
    line = _one_line_error(_cli(f"--config={os.path.join(ROOT, 'configs', spec)}"))
    assert f"configs/{spec}" in line and says in line, line


def test_cli_verbose_shows_the_traceback_behind_the_line(tmp_path):
    out = _cli(f"--config={SPREAD_MLP}", "--config.resume=yes", "--verbose", cwd=str(tmp_path))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and lines[0] == "Traceback (most recent call last):", out.stderr
    assert lines[-1].startswith("error: ") and "config.resume" in lines[-1], lines[-1]
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- 6. a torn metrics row


HEADER = "update,env_steps,team_return\r\n"
ROWS = "".join(f"{u},{8 * u},-{80 + u}.5\r\n" for u in (1, 2, 3))


# the kill's partial row, its update at or before the checkpoint (3) so the truncation to update 3 keeps it
@pytest.mark.parametrize("torn", ["1", "3,2", "3,24,-8", "3,24\r\n", "3,24,-8x\r\n", "3,24,-84.5,7\r\n"],
                         ids=["cut_update", "missing_fields", "cut_number", "short_row", "unparsable", "extra_field"])
def test_resume_drops_a_torn_last_metrics_row(tmp_path, torn):
    """A kill during a write leaves a partial last row; the resume drops it, so the plot reads only numbers."""
    with open(tmp_path / "metrics.csv", "w", newline="") as f:
        f.write(HEADER + ROWS + torn)
    log = MetricsLog(str(tmp_path), tensorboard=False, resume_from_update=3)
    log.write([{"update": 4, "env_steps": 32, "team_return": -84.5}])
    log.close()
    rows = read_csv(str(tmp_path / "metrics.csv"))
    assert [r["update"] for r in rows] == ["1", "2", "3", "4"]
    assert all(math.isfinite(float(v)) for r in rows for v in r.values())  # what the plot reads


def test_resume_keeps_a_complete_last_row(tmp_path):
    with open(tmp_path / "metrics.csv", "w", newline="") as f:
        f.write(HEADER + ROWS)
    MetricsLog(str(tmp_path), tensorboard=False, resume_from_update=3).close()
    assert [r["update"] for r in read_csv(str(tmp_path / "metrics.csv"))] == ["1", "2", "3"]


def test_a_resume_that_logs_more_or_fewer_metrics_keeps_every_column(tmp_path):
    """A resumed run whose config adds a metric (`max_step_kl`'s `step_kl`) writes it: the file gains the column,
    "nan" in the earlier rows; a metric the new config no longer logs reads "nan" in the new rows, and the next
    resume keeps every complete row."""
    with open(tmp_path / "metrics.csv", "w", newline="") as f:
        f.write(HEADER + ROWS)
    log = MetricsLog(str(tmp_path), tensorboard=False, resume_from_update=3)
    log.write([{"update": 4, "env_steps": 32, "team_return": -84.5, "step_kl": 0.01}])
    log.write([{"update": 5, "env_steps": 40, "step_kl": 0.02}])
    log.close()
    rows = read_csv(str(tmp_path / "metrics.csv"))
    assert [(r["update"], r["team_return"], r["step_kl"]) for r in rows] == [
        ("1", "-81.5", "nan"), ("2", "-82.5", "nan"), ("3", "-83.5", "nan"), ("4", "-84.5", "0.01"),
        ("5", "nan", "0.02")]
    MetricsLog(str(tmp_path), tensorboard=False, resume_from_update=5).close()
    assert [r["update"] for r in read_csv(str(tmp_path / "metrics.csv"))] == ["1", "2", "3", "4", "5"]


# ---------------------------------------------------------------- 7. a sharded index outside its folder


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """A tiny model saved, then split into two shards listed by model.safetensors.index.json."""
    from safetensors.numpy import load_file, save_file

    path = str(tmp_path_factory.mktemp("sharded"))
    cfg = tiny("qwen3", **TINY_MODEL)
    hf.save_pretrained(path, cfg, transformer.init_params(cfg, jax.random.PRNGKey(0)))
    tensors = load_file(os.path.join(path, "model.safetensors"))
    os.remove(os.path.join(path, "model.safetensors"))
    names = sorted(tensors)
    weight_map = {}
    for i, part in enumerate((names[: len(names) // 2], names[len(names) // 2:])):
        fname = f"model-0000{i + 1}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, os.path.join(path, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    _write_index(path, weight_map)
    return path, weight_map, tensors


def _write_index(path: str, weight_map: dict) -> None:
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def test_sharded_index_inside_its_folder_loads(sharded):
    path, _, tensors = sharded
    _, params = hf.load_pretrained(path)
    np.testing.assert_array_equal(np.asarray(params["embed"]), tensors["model.embed_tokens.weight"])


@pytest.mark.parametrize("where", ["../other/x.safetensors", "absolute"])
def test_sharded_index_entry_outside_the_folder_is_refused(sharded, tmp_path, where):
    src, weight_map, _ = sharded
    path = str(tmp_path / "models" / "m")
    shutil.copytree(src, path)
    outside = tmp_path / "models" / "other" / "x.safetensors"  # a real shard: the index would load it
    outside.parent.mkdir()
    name = "model.embed_tokens.weight"
    shutil.move(os.path.join(path, weight_map[name]), outside)
    fname = str(outside) if where == "absolute" else where
    _write_index(path, {**weight_map, **{n: fname for n, f in weight_map.items() if f == weight_map[name]}})
    index = os.path.join(path, "model.safetensors.index.json")
    with pytest.raises(hf.CheckpointError) as err:
        hf.load_pretrained(path)
    message = str(err.value)
    assert "\n" not in message and index in message and fname in message and "outside the model folder" in message


def test_cli_reports_a_checkpoint_error_in_one_line(capsys):
    def main(argv):
        raise hf.CheckpointError("m/model.safetensors.index.json: weight_map entry 'w' -> '../x' is outside")

    with pytest.raises(SystemExit) as exit_:
        main_guard(main)([])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "error: m/model.safetensors.index.json: weight_map entry 'w' -> '../x' is outside\n"


# ---------------------------------------------------------------- 5. broken model folders and data files name the file


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """A tiny model folder: config.json + model.safetensors."""
    path = str(tmp_path_factory.mktemp("single"))
    cfg = tiny("qwen3", **TINY_MODEL)
    hf.save_pretrained(path, cfg, transformer.init_params(cfg, jax.random.PRNGKey(0)))
    return path


def _broken_copy(src: str, dst: str, fname: str, cut) -> str:
    shutil.copytree(src, dst)
    target = os.path.join(dst, fname)
    with open(target, "rb") as f:
        data = f.read()
    with open(target, "wb") as f:
        f.write(cut(data))
    return target


@pytest.mark.parametrize("fname, cut, says", [
    ("config.json", lambda d: d[: len(d) // 2], "not valid JSON"),  # a copy cut short
    ("config.json", lambda d: b"\xff\xfe" + d, "not UTF-8"),
    ("model.safetensors", lambda d: d[:5], "truncated or corrupt"),  # the header length itself is cut
    ("model.safetensors", lambda d: d[: len(d) - 100], "truncated or corrupt"),  # the tensor data is cut
])
def test_a_broken_model_folder_names_the_file(single, tmp_path, fname, cut, says):
    target = _broken_copy(single, str(tmp_path / "m"), fname, cut)
    with pytest.raises(hf.CheckpointError) as err:
        hf.load_pretrained(str(tmp_path / "m"))
    message = str(err.value)
    assert "\n" not in message and message.startswith(target) and says in message, message


def test_a_non_utf8_byte_in_a_data_file_keeps_its_line(tmp_path):
    from jaxmarl_llm.data import jsonl
    from jaxmarl_llm.train.config import ConfigError

    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"prompt": "1+1", "completion": "2"}\n{"prompt": "caf\xe9", "completion": "x"}\n')
    with pytest.raises(ConfigError) as err:
        jsonl.read_objects(str(path), f"config.data_path: {path}", "{...}", "examples")
    assert f"{path}:2: not UTF-8" in str(err.value) and "0xe9" in str(err.value)


@pytest.mark.parametrize("name, kwargs, says", [
    ("mpe/simple_spread", {"num_agents": 0}, "num_agents must be at least 1, got 0"),
    ("mpe/simple_tag", {"num_good": 0}, "num_good must be at least 1, got 0"),
    ("mpe/simple_reference", {"local_ratio": 2.0}, "local_ratio must be in [0, 1], got 2.0"),
    ("text/tic_tac_toe", {"board": "ascii"}, "board style must be one of"),
    ("mpe/simple_spread", {"num_agent": 3}, "unknown keyword(s) 'num_agent'"),
])
def test_env_kwargs_an_env_refuses_are_one_line(capsys, name, kwargs, says):
    from jaxmarl_llm.envs import registry

    with pytest.raises(SystemExit) as exit_:
        main_guard(lambda argv: registry.make(name, **kwargs))([])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: config.env_kwargs: {name}: ") and says in err, err


def test_a_ctrl_c_during_a_save_lands_after_it():
    """checkpoints.ctrl_c_after: a SIGINT inside the block lets the block finish, then raises KeyboardInterrupt
    (the save it guards is complete); a second SIGINT raises at once; the previous handler is back after."""
    import signal

    from jaxmarl_llm.run.checkpoints import ctrl_c_after

    before, done = signal.getsignal(signal.SIGINT), []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_after():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the rest of the save")
    assert done == ["the rest of the save"]
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_after():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            done.append("never")
    assert done == ["the rest of the save"] and signal.getsignal(signal.SIGINT) is before
