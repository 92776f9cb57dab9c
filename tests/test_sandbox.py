"""The code-execution judge (jaxmarl_llm/envs/host/sandbox.py): hidden tests graded in a contained subprocess.

Each hostile program is contained and scored as a failure, never a crash or a hang of the caller; a right
answer passes; a program cannot forge passes it did not earn."""

import os
import time

import pytest

from jaxmarl_llm.envs.host.sandbox import Limits, grade

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADD = ["assert f(1, 2) == 3", "assert f(-1, 1) == 0", "assert f(0, 0) == 0"]


def test_a_right_answer_passes_every_test_and_a_wrong_one_some():
    assert grade("def f(a, b):\n    return a + b", ADD) == (3, 3, "")
    assert grade("def f(a, b):\n    return a * b", ADD).passed == 1  # only f(0, 0)
    assert grade("this is not python", ADD) == (0, 3, "")
    assert grade("def f(a, b):\n    return a + b", ADD).share == 1.0


@pytest.mark.parametrize("name,code,failure", [
    ("an infinite loop", "def f(a, b):\n    while True:\n        pass", "cpu"),
    ("a sleep past the wall clock", "import time\ndef f(a, b):\n    time.sleep(60)", "timeout"),
    ("a fork bomb", "import os\ndef f(a, b):\n    while True:\n        os.fork()", ""),
    ("a fork bomb through subprocess", "def f(a, b):\n    import subprocess\n    subprocess.Popen(['sh', '-c', ':'])", ""),
    ("allocating 100 GB", "def f(a, b):\n    return len(bytearray(100 << 30))", ""),
    # past RLIMIT_FSIZE a write fails (Python ignores SIGXFSZ): the test fails, the file stays at 64 KiB
    ("writing 1 GB to stdout", "def f(a, b):\n    for _ in range(1 << 20):\n        print('x' * 1024)\n    return a + b",
     ""),
    ("opening a socket", "def f(a, b):\n    import socket\n    socket.create_connection(('127.0.0.1', 9))", ""),
    ("killing its parent", "import os, signal\ndef f(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)", ""),
    ("exiting inside the tests", "import sys\ndef f(a, b):\n    sys.exit(0)", ""),
    ("exiting at once before the tests", "import os\nos._exit(0)", ""),
    ("printing fake passes", "import sys, os\nfor i in range(3):\n    print(f'0 {i}')\n    os.write(3, f'x {i}\\n'.encode())",
     ""),
    ("reading the grader's frames", "def f(a, b):\n    try:\n        raise ValueError\n    except ValueError as e:\n"
     "        return e.__traceback__.tb_frame.f_back.f_locals", ""),
])
def test_hostile_code_is_contained_and_fails(name, code, failure):
    start = time.monotonic()
    graded = grade(code, ADD, Limits(cpu_seconds=1, wall_seconds=3.0))
    assert graded.passed == 0, (name, graded)
    assert graded.failure == failure or (failure == "" and graded.failure in ("", "memory")), (name, graded)
    assert time.monotonic() - start < 10  # never a hang


def test_files_outside_its_folder_are_neither_read_nor_deleted(tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("mine")
    readme = os.path.join(ROOT, "README.md")
    tests = [f"assert f({str(keep)!r})"]
    for code in (f"def f(p):\n    return len(open({readme!r}).read()) > 0",  # the repository
                 f"import os\ndef f(p):\n    return len(os.listdir({ROOT!r})) > 0",
                 "import os\ndef f(p):\n    os.remove(p)\n    return True",
                 "import shutil, os\ndef f(p):\n    shutil.rmtree(os.path.dirname(p))\n    return True",
                 "def f(p):\n    open(p, 'w').write('theirs')\n    return True"):
        assert grade(code, tests).passed == 0, code
    assert keep.read_text() == "mine"
    # its own folder is its to use
    assert grade("def f(p):\n    open('scratch.txt', 'w').write('ok')\n    return open('scratch.txt').read() == 'ok'",
                 tests).passed == 1


def test_every_shipped_task_is_solved_by_its_solution_and_not_by_none():
    """data/code_tasks.jsonl: 50 tasks; in the sandbox each reference solution passes every hidden test and a
    function returning None fails at least one."""
    from jaxmarl_llm.envs.host.code import load_tasks

    tasks = load_tasks()
    assert len(tasks) == 50 and len({t["name"] for t in tasks}) == 50
    assert len(load_tasks(split="train")) == 40 and len(load_tasks(split="test")) == 10
    for t in tasks:
        assert f"def {t['entry']}(" in t["prompt"] and 4 <= len(t["tests"]) <= 6
        assert grade(t["solution"], t["tests"]) == (len(t["tests"]), len(t["tests"]), ""), t["name"]
        assert grade(f"def {t['entry']}(*a, **k):\n    return None", t["tests"]).passed < len(t["tests"]), t["name"]


def test_the_code_env_pays_the_share_of_tests_a_reply_passes():
    """host/code through the bridge: each game's prompt is its task; the reference solution earns 1 and `solved`,
    a stub 0; four grading threads give what one gives."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxmarl_llm.envs.registry import make
    from jaxmarl_llm.envs.text.buffers import TextAction

    n = 6
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    results = []
    for workers in (1, 4):
        env = make("host/code", split="test", capacity=1024, max_action_tokens=600, workers=workers)
        obs, state = jax.vmap(env.reset)(keys)
        prompts = [env.codec.decode(np.asarray(obs.tokens[i, 0, : obs.length[i, 0]])) for i in range(n)]
        tasks = [next(t for t in env.tasks if t["prompt"] in p) for p in prompts]
        replies = [t["solution"] if i % 2 == 0 else f"def {t['entry']}(*a):\n    return None" for i, t in enumerate(tasks)]
        table = env.codec.table(replies, width=env.max_action_tokens)
        action = TextAction(jnp.asarray(np.asarray(table.ids)[:, None]), jnp.asarray(np.asarray(table.lens)[:, None]))
        _, state, reward, term, _, info = jax.vmap(env.step)(keys, state, action)
        results.append(np.asarray(reward)[:, 0])
        assert np.asarray(term).all() and list(np.asarray(info["solved"])[:, 0]) == [True, False] * (n // 2)
        assert all(r == 1.0 for r in results[-1][0::2]) and all(r < 1.0 for r in results[-1][1::2])
    np.testing.assert_array_equal(results[0], results[1])
