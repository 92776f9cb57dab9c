"""The calculator tool env: the call's result in the transcript, the rewards (by brute force), the split, the
format-only teacher's lack of skill, and the expert's transcript."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.data.teachers import make_script
from jaxmarl_llm.envs import registry
from jaxmarl_llm.envs.text import parsing
from jaxmarl_llm.envs.text.calculator import Calculator
from jaxmarl_llm.envs.text.codec import NONE, text_codes
from jaxmarl_llm.tokenizers import GAMES_BPE, HFTokenizer


@pytest.fixture(scope="module")
def bpe():
    return HFTokenizer(GAMES_BPE)


def _share(guess: str, truth: str) -> float:
    """The brute-force digit credit: digits equal at their places counted from the first, over the longer."""
    return sum(x == y for x, y in zip(guess, truth)) / max(len(guess), len(truth))


def _units_share(guess: int, truth: int) -> float:
    """The same with places counted from the units."""
    return _share(str(guess)[::-1], str(truth)[::-1])


def _chars(text: str, size: int = 40):
    c = np.full(size, NONE, np.int32)
    codes = text_codes(text)
    c[: len(codes)] = codes
    return jnp.asarray(c), jnp.int32(len(codes))


@pytest.mark.parametrize("text,expected", [
    ("calc: 37*91", (37, 2, 91, True)), ("Calc:37 * 91", (37, 2, 91, True)), (" calc: 37-91 ", (37, 1, 91, True)),
    ("calc: 37*91x", None), ("x calc: 37*91", None), ("calc: 37*", None), ("calc: *91", None),
    ("calc: 37*:91", None), ("calc: 37 91", None), ("calc:", None), ("calc: 1234567890*2", None),
])
def test_parse_call_reads_exactly_one_call(text, expected):
    call = parsing.parse_call(*_chars(text), "calc", "+-*")
    assert (call.a.item(), call.op.item(), call.b.item(), call.ok.item()) == (expected or (0, 0, 0, False))
    if expected:  # where the numbers are written: 'calc: 37*91' -> 37 at [6, 8), '*' at 8, 91 at [9, 11)
        spans = (int(call.a_span[0]), int(call.a_span[1]), int(call.op_at), int(call.b_span[0]), int(call.b_span[1]))
        lo = text.lower()
        assert lo[spans[0]:spans[1]] == "37" and lo[spans[2]] in "+-*" and lo[spans[3]:spans[4]] == "91"


def _play(env, script, key, params=None):
    """One episode of `script`: (transcript, total reward, solved)."""
    obs, state = env.reset(key)
    memory = script.init(state)
    total, solved = 0.0, False
    step = jax.jit(env.step)
    for t in range(env.max_turns):
        key, k_act, k_step = jax.random.split(key, 3)
        action, _, memory = script.act(k_act, memory, state)
        out = step(k_step, state, action)
        state, total, solved = out.state, total + float(out.reward[0]), solved or bool(out.info["solved"][0])
        if bool(out.terminated[0] | out.truncated[0]):
            break
    return env.render(state)[0], total, solved


@pytest.mark.parametrize("digits", [1, 4])
def test_the_calculator_writes_the_product_and_the_expert_copies_it(bpe, digits):
    env = registry.make("text/calculator", tokenizer=bpe, digits=digits)
    text, total, solved = _play(env, make_script("text/calculator", env), jax.random.PRNGKey(3))
    _, state = env.reset(jax.random.PRNGKey(3))
    a, b = int(state.a), int(state.b)
    assert int(state.low) <= min(a, b) and max(a, b) <= 10 ** digits - 1
    assert text.endswith(f"What is {a} * {b}?\ncalc: {a}*{b}\n= {a * b}\nAnswer: {a * b}")
    assert solved and total == 1.0


@pytest.mark.parametrize("compact", [False, True])
def test_a_compact_problem_puts_every_digit_of_the_call_at_one_distance_from_the_digit_it_copies(bpe, compact):
    """Token distances (the games' BPE) from each problem digit to the call digit that copies it: one distance for
    all four with compact_problem, the first operand's two tokens further back with the spaced `*`."""
    env = registry.make("text/calculator", tokenizer=bpe, digits=2, compact_problem=compact)
    _, state = env.reset_to(37, 91)
    state = env.step(jax.random.PRNGKey(0), state, env.call_action(jnp.int32(37), jnp.int32(91))).state
    assert env.render(state)[0].endswith(f"What is {'37*91' if compact else '37 * 91'}?\ncalc: 37*91\n= 3367\n")
    ids = np.asarray(state.buf[0, : int(state.length[0])])
    words = [bpe.decode([int(i)]) for i in ids]
    digits = [i for i, w in enumerate(words) if w in tuple("0123456789")]  # each digit one token
    problem, call = digits[:4], digits[4:8]
    assert "".join(words[i] for i in problem) == "".join(words[i] for i in call) == "3791"
    distances = [c - p for p, c in zip(problem, call)]
    assert distances == ([distances[0]] * 4 if compact else [distances[2] + 2] * 2 + [distances[2]] * 2)


@pytest.mark.parametrize("field", [False, True])
def test_a_result_field_puts_every_digit_of_a_copy_at_one_distance_from_the_digit_it_copies(bpe, field):
    """Token distances from each digit of the calculator's result to the answer digit that copies it, for a 4-digit
    and a 3-digit product: one distance for both with result_field (the result left-aligned in four places, a space
    after a 3-digit one), one more for the longer result without."""
    env = registry.make("text/calculator", tokenizer=bpe, digits=2, compact_problem=True, result_field=field)
    spans = {}
    for a, b in ((37, 91), (12, 34)):
        _, state = env.reset_to(a, b)
        for action in (env.call_action(jnp.int32(a), jnp.int32(b)), env.answer_action(jnp.int32(a * b))):
            out = env.step(jax.random.PRNGKey(0), state, action)
            state = out.state
        assert bool(out.info["solved"][0])
        result = f"{a * b:<4}" if field else f"{a * b}"
        assert env.render(state)[0].endswith(f"calc: {a}*{b}\n= {result}\nAnswer: {a * b}"), env.render(state)[0]
        words = [bpe.decode([int(i)]) for i in np.asarray(state.buf[0, : int(state.length[0])])]
        digits = [i for i, w in enumerate(words) if w in tuple("0123456789")]
        n = len(str(a * b))
        shown, copy = digits[-2 * n:-n], digits[-n:]  # the result's digits, then the answer's
        assert "".join(words[i] for i in shown) == "".join(words[i] for i in copy) == str(a * b)
        spans[n] = {c - r for r, c in zip(shown, copy)}
    assert len(spans[4]) == len(spans[3]) == 1  # each copy at one distance
    assert (spans[4] == spans[3]) if field else (min(spans[4]) == min(spans[3]) + 1)


def test_rewards_format_errors_and_turn_limit(bpe):
    env = Calculator(tokenizer=bpe, max_turns=2)
    step = jax.jit(env.step)
    _, s = env.reset_to(1234, 5678)
    out = step(jax.random.PRNGKey(0), s, env.call_action(jnp.int32(12), jnp.int32(3)))
    assert float(out.reward[0]) == 0.0 and int(out.state.result) == 36 and not bool(out.terminated[0])
    assert env.render(out.state)[0].endswith("calc: 12*3\n= 36\n")
    wrong = step(jax.random.PRNGKey(0), out.state, env.answer_action(jnp.int32(36)))
    assert float(wrong.reward[0]) == 0.0 and bool(wrong.terminated[0]) and not bool(wrong.info["solved"][0])
    bad = env.answer_action(jnp.int32(5)).replace(length=jnp.int32([2]))  # "Answer" cut before its number
    out = step(jax.random.PRNGKey(0), s, bad)
    assert float(out.reward[0]) == -1.0 and bool(out.info["format_error"][0]) and not bool(out.terminated[0])
    assert env.render(out.state)[0].endswith("Invalid. Reply 'calc: A*B' or 'Answer: N'.\n")
    last = step(jax.random.PRNGKey(0), out.state, env.call_action(jnp.int32(1234), jnp.int32(5678)))
    assert bool(last.truncated[0]) and float(last.reward[0]) == 0.0  # two turns, no answer
    head = Calculator(tokenizer=bpe, tool=False)
    _, s = head.reset_to(1234, 5678)
    out = jax.jit(head.step)(jax.random.PRNGKey(0), s, head.call_action(jnp.int32(1234), jnp.int32(5678)))
    assert bool(out.info["format_error"][0]) and float(out.reward[0]) == -1.0  # no calculator: a call is refused
    right = jax.jit(head.step)(jax.random.PRNGKey(0), s, head.answer_action(jnp.int32(1234 * 5678)))
    assert float(right.reward[0]) == 1.0 and bool(right.info["solved"][0])


def test_digit_credit_by_brute_force(bpe):
    """A wrong answer earns b x its digits in place over the longer number; the first call earns b x the share
    of the problem's 9 characters (4 + '*' + 4) it names, each character's part on its token; a later call
    earns nothing."""
    b = 0.5
    env = Calculator(tokenizer=bpe, call_credit=b, answer_credit=b)
    step = jax.jit(env.step)

    _, s = env.reset_to(1234, 5678)
    product = 1234 * 5678
    for guess in (product + 1, product + 10_000, product // 10, 7016652, 1, product * 10 + 2):
        r = step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(guess))).reward[0]
        np.testing.assert_allclose(float(r), b * _units_share(guess, product), atol=1e-6, err_msg=str(guess))
    near = step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(product + 10)))  # 7006662: the tens wrong
    pieces = [bpe.decode([int(t)]) for t in np.asarray(env.answer_action(jnp.int32(product + 10)).tokens[0])]
    paid = np.asarray(near.info["token_reward"][0])
    assert [pieces[i] for i in np.flatnonzero(paid)] == list("700662")  # every digit but the tens, on its token
    np.testing.assert_allclose(paid.sum(), float(near.reward[0]), atol=1e-6)
    assert float(step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(-product))).reward[0]) == 0.0
    assert float(step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(product))).reward[0]) == 1.0
    out = step(jax.random.PRNGKey(0), s, env.call_action(jnp.int32(1299), jnp.int32(5078)))  # 2 + 1 + 3 of 9
    np.testing.assert_allclose(float(out.reward[0]), b * 6 / 9, atol=1e-6)
    # each right character's part on the token that wrote it: calc : _ 1 2 9 9 * 5 0 7 8 (digits one token each)
    pieces = [bpe.decode([int(t)]) for t in np.asarray(env.call_action(jnp.int32(1299), jnp.int32(5078)).tokens[0])]
    paid = np.asarray(out.info["token_reward"][0])
    assert {pieces[i] for i in np.flatnonzero(paid)} == {"1", "2", "*", "5", "7", "8"} and paid.max() == paid.min(
        where=paid > 0, initial=1.0)
    np.testing.assert_allclose(paid.sum(), b * 6 / 9, atol=1e-6)
    again = step(jax.random.PRNGKey(0), out.state, env.call_action(jnp.int32(1234), jnp.int32(5678)))
    assert float(again.reward[0]) == 0.0 and not np.asarray(again.info["token_reward"]).any()  # only the first


