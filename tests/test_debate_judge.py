"""Debate with a trained LM judge: restricted replies per seat, the rule-judging teacher, the judge's
agreement with the rule judge through the info counts, an SFT judge that learns the rule, debaters that learn
by RL to say what the judge credits."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.data import teachers
from jaxmarl_llm.envs import registry
from jaxmarl_llm.envs.text.debate import ARGUMENTS
from jaxmarl_llm.evaluation import evaluate

KW = {"rounds": 2, "capacity": 224, "max_action_tokens": 26}


def _env(judge: str = "lm"):
    from jaxmarl_llm.train.lm.setup import build_tokenizer

    kw = {"judge": judge, **KW}
    return registry.make("text/debate", tokenizer=build_tokenizer("word", "text/debate", kw), **kw)


def _play(env, script, key, turns: int = 5):
    """One debate by `script`: (the last step's info, the judge's targets [T], the markers each seat used)."""
    obs, state = env.reset(key)
    memory = script.init(state)
    targets, infos = [], []
    for t in range(turns):
        key, k_act, k_env = jax.random.split(key, 3)
        action, target, memory = script.act(k_act, memory, state)
        targets.append(target & state.active)
        obs, state, reward, term, trunc, info = env.step(k_env, state, action)
        infos.append(info)
    return jax.tree.map(lambda *x: jnp.stack(x), *infos), jnp.stack(targets), state.markers


def test_debate_candidates_give_each_seat_its_role_and_the_argument_markers_are_the_rules():
    env = _env()
    mask = np.asarray(env.candidate_mask(None))
    assert mask.shape == (3, len(ARGUMENTS) + 2)
    assert mask[:2, : len(ARGUMENTS)].all() and not mask[:2, len(ARGUMENTS):].any()  # debaters: the arguments
    assert mask[2, len(ARGUMENTS):].all() and not mask[2, : len(ARGUMENTS)].any()  # the judge: the two verdicts
    words = [w.strip() for w in open("jaxmarl_llm/envs/text/data/argument_markers.txt") if not w.startswith("#")]
    brute = np.asarray([[w in a.lower() for w in words if w] for a in ARGUMENTS])
    np.testing.assert_array_equal(np.asarray(env.argument_markers()), brute)
    assert np.asarray(_env("rule").candidate_mask(None)).all()  # no judge seat: both debaters, all arguments


def test_marker_debater_judges_as_the_rule_and_counts_agreement_and_markers():
    """The teacher's verdict is the rule's winner, a target only where the rule has one; the info counts give
    judge_agreement 1 for it and 0.5-ish for a coin; markers_per_speech equals a brute-force count."""
    env = _env()
    keys = jax.random.split(jax.random.PRNGKey(0), 256)
    info, targets, markers = jax.jit(jax.vmap(lambda k: _play(env, teachers.marker_debater(env, noise=1.0), k)))(keys)
    rule = np.asarray(jax.vmap(env.rule_verdict)(markers))  # [N]
    verdict = np.asarray(info["verdict"][:, -1, 2])
    decided = rule >= 0
    assert 0.6 < decided.mean() < 0.95  # random debates: some rule draws
    np.testing.assert_array_equal(verdict[decided], rule[decided])
    np.testing.assert_array_equal(np.asarray(targets[:, 4, 2]), decided)  # a verdict target only with a winner
    assert not np.asarray(targets[:, :4]).any()  # noise 1: no debater move is a target
    counts = {k: np.asarray(info[k][:, -1, 2]) for k in ("judged", "judge_agrees")}
    np.testing.assert_array_equal(counts["judged"], decided)
    assert evaluate.ratio_rates({k: v.sum() for k, v in counts.items()})["judge_agreement"] == 1.0
    assert np.asarray(info["won"][:, -1, :2]).sum(-1).max() == 1  # one winner at most
    # markers_per_speech: the markers each speech adds, summed, equal the distinct markers both debaters used
    spoke, new = np.asarray(info["spoke"][..., 0]), np.asarray(info["new_markers"][..., 0])  # [N, T]
    assert (spoke.sum(-1) == 4).all() and (new.sum(-1) == np.asarray(markers).sum((-1, -2))).all()
    # a judge that names a random winner agrees about half the time
    coin = teachers.Script(lambda s: jnp.zeros((), jnp.int32),
                           lambda k, m, s: (env.random_action(k, s), jnp.ones((3,), bool), m))
    info, _, _ = jax.jit(jax.vmap(lambda k: _play(env, coin, k)))(keys)
    rate = evaluate.ratio_rates({k: np.asarray(info[k][:, -1, 2]).sum() for k in ("judged", "judge_agrees")})
    assert 0.35 < rate["judge_agreement"] < 0.65, rate


def test_greedy_marker_debater_says_the_richest_new_argument():
    """Greedy (noise 0), each debater's two speeches use 6 markers (the two 3-marker arguments): the best score."""
    env = _env("rule")
    info, targets, markers = jax.jit(lambda k: _play(env, teachers.marker_debater(env), k, 4))(jax.random.PRNGKey(1))
    assert np.asarray(markers).sum(-1).tolist() == [6, 6]
    assert np.asarray(targets).sum() == 4


def _judge_accuracy(updates: int) -> np.ndarray:
    """SFT of a tiny model on the judge seat of random debates: the judge's teacher-forced accuracy per update."""
    from configs import sft_debate
    from jaxmarl_llm.train import sft
    from tiny_configs import TINY_MODEL

    c = sft_debate.get_config()
    c.model.update(TINY_MODEL)
    c.num_envs, c.total_episodes, c.lr, c.anneal_lr, c.mesh.num_devices = 32, 32 * updates, 1e-2, False, 1
    trainer = sft.make_train(c)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    step = jax.jit(lambda s, hp, b: jax.lax.scan(lambda r, _: trainer.update(r, hp, b), s, None, length=updates))
    _, metrics = step(state, trainer.hparams, trainer.base)
    assert sorted(k for k in metrics if k.startswith("move_accuracy_")) == ["move_accuracy_judge"]
    return np.asarray(metrics["move_accuracy_judge"])


