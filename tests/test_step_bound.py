"""`config.max_step_kl` (train/lm/step_bound.py): an update's policy step scaled back to a KL bound on its batch."""

from types import SimpleNamespace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.train.lm.step_bound import bounded_step
from test_poker import _kuhn_trainer


def _flat(tree) -> np.ndarray:
    return np.concatenate([np.ravel(x) for x in jax.tree.leaves(tree)])


def _one_update(nudged: bool = False, **kw):
    """(trainable before, trainable after, metrics) of one update of Kuhn self-play from a fixed start; `nudged`:
    its adapters off zero (a fresh adapter's B = 0 gives its A no gradient; there every weight moves)."""
    trainer = _kuhn_trainer(update_epochs=1, num_minibatches=1, **kw)
    before = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    if nudged:
        leaves, treedef = jax.tree.flatten(before.trainable["lora"])
        keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
        lora = treedef.unflatten([x + 0.1 * jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, keys)])
        before = before.replace(trainable={**before.trainable, "lora": lora})
    after, metrics = jax.jit(trainer.update)(before, trainer.hparams, trainer.base)
    return before.trainable, after.trainable, metrics


def test_the_step_is_scaled_back_to_the_bound_and_the_critic_keeps_its_step():
    before, free, _ = _one_update(nudged=True)
    _, loose, m_loose = _one_update(nudged=True, max_step_kl=1e9)
    step_kl = float(m_loose["step_kl"])
    assert step_kl > 0 and float(m_loose["step_scale"]) == 1.0
    np.testing.assert_array_equal(_flat(loose), _flat(free))  # a bound it does not reach changes nothing

    # KL grows as the step's square: a quarter of it is half the step
    _, held, m_held = _one_update(nudged=True, max_step_kl=step_kl / 4)
    assert float(m_held["step_kl"]) == pytest.approx(step_kl, rel=1e-6)  # the full step's, measured
    assert float(m_held["step_scale"]) == pytest.approx(0.5, rel=1e-5)
    np.testing.assert_allclose(_flat(held["lora"]), _flat(before["lora"]) + 0.5 * (_flat(free["lora"])
                                                                                    - _flat(before["lora"])),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(_flat(held["value_head"]), _flat(free["value_head"]))


class _Turns(NamedTuple):  # the two parts of a rollout the bound reads
    logprob: jax.Array  # [T, N, A, M]

    def token_mask(self) -> jax.Array:
        return jnp.ones(self.logprob.shape, bool)


@pytest.mark.parametrize("kl_of_step", [0.0, 1e-3])
def test_a_step_within_the_bound_is_kept_bit_for_bit(kl_of_step):
    """before + 1 x (after - before) is not `after` in floating point (weights of different sizes or signs): a
    step the bound does not reach must come back exactly as it went in, or a run with a bound it never reaches
    drifts from the unbounded run within a few updates."""
    k_b, k_a, k_l = jax.random.split(jax.random.PRNGKey(0), 3)
    before = {"lora": {"a": jax.random.normal(k_b, (64, 64))}, "value_head": jnp.zeros(3)}
    after = {"lora": {"a": jax.random.normal(k_a, (64, 64)) * 1e-3 + 0.5 * before["lora"]["a"]},
             "value_head": jnp.ones(3)}
    step = after["lora"]["a"] - before["lora"]["a"]
    assert np.any(np.asarray(before["lora"]["a"] + 1.0 * step) != np.asarray(after["lora"]["a"]))  # the trap
    turns = _Turns(jax.random.normal(k_l, (2, 4, 1, 5)) - 3.0)
    shift = np.sqrt(2 * kl_of_step)  # k3 of a small logprob shift d is ~d^2 / 2

    def score(plan, policy, base, trainable, turns, seqs):  # the stepped policy's log-probs
        return turns.logprob + shift, None, None

    held, m = jax.jit(lambda b, a: bounded_step(None, score, None, None, b, a, turns, None,
                                                SimpleNamespace(max_step_kl=0.01), None))(before, after)
    assert float(m["step_scale"]) == 1.0 and float(m["step_kl"]) < 0.01
    for x, y in zip(jax.tree.leaves(held), jax.tree.leaves(after)):
        np.testing.assert_array_equal(x, y)


def test_step_kl_measures_the_step():
    """Adam's step is proportional to the lr, and a KL to the step's square: 10x the lr, ~100x the KL."""
    small = float(_one_update(lr=3e-3, max_step_kl=1e9)[2]["step_kl"])
    large = float(_one_update(lr=3e-2, max_step_kl=1e9)[2]["step_kl"])
    assert 30 < large / small < 300, (small, large)


def test_max_step_kl_must_be_positive():
    with pytest.raises(ConfigError, match="max_step_kl: must be a number > 0 or None"):
        _kuhn_trainer(max_step_kl=0.0)


def test_eight_devices_hold_the_step_as_one():
    """The KL is the whole batch's (each device scores its shard, the shares summed): the scale, and so the
    adapters, are those of one device holding every episode."""
    from test_lm_rl import on_one_and_eight_devices

    outs = on_one_and_eight_devices("ppo", num_envs=16, max_step_kl=1e-4)
    assert np.all(outs[0][1]["step_scale"] < 1)  # the bound binds
    np.testing.assert_allclose(outs[1][1]["step_kl"], outs[0][1]["step_kl"], rtol=1e-4)
    np.testing.assert_allclose(outs[1][1]["step_scale"], outs[0][1]["step_scale"], rtol=1e-4)
    for a, b in zip(jax.tree.leaves(outs[0][0]), jax.tree.leaves(outs[1][0])):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)


def test_a_sweep_over_the_bound_compiles_it_in_and_each_row_reads_its_own(tmp_path):
    """--sweep.max_step_kl from a config without a bound: the bound's forward is compiled in, a row whose bound
    binds scales its steps, a row at inf does not."""
    from jaxmarl_llm.run.sweep import make_grid, run_sweep
    from jaxmarl_llm.run.sweep_command import compile_swept
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import validate_lm_rl
    from tiny_configs import tiny_lm_rl

    c = tiny_lm_rl("text/kuhn_poker", "word", env_kwargs={})
    c.policy.actions = "constrained"
    c.algo, c.group_size, c.num_envs, c.num_turns, c.lr, c.total_episodes = "ppo", 1, 8, 3, 3e-2, 16
    overrides = {"max_step_kl": [1e-6, float("inf")]}
    compile_swept(c, overrides)
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c)
    rows, hparams, keys = make_grid(trainer.hparams, overrides, seeds=1, base_seed=0)
    result = run_sweep(trainer, rows, hparams, keys, 24, str(tmp_path), headline="step_scale", progress=False)
    assert np.all(result["curves"][0] < 1) and np.all(result["curves"][1] == 1)