def test_lead_alignment_counts_an_answers_places_from_its_first_digit_by_brute_force(bpe):
    """answer_align="lead": a wrong answer earns b x its digits that match the product's read from the leading
    digit (a copy cut short keeps what it wrote), over the longer number, each digit's part on its token; the
    answer credit and the copy credit both; a bad alignment is refused."""
    b = 0.5
    env = Calculator(tokenizer=bpe, answer_credit=b, answer_align="lead")
    step = jax.jit(env.step)

    _, s = env.reset_to(1234, 5678)
    product = 1234 * 5678  # 7006652
    for guess in (product + 1, product // 10, product // 1000, product * 10 + 2, 7106652, 1, 3006652):
        r = step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(guess))).reward[0]
        np.testing.assert_allclose(float(r), b * _share(str(guess), str(product)), atol=1e-6, err_msg=str(guess))
    short = env.answer_action(jnp.int32(7006))  # the first four digits: 4 of 7 from the lead, none from the units
    out = step(jax.random.PRNGKey(0), s, short)
    pieces = [bpe.decode([int(t)]) for t in np.asarray(short.tokens[0])]
    assert [pieces[i] for i in np.flatnonzero(np.asarray(out.info["token_reward"][0]))] == list("7006")
    np.testing.assert_allclose(float(out.reward[0]), b * 4 / 7, atol=1e-6)
    units = Calculator(tokenizer=bpe, answer_credit=b)
    assert float(jax.jit(units.step)(jax.random.PRNGKey(0), units.reset_to(1234, 5678)[1], short).reward[0]) == 0.0
    copy = Calculator(tokenizer=bpe, copy_credit=b, answer_align="lead")
    called = jax.jit(copy.step)(jax.random.PRNGKey(0), copy.reset_to(1234, 5678)[1],
                                copy.call_action(jnp.int32(1299), jnp.int32(5078))).state  # = 6596322
    out = jax.jit(copy.step)(jax.random.PRNGKey(0), called, copy.answer_action(jnp.int32(659)))
    np.testing.assert_allclose(float(out.reward[0]), b * 3 / 7, atol=1e-6)
    with pytest.raises(ValueError, match="answer_align must be one of"):
        Calculator(tokenizer=bpe, answer_align="tens")


