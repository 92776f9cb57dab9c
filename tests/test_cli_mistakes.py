"""Every command-line mistake found by probing train.py, eval.py and sweep.py, in one table: the command, the exit
status, the one line on stderr, and the folder whose files must be left exactly as they were. A case that regrows
(a traceback, a usage dump, a file written before the refusal) fails here.

The folders are made once per module: a 10-update configs/spread_mlp.py run (a checkpoint of another game for
eval.py's tic-tac-toe) and a two-setting sweep. A case marked `held` runs while another process holds the run
folder's lock (run/run_lock.py), as a second run started on a folder in use would."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = {name: os.path.join(ROOT, "experiments", f"{name}.py") for name in ("train", "eval", "sweep")}
SPREAD_MLP = os.path.join(ROOT, "configs", "spread_mlp.py")
TTT = os.path.join(ROOT, "configs", "tic_tac_toe.py") + ":scratch"
SMALL = ["--config.total_timesteps=40960", "--config.run.progress=False", "--config.run.tensorboard=False"]
HOLD = ("import sys; from jaxmarl_llm.run.run_lock import RunLock; lock = RunLock(sys.argv[1]); lock.acquire(); "
        "print('held', flush=True); sys.stdin.read(); lock.release()")


def _run(script: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, SCRIPT[script], *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("cli")
    out = {"run": str(base / "run"), "sweep": str(base / "sweep"), "missing": str(base / "missing"), "base": str(base)}
    done = _run("train", f"--config={SPREAD_MLP}", f"--config.run.out_dir={out['run']}", *SMALL)
    assert done.returncode == 0, done.stderr[-2000:]
    done = _run("sweep", f"--config={SPREAD_MLP}", "--config.total_timesteps=8192", "--sweep.lr=1e-3,3e-4",
                f"--sweep.out_dir={out['sweep']}")
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def snapshot(folder: str) -> dict[str, str]:
    """{relative path: sha256} of every file under `folder` ({} when it does not exist)."""
    out = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


# (case, script, arguments ({run}, {sweep}, {missing} filled in), the line's pattern, the folder left untouched,
# held: another process holds that folder's lock)
CASES = [
    ("a second run on a folder in use", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}", "--config.resume=True", *SMALL],
     r"config\.run\.out_dir: '.*/run' is in use by another run, pid \d+ on host .*; wait for it to end", "run", True),
    ("a second run with overwrite on a folder in use", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}", "--config.run.overwrite=True", *SMALL],
     r"is in use by another run, pid \d+", "run", True),
    ("a forced resume whose runner state does not fit", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}", "--config.resume=True", "--config.resume_force=True",
      "--config.env_kwargs.num_agents=4", *SMALL],
     r"checkpoint .*/run/checkpoints/10 does not fit this config's runner state \(saved -> now\): "
     r"params\.actor\.net\.layers\.0\.kernel\.value: \(18, 64\) -> \(24, 64\)", "run", False),
    ("a resume of a folder that holds no run (a misspelled name)", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={missing}", "--config.resume=True", *SMALL],
     r"config\.resume: no run in '.*/missing' \(no config\.json, no checkpoint\) to continue; check the folder's name",
     "base", False),
    ("a run folder that is a file", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}/config.json", *SMALL],
     r"config\.run\.out_dir: '.*/run/config\.json' is a file, not a folder; choose another", "run", False),
    ("eval: no episodes", "eval", [f"--config={TTT}", "--episodes=0"], r"--episodes=0: play at least 1 episode",
     "base", False),
    ("eval: a negative episode count", "eval", [f"--config={TTT}", "--episodes=-5"], r"--episodes=-5: play at least",
     "base", False),
    ("eval: a missing checkpoint folder", "eval", [f"--config={TTT}", "--checkpoint={missing}"],
     r"--checkpoint='.*/missing': no such run directory", "base", False),
    ("eval: a folder without checkpoints", "eval", [f"--config={TTT}", "--checkpoint={sweep}"],
     r"--checkpoint='.*/sweep': holds no checkpoint", "base", False),
    ("eval: a checkpoint of another game", "eval", [f"--config={TTT}", "--checkpoint={run}", "--episodes=2"],
     r"checkpoint .*/run/checkpoints/10 does not fit this config's runner state \(saved -> now\): "
     r"trainable\.lora\..*: <absent> -> \(1, 2, ", "run", False),
    ("eval: an unknown opponent", "eval", [f"--config={TTT}", "--opponent=nobody"],
     r"--opponent='nobody': expected random, minimax, base, self or a run directory", "base", False),
    ("sweep: an unknown key", "sweep", [f"--config={SPREAD_MLP}", "--sweep.bogus=1"],
     r"sweep\.bogus: unknown key 'bogus' in sweep; valid keys: .*lr", "base", False),
    ("sweep: no seeds", "sweep", [f"--config={SPREAD_MLP}", "--sweep.seeds=0", "--sweep.out_dir={missing}"],
     r"--sweep\.seeds=0: at least 1 seed", "base", False),
    ("sweep: into an earlier sweep's folder", "sweep",
     [f"--config={SPREAD_MLP}", "--config.total_timesteps=8192", "--sweep.lr=1e-2", "--sweep.out_dir={sweep}"],
     r"--sweep\.out_dir: '.*/sweep' holds an earlier sweep's sweep\.csv; .* --sweep\.overwrite=True", "sweep", False),
]


@pytest.mark.parametrize("case,script,args,pattern,untouched,held", CASES, ids=[c[0] for c in CASES])
def test_a_mistake_is_one_line_status_2_and_changes_nothing(folders, case, script, args, pattern, untouched, held):
    args = [a.format(**folders) for a in args]
    holder = None
    if held:
        holder = subprocess.Popen([sys.executable, "-c", HOLD, folders[untouched]], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
        assert holder.stdout.readline().strip() == "held"
    try:
        before = snapshot(folders[untouched])
        out = _run(script, *args)
        after = snapshot(folders[untouched])
    finally:
        if holder is not None:
            holder.communicate("", timeout=30)  # end of stdin: the holder releases its lock and exits
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, (out.returncode, out.stderr[-3000:])
    assert lines[0].startswith("error: ") and re.search(pattern, lines[0]), lines[0]
    assert after == before, f"{case}: files changed in {folders[untouched]}"
    assert not os.path.exists(folders["missing"]), "a refused command created a folder"


# ---- the console commands (pyproject [project.scripts]) run the same code as experiments/*.py


def _command(name: str) -> str:
    path = os.path.join(os.path.dirname(sys.executable), name)
    assert os.path.exists(path), f"{name} is not installed beside {sys.executable}: pip install -e ."
    return path


@pytest.mark.parametrize("name,args,pattern", [
    ("jaxmarl-train", [f"--config={SPREAD_MLP}", "--config.resume=yes"], r"config\.resume: .*'yes'"),
    ("jaxmarl-eval", [f"--config={TTT}", "--episodes=0"], r"--episodes=0: play at least 1 episode"),
    ("jaxmarl-sweep", [f"--config={SPREAD_MLP}", "--sweep.seeds=0"], r"--sweep\.seeds=0: at least 1 seed"),
    ("jaxmarl-compare", [], r"name the run folders to compare"),
    ("jaxmarl-play", [f"--config={TTT}", "--seat=3"], r"--seat=3: one of 0 \(x\), 1 \(o\)"),
])
def test_console_commands_refuse_a_mistake_in_one_line(tmp_path, name, args, pattern):
    out = subprocess.run([_command(name), *args], capture_output=True, text=True, timeout=180, cwd=str(tmp_path))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and re.search(pattern, lines[0]), (out.returncode, out.stderr)
    assert os.listdir(tmp_path) == []


def test_jaxmarl_train_runs_a_config(tmp_path):
    out = subprocess.run([_command("jaxmarl-train"), f"--config={SPREAD_MLP}", f"--config.run.out_dir={tmp_path}/run",
                          "--config.total_timesteps=8192", "--config.run.progress=False"],
                         capture_output=True, text=True, timeout=180, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"outputs in {tmp_path}/run" in out.stdout and os.path.exists(tmp_path / "run" / "metrics.csv")
