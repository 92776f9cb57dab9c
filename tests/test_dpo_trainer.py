"""DPO trainer: pairs files, step-0 loss, learning on the shipped pairs, game-played pairs, runner + resume + export.

Tiny models (1 layer, hidden 32) on the 48 shipped arithmetic pairs, so each test
takes seconds on 2 CPU cores.
"""

import importlib.util
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.algos.dpo import dpo_loss
from jaxmarl_llm.data import files
from jaxmarl_llm.envs.text import arithmetic
from jaxmarl_llm.envs.text.datasets import DATA_DIR
from jaxmarl_llm.models.hf import load_pretrained
from jaxmarl_llm.models.transformer import forward
from jaxmarl_llm.run import entry
from jaxmarl_llm.run.runner import run_training
from jaxmarl_llm.tokenizers import CharTokenizer
from jaxmarl_llm.train import dpo
from jaxmarl_llm.train.config import ConfigError, dpo_defaults, validate_dpo
from killing import Killed, assert_resumed_identically, dying_after
from tiny_configs import TINY_MODEL

PAIRS = os.path.join(DATA_DIR, "arithmetic_pairs.jsonl")


def _config(out_dir="runs/test_dpo", **kw):
    c = dpo_defaults()
    c.env_name = "text/arithmetic"
    c.env_kwargs = {"num_ops": 1, "max_operand": 9, "capacity": 96, "max_action_tokens": 12}
    c.num_turns = 1
    c.pairs_path, c.max_length = PAIRS, 96
    c.model.update(TINY_MODEL, max_position_embeddings=128, init_std=0.1)
    c.batch_size, c.total_updates, c.lr, c.warmup_updates = 16, 40, 1e-2, 2
    c.mesh.num_devices = 1
    c.run.out_dir, c.run.updates_per_chunk, c.run.checkpoint_every = str(out_dir), 2, 1
    c.run.progress, c.run.tensorboard, c.run.plot = False, False, False
    for k, v in kw.items():
        c[k] = v
    return c


def _run(trainer, updates, seed=0):
    state = trainer.init(jax.random.PRNGKey(seed), trainer.hparams)
    step = jax.jit(lambda s, hp, b: jax.lax.scan(lambda r, _: trainer.update(r, hp, b), s, None, length=updates))
    return step(state, trainer.hparams, trainer.base)


def _all_pairs_margin(trainer, state):
    """(mean h, accuracy) over every pair of the file: h = (pc - rc) - (pr - rr), the implicit margin / beta."""
    pol, ref = jax.jit(trainer.score)(state, trainer.base, trainer.base["pairs"])
    h = np.asarray((pol[:, 0] - ref[:, 0]) - (pol[:, 1] - ref[:, 1]))
    return float(h.mean()), float((h > 0).mean())