def test_both_alignments_pay_the_mean_of_the_units_and_the_lead_credit_by_brute_force(bpe):
    """answer_align="both": a wrong answer earns b x the mean of its units-aligned and lead-aligned shares (each over
    the longer number), so an answer whose length is off keeps what either alignment finds, and an answer written
    twice over earns half; the right answer earns 1."""
    b = 0.5
    env = Calculator(tokenizer=bpe, answer_credit=b, answer_align="both")
    step = jax.jit(env.step)

    for a, c, guesses in ((1234, 5678, (7006653, 700665, 70066520, 9006652, 6652, 1, 87006652)),
                          (12, 34, (408408, 4080, 8, 48))):
        _, s = env.reset_to(a, c)
        t = str(a * c)
        for guess in guesses:
            g = str(guess)
            r = step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(guess))).reward[0]
            np.testing.assert_allclose(float(r), b * (_share(g, t) + _share(g[::-1], t[::-1])) / 2, atol=1e-6,
                                       err_msg=f"{guess} for {t}")
    _, s = env.reset_to(12, 34)
    twice = step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(408408))).reward[0]
    np.testing.assert_allclose(float(twice), b * 0.5, atol=1e-6)
    assert float(step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(408))).reward[0]) == 1.0


def test_copy_credit_pays_an_answer_for_the_calculators_result_by_brute_force(bpe):
    """After a call, an answer earns e x the share of the calculator's last result it repeats at its places, each
    digit's part on its token, whether or not the call was right; before any call it earns nothing of it; the
    right answer after the right call earns 1 + e."""
    e = 0.5
    env = Calculator(tokenizer=bpe, copy_credit=e)
    step = jax.jit(env.step)

    _, s = env.reset_to(1234, 5678)
    wrong = step(jax.random.PRNGKey(0), s, env.call_action(jnp.int32(1299), jnp.int32(5078))).state
    result = 1299 * 5078
    for guess in (result, result + 10, result // 10, 1234 * 5678, 5, -result):
        out = step(jax.random.PRNGKey(0), wrong, env.answer_action(jnp.int32(guess)))
        want = e * _units_share(guess, result) * (guess > 0)
        np.testing.assert_allclose(float(out.reward[0]), want + (guess == 1234 * 5678), atol=1e-6, err_msg=str(guess))
        np.testing.assert_allclose(float(np.asarray(out.info["token_reward"][0]).sum()), want, atol=1e-6)
    near = step(jax.random.PRNGKey(0), wrong, env.answer_action(jnp.int32(result + 10)))  # the tens wrong
    pieces = [bpe.decode([int(t)]) for t in np.asarray(env.answer_action(jnp.int32(result + 10)).tokens[0])]
    written = [pieces[i] for i in np.flatnonzero(np.asarray(near.info["token_reward"][0]))]
    assert written == [c for i, c in enumerate(str(result + 10)) if i != len(str(result)) - 2]
    assert float(step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(result))).reward[0]) == 0.0  # no call
    right = step(jax.random.PRNGKey(0), s, env.call_action(jnp.int32(1234), jnp.int32(5678))).state
    out = step(jax.random.PRNGKey(0), right, env.answer_action(jnp.int32(1234 * 5678)))
    assert bool(out.info["solved"][0]) and float(out.reward[0]) == pytest.approx(1 + e)


