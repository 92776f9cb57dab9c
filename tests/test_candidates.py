"""Constrained and scored actions: only valid replies, distributions that sum to one, PPO ratios of exactly 1."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.models import config as model_config
from jaxmarl_llm.models.sampling import SamplingConfig
from jaxmarl_llm.models.transformer import init_params
from jaxmarl_llm.policies import candidates as cand_lib
from jaxmarl_llm.policies.lm_policy import LMPolicy
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import lm_rl_defaults, validate_lm_rl
from jaxmarl_llm.train.lm import seats as lm_seats
from jaxmarl_llm.train.lm.paths import rollout_path
from tiny_configs import TINY_MODEL

V, M, EOS = 11, 6, 1


def _random_replies(rng: np.random.Generator) -> list[tuple[int, ...]]:
    """3-8 distinct replies of 1-4 tokens over a 9-token alphabet (ids 2..10), often sharing prefixes."""
    k = int(rng.integers(3, 9))
    replies: set[tuple[int, ...]] = set()
    while len(replies) < k:
        replies.add(tuple(int(t) for t in rng.integers(2, 5 if rng.random() < 0.5 else V, size=rng.integers(1, 5))))
    return sorted(replies)


def _prefix_logits(table: jax.Array, prefix: jax.Array, j: int) -> jax.Array:
    """A fake model: the logits after a prefix depend on (step, the previous token)."""
    prev = prefix[..., j - 1] if j > 0 else jnp.zeros(prefix.shape[:-1], jnp.int32)
    return table[j, prev]


@pytest.mark.parametrize("seed", range(3))
def test_constrained_samples_only_valid_replies_and_probabilities_sum_to_one(seed):
    rng = np.random.default_rng(seed)
    cands = cand_lib.build(_random_replies(rng), EOS, M)
    k, b = cands.size, 512
    table = jax.random.normal(jax.random.PRNGKey(seed), (M, V, V)) * 3.0  # logits per (step, previous token)
    valid = jnp.asarray(rng.random((b, k)) < 0.6)
    valid = valid.at[0].set(False)  # a row with nothing valid is opened to every candidate

    def step_fn(tok, state):  # state: (tokens so far [B, M], step)
        toks, j = state
        toks = toks.at[:, j].set(tok)
        return _prefix_logits(table, toks, j + 1), (toks, j + 1)

    keys = jax.random.split(jax.random.PRNGKey(100 + seed), b)
    init = (jnp.zeros((b, M), jnp.int32), 0)
    tokens, lp, mask, _ = cand_lib.constrained_decode(keys, _prefix_logits(table, init[0], 0), init, step_fn, cands,
                                                      valid, 1.0, M, 0)
    allowed = np.asarray(cand_lib.some_valid(valid))
    spelled = np.asarray(cand_lib.walk(cands, tokens, valid).leaf)
    assert (spelled >= 0).all(), "a sampled reply is not a candidate"
    assert allowed[np.arange(b), spelled].all(), "a sampled reply is not valid in its row's state"
    assert (np.asarray(mask).sum(-1) == cands.lens[spelled]).all()

    # the recorded log-probs equal the restricted scores the loss recomputes from the same logits
    logits = jnp.stack([_prefix_logits(table, tokens, j) for j in range(M)], axis=1)  # [B, M, V]
    got_lp, got_ent = cand_lib.restricted_scores(cands, logits, tokens, valid, 1.0)
    np.testing.assert_allclose(np.asarray(got_lp) * np.asarray(mask), np.asarray(lp), atol=1e-6)

    # over every candidate, the sequence probabilities of a row sum to 1 (0 for invalid ones)
    every = jnp.asarray(cands.table(M))  # [K, M]
    for row in range(4):
        v = jnp.broadcast_to(valid[row], (k, k))
        seq_logits = jnp.stack([_prefix_logits(table, every, j) for j in range(M)], axis=1)
        seq_lp, _ = cand_lib.restricted_scores(cands, seq_logits, every, v, 1.0)
        real = jnp.arange(M)[None] < jnp.asarray(cands.lens)[:, None]
        prob = np.exp(np.asarray(jnp.where(real, seq_lp, 0.0).sum(-1)))
        assert prob[allowed[row]].sum() == pytest.approx(1.0, abs=1e-5)
        # an invalid reply is no path of the restricted trie: the loss would never see one
        walked = np.asarray(cand_lib.walk(cands, every, v).leaf)
        assert (walked[~allowed[row]] == -1).all() and (walked[allowed[row]] == np.flatnonzero(allowed[row])).all()

    # the entropy at the root is the restricted distribution's, by brute force over its distinct first tokens
    firsts = sorted({r[0] for r, ok in zip(cands.replies, allowed[1]) if ok})
    p = jax.nn.softmax(logits[1, 0, jnp.asarray(firsts)])
    assert float(got_ent[1, 0]) == pytest.approx(float(-(p * jnp.log(p)).sum()), abs=1e-5)


def _tiny_policy(actions: str, cands: cand_lib.Candidates, temperature: float = 1.0) -> tuple[LMPolicy, dict]:
    cfg = model_config.tiny("qwen3", vocab_size=V, **(TINY_MODEL | {"num_layers": 2}))
    params = init_params(cfg, jax.random.PRNGKey(0), std=0.5)
    return LMPolicy(cfg, sampling=SamplingConfig(max_new_tokens=M, temperature=temperature, stop_ids=(EOS,)),
                    actions=actions, candidates=cands), params


@pytest.mark.parametrize("temperature", [1.0, pytest.param(0.7, marks=pytest.mark.slow)])
def test_scored_equals_constrained_for_one_token_replies(temperature):
    cands = cand_lib.build([(3,), (5,), (7,), (8,), (10,)], EOS, M)
    scored, params = _tiny_policy("scored", cands, temperature)
    constrained, _ = _tiny_policy("constrained", cands, temperature)
    b = 64
    prompt = jax.random.randint(jax.random.PRNGKey(1), (b, 9), 2, V)
    lengths = jax.random.randint(jax.random.PRNGKey(2), (b,), 3, 10)
    valid = jax.random.bernoulli(jax.random.PRNGKey(3), 0.6, (b, cands.size))
    keys = jax.random.split(jax.random.PRNGKey(4), b)
    s = jax.vmap(lambda k, p, n, v: jax.tree.map(lambda x: x[0], scored.sample(k, params, None, p[None], n[None],
                                                                                 v[None])))(keys, prompt, lengths, valid)
    c = jax.vmap(lambda k, p, n, v: jax.tree.map(lambda x: x[0], constrained.sample(
        k, params, None, p[None], n[None], v[None])))(keys, prompt, lengths, valid)
    np.testing.assert_array_equal(np.asarray(s.tokens), np.asarray(c.tokens))  # the same draws from the same keys
    np.testing.assert_allclose(np.asarray(s.logprobs), np.asarray(c.logprobs), atol=1e-5)
    # and the loss sees the same log-probs and entropies
    out_s = scored.score_actions(params, None, prompt, lengths, s.tokens, s.mask, valid)
    out_c = constrained.score_actions(params, None, prompt, lengths, c.tokens, c.mask, valid)
    for a, b_ in zip(out_s[:2], out_c[:2]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b_), atol=1e-5)


def test_scored_candidates_follow_their_sequence_log_probs():
    """Several-token replies: the action distribution is the softmax of each reply's summed (or mean) log-prob."""
    cands = cand_lib.build([(3, 4), (3, 5, 6), (7,), (8, 9, 10)], EOS, M)
    for normalize in (False, True):
        policy, params = _tiny_policy("scored", cands)
        policy = LMPolicy(policy.cfg, sampling=policy.sampling, actions="scored", candidates=cands,
                          length_normalize=normalize)
        prompt = jnp.asarray([[2, 3, 4, 5, 6, 0, 0]])
        scores, _ = policy.candidate_scores(params, None, prompt, jnp.asarray([5]))
        logits = policy.logits(params, None, jnp.asarray([list(np.pad([2, 3, 4, 5, 6, *r], (0, 3))[:8])
                                                          for r in cands.replies]))
        lp = jax.nn.log_softmax(logits, -1)
        for k, r in enumerate(cands.replies):
            want = sum(float(lp[k, 4 + j, t]) for j, t in enumerate(r))
            want = want / len(r) if normalize else want
            assert float(scores[0, k]) == pytest.approx(want, abs=1e-5)