def test_sft_judge_learns_the_rule_judges_verdicts():
    """Fresh random debates every update, so the teacher-forced verdict accuracy is agreement on unseen debates:
    < 0.6 over the first 20 updates, >= 0.7 over updates 181-200 of a 1-layer, 32-wide model (measured 0.25 ->
    0.77; 0.8 is its plateau, ~30 s)."""
    from fresh_process import run_optimized

    curve = run_optimized(_judge_accuracy, 200)
    assert curve[:20].mean() < 0.6, curve
    assert curve[-20:].mean() >= 0.7, curve


@pytest.mark.parametrize("variant", ["trained_judge"])
def test_debate_trained_judge_config_builds(variant):
    from configs import debate
    from jaxmarl_llm.train.config import validate_lm_rl

    from jaxmarl_llm.errors import ConfigError

    c = debate.get_config(variant)
    c.mesh.num_devices = 1
    with pytest.raises(ConfigError, match="sft_debate_judge"):  # step 1 of the recipe has not run here
        validate_lm_rl(c)
    c.model.checkpoint = ""
    validate_lm_rl(c)
    assert c.frozen_agents == (2,) and c.policy.actions == "constrained" and c.tokenizer == "word"


def _debaters_curve(updates: int, judge: str = "rule", checkpoint: str = "") -> dict[str, np.ndarray]:
    """GRPO self-play of constrained debaters (one shared adapter) in front of `judge`: metrics per update."""
    from configs import debate
    from jaxmarl_llm.train import lm_rl
    from tiny_configs import TINY_MODEL

    c = debate.get_config("trained_judge")
    c.env_kwargs["judge"] = judge
    c.model.checkpoint = checkpoint
    if judge == "rule":
        c.frozen_agents, c.num_turns = (), 4
    if not checkpoint:
        c.model.update(TINY_MODEL, max_position_embeddings=256)
    c.num_envs, c.group_size, c.total_episodes, c.mesh.num_devices = 16, 8, 16 * updates, 1
    c.lr = 1e-2  # the tiny 1-layer model learns in 100 updates at this rate (the recipe's 3e-3 is for its base)
    trainer = lm_rl.make_train(c)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    step = jax.jit(lambda s, hp, b: jax.lax.scan(lambda r, _: trainer.update(r, hp, b), s, None, length=updates))
    _, metrics = step(state, trainer.hparams, trainer.base)
    return {k: np.asarray(v) for k, v in metrics.items()}


def test_constrained_debaters_learn_by_rl_to_use_more_markers():
    """Self-play in front of the rule judge from a random model: the markers a speech adds to its debater's
    score (the rule's currency; 3.0 at best, ~1.7 for random arguments) rise by GRPO alone: measured 2.11 (updates
    1-10) -> 2.78 (91-100), ~45 s; as both learn, more debates are rule draws (won_rate 0.71 -> 0.44)."""
    from fresh_process import run_optimized

    m = run_optimized(_debaters_curve, 100)
    curve = m["markers_per_speech"]
    assert curve[:10].mean() < 2.3, curve
    assert curve[-10:].mean() > curve[:10].mean() + 0.4, curve
    assert (m["won_rate_agent0"] + m["won_rate_agent1"] <= 1.0 + 1e-6).all()  # one winner per debate at most


def _trained_judge_recipe(tmp: str) -> dict[str, np.ndarray]:
    """configs/sft_debate.py as shipped (the judge), then 150 GRPO updates of debater A against a random B in
    front of it (configs/debate.py:trained_judge): RL's metrics per update."""
    from configs import debate, sft_debate
    from jaxmarl_llm.train import lm_rl, sft

    c = sft_debate.get_config()
    c.mesh.num_devices = 1
    trainer = sft.make_train(c)
    state = trainer.init(jax.random.PRNGKey(c.seed), trainer.hparams)
    n = trainer.num_updates
    state, _ = jax.jit(lambda s, hp, b: jax.lax.scan(lambda r, _: trainer.update(r, hp, b), s, None, length=n))(
        state, trainer.hparams, trainer.base)
    trainer.export(state, tmp)
    r = debate.get_config("trained_judge")
    r.model.checkpoint, r.scripted_agents, r.mesh.num_devices = tmp, "1:random", 1
    rl = lm_rl.make_train(r)
    s = rl.init(jax.random.PRNGKey(r.seed), rl.hparams)
    _, metrics = jax.jit(lambda s, hp, b: jax.lax.scan(lambda x, _: rl.update(x, hp, b), s, None,
                                                       length=rl.num_updates))(s, rl.hparams, rl.base)
    return {k: np.asarray(v) for k, v in metrics.items()}


@pytest.mark.slow
def test_debater_beats_a_random_one_before_the_trained_frozen_judge(tmp_path):
    """The whole recipe (~6 min): the SFT judge agrees with the rule on >= 95% of the debates RL plays (measured
    0.99-1.0) and debater A's win rate against a random B rises from ~0.6 to >= 0.85 (measured 0.63 -> 0.97)."""
    from fresh_process import run_optimized

    m = run_optimized(_trained_judge_recipe, str(tmp_path / "judge"))
    assert m["judge_agreement"].mean() >= 0.95, m["judge_agreement"]
    win = m["won_rate_agent0"]
    assert win[:15].mean() <= 0.75 and win[-15:].mean() >= 0.85, win
