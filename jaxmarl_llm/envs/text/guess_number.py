"""Guess the number: find a secret in 0..1023 from "too high" / "too low" answers.

One agent. Each turn it replies `Guess: N`; the env appends the reply and one
of "too high", "too low", "correct" or a format-error line. Reward +1 for the
correct guess (the episode ends), -1 for each unparsable turn (no `Guess:`,
no digits, more than 4 digits, or N > 1023), 0 otherwise; truncated after
`max_steps` turns (default 10).

Secrets come from a fixed split of 0..1023 (seeded permutation, 20% test), so
evaluation can use numbers the policy never trained on. Note: with three-way
answers, k guesses can certify at most 2**k - 1 secrets, so 10 turns solve
1023 of the 1024 numbers at best (binary search does exactly that); pass
`max_turns=11` to make every secret solvable.

`exact=True` refuses a reply with anything besides `Guess: N` (a format error): free-text RL would otherwise
learn to pad its replies with text the parser skips.

`say_range=True` follows each too high / too low with the interval the answers so far leave ("It is from 513 to
1023."): the state in words, so a policy reads it from the last line instead of working it out of the whole
transcript.

`info_bonus=b` (default 0) adds a dense reward from the answers: each guess earns b x the bits it removes from the
secrets still possible (the interval the answers so far allow), (log2 |before| - log2 |after|) / log2 1024; the
correct guess removes what is left. A round's bonus is b x the share of the 10 bits it found, at most b. Bisection
is the guess that removes the most in expectation, so the bonus grades each guess by the skill a win needs.
`bonus="expected"` pays instead the bits the guess removes in expectation over the secrets the answers so far
allow (`expected_bits_removed`): the same total for bisection, but a function of the split alone, not of the
secret, so a policy cannot earn it by fitting where the training secrets lie. `bonus="worst"` pays the bits it
removes whatever the answer (`worst_case_bits_removed`, the larger side's): also a function of the split alone, and
sharp at the midpoint (a guess 10% off it earns 0.97 of the expected bonus's best, 0.74 of this one's), so it
grades the exactness a win in 10 guesses needs.

`digit_credit=True` (with `bonus="expected"` or `"worst"`) pays a guess's bonus digit by digit
(`info["token_reward"]`, used by `config.credit="token"` / `"token_by_turn"`): after each digit written, the best bonus any number that
starts with those digits could still earn (`best_with_prefix`); each digit earns the change in that best, the token
that ends the number (or the last digit, when the reply ends there) the rest. The parts add up to the guess's bonus,
so the return is unchanged (potential-based shaping): only which token is told what changes. A wrong leading digit
is told at once, where a bonus paid on the reply's last token leaves four digits to share the blame. A refused
reply's -1 goes to the token where it stopped being the start of any `Guess: N` (`_first_off_token`), so a short
GAE horizon (`gae_lambda` well below 1) still blames the token that broke the format. Measured (docs/results.md):
with `gae_lambda` near 1 the parts only move the baseline, below it they lean on a value per token.

`padded=True` writes every number with four digits, zero-padded, in the replies (`Guess: 0517`, and only that: a
guess of fewer digits is a format error) and in the intervals `say_range` states (`It is from 0513 to 1023.`): each
digit at a fixed place, as the binary-search teacher of configs/sft_guess_number.py writes its guesses, so the
digits of a guess line up with those of the interval it halves.

`sizes=(16, 64, 256, 1024)` is a curriculum by mixture: each episode draws its range 0..n-1 uniformly from
`sizes` (the prompt says which; the secret is a training secret below n; the bonus counts bits of that range, so
every game's total is b). Small ranges are bisected in a few guesses, where a policy meets each interval often;
`reset_to` (the held-out evaluation) plays the full range. The default `(1024,)` is the one game.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxmarl_llm.envs.text import parsing
from jaxmarl_llm.envs.text.base import TOKEN_REWARD, TextEnv, TextParams, TextState
from jaxmarl_llm.envs.text.buffers import TextAction

NUM_VALUES = 1024

PROMPT = (  # low, top: written as the env writes numbers; reply: REPLY_FORM[padded]
    "I am thinking of a whole number from {low} to {top}. Find it in at most {turns} guesses.\n"
    "Reply with {reply}. I will answer too high, too low or correct.\n"
)
REPLY_FORM = {False: "'Guess: N'", True: "'Guess: NNNN', four digits"}
RANGE_WORDS = ("It is from ", " to ", ".\n")  # say_range: the interval the answers so far leave
FEEDBACK = ("\nToo high.\n", "\nToo low.\n", "\nCorrect!\n",
            "\nInvalid. Reply with 'Guess: {n}', {n} from {low} to {top}.\n")  # n: N, or NNNN when padded
TOO_HIGH, TOO_LOW, CORRECT, INVALID = range(4)
BONUSES = ("found", "expected", "worst")  # info_bonus pays the bits a guess's answer removed, or removes in expectation
# over the secrets still possible, or removes at least (whichever the answer)


def secret_split(test_fraction: float = 0.2, seed: int = 0) -> dict[str, np.ndarray]:
    """The fixed train/test split of 0..1023 (sorted arrays)."""
    perm = np.random.default_rng(seed).permutation(NUM_VALUES)
    n_test = int(round(test_fraction * NUM_VALUES))
    test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    return {"train": train, "test": test, "all": np.arange(NUM_VALUES)}


def interval_bits_removed(low, high, new_low, new_high, found, size=NUM_VALUES) -> jax.Array:
    """[] float32: log2 of the interval's size before, less after (0 once found), over log2 `size` (the range)."""
    bits = lambda lo, hi: jnp.log2(jnp.maximum(hi - lo + 1, 1).astype(jnp.float32))
    return (bits(low, high) - jnp.where(found, 0.0, bits(new_low, new_high))) / bits(0, size - 1)


