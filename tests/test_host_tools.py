"""Tool use on the host: the calculator and the sandboxed Python a solver calls, the checker's verdicts, and the
episode played through the bridge inside jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs.host.sandbox import run
from jaxmarl_llm.envs.host.tools import ToolTask, operands
from jaxmarl_llm.envs.registry import make
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.host.sandbox import Limits


def _task(checker=False, tools=("calc", "python"), max_turns=3, seed=5):
    task = ToolTask(4, tools, checker, max_turns, 64, Limits(cpu_seconds=1, wall_seconds=3.0))
    texts, mover = task.reset(seed)
    return task, texts, mover


def test_the_python_tool_prints_and_is_contained():
    assert run("print(37 * 91)").output == "3367\n"
    assert run("1/0").output == "ZeroDivisionError: division by zero\n"
    assert run("while True: pass", Limits(cpu_seconds=1, wall_seconds=3.0)).failure in ("cpu", "timeout")
    assert run("import os\nos.kill(os.getppid(), 9)").output.startswith("PermissionError: sandbox: os.kill")
    assert run("print(open('/etc/hostname').read())").output.startswith("PermissionError")


def test_a_solver_calls_the_calculator_and_python_then_answers():
    task, texts, mover = _task()
    a, b = operands(np.random.default_rng(5), 4)
    assert mover == 0 and texts[0].endswith(f"What is {a} * {b}?\n") and "python: <code>" in texts[0]
    turn = task.step(f"calc: {a}*{b}")
    assert turn.texts == [f"\n= {a * b}\n"] and turn.rewards == [0.0] and not turn.done and turn.info["called"][0]
    turn = task.step(f"python: print({a} * {b} + 1)")
    assert turn.texts == [f"\n{a * b + 1}\n"] and not turn.done
    turn = task.step(f"Answer: {a * b}")
    assert turn.done and turn.rewards == [1.0] and turn.info["solved"] == [True]
    task, _, _ = _task()
    turn = task.step("python: while True: pass")
    assert turn.texts[0] in ("\n(cpu)\n", "\n(timeout)\n") and not turn.done  # the episode goes on
    turn = task.step("what now?")
    assert turn.rewards == [-1.0] and turn.info["format_error"] == [True] and "Invalid." in turn.texts[0]
    assert task.step("Answer: 12").rewards == [0.0]  # wrong; the turn budget (3) ends it anyway
    calc_only, _, _ = _task(tools=("calc",))
    turn = calc_only.step("python: print(1)")
    assert turn.info["format_error"] == [True]  # a tool that is not offered


def test_the_checker_rejects_sends_back_and_accepts():
    task, texts, _ = _task(checker=True)
    a, b = operands(np.random.default_rng(5), 4)
    assert len(texts) == 2 and texts[1].startswith("You check") and texts[1].endswith(f"What is {a} * {b}?\n")
    turn = task.step(f"calc: {a}*{b}")
    assert turn.texts[1] == f"Solver: calc: {a}*{b}\n= {a * b}\n" and turn.next_player == 0
    turn = task.step("Answer: 7")  # wrong: the checker's turn
    assert turn.next_player == 1 and not turn.done and turn.texts[1].endswith("Accept or reject?\n")
    turn = task.step("Reject")  # right verdict: +1; the solver tries again
    assert turn.rewards == [0.0, 1.0] and turn.texts[0] == "\nRejected. Try again.\n" and turn.next_player == 0
    assert turn.info["verdict_right"] == [False, True]
    turn = task.step(f"Answer: {a * b}")
    assert turn.next_player == 1
    turn = task.step("Accept")
    assert turn.done and turn.rewards == [1.0, 1.0] and turn.info["solved"] == [True, False]
    task, _, _ = _task(checker=True)
    task.step(f"Answer: {a * b}")
    turn = task.step("Reject")  # rejecting the product: -1, the solver goes on
    assert turn.rewards == [0.0, -1.0] and not turn.done
    task.step("Answer: 3")
    turn = task.step("maybe")  # neither word: a rejection (right here) and a format error
    assert turn.rewards == [0.0, 1.0] and turn.info["format_error"] == [False, True]
    task.step("Answer: 3")
    turn = task.step("accept.")
    assert turn.done and turn.rewards == [0.0, -1.0]  # accepting a wrong answer


def test_the_tool_game_plays_through_the_bridge_inside_jit():
    """A batch of 4 solver-and-checker games under jit(vmap): one host call per step, the rewards of the
    scripted replies, the transcripts as the game wrote them."""
    from jaxmarl_llm.tokenizers import GAMES_BPE
    from jaxmarl_llm.train.lm.setup import build_tokenizer

    tok = build_tokenizer(GAMES_BPE)
    env = make("host/tools", tokenizer=tok, digits=2, checker=True, workers=1)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    obs, state = jax.jit(jax.vmap(env.reset))(keys)
    step = jax.jit(jax.vmap(env.step))

    def reply(text):  # the same reply in both seats (only the mover's is read)
        ids = tok.encode(text)
        tokens = np.full((4, 2, env.max_action_tokens), env.codec.pad_id, np.int32)
        tokens[:, :, : len(ids)] = ids
        return TextAction(jnp.asarray(tokens), jnp.full((4, 2), len(ids), jnp.int32))

    obs, state, r1, *_ = step(keys, state, reply("python: print(6 * 7)"))
    obs, state, r2, *_ = step(keys, state, reply("Answer: 42"))
    obs, state, r3, term, trunc, info = step(keys, state, reply("Reject"))
    assert np.asarray(r1).tolist() == [[0.0, 0.0]] * 4 and np.asarray(r2).sum() == 0.0
    assert np.asarray(r3)[:, 1].tolist() == [1.0] * 4  # 42 is none of the products of two 2-digit numbers here
    assert env.host_batches == [4] * 4
    solver, checker = env.render(state, 0)
    assert "python: print(6 * 7)\n42\nAnswer: 42\n" in solver and solver.endswith("Rejected. Try again.\n")
    assert "Solver: python: print(6 * 7)\n42\nSolver: Answer: 42\nAccept or reject?\nReject" in checker
    with pytest.raises(ValueError, match="tools: shell unknown"):
        make("host/tools", tokenizer=tok, tools=("calc", "shell"))
