"""LM losses and advantages (kl, token credit, GRPO, RLOO, MAGRPO, SFT, DPO) against hand-computed values.

Also: brute-force loops for token GAE, gradient directions,
mask invariance (inf / nan garbage at masked positions changes nothing), and the
shard-share convention (two halves under `vmap(axis_name="data")` sum to the whole).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxmarl_llm.algos import dpo, grpo, kl, magrpo, masked, rloo, sft, token_credit

EPS = 1e-4  # group_advantages default

# Jitted once per test shape: one compile is much cheaper than eager per-op dispatch on a busy 2-core box.
token_gae = jax.jit(token_credit.token_gae)
group_advantages = jax.jit(grpo.group_advantages, static_argnames=("normalize_std", "eps", "ddof"))
sft_loss = jax.jit(sft.sft_loss, static_argnames=("aggregation", "axis_name"))


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ----------------------------------------------------------------------------- kl


def test_kl_estimators_hand_values():
    logp, ref = jnp.array([-1.0, -2.0]), jnp.array([-1.5, -1.0])
    close(kl.kl_k1(logp, ref), [0.5, -1.0])
    close(kl.kl_k2(logp, ref), [0.125, 0.5])
    # d = ref - logp = [-0.5, 1]: exp(d) - d - 1
    close(kl.kl_k3(logp, ref), [math.exp(-0.5) - 0.5, math.e - 2.0])
    close(kl.kl_estimate(logp, ref, "k3"), kl.kl_k3(logp, ref))
    with pytest.raises(ValueError):
        kl.kl_estimate(logp, ref, "k4")


def test_k1_and_k3_are_unbiased_under_the_policy():
    # Exact expectation over a categorical: E_p[k] = sum_x p(x) k(log p(x), log q(x)) = KL(p || q).
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.2, 0.6])
    true_kl = float(np.sum(p * np.log(p / q)))
    lp, lq = jnp.log(p), jnp.log(q)
    close(jnp.sum(p * kl.kl_k1(lp, lq)), true_kl)
    close(jnp.sum(p * kl.kl_k3(lp, lq)), true_kl)
    assert float(jnp.sum(p * kl.kl_k2(lp, lq))) != pytest.approx(true_kl, rel=1e-3)  # k2 is biased


def test_masked_kl_reductions_and_penalized_rewards():
    logp = jnp.array([[-1.0, -2.0, 7.0], [-0.5, 9.0, 9.0], [3.0, 3.0, 3.0]])
    ref = jnp.array([[-1.5, -1.0, jnp.nan], [-0.5, jnp.inf, 1.0], [jnp.nan, 0.0, 0.0]])
    mask = jnp.array([[1, 1, 0], [1, 0, 0], [0, 0, 0]], bool)  # row 2: an inactive agent
    # k1 per token: [[0.5, -1, .], [0, ., .], [., ., .]]
    close(kl.masked_kl(logp, ref, mask, "k1"), [[0.5, -1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    close(kl.sequence_kl(logp, ref, mask, "k1"), [-0.5, 0.0, 0.0])
    close(kl.mean_kl(logp, ref, mask, "k1"), -0.5 / 3)  # token mean
    close(kl.mean_kl(logp, ref, mask, "k1", how="sequence"), (-0.25 + 0.0) / 2)  # the empty row does not count
    close(kl.mean_kl(logp, ref, mask, "k1", how="sequence_sum"), (-0.5 + 0.0) / 2)
    close(kl.mean_kl(logp, ref, mask, "k3", how="constant"), ((math.exp(-0.5) - 0.5 + math.e - 2.0) / 3 + 0.0) / 2)
    rewards = jnp.array([[0.0, 1.0, 5.0], [2.0, 5.0, 5.0], [1.0, 1.0, 1.0]])
    close(kl.kl_penalized_rewards(rewards, logp, ref, mask, kl_coef=0.1, kind="k1"),
          [[-0.05, 1.1, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    g = jax.grad(lambda lp: kl.kl_penalized_rewards(rewards, lp, ref, mask, 0.1).sum())(logp)
    close(g, np.zeros((3, 3)))  # a reward: no gradient through the penalty


# ----------------------------------------------------------------------------- token credit


def test_place_turn_reward_on_last_real_token():
    mask = jnp.array([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 0, 1]], bool)
    r = jnp.array([1.0, 2.0, 3.0, 4.0])
    close(token_credit.place_turn_reward(r, mask), [[0, 1, 0], [2, 0, 0], [0, 0, 0], [0, 0, 4]])
    # turns [B, T, M] with turn rewards [B, T]
    mask3 = jnp.array([[[1, 1, 0], [1, 1, 1]]], bool)
    close(token_credit.place_turn_reward(jnp.array([[5.0, 6.0]]), mask3), [[[0, 5, 0], [0, 0, 6]]])


def test_token_gae_hand_values():
    rewards = jnp.array([[0.0, 0.0, 1.0, 9.0]])
    values = jnp.array([[0.5, 0.6, 0.7, 9.0]])
    mask = jnp.array([[1, 1, 1, 0]], bool)
    # bootstrap 0: deltas [0 + .9*.6 - .5, .9*.7 - .6, 1 - .7] = [.04, .03, .3]; gamma*lam = .72
    adv, ret = token_gae(rewards, values, mask, None, gamma=0.9, lam=0.8)
    close(adv, [[0.04 + 0.72 * (0.03 + 0.72 * 0.3), 0.03 + 0.72 * 0.3, 0.3, 0.0]])
    close(ret, [[0.21712 + 0.5, 0.246 + 0.6, 1.0, 0.0]])
    # bootstrap 1: last delta = 1 + .9 - .7 = 1.2
    adv, _ = token_gae(rewards, values, mask, jnp.array([1.0]), gamma=0.9, lam=0.8)
    close(adv, [[0.04 + 0.72 * (0.03 + 0.72 * 1.2), 0.03 + 0.72 * 1.2, 1.2, 0.0]])
    # gamma = lam = 1 and zero values: every real token's advantage is the turn reward
    adv, _ = token_gae(token_credit.place_turn_reward(jnp.array([2.0]), mask), jnp.zeros((1, 4)), mask)
    close(adv, [[2.0, 2.0, 2.0, 0.0]])


def _brute_token_gae(r, v, m, boot, dones, gamma, lam):
    adv = np.zeros_like(r)
    for b in range(r.shape[0]):
        idx = [t for t in range(r.shape[1]) if m[b, t]]
        carry = 0.0
        for k in reversed(range(len(idx))):
            t = idx[k]
            if dones[b, t]:
                nv, carry = 0.0, 0.0
            else:
                nv = v[b, idx[k + 1]] if k + 1 < len(idx) else boot[b]
            adv[b, t] = r[b, t] + gamma * nv - v[b, t] + gamma * lam * carry
            carry = adv[b, t]
    return adv


def test_token_gae_chained_turns_matches_loop():
    rng = np.random.default_rng(0)
    b, t, m = 3, 4, 5
    lengths = rng.integers(0, m + 1, size=(b, t))
    mask = np.arange(m)[None, None, :] < lengths[..., None]  # [B, T, M] prefix masks, some turns empty
    mask[0, 1] = [True, False, True, False, True]  # a mask with holes still chains
    turn_r = rng.normal(size=(b, t))
    turn_done = np.zeros((b, t), bool)
    turn_done[1, 1] = True
    rewards = np.asarray(token_credit.place_turn_reward(jnp.asarray(turn_r), jnp.asarray(mask)))
    dones = np.asarray(token_credit.last_token_mask(jnp.asarray(mask))) & turn_done[..., None]
    values = rng.normal(size=(b, t, m))
    boot = rng.normal(size=(b,))
    flat = lambda x: x.reshape(b, t * m)  # noqa: E731
    adv, ret = token_gae(jnp.asarray(flat(rewards)), jnp.asarray(flat(values)), jnp.asarray(flat(mask)),
                                      jnp.asarray(boot), 0.95, 0.9, jnp.asarray(flat(dones)))
    ref = _brute_token_gae(flat(rewards), flat(values), flat(mask), boot, flat(dones), 0.95, 0.9)
    close(adv, ref)
    close(ret, np.where(flat(mask), ref + flat(values), 0.0))


def test_token_gae_ignores_garbage_in_masked_tokens():
    mask = jnp.array([[1, 0, 1, 1, 0]], bool)
    r, v = jnp.array([[0.1, 0.2, 0.3, 1.0, 0.0]]), jnp.array([[0.4, 0.3, 0.2, 0.1, 0.0]])
    adv, _ = token_gae(r, v, mask, jnp.array([0.5]), 0.9, 0.95)
    bad = jnp.array([[0.0, jnp.nan, 0.0, 0.0, jnp.inf]])
    adv2, _ = token_gae(r + bad, v - bad, mask, jnp.array([0.5]), 0.9, 0.95)
    close(adv, adv2)


def _token_batch(seed, shape=(4, 5)):
    rng = np.random.default_rng(seed)
    f = lambda s=0.3: jnp.asarray(rng.normal(size=shape) * s, jnp.float32)  # noqa: E731
    logp = f() - 1.0
    batch = {
        "log_prob": logp,
        "old_log_prob": logp + f(0.3),
        "ref_log_prob": logp + f(0.5),
        "advantages": f(1.0),
        "values": f(1.0),
        "old_values": f(1.0),
        "returns": f(1.0),
        "entropy": jnp.abs(f(1.0)),
    }
    lengths = np.array([5, 3, 0, 2])[: shape[0]]
    mask = jnp.asarray(np.arange(shape[1])[None, :] < lengths[:, None])
    return batch, mask


# ----------------------------------------------------------------------------- grpo / rloo

REWARDS_2x3 = jnp.array([[1.0, 0.0, 0.0], [1.0, 2.0, 3.0]])


def test_group_advantages_2x3_hand_values():
    # group 0: mean 1/3, deviations [2/3, -1/3, -1/3], unbiased var = (4/9 + 1/9 + 1/9) / 2 = 1/3
    # group 1: mean 2, deviations [-1, 0, 1], unbiased var = 2 / 2 = 1
    s0 = math.sqrt(1 / 3)
    adv = group_advantages(REWARDS_2x3)
    close(adv, [[(2 / 3) / (s0 + EPS), (-1 / 3) / (s0 + EPS), (-1 / 3) / (s0 + EPS)],
                [-1 / (1 + EPS), 0.0, 1 / (1 + EPS)]])
    close(grpo.dr_grpo_advantages(REWARDS_2x3), [[2 / 3, -1 / 3, -1 / 3], [-1.0, 0.0, 1.0]])
    # population std (ddof=0): group 1 std = sqrt(2/3)
    close(group_advantages(REWARDS_2x3, ddof=0)[1], np.array([-1.0, 0.0, 1.0]) / (math.sqrt(2 / 3) + EPS))
    # identical rewards and single samples give 0, not nan
    close(group_advantages(jnp.array([[2.0, 2.0, 2.0]])), [[0.0, 0.0, 0.0]])
    # a masked-out sample is neither counted nor credited: [1, 2, 3, x] == [1, 2, 3]
    adv = group_advantages(jnp.array([[1.0, 2.0, 3.0, 1e9]]), jnp.array([[1, 1, 1, 0]], bool))
    close(adv, [[-1 / (1 + EPS), 0.0, 1 / (1 + EPS), 0.0]])


# Two rows, two tokens; logp - old = log ratio; row 1's second token is padding.
RATIO = np.array([[1.5, 0.5], [1.1, 1.0]])
GRPO_MASK = jnp.array([[1, 1], [1, 0]], bool)
GRPO_ADV = jnp.array([1.0, -1.0])


def _grpo_inputs():
    old = jnp.array([[-1.0, -2.0], [-0.5, -3.0]])
    return old + jnp.log(RATIO), old


@pytest.mark.parametrize("aggregation,expected", [
    # per-token losses -min(ratio * A, clip(ratio, .8, 1.2) * A): row 0 [-1.2, -0.5]; row 1 [1.1]
    ("token", (-1.2 - 0.5 + 1.1) / 3),
    ("sequence", ((-1.2 - 0.5) / 2 + 1.1) / 2),
    ("sequence_sum", ((-1.2 - 0.5) + 1.1) / 2),
    ("constant", ((-1.2 - 0.5) / 4 + 1.1 / 4) / 2),  # max_len = 4
])
def test_grpo_loss_hand_values(aggregation, expected):
    logp, old = _grpo_inputs()
    loss, metrics = grpo.grpo_loss(logp, old, GRPO_ADV, GRPO_MASK, aggregation=aggregation, max_len=4)
    close(loss, expected)
    close(metrics["policy_loss"], expected)
    close(metrics["clip_frac"], 2 / 3)  # 1.5 and 0.5 are outside [0.8, 1.2]


def test_grpo_clip_higher_kl_term_and_dr_grpo():
    logp, old = _grpo_inputs()
    loss, _ = grpo.grpo_loss(logp, old, GRPO_ADV, GRPO_MASK, clip_eps_high=0.6, aggregation="token")
    close(loss, (-1.5 - 0.5 + 1.1) / 3)  # 1.5 is inside [0.8, 1.6] now
    ref = logp + jnp.array([[0.5, -1.0], [0.2, 0.0]])  # d = ref - logp
    k3 = np.array([[math.exp(0.5) - 1.5, math.exp(-1.0)], [math.exp(0.2) - 1.2, 0.0]])
    loss, metrics = grpo.grpo_loss(logp, old, GRPO_ADV, GRPO_MASK, ref, kl_coef=0.1, aggregation="token")
    close(loss, (-1.2 - 0.5 + 1.1 + 0.1 * k3.sum()) / 3)
    close(metrics["kl"], k3.sum() / 3)


def test_grpo_gradient_raises_log_prob_of_positive_advantage():
    logp = jnp.array([[-1.0, -2.0], [-0.5, -3.0]])
    g = jax.grad(lambda lp: grpo.grpo_loss(lp, jax.lax.stop_gradient(lp), GRPO_ADV, GRPO_MASK)[0])(logp)
    # ratio = 1 at the sampling policy: d loss / d logp = -A / (#rows * row length)
    close(g, [[-1 / 4, -1 / 4], [1 / 2, 0.0]])


def test_rloo_advantages_and_loss_hand_values():
    # group 0: [1 - 0, 0 - .5, 0 - .5]; group 1: [1 - 2.5, 2 - 2, 3 - 1.5]
    adv = rloo.rloo_advantages(REWARDS_2x3)
    close(adv, [[1.0, -0.5, -0.5], [-1.5, 0.0, 1.5]])
    close(adv, 3 / 2 * grpo.dr_grpo_advantages(REWARDS_2x3))  # G / (G - 1) * (r - mean)
    adv = rloo.rloo_advantages(jnp.array([[1.0, 2.0, 3.0, 1e9], [4.0, 0.0, 0.0, 0.0]]),
                               jnp.array([[1, 1, 1, 0], [1, 0, 0, 0]], bool))
    close(adv, [[-1.5, 0.0, 1.5, 0.0], [0.0, 0.0, 0.0, 0.0]])  # one valid sample: no baseline, no signal
    logp = jnp.array([[-1.0, -2.0], [-0.5, 99.0]])
    loss, _ = rloo.rloo_loss(logp, jnp.array([1.0, -1.0]), GRPO_MASK)
    close(loss, ((1.0 + 2.0) + (-0.5)) / 2)  # mean over samples of -A * log p(y)
    g = jax.grad(lambda lp: rloo.rloo_loss(lp, jnp.array([1.0, -1.0]), GRPO_MASK)[0])(logp)
    close(g, [[-0.5, -0.5], [0.5, 0.0]])


# ----------------------------------------------------------------------------- magrpo


def test_magrpo_aligned_broadcasts_the_group_advantage():
    adv = magrpo.aligned_advantages(REWARDS_2x3, num_agents=3)
    assert adv.shape == (3, 2, 3)
    for a in range(3):
        close(adv[a], group_advantages(REWARDS_2x3))




# ----------------------------------------------------------------------------- sft


def test_sft_loss_hand_values_and_garbage():
    # logits[t] predicts tokens[t + 1]; targets are tokens 1 and 2.
    logits = jnp.array([[[0.0, 0.0, 0.0], [0.0, math.log(2.0), 0.0], [jnp.nan, jnp.inf, 0.0]]])
    tokens = jnp.array([[2, 2, 1]])
    mask = jnp.array([[0, 1, 1]], bool)
    loss, metrics = sft_loss(logits, tokens, mask)
    # token 1 (=2) under uniform: log 3; token 2 (=1) under p = [.25, .5, .25]: log 2
    close(loss, (math.log(3) + math.log(2)) / 2)
    close(metrics["nll"], (math.log(3) + math.log(2)) / 2)
    close(metrics["accuracy"], 0.5)  # argmax of uniform is 0 != 2; argmax [1, 2, 1] is 1 == 1
    close(sft.token_log_probs(logits, tokens, mask), [[0.0, -math.log(3), -math.log(2)]])
    # only target 2 counts: the prompt's garbage logits change nothing
    loss2, _ = sft_loss(logits.at[0, 0].set(jnp.nan), tokens.at[0, 1].set(10**6), jnp.array([[0, 0, 1]], bool))
    close(loss2, math.log(2))
    g = jax.grad(lambda lg: sft_loss(lg, tokens, jnp.array([[0, 0, 1]], bool))[0])(logits.at[0, 0].set(jnp.nan))
    assert np.all(np.isfinite(g)) and float(jnp.abs(g[0, 0]).sum()) == 0.0


def test_sft_loss_matches_optax_cross_entropy():
    rng = np.random.default_rng(4)
    logits = jnp.asarray(rng.normal(size=(3, 6, 11)), jnp.float32)
    tokens = jnp.asarray(rng.integers(0, 11, size=(3, 6)))
    mask = jnp.asarray(rng.random((3, 6)) < 0.6).at[:, 1].set(True)
    ce = jax.jit(optax.softmax_cross_entropy_with_integer_labels)(logits[:, :-1], tokens[:, 1:])
    m = np.asarray(mask[:, 1:])
    loss, _ = sft_loss(logits, tokens, mask)
    close(loss, np.asarray(ce)[m].mean())
    loss, _ = sft_loss(logits, tokens, mask, aggregation="sequence")
    close(loss, np.mean([np.asarray(ce)[b][m[b]].mean() for b in range(3)]))


def test_select_transcripts():
    r = jnp.array([[1.0, 3.0, 2.0, 3.0]])
    sel = lambda **kw: np.asarray(sft.select_transcripts(r, **kw)).tolist()  # noqa: E731
    assert sel(top_k=2) == [[False, True, False, True]]
    assert sel(threshold=2.0) == [[False, True, True, True]]
    assert sel(top_k=1, threshold=2.0) == [[False, True, False, False]]
    assert sel(top_k=2, valid=jnp.array([[1, 0, 1, 1]], bool)) == [[False, False, True, True]]
    assert np.asarray(sft.select_transcripts(jnp.ones((2, 3)), top_k=2)).tolist() == [[True, True, False]] * 2
    keep = jax.jit(sft.select_transcripts, static_argnames="top_k")(r, top_k=3, threshold=1.5)
    assert np.asarray(keep).tolist() == [[False, True, True, True]]


# ----------------------------------------------------------------------------- dpo


def test_dpo_hand_values_and_variants():
    pc, pr, rc, rr = (jnp.array([x]) for x in (-1.0, -2.0, -1.5, -1.5))
    # h = (pc - rc) - (pr - rr) = 0.5 + 0.5 = 1; beta h = 0.1
    loss, m = dpo.dpo_loss(pc, pr, rc, rr, beta=0.1)
    close(loss, math.log1p(math.exp(-0.1)))
    close(m["chosen_reward"], 0.05)
    close(m["rejected_reward"], -0.05)
    close(m["reward_margin"], 0.1)
    close(m["accuracy"], 1.0)
    loss, _ = dpo.dpo_loss(pc, pr, rc, rr, beta=0.1, label_smoothing=0.2)
    close(loss, 0.8 * math.log1p(math.exp(-0.1)) + 0.2 * math.log1p(math.exp(0.1)))
    loss, _ = dpo.dpo_loss(pc, pr, rc, rr, beta=0.1, loss_type="ipo")
    close(loss, (1.0 - 5.0) ** 2)
    # a second pair the policy gets wrong (h = -1), and a masked garbage pair
    two = lambda a, b, c: jnp.array([a, b, c])  # noqa: E731
    loss, m = dpo.dpo_loss(two(-1.0, -2.0, jnp.nan), two(-2.0, -1.0, jnp.inf), two(-1.5, -1.5, 0.0),
                           two(-1.5, -1.5, 0.0), beta=0.1, mask=jnp.array([True, True, False]))
    close(loss, (math.log1p(math.exp(-0.1)) + math.log1p(math.exp(0.1))) / 2)
    close(m["accuracy"], 0.5)
    close(m["reward_margin"], 0.0)
    seq = dpo.sequence_log_prob(jnp.array([[-1.0, -2.0, 5.0]]), jnp.array([[1, 1, 0]], bool))
    close(seq, [-3.0])
    close(dpo.sequence_log_prob(jnp.array([[-1.0, -2.0, 5.0]]), jnp.array([[1, 1, 0]], bool), average=True), [-1.5])


def test_dpo_gradient_raises_chosen_and_lowers_rejected():
    args = [jnp.array([-1.0, -3.0]), jnp.array([-2.0, -1.0]), jnp.array([-1.5, -2.0]), jnp.array([-1.5, -2.0])]
    grads = jax.grad(lambda *a: dpo.dpo_loss(*a, beta=0.5)[0], argnums=(0, 1, 2, 3))(*args)
    assert np.all(np.asarray(grads[0]) < 0) and np.all(np.asarray(grads[1]) > 0)  # descent: chosen up, rejected down
    close(grads[2], [0.0, 0.0])  # the reference is frozen
    # d/dpc of -log sigmoid(beta h) = -beta * sigmoid(-beta h) / B
    h = np.array([(-1.0 + 1.5) - (-2.0 + 1.5), (-3.0 + 2.0) - (-1.0 + 2.0)])
    close(grads[0], -0.5 / (1 + np.exp(0.5 * h)) / 2)


# ----------------------------------------------------------------------------- mask invariance and shards


def _losses():
    """name -> f(batch, mask, axis_name) -> (loss, metrics) over a token batch [B, M]."""
    seq_adv = lambda b: b["advantages"][:, 0]  # noqa: E731
    out = {
        "rloo": lambda b, m, ax: rloo.rloo_loss(b["log_prob"], seq_adv(b), m, b["ref_log_prob"], kl_coef=0.1,
                                                axis_name=ax),
        "mean_kl": lambda b, m, ax: (kl.mean_kl(b["log_prob"], b["ref_log_prob"], m, axis_name=ax), {}),
        "dpo": lambda b, m, ax: dpo.dpo_loss(*(masked.sequence_sum(b[k], m) for k in
                                               ("log_prob", "old_log_prob", "ref_log_prob", "values")),
                                             beta=0.3, label_smoothing=0.1, mask=masked.row_mask(m), axis_name=ax),
    }
    for agg in ("token", "sequence", "sequence_sum", "constant"):
        out[f"grpo_{agg}"] = lambda b, m, ax, agg=agg: grpo.grpo_loss(
            b["log_prob"], b["old_log_prob"], seq_adv(b), m, b["ref_log_prob"], kl_coef=0.05, aggregation=agg,
            max_len=8, axis_name=ax)
    return out


def _sft_as_token_loss(b, m, ax):
    logits = jnp.stack([b["log_prob"], b["values"], b["returns"]], axis=-1) * 3.0  # [B, M, 3]
    tokens = (jnp.abs(b["advantages"]) * 10).astype(jnp.int32) % 3
    return sft.sft_loss(logits, tokens, m, axis_name=ax)


LOSSES = {**_losses(), "sft": _sft_as_token_loss}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_garbage_in_masked_tokens_changes_nothing(name):
    fn = LOSSES[name]
    batch, mask = _token_batch(5)
    if name == "sft":  # sft's logits at t predict t + 1: keep the logits rows the targets read
        mask = mask.at[:, 0].set(False)
        pred_rows = jnp.pad(mask[:, 1:], ((0, 0), (0, 1)))
        hide = ~(mask | pred_rows)
    else:
        hide = ~mask
    garbage = {k: jnp.where(hide, jnp.where(jnp.arange(5) % 2 == 0, jnp.nan, jnp.inf), v) for k, v in batch.items()}
    f = jax.jit(jax.value_and_grad(lambda b: fn(b, mask, None)[0]))
    loss, grads = f(batch)
    loss2, grads2 = f(garbage)
    assert np.isfinite(float(loss))
    close(loss, loss2)
    for k in batch:
        assert np.all(np.isfinite(np.asarray(grads2[k]))), k
        close(jnp.where(hide, 0.0, grads[k]), grads2[k])


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_shard_shares_sum_to_the_whole(name):
    fn = LOSSES[name]
    batch, mask = _token_batch(6)  # row 2 is empty: row counts must be global
    (loss, metrics), grads = jax.jit(jax.value_and_grad(lambda b: fn(b, mask, None), has_aux=True))(batch)

    def shard(b, m):
        (share, mets), g = jax.value_and_grad(lambda bb: fn(bb, m, "data"), has_aux=True)(b)
        return share, mets, g

    halves = jax.tree.map(lambda x: x.reshape(2, x.shape[0] // 2, *x.shape[1:]), (batch, mask))
    shares, share_metrics, share_grads = jax.jit(jax.vmap(shard, axis_name="data"))(*halves)
    close(shares.sum(), loss)
    for k, v in metrics.items():
        close(share_metrics[k].sum(), v)
    for k in grads:
        close(share_grads[k].reshape(grads[k].shape), grads[k])