def expected_bits_removed(low, high, guess, ok, size=NUM_VALUES) -> jax.Array:
    """[] float32: the bits a guess removes in expectation over the secrets still possible (uniform in [low, high]),
    over log2 `size`: an answer leaves the m secrets on one side of the guess (probability m / n, log2 n - log2 m
    bits) or finds it (1 / n, all log2 n). Largest at the interval's midpoint, 0 outside it or for a refused reply;
    it does not depend on the secret, so it grades the split itself, never where the secrets happen to lie."""
    n = jnp.maximum(high - low + 1, 1).astype(jnp.float32)
    log_n = jnp.log2(n)

    def side(m):  # the share of secrets that leave m behind, times the bits that removes
        m = m.astype(jnp.float32)
        return jnp.where(m > 0, m / n * (log_n - jnp.log2(jnp.maximum(m, 1.0))), 0.0)

    inside = ok & (guess >= low) & (guess <= high)
    expected = side(guess - low) + side(high - guess) + log_n / n
    return jnp.where(inside, expected, 0.0) / jnp.log2(jnp.float32(size))


def worst_case_bits_removed(low, high, guess, ok, size=NUM_VALUES) -> jax.Array:
    """[] float32: the bits a guess removes whatever the answer, over log2 `size`: log2 n less log2 of its larger
    side (all of log2 n when no secret is left beside it). Largest at the midpoint and falling linearly in the larger
    side away from it; 0 outside [low, high] or for a refused reply; a function of the split, not of the secret."""
    n = jnp.maximum(high - low + 1, 1).astype(jnp.float32)
    larger = jnp.maximum(guess - low, high - guess).astype(jnp.float32)
    removed = jnp.log2(n) - jnp.log2(jnp.maximum(larger, 1.0))
    inside = ok & (guess >= low) & (guess <= high)
    return jnp.where(inside, removed, 0.0) / jnp.log2(jnp.float32(size))


BONUS_OF_SPLIT = {"expected": expected_bits_removed, "worst": worst_case_bits_removed}
MAX_DIGITS = 4  # a guess has at most 4 digits (0..1023)


