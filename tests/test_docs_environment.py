"""docs/environments.md's worked example ("echo the secret digit"), built from the page itself.

The section's python blocks whose first line is `# file: PATH` are written into a temporary folder as those files
(the game module and its config, as a user would create them in the repository root). One test checks the game's
rules under jit(vmap) and runs the page's quick-check block; the other runs the page's training command
(experiments/train.py --config=configs/echo_digit.py, nothing overridden) in a fresh process and asserts that the
return rises. Measured (2 shared CPU cores): update 1 scores 0.16, the first 5 updates average 0.26 and the last 5
0.79 (seeds 1-3: 0.19 -> 0.76, 0.25 -> 0.85, 0.12 -> 0.74); chance is 0.1. The file takes ~20 s (~17 s the run).
"""

import contextlib
import csv
import io
import os
import re
import shlex
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import DEVICES_FLAG, FAST_COMPILE_FLAG
from jaxmarl_llm.envs import registry
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.run.cli import load_config_file
from jaxmarl_llm.train.config import validate_lm_rl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "environments.md")
SECTION = "## Worked example: a new token game"
GAME, CONFIG = "my_games/echo_digit.py", "configs/echo_digit.py"
ENV_NAME = "text/echo_digit"
FILE_MARKER = "# file: "


def _section() -> str:
    text = open(DOC, encoding="utf-8").read()
    assert SECTION in text, f"{DOC} lost its section {SECTION!r}"
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:] if end == -1 else text[start:end]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", _section(), re.S | re.M)


def _write_files(folder) -> dict[str, str]:
    """The section's `# file:` blocks, written under `folder`: {relative path: code}."""
    files = {}
    for block in _blocks("python"):
        first = block.splitlines()[0]
        if first.startswith(FILE_MARKER):
            files[first[len(FILE_MARKER):].strip()] = block
    assert sorted(files) == sorted([GAME, CONFIG]), f"the section's `{FILE_MARKER}` blocks: {sorted(files)}"
    for rel, code in files.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(code)
    return files


def _train_command() -> list[str]:
    """The page's training command, as argv run from the repository root."""
    lines = [line.strip() for block in _blocks("bash") for line in block.splitlines()]
    commands = [line for line in lines if line.startswith("python experiments/train.py")]
    assert len(commands) == 1, f"expected one `python experiments/train.py` command in the section, got {commands}"
    argv = shlex.split(commands[0])
    assert f"--config={CONFIG}" in argv, argv
    return [sys.executable, os.path.join(ROOT, "experiments", "train.py"), *argv[2:]]


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The page's files in tmp_path, importable; registrations made during the test end with it."""
    _write_files(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    yield tmp_path
    for name in [m for m in sys.modules if m == "my_games" or m.startswith("my_games.")]:
        del sys.modules[name]


def test_the_game_on_the_page_follows_its_rules(example):
    """The config registers the game; over 256 resets every digit is a secret, the prompt is `Echo D`, and a reply
    is paid 1 exactly when it starts with D; other digits pay 0, a letter or an empty reply is a format error."""
    config = load_config_file(str(example / CONFIG))
    assert config.env_name == ENV_NAME and ENV_NAME in registry.registered()
    config.mesh.num_devices = 1  # conftest forces 8 host devices
    validate_lm_rl(config)
    env = registry.make(config.env_name, **config.env_kwargs)
    assert env.num_agents == 1 and len(env.action_candidates) == 10

    keys = jax.random.split(jax.random.PRNGKey(0), 256)
    _, states = jax.jit(jax.vmap(env.reset))(keys)
    secret = np.asarray(states.secret)
    assert set(secret.tolist()) == set(range(10))
    for i in range(10):
        state_i = jax.tree.map(lambda x: x[i], states)
        assert env.render(state_i) == [f"Echo {secret[i]}"]

    letter = jnp.asarray(env.codec.encode("x" * env.max_action_tokens), jnp.int32)
    replies = {
        "right": jax.vmap(lambda s: env.make_action(env.digits, s.secret[None]))(states),
        "wrong": jax.vmap(lambda s: env.make_action(env.digits, ((s.secret + 1) % 10)[None]))(states),
        "letter": TextAction(tokens=jnp.broadcast_to(letter, (256, 1, env.max_action_tokens)),
                             length=jnp.ones((256, 1), jnp.int32)),
        "empty": TextAction(tokens=jnp.zeros((256, 1, env.max_action_tokens), jnp.int32),
                            length=jnp.zeros((256, 1), jnp.int32)),
        "random": jax.vmap(env.random_action)(jax.random.split(jax.random.PRNGKey(1), 256), states),
    }
    step = jax.jit(jax.vmap(env.step))
    for kind, action in replies.items():
        _, after, reward, terminated, truncated, info = step(keys, states, action)
        reward, echoed, bad = (np.asarray(x)[:, 0] for x in (reward, info["echoed"], info["format_error"]))
        assert np.asarray(terminated).all() and not np.asarray(truncated).any(), kind  # one turn
        want = {"right": 1.0, "wrong": 0.0, "letter": 0.0, "empty": 0.0}.get(kind)
        if want is not None:
            np.testing.assert_array_equal(reward, want, err_msg=kind)
        np.testing.assert_array_equal(echoed, reward == 1.0, err_msg=kind)
        np.testing.assert_array_equal(bad, kind in ("letter", "empty"), err_msg=kind)
        if kind == "right":
            assert env.render(jax.tree.map(lambda x: x[0], after)) == [f"Echo {secret[0]}{secret[0]}"]
        if kind == "random":
            assert 0.0 < reward.mean() < 0.3, reward.mean()  # uniform digits: about 0.1

    # the page's quick-check block runs as written and prints what its comments say
    checks = [b for b in _blocks("python") if not b.startswith(FILE_MARKER)]
    assert len(checks) == 1, f"expected one python block besides the files, got {len(checks)}"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(checks[0], "docs/environments.md (quick check)", "exec"), {})
    printed = out.getvalue().splitlines()
    said = [line.split("  # ", 1)[1] for line in checks[0].splitlines() if line.startswith("print(") and "  # " in line]
    assert len(printed) == len(said) == 2, (printed, said)
    for line, comment in zip(printed, said):
        assert line == comment, f"the page says {comment!r}, the code printed {line!r}"


def test_the_command_on_the_page_learns(tmp_path):
    """`python experiments/train.py --config=configs/echo_digit.py` from a folder holding the page's files, in a
    fresh process as a user runs it (one CPU device, XLA's default optimization): it trains its 40 updates, says
    where its outputs are, and the share of episodes that echo rises well above chance (measured 0.26 -> 0.79)."""
    _write_files(tmp_path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *filter(None, [env.get("PYTHONPATH")])])
    test_only = (DEVICES_FLAG, FAST_COMPILE_FLAG)  # conftest's: a user's run has one device, default optimization
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if f not in test_only)
    proc = subprocess.run(_train_command(), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "outputs in runs/echo_digit" in proc.stdout, proc.stdout
    with open(tmp_path / "runs" / "echo_digit" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    curve = np.asarray([float(row["episode_return"]) for row in rows])
    assert len(curve) == 40, len(curve)
    np.testing.assert_allclose(curve, [float(row["echoed_rate"]) for row in rows])
    first, last = curve[:5].mean(), curve[-5:].mean()
    assert curve[0] < 0.35, curve  # chance is 0.1 (measured 0.16)
    assert last > 0.55 and last - first > 0.3, f"episode_return {first:.2f} -> {last:.2f}: {curve.round(2)}"