def test_shipped_pairs_are_the_generators_output_in_the_envs_prompt_format():
    spec = importlib.util.spec_from_file_location("build_pairs", os.path.join(DATA_DIR, "build_arithmetic_pairs.py"))
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    with open(PAIRS, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert rows == list(build.pairs()) and len(rows) == 48
    for r in rows:
        assert r["prompt"].startswith(arithmetic.PROMPT) and r["prompt"].endswith(arithmetic.OUTRO)
        assert r["chosen"] != r["rejected"] and r["chosen"].startswith("Answer: ")
        a, op, b = r["prompt"][len(arithmetic.PROMPT):-len(arithmetic.OUTRO)].split(" ")
        assert int(r["chosen"].split()[1]) == eval(f"{a}{op}{b}")  # noqa: S307  (digits and one operator)


def test_pairs_buffers_score_only_the_response_and_its_eos():
    tok = CharTokenizer()
    pairs = files.load_pairs(PAIRS, tok, 96)
    with open(PAIRS, encoding="utf-8") as f:
        first = json.loads(f.readline())
    assert pairs.tokens.shape == (48, 2, 96) and pairs.valid.all()
    np.testing.assert_array_equal(pairs.tokens, pairs.targets)
    for side, name in enumerate(("chosen", "rejected")):
        row, m = pairs.tokens[0, side], pairs.mask[0, side]
        assert tok.decode(row) == first["prompt"] + first[name]
        scored = [int(t) for t in row[m]]
        assert scored == tok.encode(first[name]) + [tok.eos_id]
        assert not m[: len(first["prompt"])].any()


@pytest.mark.parametrize("train_base", [False, True])
def test_loss_at_step_zero_is_log_two(train_base):
    """The policy is the reference at init: LoRA B = 0, or (train_base) the frozen copy of the same weights."""
    trainer = dpo.make_train(_config(train_base=train_base))
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    pol, ref = jax.jit(trainer.score)(state, trainer.base, trainer.base["pairs"])
    # the LoRA path adds x A B = 0 in another matmul order: equal up to float rounding
    np.testing.assert_allclose(np.asarray(pol), np.asarray(ref), rtol=0 if train_base else 1e-6)
    loss, metrics = dpo_loss(pol[:, 0], pol[:, 1], ref[:, 0], ref[:, 1], beta=0.1)
    assert float(loss) == pytest.approx(math.log(2.0), abs=1e-6)
    assert abs(float(metrics["reward_margin"])) < 1e-6


def test_dpo_on_shipped_pairs_widens_the_margin_on_them():
    config = _config()
    trainer = dpo.make_train(config)
    h0, acc0 = _all_pairs_margin(trainer, trainer.init(jax.random.PRNGKey(0), trainer.hparams))
    state, metrics = _run(trainer, trainer.num_updates)
    loss = np.asarray(metrics["loss"])
    h1, acc1 = _all_pairs_margin(trainer, state)
    assert loss[0] == pytest.approx(math.log(2.0), abs=1e-5)  # the first update sees policy == reference
    assert abs(h0) < 1e-4 and acc0 <= 0.6
    assert h1 > 1.5 and acc1 >= 0.7, (h1, acc1)  # measured: h 2.8, accuracy 0.77 after 40 updates
    assert loss[-5:].mean() < loss[0] - 0.05, loss
    assert np.asarray(metrics["reward_margin"])[-5:].mean() > 0.05
    # only adapters moved; the base (and so the reference) is the one make_train built
    assert set(state.trainable) == {"lora"}


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


GOOD = json.dumps({"prompt": "1 + 1 = ?\n", "chosen": "Answer: 2", "rejected": "Answer: 3"})


@pytest.mark.parametrize(
    "lines,max_length,match",
    [
        ([GOOD, json.dumps({"prompt": "x", "chosen": "y"})], 96, r"pairs.jsonl:2: key 'rejected' is missing"),
        ([GOOD, json.dumps({"prompt": "x", "chosen": 1, "rejected": "z"})], 96, r"pairs.jsonl:2: key 'chosen' is int"),
        ([GOOD, GOOD, "{not json"], 96, r"pairs.jsonl:3: not valid JSON"),
        ([GOOD], 15, r"pairs.jsonl:1: the pair needs 20 tokens .* raise config.max_length to at least that"),
        ([json.dumps({"prompt": "p", "chosen": "same", "rejected": "same"})], 96, r"pairs.jsonl:1: chosen and rejected"),
        ([], 96, r"has no pairs"),
    ],
)
def test_bad_pairs_files_name_the_file_and_line(tmp_path, lines, max_length, match):
    path = _write(tmp_path / "pairs.jsonl", lines)
    with pytest.raises(ConfigError, match=r"config.pairs_path: .*" + match):
        files.load_pairs(path, CharTokenizer(), max_length)


def test_bad_pairs_reach_the_entry_point_as_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="config.pairs_path: 'nowhere.jsonl' is not a file"):
        entry.build(_config(pairs_path="nowhere.jsonl"))
    with pytest.raises(ConfigError, match="does not exist"):
        files.load_pairs(str(tmp_path / "missing.jsonl"), CharTokenizer(), 96)
    path = _write(tmp_path / "pairs.jsonl", [GOOD, json.dumps({"prompt": "x", "rejected": "y"})])
    with pytest.raises(ConfigError, match=r"pairs.jsonl:2: key 'chosen' is missing"):
        entry.build(_config(pairs_path=path))
    with pytest.raises(ConfigError, match="config.batch_size: 16 is more than the 1 pairs"):
        entry.build(_config(pairs_path=_write(tmp_path / "one.jsonl", [GOOD])))


@pytest.mark.parametrize(
    "key,value,match",
    [("source", "web", "config.source"), ("loss_type", "kto", "config.loss_type"), ("beta", 0.0, "config.beta"),
     ("players", "teacher:0,oracle", "config.players"), ("batch_size", 0, "config.batch_size"),
     ("pairs_path", "", "config.pairs_path"), ("label_smoothing", 0.7, "config.label_smoothing")],
)
def test_bad_dpo_configs_name_the_key(key, value, match):
    c = _config(**{key: value})
    if key == "players":
        c.source, c.env_name = "game", "text/guess_number"
    with pytest.raises(ConfigError, match=match):
        validate_dpo(c)


def test_pair_episodes_takes_best_against_worst_and_masks_ties():
    returns = jnp.asarray([[1.0, 0.0, 2.0], [0.0, 0.0, -1.0], [0.5, 0.0, 3.0]])  # [G=3 players, B=3 rows]
    tokens = jnp.arange(3)[:, None, None] * 10 + jnp.zeros((3, 3, 4), jnp.int32)  # player g's row is all 10 g
    mask = jnp.ones((3, 3, 4), bool)
    pairs = dpo.pair_episodes(returns, tokens, tokens, mask)
    np.testing.assert_array_equal(np.asarray(pairs.tokens[:, :, 0]), [[0, 10], [0, 0], [20, 10]])
    np.testing.assert_array_equal(np.asarray(pairs.valid), [True, False, True])


