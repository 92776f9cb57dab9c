"""A researcher's own Hugging Face folder through experiments/train.py with the free-text configs unchanged
(docs/byo_checkpoint.md): one folder as a downloaded Qwen checkpoint is (config.json, model.safetensors and the
tokenizer's files), here a tiny random Qwen3 written by `transformers` over the games' BPE tokenizer (1024 ids).

    experiments/train.py --config=configs/free_tic_tac_toe.py:format --config.model.checkpoint=F --config.tokenizer=F
    experiments/train.py --config=configs/free_tic_tac_toe.py --config.model.checkpoint=F --config.tokenizer=F
    experiments/train.py --config=configs/free_tic_tac_toe.py --config.model.checkpoint=<format run>/model \\
        --config.tokenizer=F

Each run is 3 updates of 4 games in a subprocess; the folder's architecture (1 layer, hidden 48, max positions
512) differs from every model.* size the config sets (2 layers, hidden 64, model.max_position_embeddings=64), so
the shapes the runs write show whose model trained: with a checkpoint its config.json gives the architecture."""

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from jaxmarl_llm.models.testing import build_hf_model  # noqa: E402
from jaxmarl_llm.run.metrics_log import read_csv  # noqa: E402
from jaxmarl_llm.run.run_identity import FINGERPRINT_KEY, model_fingerprint  # noqa: E402
from jaxmarl_llm.tokenizers import GAMES_BPE, HFTokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "experiments", "train.py")
CONFIG = os.path.join(ROOT, "configs", "free_tic_tac_toe.py")
UPDATES, NUM_ENVS = 3, 4
# the folder's architecture: none of these is a size configs/free_tic_tac_toe.py (or the model defaults) sets
HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS, HEAD_DIM, POSITIONS = 48, 96, 1, 4, 2, 16, 512


def _folder(path: str, vocab_size: int, tokenizer: bool = True) -> str:
    """A tiny random Qwen3 saved by transformers, with the games' BPE tokenizer files beside it (`tokenizer`)."""
    build_hf_model("qwen3", path, vocab_size=vocab_size, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                   num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                   head_dim=HEAD_DIM, max_position_embeddings=POSITIONS, bos_token_id=None, eos_token_id=0,
                   pad_token_id=0)
    for name in os.listdir(GAMES_BPE) if tokenizer else ():
        shutil.copy(os.path.join(GAMES_BPE, name), path)
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    vocab = HFTokenizer(GAMES_BPE).vocab_size
    assert vocab == 1024
    path = _folder(str(tmp_path_factory.mktemp("qwen3_tiny")), vocab)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(os.listdir(path))
    return path


