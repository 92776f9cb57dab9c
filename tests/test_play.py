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


def test_play_refuses_a_one_seat_game_and_a_missing_checkpoint_in_one_line(tmp_path):
    one_seat = subprocess.run([sys.executable, PLAY, f"--config={os.path.join(ROOT, 'configs', 'guess_number.py')}:scratch"],
                              capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert one_seat.returncode == 2 and "plays two-seat games" in one_seat.stderr.strip(), one_seat.stderr[-2000:]
    assert len(one_seat.stderr.strip().splitlines()) == 1
    missing = subprocess.run([sys.executable, PLAY, f"--config={TTT}", f"--checkpoint={tmp_path}/nope"],
                             capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert missing.returncode == 2 and "no such run directory" in missing.stderr, missing.stderr[-2000:]
