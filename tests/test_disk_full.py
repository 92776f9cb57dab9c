"""A full disk: the run stops with one line naming what it could not write, the update and the
last complete checkpoint; nothing of the run is lost, and a resume once there is space ends where an uninterrupted
run ends. --verbose / JAXMARL_VERBOSE=1 shows the traceback behind the line."""

import errno
import os
import re
import shutil
import subprocess
import sys

import pytest

from jaxmarl_llm.errors import DiskFullError, no_space_cause
from jaxmarl_llm.run import checkpoints as checkpoints_lib
from jaxmarl_llm.run.cli import main_guard
from jaxmarl_llm.run.metrics_log import MetricsLog, read_csv
from test_run_safety import SPREAD_MLP, TRAIN, _run_config, _snapshot, _train

# what orbax 0.12 raised in the caller when tensorstore's write found a 200 KB tmpfs full
TENSORSTORE = ('RESOURCE_EXHAUSTED: Error writing "opt_state.1.0.nu.actor.net.layers.0.bias.value/0" in OCDBT database '
               'at local file "/r/checkpoints/100.orbax-checkpoint-tmp/default.orbax-checkpoint-tmp/ocdbt.process_0/": '
               'Failed writing: "/r/checkpoints/100.orbax-checkpoint-tmp/default.orbax-checkpoint-tmp/ocdbt.process_0/'
               'd/7e49": Failed to write 36753 bytes to file 20: No space left on device [os_error_code=\'28\']')


def _chained() -> RuntimeError:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/r/tb/events")
        except OSError as err:
            raise RuntimeError("flush failed") from err
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize("err, path", [
    (OSError(errno.ENOSPC, "No space left on device", "/r/metrics.csv"), "/r/metrics.csv"),
    (OSError(errno.EDQUOT, "Disk quota exceeded", "/r/config.json"), "/r/config.json"),
    (ValueError(TENSORSTORE), "/r/checkpoints/100.orbax-checkpoint-tmp/default.orbax-checkpoint-tmp/ocdbt.process_0/"),
    (_chained(), "/r/tb/events"),
    (DiskFullError("no space for checkpoint 3", "/r/checkpoints"), "/r/checkpoints"),
], ids=["enospc", "edquot", "tensorstore", "chained", "ours"])
def test_a_full_disk_is_recognised_in_every_form_it_arrives(err, path):
    assert no_space_cause(err)[1] == path


@pytest.mark.parametrize("err", [OSError(errno.EACCES, "Permission denied", "/r/x"),
                                 ValueError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8 bytes"),
                                 RuntimeError("Event loop is closed")], ids=["eacces", "oom", "other"])
def test_other_errors_are_not_a_full_disk(err):
    assert no_space_cause(err) is None


class _Disk:
    """shutil.disk_usage for run/checkpoints.py: plenty of space until `full` is set."""

    def __init__(self):
        self.full = False

    def __call__(self, path):
        return shutil._ntuple_diskusage(10**12, 10**12, 0 if self.full else 10**12)


def _full_from_save(monkeypatch, disk: _Disk, n: int) -> None:
    """The disk fills up just before the n-th checkpoint save."""
    monkeypatch.setattr(checkpoints_lib.shutil, "disk_usage", disk)
    save, calls = checkpoints_lib.Checkpoints.save, {"n": 0}

    def counting(self, step, state):
        calls["n"] += 1
        disk.full = disk.full or calls["n"] >= n
        return save(self, step, state)

    monkeypatch.setattr(checkpoints_lib.Checkpoints, "save", counting)


def _metric_rows(out_dir) -> list[tuple[str, str]]:
    return [(r["update"], r["team_return"]) for r in read_csv(os.path.join(out_dir, "metrics.csv"))]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("full") / "run"
    result = _train(_run_config(out_dir), updates=5)
    return float(result["state"]["count"]), _metric_rows(out_dir)


def test_a_checkpoint_the_disk_cannot_hold_stops_before_writing_it_and_the_resume_ends_identically(
        tmp_path, monkeypatch, uninterrupted):
    out_dir = str(tmp_path / "run")
    disk = _Disk()
    _full_from_save(monkeypatch, disk, 3)
    with pytest.raises(DiskFullError) as err:
        _train(_run_config(out_dir), updates=5)
    line = str(err.value)
    assert "\n" not in line and os.path.join(out_dir, "checkpoints") in line and "checkpoint 3" in line
    assert "after update 3" in line and "continue from update 2" in line and "--config.resume=True" in line
    assert sorted(os.listdir(os.path.join(out_dir, "checkpoints"))) == ["1", "2"]  # nothing half-written
    kept = _snapshot(os.path.join(out_dir, "checkpoints"))

    config = _run_config(out_dir)
    config.resume = "True"
    with pytest.raises(DiskFullError):  # resumed while the disk is still full: refused again at its first save
        _train(config, updates=5)
    assert _snapshot(os.path.join(out_dir, "checkpoints")) == kept  # a refused save changes no checkpoint

    monkeypatch.setattr(checkpoints_lib.shutil, "disk_usage", _Disk())
    config = _run_config(out_dir)
    config.resume = "True"
    result = _train(config, updates=5)
    assert (float(result["state"]["count"]), _metric_rows(out_dir)) == uninterrupted


