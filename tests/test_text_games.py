"""Scripted optimal play earns the maximum; every game runs under jit + vmap(256) for 1,000 random episodes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs import core
from jaxmarl_llm.envs.registry import make
from jaxmarl_llm.envs.text import datasets
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.cooperative_writing import band_reward
from jaxmarl_llm.envs.text.guess_number import GuessNumber, secret_split
from jaxmarl_llm.envs.text.twenty_questions import TwentyQuestions, still_possible


def _binary_search(env, secret):
    _, s = env.reset_to(secret)

    def body(carry, k):
        s, lo, hi, ret, turns = carry
        mid = (lo + hi) // 2
        _, s2, r, term, trunc, info = env.step(k, s, env.guess_action(mid))
        live = ~s.done
        lo = jnp.where(live & (mid < s.secret), mid + 1, lo)  # the env answered "too low"
        hi = jnp.where(live & (mid > s.secret), mid - 1, hi)
        return (s2, lo, hi, ret + r[0], turns + live), None

    init = (s, jnp.int32(0), jnp.int32(1023), jnp.float32(0), jnp.int32(0))
    (s, _, _, ret, turns), _ = jax.lax.scan(body, init, jax.random.split(jax.random.PRNGKey(0), 12))
    return ret, turns, s.done


def test_binary_search_solves_guess_number():
    secrets = jnp.arange(1024)
    # 10 turns (the spec): k three-way answers certify at most 2**k - 1 numbers, so 1023 of 1024 is the optimum
    env = GuessNumber(split="all")
    ret, turns, done = jax.jit(jax.vmap(lambda x: _binary_search(env, x)))(secrets)
    assert bool(done.all()) and int((ret == 1).sum()) == 1023 and int(turns.max()) == 10
    # with 11 turns every secret is found, never in more than 11
    env11 = GuessNumber(split="all", max_turns=11)
    ret, turns, done = jax.jit(jax.vmap(lambda x: _binary_search(env11, x)))(secrets)
    assert bool((ret == 1).all()) and int(turns.max()) == 11


def test_guess_number_split_and_penalties():
    split = secret_split()
    assert len(split["train"]) + len(split["test"]) == 1024 and not set(split["train"]) & set(split["test"])
    env = GuessNumber(split="test")
    secrets = jax.vmap(lambda k: env.reset(k)[1].secret)(jax.random.split(jax.random.PRNGKey(0), 500))
    assert set(np.asarray(secrets).tolist()) <= set(split["test"].tolist())
    _, s = env.reset_to(3)
    bad = TextAction(jnp.zeros((1, env.max_action_tokens), jnp.int32), jnp.zeros((1,), jnp.int32))
    total = 0.0
    for t in range(10):
        _, s, r, term, trunc, info = env.step(jax.random.PRNGKey(t), s, bad)
        total += float(r[0])
    assert total == -10.0 and bool(trunc[0]) and not bool(term[0])
    assert env.render(s)[0].count("Invalid.") == 10
    _, s2, r, *_ = env.step(jax.random.PRNGKey(0), s, bad)  # finished episodes are absorbing
    assert float(r[0]) == 0.0 and int(s2.length[0]) == int(s.length[0])


def test_twenty_questions_data_is_well_formed():
    words, cats, answers = datasets.nouns()
    names, texts = datasets.questions()
    assert len(words) >= 150 and len(set(words)) == len(words)
    assert answers.shape == (len(words), len(names))
    assert len({tuple(r) for r in answers}) == len(words)  # every word has a distinct answer vector
    i = words.index("dog")
    assert answers[i, names.index("animal")] and answers[i, names.index("mammal")] and not answers[i, names.index("fly")]
    j = words.index("airplane")
    assert answers[j, names.index("vehicle")] and answers[j, names.index("fly")] and not answers[j, names.index("animal")]


def test_halving_strategy_finds_every_word():
    env = TwentyQuestions()
    table = env.answers  # [W, Q]
    n_words = table.shape[0]

    def play(secret):
        _, s = env.reset_to(secret)

        def body(carry, k):
            s, cand, asked, ret, turns = carry
            count = cand.sum()
            yes = (table & cand[:, None]).sum(0)  # [Q]
            balance = jnp.where(asked, n_words, jnp.abs(2 * yes - count))
            q = jnp.argmin(balance)
            one_left = count == 1
            ask, guess = env.ask_action(q), env.guess_action(jnp.argmax(cand))
            action = jax.tree.map(lambda a, b: jnp.where(one_left, b, a), ask, guess)
            _, s2, r, term, trunc, info = env.step(k, s, action)
            live = ~s.done
            answer = info["answer"][0]  # what the env said: 1 yes, 0 no
            keep = jnp.where(answer == 1, table[:, q], ~table[:, q])
            cand = jnp.where(live & ~one_left, cand & keep, cand)
            asked = asked.at[q].set(asked[q] | ~one_left)
            return (s2, cand, asked, ret + r[0], turns + live), None

        init = (s, jnp.ones((n_words,), bool), jnp.zeros((table.shape[1],), bool), jnp.float32(0), jnp.int32(0))
        (s, _, _, ret, turns), _ = jax.lax.scan(body, init, jax.random.split(jax.random.PRNGKey(0), 20))
        return ret, turns

    ret, turns = jax.jit(jax.vmap(play))(jnp.arange(n_words))
    assert bool((ret == 1).all()), np.asarray(env.words)[np.asarray(ret) != 1]
    assert int(turns.max()) <= 20


def test_twenty_questions_lm_answerer_slot():
    env = TwentyQuestions(answerer="lm")
    _, s = env.reset_to(datasets.nouns()[0].index("cat"))
    assert "The secret word is: cat." in env.render(s)[1]
    codec = env.codec

    def act(q, a):
        rows = [codec.encode(q), codec.encode(a)]
        m = env.max_action_tokens
        return TextAction(jnp.asarray([(r + [codec.pad_id] * m)[:m] for r in rows]), jnp.asarray([len(r) for r in rows]))

    _, s, r, *_ = env.step(jax.random.PRNGKey(0), s, act("Ask: does it purr?", "ignored"))
    assert s.active.tolist() == [False, True] and "does it purr?\nAnswer: " in env.render(s)[1]
    _, s, r, *_ = env.step(jax.random.PRNGKey(0), s, act("ignored", "Yes, it does."))
    assert s.active.tolist() == [True, False] and env.render(s)[0].endswith("Ask: does it purr?\nYes.\n")
    _, s, r, term, *_ = env.step(jax.random.PRNGKey(0), s, act("Guess: cat", ""))
    assert r.tolist() == [1.0, 1.0] and bool(term.all())


def test_cooperative_writing_band():
    r = band_reward(jnp.array([1.0, 2.0, 2.5, 3.0, 4.0]), 2.0, 3.0, 1.0)
    np.testing.assert_allclose(np.asarray(r), [np.exp(-1), 1, 1, 1, np.exp(-1)], rtol=1e-6)


def test_arithmetic_checked_answer():
    env = make("text/arithmetic", num_agents=4)
    _, s = env.reset(jax.random.PRNGKey(0))
    _, _, r, term, _, info = env.step(jax.random.PRNGKey(0), s, env.make_action(env.answers, jnp.clip(s.answer, -999, 999) + 999))
    in_range = np.abs(np.asarray(s.answer)) <= 999
    assert (np.asarray(r)[in_range] == 1).all() and bool(term.all())
    text = env.render(s)[0]
    expr = text.split("Problem: ")[1].split(" = ?")[0]
    assert eval(expr) == int(s.answer[0])  # the rendered problem is the checked one


GAMES = {  # name: (kwargs, steps so that 256 envs finish >= 1,000 episodes)
    "text/guess_number": ({}, 48),
    "text/tic_tac_toe": ({}, 48),
    "text/twenty_questions": ({}, 88),
    "text/twenty_questions_lm": ({"answerer": "lm"}, 170),
    "text/debate": ({}, 24),
    "text/debate_lm": ({"judge": "lm"}, 28),
    "text/cooperative_writing": ({}, 12),
    "text/arithmetic": ({"num_agents": 2}, 8),
    "text/tokenized_mpe": ({}, 110),
}


@pytest.mark.parametrize("name", list(GAMES))
def test_random_play_jit_vmap_1000_episodes(name):
    """256 envs under jit + vmap with auto-reset play >= 1,000 episodes; half the actions are random junk tokens."""
    kwargs, steps = GAMES[name]
    base = make(name.removesuffix("_lm"), **kwargs)
    env = core.wrap_for_training(base)
    n = 256
    vocab = base.action_space.vocab_size
    m = base.action_space.capacity

    def body(carry, k):
        state, episodes = carry
        k1, k2, k3, k4 = jax.random.split(k, 4)
        inner = state.env_state
        good = jax.vmap(base.random_action)(jax.random.split(k1, n), inner)
        junk = TextAction(jax.random.randint(k2, good.tokens.shape, 0, vocab), jax.random.randint(k3, good.length.shape, -2, m + 5))
        use_junk = jax.random.uniform(k4, (n, 1)) < 0.5
        action = jax.tree.map(lambda g, j: jnp.where(use_junk.reshape(use_junk.shape + (1,) * (g.ndim - 2)), j, g), good, junk)
        obs, state, r, term, trunc, info = jax.vmap(env.step)(jax.random.split(k, n), state, action)
        ok = jnp.isfinite(r).all() & (obs.length >= 0).all() & (obs.length <= base.observation_space.capacity).all()
        return (state, episodes + info["returned_episode"].sum()), ok

    @jax.jit
    def run(key):
        _, state = jax.vmap(env.reset)(jax.random.split(key, n))
        return jax.lax.scan(body, (state, jnp.int32(0)), jax.random.split(key, steps))

    (state, episodes), ok = run(jax.random.PRNGKey(0))
    assert bool(ok.all())
    assert int(episodes) >= 1000, int(episodes)


def test_tokenized_mpe_quantizes_and_reads_actions():
    from jaxmarl_llm.envs.text.tokenized_mpe import TokenizedMPE, quantize

    env = TokenizedMPE("mpe/simple_spread", bins=8)
    obs, state = env.reset(jax.random.PRNGKey(0))
    levels = np.asarray(quantize(state.inner_obs, 8, -2.0, 2.0))
    for a, text in enumerate(env.render(state)):
        numbers = [int(x) for x in text.split("\n")[1].split()]
        assert numbers == levels[a].tolist()
    words = ["up", "Left!", "nonsense"]
    m = env.max_action_tokens
    rows = [env.codec.encode(w) for w in words]
    action = TextAction(jnp.asarray([(r + [0] * m)[:m] for r in rows]), jnp.asarray([len(r) for r in rows]))
    ids, bad = env.parse_actions(action)
    assert ids.tolist() == [4, 1, 0] and bad.tolist() == [False, False, True]
    _, _, reward, _, _, info = env.step(jax.random.PRNGKey(1), state, action)
    assert info["format_error"].tolist() == [False, False, True]


def test_transcript_overflow_is_a_truncation():
    probe = GuessNumber()
    cap = int(probe.init_length[0]) + 30
    env = GuessNumber(capacity=cap)
    _, s = env.reset_to(1000)
    _, s, r, term, trunc, info = env.step(jax.random.PRNGKey(0), s, env.guess_action(jnp.int32(1)))
    assert not bool(trunc[0])  # "Guess: 1" + "Too low." fits
    _, s, r, term, trunc, info = env.step(jax.random.PRNGKey(0), s, env.guess_action(jnp.int32(2)))
    assert bool(trunc[0]) and not bool(term[0]) and int(s.length[0]) == cap and bool(s.overflow[0])
    text = env.render(s)[0]
    assert "Guess: 1\nToo low.\nGuess: 2" in text and not text.endswith("Too low.\n")  # cut mid-feedback


@pytest.mark.parametrize("answerer", ["oracle", "lm"])
def test_twenty_questions_info_bonus_is_the_bits_removed_by_brute_force(answerer):
    """info_bonus: each questioner move earns b x (log2 |before| - log2 |after|) / log2 W over the words the true
    answers still allow (counted here in numpy); a found word leaves nothing, and the bonuses sum to b."""
    b = 0.5
    env = TwentyQuestions(answerer=answerer, max_turns=8, info_bonus=b)
    plain = TwentyQuestions(answerer=answerer, max_turns=8)
    table = np.asarray(env.answers)
    n_words = table.shape[0]
    secret = datasets.nouns()[0].index("cat")
    wrong = next(w for w in range(n_words) if w != secret and (table[w] == table[secret]).sum() > 40)
    moves = [("ask", 0), ("ask", 3), ("guess", wrong), ("ask", 7), ("guess", (secret + 1) % n_words), ("guess", secret)]
    _, s = env.reset_to(secret)
    _, s0 = plain.reset_to(secret)
    possible, total = np.ones(n_words, bool), 0.0
    for kind, i in moves:
        action = env.ask_action(jnp.int32(i)) if kind == "ask" else env.guess_action(jnp.int32(i))
        _, s, r, term, *_ = env.step(jax.random.PRNGKey(0), s, action)
        _, s0, r0, *_ = plain.step(jax.random.PRNGKey(0), s0, action)
        if kind == "ask" and answerer == "lm":  # the answerer tells the truth; the bonus came with the question
            reply = env.answer_action(jnp.bool_(table[secret, i]))
            _, s, ra, *_ = env.step(jax.random.PRNGKey(0), s, reply)
            _, s0, *_ = plain.step(jax.random.PRNGKey(0), s0, reply)
            assert ra.tolist() == [0.0] * env.num_agents
        before = possible.sum()
        if kind == "ask":
            possible &= table[:, i] == table[secret, i]
        else:
            possible[i] = False
            possible &= i != secret
        bits = (np.log2(before) - np.log2(max(possible.sum(), 1))) / np.log2(n_words)
        np.testing.assert_allclose(float(r[0] - r0[0]), b * bits, rtol=1e-5, atol=1e-7)
        if env.num_agents == 2:
            assert float(r[1]) == float(r0[1])  # the answerer gets the game's reward only
        total += float(r[0])
    assert bool(term.all()) and np.isclose(total, 1.0 + b, atol=1e-5)


def test_twenty_questions_expected_bonus_is_the_found_bonus_averaged_over_the_possible_words():
    """bonus="expected": each move earns b x the mean, over every word the answers so far allow, of what the
    "found" bonus would pay were that word the secret (played here word by word); the same whatever the true
    secret; a word already ruled out earns nothing."""
    b = 0.5
    env = TwentyQuestions(max_turns=8, info_bonus=b, bonus="expected")
    found = TwentyQuestions(max_turns=8, info_bonus=b)
    step, step_found = jax.jit(env.step), jax.jit(found.step)
    key = jax.random.PRNGKey(0)
    n_words = len(env.words)
    secret = datasets.nouns()[0].index("cat")

    def play(game, game_step, moves, w):  # the state after `moves` with secret w
        _, s = game.reset_to(w)
        for action in moves:
            _, s, *_ = game_step(key, s, action)
        return s

    def bonus(game_step, s, action):  # the reward less the win's +1
        out = game_step(key, s, action)
        return float(out.reward[0]) - float(out.info["solved"][0])

    for moves in ([], [env.ask_action(jnp.int32(0))],
                  [env.ask_action(jnp.int32(0)), env.ask_action(jnp.int32(5)),
                   env.guess_action(jnp.int32((secret + 3) % n_words))]):
        truth = play(env, step, moves, secret)
        possible = np.flatnonzero(np.asarray(still_possible(env.answers, truth.tried, truth.secret)))
        ruled_out = sorted(set(range(n_words)) - set(possible.tolist()))
        tries = [env.ask_action(jnp.int32(q)) for q in (1, 7, 20)]
        tries += [env.guess_action(jnp.int32(w)) for w in (secret, int(possible[-1]))]
        for action in tries:
            mean = np.mean([bonus(step_found, play(found, step_found, moves, w), action) for w in possible])
            np.testing.assert_allclose(bonus(step, truth, action), mean, rtol=1e-4, atol=1e-6)
        if ruled_out:
            assert bonus(step, truth, env.guess_action(jnp.int32(ruled_out[0]))) == 0.0
    with pytest.raises(ValueError, match="bonus must be one of"):
        TwentyQuestions(bonus="maybe")


def test_twenty_questions_guess_last_leaves_only_guesses_on_the_last_turn():
    env = TwentyQuestions(max_turns=3, guess_last=True, fresh_only=True)
    q, w = env.num_questions, len(env.words)
    _, s = env.reset_to(0)
    for turn in range(3):
        mask = np.asarray(env.candidate_mask(s))[0]
        assert mask[:q].sum() == (0 if turn == 2 else q - turn)  # fresh_only drops the questions already asked
        assert mask[q:q + w].all()
        _, s, *_ = env.step(jax.random.PRNGKey(0), s, env.ask_action(jnp.int32(turn)))
    # free text: a question on the last turn is refused as a format error (penalty, no answer); a guess is played
    free = TwentyQuestions(max_turns=2, guess_last=True, format_penalty=-0.25)
    _, s = free.reset_to(0)
    _, s, *_ = free.step(jax.random.PRNGKey(0), s, free.ask_action(jnp.int32(0)))
    out = free.step(jax.random.PRNGKey(0), s, free.ask_action(jnp.int32(1)))
    assert bool(out.info["format_error"][0]) and float(out.reward[0]) == -0.25 and bool(out.truncated[0])
    assert free.render(out.state)[0].endswith("Invalid. Reply 'Ask: <question>' or 'Guess: <word>'.\n")
    out = free.step(jax.random.PRNGKey(0), s, free.guess_action(jnp.int32(0)))
    assert not bool(out.info["format_error"][0]) and float(out.reward[0]) == 1.0 and bool(out.terminated[0])


@pytest.mark.parametrize("bonus,over_secrets", [("expected", np.mean), ("worst", np.min)])
def test_guess_number_split_bonus_is_the_mean_or_least_over_the_possible_secrets_by_brute_force(bonus, over_secrets):
    """bonus="expected" / "worst": each guess earns b x the bits it removes averaged over (the least over) every
    secret the answers so far allow (counted here by brute force), the same whatever the true secret; the midpoint
    earns the most; a guess outside the interval or a refused reply earns nothing extra."""
    b = 0.5
    env, plain = GuessNumber(split="all", info_bonus=b, bonus=bonus), GuessNumber(split="all")
    step, step0 = jax.jit(env.step), jax.jit(plain.step)

    def brute(low, high, g):
        secrets = np.arange(low, high + 1)
        left = np.where(secrets < g, g - low, np.where(secrets > g, high - g, 0))  # what each answer leaves
        n = len(secrets)
        return over_secrets([np.log2(n) - (np.log2(m) if m else 0.0) for m in left]) / 10 if low <= g <= high else 0.0

    for secret, low, high in ((700, 0, 1023), (700, 513, 767), (5, 3, 9), (9, 9, 9)):
        for g in sorted({low, high, (low + high) // 2, min(high + 3, 1023), max(low - 1, 0), 700}):
            _, s = env.reset_to(secret)
            s = s.replace(low=jnp.int32(low), high=jnp.int32(high))
            _, s0 = plain.reset_to(secret)
            s0 = s0.replace(low=jnp.int32(low), high=jnp.int32(high))
            action = env.guess_action(jnp.int32(g))
            r, r0 = step(jax.random.PRNGKey(0), s, action).reward, step0(jax.random.PRNGKey(0), s0, action).reward
            np.testing.assert_allclose(float(r[0] - r0[0]), b * brute(low, high, g), atol=1e-6, err_msg=str((low, high, g)))
    _, s = env.reset_to(700)
    _, s0 = plain.reset_to(700)
    worth = jax.vmap(lambda g: step(jax.random.PRNGKey(0), s, env.guess_action(g)).reward[0]
                     - step0(jax.random.PRNGKey(0), s0, env.guess_action(g)).reward[0])(jnp.arange(1024))
    assert int(np.argmax(np.asarray(worth))) in (511, 512)  # the midpoints of 0..1023
    bad = TextAction(jnp.asarray([[env.codec.pad_id] * env.max_action_tokens]), jnp.asarray([0]))
    assert step(jax.random.PRNGKey(0), s, bad).reward.tolist() == [-1.0]
    with pytest.raises(ValueError, match="bonus must be one of"):
        GuessNumber(bonus="maybe")


def test_guess_number_info_bonus_is_the_interval_bits_by_brute_force():
    """info_bonus: each guess earns b x the bits it removes from the secrets the answers allow (counted here by
    brute force over 0..1023); binary search's rounds find all 10 bits; an invalid guess earns nothing extra."""
    b = 0.5
    env, plain = GuessNumber(split="all", info_bonus=b), GuessNumber(split="all")
    secret = 700
    _, s = env.reset_to(secret)
    _, s0 = plain.reset_to(secret)
    allowed, total = np.ones(1024, bool), 0.0
    for g in [512, 900, 600, 800, 1023, 650, 700]:
        action = env.guess_action(jnp.int32(g))
        _, s, r, term, *_ = env.step(jax.random.PRNGKey(0), s, action)
        _, s0, r0, *_ = plain.step(jax.random.PRNGKey(0), s0, action)
        before = allowed.sum()
        allowed &= (np.arange(1024) < g) if g > secret else (np.arange(1024) > g) if g < secret else False
        bits = (np.log2(before) - np.log2(max(allowed.sum(), 1))) / 10
        np.testing.assert_allclose(float(r[0] - r0[0]), b * bits, atol=1e-6)
        total += float(r[0])
    assert bool(term[0]) and np.isclose(total, 1.0 + b, atol=1e-5)
    _, s = env.reset_to(secret)
    bad = TextAction(jnp.asarray([[env.codec.pad_id] * env.max_action_tokens]), jnp.asarray([0]))
    _, s, r, *_ = env.step(jax.random.PRNGKey(0), s, bad)
    assert r.tolist() == [-1.0]
    ret, turns, done = jax.jit(jax.vmap(lambda x: _binary_search(env, x)))(jnp.arange(1023))
    np.testing.assert_allclose(np.asarray(ret), 1.0 + b, atol=1e-5)  # every bit found, every secret but 1023
