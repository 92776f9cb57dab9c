"""Several processes joined by jax.distributed train the same run as one process over as many devices.

Each case launches real `experiments/train.py` processes on this machine: N processes of K forced CPU devices each
(JAXMARL_COORDINATOR / JAXMARL_NUM_PROCESSES / JAXMARL_PROCESS_ID, gloo collectives) against one plain process of
N x K devices. The mesh spans every process's devices, so the program, the data split and the random draws are the
same; what differs is the all-reduce: gloo's summation order under jax.distributed, XLA's in-process one in a plain
process. So sums over 4 devices may differ in the last bits (measured: metrics by <= 1e-6, checkpointed parameters
and Adam moments by <= 6e-8, environments identical; rtol 1e-5, atol 1e-6 below); over 2 devices a sum has one
order and the LM case came out bit-identical. Runs under jax.distributed are bit-identical to each other whatever
the split (1 x 4, 2 x 2, 4 x 1), and a resume is exact.

A resume may change the process count at the same device count (2 x 2 -> 1 x 4 and 1 x 4 -> 2 x 2): orbax restores
each array onto the resuming run's shardings (checkpoints.py passes them; the device ids recorded at save are not
used), the env shards and keys do not depend on which process holds them, and the run ends within the tolerance
above of the uninterrupted one (measured: metrics by <= 1e-6, parameters and Adam moments by <= 6e-8, envs
and keys identical).

Default suite (~125 s on 2 cores under load): 2 processes x 2 devices vs 1 x 4 (two launches shared by the tests,
~55 s), that run's resume from its 2-process checkpoint (~30 s), and the two resumes with the other process count
(~15 s and ~30 s); `-m slow`: 4 processes x 1 device (~80 s), an LM run at 2 x 1 vs 1 x 2 (~135 s), and an LM base
sharded over both processes' devices (mesh.fsdp=4 at 2 x 2) vs 1 x 4 unsharded (~75 s)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import SingleDeviceSharding

from jaxmarl_llm.errors import ProcessGroupError
from jaxmarl_llm.parallel.rendezvous import rendezvous
from jaxmarl_llm.run.cli import distributed_settings
from jaxmarl_llm.run.metrics_log import read_csv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "experiments", "train.py")
DEVICES_PREFIX = "--xla_force_host_platform_device_count="
TIMEOUT = 420  # seconds for one launch (all its processes), far above the ~45 s a launch takes on 2 loaded cores

# configs/spread_mlp.py, 4 updates of 8 envs x 8 steps in chunks of 2, a checkpoint after each chunk (2 and 4)
MLP_UPDATES = 4
MLP = [f"--config={os.path.join(ROOT, 'configs', 'spread_mlp.py')}", "--config.num_envs=8", "--config.num_steps=8",
       f"--config.total_timesteps={8 * 8 * MLP_UPDATES}", "--config.run.updates_per_chunk=2",
       "--config.run.checkpoint_every=1", "--config.run.keep_checkpoints=2", "--config.run.progress=False"]
# configs/spread.py (LM agents on tokenized simple_spread, PPO, world-state critic) on a tiny random model:
# dense rewards, so a random model's first updates already move the adapters; 2 updates in one chunk
LM_UPDATES = 2
LM = [f"--config={os.path.join(ROOT, 'configs', 'spread.py')}", "--config.model.hidden_size=32",
      "--config.model.intermediate_size=64", "--config.model.num_layers=1", "--config.model.num_heads=2",
      "--config.model.num_kv_heads=1", "--config.model.max_position_embeddings=512", "--config.lora.rank=4",
      "--config.critic.hidden=32", "--config.env_kwargs.max_cycles=4", "--config.num_turns=4", "--config.num_envs=4",
      "--config.num_minibatches=2", f"--config.total_episodes={4 * LM_UPDATES}", "--config.run.updates_per_chunk=2",
      "--config.run.progress=False"]


QUIET = ["--config.run.tensorboard=False", "--config.run.plot=False"]  # a reference run: metrics.csv is enough


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int, group: dict[str, str]) -> dict[str, str]:
    """This session's environment (compile flags, compilation cache) with `devices` forced CPU devices and the
    process's JAXMARL_* group settings (none: a plain single-process run)."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(DEVICES_PREFIX)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXMARL_")}
    return {**env, **group, "XLA_FLAGS": " ".join([*flags, f"{DEVICES_PREFIX}{devices}"]), "JAX_PLATFORMS": "cpu"}