def _train(variant: str, out_dir: str, model: str, tokenizer: str, *extra: str) -> subprocess.CompletedProcess:
    """experiments/train.py on configs/free_tic_tac_toe.py[:variant], cut to UPDATES updates of NUM_ENVS games
    (one chunk), on one device; the test session's XLA flags and compilation cache carry over (tests/conftest.py)."""
    args = [f"--config={CONFIG}{':' + variant if variant else ''}", f"--config.model.checkpoint={model}",
            f"--config.tokenizer={tokenizer}", "--config.mesh.num_devices=1", f"--config.num_envs={NUM_ENVS}",
            f"--config.total_episodes={NUM_ENVS * UPDATES}", f"--config.run.updates_per_chunk={UPDATES}",
            f"--config.run.out_dir={out_dir}", "--config.run.progress=False", "--config.run.tensorboard=False",
            "--config.run.plot=False", *extra]
    return subprocess.run([sys.executable, TRAIN, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def _ok(done: subprocess.CompletedProcess, out_dir: str, model: str) -> list[dict[str, str]]:
    """Exit status 0, one metrics row per update in order, and the run's config.json records `model` and its
    fingerprint (run/run_identity.py: sizes, hashes of config.json and of the safetensors' headers and samples);
    returns the rows."""
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_csv(os.path.join(out_dir, "metrics.csv"))
    assert [int(float(r["update"])) for r in rows] == list(range(1, UPDATES + 1)), rows
    with open(os.path.join(out_dir, "config.json")) as f:
        record = json.load(f)
    assert record["model"]["checkpoint"] == model and record[FINGERPRINT_KEY] == model_fingerprint(model)
    return rows


def _tensors(folder: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(os.path.join(folder, "model.safetensors"))


def _adapter_shapes(run_dir: str) -> dict[str, tuple[int, ...]]:
    """The LoRA adapters' shapes in the run's last checkpoint ([slots, layers, in, rank] / [.., rank, out])."""
    import orbax.checkpoint as ocp

    steps = sorted(int(s) for s in os.listdir(os.path.join(run_dir, "checkpoints")) if s.isdigit())
    meta = ocp.PyTreeCheckpointer().metadata(os.path.join(run_dir, "checkpoints", str(steps[-1]), "default"))
    tree = getattr(getattr(meta, "item_metadata", meta), "tree", meta)
    return {f"{t}/{ab}": tuple(x.shape) for t, leaves in tree["trainable"]["lora"].items() for ab, x in leaves.items()}


@pytest.fixture(scope="module")
def format_run(checkpoint, tmp_path_factory) -> str:
    """Stage 1 (`:format`, SFT of every weight) from the folder: its run directory."""
    out_dir = str(tmp_path_factory.mktemp("format") / "run")
    done = _train("format", out_dir, checkpoint, checkpoint)
    _ok(done, out_dir, checkpoint)
    assert f"model written to {out_dir}/model" in done.stdout, done.stdout[-2000:]
    return out_dir


def test_format_stage_trains_the_folders_model_and_exports_it(checkpoint, format_run):
    rows = read_csv(os.path.join(format_run, "metrics.csv"))
    # the loss of a near-uniform guess over the folder's 1024 ids, not over a smaller vocabulary
    assert abs(float(rows[0]["nll"]) - math.log(1024)) < 1.0, rows[0]["nll"]
    exported = os.path.join(format_run, "model")
    with open(os.path.join(exported, "config.json")) as f:
        cfg = json.load(f)
    # the folder's architecture; its 512 positions win over the config's model.max_position_embeddings=64 (the
    # model.* sizes only shape a random model: with a checkpoint they are not read)
    assert (cfg["model_type"], cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]) == (
        "qwen3", 1024, HIDDEN, INTERMEDIATE)
    assert (cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (
        LAYERS, HEADS, KV_HEADS, HEAD_DIM)
    assert cfg["max_position_embeddings"] == POSITIONS and cfg["tie_word_embeddings"] is False
    # the folder's weights, stepped 3 times at a warm-up learning rate (<= 2.3e-4 a step): every tensor is there,
    # within 0.01 of the folder's (a fresh random model is ~0.1 away), and training moved some of them
    before, after = _tensors(checkpoint), _tensors(exported)
    assert sorted(after) == sorted(before)
    diffs = {name: float(np.max(np.abs(after[name].astype(np.float32) - before[name]))) for name in before}
    assert max(diffs.values()) < 0.01, diffs
    assert max(diffs.values()) > 0, "the format stage changed no weight"
    # the run's tokenizer travels with the export, byte for byte
    for name in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(checkpoint, name), "rb") as a, open(os.path.join(exported, name), "rb") as b:
            assert a.read() == b.read(), name
    # transformers loads the export as it loaded the folder
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(exported)
    assert reloaded.config.vocab_size == 1024 and reloaded.config.hidden_size == HIDDEN


@pytest.mark.parametrize("start", ["folder", "format_export"])
def test_rl_stage_from_the_folder_or_the_format_stage_export(checkpoint, format_run, start, tmp_path):
    """Stage 2 (RL, LoRA adapters over the frozen base, in-graph evaluation on) from the researcher's folder
    itself, and from stage 1's export, which carries the folder's tokenizer beside its weights."""
    model = checkpoint if start == "folder" else os.path.join(format_run, "model")
    out_dir = str(tmp_path / "rl")
    done = _train("", out_dir, model, checkpoint, "--config.in_graph_eval.every=2", "--config.in_graph_eval.episodes=8")
    rows = _ok(done, out_dir, model)
    assert "memory plan:" in done.stdout
    assert any(r["eval/random_loss"] not in ("", "nan") for r in rows), "no in-graph evaluation row"
    assert all(0.0 <= float(r["format_error_rate"]) <= 1.0 for r in rows)
    # the adapters are shaped by the loaded model: 1 layer, hidden 48, MLP 96, q 4 x 16, kv 2 x 16 (rank 16)
    r = 16
    want = {"q": (HIDDEN, HEADS * HEAD_DIM), "k": (HIDDEN, KV_HEADS * HEAD_DIM), "v": (HIDDEN, KV_HEADS * HEAD_DIM),
            "o": (HEADS * HEAD_DIM, HIDDEN), "gate": (HIDDEN, INTERMEDIATE), "up": (HIDDEN, INTERMEDIATE),
            "down": (INTERMEDIATE, HIDDEN)}
    shapes = _adapter_shapes(out_dir)
    for target, (d_in, d_out) in want.items():
        assert shapes[f"{target}/a"][1:] == (LAYERS, d_in, r), shapes
        assert shapes[f"{target}/b"][1:] == (LAYERS, r, d_out), shapes


def test_a_tokenizer_larger_than_the_checkpoints_vocabulary_is_one_line(tmp_path):
    """A folder whose vocabulary (512) is smaller than the tokenizer's 1024 ids (the config's own games BPE, when
    --config.tokenizer is left out): refused at start-up in one line naming both sizes, exit status 2."""
    folder = _folder(str(tmp_path / "small_vocab"), 512, tokenizer=False)
    done = _train("", str(tmp_path / "run"), folder, GAMES_BPE)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (done.returncode,
                                                                                          done.stderr[-2000:])
    assert "1024" in lines[0] and "512" in lines[0] and "tokenizer" in lines[0], lines[0]
    assert not os.path.exists(tmp_path / "run" / "metrics.csv")


def test_the_pages_memory_table_is_the_planners():
    """docs/byo_checkpoint.md's table of memory per device is tools/memory_plan.py's output: its qwen3-0.6b rows,
    recomputed (the 1.7B and 8B rows take the same path at other sizes)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("memory_plan", os.path.join(ROOT, "tools", "memory_plan.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with open(os.path.join(ROOT, "docs", "byo_checkpoint.md")) as f:
        page = f.read()
    for line in tool.peak_table(models=("qwen3-0.6b",)).splitlines():
        assert line in page, line


def test_a_checkpoint_read_with_another_tokenizer_is_refused_in_one_line(checkpoint, tmp_path):
    """The folder holds its own tokenizer; a run that names another (here the built-in char tokenizer, whose ids
    mean other text) stops at start-up with one line naming the fix, exit status 2, nothing written."""
    done = _train("", str(tmp_path / "run"), checkpoint, "char")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, done.stderr[-2000:])
    assert "holds its own tokenizer" in lines[0] and f"--config.tokenizer={checkpoint}" in lines[0], lines[0]
    assert not os.path.exists(tmp_path / "run" / "metrics.csv")


def test_a_folder_without_its_files_is_one_line(checkpoint, tmp_path):
    """A model folder without config.json, or a tokenizer folder without a tokenizer file: one line, exit 2."""
    empty = tmp_path / "empty"
    empty.mkdir()
    no_weights = tmp_path / "no_weights"
    shutil.copytree(checkpoint, no_weights)
    os.remove(no_weights / "model.safetensors")
    weights_only = tmp_path / "weights_only"
    weights_only.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(checkpoint, name), weights_only / name)
    for model, tokenizer, says in ((str(empty), GAMES_BPE, "no config.json"),
                                   (str(no_weights), str(no_weights), "no model.safetensors"),
                                   (str(weights_only), str(empty), "has none of")):
        done = _train("", str(tmp_path / "run"), model, tokenizer)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and says in lines[0], (model, tokenizer, done.stderr[-2000:])