def test_the_split_holds_out_a_fifth_of_the_pairs(bpe):
    keys = jax.random.split(jax.random.PRNGKey(0), 2000)
    for split, held in (("train", False), ("test", True)):
        env = Calculator(tokenizer=bpe, split=split)
        a, b, _ = jax.vmap(env.problem)(keys)
        assert np.all(((np.asarray(a) + np.asarray(b)) % 5 == 0) == held), split
        assert np.all((1000 <= np.asarray(b)) & (np.asarray(b) <= 9999))
    # the in-graph evaluation's starts: held-out problems of every length, drawn from the episode number alone
    env = Calculator(tokenizer=bpe, digits=(1, 2), split="train")
    _, s = jax.vmap(env.heldout_start)(jnp.arange(400))
    a, b = np.asarray(s.a), np.asarray(s.b)
    assert np.all((a + b) % 5 == 0) and set(np.unique(np.asarray(s.high))) == {9, 99}
    np.testing.assert_array_equal(np.asarray(jax.vmap(env.heldout_start)(jnp.arange(400))[1].a), a)
    with pytest.raises(ValueError, match="split must be"):
        Calculator(tokenizer=bpe, split="dev")


def test_the_format_only_teacher_has_no_skill(bpe):
    """The random tool user's transcripts (the format warm start's data) solve no problem and use the format:
    calls on random operands about half the time before the last turn, every reply parsed."""
    env = Calculator(tokenizer=bpe)
    script = make_script("text/calculator", env, teacher="random")
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 512))
    solved = calls = errors = 0
    for t in range(env.max_turns):
        keys = jax.random.split(jax.random.PRNGKey(t + 1), 512)
        action, target, _ = jax.vmap(script.act, in_axes=(0, None, 0))(keys, jnp.zeros((), jnp.int32), state)
        out = jax.vmap(env.step)(keys, state, action)
        state = out.state
        solved += int(out.info["solved"].sum())
        calls += int(out.info["called"].sum())
        errors += int(out.info["format_error"].sum())
    assert solved == 0 and errors == 0
    assert 0.35 * 512 < calls < 0.9 * 512  # turn 1: half call; turn 2: half of those call again


