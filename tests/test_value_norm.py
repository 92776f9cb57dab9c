"""MAPPO's ValueNorm (algos/value_norm.py) against a brute-force recount, and in the LM trainer."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.algos import value_norm
from jaxmarl_llm.parallel import mesh as mesh_lib


def _batches():
    rng = np.random.default_rng(0)
    return [(rng.normal(mu, sd, (5, 8)).astype(np.float32), rng.random((5, 8)) < 0.7)
            for mu, sd in ((-25.0, 4.0), (-20.0, 6.0), (-12.0, 3.0))]


def test_statistics_equal_a_recount_of_the_debiased_averages():
    """After n batches: mean = sum_k w_k m_k / sum_k w_k with w_k = (1 - d) d^(n-k), m_k the masked batch mean
    (masked entries ignored); with d = 0.99999 that is the plain average of the batch means."""
    vn = value_norm.init()
    mean0, std0 = value_norm.stats(vn)
    assert float(mean0) == 0.0 and float(std0) == 1.0  # fresh: outputs taken as they are
    x0 = jnp.arange(3.0)
    np.testing.assert_array_equal(value_norm.denormalize(vn, x0), x0)
    means, sqs = [], []
    for x, m in _batches():
        vn = value_norm.update(vn, jnp.asarray(x), jnp.asarray(m))
        means.append(x[m].mean())
        sqs.append((x[m] ** 2).mean())
    d = value_norm.DECAY
    w = np.array([(1 - d) * d ** (len(means) - 1 - k) for k in range(len(means))])
    want_mean = (w * means).sum() / w.sum()
    want_std = np.sqrt((w * sqs).sum() / w.sum() - want_mean ** 2)
    mean, std = value_norm.stats(vn)
    np.testing.assert_allclose([float(mean), float(std)], [want_mean, want_std], rtol=1e-4)
    np.testing.assert_allclose(float(mean), np.mean(means), rtol=1e-4)
    x = jnp.asarray(_batches()[0][0])
    np.testing.assert_allclose(value_norm.denormalize(vn, value_norm.normalize(vn, x)), x, rtol=1e-5)
    np.testing.assert_allclose(float(value_norm.normalize(vn, mean)), 0.0, atol=1e-5)


def test_variance_floor():
    """Equal targets: the std is floored at sqrt(MIN_VAR), not 0 (no division by zero)."""
    vn = value_norm.update(value_norm.init(), jnp.full((4,), -3.0), jnp.ones((4,), bool))
    mean, std = value_norm.stats(vn)
    np.testing.assert_allclose([float(mean), float(std)], [-3.0, np.sqrt(value_norm.MIN_VAR)], rtol=1e-4)


def test_eight_devices_equal_one():
    """The statistics are summed over the data axis: 8 devices holding a slice each == 1 device holding all."""
    x, m = _batches()[1]
    x, m = np.tile(x, (8, 1)), np.tile(m, (8, 1))
    one = value_norm.update(value_norm.init(), jnp.asarray(x), jnp.asarray(m))
    mesh = mesh_lib.make_mesh(8)
    fn = mesh_lib.shard_over_data(lambda xs, ms: value_norm.update(value_norm.init(), xs, ms, axis_name="data"),
                                  mesh, (P("data"), P("data")), P())
    eight = jax.jit(fn)(jnp.asarray(x), jnp.asarray(m))
    for a, b in zip(one, eight):
        np.testing.assert_allclose(float(a), float(b), rtol=1e-6)
