"""Parity of our MPE worlds with the reference `mpe2` package, step by step.

For every scenario and both action types: run mpe2 episodes with random actions;
before each step copy mpe2's world (positions, velocities, comm, goals, step count)
into our state. All recorded (state, action) pairs are then stepped by ONE
compiled `vmap(env.step)` call and compared with mpe2's observations, rewards,
terminations and truncations (atol 1e-4). Our float32 physics must reproduce
mpe2's float64 physics within that tolerance.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

mpe2 = pytest.importorskip("mpe2")
from mpe2 import simple_reference_v3, simple_speaker_listener_v4, simple_spread_v3, simple_tag_v3  # noqa: E402
from pettingzoo.utils.env_logger import EnvLogger  # noqa: E402

from jaxmarl_llm.envs import registry, spaces  # noqa: E402
from jaxmarl_llm.envs.core import wrap_for_training  # noqa: E402
from jaxmarl_llm.envs.mpe.base import MPEState  # noqa: E402
from jaxmarl_llm.envs.mpe.simple_reference import SimpleReference  # noqa: E402
from jaxmarl_llm.envs.mpe.simple_speaker_listener import SimpleSpeakerListener  # noqa: E402
from jaxmarl_llm.envs.mpe.simple_spread import SimpleSpread  # noqa: E402
from jaxmarl_llm.envs.mpe.simple_tag import SimpleTag  # noqa: E402

EPISODES = 200
ATOL = 1e-4

# name -> (our env factory, mpe2 parallel env factory); `cont` selects continuous actions.
SCENARIOS = {
    "spread": (lambda cont: SimpleSpread(continuous_actions=cont), lambda cont: simple_spread_v3.parallel_env(continuous_actions=cont)),
    "spread_n5": (
        lambda cont: SimpleSpread(num_agents=5, local_ratio=0.3, continuous_actions=cont),
        lambda cont: simple_spread_v3.parallel_env(N=5, local_ratio=0.3, continuous_actions=cont),
    ),
    "tag": (lambda cont: SimpleTag(continuous_actions=cont), lambda cont: simple_tag_v3.parallel_env(continuous_actions=cont)),
    "tag_2good": (
        lambda cont: SimpleTag(num_good=2, num_adversaries=3, num_obstacles=2, continuous_actions=cont),
        lambda cont: simple_tag_v3.parallel_env(num_good=2, num_adversaries=3, num_obstacles=2, continuous_actions=cont),
    ),
    "reference": (lambda cont: SimpleReference(continuous_actions=cont), lambda cont: simple_reference_v3.parallel_env(continuous_actions=cont)),
    "speaker_listener": (
        lambda cont: SimpleSpeakerListener(continuous_actions=cont),
        lambda cont: simple_speaker_listener_v4.parallel_env(continuous_actions=cont),
    ),
}


def _copy_state(raw) -> dict[str, np.ndarray]:
    """mpe2's world as our MPEState fields (numpy)."""
    world = raw.world
    goal = []
    for agent in world.agents:
        target = getattr(agent, "_goal_b", None)
        goal.append(next((j for j, lm in enumerate(world.landmarks) if lm is target), -1))
    return dict(
        p_pos=np.stack([e.state.p_pos for e in world.entities]),
        p_vel=np.stack([e.state.p_vel for e in world.entities]),
        c=np.stack([a.state.c for a in world.agents]).reshape(len(world.agents), world.dim_c),
        goal=np.asarray(goal, np.int32),
        step=np.asarray(raw.steps, np.int32),
    )


def _pad(x: np.ndarray, width: int) -> np.ndarray:
    return np.pad(np.asarray(x, np.float64), (0, width - len(x)))


