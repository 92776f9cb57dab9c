"""Free text from a format-only warm start: the random legal players whose transcripts teach the games' reply
format and no skill (data/teachers.py RANDOM_PLAYERS), read through the games' BPE tokenizer."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.data.collect import collect
from jaxmarl_llm.data.teachers import make_script
from jaxmarl_llm.envs.text.guess_number import NUM_VALUES, GuessNumber
from jaxmarl_llm.envs.text.tic_tac_toe import TicTacToe
from jaxmarl_llm.envs.text.twenty_questions import TwentyQuestions
from jaxmarl_llm.tokenizers import GAMES_BPE, HFTokenizer


@pytest.fixture(scope="module")
def bpe():
    pytest.importorskip("transformers")
    return HFTokenizer(GAMES_BPE)


def _play(env, name, num_turns, episodes, seed=0, **kw):
    script = make_script(name, env, teacher="random", **kw)
    rows = jax.jit(lambda k: collect(k, env, script, num_turns, jnp.arange(episodes), env.codec.eos_id))(
        jax.random.PRNGKey(seed))
    return jax.device_get(rows)


def _random_ttt_outcomes() -> tuple[float, float, float]:
    """P(X wins), P(O wins), P(draw) when both seats play uniformly random legal moves: by brute force."""
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]

    @functools.lru_cache(maxsize=None)
    def value(board: str) -> tuple[float, float, float]:
        for a, b, c in lines:
            if board[a] != "." and board[a] == board[b] == board[c]:
                return (1.0, 0.0, 0.0) if board[a] == "X" else (0.0, 1.0, 0.0)
        empty = [i for i, ch in enumerate(board) if ch == "."]
        if not empty:
            return (0.0, 0.0, 1.0)
        mark = "X" if board.count("X") == board.count("O") else "O"
        outs = [value(board[:i] + mark + board[i + 1:]) for i in empty]
        return tuple(sum(o[j] for o in outs) / len(outs) for j in range(3))

    return value("." * 9)


def _within(count: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    return abs(count - n * p) <= sigmas * np.sqrt(n * p * (1 - p)) + 1


def test_random_tic_tac_toe_player_has_random_plays_outcomes_and_every_move_is_a_target(bpe):
    env = TicTacToe(tokenizer=bpe, capacity=640)
    n = 2000
    rows = _play(env, "text/tic_tac_toe", 9, n)
    x, o = rows.returns[0::2], rows.returns[1::2]  # rows: env 0 X, env 0 O, env 1 X, ...
    assert not (x < -1).any() and not (o < -1).any()  # no illegal or unparsable move (-2)
    p_x, p_o, p_draw = _random_ttt_outcomes()
    assert abs(p_x - 0.5849) < 1e-3 and abs(p_o - 0.2881) < 1e-3  # the known values of random play
    assert _within(int((x == 1).sum()), n, p_x) and _within(int((o == 1).sum()), n, p_o)
    assert _within(int(((x == 0) & (o == 0)).sum()), n, p_draw)
    # every move is a target: each row's target moves are the moves its seat made (X makes 5 of a drawn game)
    moves = rows.turn_mask.any(-1).sum(-1)
    draws = np.repeat((x == 0) & (o == 0), 2)
    assert (moves[0::2][draws[0::2]] == 5).all() and (moves[1::2][draws[1::2]] == 4).all()
    text = bpe.decode(rows.tokens[0][rows.mask[0] & (rows.tokens[0] != bpe.eos_id)])
    assert text.startswith("Move: ")


def test_random_guesser_solves_at_random_plays_rate(bpe):
    env = GuessNumber(tokenizer=bpe, capacity=256, max_turns=10)
    n = 4000
    rows = _play(env, "text/guess_number", 10, n)
    p = 1 - (1 - 1 / NUM_VALUES) ** 10  # ten guesses, each uniform and deaf to the feedback: ~0.97%
    assert _within(int(rows.solved.sum()), n, p)
    assert (rows.turn_mask.any(-1).sum(-1) >= 1).all() and (rows.returns >= 0).all()  # every guess parses


@pytest.mark.parametrize("guess_chance", [0.0, 0.2])
def test_random_questioner_guesses_at_random_plays_rate(bpe, guess_chance):
    env = TwentyQuestions(tokenizer=bpe, max_turns=6, capacity=1024)
    n = 4000
    rows = _play(env, "text/twenty_questions", 6, n, guess_chance=guess_chance)
    w = env.answers.shape[0]
    # a random word on the last turn, and on each of the 5 before it with chance guess_chance (a wrong guess
    # does not end the game): each guess hits with chance 1 / w
    p = 1 - (1 - 1 / w) * (1 - guess_chance / w) ** 5
    assert _within(int(rows.solved.sum()), n, p)
    targets = rows.turn_mask.any(-1).sum(-1)  # every turn is a target; only a hit ends a game early
    assert (targets >= 1).all() and (targets <= 6).all() and (targets == 6).mean() > 0.97
    assert (rows.returns >= 0).all()  # every reply parses


def test_unknown_teachers_are_refused():
    env = TicTacToe()
    with pytest.raises(ValueError, match="teacher 'best' is unknown"):
        make_script("text/tic_tac_toe", env, teacher="best")
    with pytest.raises(ValueError, match="no random teacher for 'text/debate'"):
        make_script("text/debate", env, teacher="random")
