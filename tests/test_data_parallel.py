"""One update on 8 host devices equals one update on 1 device (same envs, same seed)."""

import jax
import numpy as np
import pytest

from configs import spread_mlp
from jaxmarl_llm.parallel import mesh as mesh_lib
from jaxmarl_llm.train import mlp_ppo


def _one_update(config, num_devices):
    trainer = mlp_ppo.make_train(config)
    mesh = mesh_lib.make_mesh(num_devices)
    state = trainer.init(jax.random.PRNGKey(3), trainer.hparams)
    state = mesh_lib.put(state, mesh, trainer.state_specs)
    state, metrics = mesh_lib.sharded_chunk(trainer, mesh, 2)(state, trainer.hparams)
    return jax.device_get(state), jax.device_get(metrics)


@pytest.mark.parametrize("algo,shared", [("ippo", True), ("mappo", False)])
def test_eight_devices_match_one(algo, shared):
    if len(jax.devices()) < 8:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 (set by conftest)")
    config = spread_mlp.get_config()
    config.num_envs, config.num_steps, config.critic.kind, config.share_params = 16, 32, algo, shared
    one_state, one_metrics = _one_update(config, 1)
    eight_state, eight_metrics = _one_update(config, 8)
    for a, b in zip(jax.tree.leaves(one_state.params), jax.tree.leaves(eight_state.params)):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(one_state.obs, eight_state.obs, atol=1e-6)
    np.testing.assert_allclose(one_metrics["team_return"], eight_metrics["team_return"], rtol=1e-5)
    # The update really moved the parameters (so equality above is not trivial).
    init = mlp_ppo.make_train(config).init(jax.random.PRNGKey(3), mlp_ppo.make_train(config).hparams)
    moved = max(float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(init.params), jax.tree.leaves(one_state.params)))
    assert moved > 1e-4