def test_trie_adds_eos_only_where_a_reply_is_a_prefix_of_another():
    cands = cand_lib.build([(5, 6), (5, 6, 7), (8,)], EOS, M)
    assert cands.replies == ((5, 6, EOS), (5, 6, 7), (8,))
    with pytest.raises(ValueError, match="repeat"):
        cand_lib.build([(5,), (5,)], EOS, M)
    with pytest.raises(ValueError, match="max_action_tokens"):
        cand_lib.build([(5,) * 7], EOS, M)


# ---- in the trainer: every reply parses, and PPO's first ratio is exactly 1 ----------------------------------

def _game_config(game: str, actions: str):
    c = lm_rl_defaults()
    c.policy.actions = actions
    c.mesh.num_devices = 1
    c.algo, c.group_size, c.num_envs = "ppo", 1, 4
    if game == "spread":
        c.env_name, c.num_turns, c.tokenizer = "text/tokenized_mpe", 6, "word"
        c.env_kwargs = {"env": "mpe/simple_spread", "num_agents": 3, "max_cycles": 6, "continuous_actions": False,
                        "prompt": "", "outro": "\nAction:", "separator": ""}
        if actions == "scored":  # the char tokenizer spells each move in several tokens: GLAM-style scoring
            c.tokenizer, c.env_kwargs["separator"] = "char", " "
    elif game == "tic_tac_toe":  # incremental rollout, state-dependent masks, "Move: N" replies sharing a prefix
        c.env_name, c.num_turns, c.scripted_agents = "text/tic_tac_toe", 4, "1:random"
        c.env_kwargs = {"capacity": 400}
    elif game == "twenty_questions":  # two seats, per-seat masks, replies of 2 to 19 chars; the answerer frozen
        c.env_name, c.num_turns, c.algo, c.group_size = "text/twenty_questions", 4, "grpo", 2
        c.env_kwargs = {"answerer": "lm", "max_turns": 2, "capacity": 240, "max_action_tokens": 20}
        c.frozen_agents = (1,)
    else:  # guess_number: "Guess: 1" is a prefix of "Guess: 10": the trie ends it with eos
        c.env_name, c.num_turns, c.algo, c.group_size = "text/guess_number", 2, "grpo", 2
        c.env_kwargs = {"max_turns": 2, "capacity": 160}
    validate_lm_rl(c)
    return c


