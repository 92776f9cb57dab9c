"""kill -9 at random points: a run killed ten times, each time resumed, ends bit-identical to a run
that was never interrupted: every metric of every update, and every array of the final checkpoint (parameters,
optimizer, environments, key).

The runs are real `experiments/train.py` processes of configs/spread_mlp.py on a small budget, saving a checkpoint
after every update, so kills land during start-up, during compiled updates and during checkpoint writes. JAX's
persistent compilation cache (filled by the uninterrupted run) keeps each relaunch's start-up short."""

import os
import random
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp

from jaxmarl_llm.run.metrics_log import read_csv
from test_run_safety import SPREAD_MLP, TRAIN

KILLS = 10
# a launch that gets past start-up saves 1 to ~3 updates before its kill (the wait after its first checkpoint is
# timed from the uninterrupted run, which the other test worker may slow or speed up): 40 keeps the run unfinished
# after the ten kills (24 was reached once under load: [3, 5, 5, 8, 8, 11, ..., 24])
UPDATES = 40


def _command(out_dir: str, resume: bool) -> list[str]:
    return [sys.executable, TRAIN, f"--config={SPREAD_MLP}", "--config.num_envs=16", "--config.num_steps=16",
            f"--config.total_timesteps={16 * 16 * UPDATES}", "--config.run.updates_per_chunk=1",
            "--config.run.checkpoint_every=1", "--config.run.keep_checkpoints=2", "--config.run.progress=False",
            "--config.run.plot=False", "--config.mesh.num_devices=1", f"--config.run.out_dir={out_dir}",
            f"--config.resume={resume}"]


def _latest(out_dir: str) -> int:
    folder = os.path.join(out_dir, "checkpoints")
    steps = [int(n) for n in os.listdir(folder) if n.isdigit()] if os.path.isdir(folder) else []
    return max(steps, default=0)


def _final_state(out_dir: str):
    return ocp.StandardCheckpointer().restore(os.path.join(out_dir, "checkpoints", str(UPDATES), "default"))


def _metrics(out_dir: str) -> list[dict[str, str]]:
    rows = read_csv(os.path.join(out_dir, "metrics.csv"))
    return [{k: v for k, v in r.items() if k != "steps_per_second"} for r in rows]  # wall-clock: differs


def test_kill_9_ten_times_and_resume_ends_bit_identical_to_an_uninterrupted_run(tmp_path):
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax_cache"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    reference, killed = str(tmp_path / "reference"), str(tmp_path / "killed")
    # the uninterrupted run (it fills the compilation cache); its time per update after the first checkpoint
    done = subprocess.Popen(_command(reference, False), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    while _latest(reference) == 0 and done.poll() is None:
        time.sleep(0.01)
    t0 = time.perf_counter()
    _, err = done.communicate(timeout=600)
    assert done.returncode == 0, err
    per_update = max((time.perf_counter() - t0) / (UPDATES - 1), 0.01)

    rng = random.Random(0)
    first = None  # a warm launch's time to its first checkpoint, from the first launch
    progress = []  # the latest checkpoint after each kill
    for launch in range(KILLS):
        before, t0 = _latest(killed), time.perf_counter()
        run = subprocess.Popen(_command(killed, resume=launch > 0), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        if first is not None and rng.random() < 1 / 3:  # during start-up: imports, compile, restore
            time.sleep(rng.uniform(0, first))
        else:  # once this launch has saved a checkpoint, within the next update or two (mostly checkpoint writes)
            while _latest(killed) == before and run.poll() is None:
                time.sleep(0.005)
            first = first or time.perf_counter() - t0
            time.sleep(rng.uniform(0, 1.5 * per_update))
        run.send_signal(signal.SIGKILL)
        run.wait()
        assert run.returncode == -signal.SIGKILL, (launch, run.returncode, run.stderr.read())
        run.stderr.close()
        progress.append(_latest(killed))
    assert progress[-1] < UPDATES and sum(b > a for a, b in zip([0, *progress], progress)) >= 3, progress

    done = subprocess.run(_command(killed, True), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert _metrics(killed) == _metrics(reference)
    assert [r["update"] for r in _metrics(killed)] == [str(u) for u in range(1, UPDATES + 1)]
    ours, theirs = _final_state(killed), _final_state(reference)
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
