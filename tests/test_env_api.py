"""Env protocol, wrappers, registry and the PettingZoo adapter, on the MPE worlds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs import registry
from jaxmarl_llm.envs.core import AutoReset, wrap_for_training


def test_registry_errors_list_valid_choices():
    with pytest.raises(ValueError, match="mpe/simple_spread"):
        registry.make("mpe/simple_sprad")
    with pytest.raises(TypeError, match="num_agents"):
        registry.make("mpe/simple_spread", num_agent=3)


def test_auto_reset_keeps_true_final_obs_and_episode_stats_sum_rewards():
    env = registry.make("mpe/simple_spread", num_agents=3, max_cycles=5)
    wrapped = wrap_for_training(env)
    step = jax.jit(wrapped.step)
    raw_step = jax.jit(env.step)
    key = jax.random.PRNGKey(0)
    obs, state = wrapped.reset(key)
    total = np.zeros(3)
    for t in range(5):
        key, k_act, k_step = jax.random.split(key, 3)
        action = jax.random.randint(k_act, (3,), 0, 5)
        # The wrapper splits its key as (step, reset); reproduce the raw step to compare.
        raw = raw_step(jax.random.split(k_step)[0], state.env_state, action)
        obs, state, reward, term, trunc, info = step(k_step, state, action)
        total += np.asarray(reward)
        np.testing.assert_allclose(info["final_obs"], raw.obs, atol=1e-6)
        if t < 4:
            assert not bool(info["returned_episode"])
            np.testing.assert_allclose(obs, raw.obs, atol=1e-6)
    # Truncated after exactly max_cycles steps, then reset: obs is a fresh episode's.
    assert bool(trunc.all()) and not bool(term.any()) and bool(info["returned_episode"])
    assert not np.allclose(obs, info["final_obs"])
    np.testing.assert_allclose(info["returned_episode_returns"], total, rtol=1e-5)
    np.testing.assert_allclose(info["returned_episode_team_return"], total.sum(), rtol=1e-5)
    assert int(info["returned_episode_length"]) == 5
    assert int(state.episode_length) == 0


def test_auto_reset_vmaps_over_envs_and_params():
    env = registry.make("mpe/simple_spread", num_agents=3)
    wrapped = AutoReset(env)
    keys = jax.random.split(jax.random.PRNGKey(1), 64)
    obs, state = jax.vmap(wrapped.reset)(keys)
    assert obs.shape == (64, 3, env.observation_space.shape[0])
    params = jax.vmap(lambda r: env.default_params.replace(local_ratio=r))(jnp.linspace(0.0, 1.0, 64))
    actions = jnp.zeros((64, 3), jnp.int32)
    out = jax.jit(jax.vmap(wrapped.step))(keys, state, actions, params)
    assert out.reward.shape == (64, 3)
    # local_ratio changes how reward is split between agents: rows differ across the sweep.
    assert float(jnp.std(out.reward[:, 0] - out.reward[:, 1])) > 0


@pytest.mark.parametrize("name,kwargs", [("mpe/simple_spread", {}), ("mpe/simple_tag", {}), ("mpe/simple_speaker_listener", {})])
def test_pettingzoo_parallel_api(name, kwargs):
    from pettingzoo.test import parallel_api_test

    from jaxmarl_llm.envs.pettingzoo_adapter import PettingZooParallelEnv

    env = PettingZooParallelEnv(registry.make(name, **kwargs), seed=0)
    parallel_api_test(env, num_cycles=30)
    obs, _ = env.reset(seed=7)
    for agent in env.possible_agents:
        assert obs[agent].shape == env.observation_space(agent).shape
    # Reproducible from the seed.
    obs2, _ = env.reset(seed=7)
    for agent in env.possible_agents:
        np.testing.assert_array_equal(obs[agent], obs2[agent])