@pytest.mark.parametrize("game,actions", [("spread", "constrained"), ("spread", "scored"),
                                          ("tic_tac_toe", "constrained"), ("guess_number", "constrained"),
                                          ("twenty_questions", "constrained")])
def test_replies_always_parse_and_the_loss_rescores_the_recorded_log_probs(game, actions):
    trainer = lm_rl.make_train(_game_config(game, actions))
    plan = trainer.plan
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)

    @jax.jit
    def check(state, base):
        turns, seats, final = trainer.rollout(jax.random.PRNGKey(5), base, state.trainable, state.pool,
                                              jnp.arange(plan.num_envs))
        train = lm_seats.loss_seats(plan, turns, seats.learns)
        path = rollout_path(plan)
        seqs = path.episode_seqs(plan, final, train, seats.learns)  # None on the re-read path
        lp, ent, _ = path.score(plan, trainer.policy, base, state.trainable, train, seqs)
        ref_lp = path.score(plan, trainer.policy, base, state.trainable, train, seqs, reference=True)[0]
        return turns, train, lp, ent, ref_lp

    turns, train, lp, ent, ref_lp = jax.device_get(check(state, trainer.base))
    mask = np.asarray(train.token_mask())
    assert mask.sum() > 0
    fe = turns.info["format_error"]
    assert not np.asarray(fe).any(), "a constrained / scored reply failed to parse"
    if game == "tic_tac_toe":
        assert not np.asarray(turns.info["illegal"]).any(), "a reply named an occupied cell"
    if game == "twenty_questions":  # the frozen answerer replied Yes / No to a listed question at each of its turns
        answering = np.asarray(turns.acted)[..., 1]
        assert answering.any() and (np.asarray(turns.info["answered"])[..., 1] == answering).all()
        assert (np.asarray(turns.info["answer"])[..., 1][answering] >= 0).all()
    # PPO's ratio at the first minibatch of the first epoch: exp(new - old) == 1. Re-read rollouts run the very
    # forward the loss runs (1e-6); a KV-cache rollout sums the same terms in another order (float32: 2e-6)
    ratio = np.exp(lp - train.logprob)[mask]
    np.testing.assert_allclose(ratio, 1.0, atol=2e-6 if plan.incremental else 1e-6)
    assert np.abs(ratio - 1.0).mean() < 5e-7
    assert (ent[mask] >= 0).all() and (ent[mask] <= np.log(cand_lib.build(
        trainer.env.action_candidates, trainer.tokenizer.eos_id, 99).size) + 1e-5).all()
    # the reference is restricted too: a fresh adapter (B = 0) is the base, so it scores the same log-probs
    np.testing.assert_allclose(ref_lp[mask], lp[mask], atol=1e-6)
    assert plan.incremental == (game in ("tic_tac_toe", "guess_number", "twenty_questions"))


