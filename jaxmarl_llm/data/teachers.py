"""Scripted teachers: one jittable expert per game, playing the real env (SFT warm starts, DPO pairs).

    script = make_script(env_name, env, noise=0.1)
    memory = script.init(env_state)
    action, target, memory = script.act(key, memory, env_state)   # TextAction [A, M], target bool [A]

`target[a]` says whether agent a's action this turn is the teacher's own
choice (an SFT target). Exploration moves (`noise`) are played but not
targets: the student sees the states a mistake leads to and learns the
expert's recovery from them, never the mistake itself (DAgger-style).
`data/collect.py` plays a `Script` into training rows.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxmarl_llm.envs.text.buffers import TextAction


class Script(NamedTuple):
    init: Callable[[Any], Any]  # env_state -> memory
    # (key, memory, env_state) -> (action, target [A] bool, memory)
    act: Callable[[jax.Array, Any, Any], tuple[TextAction, jax.Array, Any]]


def stateless(act: Callable[[jax.Array, Any, Any], tuple[TextAction, jax.Array, Any]]) -> Script:
    """A `Script` that keeps no memory of its own (what it needs is in the env state): its memory is a dummy 0."""
    return Script(lambda state: jnp.zeros((), jnp.int32), act)


def binary_search(env, noise: float = 0.0, digits: int = 0, recover: str = "bisect") -> Script:
    """Guess-the-number by bisection of the interval the answers leave; `noise`: a random guess inside it.

    The midpoint (lo + hi + 1) // 2 walks the tree 512, 512 +- 256, ... +- 1: each guess is the
    previous one +- 2**(9 - turn), the same tree for every secret, so the student learns one rule.
    The teacher reads the secret only to update its interval exactly as the env's answer would.

    digits: write guesses zero-padded to this width ("Guess: 0013", parsed as 13): every number
        has its digits at the same places, so the student adds the step digit by digit.
    recover: the teacher's moves after a random one (on the tree both rules give the same guess):
        "bisect" the midpoint of the interval left; "step" keep the schedule, the previous guess
        +- 2**(9 - turn) toward the answer (clipped into the interval), i.e. bisect the interval
        shifted by the random move. "step" teaches the one local rule from every number, so the
        student also writes numbers the tree only reaches at held-out secrets.
    """
    from jaxmarl_llm.envs.text.guess_number import NUM_VALUES

    if recover not in ("bisect", "step"):
        raise ValueError(f"recover must be 'bisect' or 'step', got {recover!r}")
    if digits:  # zero-padded: every guess has the same width ("Guess: 0013"), which the env parses as 13
        table = env.codec.table([f"Guess: {n:0{digits}d}" for n in range(NUM_VALUES)], width=env.max_action_tokens)
        say = lambda guess: env.make_action(table, jnp.reshape(guess, (1,)))  # noqa: E731
    else:
        say = env.guess_action
    first = NUM_VALUES // 2

    def init(state) -> jax.Array:
        return jnp.asarray([0, NUM_VALUES - 1, -1, 0], jnp.int32)  # [lo, hi, previous guess, turn]

    def act(key, memory, state):
        lo, hi, prev, turn = memory[0], memory[1], memory[2], memory[3]
        k_explore, k_guess = jax.random.split(key)
        explore = jax.random.uniform(k_explore) < noise
        if recover == "bisect":
            best = (lo + hi + 1) // 2
        else:
            step = jnp.maximum(first >> jnp.minimum(turn, 30), 1)
            best = jnp.where(turn == 0, first, jnp.clip(prev + jnp.where(prev < state.secret, step, -step), lo, hi))
        guess = jnp.where(explore, jax.random.randint(k_guess, (), lo, hi + 1), best)
        lo = jnp.where(guess < state.secret, guess + 1, lo)
        hi = jnp.where(guess > state.secret, guess - 1, hi)
        return say(guess), (~explore)[None], jnp.stack([lo, hi, guess, turn + 1])

    return Script(init, act)


def exact_answer(env, noise: float = 0.0) -> Script:
    """Arithmetic: `Answer: <the right value>`; `noise`: a value off by 1..3 instead (not a target).

    Plays from the env's own action table (-999..999): an answer outside it is played clipped and is not a target.
    """

    def act(key, memory, state):
        k_explore, k_off, k_sign = jax.random.split(key, 3)
        a = state.answer.shape[0]
        explore = jax.random.uniform(k_explore, (a,)) < noise
        offset = jax.random.randint(k_off, (a,), 1, 4) * jnp.where(jax.random.bernoulli(k_sign, 0.5, (a,)), 1, -1)
        value = state.answer + jnp.where(explore, offset, 0)
        in_table = jnp.abs(state.answer) <= 999
        return env.make_action(env.answers, jnp.clip(value, -999, 999) + 999), ~explore & in_table, memory

    return stateless(act)


def minimax_selfplay(env, noise: float = 0.0, tie_break: str = "random") -> Script:
    """Tic-tac-toe with both seats played by exact minimax; `noise`: a uniform legal move.

    The seat to move plays an optimal move; with probability `noise` it plays a uniformly random legal
    move instead, which is played but is not a target, so the student sees the positions a mistake (its
    own or the opponent's) leads to, and minimax's answer from each of them. Noise-free games are always
    draws. `tie_break`: "random" (uniform among the optimal moves, `env.opponent_action(.., "minimax")`)
    or "first" (the lowest-numbered optimal cell: every target is a function of the board, so a student's
    loss can reach zero instead of the ~0.9 nats a move of the random tie-break).
    """
    from jaxmarl_llm.envs.text.tic_tac_toe import board_code

    if tie_break not in ("random", "first"):
        raise ValueError(f"minimax_selfplay tie_break must be 'random' or 'first', got {tie_break!r}")

    def optimal(key, state):
        if tie_break == "random":
            return env.opponent_action(key, state, "minimax")
        return env.move_action(state, jnp.argmax(env.best[board_code(state.board)]).astype(jnp.int32))

    def act(key, memory, state):
        k_explore, k_random, k_best = jax.random.split(key, 3)
        explore = jax.random.uniform(k_explore) < noise
        best = optimal(k_best, state)
        rand = env.opponent_action(k_random, state, "random")
        action = jax.tree.map(lambda r, b: jnp.where(explore, r, b), rand, best)
        return action, jnp.broadcast_to(~explore, (env.num_agents,)), memory

    return stateless(act)


def uniform_question(key: jax.Array, truth: jax.Array) -> jax.Array:
    """[] a listed question uniformly at random (truth [Q]: the secret's answers, unused)."""
    return jax.random.randint(key, (), 0, truth.shape[0])


def balanced_question(key: jax.Array, truth: jax.Array) -> jax.Array:
    """[] a random question whose true answer (truth [Q] bool) is Yes with chance 1/2: uniform among the secret's
    Yes questions, else among its No ones. Only 12% of the table is Yes, so on uniform questions an answerer
    learns "always No" (88% right) and stalls there; balanced ones make every answer depend on the secret."""
    k_side, k_pick = jax.random.split(key)
    pool = truth == jax.random.bernoulli(k_side)  # [Q]
    pool = jnp.where(pool.any(), pool, True)
    return jax.random.categorical(k_pick, jnp.where(pool, 0.0, -jnp.inf))


# greedy_splitter's `explore`: how a noise turn picks its random question, (key, truth [Q]) -> question []
EXPLORE_QUESTIONS: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "uniform": uniform_question, "balanced": balanced_question}


def greedy_splitter(env, noise: float = 0.0, explore: str = "uniform") -> Script:
    """Twenty questions: ask the question that splits the words still possible most evenly.

    Memory: the candidate mask bool[W] (all True at the start). Each turn the teacher asks the question
    with the largest min(#yes, #no) over the candidates (first such question on ties: one deterministic
    tree for the student to imitate; an asked question no longer splits, so none repeats), and keeps the
    candidates that agree with the answer (the teacher reads the secret only for that). It guesses the
    first candidate when one is left, when no question splits them, or on the last turn (`env.max_turns`);
    a wrong guess drops that word. With at most 7 questions and a guess it can certify 2**7 = 128 of the
    187 words: 68.4%, the optimum for 8 turns.
    answerer="oracle": the env answers; the mask takes the answer with the question.
    answerer="lm" (two seats): a question is two env steps; seat 1 replies with the oracle's truthful
    `Yes` / `No` to the question the env routed to it (`state.pending`), and the mask takes the answer then.
    Both seats' moves are targets (each reads its own transcript; the answerer's holds the secret), so
    one model learns both roles.
    noise: with this chance a question turn asks a random question instead (played, not a target; the mask
    still takes its answer). Guess and answer turns are always the teacher's.
    explore: how that question is drawn (EXPLORE_QUESTIONS): "uniform" over the listed questions, or
    "balanced" (true answer Yes half the time: an answerer trained on them cannot settle for "always No").
    """
    if explore not in EXPLORE_QUESTIONS:
        raise ValueError(f"greedy_splitter explore must be one of {sorted(EXPLORE_QUESTIONS)}, got {explore!r}")
    draw = EXPLORE_QUESTIONS[explore]
    answers = env.answers  # [W, Q] bool
    num_words = answers.shape[0]
    last_turn = env.max_turns - 1
    lm = env.answerer == "lm"

    def init(state) -> jax.Array:
        return jnp.ones((num_words,), bool)  # [W] candidates

    def ask(key, memory, state) -> tuple[TextAction, jax.Array, jax.Array]:
        """The questioner's move: (action, explored [], candidates after it [W])."""
        k_explore, k_question = jax.random.split(key)
        count = memory.sum()
        yes = jnp.sum(answers & memory[:, None], axis=0)  # [Q]
        split = jnp.minimum(yes, count - yes)  # [Q] candidates the smaller answer keeps
        guess_now = (count <= 1) | (split.max() == 0) | (state.questions >= last_turn)
        explore = (jax.random.uniform(k_explore) < noise) & ~guess_now
        question = jnp.where(explore, draw(k_question, answers[state.secret]), jnp.argmax(split))
        word = jnp.argmax(memory)  # the first candidate
        # the oracle answers with the question; the lm answerer's reply updates the mask on its own turn
        asked = memory & (answers[:, question] == answers[state.secret, question]) if not lm else memory
        guessed = memory & (jnp.arange(num_words) != word)
        action = jax.tree.map(lambda g, a: jnp.where(guess_now, g, a), env.guess_action(word), env.ask_action(question))
        return action, explore, jnp.where(guess_now, guessed, asked)

    def reply(memory, state) -> tuple[TextAction, jax.Array]:
        """The answerer's move (lm game): the truth about the pending question, and the candidates it leaves."""
        question = jnp.maximum(state.pending, 0)
        truth = answers[state.secret, question]
        return env.answer_action(truth), memory & (answers[:, question] == truth)

    def act(key, memory, state):
        action, explore, after = ask(key, memory, state)
        if lm:
            replying = state.active[1]
            answer, answered = reply(memory, state)
            action = jax.tree.map(lambda r, q: jnp.where(replying, r, q), answer, action)
            explore, after = explore & ~replying, jnp.where(replying, answered, after)
        return action, jnp.broadcast_to(~explore, (env.num_agents,)), after

    return Script(init, act)


def marker_debater(env, noise: float = 0.0) -> Script:
    """Debate: each debater says the canned argument that adds the most markers it has not used yet (the rule
    judge counts distinct markers), and an LM judge seat names the rule's winner.

    noise: with this chance a debater turn says a uniformly random canned argument instead (played, not a
    target). Verdicts are always the teacher's, and a target only where the rule has a winner (on a draw the
    seat says `Winner: A`, not trained on: there is nothing right to say). With noise 1 the debates are
    random, which is what a judge has to learn to read (configs/sft_debate.py:judge).
    """
    gains = env.argument_markers()  # [R, K] bool
    lm = env.judge == "lm"

    def act(key, memory, state):
        k_explore, k_arg = jax.random.split(key)
        speaker = state.speeches % 2
        fresh = (gains & ~state.markers[speaker][None, :]).sum(-1)  # [R] markers each argument would add
        explore = jax.random.uniform(k_explore) < noise
        arg = jnp.where(explore, jax.random.randint(k_arg, (), 0, gains.shape[0]), jnp.argmax(fresh))
        action = env.make_action(env.arguments, jnp.full((env.num_agents,), arg), state.active)
        target = jnp.broadcast_to(~explore, (env.num_agents,))
        if lm:
            rule = env.rule_verdict(state.markers)  # final once the debate is over (the judge's turn)
            verdict = env.make_action(env.verdicts, jnp.full((env.num_agents,), jnp.maximum(rule, 0)), state.active)
            judging = state.active[2]
            action = jax.tree.map(lambda v, d: jnp.where(judging, v, d), verdict, action)
            target = jnp.where(judging, rule >= 0, target)
        return action, target, memory

    return stateless(act)


# ---- random legal players: a format-only warm start ---------------------------------------------------------
# Every move is uniformly random among the legal ones and every move is a target: a student that imitates them
# learns to speak the game (the reply's form, when to ask and when to guess) and nothing that wins it.

def random_cell(env, noise: float = 0.0) -> Script:
    """Tic-tac-toe: the seat to move plays a uniformly random empty cell."""
    del noise  # every move is already random

    def act(key, memory, state):
        return env.opponent_action(key, state, "random"), jnp.ones((env.num_agents,), bool), memory

    return stateless(act)


def random_guess(env, noise: float = 0.0) -> Script:
    """Guess the number: a uniformly random number in the episode's range each turn, deaf to the feedback."""
    del noise

    def act(key, memory, state):
        return env.guess_action(jax.random.randint(key, (), 0, state.size)), jnp.ones((env.num_agents,), bool), memory

    return stateless(act)


def random_questions(env, noise: float = 0.0, guess_chance: float = 0.0) -> Script:
    """Twenty questions: a uniformly random listed question each turn and a uniformly random word on the last
    one (`guess_chance`: also on any earlier turn with this chance); with answerer="lm" the answerer replies
    Yes or No at random."""
    del noise
    num_words, num_questions = env.answers.shape
    last_turn = env.max_turns - 1
    lm = env.answerer == "lm"

    def act(key, memory, state):
        k_guess, k_word, k_question, k_answer = jax.random.split(key, 4)
        guess_now = (state.questions >= last_turn) | (jax.random.uniform(k_guess) < guess_chance)
        action = jax.tree.map(lambda g, a: jnp.where(guess_now, g, a),
                              env.guess_action(jax.random.randint(k_word, (), 0, num_words)),
                              env.ask_action(jax.random.randint(k_question, (), 0, num_questions)))
        if lm:
            answer = env.answer_action(jax.random.bernoulli(k_answer))
            action = jax.tree.map(lambda r, q: jnp.where(state.active[1], r, q), answer, action)
        return action, jnp.ones((env.num_agents,), bool), memory

    return stateless(act)


def tool_user(env, noise: float = 0.0) -> Script:
    """Calculator: call `calc: A*B` on the problem's operands, then answer the calculator's result (without a
    tool, answer the product at once); `noise`: a call on random operands instead (played, not a target)."""

    def act(key, memory, state):
        k_explore, k_operands = jax.random.split(key)
        explore = jax.random.uniform(k_explore) < noise
        called = (state.result == state.a * state.b) | (not env.tool)  # without a tool: answer at once
        answer = env.answer_action(state.a * state.b)
        x, y = jax.random.randint(k_operands, (2,), state.low, state.high + 1)
        call = env.call_action(jnp.where(explore, x, state.a), jnp.where(explore, y, state.b))
        action = jax.tree.map(lambda a, c: jnp.where(called, a, c), answer, call)
        return action, (called | ~explore)[None], memory

    return stateless(act)


def random_tool(env, noise: float = 0.0) -> Script:
    """Calculator: each turn a call on random operands or a random answer (a coin; the last turn answers),
    deaf to the problem and to what the calculator said."""
    del noise

    def act(key, memory, state):
        return env.random_action(key, state), jnp.ones((env.num_agents,), bool), memory

    return stateless(act)


SCRIPTS: dict[str, Callable[..., Script]] = {
    "text/guess_number": binary_search, "text/arithmetic": exact_answer, "text/tic_tac_toe": minimax_selfplay,
    "text/twenty_questions": greedy_splitter, "text/debate": marker_debater, "text/calculator": tool_user,
}
RANDOM_PLAYERS: dict[str, Callable[..., Script]] = {
    "text/tic_tac_toe": random_cell, "text/guess_number": random_guess, "text/twenty_questions": random_questions,
    "text/calculator": random_tool,
}
# config.teacher: who plays the SFT rows, the game's expert or a random legal player (format only)
TEACHERS: dict[str, dict[str, Callable[..., Script]]] = {"expert": SCRIPTS, "random": RANDOM_PLAYERS}


def make_script(env_name: str, env, noise: float = 0.0, teacher: str = "expert", **kwargs) -> Script:
    """The `teacher` ("expert" or "random") of `env_name`; kwargs are that script's own options (e.g.
    binary_search's `digits`)."""
    if teacher not in TEACHERS:
        raise ValueError(f"teacher {teacher!r} is unknown; expected one of {', '.join(TEACHERS)}")
    scripts = TEACHERS[teacher]
    if env_name not in scripts:
        raise ValueError(f"no {teacher} teacher for {env_name!r}; {teacher} teachers exist for "
                         f"{', '.join(sorted(scripts))}")
    return scripts[env_name](env, noise=noise, **kwargs)