def test_a_mixture_of_lengths_draws_each_and_grades_calls_by_their_own_length(bpe):
    env = Calculator(tokenizer=bpe, digits=(1, 2, 3, 4), call_credit=0.5)
    a, b, digits = jax.vmap(env.problem)(jax.random.split(jax.random.PRNGKey(0), 400))
    a, b, digits = np.asarray(a), np.asarray(b), np.asarray(digits)
    assert set(digits.tolist()) == {1, 2, 3, 4}
    for x in (a, b):
        assert np.all(np.where(digits == 1, (x >= 2) & (x <= 9), (x >= 10 ** (digits - 1)) & (x < 10 ** digits)))
    _, s = env.reset_to(37, 52, 2)
    step = jax.jit(env.step)
    out = step(jax.random.PRNGKey(0), s, env.call_action(jnp.int32(31), jnp.int32(152)))  # 3 + '*' of 2 + 1 + 3
    np.testing.assert_allclose(float(out.reward[0]), 0.5 * (1 + 1 + 2) / (2 + 1 + 3), atol=1e-6)
    assert env.render(out.state)[0].endswith("What is 37 * 52?\ncalc: 31*152\n= 4712\n")
    for k in range(4):
        _, total, solved = _play(env, make_script("text/calculator", env), jax.random.PRNGKey(k))
        assert solved and total == 1.5  # the call's full credit and the product


def test_candidates_list_every_call_and_answer_and_the_last_turn_answers(bpe):
    """candidates=True: every product call of the range and every answer in range, the expert's replies among
    them; answer_last: on the last turn only answers are valid, and a call there is a format error."""
    env = Calculator(tokenizer=bpe, digits=1, max_turns=2, candidates=True, answer_last=True)
    rows = {tuple(r) for r in env.action_candidates}
    assert len(env.action_candidates) == 64 + (81 - 4 + 1) and env.num_calls == 64
    _, s = env.reset_to(7, 8)
    expert = make_script("text/calculator", env)
    action, _, _ = expert.act(jax.random.PRNGKey(0), expert.init(s), s)
    assert tuple(np.asarray(action.tokens[0, : int(action.length[0])]).tolist()) in rows  # calc: 7*8
    assert bool(env.candidate_mask(s).all())
    out = env.step(jax.random.PRNGKey(0), s, action)
    mask = np.asarray(env.candidate_mask(out.state))[0]
    assert not mask[:64].any() and mask[64:].all()
    again = env.step(jax.random.PRNGKey(0), out.state, env.call_action(jnp.int32(7), jnp.int32(8)))
    assert bool(again.info["format_error"][0]) and float(again.reward[0]) == -1.0 and bool(again.truncated[0])
    plain = Calculator(tokenizer=bpe, digits=1)
    assert plain.candidate_mask(plain.reset_to(7, 8)[1]).shape == (1, 0)  # free text: no candidates
    with pytest.raises(ValueError, match="at most 2 digits"):
        Calculator(tokenizer=bpe, digits=3, candidates=True)