def test_constrained_actions_need_an_env_that_lists_replies():
    c = lm_rl_defaults()
    c.mesh.num_devices = 1
    c.env_name, c.policy.actions = "text/cooperative_writing", "constrained"
    with pytest.raises(ConfigError, match="action_candidates"):
        lm_rl.make_train(c)
    c.policy.actions = "sometimes"
    with pytest.raises(ConfigError, match="policy.actions"):
        validate_lm_rl(c)
    c.policy.actions, c.sampling.top_k = "scored", 5
    with pytest.raises(ConfigError, match="top_k"):
        validate_lm_rl(c)


@pytest.mark.slow  # ~100 s; the sharded step itself is covered by test_lm_rl's default 8-device test
def test_constrained_spread_on_eight_devices_matches_one():
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 forced host devices (conftest)")
    from jaxmarl_llm.parallel import mesh as mesh_lib

    outs = []
    for n in (1, 8):
        config = _game_config("spread", "constrained")
        config.num_envs, config.mesh.num_devices, config.update_epochs = 8, n, 1
        trainer = lm_rl.make_train(config)
        mesh = mesh_lib.make_mesh(n)
        state = mesh_lib.put(trainer.init(jax.random.PRNGKey(1), trainer.hparams), mesh, trainer.state_specs)
        state, metrics = mesh_lib.sharded_chunk(trainer, mesh, 1)(state, trainer.hparams)
        outs.append((jax.device_get(state.trainable), jax.device_get(metrics)))
    for a, b in zip(jax.tree.leaves(outs[0][0]), jax.tree.leaves(outs[1][0])):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(outs[0][1]["team_return"], outs[1][1]["team_return"], rtol=1e-5)
    assert float(np.abs(outs[0][0]["value_head"]["kernel"]).max()) > 0  # the update moved something


