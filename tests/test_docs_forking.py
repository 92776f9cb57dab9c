"""docs/forking.md stays true: its diff applies to the current package and the estimator it adds trains.

The page's ```diff block is applied with `patch -p1` to a copy of `jaxmarl_llm` under tmp_path, and a fresh Python
process that imports that copy validates `algo="grpo_median"` and runs one update of a tiny model with it. The line
count the page states for train/lm_rl.py is checked against the file.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "forking.md"
TESTS = REPO / "tests"


def _page() -> str:
    return PAGE.read_text()


def _diff_blocks(text: str) -> list[str]:
    return re.findall(r"^```diff\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def test_page_states_the_true_line_count_of_lm_rl():
    m = re.search(r"`jaxmarl_llm/train/lm_rl\.py` \((\d+) lines", _page())
    assert m, "docs/forking.md must state lm_rl.py's length as '`jaxmarl_llm/train/lm_rl.py` (N lines ...'"
    real = (REPO / "jaxmarl_llm" / "train" / "lm_rl.py").read_bytes().count(b"\n")  # what `wc -l` prints
    assert int(m.group(1)) == real, f"docs/forking.md says lm_rl.py has {m.group(1)} lines; `wc -l` says {real}"


def _patch(cwd: Path, patch_file: Path, *extra: str) -> subprocess.CompletedProcess:
    """`git apply` (exact context, no fuzz) in `cwd`, a plain folder: git is what a clone of this repository has."""
    return subprocess.run(["git", "apply", "-p1", *extra, str(patch_file)], cwd=cwd, capture_output=True, text=True)


# runs in a fresh interpreter whose sys.path puts the patched copy first
_SCRIPT = r"""
import json, sys
root, tests = sys.argv[1], sys.argv[2]
sys.path[:0] = [root, tests]
import jaxmarl_llm
assert jaxmarl_llm.__file__.startswith(root), f"imported {jaxmarl_llm.__file__}, not the patched copy under {root}"

import jax, jax.numpy as jnp, numpy as np
from test_lm_rl import CharClassGame
from jaxmarl_llm.algos.lm_objective import ALGORITHMS, EstimatorInput, algo_names
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import validate_lm_rl
from jaxmarl_llm.train.lm.setup import build_tokenizer
from tiny_configs import tiny_lm_rl

out = {"file": jaxmarl_llm.__file__, "names": list(algo_names())}

# the estimator the page describes: the episode return minus its group's median
reward = jnp.asarray(np.random.default_rng(0).normal(size=(3, 8, 2)), jnp.float32)  # [T, N, A]
adv, ret, _ = ALGORITHMS["grpo_median"].advantages(
    EstimatorInput(reward, None, None, None, lambda x: x, group_size=4), None, None)
returns = np.asarray(reward).sum(0).reshape(2, 4, 2)  # [N/G, G, A]
want = (returns - np.median(returns, axis=1, keepdims=True)).reshape(8, 2)
out["estimator_err"] = float(np.abs(np.asarray(adv) - want[None]).max())

# one update of a one-layer model with it (tests/test_lm_objective.py's _tiny_config)
c = tiny_lm_rl()
c.num_envs, c.group_size, c.num_turns, c.total_episodes, c.lr = 8, 4, 1, 16, 1e-2
c.algo = "grpo_median"
validate_lm_rl(c)
trainer = lm_rl.make_train(c, env=CharClassGame(build_tokenizer(c.tokenizer)))
state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
new, metrics = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
out["policy_loss"] = float(metrics["policy_loss"])
out["moved"] = max(jax.tree.leaves(jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()),
                                                new.trainable["lora"], state.trainable["lora"])))
print("RESULT " + json.dumps(out))
"""


def test_forking_diff_applies_and_trains(tmp_path):
    blocks = _diff_blocks(_page())
    assert blocks, "docs/forking.md has no ```diff block"
    shutil.copytree(REPO / "jaxmarl_llm", tmp_path / "jaxmarl_llm", ignore=shutil.ignore_patterns("__pycache__"))
    for i, block in enumerate(blocks):
        patch_file = tmp_path / f"forking_{i}.diff"
        patch_file.write_text(block)
        dry = _patch(tmp_path, patch_file, "--check")
        if dry.returncode:
            pytest.fail(f"docs/forking.md's diff block {i} does not apply to the current jaxmarl_llm "
                        f"(git apply --check):\n{dry.stdout}{dry.stderr}\n--- the block:\n{block}")
        applied = _patch(tmp_path, patch_file)
        assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "grpo_median" in (tmp_path / "jaxmarl_llm" / "algos" / "lm_objective.py").read_text()

    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path), str(TESTS)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=dict(os.environ))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"the patched package failed:\n{proc.stdout}\n{proc.stderr[-6000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    assert Path(out["file"]).resolve().is_relative_to(tmp_path.resolve())
    assert "grpo_median" in out["names"]  # a valid --config.algo
    assert out["estimator_err"] < 1e-5
    assert math.isfinite(out["policy_loss"])
    assert out["policy_loss"] != 0.0
    assert out["moved"] > 0  # the new advantages reached the adapters