def _run_mpe2(name: str, continuous: bool, env) -> dict[str, np.ndarray]:
    """Plays EPISODES mpe2 episodes with random actions; returns stacked records."""
    penv = SCENARIOS[name][1](continuous)
    raw = penv.unwrapped
    agents = penv.possible_agents
    assert tuple(agents) == env.agents, "our agent order must be mpe2's"
    obs_dim = env.obs_dim
    n_act = max(env.action_sizes)
    rng = np.random.default_rng(2 * list(SCENARIOS).index(name) + continuous)
    rec = {k: [] for k in ("p_pos", "p_vel", "c", "goal", "step", "action", "obs", "reward", "terminated", "truncated")}
    reset_rec = {k: [] for k in ("p_pos", "p_vel", "c", "goal", "step", "obs")}

    def add_state(store):
        for k, v in _copy_state(raw).items():
            store[k].append(v)

    for ep in range(EPISODES):
        obs, _ = penv.reset(seed=ep)
        add_state(reset_rec)
        reset_rec["obs"].append(np.stack([_pad(obs[a], obs_dim) for a in agents]))
        # every 4th continuous episode uses out-of-range actions: mpe2 clips them, so must we
        wide = continuous and ep % 4 == 3
        while penv.agents:
            add_state(rec)
            if continuous:
                lo, hi = (-0.3, 1.3) if wide else (0.0, 1.0)
                act = {a: rng.uniform(lo, hi, n).astype(np.float32) for a, n in zip(agents, env.action_sizes)}
                rec["action"].append(np.stack([_pad(act[a], n_act) for a in agents]))
            else:
                act = {a: int(rng.integers(n)) for a, n in zip(agents, env.action_sizes)}
                rec["action"].append(np.array([act[a] for a in agents]))
            obs, rew, term, trunc, _ = penv.step(act)
            rec["obs"].append(np.stack([_pad(obs[a], obs_dim) for a in agents]))
            rec["reward"].append(np.array([rew[a] for a in agents]))
            rec["terminated"].append(np.array([term[a] for a in agents]))
            rec["truncated"].append(np.array([trunc[a] for a in agents]))
    return {k: np.stack(v) for k, v in rec.items()}, {k: np.stack(v) for k, v in reset_rec.items()}


def _state(rec: dict[str, np.ndarray]) -> MPEState:
    return MPEState(
        p_pos=jnp.asarray(rec["p_pos"], jnp.float32),
        p_vel=jnp.asarray(rec["p_vel"], jnp.float32),
        c=jnp.asarray(rec["c"], jnp.float32),
        goal=jnp.asarray(rec["goal"], jnp.int32),
        step=jnp.asarray(rec["step"], jnp.int32),
    )


@functools.cache
def _batched(env):
    step = jax.jit(jax.vmap(lambda s, a: env.step(jax.random.PRNGKey(0), s, a)))
    obs = jax.jit(jax.vmap(env.get_obs))
    return step, obs


@pytest.fixture(scope="module", autouse=True)
def _quiet_mpe2():
    EnvLogger.suppress_output()  # out-of-bound warnings for the clipped continuous actions
    yield
    EnvLogger.unsuppress_output()


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_parity_with_mpe2(name: str, continuous: bool):
    env = SCENARIOS[name][0](continuous)
    rec, reset_rec = _run_mpe2(name, continuous, env)
    assert len(rec["step"]) == EPISODES * env.max_cycles
    step, get_obs = _batched(env)

    # observations right after reset
    obs0 = np.asarray(get_obs(_state(reset_rec)))
    np.testing.assert_allclose(obs0, reset_rec["obs"], atol=ATOL)

    # one step from every recorded mpe2 state
    out = step(_state(rec), jnp.asarray(rec["action"]))
    np.testing.assert_allclose(np.asarray(out.obs), rec["obs"], atol=ATOL, err_msg="observations")
    np.testing.assert_allclose(np.asarray(out.reward), rec["reward"], atol=ATOL, err_msg="rewards")
    np.testing.assert_array_equal(np.asarray(out.terminated), rec["terminated"])
    np.testing.assert_array_equal(np.asarray(out.truncated), rec["truncated"])
    # the physics moved the world exactly like mpe2's next recorded state (within an episode)
    same_ep = rec["step"][1:] > 0
    np.testing.assert_allclose(np.asarray(out.state.p_pos)[:-1][same_ep], rec["p_pos"][1:][same_ep], atol=ATOL)
    np.testing.assert_allclose(np.asarray(out.state.p_vel)[:-1][same_ep], rec["p_vel"][1:][same_ep], atol=ATOL)
    np.testing.assert_allclose(np.asarray(out.state.c)[:-1][same_ep], rec["c"][1:][same_ep], atol=ATOL)
    # padding stays zero
    pad = ~np.asarray(env.obs_mask)
    assert not np.any(np.asarray(out.obs)[:, pad])
    # the test is not vacuous: contacts and collisions happened where the scenario has them
    if name.startswith("tag"):
        assert np.any(rec["reward"] != np.round(rec["reward"])) and np.any(rec["reward"] >= 10)
    if name.startswith("spread"):
        assert np.any(np.abs(rec["reward"] - rec["reward"].mean(axis=1, keepdims=True)) > 0.1)


# ---- behaviour beyond one step --------------------------------------------------------------


ALL_ENVS = [  # one per scenario, both action types covered
    ("mpe/simple_spread", {}),
    ("mpe/simple_tag", {"num_good": 2, "continuous_actions": True}),
    ("mpe/simple_reference", {}),
    ("mpe/simple_speaker_listener", {"continuous_actions": True}),
]