def _state_mask_games():
    """tic-tac-toe played by an untrained constrained policy in both seats, 32 games each: evaluate.play with the
    env's mask, play.make_match with it, and evaluate.play with the mask replaced by "every cell"."""
    from jaxmarl_llm.evaluation import evaluate, play

    trainer = lm_rl.make_train(_game_config("tic_tac_toe", "constrained"))
    env, policy = trainer.env, trainer.policy
    act = evaluate.lm_actor(policy, trainer.base)
    masked = jax.device_get(jax.jit(lambda k: evaluate.play(k, env, act, 32, 9))(jax.random.PRNGKey(3)))
    # matches keep each seat's KV cache (transcripts.act_rows); re-reading is evaluate's policy.sample above
    match = play.make_match(env, policy, ("lm", "lm"), 9, incremental=True)
    outcomes = jax.device_get(match(jax.random.PRNGKey(4), trainer.base, (None, None), 32)[1])
    original = type(env).candidate_mask
    try:
        type(env).candidate_mask = lambda self, state: jnp.ones((2, len(self.action_candidates)), bool)
        unmasked = jax.device_get(jax.jit(lambda k: evaluate.play(k, env, act, 32, 9))(jax.random.PRNGKey(3)))
    finally:
        type(env).candidate_mask = original
    return ({k: np.asarray(v) for k, v in masked.items()},
            {k: np.asarray(getattr(outcomes, k)) for k in ("illegal", "format_error", "ret")},
            {k: np.asarray(v) for k, v in unmasked.items()})


def test_evaluation_and_matches_pass_the_state_mask():
    """evaluate.play and play.make_match give a constrained policy the env's mask each turn: an untrained model
    in both tic-tac-toe seats never names a taken cell (an illegal move costs -2, so every episode's summed
    return is 0). With the mask replaced by "every cell" the same games do break the rules: the check can fail.
    Run at XLA's default optimization level (tests/fresh_process.py): its time is playing, not compiling."""
    from fresh_process import run_optimized

    masked, outcomes, unmasked = run_optimized(_state_mask_games)
    np.testing.assert_array_equal(masked["return"], 0.0)
    assert masked["moves"].min() >= 5  # a game lasts five moves at least
    assert not outcomes["illegal"].any() and not outcomes["format_error"].any()
    np.testing.assert_array_equal(outcomes["ret"].sum(-1), 0.0)
    assert (unmasked["return"] < 0).any()


# ---- twenty questions: every listed question and word, and Yes / No, each for its own seat --------------------

def _random_states(env, n: int, key: jax.Array):
    """n states after 0-15 random moves (random secrets, questions, guesses and answers); some episodes ended."""
    def one(k):
        k_reset, k_len, k_play = jax.random.split(k, 3)
        _, state = env.reset(k_reset)
        steps = jax.random.randint(k_len, (), 0, 16)

        def body(t, state):
            k_t = jax.random.fold_in(k_play, t)
            new = env.step(k_t, state, env.random_action(k_t, state))[1]
            return jax.tree.map(lambda a, b: jnp.where(t < steps, a, b), new, state)

        return jax.lax.fori_loop(0, 15, body, state)

    return jax.vmap(one)(jax.random.split(key, n))


def _decode_random(cands, valid: jax.Array, key: jax.Array, vocab: int, pad: int) -> tuple[jax.Array, jax.Array]:
    """Constrained replies under random logits (a fake model, fresh logits every step): tokens [B, M], lengths [B]."""
    b = valid.shape[0]
    logits_at = lambda j: jax.random.normal(jax.random.fold_in(key, j), (b, vocab)) * 3.0  # noqa: E731

    def step_fn(tok, j):
        return logits_at(j + 1), j + 1

    tokens, _, mask, _ = cand_lib.constrained_decode(jax.random.split(key, b), logits_at(0), 0, step_fn, cands, valid,
                                                     1.0, cands.depth, pad)
    return tokens, mask.sum(-1)