def test_a_metrics_write_on_a_full_disk_names_the_file_and_the_resume_drops_its_torn_row(
        tmp_path, monkeypatch, uninterrupted):
    out_dir = str(tmp_path / "run")
    write, calls = MetricsLog.write, {"n": 0}

    def tearing(self, rows):
        calls["n"] += 1
        if calls["n"] == 3:  # the kernel took part of the row, then ran out of space
            with open(self.path, "a") as f:
                f.write("3,24,-")
            raise OSError(errno.ENOSPC, "No space left on device", self.path)
        return write(self, rows)

    monkeypatch.setattr(MetricsLog, "write", tearing)
    with pytest.raises(DiskFullError) as err:
        _train(_run_config(out_dir), updates=5)
    line = str(err.value)
    assert line.startswith(f"no space left on device writing {os.path.join(out_dir, 'metrics.csv')} after update 3")
    assert "continue from update 2" in line

    monkeypatch.setattr(MetricsLog, "write", write)
    config = _run_config(out_dir)
    config.resume = "True"
    result = _train(config, updates=5)
    assert (float(result["state"]["count"]), _metric_rows(out_dir)) == uninterrupted


def _raising(err):
    def main(argv):
        raise err

    return main


def test_cli_prints_one_line_with_status_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main_guard(_raising(DiskFullError("no space for checkpoint 3 in /r/checkpoints ...", "/r")))([])
    assert exit_.value.code == 2 and capsys.readouterr().err == "error: no space for checkpoint 3 in /r/checkpoints ...\n"

    # a write outside the run loop (eval.json, a sweep's table): the file and how to go on
    with pytest.raises(SystemExit) as exit_:
        main_guard(_raising(OSError(errno.ENOSPC, "No space left on device", "/r/eval.json")))([])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: no space left on device writing /r/eval.json: free space on that disk")


def test_other_os_errors_keep_their_traceback():
    with pytest.raises(PermissionError):
        main_guard(_raising(PermissionError(errno.EACCES, "Permission denied", "/r/x")))([])


def test_verbose_prints_the_traceback_before_the_line(capsys, monkeypatch):
    monkeypatch.setenv("JAXMARL_VERBOSE", "1")
    with pytest.raises(SystemExit) as exit_:
        main_guard(_raising(DiskFullError("no space for checkpoint 3", "/r")))([])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith("Traceback (most recent call last):") and err.endswith("error: no space for checkpoint 3\n")


def _mount_tmpfs(path: str, size: str) -> bool:
    os.makedirs(path, exist_ok=True)
    cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path]
    return shutil.which("mount") is not None and subprocess.run(cmd, capture_output=True).returncode == 0


def test_cli_on_a_really_full_disk(tmp_path):
    """The real thing where this machine lets us mount a small tmpfs (root with CAP_SYS_ADMIN), else skipped:
    the run stops with one line and status 2 before the checkpoint that does not fit, and once the disk is larger
    the resume ends with the uninterrupted run's metrics."""
    disk = str(tmp_path / "disk")
    if not _mount_tmpfs(disk, "1700k"):
        pytest.skip("cannot mount a tmpfs here")
    try:
        def cli(out_dir, *extra):
            args = [f"--config={SPREAD_MLP}", "--config.num_envs=8", "--config.num_steps=8",
                    "--config.total_timesteps=640", "--config.run.updates_per_chunk=2",
                    "--config.run.checkpoint_every=1", "--config.run.keep_checkpoints=100",
                    "--config.run.progress=False", "--config.run.plot=False", "--config.mesh.num_devices=1",
                    f"--config.run.out_dir={out_dir}", *extra]  # every checkpoint kept: the disk fills steadily
            return subprocess.run([sys.executable, TRAIN, *args], capture_output=True, text=True, timeout=300)

        out = cli(os.path.join(disk, "run"))
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1, out.stderr
        # which checkpoint no longer fits depends on the filesystem's block accounting: 6 or 8 here
        stop = re.fullmatch(rf"error: no space for checkpoint (\d+) in {re.escape(disk)}/run/checkpoints: it needs "
                            r"about [\d.]+ MB and the disk has [\d.]+ MB free after update \1: free space on that "
                            r"disk, then continue from update (\d+) \(its last complete checkpoint\) with "
                            r"--config.resume=True", lines[0])
        assert stop and 2 < int(stop[1]) < 10 and int(stop[2]) == int(stop[1]) - 2, lines[0]
        assert stop[2] in os.listdir(os.path.join(disk, "run", "checkpoints"))
        subprocess.run(["mount", "-o", "remount,size=8m", disk], check=True)
        assert cli(os.path.join(disk, "run"), "--config.resume=True").returncode == 0
        assert cli(str(tmp_path / "ref")).returncode == 0
        drop = ("steps_per_second",)
        strip = lambda rows: [{k: v for k, v in r.items() if k not in drop} for r in rows]  # noqa: E731
        assert strip(read_csv(os.path.join(disk, "run", "metrics.csv"))) == strip(
            read_csv(str(tmp_path / "ref" / "metrics.csv")))
    finally:
        subprocess.run(["umount", disk], capture_output=True)