def best_with_prefix(low, high, prefix, count, split_bonus, size=NUM_VALUES) -> jax.Array:
    """[] float32: the largest `split_bonus` (a function of BONUS_OF_SPLIT) of any guess in 0..1023 whose decimal
    digits begin with the `count` digits of `prefix` (the number itself or it followed by up to 4 - count more
    digits; no leading zero). Both bonuses peak at the interval's midpoint and fall away from it, so over a block of
    numbers the best is at the midpoint clipped into the block."""
    best = jnp.float32(0.0)
    for more in range(MAX_DIGITS):  # the block prefix * 10^more .. prefix * 10^more + 10^more - 1
        start = prefix * 10 ** more
        stop = jnp.minimum(start + 10 ** more - 1, NUM_VALUES - 1)
        fits = (count + more <= MAX_DIGITS) & (start <= stop) & ((prefix > 0) | (more == 0))
        for mid in ((low + high) // 2, (low + high + 1) // 2):
            guess = jnp.clip(mid, start, stop)
            best = jnp.maximum(best, jnp.where(fits, split_bonus(low, high, guess, jnp.bool_(True), size), 0.0))
    return best


@struct.dataclass
class GuessNumberState(TextState):
    secret: jax.Array  # [] int32
    low: jax.Array  # [] int32: the smallest secret the answers so far allow
    high: jax.Array  # [] int32: the largest
    size: jax.Array  # [] int32: this episode's range is 0..size-1


class GuessNumber(TextEnv):
    def __init__(
        self,
        tokenizer=None,
        split: str = "train",
        max_turns: int = 10,
        capacity: int = 768,
        max_action_tokens: int = 16,
        test_fraction: float = 0.2,
        seed: int = 0,
        info_bonus: float = 0.0,
        exact: bool = False,
        say_range: bool = False,
        sizes: tuple[int, ...] = (NUM_VALUES,),
        bonus: str = "found",
        digit_credit: bool = False,
        padded: bool = False,
    ):
        super().__init__(tokenizer, ("guesser",), capacity, max_action_tokens)
        splits = secret_split(test_fraction, seed)
        if split not in splits:
            raise ValueError(f"split must be one of {sorted(splits)}, got {split!r}")
        self.split = split
        self.secrets = jnp.asarray(splits[split], jnp.int32)
        self.heldout_secrets = jnp.asarray(splits["test"], jnp.int32)
        self.max_turns = int(max_turns)
        self.info_bonus = float(info_bonus)
        if bonus not in BONUSES:
            raise ValueError(f"bonus must be one of {sorted(BONUSES)}, got {bonus!r}")
        self.bonus = bonus
        self.digit_credit = bool(digit_credit)
        if self.digit_credit and (bonus not in BONUS_OF_SPLIT or not self.info_bonus):
            raise ValueError(f"digit_credit pays a split's bonus by digit: it needs info_bonus > 0 and bonus in "
                             f"{sorted(BONUS_OF_SPLIT)}, got info_bonus={info_bonus}, bonus={bonus!r}")
        self.padded = bool(padded)
        if self.padded and self.digit_credit:
            raise ValueError("digit_credit reads a guess's digits as written without leading zeros: it does not "
                             "take padded=True")
        self.exact = bool(exact)  # a reply must be `Guess: N` and nothing more (parsing.parse_int's `exact`)
        self.say_range = bool(say_range)
        self.sizes = tuple(int(n) for n in sizes)
        self.one_range = self.sizes == (NUM_VALUES,)  # the one game: its prompt is in the starting buffer
        if not self.sizes or any(not 2 <= n <= NUM_VALUES for n in self.sizes):
            raise ValueError(f"sizes: each range size must be in 2..{NUM_VALUES}, got {sizes!r}")
        if self.say_range:  # only then: a word tokenizer's vocabulary is every text the env encodes when built
            self.range_words = self.codec.table(RANGE_WORDS)
            self.numbers = self.codec.table([self.write(v) for v in range(NUM_VALUES)])
        self.feedback = self.codec.table([line.format(n="NNNN" if self.padded else "N", low=self.write(0),
                                                      top=self.write(NUM_VALUES - 1)) for line in FEEDBACK])
        self.guesses = self._action_table([f"Guess: {self.write(n)}" for n in range(NUM_VALUES)])
        self.action_candidates = self.guesses.rows()  # every number in range (mask: all valid)
        said = [self.range_words.width, self.numbers.width] if self.say_range else []
        if self.one_range:  # one constant prompt in the starting buffer
            self._setup([self.codec.encode(self.prompt(NUM_VALUES, max_turns))], [self.feedback.width, *said])
        else:  # the prompt of the episode's range is appended at reset; the last row is the full range's
            rows = [*self.sizes, NUM_VALUES]
            self.size_of_row = jnp.asarray(rows, jnp.int32)
            self.prompts = self.codec.table([self.prompt(n, max_turns) for n in rows])
            self._setup([[]], [self.feedback.width, *said, self.prompts.width])

    def write(self, value: int) -> str:
        """A number as this env writes it: `517`, or `0517` when padded."""
        return f"{value:04d}" if self.padded else str(value)

    def prompt(self, size: int, turns: int) -> str:
        """The opening text of a game over 0..size-1."""
        return PROMPT.format(low=self.write(0), top=self.write(size - 1), turns=turns, reply=REPLY_FORM[self.padded])

    @property
    def default_params(self) -> TextParams:
        return TextParams(max_steps=self.max_turns)

    def reset(self, key, params=None):
        if self.one_range:
            return self.reset_to(jax.random.choice(key, self.secrets))
        k_size, k_secret = jax.random.split(key)
        row = jax.random.randint(k_size, (), 0, len(self.sizes))
        below = self.secrets < self.size_of_row[row]  # [S] the training secrets in this range
        secret = jax.random.choice(k_secret, self.secrets, p=below / below.sum())
        return self._fresh(secret, row)

    def reset_to(self, secret: jax.Array):
        """A fresh episode with a given secret in the full range (scripted evaluation over every number)."""
        return self._fresh(secret, len(self.sizes))

    def heldout_start(self, i: jax.Array):
        """Episode i of the held-out evaluation: held-out secret i (cyclically) in the full range, whatever this
        env's split and sizes (the in-graph evaluation of a one-seat task plays these)."""
        return self.reset_to(self.heldout_secrets[i % self.heldout_secrets.shape[0]])

    def _fresh(self, secret: jax.Array, row) -> tuple:
        size = jnp.int32(NUM_VALUES) if self.one_range else self.size_of_row[row]
        state = GuessNumberState(**self._base_state(jnp.ones((1,), bool)), secret=jnp.asarray(secret, jnp.int32),
                                 low=jnp.int32(0), high=size - 1, size=size)
        if not self.one_range:
            state = self._append_table(state, self.prompts, jnp.reshape(row, (1,)))
        return self.get_obs(state), state

    def _step(self, key, state, tokens, length, params):
        chars, n = self._chars(tokens, length)
        value, ok = parsing.parse_int(chars[0], n[0], keyword="guess", max_digits=MAX_DIGITS, exact=self.exact,
                                      min_digits=MAX_DIGITS if self.padded else 1)
        ok = ok & (value < NUM_VALUES)
        outcome = jnp.where(~ok, INVALID, jnp.where(value > state.secret, TOO_HIGH, jnp.where(value < state.secret, TOO_LOW, CORRECT)))
        correct = outcome == CORRECT
        reward = jnp.where(correct, 1.0, jnp.where(ok, 0.0, -1.0))[None]
        low = jnp.where(outcome == TOO_LOW, jnp.maximum(state.low, value + 1), state.low)
        high = jnp.where(outcome == TOO_HIGH, jnp.minimum(state.high, value - 1), state.high)
        if self.info_bonus and self.bonus == "found":
            reward = reward + self.info_bonus * interval_bits_removed(state.low, state.high, low, high, correct,
                                                                      state.size)
        elif self.info_bonus:  # "expected" / "worst": the split's worth, whatever the secret
            reward = reward + self.info_bonus * BONUS_OF_SPLIT[self.bonus](state.low, state.high, value, ok,
                                                                           state.size)
        new = self._append(state, tokens, length)
        new = self._append_table(new, self.feedback, outcome[None])
        if self.say_range:  # "It is from 513 to 1023." after a wrong guess
            say = ((outcome == TOO_HIGH) | (outcome == TOO_LOW))[None]
            for table, row in ((self.range_words, 0), (self.numbers, low), (self.range_words, 1), (self.numbers, high),
                               (self.range_words, 2)):
                new = self._append_table(new, table, jnp.reshape(row, (1,)), say)
        turn = state.turn + 1
        new = new.replace(turn=turn, low=low, high=high)
        info = {"format_error": ~ok[None], "solved": correct[None]}
        if self.digit_credit:  # the bonus by digit; a refused reply's -1 on the token where it went wrong
            paid = self.info_bonus * self._digits_paid(chars[0], n[0], tokens[0], length[0], state, value, ok)
            off = self._first_off_token(self.guesses, tokens[0], length[0])
            info[TOKEN_REWARD] = jnp.where(ok, paid, jnp.zeros_like(paid).at[off].set(-1.0))[None]
        return new, reward, correct, (turn >= params.max_steps) & ~correct, info

    def _digits_paid(self, chars, n, tokens, length, state, value, ok) -> jax.Array:
        """[M] float32: the split bonus of a well-formed guess spread over the reply's tokens (`digit_credit`): each
        digit the change it makes in `best_with_prefix`, the token after the number (else its last digit) the
        rest; zeros for a refused reply."""
        split_bonus = BONUS_OF_SPLIT[self.bonus]
        pos = jnp.arange(chars.shape[0])
        digit, first, last = parsing.digit_run(chars, n)  # exact parsing: the number's digits are the reply's only ones
        d = jnp.where(digit, chars - ord("0"), 0)
        upto = digit[None, :] & (pos[None, :] <= pos[:, None])  # [C, C] digits at or before each position
        power = jnp.asarray(10, jnp.int32) ** jnp.clip(pos[:, None] - pos[None, :], 0, MAX_DIGITS)
        prefix = jnp.sum(jnp.where(upto, d[None, :] * power, 0), axis=1)  # [C] the number read up to each position
        best = jax.vmap(lambda p, k: best_with_prefix(state.low, state.high, p, k, split_bonus, state.size))(
            prefix, pos - first + 1)  # [C]
        best = jnp.where(digit, best, 0.0)
        before = jnp.concatenate([jnp.zeros((1,), jnp.float32), best[:-1]])  # the best before each digit (0 first)
        per_char = jnp.where(digit & (pos > first), best - before, jnp.where(pos == first, best, 0.0))
        per_token = self._per_token(per_char, tokens, length)
        token_of = self._token_of_chars(tokens, length, chars.shape[0])
        # the token after the last digit's: a space, or the eos the env does not see (at `length`); where the reply
        # was cut there, token-level credit puts what lands past its real tokens on its last one, the last digit
        end = token_of[jnp.maximum(last, 0)] + 1
        rest = split_bonus(state.low, state.high, value, ok, state.size) - best[jnp.maximum(last, 0)]
        return jnp.where(ok, per_token.at[end].add(rest, mode="drop"), 0.0)

    def random_action(self, key, state) -> TextAction:
        guess = jax.random.randint(key, (1,), 0, state.size)
        return self.make_action(self.guesses, guess)

    def guess_action(self, value: jax.Array) -> TextAction:
        """The well-formed action `Guess: value` (value [] int in 0..1023)."""
        return self.make_action(self.guesses, jnp.reshape(value, (1,)))
