"""Every command-line mistake found by probing train.py, eval.py and sweep.py, in one table: the command, the exit
status, the one line on stderr, and the folder whose files must be left exactly as they were. A case that regrows
(a traceback, a usage dump, a file written before the refusal) fails here.

The folders are made once per module: a 10-update configs/spread_mlp.py run (a checkpoint of another game for
eval.py's tic-tac-toe), a two-setting sweep, a config file that does not parse and model folders missing a file.
Ctrl-C, which needs a run in flight, has its own test at the end. A case marked `held` runs while another process holds the run
folder's lock (run/run_lock.py), as a second run started on a folder in use would."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = {name: os.path.join(ROOT, "experiments", f"{name}.py") for name in ("train", "eval", "sweep", "collect")}
SPREAD_MLP = os.path.join(ROOT, "configs", "spread_mlp.py")
TTT = os.path.join(ROOT, "configs", "tic_tac_toe.py") + ":scratch"
FREE_TTT = os.path.join(ROOT, "configs", "free_tic_tac_toe.py")
KUHN = os.path.join(ROOT, "configs", "kuhn_poker.py")
SMALL = ["--config.total_timesteps=40960", "--config.run.progress=False", "--config.run.tensorboard=False"]
HOLD = ("import sys; from jaxmarl_llm.run.run_lock import RunLock; lock = RunLock(sys.argv[1]); lock.acquire(); "
        "print('held', flush=True); sys.stdin.read(); lock.release()")


def _run(script: str, *args: str, timeout: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, SCRIPT[script], *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("cli")
    out = {"run": str(base / "run"), "sweep": str(base / "sweep"), "missing": str(base / "missing"), "base": str(base),
           "bad_config": str(base / "bad_config.py")}
    with open(out["bad_config"], "w") as f:
        f.write(BAD_CONFIG)
    out.update(_model_folders(base))
    done = _run("train", f"--config={SPREAD_MLP}", f"--config.run.out_dir={out['run']}", *SMALL)
    assert done.returncode == 0, done.stderr[-2000:]
    done = _run("sweep", f"--config={SPREAD_MLP}", "--config.total_timesteps=8192", "--sweep.lr=1e-3,3e-4",
                f"--sweep.out_dir={out['sweep']}")
    assert done.returncode == 0, done.stderr[-2000:]
    out["run_one"] = str(base / "run_one")  # the run with its latest checkpoint only
    shutil.copytree(out["run"], out["run_one"])
    steps = sorted(int(n) for n in os.listdir(os.path.join(out["run_one"], "checkpoints")) if n.isdigit())
    for step in steps[:-1]:
        shutil.rmtree(os.path.join(out["run_one"], "checkpoints", str(step)))
    return out


def _model_folders(base) -> dict[str, str]:
    """Model folders missing a file: none at all, config.json without weights, a shard index naming a shard that
    is not there (config.json from a tiny Qwen3 written by transformers)."""
    from jaxmarl_llm.models.testing import build_hf_model  # transformers: a test dependency

    full = str(base / "model")
    build_hf_model("qwen3", full, vocab_size=1024, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                   num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=512,
                   bos_token_id=None, eos_token_id=0, pad_token_id=0)
    folders = {name: str(base / name) for name in ("model_empty", "model_no_weights", "model_no_shard")}
    for folder in folders.values():
        os.mkdir(folder)
    for name in ("model_no_weights", "model_no_shard"):
        shutil.copy(os.path.join(full, "config.json"), folders[name])
    with open(os.path.join(folders["model_no_shard"], "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}, f)
    return folders


def snapshot(folder: str) -> dict[str, str]:
    """{relative path: sha256} of every file under `folder` ({} when it does not exist)."""
    out = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


def case(name: str, script: str, args: list[str], pattern: str, untouched: str, held: bool = False,
         env: dict[str, str] | None = None):
    """One row: the command (`args` with {run}, {sweep}, {missing}, {port} filled in, `env` added to the
    environment), the line's pattern, the folder left untouched, and whether another process holds that folder's
    lock while it runs."""
    return pytest.param(script, args, pattern, untouched, held, env or {}, id=name)


BAD_CONFIG = "def get_config(:\n    return None\n"  # a config file with a typo on line 1
GROUP = {"JAXMARL_COORDINATOR": "127.0.0.1:{port}", "JAXMARL_NUM_PROCESSES": "2", "JAXMARL_JOIN_TIMEOUT_S": "3"}

CASES = [
    case("a second run on a folder in use", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}", "--config.resume=True", *SMALL],
     r"config\.run\.out_dir: '.*/run' is in use by another run, pid \d+ on host .*; wait for it to end", "run", held=True),
    case("a second run with overwrite on a folder in use", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}", "--config.run.overwrite=True", *SMALL],
     r"is in use by another run, pid \d+", "run", held=True),
    case("a forced resume whose runner state does not fit", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}", "--config.resume=True", "--config.resume_force=True",
      "--config.env_kwargs.num_agents=4", *SMALL],
     r"checkpoint .*/run/checkpoints/10 does not fit this config's runner state \(saved -> now\): "
     r"params\.actor\.net\.layers\.0\.kernel\.value: \(18, 64\) -> \(24, 64\)", "run"),
    case("a resume of a folder that holds no run (a misspelled name)", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={missing}", "--config.resume=True", *SMALL],
     r"config\.resume: no run in '.*/missing' \(no config\.json, no checkpoint\) to continue; check the folder's name",
     "base"),
    case("a run folder that is a file", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}/config.json", *SMALL],
     r"config\.run\.out_dir: '.*/run/config\.json' is a file, not a folder; choose another", "run"),
    case("eval: no episodes", "eval", [f"--config={TTT}", "--episodes=0"], r"--episodes=0: play at least 1 episode",
     "base"),
    case("eval: a negative episode count", "eval", [f"--config={TTT}", "--episodes=-5"], r"--episodes=-5: play at least",
     "base"),
    case("eval: a missing checkpoint folder", "eval", [f"--config={TTT}", "--checkpoint={missing}"],
     r"--checkpoint='.*/missing': no such run directory", "base"),
    case("eval: a folder without checkpoints", "eval", [f"--config={TTT}", "--checkpoint={sweep}"],
     r"--checkpoint='.*/sweep': holds no checkpoint", "base"),
    case("eval: a checkpoint of another game", "eval", [f"--config={TTT}", "--checkpoint={run}", "--episodes=2"],
     r"checkpoint .*/run/checkpoints/10 does not fit this config's runner state \(saved -> now\): "
     r"trainable\.lora\..*: <absent> -> \(1, 2, ", "run"),
    case("eval: an unknown opponent", "eval", [f"--config={TTT}", "--opponent=nobody"],
     r"--opponent='nobody': expected random, minimax, tactician, equilibrium, best_response, base, self or a run directory", "base"),
    case("eval: a built-in player the game does not have", "eval", [f"--config={TTT}", "--opponent=equilibrium"],
     r"--opponent='equilibrium': TicTacToe's built-in players are random, minimax, tactician; or base, self or a "
     r"run directory", "base"),
    case("eval: cross-play of a run without an opponent pool", "eval",
     [f"--config={KUHN}", "--checkpoint={run_one}", "--cross_play"],
     r"--cross_play: .*/kuhn_poker\.py trains without an opponent pool \(config\.opponent_pool\.size=0\) and the "
     r"run keeps one checkpoint: no snapshots to play", "run_one"),
    case("eval: cross-play without a run", "eval", [f"--config={TTT}", "--cross_play"],
     r"--cross_play: name a self-play run with --checkpoint=RUN_DIR", "base"),
    case("eval: exact rates of a game that is not position-only tic-tac-toe", "eval", [f"--config={KUHN}", "--exact"],
     r"--exact: tic-tac-toe with history=False \(a position is then the whole observation\); got KuhnPoker", "base"),
    case("eval: a negative slot", "eval", [f"--config={TTT}", "--slot=-2"],
     r"--slot=-2: an adapter slot \(0, 1, \.\.\.\) or -1 \(each seat its own\)", "base"),
    case("collect: no episodes", "collect", [f"--config={TTT}", "--episodes=0", "--out={base}/x.jsonl"],
     r"--episodes=0: collect at least 1 episode", "base"),
    case("collect: no output file", "collect", [f"--config={TTT}"], r"--out=FILE\.jsonl is required", "base"),
    case("collect: an output file in a missing folder", "collect", [f"--config={TTT}", "--out={missing}/x.jsonl"],
     r"--out=.*/missing/x\.jsonl: no folder .*/missing", "base"),
    case("collect: an unknown player", "collect", [f"--config={TTT}", "--player=nobody", "--out={base}/x.jsonl"],
     r"--player='nobody': expected lm, expert or one of text/tic_tac_toe's built-in players "
     r"\(random, minimax, tactician; ",
     "base"),
    case("collect: a checkpoint that is not the player", "collect",
     [f"--config={TTT}", "--checkpoint={run}", "--player=random", "--out={base}/x.jsonl"],
     r"--checkpoint with --player=random: a checkpoint plays as --player=lm", "base"),
    case("sweep: an unknown key", "sweep", [f"--config={SPREAD_MLP}", "--sweep.bogus=1"],
     r"sweep\.bogus: unknown key 'bogus' in sweep; valid keys: .*lr", "base"),
    case("sweep: no seeds", "sweep", [f"--config={SPREAD_MLP}", "--sweep.seeds=0", "--sweep.out_dir={missing}"],
     r"--sweep\.seeds=0: at least 1 seed", "base"),
    case("sweep: into an earlier sweep's folder", "sweep",
     [f"--config={SPREAD_MLP}", "--config.total_timesteps=8192", "--sweep.lr=1e-2", "--sweep.out_dir={sweep}"],
     r"--sweep\.out_dir: '.*/sweep' holds an earlier sweep's sweep\.csv; .* --sweep\.overwrite=True", "sweep"),
    case("a run folder where this user cannot write", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir=/sys/jaxmarl_llm_test/run", *SMALL],
     r"config\.run\.out_dir: cannot write in '/sys/jaxmarl_llm_test/run' \((Operation not permitted|Permission denied): /sys/",
     "base"),
    case("a run folder inside a file", "train", [f"--config={SPREAD_MLP}", "--config.run.out_dir={run}/config.json/x",
                                                *SMALL],
     r"config\.run\.out_dir: cannot write in '.*/run/config\.json/x' \(Not a directory: ", "run"),
    case("a model folder with no config.json", "train",
     [f"--config={FREE_TTT}", "--config.model.checkpoint={model_empty}", "--config.run.out_dir={missing}"],
     r"no config\.json in '.*/model_empty'; expected a Hugging Face model folder", "base"),
    case("a model folder with no weights", "train",
     [f"--config={FREE_TTT}", "--config.model.checkpoint={model_no_weights}", "--config.run.out_dir={missing}"],
     r"no model\.safetensors or model\.safetensors\.index\.json in '.*/model_no_weights'", "base"),
    case("a shard index naming a missing shard", "train",
     [f"--config={FREE_TTT}", "--config.model.checkpoint={model_no_shard}", "--config.run.out_dir={missing}"],
     r"shard '.*/model-00001-of-00002\.safetensors' listed in '.*/model\.safetensors\.index\.json' does not exist",
     "base"),
    case("a size that cannot fit the device", "train",
     [f"--config={SPREAD_MLP}", "--config.num_envs=1000000", "--config.total_timesteps=640000000",
      "--config.run.out_dir={missing}"],
     r"memory: a chunk of \d+ updates? needs [\d.]+ GiB per device \(XLA's analysis of the compiled program\), "
     r"the device has [\d.]+ GiB \(mesh\.device_memory_gib to set it\); num_envs=\d+ or fewer would fit", "base"),
    case("a config file with a syntax error", "train", ["--config={bad_config}", "--config.run.out_dir={missing}"],
     r"--config: .*/bad_config\.py:1: invalid syntax", "base"),
    case("a value of the wrong type", "train",
     [f"--config={SPREAD_MLP}", "--config.num_envs=abc", "--config.run.out_dir={missing}"],
     r"--config\.num_envs=abc: expected an integer, not 'abc'", "base"),
    case("eval: a count that is not a number", "eval", [f"--config={TTT}", "--episodes=ten"],
     r"--episodes=ten: expected an integer, not 'ten'", "base"),
    case("an unknown flag", "train", [f"--config={SPREAD_MLP}", "--out_dir={missing}"],
     r"--out_dir: unknown flag", "base"),
    case("several processes asked for where jax finds no cluster", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={missing}"],
     r"JAXMARL_MULTIHOST=1: jax found no cluster to join .* set JAXMARL_COORDINATOR=host:port", "base",
     env={"JAXMARL_MULTIHOST": "1"}),
    case("process 0 of a group whose other process never comes", "train",
     [f"--config={SPREAD_MLP}", "--config.run.out_dir={missing}"],
     r"JAXMARL_COORDINATOR=127\.0\.0\.1:\d+: process 1 of 2 did not join within 3 s; start each", "base",
     env={**GROUP, "JAXMARL_PROCESS_ID": "0"}),
    case("a process whose process 0 never comes", "train", [f"--config={SPREAD_MLP}", "--config.run.out_dir={missing}"],
     r"JAXMARL_COORDINATOR=127\.0\.0\.1:\d+: process 0 did not answer process 1 within 3 s", "base",
     env={**GROUP, "JAXMARL_PROCESS_ID": "1"}),
]


@pytest.mark.parametrize("script,args,pattern,untouched,held,env", CASES)
def test_a_mistake_is_one_line_status_2_and_changes_nothing(folders, script, args, pattern, untouched, held, env):
    args = [a.format(**folders) for a in args]
    env = {name: value.format(port=_free_port()) for name, value in env.items()}
    holder = None
    if held:
        holder = subprocess.Popen([sys.executable, "-c", HOLD, folders[untouched]], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
        assert holder.stdout.readline().strip() == "held"
    try:
        before = snapshot(folders[untouched])
        out = _run(script, *args, env=env)
        after = snapshot(folders[untouched])
    finally:
        if holder is not None:
            holder.communicate("", timeout=30)  # end of stdin: the holder releases its lock and exits
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, (out.returncode, out.stderr[-3000:])
    assert lines[0].startswith("error: ") and re.search(pattern, lines[0]), lines[0]
    assert after == before, f"files changed in {folders[untouched]}"
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
    ("jaxmarl-collect", [f"--config={TTT}", "--episodes=0", "--out=x.jsonl"], r"--episodes=0: collect at least"),
    ("jaxmarl-branch", ["--run=nope", "--out=x"], r"--run='nope': no such run directory"),
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


# ---- Ctrl-C


def test_ctrl_c_says_where_the_run_stopped_and_the_resume_continues_it(tmp_path):
    """SIGINT in the middle of a run: status 130 and one line with the updates done, the last checkpoint and the
    resume flag; the checkpoint it names is complete (the resume continues from it to the end)."""
    out_dir = str(tmp_path / "run")
    args = [SCRIPT["train"], f"--config={SPREAD_MLP}", f"--config.run.out_dir={out_dir}", "--config.run.progress=False",
            "--config.run.updates_per_chunk=1", "--config.run.checkpoint_every=1", "--config.run.tensorboard=False",
            "--config.run.plot=False"]
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONFAULTHANDLER": "1"}  # SIGABRT prints every thread's stack
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 240
        while not os.path.exists(os.path.join(out_dir, "checkpoints", "3")):  # a few updates saved
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:  # a run that does not stop: where each of its threads waits
            proc.send_signal(signal.SIGABRT)
            pytest.fail("no exit 120 s after Ctrl-C; its threads:\n" + proc.communicate(timeout=60)[1][-8000:])
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, (proc.returncode, err[-3000:])
    said = re.fullmatch(r"error: interrupted after update (\d+) of 732; the last checkpoint is update (\d+) in "
                        r"(.*/checkpoints); continue with --config\.resume=True", lines[0])
    assert said, lines[0]
    done, kept = int(said[1]), int(said[2])
    assert 3 <= kept <= done and said[3] == os.path.join(out_dir, "checkpoints")
    assert max(int(n) for n in os.listdir(said[3]) if n.isdigit()) == kept

    more = _run("train", f"--config={SPREAD_MLP}", f"--config.run.out_dir={out_dir}", "--config.resume=True",
                f"--config.total_timesteps={(kept + 2) * 4096}", *SMALL[1:])
    assert more.returncode == 0, more.stderr[-3000:]
    assert f"resumed {out_dir} at update {kept}/{kept + 2}" in more.stdout
    with open(os.path.join(out_dir, "metrics.csv")) as f:  # rows past the checkpoint were dropped, then rewritten
        assert [int(r.split(",")[0]) for r in f.read().splitlines()[1:]] == list(range(1, kept + 3))