def launch(processes: int, devices: int, args: list[str], timeout: float = TIMEOUT) -> list[str]:
    """Run experiments/train.py as `processes` processes of `devices` devices each (one plain process when
    `processes` is 1); their stdouts, process 0 first. Fails at the first non-zero exit or at the timeout; every
    process started here is killed on the way out. Output goes to files: a full pipe would stall a process in a collective."""
    port = _free_port()
    procs, logs = [], []
    try:
        for rank in range(processes):
            group = {} if processes == 1 else {"JAXMARL_COORDINATOR": f"127.0.0.1:{port}",
                                               "JAXMARL_NUM_PROCESSES": str(processes),
                                               "JAXMARL_PROCESS_ID": str(rank)}
            logs.append((tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")))
            procs.append(subprocess.Popen([sys.executable, TRAIN, *args], env=_env(devices, group), cwd=ROOT,
                                          stdout=logs[-1][0], stderr=logs[-1][1], text=True))
        deadline = time.monotonic() + timeout
        # until all exit, one fails (the others would wait for it in a collective) or the time is up
        while any(p.poll() is None for p in procs) and not any(p.poll() for p in procs):
            assert time.monotonic() < deadline, f"{processes} processes still running after {timeout} s"
            time.sleep(0.2)
        for out, err in logs:
            out.seek(0)
            err.seek(0)
        failed = [rank for rank, p in enumerate(procs) if p.returncode]
        assert not failed, (f"process {failed[0]} of {processes} exited {procs[failed[0]].returncode}:\n"
                            f"{logs[failed[0]][1].read()[-4000:]}")
        return [out.read() for out, _ in logs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        for out, err in logs:
            out.close()
            err.close()


WALL_CLOCK = ("steps_per_second", "tokens_per_second", "mfu")  # per chunk, from its wall time


def metrics(out_dir: str) -> list[dict[str, float]]:
    """metrics.csv as numbers, less the wall-clock throughput."""
    return [{k: float(v) for k, v in row.items() if k not in WALL_CLOCK}
            for row in read_csv(os.path.join(out_dir, "metrics.csv"))]


def checkpoint(out_dir: str, step: int) -> dict:
    """Checkpoint `step`'s arrays, whatever mesh saved it (read onto this process's first device)."""
    path = os.path.join(out_dir, "checkpoints", str(step), "default")
    checkpointer = ocp.StandardCheckpointer()
    device = SingleDeviceSharding(jax.devices()[0])
    target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
                          checkpointer.metadata(path).item_metadata)
    return jax.tree.map(np.asarray, checkpointer.restore(path, target))


def assert_same_run(ours: str, theirs: str, step: int, exact: bool = False) -> None:
    """Same metrics rows and the same arrays in checkpoint `step` (the whole runner state): exactly, or up to
    float reordering in the collectives."""
    check = np.testing.assert_array_equal if exact else lambda a, b, err_msg: np.testing.assert_allclose(
        a, b, rtol=1e-5, atol=1e-6, err_msg=err_msg)
    rows_a, rows_b = metrics(ours), metrics(theirs)
    assert [sorted(r) for r in rows_a] == [sorted(r) for r in rows_b]
    for a, b in zip(rows_a, rows_b):
        check(np.array(list(a.values())), np.array([b[k] for k in a]), err_msg=f"update {a['update']}: {list(a)}")
    state_a, state_b = checkpoint(ours, step), checkpoint(theirs, step)
    assert jax.tree.structure(state_a) == jax.tree.structure(state_b)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(state_a), jax.tree.leaves(state_b)):
        check(a, b, err_msg=jax.tree_util.keystr(path))


def assert_primary_reported(stdouts: list[str], out_dir: str) -> None:
    """Process 0 alone reports the run; the run folder holds one run's files."""
    assert f"outputs in {out_dir}" in stdouts[0]
    assert all("outputs in" not in out for out in stdouts[1:]), stdouts[1:]
    for name in ("config.json", "metrics.csv", "tb", "learning_curve.png"):
        assert os.path.exists(os.path.join(out_dir, name)), name


@pytest.fixture(scope="module")
def mlp_runs(tmp_path_factory):
    """The uninterrupted spread_mlp run as 1 process x 4 devices and as 2 processes x 2 devices (with the 2-process
    stdouts), shared by the tests below (~55 s together on 2 loaded cores). Tests copy them, never change them."""
    base = tmp_path_factory.mktemp("mlp_runs")
    one, two = str(base / "one_x4"), str(base / "two_x2")
    launch(1, 4, [*MLP, *QUIET, f"--config.run.out_dir={one}"])
    stdouts = launch(2, 2, [*MLP, f"--config.run.out_dir={two}"])
    return one, two, stdouts


def killed_after_first_checkpoint(run: str, copy: str) -> str:
    """A copy of a finished run as if it had been killed after its first checkpoint (update 2): checkpoint 4 gone,
    metrics.csv still holding rows 3 and 4 (a resume drops them and writes them again)."""
    shutil.copytree(run, copy)
    shutil.rmtree(os.path.join(copy, "checkpoints", str(MLP_UPDATES)))
    return copy


def test_two_processes_of_two_devices_match_one_process_of_four_and_resume(mlp_runs, tmp_path):
    one, two, stdouts = mlp_runs
    assert_primary_reported(stdouts, two)
    assert [int(r["update"]) for r in metrics(two)] == list(range(1, MLP_UPDATES + 1))
    assert_same_run(two, one, MLP_UPDATES)

    # the same 2-process run killed after its first checkpoint (update 2), resumed by 2 processes
    resumed = killed_after_first_checkpoint(two, str(tmp_path / "two_x2_resumed"))
    stdouts = launch(2, 2, [*MLP, *QUIET, f"--config.run.out_dir={resumed}", "--config.resume=True"])
    assert f"resumed {resumed} at update 2/{MLP_UPDATES}" in stdouts[0]
    assert "resumed" not in stdouts[1]
    assert_same_run(resumed, two, MLP_UPDATES, exact=True)


def assert_same_envs(ours: str, theirs: str, step: int) -> None:
    """The envs, observations, key and update counter in checkpoint `step` of two runs are bit-identical: each env
    draws its randomness from its global index (parallel/mesh.py global_index), whichever process holds its shard,
    and the policy's last-bit differences (module doc) flip no sampled action in these few updates."""
    state_a, state_b = checkpoint(ours, step), checkpoint(theirs, step)
    for name in ("env_state", "obs", "key", "update_step"):
        for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(state_a[name]), jax.tree.leaves(state_b[name])):
            np.testing.assert_array_equal(a, b, err_msg=f"checkpoint {step}: {name}{jax.tree_util.keystr(path)}")


