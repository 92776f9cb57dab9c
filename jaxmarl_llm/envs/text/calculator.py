"""Calculator: a product too long to work out in one's head, and a tool that works it out.

One agent, up to `max_turns` replies. The prompt asks for `A * B` (each operand `digits` digits long; one digit:
2..9, no product a constant answer finds; `digits=(1, 2, 3, 4)`, a curriculum by mixture, draws each episode's
length from the tuple, so short problems teach what long ones need). A reply
is a tool call `calc: X*Y` (also `+`, `-`), whose result the env appends (`= 17929`) before the agent's next
turn, or `Answer: N`, which ends the episode: +1 when N is the product, 0 otherwise. Anything else is a format
error (`format_penalty`, default -1; an `Invalid.` line is appended and the episode goes on). With `tool=False`
the prompt offers no calculator and a call is a format error: the same task answered in one's head.

`answer_last=True` makes the last turn an answer (a call there is a format error). `candidates=True` (operands of
at most 2 digits) lists every product call and every answer in range as `action_candidates`, so
`policy.actions="constrained"` samples well-formed replies from a random model with no format stage (with
`answer_last`, only answers on the last turn).

The calculator is pure JAX (the product of two 9-digit-or-less integers in int32 range), so the episode stays a
jittable state machine; `envs/host` is for tools that need the host.

Dense rewards for a policy that has not yet found the product (default 0, off): `call_credit=c` pays the first call
c x the share of the problem's characters it names at their places (the operands' digits, units with units, and the
`*`), each character's part paid to the token that wrote it (`info["token_reward"]`: with `config.credit="token"`
each digit of a call is credited for itself, not the call as a whole); `answer_credit=d` pays a wrong answer d x the
share of the product's digits it has at their places, each digit's part to its token too (`answer_align="units"`
counts places from the units, `"lead"` from the leading digit: the order a copy is written in, where a copy one
digit short keeps the digits it wrote; `"both"` pays the mean of the two: an answer whose units are right keeps
half their credit while its length is off, a copy read from the leading digit earns the other half);
`length_cost=l` charges a wrong answer l / the product's length for each digit it has beyond that length, on its
leading digits' tokens (a padded copy, `977773627` for 3627, loses 5/4 x l). The right answer earns 1 whatever they
are. `copy_credit=e` pays an answer given after a call e x the share of the calculator's last result it repeats at
its places (each digit's part to its token), right or wrong: a reward for using the tool's output, whatever the
call asked. Without it a policy can answer small products from memory (paid +1 on the training pairs whether its
call was right or not) and never learn to read the result, which is what the held-out pairs need; with it reading
the result pays from the first random call on. (`answer_credit` has a trap: a constant answer earns the most common
digits' share, a steady reward that a policy settles on before any call is right; `call_credit` alone has none,
every constant call earns chance.)

`compact_problem=True` writes the problem as a call writes it (`What is 95*66?`, not `95 * 66`): every digit of
the right call then sits at one distance from the digit it copies, so one attention offset can read them all. With
the spaced problem the first operand's digits are two tokens further back than the second's, and a layer-0 query
(which sees only its own token) that reads the second operand's units from the tens digit just written lands on
the spaced `*` when asked for the first operand's units: a policy can learn three digits of the call and leave
that one at chance, where no head reads the problem and the policy gradient on that attention is ~0
(docs/results.md, tool use).

`result_field=True` writes the calculator's result left-aligned in as many places as the longest product has,
a space in each place it leaves (`= 627 ` and `= 3627` with 2-digit operands): the answer starts at one distance
from the result's first place whatever the result's length, so every digit of a copy sits at one distance from the
digit it copies, and the first space after the result is where the copy ends. Without it that distance is the
result's length plus a constant: one attention offset copies the 3-digit results and misreads the 4-digit ones.

Problems come from a fixed split: a pair (A, B) is held out when A + B is a multiple of 5 (`split="test"`, a
fifth of the pairs); `split="train"` draws the others.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxmarl_llm.envs.text import buffers, parsing
from jaxmarl_llm.envs.text.base import TOKEN_REWARD, TextEnv, TextParams, TextState, declare_info_ratios
from jaxmarl_llm.envs.text.buffers import TextAction

PROMPT_TOOL = "Multiply. Reply 'calc: A*B' to use a calculator, or 'Answer: N'.\n"
PROMPT_HEAD = "Multiply. Reply 'Answer: N'.\n"
OPS = "+-*"
TIMES = OPS.index("*")
# pieces the env and its scripted players assemble: digits first (row d is the digit d)
WORDS = ("What is ", " * ", "?\n", "= ", "\n", "calc: ", "*", "Answer: ", "-",
         "Invalid. Reply 'calc: A*B' or 'Answer: N'.\n", " ")
WHAT, TIMES_SPACED, QUESTION, EQUALS, NEWLINE, CALL, STAR, ANSWER, MINUS, INVALID, SPACE = range(10, 21)
ALIGNS = {"units": (False,), "lead": (True,), "both": (False, True)}  # `answer_align`: from the leading digit? (mean)
MAX_RESULT_DIGITS = 9  # int32 holds every product of two 4-digit numbers (and the parser reads 9 digits)

declare_info_ratios(call_rate=("called", "moved"))


@struct.dataclass
class CalculatorParams(TextParams):
    max_steps: int = 3
    format_penalty: float = -1.0


@struct.dataclass
class CalculatorState(TextState):
    a: jax.Array  # [] int32: the operands
    b: jax.Array  # [] int32
    low: jax.Array  # [] int32: this episode's operands are in low..high
    high: jax.Array  # [] int32
    result: jax.Array  # [] int32: the calculator's last answer (0 before any call)
    graded: jax.Array  # [] bool: a call has been paid its call_credit (only the first is)


def digits_of(value: jax.Array, width: int) -> tuple[jax.Array, jax.Array]:
    """|value|'s decimal digits, most significant first, right-aligned in [width] (leading places -1), and their
    count (0 has one digit)."""
    v = jnp.abs(value)
    place = jnp.asarray(10, jnp.int32) ** jnp.arange(width - 1, -1, -1)  # [W]
    d = (v // place) % 10
    count = jnp.maximum(jnp.sum(v >= place), 1)
    return jnp.where(jnp.arange(width) >= width - count, d, -1), count


def in_place(chars: jax.Array, span: tuple[jax.Array, jax.Array], truth: jax.Array,
             lead: bool = False) -> tuple[jax.Array, jax.Array]:
    """(right [C] bool: each digit written in chars[span] that is `truth`'s digit at the same place, units with
    units, or with `lead` the leading digit with the leading digit (the order a copy is written in); the longer of
    the written number and `truth`, in digits): a digit too many or too few costs its place."""
    start, end = span
    pos = jnp.arange(chars.shape[0])
    _, length = digits_of(truth, MAX_RESULT_DIGITS)
    place = length - 1 - (pos - start) if lead else end - 1 - pos
    want = (truth // jnp.asarray(10, jnp.int32) ** jnp.clip(place, 0, MAX_RESULT_DIGITS - 1)) % 10
    right = (pos >= start) & (pos < end) & (place >= 0) & (place < length) & (chars - ord("0") == want)
    return right, jnp.maximum(end - start, length)


def operand_range(digits: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The operands of `digits` digits: (low, high); one digit is 2..9."""
    high = jnp.asarray(10, jnp.int32) ** digits - 1
    return jnp.where(digits == 1, 2, (high + 1) // 10), high


class Calculator(TextEnv):
    def __init__(self, tokenizer=None, digits: int | tuple[int, ...] = 4, max_turns: int = 3, tool: bool = True,
                 call_credit: float = 0.0, answer_credit: float = 0.0, copy_credit: float = 0.0, split: str = "train",
                 capacity: int = 160, max_action_tokens: int = 16, candidates: bool = False, answer_last: bool = False,
                 answer_align: str = "units", length_cost: float = 0.0, compact_problem: bool = False,
                 result_field: bool = False):
        super().__init__(tokenizer, ("solver",), capacity, max_action_tokens)
        if answer_align not in ALIGNS:
            raise ValueError(f"answer_align must be one of {list(ALIGNS)}, got {answer_align!r}")
        self.leads = ALIGNS[answer_align]  # an answer's digit credits count places from its first digit, or units
        self.sizes = tuple(int(d) for d in digits) if isinstance(digits, (tuple, list)) else (int(digits),)
        if not self.sizes or any(not 1 <= d <= 4 for d in self.sizes):
            raise ValueError(f"digits must be in 1..4 (products stay in int32), got {digits!r}")
        digits = max(self.sizes)
        if split not in ("train", "test", "all"):
            raise ValueError(f"split must be one of ['all', 'test', 'train'], got {split!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.digits, self.max_turns, self.tool, self.split = digits, int(max_turns), bool(tool), split
        self.call_credit, self.answer_credit = float(call_credit), float(answer_credit)
        self.copy_credit = float(copy_credit)
        self.length_cost = float(length_cost)
        self.sign = STAR if compact_problem else TIMES_SPACED  # the problem's `*`: as a call writes it, or spaced
        self.answer_last = bool(answer_last)  # the last turn must answer: a call there is a format error
        self.result_field = bool(result_field)  # results left-aligned in 2 x digits places, spaces after
        self.pieces = self.codec.table([str(d) for d in range(10)] + list(WORDS))
        longest = len(self.codec.encode("calc: " + "9" * digits + "*" + "9" * digits))
        if longest > max_action_tokens:
            raise ValueError(f"max_action_tokens={max_action_tokens} cannot hold a call ({longest} tokens)")
        if candidates:  # every well-formed product call and every answer in range (policy.actions="constrained")
            if digits > 2:
                raise ValueError(f"candidates lists every call: at most 2 digits (about 18 000 replies), got {digits}")
            bounds = [tuple(map(int, operand_range(jnp.int32(d)))) for d in self.sizes]  # (low, high) per length
            calls = [f"calc: {x}*{y}" for lo, hi in bounds for x in range(lo, hi + 1) for y in range(lo, hi + 1)]
            smallest, largest = min(lo for lo, _ in bounds) ** 2, max(hi for _, hi in bounds) ** 2
            answers = [f"Answer: {v}" for v in range(smallest, largest + 1)]
            self.action_candidates = self._action_table((calls if tool else []) + answers).rows()
            self.num_calls = len(calls) if tool else 0
        problem = 2 * digits + 3  # "What is ", A, " * ", B, "?\n" in pieces
        said = MAX_RESULT_DIGITS + 4  # "\n", "= ", a sign, the digits, "\n"
        self._setup([self.codec.encode(PROMPT_TOOL if tool else PROMPT_HEAD)],
                    [problem * self.pieces.width, said * self.pieces.width])

    @property
    def default_params(self) -> CalculatorParams:
        return CalculatorParams(max_steps=self.max_turns)

    # ---- text from pieces --------------------------------------------------------------------
    def _number_rows(self, value: jax.Array, width: int) -> jax.Array:
        """Piece rows [width + 1] that write `value` (a '-' first when negative; -1 = nothing)."""
        d, _ = digits_of(value, width)
        return jnp.concatenate([jnp.where(value < 0, MINUS, -1)[None], d])

    def _field_rows(self, value: jax.Array) -> jax.Array:
        """Piece rows [1 + 2 x digits]: `value` left-aligned in as many places as the longest product has, a space
        in each place after it (a '-' first when negative; a call's operands have at most `digits` digits, so every
        result fits)."""
        width = 2 * self.digits
        d, count = digits_of(value, MAX_RESULT_DIGITS)
        i = jnp.arange(width)
        shifted = d[jnp.clip(MAX_RESULT_DIGITS - count + i, 0, MAX_RESULT_DIGITS - 1)]  # [W] digits from the first
        return jnp.concatenate([jnp.where(value < 0, MINUS, -1)[None], jnp.where(i < count, shifted, SPACE)])

    def _text(self, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Piece rows [K] (-1 = skip) -> (ids [K*P], length)."""
        lens = jnp.where(rows >= 0, self.pieces.lens[jnp.maximum(rows, 0)], 0)
        return buffers.concat_pieces(self.pieces.ids[jnp.maximum(rows, 0)], lens, self.codec.pad_id)

    def _action(self, rows: jax.Array) -> TextAction:
        ids, n = self._text(rows)
        m = self.max_action_tokens
        return TextAction(ids[None, :m], jnp.minimum(n, m)[None])

    def call_action(self, x: jax.Array, y: jax.Array) -> TextAction:
        """`calc: x*y` for the solver."""
        w = self.digits
        return self._action(jnp.concatenate([jnp.int32([CALL]), self._number_rows(x, w)[1:], jnp.int32([STAR]),
                                             self._number_rows(y, w)[1:]]))

    def answer_action(self, value: jax.Array) -> TextAction:
        """`Answer: value` for the solver."""
        return self._action(jnp.concatenate([jnp.int32([ANSWER]), self._number_rows(value, MAX_RESULT_DIGITS)]))

    # ---- episodes ----------------------------------------------------------------------------
    def problem(self, key: jax.Array, split: str | None = None) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Operands (a, b) of this env's split (or `split`) and their number of digits."""
        split = self.split if split is None else split
        k_digits, k1, k2 = jax.random.split(key, 3)
        digits = jax.random.choice(k_digits, jnp.asarray(self.sizes, jnp.int32))
        low, high = operand_range(digits)
        a = jax.random.randint(k1, (), low, high + 1)
        b = jax.random.randint(k2, (), low, high + 1)
        if split == "test":  # the nearest b below (or above) with a + b a multiple of 5
            b = b - (a + b) % 5
            b = jnp.where(b < low, b + 5, b)
        elif split == "train":  # a step away from a held-out pair
            held = (a + b) % 5 == 0
            b = jnp.where(held, jnp.where(b < high, b + 1, b - 1), b)
        return a.astype(jnp.int32), b.astype(jnp.int32), digits

    def reset(self, key, params=None):
        a, b, digits = self.problem(key)
        return self.reset_to(a, b, digits)

    def heldout_start(self, i: jax.Array):
        """Episode i of the held-out evaluation: a held-out problem (a + b a multiple of 5) drawn from i alone, the
        same at every evaluation (the in-graph evaluation of a one-seat task plays these)."""
        a, b, digits = self.problem(jax.random.fold_in(jax.random.PRNGKey(0x7E57), i), "test")
        return self.reset_to(a, b, digits)

    def reset_to(self, a: jax.Array, b: jax.Array, digits: jax.Array | int | None = None):
        """A fresh episode asking for a * b (operands of `digits` digits, by default the longest)."""
        low, high = operand_range(jnp.int32(self.digits if digits is None else digits))
        state = CalculatorState(**self._base_state(jnp.ones((1,), bool)), a=jnp.asarray(a, jnp.int32),
                                b=jnp.asarray(b, jnp.int32), low=low, high=high, result=jnp.int32(0),
                                graded=jnp.bool_(False))
        w = self.digits
        rows = jnp.concatenate([jnp.int32([WHAT]), self._number_rows(state.a, w)[1:], jnp.int32([self.sign]),
                                self._number_rows(state.b, w)[1:], jnp.int32([QUESTION])])
        ids, n = self._text(rows)
        state = self._append(state, ids[None], n[None])
        return self.get_obs(state), state

    def _step(self, key, state, tokens, length, params):
        chars, n = self._chars(tokens, length)
        call = parsing.parse_call(chars[0], n[0], "calc", OPS, max_digits=self.digits)
        x, op, y, is_call = call.a, call.op, call.b, call.ok
        if self.answer_last:
            is_call = is_call & (state.turn < params.max_steps - 1)
        value, is_answer = parsing.parse_int(chars[0], n[0], keyword="answer", max_digits=MAX_RESULT_DIGITS,
                                             signed=True, exact=True)
        is_call = is_call & self.tool
        product = state.a * state.b
        correct = is_answer & (value == product)
        result = jnp.where(op == 0, x + y, jnp.where(op == 1, x - y, x * y))
        ok = is_call | is_answer
        reward = jnp.where(correct, 1.0, jnp.where(ok, 0.0, params.format_penalty))
        paid = jnp.zeros(chars.shape[-1:], jnp.float32)  # [C] the parts paid to the reply's characters
        if self.answer_credit:
            same_sign = jnp.sign(value) == jnp.sign(product)
            right = self._answered(chars[0], n[0], product) * (is_answer & ~correct & same_sign)
            paid = paid + self.answer_credit * right
        if self.length_cost:  # a wrong answer's digits beyond the product's length: each costs its place's share
            paid = paid - self.length_cost * self._surplus(chars[0], n[0], product) * (is_answer & ~correct)
        if self.call_credit:
            paid = paid + self.call_credit * self._named(chars[0], call, state) * (is_call & ~state.graded)
        if self.copy_credit:  # the answer repeats the calculator's last result (after a call only)
            copied = self._answered(chars[0], n[0], jnp.abs(state.result)) * (is_answer & state.graded)
            paid = paid + self.copy_credit * copied * (jnp.sign(value) == jnp.sign(state.result))
        token_reward = self._per_token(paid, tokens[0], length[0])[None]
        reward = reward + paid.sum()
        new = self._append(state, tokens, length)
        number = self._field_rows(result) if self.result_field else self._number_rows(result, MAX_RESULT_DIGITS)
        rows = jnp.concatenate([jnp.int32([NEWLINE, EQUALS]), number, jnp.int32([NEWLINE])])
        invalid = jnp.full_like(rows, -1).at[:2].set(jnp.int32([NEWLINE, INVALID]))
        said = jnp.where(is_call, rows, jnp.where(ok, -1, invalid))  # a call's result, a refusal, or nothing
        ids, m = self._text(said)
        new = self._append(new, ids[None], m[None])
        turn = state.turn + 1
        new = new.replace(turn=turn, result=jnp.where(is_call, result, state.result), graded=state.graded | is_call)
        info = {"format_error": ~ok[None], "solved": correct[None], "called": is_call[None],
                "moved": jnp.ones((1,), bool), TOKEN_REWARD: token_reward}
        return new, reward[None], is_answer, (turn >= params.max_steps) & ~is_answer, info

    def _named(self, chars: jax.Array, call: parsing.Call, state: CalculatorState) -> jax.Array:
        """[C] float32: each character of a call that names the problem's at its place (an operand's digit, units
        with units, or the `*`), over the problem's characters (an operand written too long or too short counts
        its longer length)."""
        right_a, len_a = in_place(chars, call.a_span, state.a)
        right_b, len_b = in_place(chars, call.b_span, state.b)
        right_op = (jnp.arange(chars.shape[0]) == call.op_at) & (call.op == TIMES)
        return (right_a | right_b | right_op) / (len_a + 1 + len_b).astype(jnp.float32)

    def _answered(self, chars: jax.Array, n: jax.Array, product: jax.Array) -> jax.Array:
        """[C] float32: each digit of an answer (`Answer: N`, exact: its digits are one run) that is the product's
        digit at its place (counted from the units, or from the leading digit with `answer_align="lead"`; the mean of
        the two with "both"), over the longer of the two numbers."""
        _, first, last = parsing.digit_run(chars, n)
        shares = [right / longer.astype(jnp.float32)
                  for right, longer in (in_place(chars, (first, last + 1), product, lead) for lead in self.leads)]
        return sum(shares) / len(shares)

    def _surplus(self, chars: jax.Array, n: jax.Array, product: jax.Array) -> jax.Array:
        """[C] float32: an answer's leading digits beyond the product's length, each 1 over that length (`= 3627`
        answered `977773627`: its first five digits, 5/4 in all)."""
        _, first, last = parsing.digit_run(chars, n)
        _, length = digits_of(product, MAX_RESULT_DIGITS)
        pos = jnp.arange(chars.shape[0])
        extra = (pos >= first) & (pos <= last - length)  # the first (last + 1 - first) - length digits
        return extra / length.astype(jnp.float32)

    def candidate_mask(self, state) -> jax.Array:
        """[1, K]: every listed reply (`candidates=True`); with `answer_last` only the answers on the last turn."""
        if self.action_candidates is None:
            return super().candidate_mask(state)
        k = jnp.arange(len(self.action_candidates))
        last = self.answer_last & (state.turn >= self.max_turns - 1)
        return ((k >= self.num_calls) | ~last)[None]

    def random_action(self, key, state) -> TextAction:
        """A call on random operands or a random answer (a coin; the last turn answers)."""
        k_coin, k_x, k_y, k_v = jax.random.split(key, 4)
        call = self.call_action(jax.random.randint(k_x, (), state.low, state.high + 1),
                                jax.random.randint(k_y, (), state.low, state.high + 1))
        answer = self.answer_action(jax.random.randint(k_v, (), state.low * state.low, state.high * state.high + 1))
        use_call = self.tool & jax.random.bernoulli(k_coin) & (state.turn < self.max_turns - 1)
        return jax.tree.map(lambda c, a: jnp.where(use_call, c, a), call, answer)
