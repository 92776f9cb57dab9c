"""Golden runs: the first 3 updates of each LM trainer kind must keep their numbers.

Recorded from the trainers as they stand, so a
refactor that changes what a trainer computes fails here: every metric of
updates 1-3 and a checksum of every trainable leaf (sum, sum of squares and a
sha256 of the bytes) per configuration:

  * guess_number (word tokenizer), GRPO, KL to the reference, 2 minibatches x 2 microbatches (incremental rollout)
  * guess_number, PPO with token-level credit and value clipping
  * spread (tokenized MPE), PPO with the MAPPO critic (the re-read rollout)
  * tic-tac-toe, PPO self-play with a snapshot pool refreshed every update
  * tic-tac-toe, PPO against a scripted minimax seat
  * tests/test_lm_rl.py's dense-reward game: GRPO with KL, 2 minibatches x 2 microbatches, per-agent adapters;
    RLOO (its zero-advantage skip)
  * SFT on the guess_number teacher; DPO on arithmetic pairs played by the teacher (noise 0 vs 1)
  * spread_mlp: the MLP IPPO trainer on MPE simple_spread (its parameters stand in for `trainable`)

Metrics and checksums agree to 1e-5 (relative: `TOL`, two CPUs round differently); the bytes are
reported, not required (a different XLA program order may round differently). The numbers are
those of tests/conftest.py's XLA flags (backend optimization level 0): the default
level rounds differently in the last bits (re-recorded under level 0 at a commit that
matched the pre-reshape record at the default level).
Re-record (only when a change is meant to change numbers):
`.venv/bin/python tests/test_golden.py --write`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import jax
import numpy as np
import pytest

from jaxmarl_llm.train.lm.episode_sample import take_episodes
from tiny_configs import TINY_LORA, TINY_MODEL, tiny_lm_rl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "trainers.json")
UPDATES = 3
CHARCLASS = "CharClassGame"  # tests/test_lm_rl.py's game, passed to make_train directly
TINY = TINY_MODEL | {"max_position_embeddings": 512}


def _lm(env_name, env_kwargs, **kw):
    return tiny_lm_rl(env_name, env_kwargs=env_kwargs, model=TINY, lora={"targets": ("q", "v", "up")}, **kw)


def _configs():
    from jaxmarl_llm.train.config import dpo_defaults, mlp_ppo_defaults, sft_defaults

    guess = {"capacity": 192, "max_action_tokens": 12, "max_turns": 2}
    ttt = {"capacity": 320, "max_action_tokens": 8}
    spread = {"env": "mpe/simple_spread", "num_agents": 3, "local_ratio": 0.5, "max_cycles": 4,
              "continuous_actions": False, "bins": 16, "low": -2.0, "high": 2.0, "max_action_tokens": 6,
              "format_penalty": -0.1}
    out = {
        "guess_grpo_kl_micro": _lm("text/guess_number", guess, tokenizer="word", algo="grpo", num_envs=8, group_size=4, num_turns=2,
                                   total_episodes=80, kl_coef=0.05, num_minibatches=2, num_microbatches=2,
                                   update_epochs=2, lr=1e-2, ent_coef=0.01),
        "guess_ppo_token": _lm("text/guess_number", guess, algo="ppo", credit="token", clip_value=True, num_envs=4,
                               group_size=1, num_turns=2, total_episodes=40, lr=1e-2, ent_coef=0.05),
        "spread_mappo": _lm("text/tokenized_mpe", spread, algo="ppo", critic={"kind": "mappo", "hidden": 32},
                            num_envs=4, group_size=1, num_turns=4, num_minibatches=2, update_epochs=2,
                            total_episodes=40, gamma=0.99, lr=1e-2, ent_coef=0.05),
        "ttt_pool": _lm("text/tic_tac_toe", ttt, tokenizer="word", algo="ppo", opponent_pool={"size": 2, "refresh_every": 1},
                        num_envs=4, group_size=2, num_turns=4, total_episodes=40, lr=1e-2, ent_coef=0.05),
        "ttt_minimax_ppo": _lm("text/tic_tac_toe", ttt, algo="ppo", scripted_agents="1:minimax", num_envs=4,
                               group_size=1, num_turns=4, total_episodes=40, lr=1e-2, ent_coef=0.05),
        # the test file's dense-reward game: returns differ from the first update, so GRPO/RLOO move
        "charclass_grpo_kl_micro": _lm(CHARCLASS, {}, algo="grpo", num_envs=8, group_size=4, num_turns=1,
                                       total_episodes=80, kl_coef=0.05, num_minibatches=2, num_microbatches=2,
                                       update_epochs=2, lr=1e-2, share_policy=False),
        "charclass_rloo": _lm(CHARCLASS, {}, algo="rloo", num_envs=8, group_size=4, num_turns=1, total_episodes=80,
                              lr=1e-2),
    }
    sft = sft_defaults()
    sft.env_kwargs = guess
    sft.num_turns = 2
    sft.model.update(TINY)
    sft.num_envs, sft.total_episodes, sft.lr, sft.warmup_updates = 8, 80, 1e-2, 2
    sft.mesh.num_devices = 1
    out["sft_guess"] = sft
    dpo = dpo_defaults()
    dpo.env_name, dpo.env_kwargs = "text/arithmetic", {"num_ops": 1, "max_operand": 9, "capacity": 96, "max_action_tokens": 12}
    dpo.source, dpo.players, dpo.num_turns = "game", "teacher:0.0,teacher:1.0", 1
    dpo.model.update(TINY)
    dpo.lora.update(TINY_LORA)
    dpo.batch_size, dpo.total_updates, dpo.lr, dpo.warmup_updates, dpo.sft_coef = 8, 10, 1e-2, 2, 0.1
    dpo.mesh.num_devices = 1
    out["dpo_game"] = dpo
    mlp = mlp_ppo_defaults()
    mlp.num_envs, mlp.num_steps, mlp.num_minibatches, mlp.update_epochs, mlp.lr = 4, 16, 2, 2, 1e-2
    mlp.total_timesteps = 4 * 16 * 10  # 10 updates: the annealed lr depends on it
    mlp.mesh.num_devices = 1
    out["spread_mlp"] = mlp
    return out


def _checksum(tree) -> dict:
    """Per leaf (by key path): [sum, sum of squares] in float64 and a sha256 of the bytes."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        x = np.asarray(jax.device_get(leaf))
        name = jax.tree_util.keystr(path)
        out[name] = {"sum": float(x.astype(np.float64).sum()), "sumsq": float(np.square(x.astype(np.float64)).sum()),
                     "sha256": hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()}
    return out


