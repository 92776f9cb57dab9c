"""The LM algorithm registry (algos/lm_objective.py): estimators against brute force, and a new entry end to end."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_lm_rl import CharClassGame

from jaxmarl_llm.algos import lm_objective
from jaxmarl_llm.algos.lm_objective import ALGORITHMS, Algorithm, EstimatorInput
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import ConfigError, validate_lm_rl
from jaxmarl_llm.train.lm.setup import build_tokenizer
from tiny_configs import tiny_lm_rl


def _rewards(t=3, n=8, a=2, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(size=(t, n, a)), jnp.float32)


@pytest.mark.parametrize("name", ["grpo", "rloo"])
def test_group_baselines_match_brute_force(name):
    reward, group = _rewards(), 4
    adv, ret, _ = ALGORITHMS[name].advantages(EstimatorInput(reward, None, None, None, _all_seats, group_size=group),
                                              None, None)
    returns = np.asarray(reward).sum(0)  # [N, A]
    want = np.zeros_like(returns)
    for a in range(returns.shape[1]):
        for g in range(returns.shape[0] // group):
            r = returns[g * group:(g + 1) * group, a]
            if name == "rloo":
                want[g * group:(g + 1) * group, a] = [r[i] - np.delete(r, i).mean() for i in range(group)]
            else:
                want[g * group:(g + 1) * group, a] = (r - r.mean()) / (r.std(ddof=1) + 1e-4)
    np.testing.assert_allclose(np.asarray(adv), np.broadcast_to(want, reward.shape), rtol=1e-3, atol=1e-4)
    assert not np.asarray(ret).any()  # no critic: no value targets


def test_at_grpo_groups_by_seat_and_turn_against_brute_force():
    """AT-GRPO: the return to go of seat a at turn t, normalised among the episodes of its group in which seat a
    moved at turn t; a turn the seat did not move gets 0 and counts in no group."""
    reward, group = _rewards(t=4, n=12, a=2, seed=3), 4
    acted = np.random.default_rng(4).random(reward.shape) < 0.6  # [T, N, A]
    adv, ret, _ = ALGORITHMS["at_grpo"].advantages(
        EstimatorInput(reward, None, jnp.asarray(acted), None, _all_seats, group_size=group), None, None)
    r = np.asarray(reward)
    to_go = r[::-1].cumsum(0)[::-1]
    want = np.zeros_like(r)
    for t in range(r.shape[0]):
        for a in range(r.shape[2]):
            for g in range(r.shape[1] // group):
                rows = [i for i in range(g * group, (g + 1) * group) if acted[t, i, a]]
                if len(rows) > 1:
                    v = to_go[t, rows, a]
                    want[t, rows, a] = (v - v.mean()) / (v.std(ddof=1) + 1e-4)
    np.testing.assert_allclose(np.asarray(adv), want, rtol=1e-3, atol=1e-4)
    assert not np.asarray(ret).any()


def _all_seats(x):
    return x  # every seat learns: the loss view is the whole record


def test_magrpo_credits_every_seat_with_the_team_advantage():
    """MAGRPO (aligned): each seat's advantage is the group-normalised team return (every seat's summed)."""
    reward, group = _rewards(), 4
    adv, ret, _ = ALGORITHMS["magrpo"].advantages(EstimatorInput(reward, None, None, None, _all_seats,
                                                                 group_size=group), None, None)
    team = np.asarray(reward).sum((0, 2))  # [N]
    want = np.zeros_like(team)
    for g in range(team.shape[0] // group):
        r = team[g * group:(g + 1) * group]
        want[g * group:(g + 1) * group] = (r - r.mean()) / (r.std(ddof=1) + 1e-4)
    np.testing.assert_allclose(np.asarray(adv), np.broadcast_to(want[None, :, None], reward.shape), rtol=1e-3,
                               atol=1e-4)
    assert not np.asarray(ret).any()


def median_baseline(x: EstimatorInput, hp, state):
    """docs/forking.md's example: the episode return minus its group's median."""
    return (*lm_objective._per_episode(lambda g: g - jnp.median(g, axis=-1, keepdims=True), x), state)


def _tiny_config(group_size: int):
    """A one-layer model on CharClassGame's one-turn episodes: 8 envs, 2 updates."""
    c = tiny_lm_rl()  # the env is passed to make_train
    c.num_envs, c.group_size, c.num_turns, c.total_episodes, c.lr = 8, group_size, 1, 16, 1e-2
    return c