def test_length_cost_charges_each_surplus_leading_digit_of_a_wrong_answer(bpe):
    """length_cost=c: a wrong answer longer than the product pays c / len(product) for each extra digit, on the
    leading digits' tokens (a padded copy, `977773627` for 3627, loses 5/4 x c there); the right answer and a
    short one pay nothing for length."""
    b, c = 0.5, 0.5
    env = Calculator(tokenizer=bpe, answer_credit=b, length_cost=c)
    step = jax.jit(env.step)
    _, s = env.reset_to(93, 39)  # 3627
    padded = env.answer_action(jnp.int32(977773627))
    out = step(jax.random.PRNGKey(0), s, padded)
    np.testing.assert_allclose(float(out.reward[0]), b * 4 / 9 - c * 5 / 4, atol=1e-6)
    pieces = [bpe.decode([int(t)]) for t in np.asarray(padded.tokens[0])]
    paid = np.asarray(out.info["token_reward"][0])
    assert "".join(pieces[i] for i in np.flatnonzero(paid < 0)) == "97777"
    assert "".join(pieces[i] for i in np.flatnonzero(paid > 0)) == "3627"
    np.testing.assert_allclose(float(step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(627))).reward[0]),
                               b * 3 / 4, atol=1e-6)
    assert float(step(jax.random.PRNGKey(0), s, env.answer_action(jnp.int32(3627))).reward[0]) == 1.0


def test_the_attention_tool_reads_each_call_digit_and_leaves_the_model_as_it_was():
    """tools/calculator_attention.py on a random model: per layer, every query's weights are a distribution over
    the positions up to it; each of the four call digits is found in every transcript; the forward it reads is
    the model's own (the logits equal the compiled forward's) and the attention is restored after it."""
    import importlib.util
    import os

    from configs import calculator

    from jaxmarl_llm.models import attention
    from jaxmarl_llm.train import lm_rl

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("calculator_attention",
                                                  os.path.join(root, "tools", "calculator_attention.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    config = calculator.get_config("")
    config.model.checkpoint, config.mesh.num_devices = "", 1  # a random tiny model of the config's size
    trainer = lm_rl.make_train(config)
    lora = jax.tree.map(lambda x: x[0], trainer.init(jax.random.PRNGKey(0), trainer.hparams).trainable["lora"])
    forward = attention._gqa_forward
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 500, (2, config.env_kwargs["capacity"])))
    with tool.recorded_attention() as calls:
        eager = trainer.policy.logits(trainer.base, {"lora": lora}, tokens)
    assert attention._gqa_forward is forward
    np.testing.assert_allclose(eager, jax.jit(trainer.policy.logits)(trainer.base, {"lora": lora}, tokens),
                               atol=2e-4)
    layers = tool.per_layer(calls)
    assert len(layers) == trainer.policy.cfg.num_layers
    for weights in layers:  # [B, H, L, S]
        length = tokens.shape[1]
        assert weights.shape[2] == length
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        later = np.arange(weights.shape[-1])[None, :] > np.arange(length)[:, None]  # [L, S]
        assert np.all(weights[:, :, later] < 1e-6)
    found = tool.call_attention(trainer, lora, trainer.base, episodes=4, seed=0)
    assert sorted(found) == [(d, layer) for d in tool.CALL_DIGITS for layer in range(len(layers))]
    for right, own, problem in found.values():
        assert 0.0 <= right <= 1.0 and own.shape == problem.shape == (trainer.policy.cfg.num_heads,)
        assert np.all(own <= problem + 1e-6)
