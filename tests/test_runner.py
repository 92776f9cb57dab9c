"""The Python loop: a killed run resumes to the same numbers; bad configs fail at start-up naming the key."""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from configs import spread_mlp
from jaxmarl_llm.errors import DivergenceError
from jaxmarl_llm.run import entry
from jaxmarl_llm.run.metrics_log import read_csv
from jaxmarl_llm.run.runner import run_training
from jaxmarl_llm.train import mlp_ppo
from jaxmarl_llm.train.config import ConfigError
from killing import Killed, dying_after

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _small_config(out_dir):
    c = spread_mlp.get_config()
    c.num_envs, c.num_steps, c.total_timesteps = 8, 16, 8 * 16 * 6
    c.mesh.num_devices = 1
    c.run.out_dir, c.run.updates_per_chunk, c.run.checkpoint_every = str(out_dir), 2, 1
    c.run.progress, c.run.tensorboard = False, True
    return c



def test_killed_run_resumes_to_identical_results(tmp_path):
    full = run_training(_small_config(tmp_path / "full"), *_trainer_parts(_small_config(tmp_path / "full")))

    config = _small_config(tmp_path / "killed")
    trainer, chunk_fn, steps, _ = _trainer_parts(config)
    with pytest.raises(Killed):  # dies during the third chunk, after two checkpoints
        run_training(config, trainer, dying_after(chunk_fn, 3), steps)
    assert len(read_csv(os.path.join(config.run.out_dir, "metrics.csv"))) == 4

    config.resume = "True"
    resumed = run_training(config, *_trainer_parts(config))
    for a, b in zip(jax.tree.leaves(full["state"].params), jax.tree.leaves(resumed["state"].params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows_full = read_csv(os.path.join(full["out_dir"], "metrics.csv"))
    rows_resumed = read_csv(os.path.join(config.run.out_dir, "metrics.csv"))
    assert [r["update"] for r in rows_resumed] == [str(i) for i in range(1, 7)]
    for a, b in zip(rows_full, rows_resumed):
        assert a["team_return"] == b["team_return"]
    assert os.path.exists(os.path.join(config.run.out_dir, "learning_curve.png"))
    assert os.listdir(os.path.join(config.run.out_dir, "tb"))


def _trainer_parts(config):
    return entry.build(config)


def test_on_gcsfuse_reads_the_mount_table(tmp_path):
    from jaxmarl_llm.run.checkpoints import on_gcsfuse

    table = tmp_path / "mounts"
    table.write_text("/dev/root / ext4 rw 0 0\n"
                     "my-bucket /gcs/my-bucket fuse.gcsfuse rw,nosuid,nodev 0 0\n"
                     "tmpfs /gcs/my-bucket/scratch tmpfs rw 0 0\n"
                     "b2 /mnt/with\\040space fuse.gcsfuse rw 0 0\n")
    assert on_gcsfuse("/gcs/my-bucket/runs/a/checkpoints", str(table))  # need not exist yet
    assert on_gcsfuse("/gcs/my-bucket", str(table))
    assert not on_gcsfuse("/gcs/my-bucket-2/runs", str(table))  # a prefix of the name is not inside
    assert not on_gcsfuse("/gcs/my-bucket/scratch/x", str(table))  # the deepest mount decides
    assert not on_gcsfuse("/home/me/runs", str(table))
    assert on_gcsfuse("/mnt/with space/runs", str(table))
    assert not on_gcsfuse("/x", str(tmp_path / "no-such-table"))


def test_a_run_on_a_gcsfuse_mount_commits_by_file_and_resumes_identically(tmp_path, monkeypatch):
    """On a Cloud Storage FUSE mount (here: the mount check answers yes) each step is written in place with a
    commit_success.txt instead of renamed from a temporary folder; a run killed between chunks, with a step folder
    left half-written (no commit file, as a kill mid-save leaves it), resumes past it to the uninterrupted run's
    parameters and metrics."""
    import shutil

    from jaxmarl_llm.run import checkpoints

    full = run_training(_small_config(tmp_path / "full"), *_trainer_parts(_small_config(tmp_path / "full")))
    monkeypatch.setattr(checkpoints, "on_gcsfuse", lambda path, mounts="/proc/mounts": True)
    config = _small_config(tmp_path / "killed")
    trainer, chunk_fn, steps, _ = _trainer_parts(config)
    with pytest.raises(Killed):  # dies during the third chunk, after the checkpoints of updates 2 and 4
        run_training(config, trainer, dying_after(chunk_fn, 3), steps)
    folder = os.path.join(config.run.out_dir, "checkpoints")
    assert sorted(os.listdir(folder)) == ["2", "4"]
    assert all(os.path.exists(os.path.join(folder, step, "commit_success.txt")) for step in ("2", "4"))
    shutil.copytree(os.path.join(folder, "4"), os.path.join(folder, "6"))  # a save of update 6 cut short
    os.remove(os.path.join(folder, "6", "commit_success.txt"))

    config.resume = "True"
    resumed = run_training(config, *_trainer_parts(config))
    for a, b in zip(jax.tree.leaves(full["state"].params), jax.tree.leaves(resumed["state"].params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows = read_csv(os.path.join(config.run.out_dir, "metrics.csv"))
    assert [r["team_return"] for r in rows] == [r["team_return"] for r in read_csv(os.path.join(full["out_dir"],
                                                                                                "metrics.csv"))]
    assert os.path.exists(os.path.join(folder, "6", "commit_success.txt"))  # written over by the real save


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("num_minibatches", 5, "config.num_minibatches"),
        ("algo", "qmix", "config.algo"),
        ("num_envs", 0, "config.num_envs"),
        ("gamma", 1.5, "config.gamma"),
        ("env_name", "mpe/nope", "config.env_name"),
    ],
)
def test_invalid_values_name_the_key(tmp_path, key, value, match):
    config = _small_config(tmp_path)
    config[key] = value
    with pytest.raises(ConfigError, match=match):
        entry.build(config)


def test_unknown_env_kwarg_names_the_key(tmp_path):
    config = _small_config(tmp_path)
    config.env_kwargs.num_agent = 3
    with pytest.raises(ConfigError, match="num_agent"):
        entry.build(config)


def test_cli_reports_unknown_override_and_bad_value():
    script = os.path.join(ROOT, "experiments", "train.py")
    cfg = os.path.join(ROOT, "configs", "spread_mlp.py")
    out = subprocess.run([sys.executable, script, f"--config={cfg}", "--config.network.hiden=3"], capture_output=True, text=True)
    assert out.returncode != 0 and "config.network.hiden" in out.stderr + out.stdout
    out = subprocess.run([sys.executable, script, f"--config={cfg}", "--config.num_minibatches=7"], capture_output=True, text=True)
    assert out.returncode == 2 and "config.num_minibatches" in out.stderr


def test_nan_loss_stops_before_checkpointing(tmp_path):
    config = _small_config(tmp_path)
    config.lr = 1e30  # diverges to non-finite losses in the first chunk, before any checkpoint
    config.max_grad_norm = 1e30
    trainer, chunk_fn, steps, _ = entry.build(config)
    with pytest.raises(DivergenceError, match=r"^divergence: non-finite .*value_loss.* at update 2; no checkpoint was "
                                              r"saved yet; start again with a lower lr"):
        run_training(config, trainer, chunk_fn, steps)
    assert os.listdir(os.path.join(config.run.out_dir, "checkpoints")) == []  # the message claims none


def test_mlp_ppo_update_is_pure(tmp_path):
    config = _small_config(tmp_path)
    trainer = mlp_ppo.make_train(config)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    a, _ = jax.jit(trainer.update)(state, trainer.hparams)
    b, _ = jax.jit(trainer.update)(state, trainer.hparams)
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
        np.testing.assert_array_equal(x, y)
