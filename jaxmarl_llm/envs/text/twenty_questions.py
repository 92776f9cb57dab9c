"""Twenty questions: find a secret noun (from `data/nouns.tsv`) with yes/no questions.

The questioner replies `Ask: <question>` or `Guess: <word>`. Matching ignores
case, spaces and punctuation, so `Ask: Is it an animal?` and `Ask: animal`
(the question's name) are the same question.

answerer="oracle" (default, one agent): the env answers from the attribute
table shipped with the word list; a question outside `data/questions.tsv` is a
format error ("Ask one of the listed questions").
answerer="lm" (two agents): the question text goes to the answerer slot (a
frozen LM, say), whose prompt holds the secret; its reply is read as yes/no
(first word) and passed back. Guesses are always checked by the env. On each
answer turn the info says whether the question was a listed one (`answered`: the
oracle knows the truth) and whether the reply equals the oracle's answer
(`answer_correct`), so a run can report the answerer's accuracy; `answered_yes` / `answer_correct_yes`
count the same for the questions whose true answer is Yes (12% of the table).

Restricted replies (`policy.actions="constrained"` / "scored", policies/candidates.py): `action_candidates`
lists every `Ask: <name>` (the 60 listed questions by name), every `Guess: <word>` (187) and, in the lm
game, the answerer's `Yes` / `No`; `candidate_mask` gives each seat its own role's replies, so a
restricted questioner always asks a listed question or guesses a listed word, and a restricted answerer
always says yes or no. `fresh_only=True` also drops the questions already asked and the words already
guessed (legal, but a wasted turn): a questioner learning from scratch then spends no turns repeating.
`guess_last=True` leaves only guesses on the questioner's last turn (`max_turns`), as the game's rule that
a round ends with a guess: a question there cannot win (a free-text one is refused: a format error).

Reward: +1 to every agent when the word is guessed (episode ends);
`format_penalty` (default 0; a constructor argument, the params' default) for an
unparsable questioner turn. Truncated after `max_turns` questioner turns (20).

`info_bonus=b` (default 0) adds a dense reward for the questioner, from the env's own table: the bits a move
removes from the words still possible (those whose table answers agree with the true answers to the listed
questions asked so far, less the words already guessed), b * (log2 |before| - log2 |after|) / log2 W; a correct
guess removes the last log2 |before|. An episode's bonus is b x the fraction of the log2 W bits it found, so
at most b; a wrong guess of a word still possible earns a little (log2 |C| / (|C| - 1)), one already ruled
out nothing. It grades the asking a win needs, which a random questioner too rarely shows for the win alone to
teach it (measured in configs/twenty_questions.py: RL learns to ask by it, not yet to guess). It is not
potential-based: the bits found before a loss are kept. `bonus="expected"` pays instead what a move removes in
expectation over the words still possible (`expected_bits_removed`): the entropy of a question's split, and for
a guess of a word the answers still allow its 1 / n chance of all the bits: the same mean, without the variance
of which word happens to be the secret (a consistent guess is paid whether or not it wins).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxmarl_llm.envs.text import datasets, parsing
from jaxmarl_llm.envs.text.base import TextEnv, TextParams, TextState, declare_info_ratios
from jaxmarl_llm.envs.text.buffers import TextAction

# an LM answerer's replies equal to the oracle's, over every listed question and over those whose truth is Yes
# (which "always No" gets all wrong)
declare_info_ratios(answer_accuracy=("answer_correct", "answered"),
                    yes_answer_accuracy=("answer_correct_yes", "answered_yes"))

PROMPT = (
    "Let's play twenty questions. I am thinking of a common noun. Ask yes/no questions to find it "
    "and guess it in at most {turns} turns.\nReply 'Ask: <question>' or 'Guess: <word>'.\n"
)
ORACLE_NOTE = "You can ask these questions by name: {names}.\n"
ANSWERER_PROMPT = "You answer in a game of twenty questions. The secret word is: "
ANSWERER_NOTE = ".\nAnswer each question with Yes or No.\n"
FEEDBACK = (
    "\nYes.\n", "\nNo.\n", "\nCorrect! You found it.\n", "\nNo, that is not it.\n",
    "\nInvalid. Reply 'Ask: <question>' or 'Guess: <word>'.\n", "\nI can't answer that. Ask one of the listed questions.\n",
    "\nI don't know.\n",
)
YES, NO, CORRECT, WRONG, INVALID, UNKNOWN_Q, DONT_KNOW = range(7)
TO_ANSWERER = "\nAnswer: "


def answer_check(answers: jax.Array, secret: jax.Array, pending: jax.Array, reply: jax.Array,
                 replying: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(answered, correct, truth) [] bool of one answerer turn: a reply (1 yes / 0 no / -1 neither) to a listed
    question (`pending` >= 0: the oracle knows its truth), whether it equals answers[secret, pending] ([W, Q]),
    and that truth (only 12% of the table is Yes: "always No" is 88% accurate on random questions, so runs
    also report the accuracy on the Yes questions)."""
    answered = replying & (pending >= 0)
    truth = answers[secret, jnp.maximum(pending, 0)].astype(jnp.int32)
    return answered, answered & (reply == truth), truth == 1


