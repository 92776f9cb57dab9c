"""One run per run folder (run/run_lock.py): a second run is refused in one line naming the first, the lock dies
with its process (kill -9 included) and its file is then taken over with a line saying whose it was, and the
processes of a multi-process run each hold their own file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.run.run_lock import LOCK_FILE, RunLock, lock_path
from test_run_safety import _run_config, _snapshot, _train
from jaxmarl_llm.run import entry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLD = ("import sys; from jaxmarl_llm.run.run_lock import RunLock; RunLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); sys.stdin.read()")


def _holder(folder: str) -> subprocess.Popen:
    """Another process that holds `folder`'s lock until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, folder], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_held_folder_is_refused_naming_the_holder_and_freed_on_release(tmp_path):
    first = RunLock(str(tmp_path))
    assert first.acquire() is None  # nobody before it
    with pytest.raises(ConfigError) as err:
        RunLock(str(tmp_path)).acquire()  # flock is per open file: a second lock in this process is refused too
    message = str(err.value)
    assert "\n" not in message and f"pid {os.getpid()} on host" in message and "is in use by another run" in message
    first.release()
    assert not os.path.exists(lock_path(str(tmp_path)))  # a finished run leaves no lock file
    second = RunLock(str(tmp_path))
    assert second.acquire() is None
    second.release()


def test_a_killed_runs_lock_is_taken_over_with_a_line(tmp_path):
    proc = _holder(str(tmp_path))
    with pytest.raises(ConfigError, match=rf"pid {proc.pid} on host"):
        RunLock(str(tmp_path)).acquire()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert os.path.exists(lock_path(str(tmp_path)))  # the dead run's file stays, its flock is gone
    lock = RunLock(str(tmp_path))
    said = lock.acquire()
    assert said is not None and "left by a run that is gone" in said and f"pid {proc.pid}" in said
    lock.release()


def test_each_process_of_a_run_holds_its_own_file(tmp_path):
    zero, one = RunLock(str(tmp_path), 0), RunLock(str(tmp_path), 1)
    assert zero.acquire() is None and one.acquire() is None  # two processes of one run do not block each other
    assert os.path.basename(zero.path) == LOCK_FILE and os.path.basename(one.path) == LOCK_FILE + ".1"
    with pytest.raises(ConfigError):
        RunLock(str(tmp_path), 1).acquire()  # process 1 of a second run is refused as process 0 is
    zero.release(), one.release()


def test_training_into_a_folder_in_use_changes_nothing(tmp_path):
    """The lock is taken before any check, build or file: a second run (a fresh one with overwrite, here) is
    refused and the first run's files stay as they were."""
    config = _run_config(str(tmp_path / "run"))
    _train(config, updates=2)  # a finished run: checkpoints, metrics, config.json
    proc = _holder(config.run.out_dir)
    try:
        before = _snapshot(config.run.out_dir)
        config.run.overwrite = True
        with pytest.raises(ConfigError, match=r"is in use by another run"):
            entry.train_from_config(config)
        assert _snapshot(config.run.out_dir) == before
    finally:
        proc.kill()
        proc.wait()


def test_a_folder_the_lock_made_goes_when_the_run_left_it_empty(tmp_path):
    refused = RunLock(str(tmp_path / "new"))  # a run refused before writing a file: no empty folder stays
    refused.acquire()
    refused.release()
    assert not os.path.exists(tmp_path / "new")
    wrote = RunLock(str(tmp_path / "run"))
    wrote.acquire()
    (tmp_path / "run" / "metrics.csv").write_text("update\n")
    wrote.release()
    assert os.listdir(tmp_path / "run") == ["metrics.csv"]
    os.mkdir(tmp_path / "mine")  # a folder the user made stays, empty or not
    theirs = RunLock(str(tmp_path / "mine"))
    theirs.acquire()
    theirs.release()
    assert os.path.isdir(tmp_path / "mine") and os.listdir(tmp_path / "mine") == []