def run_golden(name: str, config) -> dict:
    """The metrics of the first UPDATES updates (through the trainer's real sharded chunk on one device) and the
    trainable checksum after them."""
    from jaxmarl_llm.run import entry
    from jaxmarl_llm.parallel import mesh as mesh_lib

    if config.env_name == CHARCLASS:
        from test_lm_rl import CharClassGame

        from jaxmarl_llm.train import lm_rl
        from jaxmarl_llm.train.lm.setup import build_tokenizer

        config = config.copy_and_resolve_references()
        config.env_name = "text/guess_number"  # unused: the env is passed in
        trainer = lm_rl.make_train(config, env=CharClassGame(build_tokenizer(config.tokenizer)))
        chunk_fn = mesh_lib.sharded_chunk
    else:
        trainer, chunk_fn, _, _ = entry.build(config)
    mesh = mesh_lib.make_mesh(1)
    state = mesh_lib.put(jax.jit(trainer.init)(jax.random.PRNGKey(config.seed), trainer.hparams), mesh,
                         trainer.state_specs)
    state, metrics = chunk_fn(trainer, mesh, UPDATES)(state, trainer.hparams)
    metrics = jax.device_get(metrics)
    take_episodes(metrics)  # the sampled episodes (transcripts) are not metrics
    metrics = {k: [float(v) for v in np.asarray(m).reshape(-1)] for k, m in metrics.items()}
    # the MLP trainer's runner state has no `trainable`: all of its `params` train
    trainable = state.trainable if hasattr(state, "trainable") else state.params
    return {"metrics": metrics, "trainable": _checksum(trainable)}


# Relative tolerance. The same code on two x86 CPUs (an Intel Xeon and an AMD EPYC, both under level 0) rounds
# differently by up to ~2e-6 after 3 updates (vector widths differ), so 1e-5: a change in what a trainer
# computes moves these numbers far more.
TOL = 1e-5
# Metrics that count decisions and may flip one of their samples across CPUs: DPO's pair accuracy at update 1
# counts margins that are 0 up to rounding (the policy is still the reference), one pair of 8 = 0.125.
COUNT_TOL = {"accuracy": 0.125}


def _close(a: float, b: float, tol: float = TOL) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _metric_close(name: str, a: float, b: float) -> bool:
    return _close(a, b) or abs(a - b) <= COUNT_TOL.get(name, 0.0) + 1e-9


@pytest.mark.parametrize("name", sorted(_configs()))
def test_golden(name):
    from conftest import FAST_COMPILE_FLAG

    if FAST_COMPILE_FLAG not in os.environ.get("XLA_FLAGS", "").split():
        pytest.skip(f"the numbers are recorded with XLA_FLAGS={FAST_COMPILE_FLAG} (tests/conftest.py); the default "
                    "optimization level rounds differently in the last bits")
    with open(GOLDEN) as f:
        want = json.load(f)[name]
    got = run_golden(name, _configs()[name])
    # every recorded metric is still logged (new ones may join: team_return, return_agent<i>, ...)
    assert set(want["metrics"]) <= set(got["metrics"]), f"metrics gone: {set(want['metrics']) - set(got['metrics'])}"
    for k, values in want["metrics"].items():
        assert all(_metric_close(k, a, b) for a, b in zip(got["metrics"][k], values)), (k, got["metrics"][k], values)
    assert sorted(got["trainable"]) == sorted(want["trainable"]), "trainable leaves changed"
    differ = []
    for leaf, w in want["trainable"].items():
        g = got["trainable"][leaf]
        assert _close(g["sum"], w["sum"]) and _close(g["sumsq"], w["sumsq"]), (leaf, g, w)
        if g["sha256"] != w["sha256"]:
            differ.append(leaf)
    if differ:  # within tolerance, but not bit-identical: say where
        print(f"{name}: {len(differ)} of {len(want['trainable'])} leaves differ in their last bits: {differ[:4]}")


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit("usage: python tests/test_golden.py --write  (re-records tests/golden/trainers.json)")
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
    import conftest  # noqa: F401  (the suite's XLA flags: the numbers are recorded under them)
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    record = {}
    if only and os.path.exists(GOLDEN):
        with open(GOLDEN) as f:
            record = json.load(f)
    for name, config in _configs().items():
        if only and name not in only:
            continue
        record[name] = run_golden(name, config)
        print(name, {k: [round(x, 4) for x in v] for k, v in record[name]["metrics"].items()})
    os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
    with open(GOLDEN, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