def test_game_pairs_rank_the_teacher_over_its_noisy_self():
    """source=game on guess_number: bisection vs a half-random teacher on the same secrets, one update."""
    c = _config(source="game", env_name="text/guess_number", players="teacher:0.0,teacher:1.0", batch_size=8,
                total_updates=1)
    c.env_kwargs = {"capacity": 370, "max_action_tokens": 12}  # prompt 146 + 10 x (11 + 11) tokens
    c.num_turns, c.model.max_position_embeddings = 10, 384
    validate_dpo(c)
    trainer = dpo.make_train(c)
    _, metrics = _run(trainer, 1)
    m = {k: float(v[0]) for k, v in jax.device_get(metrics).items()}
    assert m["return_0_teacher"] == 1.0  # bisection finds every training secret within 10 guesses
    assert 0.0 < m["pair_fraction"] <= 1.0 and m["return_1_teacher"] < 1.0
    assert m["chosen_return"] == 1.0 and m["rejected_return"] == 0.0
    assert m["loss"] == pytest.approx(math.log(2.0), abs=1e-5)
    assert m["chosen_logp"] < 0 and m["rejected_logp"] < 0


def test_killed_run_resumes_to_identical_results_and_exports(tmp_path):
    """Through entry.build / the runner / entry.after_training; one compiled chunk shared by the three runs."""
    def small(out):
        return _config(out_dir=tmp_path / out, total_updates=6)

    trainer, chunk_fn, steps, headline = entry.build(small("full"))
    cache = {}
    cached = lambda tr, mesh, k: cache.setdefault(k, chunk_fn(tr, mesh, k))  # noqa: E731

    def train(config, chunks=cached):
        return entry.after_training(config, trainer, run_training(config, trainer, chunks, steps, headline))

    full = train(small("full"))
    config = small("killed")
    with pytest.raises(Killed):  # dies during the third chunk, after two checkpoints
        train(config, dying_after(cached, 3))
    config.resume = "True"
    resumed = train(config)
    assert_resumed_identically(full, resumed, config.run.out_dir, "loss", updates=6)
    # the HF folder holds the merged model; the PEFT adapter sits beside it
    assert os.path.exists(os.path.join(resumed["adapter_dir"], "adapter_model.safetensors"))
    cfg, loaded = load_pretrained(resumed["model_dir"])
    params, trainable = trainer.weights(resumed["state"], trainer.base)
    tokens = jnp.asarray(trainer.base["pairs"].tokens[:2, 0])
    want, _, _ = forward(params, tokens, trainer.policy.cfg, lora=trainable["lora"], lora_scale=trainer.policy.lora.scale)
    got, _, _ = forward(loaded, tokens, cfg)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-4, rtol=1e-4)


def test_eight_devices_match_one():
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 forced host devices (conftest)")
    from jaxmarl_llm.parallel import mesh as mesh_lib

    outs = []
    for n in (1, 8):
        config = _config()
        config.mesh.num_devices = n
        trainer = dpo.make_train(config)
        mesh = mesh_lib.make_mesh(n)
        state = mesh_lib.put(trainer.init(jax.random.PRNGKey(1), trainer.hparams), mesh, trainer.state_specs)
        state, metrics = mesh_lib.sharded_chunk(trainer, mesh, 2)(state, trainer.hparams)
        outs.append((jax.device_get(state.trainable), jax.device_get(metrics)))
    for a, b in zip(jax.tree.leaves(outs[0][0]), jax.tree.leaves(outs[1][0])):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
    for name in ("loss", "reward_margin", "logp_gap"):
        np.testing.assert_allclose(outs[0][1][name], outs[1][1][name], rtol=1e-5, atol=1e-6)
    # accuracy counts margins > 0; at update 0 the policy is the reference, every margin is float noise
    # around 0 and its sign follows the reduction order, so only later updates are compared
    np.testing.assert_allclose(outs[0][1]["accuracy"][1:], outs[1][1]["accuracy"][1:])


@pytest.mark.slow
def test_policy_players_pair_on_policy_episodes_against_the_teacher():
    """players="teacher:0.0,policy": the random policy's format errors lose to the teacher on every seed."""
    c = _config(source="game", env_name="text/guess_number", players="teacher:0.0,policy", batch_size=8,
                total_updates=3)
    c.env_kwargs = {"capacity": 256, "max_action_tokens": 12, "max_turns": 2}
    c.num_turns, c.model.max_position_embeddings = 2, 256
    validate_dpo(c)
    trainer = dpo.make_train(c)
    _, metrics = _run(trainer, 3)
    m = jax.device_get(metrics)
    assert np.all(m["return_1_policy"] < 0) and np.all(m["pair_fraction"] == 1.0)
    assert np.all(m["chosen_return"] > m["rejected_return"])
    assert m["loss"][0] == pytest.approx(math.log(2.0), abs=1e-5) and m["reward_margin"][-1] > 0