def _decode_index(cands, valid: jax.Array, tok) -> jax.Array:
    """The candidate index [B] of constrained replies under random logits (key 3, as above)."""
    tokens, _ = _decode_random(cands, valid, jax.random.PRNGKey(3), tok.vocab_size, tok.pad_id)
    return cand_lib.walk(cands, tokens, jnp.ones(valid.shape, bool)).leaf


@pytest.mark.parametrize("answerer", ["oracle", "lm"])
def test_twenty_questions_constrained_replies_are_the_seats_own_listed_moves(answerer):
    """Property over 256 random states: a reply constrained decoding draws under random logits is exactly
    `Ask: <listed name>` or `Guess: <listed word>` for the questioner and `Yes` / `No` for the answerer
    (char tokenizer: replies of 2 to 19 tokens, `Guess: pen` a prefix of `Guess: penguin`, ended by eos), and
    the env takes it as such: no format error, every answer to a listed question is counted. With every
    candidate allowed to every seat the answerer does write questions: the check can fail. With
    `fresh_only` the questioner never repeats a question or a guess (without it, the same draws do)."""
    from jaxmarl_llm.envs.text.twenty_questions import TwentyQuestions

    env = TwentyQuestions(answerer=answerer, max_turns=8, capacity=384 if answerer == "lm" else 864,
                          max_action_tokens=20)
    tok = env.tokenizer
    cands = cand_lib.build(env.action_candidates, tok.eos_id, env.max_action_tokens)
    # replies of different lengths: `No` (2 tokens) to `Guess: refrigerator` (19); `Guess: pen` + eos (11)
    assert cands.lens.min() == (2 if answerer == "lm" else 8) and cands.depth == 19
    assert cands.replies[env.num_questions + env.words.index("pen")][-1] == tok.eos_id
    asks = {f"Ask: {n}" for n in env.question_names}
    guesses = {f"Guess: {w}" for w in env.words}
    own = [asks | guesses, {"Yes", "No"}]
    states = _random_states(env, 256, jax.random.PRNGKey(0))
    masks = jax.vmap(env.candidate_mask)(states)  # [B, A, K]
    text = lambda t, n: tok.decode([int(x) for x in t[:n] if x != tok.eos_id])  # noqa: E731
    replies = []
    for seat in range(env.num_agents):
        tokens, length = jax.device_get(_decode_random(cands, masks[:, seat], jax.random.PRNGKey(seat + 1),
                                                       tok.vocab_size, tok.pad_id))
        said = [text(t, n) for t, n in zip(tokens, length)]
        assert set(said) <= own[seat], sorted(set(said) - own[seat])[:5]
        assert len(set(said)) > 50 if seat == 0 else set(said) == own[1]  # it does reach many candidates
        replies.append(np.pad(tokens, ((0, 0), (0, env.max_action_tokens - tokens.shape[1])), constant_values=tok.pad_id))
        replies[-1] = (replies[-1], length)
    tokens = jnp.stack([jnp.asarray(r[0]) for r in replies], 1)  # [B, A, M]
    length = jnp.stack([jnp.asarray(r[1]) for r in replies], 1)
    keys = jax.random.split(jax.random.PRNGKey(9), 256)
    _, _, _, _, _, info = jax.vmap(env.step)(keys, states, TextAction(tokens, length))
    playing = ~np.asarray(states.done)
    assert not np.asarray(info["format_error"])[:, 0].any()
    if answerer == "lm":
        answering = playing & np.asarray(states.active)[:, 1]
        listed = np.asarray(states.pending) >= 0  # the question before was a listed one: always, here
        assert answering.sum() > 20 and listed[answering].all()
        assert (np.asarray(info["answered"])[:, 0] == answering).all()
        assert (np.asarray(info["answer"])[:, 0][answering] >= 0).all()
        # fresh_only: the questioner's reply is never a question it asked or a word it guessed before
        fresh = TwentyQuestions(answerer="lm", max_turns=8, capacity=384, max_action_tokens=20, fresh_only=True)
        tried = np.asarray(states.tried)  # [B, Q + W]
        tokens, _ = _decode_random(cands, jax.vmap(fresh.candidate_mask)(states)[:, 0], jax.random.PRNGKey(3),
                                   tok.vocab_size, tok.pad_id)
        picked = np.asarray(cand_lib.walk(cands, tokens, jnp.ones((256, cands.size), bool)).leaf)  # [B]
        assert tried.sum() > 256 and (picked >= 0).all() and not tried[np.arange(256), picked].any()
        assert tried[np.arange(256), np.asarray(_decode_index(cands, masks[:, 0], tok))].any()  # without: repeats
        # the seat's own replies only: with every candidate open, the answerer writes questions and words
        tokens, length = jax.device_get(_decode_random(cands, jnp.ones_like(masks[:, 1]), jax.random.PRNGKey(2),
                                                       tok.vocab_size, tok.pad_id))
        assert not {text(t, n) for t, n in zip(tokens, length)} <= own[1]


