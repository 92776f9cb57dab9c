"""GAE and the PPO loss against hand-computed values and a direct numpy implementation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.algos.gae import gae
from jaxmarl_llm.algos.ppo import PPOCoefs, normalize, ppo_loss, shard_mean

REWARDS = jnp.array([1.0, 2.0, 3.0])
VALUES = jnp.array([0.5, 1.0, 1.5])
NEXT_VALUES = jnp.array([1.0, 1.5, 2.0])


def test_gae_terminal_step_has_no_future():
    term = jnp.array([False, False, True])
    adv, ret = gae(REWARDS, VALUES, NEXT_VALUES, term, term, gamma=0.9, lam=0.8)
    # delta = [1.4, 2.35, 1.5]; A2 = 1.5, A1 = 2.35 + .72 * 1.5, A0 = 1.4 + .72 * A1
    np.testing.assert_allclose(adv, [3.8696, 3.43, 1.5], rtol=1e-6)
    np.testing.assert_allclose(ret, np.asarray(adv) + np.asarray(VALUES), rtol=1e-6)


def test_gae_truncation_bootstraps_but_stops_the_recursion():
    term = jnp.array([False, False, False])
    end = jnp.array([False, True, False])
    adv, _ = gae(REWARDS, VALUES, NEXT_VALUES, term, end, gamma=0.9, lam=0.8)
    # step 1 is truncated: delta keeps gamma * V(final obs) = 2.35; A1 does not see step 2.
    np.testing.assert_allclose(adv, [1.4 + 0.72 * 2.35, 2.35, 3.3], rtol=1e-6)


def test_gae_batched_over_agents_matches_per_column():
    rng = np.random.default_rng(0)
    r, v, nv = (jnp.asarray(rng.normal(size=(7, 3)), jnp.float32) for _ in range(3))
    term = jnp.asarray(rng.random((7, 3)) < 0.2)
    adv, _ = gae(r, v, nv, term, term, 0.99, 0.95)
    for a in range(3):
        col, _ = gae(r[:, a], v[:, a], nv[:, a], term[:, a], term[:, a], 0.99, 0.95)
        np.testing.assert_allclose(adv[:, a], col, rtol=1e-5)


def _numpy_ppo(logp, old_logp, adv, v, old_v, ret, ent, clip, vf, ec, mask):
    m = mask.astype(np.float64)
    mean = lambda x: (x * m).sum() / m.sum()  # noqa: E731
    a = (adv - mean(adv)) / (np.sqrt(mean((adv - mean(adv)) ** 2)) + 1e-8)
    ratio = np.exp(logp - old_logp)
    actor = -mean(np.minimum(ratio * a, np.clip(ratio, 1 - clip, 1 + clip) * a))
    vc = old_v + np.clip(v - old_v, -clip, clip)
    value = 0.5 * mean(np.maximum((v - ret) ** 2, (vc - ret) ** 2))
    return actor + vf * value - ec * mean(ent), actor, value


def test_ppo_loss_matches_numpy_reference_with_mask():
    rng = np.random.default_rng(1)
    shape = (5, 4)
    arrays = [rng.normal(size=shape) * s for s in (0.3, 0.3, 1.0, 1.0, 1.0, 1.0, 0.5)]
    arrays[1] = arrays[0] + rng.normal(size=shape) * 0.4  # ratios spread beyond the clip range
    mask = rng.random(shape) < 0.7
    loss, metrics = ppo_loss(*(jnp.asarray(x, jnp.float32) for x in arrays), PPOCoefs(0.2, 0.5, 0.01), mask=jnp.asarray(mask))
    ref, actor, value = _numpy_ppo(*arrays, 0.2, 0.5, 0.01, mask)
    np.testing.assert_allclose(loss, ref, rtol=1e-4)
    np.testing.assert_allclose(metrics["actor_loss"], actor, rtol=1e-4)
    np.testing.assert_allclose(metrics["value_loss"], value, rtol=1e-4)
    assert 0.0 < float(metrics["clip_frac"]) < 1.0


def test_masked_out_samples_do_not_change_the_loss():
    rng = np.random.default_rng(2)
    arrays = [jnp.asarray(rng.normal(size=(6,)), jnp.float32) for _ in range(7)]
    mask = jnp.array([True, True, True, False, False, True])
    loss, _ = ppo_loss(*arrays, PPOCoefs(), mask=mask)
    garbage = [x.at[3:5].set(1e6) for x in arrays]
    loss2, _ = ppo_loss(*garbage, PPOCoefs(), mask=mask)
    np.testing.assert_allclose(loss, loss2, rtol=1e-6)


@pytest.mark.parametrize("mask", [None, jnp.array([1, 0, 1, 1], bool)])
def test_normalize_has_zero_mean_unit_std(mask):
    x = jnp.array([1.0, 5.0, 2.0, 4.0])
    z = normalize(x, mask)
    np.testing.assert_allclose(shard_mean(z, mask), 0.0, atol=1e-6)
    np.testing.assert_allclose(shard_mean(z**2, mask), 1.0, atol=1e-5)


def test_normalize_gives_zero_for_equal_advantages():
    # a tic-tac-toe batch where every move got the same advantage: its float32 mean misses the value by rounding
    # (var ~6e-14), and dividing by that std used to give -1 everywhere (a policy loss of ~1 from no signal)
    x = jnp.full((4, 9), -1.4534963)
    np.testing.assert_array_equal(normalize(x), 0.0)
    np.testing.assert_array_equal(normalize(x, jnp.arange(36).reshape(4, 9) % 2 == 0), 0.0)
    # a real spread, small next to the mean (7e-4 of it, above FLAT_SPREAD), is still normalised
    y = x.at[0, 0].add(1e-3)
    z = normalize(y)
    np.testing.assert_allclose(jnp.mean(jnp.square(z)), 1.0, rtol=1e-3)


def test_own_turn_gae_credits_others_moves_to_the_last_own_turn():
    """Agent acts at turns 0 and 2; rewards at 1 and 3 (others' moves) join its previous own turn."""
    from jaxmarl_llm.algos.gae import gae, own_turn_gae

    r = jnp.array([1.0, 2.0, 3.0, 4.0])
    v = jnp.array([0.5, 9.0, 0.25, 9.0])  # values at turns it did not act are ignored
    acted = jnp.array([True, False, True, False])
    adv, ret = own_turn_gae(r, v, acted, 0.9, 0.8)
    d2 = (3.0 + 4.0) - 0.25  # last own turn: no future
    d0 = (1.0 + 2.0) + 0.9 * 0.25 - 0.5
    np.testing.assert_allclose(np.asarray(adv), [d0 + 0.9 * 0.8 * d2, 0.0, d2, 0.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ret), [d0 + 0.9 * 0.8 * d2 + 0.5, 0.0, d2 + 0.25, 0.0], rtol=1e-6)
    # acting every turn of an episode that ends at the last turn: plain GAE
    every = jnp.ones(4, bool)
    nv = jnp.concatenate([v[1:], jnp.zeros(1)])
    end = jnp.array([False, False, False, True])
    np.testing.assert_allclose(np.asarray(own_turn_gae(r, v, every, 0.9, 0.8)[0]),
                               np.asarray(gae(r, v, nv, end, end, 0.9, 0.8)[0]), rtol=1e-6)


def test_own_turn_token_gae_chains_the_seats_tokens():
    """Token-level credit: the same game as above with 2-token turns (the second turn writes one token).

    Tokens in order: t0a, t0b (turn 0), t2a (turn 2). The credited rewards (1+2 on turn 0, 3+4 on turn 2) sit on
    each turn's last real token; the value of each token is the value of the context it was chosen in."""
    from jaxmarl_llm.algos.gae import own_turn_gae
    from jaxmarl_llm.algos.token_credit import credit_to_own_turns, own_turn_token_gae

    r = jnp.array([1.0, 2.0, 3.0, 4.0])
    acted = jnp.array([True, False, True, False])
    np.testing.assert_allclose(np.asarray(credit_to_own_turns(r, acted)), [3.0, 0.0, 7.0, 0.0])
    mask = jnp.array([[True, True], [False, False], [True, False], [False, False]])
    v = jnp.array([[0.5, 0.1], [9.0, 9.0], [0.25, 9.0], [9.0, 9.0]])  # masked values are ignored
    g, lam = 0.9, 0.8
    adv, ret = own_turn_token_gae(r, v, mask, g, lam)
    d_last = 7.0 - 0.25  # t2a: the seat's last token, no future
    d_b = 3.0 + g * 0.25 - 0.1  # t0b: turn 0's reward, then the next token's value
    d_a = 0.0 + g * 0.1 - 0.5  # t0a: no reward inside the turn
    a_b = d_b + g * lam * d_last
    a_a = d_a + g * lam * a_b
    np.testing.assert_allclose(np.asarray(adv), [[a_a, a_b], [0, 0], [d_last, 0], [0, 0]], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ret), np.where(mask, np.asarray(adv) + np.asarray(v), 0.0), rtol=1e-5)
    # a part of turn 0's reward paid to its first token (an env's info["token_reward"]): 0.5 of the 3 on t0a,
    # the rest on t0b; a token reward on a token the seat did not write (masked) is ignored
    paid = jnp.zeros((4, 2)).at[0, 0].set(0.5).at[1, 0].set(9.0)
    adv2, _ = own_turn_token_gae(r, v, mask, g, lam, paid)
    d_b2 = 2.5 + g * 0.25 - 0.1
    d_a2 = 0.5 + g * 0.1 - 0.5
    a_b2 = d_b2 + g * lam * d_last
    np.testing.assert_allclose(np.asarray(adv2)[0], [d_a2 + g * lam * a_b2, a_b2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(adv2)[2], np.asarray(adv)[2], atol=1e-6)
    # gamma between turns only: t0a -> t0b undiscounted, t0b -> t2a discounted
    adv3, _ = own_turn_token_gae(r, v, mask, g, lam, None, gamma_per_turn=True)
    a_a3 = (0.0 + 1.0 * 0.1 - 0.5) + 1.0 * lam * a_b
    np.testing.assert_allclose(np.asarray(adv3), [[a_a3, a_b], [0, 0], [d_last, 0], [0, 0]], rtol=1e-5, atol=1e-6)
    # gamma 0 between turns: a reply's tokens share its reward, the next turn's is not theirs
    adv0, _ = own_turn_token_gae(r, jnp.zeros_like(v), mask, 0.0, 1.0, None, gamma_per_turn=True)
    np.testing.assert_allclose(np.asarray(adv0), [[3.0, 3.0], [0, 0], [7.0, 0], [0, 0]], atol=1e-6)
    # one token per turn: exactly the turn-level own-turn GAE
    key = jax.random.PRNGKey(0)
    rr, vv = jax.random.normal(key, (6, 5)), jax.random.normal(jax.random.fold_in(key, 1), (6, 5))
    aa = jax.random.bernoulli(jax.random.fold_in(key, 2), 0.6, (6, 5))
    ref = own_turn_gae(rr, vv, aa, g, lam)
    for per_turn in (False, True):
        got = own_turn_token_gae(rr, vv[..., None], aa[..., None], g, lam, gamma_per_turn=per_turn)
        for x, y in zip(ref, got):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y[..., 0]), atol=1e-5)