def test_the_environments_and_keys_do_not_depend_on_the_process_count(mlp_runs):
    """What lets a resume change the process count: the checkpointed env shards and key after update 2 (where the
    resumes below start) are the same whether 1 process or 2 held the 4 devices' env shards."""
    one, two, _ = mlp_runs
    assert_same_envs(two, one, 2)


@pytest.mark.parametrize("saved_by, resumed_by", [((2, 2), (1, 4)), ((1, 4), (2, 2))], ids=["2x2_to_1x4", "1x4_to_2x2"])
def test_resume_with_another_process_count_continues_the_run(mlp_runs, tmp_path, saved_by, resumed_by):
    """A run checkpointed by 2 processes x 2 devices resumes as 1 process x 4 devices, and the reverse: orbax reads
    each array whatever process wrote it, onto the resuming mesh (the same 4 devices' worth of env shards); the
    rows and state at the end are the uninterrupted run's (up to the all-reduce's summation order, module doc)."""
    one, two, _ = mlp_runs
    resumed = killed_after_first_checkpoint(two if saved_by == (2, 2) else one, str(tmp_path / "resumed"))
    stdouts = launch(*resumed_by, [*MLP, *QUIET, f"--config.run.out_dir={resumed}", "--config.resume=True"])
    assert f"resumed {resumed} at update 2/{MLP_UPDATES}" in stdouts[0]
    assert all("resumed" not in out for out in stdouts[1:])
    assert [int(r["update"]) for r in metrics(resumed)] == list(range(1, MLP_UPDATES + 1))
    assert_same_run(resumed, one, MLP_UPDATES)
    assert_same_run(resumed, two, MLP_UPDATES)
    assert_same_envs(resumed, one, MLP_UPDATES)


@pytest.mark.slow  # ~80 s more (four processes compile the program on 2 cores)
def test_four_processes_of_one_device_match_one_process_of_four(tmp_path):
    one, four = str(tmp_path / "one_x4"), str(tmp_path / "four_x1")
    launch(1, 4, [*MLP, *QUIET, f"--config.run.out_dir={one}"])
    stdouts = launch(4, 1, [*MLP, f"--config.run.out_dir={four}"])
    assert_primary_reported(stdouts, four)
    assert_same_run(four, one, MLP_UPDATES)


@pytest.mark.slow  # ~140 s: the LM program compiles in each process
def test_lm_two_processes_match_one_process_of_two_devices(tmp_path):
    one, two = str(tmp_path / "one_x2"), str(tmp_path / "two_x1")
    launch(1, 2, [*LM, *QUIET, f"--config.run.out_dir={one}"])
    stdouts = launch(2, 1, [*LM, f"--config.run.out_dir={two}"])
    assert_primary_reported(stdouts, two)
    assert any(abs(r["grad_norm"]) > 0 for r in metrics(one))  # the adapters moved: the comparison means something
    assert_same_run(two, one, LM_UPDATES)