def seat_candidates(num_questions: int, num_words: int, num_agents: int) -> np.ndarray:
    """bool [A, K] over the candidates [asks (Q), guesses (W), Yes / No (lm game: A = 2)]: the questioner
    (seat 0) asks or guesses, the answerer (seat 1) says yes or no."""
    k = num_questions + num_words + (2 if num_agents == 2 else 0)
    mask = np.zeros((num_agents, k), bool)
    mask[0, : num_questions + num_words] = True
    mask[1:, num_questions + num_words:] = True
    return mask


def mark_tried(tried: jax.Array, asking: jax.Array, kind: jax.Array, question: jax.Array, word: jax.Array,
               num_questions: int) -> jax.Array:
    """tried [Q + W] with this questioner turn's listed question (kind 0) or listed word (kind 1) set."""
    index = jnp.where(kind == 0, question, num_questions + word)
    hit = asking & (kind >= 0) & (jnp.where(kind == 0, question, word) >= 0)
    return tried.at[jnp.maximum(index, 0)].max(hit)


def still_possible(answers: jax.Array, tried: jax.Array, secret: jax.Array) -> jax.Array:
    """[W] bool: the words whose table answers (answers [W, Q]) equal the secret's on every listed question asked
    so far, less the words guessed (tried [Q + W], `mark_tried`'s record)."""
    num_questions = answers.shape[1]
    asked, guessed = tried[:num_questions], tried[num_questions:]
    agrees = (answers == answers[secret]) | ~asked  # [W, Q]
    return jnp.all(agrees, axis=1) & ~guessed


def bits_removed(before: jax.Array, after: jax.Array) -> jax.Array:
    """[] float32: log2 |before| - log2 |after| over log2 W (an empty set counts as one word: 0 bits left)."""
    bits = lambda p: jnp.log2(jnp.maximum(jnp.sum(p), 1).astype(jnp.float32))
    return (bits(before) - bits(after)) / np.log2(before.shape[0])


def expected_bits_removed(answers: jax.Array, possible: jax.Array, kind: jax.Array, question: jax.Array,
                          word: jax.Array) -> jax.Array:
    """[] float32: the bits a move removes in expectation over the words still possible (`possible` [W], uniform),
    over log2 W; what `bits_removed` pays averaged over those secrets, so a function of the move and the answers
    so far alone. A listed question splits the n words into the y that answer yes and n - y (the entropy of the
    split); a guess of a possible word finds it (1 / n: all log2 n) or rules it out (log2 n - log2 (n - 1)); a word
    already ruled out, an unlisted question or a malformed reply: 0."""
    n = jnp.sum(possible).astype(jnp.float32)
    log_n = jnp.log2(jnp.maximum(n, 1.0))

    def share(m):  # the secrets that leave m words, times the bits that removes
        return jnp.where(m > 0, m / jnp.maximum(n, 1.0) * (log_n - jnp.log2(jnp.maximum(m, 1.0))), 0.0)

    yes = jnp.sum(possible & answers[:, jnp.maximum(question, 0)]).astype(jnp.float32)
    ask = jnp.where((kind == 0) & (question >= 0), share(yes) + share(n - yes), 0.0)
    inside = (kind == 1) & (word >= 0) & possible[jnp.maximum(word, 0)]
    guess = jnp.where(inside, log_n / jnp.maximum(n, 1.0) + share(n - 1.0), 0.0)
    return (ask + guess) / np.log2(answers.shape[0])


BONUSES = ("found", "expected")  # info_bonus grades a move by the bits its answer removed, or removes in expectation


