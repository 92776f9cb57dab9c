"""`config.entropy_tokens`: an entropy bonus that counts only some generated tokens (the digits of a free-text
move), so a bonus large enough to keep the choice exploring leaves the reply's format alone."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.algos.lm_objective import ALGORITHMS, Scored, entropy_only_at, lm_loss
from jaxmarl_llm.tokenizers import GAMES_BPE, HFTokenizer, WordTokenizer, digit_token_ids, token_set
from tiny_configs import tiny_lm_rl


def test_digit_tokens_are_the_ten_digits_of_the_games_bpe_and_whole_numbers_of_a_word_vocabulary():
    pytest.importorskip("transformers")
    bpe = HFTokenizer(GAMES_BPE)
    ids = digit_token_ids(bpe)
    assert sorted(bpe.decode([i]) for i in ids) == [str(d) for d in range(10)]
    assert [i for i in bpe.encode("Move: 1023") if i in ids] == [bpe.encode(d)[0] for d in "1023"]
    words = WordTokenizer(["move", "12", "x3", "7", ":"])  # its single characters come first, then the words
    assert [words.pieces[i] for i in digit_token_ids(words)] == [str(d) for d in range(10)] + ["12"]
    assert token_set("all", words) == ()


def _loss_pieces(seed=0, shape=(3, 2, 1, 5)):
    k = jax.random.split(jax.random.PRNGKey(seed), 4)
    token_mask = jax.random.bernoulli(k[0], 0.8, shape)
    entropy_mask = token_mask & jax.random.bernoulli(k[1], 0.4, shape)
    entropy = jax.random.uniform(k[2], shape, minval=0.0, maxval=2.0)
    return entropy, token_mask, entropy_mask


def test_reweighted_entropy_has_the_chosen_tokens_mean_under_every_policy_losss_mask():
    entropy, token_mask, entropy_mask = _loss_pieces()
    e, tm, em = (np.asarray(x) for x in (entropy, token_mask, entropy_mask))
    weighted = entropy_only_at(entropy, token_mask, entropy_mask, None)
    assert float((weighted * token_mask).sum() / token_mask.sum()) == pytest.approx(e[em].mean(), rel=1e-6)
    assert not np.any(np.asarray(weighted)[~em])
    assert e[em].mean() != pytest.approx(e[tm].mean(), rel=1e-3)  # the two means differ: the test can fail

    # split over a data axis of 3 shards: the shards' shares add up to the whole batch's mean over the chosen tokens
    shares = jax.vmap(lambda a, b, c: (entropy_only_at(a, b, c, "d") * b).sum() / jax.lax.psum(b.sum(), "d"),
                      axis_name="d")(entropy, token_mask, entropy_mask)
    assert float(shares.sum()) == pytest.approx(e[em].mean(), rel=1e-6)


def test_ppo_bonus_pulls_only_on_the_chosen_tokens_and_logs_both_entropies():
    entropy, token_mask, entropy_mask = _loss_pieces(seed=1)
    zeros = jnp.zeros(entropy.shape)

    class HP(NamedTuple):  # the LMHParams numbers lm_loss reads (it replaces ent_coef: entropy_max's cap)
        clip_eps: float = 0.2
        ent_coef: float = 0.1
        vf_coef: float = 0.5
        kl_coef: float = 0.0
        entropy_max: float = float("inf")

    def loss(ent, mask):
        s = Scored(zeros, ent, zeros[..., 0], zeros, zeros[..., 0], zeros[..., 0], zeros[..., 0], token_mask,
                   token_mask[..., 0], None, mask)
        return lm_loss(ALGORITHMS["ppo"], s, HP(), aggregation="token", kl_estimator="k3", clip_value=False,
                       axis_name=None)

    grad = np.asarray(jax.grad(lambda x: loss(x, entropy_mask)[0])(entropy))  # zero advantages: the bonus alone
    em = np.asarray(entropy_mask)
    np.testing.assert_allclose(grad[em], -HP().ent_coef / em.sum(), rtol=1e-6)
    assert not np.any(grad[~em])
    _, metrics = loss(entropy, entropy_mask)
    e = np.asarray(entropy)
    assert float(metrics["entropy"]) == pytest.approx(e[em].mean(), rel=1e-6)
    grad_all = np.asarray(jax.grad(lambda x: loss(x, None)[0])(entropy))  # the default: every generated token
    np.testing.assert_allclose(grad_all[np.asarray(token_mask)], -HP().ent_coef / token_mask.sum(), rtol=1e-6)


@pytest.mark.parametrize("temperature", [0.0, 1.0, 0.7])
def test_scored_entropy_is_the_choice_among_the_set_and_moves_nothing_out_of_it(temperature):
    """With entropy_ids, the entropy at a position is that of the distribution renormalised over the ids
    (numpy), and its gradient reaches no logit outside them: a bonus on it cannot make the reply's other tokens
    likelier. Without, it is the whole vocabulary's, whose gradient does reach them."""
    from jaxmarl_llm.policies.lm_policy import SamplingConfig, score_tokens

    logits = jax.random.normal(jax.random.PRNGKey(3), (4, 12)) * 3.0
    targets, hidden = jnp.array([1, 5, 2, 7]), jnp.zeros((4, 2))
    ids = (1, 2, 5, 7)
    sampling = SamplingConfig(temperature=temperature)
    ent_of = lambda x, chosen: score_tokens(sampling, x, targets, hidden, None, chosen)[1]  # noqa: E731
    z = np.asarray(logits, np.float64) / (temperature or 1.0)
    sub = z[:, ids] - z[:, ids].max(-1, keepdims=True)
    q = np.exp(sub) / np.exp(sub).sum(-1, keepdims=True)
    np.testing.assert_allclose(ent_of(logits, ids), -(q * np.log(q)).sum(-1), rtol=1e-5)
    others = np.setdiff1d(np.arange(12), ids)
    grad = np.asarray(jax.grad(lambda x: ent_of(x, ids).sum())(logits))
    assert not np.any(grad[:, others]) and np.all(np.abs(grad[:, list(ids)]).sum(-1) > 0)
    grad_full = np.asarray(jax.grad(lambda x: ent_of(x, ()).sum())(logits))
    assert np.all(np.abs(grad_full[:, others]).sum(-1) > 0)
    # the log-probs the ratio reads stay the whole vocabulary's
    np.testing.assert_array_equal(score_tokens(sampling, logits, targets, hidden, None, ids)[0],
                                  score_tokens(sampling, logits, targets, hidden, None, ())[0])