def test_new_algorithm_through_the_registry(monkeypatch):
    """One registry line makes a new estimator a valid `config.algo` that trains; unknown names list the choices."""
    c = _tiny_config(group_size=4)
    c.algo = "grpo_median"
    with pytest.raises(ConfigError, match="config.algo: must be ppo, grpo, rloo, magrpo, at_grpo, rae or mmd, got 'grpo_median'"):
        validate_lm_rl(c)
    monkeypatch.setitem(ALGORITHMS, "grpo_median", Algorithm(median_baseline, lm_objective.clipped_grpo, critic=False))
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c, env=CharClassGame(build_tokenizer(c.tokenizer)))
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    new, metrics = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
    assert np.isfinite(float(metrics["policy_loss"])) and float(metrics["policy_loss"]) != 0.0
    moved = jax.tree.leaves(jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), new.trainable["lora"],
                                         state.trainable["lora"]))
    assert max(moved) > 0  # the new advantages reached the adapters
    # the estimator against brute force on the rollout the update played (same key)
    turns, seats, _ = jax.jit(trainer.rollout)(jax.random.split(state.key, 3)[1], trainer.base, state.trainable,
                                               state.pool, jnp.arange(c.num_envs))
    adv, _, _ = median_baseline(EstimatorInput(turns.reward, None, None, None, _all_seats, group_size=c.group_size),
                                None, None)
    returns = np.asarray(turns.reward).sum(0).reshape(-1, c.group_size, 2)
    np.testing.assert_allclose(np.asarray(adv)[0].reshape(-1, c.group_size, 2),
                               returns - np.median(returns, axis=1, keepdims=True), atol=1e-6)


def test_rae_baselines_match_a_hand_computed_example():
    """RAE (algos/rae.py): each role's baseline moves (1 - decay) toward the mean return of the episodes where that
    role learns; an advantage is the return minus its role's new baseline, 0 where the role does not learn."""
    returns = jnp.asarray([[1.0, -1.0], [-1.0, 1.0], [0.0, 0.0], [1.0, -1.0]])  # [N, A]
    reward = jnp.stack([jnp.zeros_like(returns), returns])  # [T=2, N, A]: the return arrives at the last turn
    learns = jnp.asarray([[True, False], [False, True], [True, False], [False, True]])

    class HP:
        rae_decay = 0.9

    adv, ret, base = ALGORITHMS["rae"].advantages(EstimatorInput(reward, None, None, learns, _all_seats), HP,
                                                   jnp.asarray([0.5, -0.5]))
    # role 0 learns in envs 0, 2 (mean 0.5): 0.9 * 0.5 + 0.1 * 0.5 = 0.5; role 1 in envs 1, 3 (mean 0): -0.45
    np.testing.assert_allclose(np.asarray(base), [0.5, -0.45], atol=1e-6)
    want = np.asarray([[0.5, 0.0], [0.0, 1.45], [-0.5, 0.0], [0.0, -0.55]])
    np.testing.assert_allclose(np.asarray(adv), np.broadcast_to(want, reward.shape), atol=1e-6)
    assert not np.asarray(ret).any()
    # a role that does not learn in this batch keeps its baseline
    _, _, kept = ALGORITHMS["rae"].advantages(EstimatorInput(reward, None, None, learns.at[:, 1].set(False),
                                                             _all_seats), HP, jnp.asarray([0.5, -0.5]))
    np.testing.assert_allclose(np.asarray(kept), [0.5, -0.5], atol=1e-6)


def test_rae_trains_without_groups_and_carries_its_baselines():
    """algo='rae' runs with group_size=1 (GRPO refuses it); the runner state carries the per-role baselines, which
    after one update equal (1 - rae_decay) x the mean return each role earned in that update's rollout."""
    c = _tiny_config(group_size=1)
    c.algo = "grpo"
    with pytest.raises(ConfigError, match="config.group_size: grpo compares the episodes of a group"):
        validate_lm_rl(c)
    c.algo = "rae"
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c, env=CharClassGame(build_tokenizer(c.tokenizer)))
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    np.testing.assert_array_equal(np.asarray(state.algo_state), [0.0, 0.0])
    new, metrics = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
    turns, _, _ = jax.jit(trainer.rollout)(jax.random.split(state.key, 3)[1], trainer.base, state.trainable,
                                           state.pool, jnp.arange(c.num_envs))
    mean_return = np.asarray(turns.reward).sum(0).mean(0)  # [A]: both seats learn in every env
    np.testing.assert_allclose(np.asarray(new.algo_state), (1 - c.rae_decay) * mean_return, rtol=1e-5, atol=1e-6)
    assert float(metrics["baseline_agent1"]) == pytest.approx(float(new.algo_state[1]))
    moved = jax.tree.leaves(jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), new.trainable["lora"],
                                         state.trainable["lora"]))
    assert max(moved) > 0