@pytest.mark.slow  # ~110 s: two launches
def test_lm_base_sharded_across_two_processes_matches_one_process(tmp_path):
    """mesh.fsdp=4 over 2 processes x 2 devices: each base weight is split over devices of both processes (placed
    from every process's host copy, parallel/multihost.py) and gathered per layer; same run as 1 x 4 unsharded,
    and the same held-out evaluation after it."""
    one, two = str(tmp_path / "one_x4"), str(tmp_path / "two_x2_fsdp4")
    lm = [a for a in LM if not a.startswith(("--config.num_envs", "--config.total_episodes"))]
    lm += ["--config.num_envs=8", f"--config.total_episodes={8 * LM_UPDATES}", "--config.eval_episodes=4", *QUIET]
    launch(1, 4, [*lm, f"--config.run.out_dir={one}"])
    launch(2, 2, [*lm, "--config.mesh.fsdp=4", f"--config.run.out_dir={two}"])
    assert any(abs(r["grad_norm"]) > 0 for r in metrics(one))
    assert_same_run(two, one, LM_UPDATES)
    # the held-out evaluation after training: both processes play it over the sharded mesh (the primary alone
    # would wait in a collective for ever), the same games as one process plays unsharded
    with open(os.path.join(one, "eval.json")) as f, open(os.path.join(two, "eval.json")) as g:
        assert json.load(g) == pytest.approx(json.load(f), rel=1e-5, abs=1e-5, nan_ok=True)


# ---- the environment a launcher sets -------------------------------------------------------------


def test_distributed_settings_read_an_explicit_group_or_defer_to_cluster_detection():
    group = {"JAXMARL_COORDINATOR": "10.0.0.1:1234", "JAXMARL_NUM_PROCESSES": "4", "JAXMARL_PROCESS_ID": "3"}
    assert distributed_settings({}) is None
    assert distributed_settings({"JAXMARL_MULTIHOST": "1"}) == {}  # jax detects the TPU pod / SLURM job
    assert distributed_settings(group) == {"coordinator_address": "10.0.0.1:1234", "num_processes": 4,
                                           "process_id": 3}
    assert distributed_settings({**group, "JAXMARL_LOCAL_DEVICE_IDS": "0,1"})["local_device_ids"] == [0, 1]


@pytest.mark.parametrize("bad, names", [
    ({"JAXMARL_PROCESS_ID": None}, "JAXMARL_PROCESS_ID"),
    ({"JAXMARL_NUM_PROCESSES": "two"}, "must be integers"),
    ({"JAXMARL_PROCESS_ID": "4"}, "JAXMARL_PROCESS_ID=4 must be in [0, JAXMARL_NUM_PROCESSES=4)"),
])
def test_an_incomplete_group_is_one_line_naming_the_variable(bad, names, capsys):
    group = {"JAXMARL_COORDINATOR": "10.0.0.1:1234", "JAXMARL_NUM_PROCESSES": "4", "JAXMARL_PROCESS_ID": "3"}
    environ = {k: v for k, v in {**group, **bad}.items() if v is not None}
    with pytest.raises(SystemExit) as exit_info:
        distributed_settings(environ)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert names in err and err.count("\n") == 1


# ---- the meeting before jax.distributed (parallel/rendezvous.py)


def _meet(port: int, ids: list[int], num: int, timeout: float) -> dict[int, BaseException | None]:
    """Run rendezvous for each of `ids` in its own thread; what each ended with (None: it returned)."""
    ended: dict[int, BaseException | None] = {}

    def one(i):
        try:
            rendezvous(f"127.0.0.1:{port}", num, i, timeout)
            ended[i] = None
        except BaseException as err:  # noqa: BLE001 - the test reads it
            ended[i] = err

    threads = [threading.Thread(target=one, args=(i,)) for i in ids]
    for t in reversed(threads):  # the others start before process 0 listens: they retry
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(timeout + 10)
    return ended


def test_rendezvous_returns_when_all_come_and_names_who_did_not():
    assert _meet(_free_port(), [0, 1, 2, 3], 4, 20) == {0: None, 1: None, 2: None, 3: None}
    ended = _meet(_free_port(), [0, 2], 4, 2)  # 1 and 3 never come: both present processes say so
    for i in (0, 2):
        assert isinstance(ended[i], ProcessGroupError) and "processes 1, 3 of 4 did not join within 2 s" in str(ended[i])
    ended = _meet(_free_port(), [0, 1, 1], 3, 2)  # two processes with one index
    assert isinstance(ended[0], ProcessGroupError) and "two processes started with JAXMARL_PROCESS_ID=1" in str(ended[0])