def _free_ttt(**fields):
    return tiny_lm_rl("text/tic_tac_toe", GAMES_BPE, {"capacity": 40, "max_action_tokens": 8, "board": "grid",
                                                      "history": False},
                      model={"max_position_embeddings": 64}, policy={"actions": "free"}, num_envs=32,
                      num_turns=9, scripted_agents="1:random", ent_coef=0.1, **fields)


def test_free_text_updates_with_a_digits_only_bonus():
    """Two updates of free-text tic-tac-toe from a random tiny model, the bonus on the move's digits: the plan and
    the policy the loss scores with hold the BPE's ten digit ids, and the logged entropy is the choice among the
    ten digits (at most log 10; a random model's whole vocabulary at those positions has ~log 1027)."""
    pytest.importorskip("transformers")
    from jaxmarl_llm.train import lm_rl

    trainer = lm_rl.make_train(_free_ttt(entropy_tokens="digits"))
    assert trainer.plan.entropy_tokens == digit_token_ids(trainer.tokenizer) and len(trainer.plan.entropy_tokens) == 10
    assert trainer.policy.entropy_ids == trainer.plan.entropy_tokens

    def two_updates(t):
        step = jax.jit(lambda s, hp, b: jax.lax.scan(lambda r, _: t.update(r, hp, b), s, None, length=2))
        return np.asarray(step(t.init(jax.random.PRNGKey(0), t.hparams), t.hparams, t.base)[1]["entropy"])

    ent = two_updates(trainer)
    assert np.all(ent > 1.0) and np.all(ent <= np.log(10) + 1e-5), ent
    full = two_updates(lm_rl.make_train(_free_ttt()))  # the default: every generated token, the whole vocabulary
    assert np.all(full > np.log(10) + 1.0), full


def test_unknown_or_empty_token_sets_are_refused_naming_the_key(monkeypatch):
    pytest.importorskip("transformers")
    from jaxmarl_llm import tokenizers
    from jaxmarl_llm.errors import ConfigError
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config.lm_rl import validate_lm_rl

    with pytest.raises(ConfigError, match="entropy_tokens.*'vowels'"):
        validate_lm_rl(_free_ttt(entropy_tokens="vowels"))
    monkeypatch.setitem(tokenizers.TOKEN_SETS, "vowels", lambda tok: ())  # a set this tokenizer has none of
    with pytest.raises(ConfigError, match="entropy_tokens: the tokenizer has no vowels tokens"):
        lm_rl.make_train(_free_ttt(entropy_tokens="vowels"))