def _random_actions(env, key, batch=None):
    shape = () if batch is None else (batch,)
    keys = jax.random.split(key, shape + (env.num_agents,))
    mask = env.action_mask
    sample = lambda k, m: env.action_space.sample(k, m)  # noqa: E731
    return jax.vmap(sample)(keys, mask) if batch is None else jax.vmap(jax.vmap(sample), in_axes=(0, None))(keys, mask)


@pytest.mark.parametrize("max_cycles", [25, 7])
def test_truncates_after_exactly_max_cycles(max_cycles):
    env = SimpleSpread(max_cycles=max_cycles)
    params = env.default_params
    assert params.max_steps == max_cycles

    def body(carry, key):
        state = carry
        k_act, k_step = jax.random.split(key)
        res = env.step(k_step, state, _random_actions(env, k_act), params)
        return res.state, (res.truncated, res.terminated)

    _, state = env.reset(jax.random.PRNGKey(0))
    _, (trunc, term) = jax.jit(lambda s, k: jax.lax.scan(body, s, k))(state, jax.random.split(jax.random.PRNGKey(1), 2 * max_cycles))
    trunc, term = np.asarray(trunc), np.asarray(term)
    assert not term.any()
    assert not trunc[: max_cycles - 1].any() and trunc[max_cycles - 1].all()

    # with the mpe2 reference: the same episode length
    penv = simple_spread_v3.parallel_env(max_cycles=max_cycles)
    penv.reset(seed=0)
    n = 0
    while penv.agents:
        _, _, _, truncs, _ = penv.step({a: 0 for a in penv.agents})
        n += 1
    assert n == max_cycles and all(truncs.values())


def test_max_steps_is_a_vmappable_param():
    env = SimpleSpread()
    _, state = env.reset(jax.random.PRNGKey(0))
    state = state.replace(step=jnp.array(6))
    params = jax.tree.map(lambda *x: jnp.stack(x), env.default_params.replace(max_steps=7), env.default_params.replace(max_steps=8))
    act = jnp.zeros((env.num_agents,), jnp.int32)
    res = jax.vmap(lambda p: env.step(jax.random.PRNGKey(0), state, act, p))(params)
    assert np.asarray(res.truncated).tolist() == [[True] * 3, [False] * 3]


@pytest.mark.parametrize("name,kwargs", ALL_ENVS, ids=[f"{n.split('/')[1]}-{i}" for i, (n, _) in enumerate(ALL_ENVS)])
def test_jit_vmap_256_envs(name, kwargs):
    env = wrap_for_training(registry.make(name, **kwargs))
    n_envs = 256

    @jax.jit
    def rollout(key):
        k_reset, k_run = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, n_envs))

        def body(state, key):
            k_act, k_step = jax.random.split(key)
            act = _random_actions(env, k_act, n_envs)
            res = jax.vmap(env.step)(jax.random.split(k_step, n_envs), state, act)
            return res.state, (res.obs, res.reward, res.info["returned_episode"], jax.vmap(env.world_state)(res.state))

        return jax.lax.scan(body, state, jax.random.split(k_run, 30))

    state, (obs, reward, done, ws) = rollout(jax.random.PRNGKey(0))
    u = env.unwrapped
    assert obs.shape == (30, n_envs, u.num_agents, u.observation_space.shape[0])
    assert reward.shape == (30, n_envs, u.num_agents) and ws.ndim == 3
    assert np.all(np.isfinite(obs)) and np.all(np.isfinite(reward)) and np.all(np.isfinite(ws))
    # every env finished exactly one episode, at step 25, and auto-reset
    assert np.asarray(done)[24].all() and np.asarray(done).sum() == n_envs
    assert np.all(np.asarray(state.episode_length) == 5)
    assert not np.any(np.asarray(obs)[:, :, ~np.asarray(u.obs_mask)])


def _mpe2_sizes(penv, continuous):
    obs = [penv.observation_space(a).shape[0] for a in penv.possible_agents]
    act = [penv.action_space(a).shape[0] if continuous else penv.action_space(a).n for a in penv.possible_agents]
    return tuple(obs), tuple(act)


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_masks_match_mpe2_spaces(name, continuous):
    env = SCENARIOS[name][0](continuous)
    obs_sizes, act_sizes = _mpe2_sizes(SCENARIOS[name][1](continuous), continuous)
    assert env.obs_sizes == obs_sizes and env.action_sizes == act_sizes
    assert env.observation_space.shape == (max(obs_sizes),)
    np.testing.assert_array_equal(np.asarray(env.obs_mask).sum(1), obs_sizes)
    np.testing.assert_array_equal(np.asarray(env.action_mask).sum(1), act_sizes)
    if continuous:
        assert isinstance(env.action_space, spaces.Box) and env.action_space.shape == (max(act_sizes),)
    else:
        assert isinstance(env.action_space, spaces.Discrete) and env.action_space.n == max(act_sizes)