@struct.dataclass
class TwentyQuestionsParams(TextParams):
    max_steps: int = 20  # questioner turns
    format_penalty: float = 0.0


@struct.dataclass
class TwentyQuestionsState(TextState):
    secret: jax.Array  # [] int32 word index
    questions: jax.Array  # [] int32 questioner turns taken
    pending: jax.Array  # [] int32 the listed question awaiting the answerer's reply (-1: none, or not on the list)
    tried: jax.Array  # [Q + W] bool: the listed questions asked and the words guessed so far (fresh_only's mask)


class TwentyQuestions(TextEnv):

    max_movers = 1  # turn-based: one seat writes per step
    def __init__(self, tokenizer=None, answerer: str = "oracle", max_turns: int = 20, capacity: int = 2048,
                 max_action_tokens: int = 48, fresh_only: bool = False, info_bonus: float = 0.0,
                 guess_last: bool = False, format_penalty: float = 0.0, bonus: str = "found"):
        if answerer not in ("oracle", "lm"):
            raise ValueError(f"answerer must be 'oracle' or 'lm', got {answerer!r}")
        if bonus not in BONUSES:
            raise ValueError(f"bonus must be one of {sorted(BONUSES)}, got {bonus!r}")
        self.bonus = bonus
        agents = ("questioner",) if answerer == "oracle" else ("questioner", "answerer")
        super().__init__(tokenizer, agents, capacity, max_action_tokens)
        self.answerer = answerer
        self.max_turns = int(max_turns)
        self.fresh_only = bool(fresh_only)
        self.info_bonus = float(info_bonus)
        self.guess_last = bool(guess_last)
        self.format_penalty = float(format_penalty)
        self.words, self.categories, answers = datasets.nouns()
        self.question_names, self.question_texts = datasets.questions()
        self.answers = jnp.asarray(answers)  # [W, Q]
        self.secrets = jnp.arange(len(self.words), dtype=jnp.int32)  # [W] every word: evaluation plays each once
        self.num_questions = len(self.question_names)
        self.question_set = parsing.StringSet([*self.question_names, *self.question_texts])
        self.word_set = parsing.StringSet(self.words)
        self.feedback = self.codec.table(FEEDBACK)
        self.word_pieces = self.codec.table(self.words)
        self.answerer_note = self.codec.table([ANSWERER_NOTE, TO_ANSWERER, "\n"])
        self.asks = self._action_table([f"Ask: {n}" for n in self.question_names])
        self.guesses = self._action_table([f"Guess: {w}" for w in self.words])
        self.yes_no = self._action_table(["Yes", "No"])
        # restricted replies: [asks, guesses, Yes / No (lm game)], each seat its own role's (candidate_mask)
        self.action_candidates = self.asks.rows() + self.guesses.rows() + (self.yes_no.rows() if answerer == "lm" else ())
        self.seat_candidates = seat_candidates(self.num_questions, len(self.words), self.num_agents)
        prompt = PROMPT.format(turns=max_turns)
        prompts = [self.codec.encode(prompt if answerer == "lm" else prompt + ORACLE_NOTE.format(names=", ".join(self.question_names)))]
        if answerer == "lm":
            prompts.append(self.codec.encode(ANSWERER_PROMPT))
        self._setup(prompts, [self.feedback.width, self.word_pieces.width, self.answerer_note.width])

    @property
    def default_params(self) -> TwentyQuestionsParams:
        return TwentyQuestionsParams(max_steps=self.max_turns, format_penalty=self.format_penalty)

    def reset(self, key, params=None):
        return self.reset_to(jax.random.randint(key, (), 0, len(self.words)))

    def reset_to(self, secret: jax.Array):
        """A fresh episode with a given word index."""
        secret = jnp.asarray(secret, jnp.int32)
        active = jnp.arange(self.num_agents) == 0
        state = TwentyQuestionsState(**self._base_state(active), secret=secret, questions=jnp.int32(0),
                                     pending=jnp.int32(-1), tried=jnp.zeros((self.num_questions + len(self.words),), bool))
        if self.answerer == "lm":  # the answerer's prompt names the secret
            answerer = jnp.arange(self.num_agents) == 1
            state = self._append_table(state, self.word_pieces, jnp.full((2,), secret), answerer)
            state = self._append_table(state, self.answerer_note, jnp.zeros((2,), jnp.int32), answerer)
        return self.get_obs(state), state

    def parse_question(self, tokens: jax.Array, length: jax.Array):
        """One questioner action -> (kind 0 ask / 1 guess / -1 malformed, question index or -1, word index or -1)."""
        chars, n = parsing.decode_chars(self.codec.token_chars, self.codec.token_nchars, tokens, length)
        chars, n = parsing.compact_alnum(chars, n)
        q_chars, q_n, is_ask = parsing.strip_prefix(chars, n, "ask")
        g_chars, g_n, is_guess = parsing.strip_prefix(chars, n, "guess")
        question = jnp.where(is_ask, self.question_set.match(q_chars, q_n) % self.num_questions, -1)
        question = jnp.where(is_ask & (self.question_set.match(q_chars, q_n) < 0), -1, question)
        word = jnp.where(is_guess, self.word_set.match(g_chars, g_n), -1)
        kind = jnp.where(is_ask & (q_n > 0), 0, jnp.where(is_guess & (g_n > 0), 1, -1))
        return kind, question, word

    def parse_answer(self, tokens: jax.Array, length: jax.Array) -> jax.Array:
        """The answerer's reply: 1 yes, 0 no, -1 neither."""
        chars, n = parsing.decode_chars(self.codec.token_chars, self.codec.token_nchars, tokens, length)
        chars, n = parsing.compact_alnum(chars, n)
        _, _, yes = parsing.strip_prefix(chars, n, "yes")
        _, _, no = parsing.strip_prefix(chars, n, "no")
        return jnp.where(yes, 1, jnp.where(no, 0, -1))

    def _step(self, key, state, tokens, length, params):
        a = self.num_agents
        asking = state.active[0]
        kind, question, word = self.parse_question(tokens[0], length[0])
        if self.guess_last:  # a round ends with a guess: a free-text question on the last turn is refused
            kind = jnp.where(asking & (state.questions + 1 >= params.max_steps) & (kind == 0), -1, kind)
        correct = asking & (kind == 1) & (word == state.secret)
        truth = self.answers[state.secret, jnp.maximum(question, 0)]
        pending = jnp.int32(-1)
        if self.answerer == "oracle":
            outcome = jnp.where(
                kind == 1,
                jnp.where(correct, CORRECT, WRONG),
                jnp.where(kind == 0, jnp.where(question >= 0, jnp.where(truth, YES, NO), UNKNOWN_Q), INVALID),
            )
            format_error = (kind < 0) | ((kind == 0) & (question < 0))
            to_answerer = jnp.bool_(False)
        else:
            reply = self.parse_answer(tokens[-1], length[-1])
            answer_outcome = jnp.where(reply == 1, YES, jnp.where(reply == 0, NO, DONT_KNOW))
            ask_outcome = jnp.where(kind == 1, jnp.where(correct, CORRECT, WRONG), INVALID)
            outcome = jnp.where(asking, ask_outcome, answer_outcome)
            format_error = asking & (kind < 0)
            to_answerer = asking & (kind == 0)  # a question: the answerer moves next
            pending = jnp.where(to_answerer, question, -1)
            answered, answer_correct, truth_yes = answer_check(self.answers, state.secret, state.pending, reply, ~asking)
        seat = jnp.arange(a)
        new = self._append(state, tokens, length)
        # the questioner reads the env's (or the answerer's) reply unless its question went to the answerer
        q_feedback = ~to_answerer
        new = self._append_table(new, self.feedback, jnp.full((a,), outcome), (seat == 0) & q_feedback)
        if self.answerer == "lm":  # the answerer reads the question, then "Answer: "
            new = self._append(new, jnp.broadcast_to(tokens[0], tokens.shape), jnp.where((seat == 1) & to_answerer, length[0], 0))
            new = self._append_table(new, self.answerer_note, jnp.ones((a,), jnp.int32), (seat == 1) & to_answerer)
            new = self._append_table(new, self.answerer_note, jnp.full((a,), 2), (seat == 1) & ~asking)
        questions = state.questions + asking.astype(jnp.int32)
        reward = jnp.full((a,), jnp.where(correct, 1.0, 0.0)) + jnp.where((seat == 0) & format_error, params.format_penalty, 0.0)
        tried = mark_tried(state.tried, asking, kind, question, word, self.num_questions)
        if self.info_bonus:
            before = still_possible(self.answers, state.tried, state.secret)
            if self.bonus == "found":  # a correct guess leaves nothing to find
                after = still_possible(self.answers, tried, state.secret) & ~correct
                bits = bits_removed(before, after)
            else:  # "expected": the move's worth whatever the secret
                bits = expected_bits_removed(self.answers, before, jnp.where(asking, kind, -1), question, word)
            reward = reward + jnp.where(seat == 0, self.info_bonus * bits, 0.0)
        active = jnp.where(to_answerer, seat == 1, seat == 0)
        new = new.replace(turn=state.turn + 1, questions=questions, active=active, pending=pending, tried=tried)
        truncated = (questions >= params.max_steps) & ~correct & ~to_answerer
        answer = jnp.where(outcome == YES, 1, jnp.where(outcome == NO, 0, -1))
        info = {"format_error": jnp.broadcast_to(format_error, (a,)), "solved": jnp.broadcast_to(correct, (a,)), "answer": jnp.broadcast_to(answer, (a,))}
        if self.answerer == "lm":  # int, not bool: a bool info becomes a per-episode "<name>_rate" in RL metrics
            info["answered"] = jnp.broadcast_to(answered, (a,)).astype(jnp.int32)
            info["answer_correct"] = jnp.broadcast_to(answer_correct, (a,)).astype(jnp.int32)
            info["answered_yes"] = jnp.broadcast_to(answered & truth_yes, (a,)).astype(jnp.int32)
            info["answer_correct_yes"] = jnp.broadcast_to(answer_correct & truth_yes, (a,)).astype(jnp.int32)
        return new, reward, correct, truncated, info

    def candidate_mask(self, state) -> jax.Array:
        """[A, K]: each seat's own role's replies; with fresh_only, less the questioner's earlier ones."""
        mask = jnp.asarray(self.seat_candidates)
        k = mask.shape[1]
        questioner = (jnp.arange(self.num_agents) == 0)[:, None]  # [A, 1]
        if self.guess_last:  # the last questioner turn: only a guess can still win
            last = state.questions >= self.max_turns - 1
            mask = mask & ~(questioner & last & (jnp.arange(k) < self.num_questions))
        if not self.fresh_only:
            return mask
        tried = jnp.pad(state.tried, (0, k - state.tried.shape[0]))  # [K]: Yes / No are never "tried"
        return mask & ~(tried & questioner)

    def answer_action(self, yes: jax.Array) -> TextAction:
        """`Yes` / `No` from the answerer (the questioner's row empty); lm game only."""
        return self.make_action(self.yes_no, jnp.full((self.num_agents,), jnp.where(yes, 0, 1)),
                                jnp.arange(self.num_agents) == 1)

    def ask_action(self, question: jax.Array) -> TextAction:
        """`Ask: <name>` from the questioner (other rows empty)."""
        return self.make_action(self.asks, jnp.full((self.num_agents,), question), jnp.arange(self.num_agents) == 0)

    def guess_action(self, word: jax.Array) -> TextAction:
        return self.make_action(self.guesses, jnp.full((self.num_agents,), word), jnp.arange(self.num_agents) == 0)

    builtin_players = ("random",)  # the kinds `opponent_action` plays

    def opponent_action(self, key, state, kind: str = "random") -> TextAction:
        """The built-in player (`random_action`): e.g. `eval.py --opponent=random` asks an LM answerer random
        listed questions, which measures its accuracy off any one questioner's tree."""
        if kind != "random":
            raise ValueError(f"twenty questions has one built-in player, 'random'; got {kind!r}")
        return self.random_action(key, state)

    def random_action(self, key, state) -> TextAction:
        k1, k2, k3 = jax.random.split(key, 3)
        ask = self.ask_action(jax.random.randint(k1, (), 0, self.num_questions))
        guess = self.guess_action(jax.random.randint(k2, (), 0, len(self.words)))
        pick = jax.random.uniform(k3) < 0.9
        action = jax.tree.map(lambda x, y: jnp.where(pick, x, y), ask, guess)
        if self.answerer == "lm":  # the answerer's slot says yes or no at random
            choice = jax.random.randint(k3, (), 0, 2)
            action = TextAction(
                tokens=action.tokens.at[1].set(self.yes_no.ids[choice]), length=action.length.at[1].set(self.yes_no.lens[choice])
            )
            action = TextAction(tokens=action.tokens, length=jnp.where(state.active, action.length, 0))
        return action
