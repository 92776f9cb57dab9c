"""experiments/play.py driven through a pseudo-terminal, as a person at a terminal plays it: the board, the
agent's move with its probability, a reply that is not legal asked again (not a crash), the game to its end."""

import os
import pty
import select
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAY = os.path.join(ROOT, "experiments", "play.py")
TTT = os.path.join(ROOT, "configs", "tic_tac_toe.py") + ":scratch"
GN = os.path.join(ROOT, "configs", "guess_number.py") + ":scratch"
DEBATE = os.path.join(ROOT, "configs", "debate.py") + ":lm"
TQ_LM = os.path.join(ROOT, "configs", "twenty_questions.py") + ":lm"


def _play_in_a_terminal(args: list[str], typed: str, timeout: float = 240) -> tuple[int, str]:
    """Run play.py on a pty, type `typed` (lines), return (exit status, everything the terminal showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, PLAY, *args], stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": ROOT})
    os.close(slave)
    os.write(master, typed.encode())
    shown, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the program ended and closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    return proc.returncode, shown.decode("utf-8", "replace").replace("\r\n", "\n")


def test_play_tic_tac_toe_against_the_agent_in_a_terminal():
    # X: a word that is no move, a taken cell later, then every cell in order (the illegal ones asked again)
    status, shown = _play_in_a_terminal([f"--config={TTT}", "--seat=0"], "abc\n5\n" + "".join(f"{c}\n" for c in
                                                                                              range(1, 10)))
    assert status == 0, shown[-3000:]
    assert "you are seat 0 (x)" in shown and "X moves first" not in shown.split("you are seat")[0]
    assert "not a legal reply now; legal: Move: 1, Move: 2" in shown  # `abc` asked again, the legal cells named
    assert "agent (o): 'Move: " in shown and "(p = " in shown  # the agent's move with its probability
    assert "----- the end -----" in shown and "your return " in shown
    board = shown.split("----- the end -----")[1]
    assert any(line in board for line in ("You win.", "You lose.", "Draw.")), board


def test_play_guess_the_number_as_the_secret_keeper():
    """A one-seat game: you keep the secret. A word that is no answer is asked again; `c` ends the game with the
    env's own "Correct!" and the agent's +1."""
    status, shown = _play_in_a_terminal([f"--config={GN}"], "maybe\nc\n")
    assert status == 0, shown[-3000:]
    assert "you are the secret keeper; the agent plays guesser" in shown
    assert "agent (guesser): 'Guess: " in shown and "too high (h), too low (l) or correct (c)?>" in shown
    assert "answer one of: h, high, l, low, c, correct" in shown
    end = shown.split("----- the end -----")[1]
    assert "Correct!" in end and "returns: guesser +1" in end, end


def test_play_debate_as_the_judge():
    """Three seats: the agent argues both sides, you give the verdict (a reply that is not one is asked again)."""
    status, shown = _play_in_a_terminal([f"--config={DEBATE}", "--seat=2", "--config.policy.actions=constrained"],
                                        "maybe\nWinner: A\n")
    assert status == 0, shown[-3000:]
    assert "you are seat 2 (judge); the agent plays debater_a, debater_b" in shown
    assert shown.count("agent (debater_a): ") == 2 and shown.count("agent (debater_b): ") == 2
    assert "not a legal reply now; legal: Winner: A, Winner: B" in shown
    assert "returns: debater_a +1, debater_b -0.5, judge +0 (you)" in shown.split("----- the end -----")[1]


def test_play_twenty_questions_as_the_answerer():
    """The agent asks (sampled, restricted to the listed questions and guesses), you answer Yes or No."""
    status, shown = _play_in_a_terminal([f"--config={TQ_LM}", "--seat=1", "--config.policy.actions=constrained",
                                         "--temperature=1"], "maybe\n" + "Yes\n" * 10)
    assert status == 0, shown[-3000:]
    assert "you are seat 1 (answerer); the agent plays questioner" in shown
    assert "not a legal reply now; legal: Yes, No" in shown
    end = shown.split("----- the end -----")[1]
    assert "The secret word is:" in end and "Ask: " in end and "Answer: Yes" in end, end


def test_the_keeper_sets_a_secret_that_gives_each_answer():
    """Brute force over small intervals: the secret the keeper picks makes the env itself answer the guess as the
    person did (the interval shrinks to the guess's side, or the game is solved), and every answer that no secret in
    the interval could give is refused."""
    import jax
    import jax.numpy as jnp
    import pytest

    from jaxmarl_llm.envs.text.guess_number import GuessNumber
    from jaxmarl_llm.evaluation.keepers import CORRECT, HIGH, LOW, guess_number_secret

    env = GuessNumber()
    _, state = env.reset_to(jnp.int32(0))
    step = jax.jit(env.step)
    for low in range(0, 5):
        for high in range(low, 6):
            for guess in range(0, 7):
                for answer in (HIGH, LOW, CORRECT):
                    here = state.replace(low=jnp.int32(low), high=jnp.int32(high))
                    possible = [s for s in range(low, high + 1)
                                if {HIGH: guess > s, LOW: guess < s, CORRECT: guess == s}[answer]]
                    if not possible:
                        with pytest.raises(ValueError, match="contradicts your earlier answers"):
                            guess_number_secret(here, guess, answer)
                        continue
                    secret = guess_number_secret(here, guess, answer)
                    assert secret in possible
                    after = step(jax.random.PRNGKey(0), here.replace(secret=jnp.int32(secret)),
                                 env.guess_action(jnp.int32(guess)))
                    solved, new_low, new_high = bool(after.info["solved"][0]), int(after.state.low), int(
                        after.state.high)
                    assert solved == (answer == CORRECT)
                    if answer == HIGH:
                        assert (new_low, new_high) == (low, min(high, guess - 1))
                    if answer == LOW:
                        assert (new_low, new_high) == (max(low, guess + 1), high)


def test_play_refuses_a_game_with_no_part_a_seat_out_of_range_and_a_missing_checkpoint_in_one_line(tmp_path):
    tq = os.path.join(ROOT, "configs", "twenty_questions.py")  # the oracle's game: one seat and no keeper
    one_seat = subprocess.run([sys.executable, PLAY, f"--config={tq}"], capture_output=True, text=True, timeout=240,
                              cwd=ROOT)
    assert one_seat.returncode == 2 and "has one seat and no part for you to play" in one_seat.stderr, \
        one_seat.stderr[-2000:]
    assert len(one_seat.stderr.strip().splitlines()) == 1
    seat = subprocess.run([sys.executable, PLAY, f"--config={TTT}", "--seat=2"], capture_output=True, text=True,
                          timeout=240, cwd=ROOT)
    assert seat.returncode == 2 and seat.stderr.strip() == "error: --seat=2: one of 0 (x), 1 (o)", seat.stderr[-2000:]
    missing = subprocess.run([sys.executable, PLAY, f"--config={TTT}", f"--checkpoint={tmp_path}/nope"],
                             capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert missing.returncode == 2 and "no such run directory" in missing.stderr, missing.stderr[-2000:]