class _FourWords:
    """Twenty questions whose secret is one of four words, and whose questioner may guess only those (asks: all 60)."""

    WORDS = ("dog", "car", "apple", "chair")

    @staticmethod
    def make(tokenizer):
        from jaxmarl_llm.envs.text.twenty_questions import TwentyQuestions

        class FourWords(TwentyQuestions):
            def reset(self, key, params=None):
                return self.reset_to(self.few[jax.random.randint(key, (), 0, len(self.few))])

            def candidate_mask(self, state):
                guess_ok = np.zeros(len(self.words), bool)
                guess_ok[np.asarray(self.few)] = True
                mask = self.seat_candidates.copy()
                mask[0, self.num_questions: self.num_questions + len(self.words)] = guess_ok
                return jnp.asarray(mask)

        env = FourWords(tokenizer, answerer="lm", max_turns=3, capacity=128, max_action_tokens=8)
        env.few = jnp.asarray([env.words.index(w) for w in _FourWords.WORDS])
        return env


def _four_words_curve(updates: int) -> np.ndarray:
    """GRPO of a constrained questioner (a random tiny model) against the frozen base as answerer: success per update."""
    from jaxmarl_llm.train.lm.setup import build_tokenizer

    c = lm_rl_defaults()
    c.env_name, c.tokenizer = "text/twenty_questions", "word"
    c.env_kwargs = {"answerer": "lm", "max_turns": 3, "capacity": 128, "max_action_tokens": 8}
    c.policy.actions, c.frozen_agents, c.num_turns = "constrained", (1,), 6
    c.algo, c.num_envs, c.group_size, c.lr, c.kl_coef = "grpo", 16, 4, 1e-2, 0.0
    c.total_episodes, c.mesh.num_devices = 16 * updates, 1
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c, env=_FourWords.make(build_tokenizer("word", c.env_name, c.env_kwargs)))
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    step = jax.jit(lambda s, hp, b: jax.lax.scan(lambda r, _: trainer.update(r, hp, b), s, None, length=updates))
    _, metrics = step(state, trainer.hparams, trainer.base)
    assert float(np.asarray(metrics["format_error_rate"]).max()) == 0.0
    return np.asarray(metrics["success_rate"])


def test_constrained_questioner_learns_by_grpo_against_a_frozen_answerer():
    """Four possible secrets, three questioner turns, the questioner restricted to the 60 listed questions and the
    four words: a random model finds the word in ~1/3 of the games (half its replies are questions, guesses
    repeat); guessing three distinct words wins 3/4 (asking first, once the answers mean something, 1). GRPO
    (groups share the secret) through the constrained replies' log-probs lifts the sampled success (slowly: 4
    groups of 4 per update)."""
    from fresh_process import run_optimized

    curve = run_optimized(_four_words_curve, 160)  # measured: 0.40 (updates 1-20) -> 0.57 (141-160), ~25 s
    assert curve[:20].mean() < 0.5, curve
    assert curve[-20:].mean() > curve[:20].mean() + 0.1, curve
