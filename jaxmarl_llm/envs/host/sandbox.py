"""Grade untrusted Python by running hidden tests in a contained subprocess: the code-execution environment's judge.

    graded = grade("def add(a, b):\\n    return a + b", ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"])
    graded.share   # 1.0: the reward is the share of tests passed
    ran = run("print(37 * 91)")   # a Python tool: Ran(output="3367" and a newline, failure="")

Each call runs `python -I -S` (no site-packages, no user paths) in a fresh temporary directory that is deleted
after, with an empty environment, in its own process group, under OS limits: CPU seconds (RLIMIT_CPU), a wall
clock (the group is killed), address space (RLIMIT_AS), file size (RLIMIT_FSIZE: stdout and stderr go to files
in the directory, and a write past the limit fails), open files. Inside, before the code runs, an audit hook
(`sys.addaudithook`) refuses: starting processes (fork, exec, spawn, subprocess, os.system), signals (os.kill),
sockets, ctypes, reading or listing files outside the directory and the standard library, writing, deleting or
renaming outside the directory, and reaching the grader's frames or objects (sys._getframe, a traceback's
frames, gc). A refused call raises PermissionError in the code, so the test fails and the run goes on.

A test counts as passed only when the grader writes that test's mark, which carries a random key the code never
sees (it stays in a frame the hook keeps the code out of): a program that exits early, prints fake results or
kills itself passes nothing it did not pass. `sys.exit` in a test fails that test. Defence in depth for
research runs, not a security boundary against a determined attacker: run untrusted models' code inside a
container or VM as well.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import NamedTuple


class Limits(NamedTuple):
    cpu_seconds: int = 2
    wall_seconds: float = 5.0
    memory_mb: int = 512
    output_bytes: int = 1 << 16
    open_files: int = 32


class Graded(NamedTuple):
    passed: int
    total: int
    failure: str  # why the run ended early ("" when it ran to its end): timeout, cpu, output, exit <n>, ...

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 0.0


# runs in the child: reads {"code", "tests", "key", "root", "fd", "limits"} on stdin; writes `<key> <i>` to fd after
# test i passes
GRADER = r'''
import json, os, resource, sys

def main():
    task = json.loads(sys.stdin.read())
    for name, (soft, hard) in task.pop("limits").items():  # before the hook, which then refuses changing them
        resource.setrlimit(getattr(resource, name), (soft, hard))
    key, root = task.pop("key"), os.path.realpath(task["root"])
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    result = os.fdopen(task.pop("fd"), "w")
    frames = {"tb_frame", "f_back", "f_locals", "f_globals", "f_builtins", "gi_frame", "cr_frame", "ag_frame",
              "f_code", "tb_next"}
    starts = ("os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.",
              "os.kill", "os.killpg", "signal.", "socket.", "ctypes.", "gc.get_", "sys._getframe",
              "sys._current_frames", "os.setuid", "os.setsid", "os.chroot", "mmap.", "resource.setrlimit",
              "sys.settrace", "sys.setprofile", "sys.addaudithook", "cpython.")
    writes = ("os.remove", "os.unlink", "os.rmdir", "os.rename", "os.replace", "shutil.", "os.chmod", "os.chown",
              "os.mkdir", "os.symlink", "os.link", "os.truncate", "os.utime")

    def inside(path, *roots):
        try:
            real = os.path.realpath(os.fsdecode(path))
        except Exception:
            return False
        return any(real == r or real.startswith(r + os.sep) for r in roots)

    def hook(event, args):
        if event.startswith(starts):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "object.__getattr__" and len(args) > 1 and args[1] in frames:
            raise PermissionError("sandbox: frames are not reachable")
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
            writing = any(c in mode for c in "wax+")
            if not inside(args[0], root) and (writing or not inside(args[0], stdlib)):
                raise PermissionError(f"sandbox: no access to {args[0]!r}")
        if event in ("os.listdir", "os.scandir") and args and args[0] is not None and not inside(args[0], root, stdlib):
            raise PermissionError(f"sandbox: no access to {args[0]!r}")
        if event.startswith(writes) and not all(inside(a, root) for a in args if isinstance(a, (str, bytes))):
            raise PermissionError(f"sandbox: {event} outside its folder")
        if event == "import" and args and str(args[0]).split(".")[0] in ("ctypes", "socket", "subprocess",
                                                                       "multiprocessing", "_ctypes", "_socket"):
            raise PermissionError(f"sandbox: import {args[0]} is not allowed")

    tests, show = task["tests"], task.pop("show")
    space = {"__name__": "solution", "__builtins__": __builtins__}
    sys.addaudithook(hook)
    try:
        exec(compile(task["code"], "solution.py", "exec"), space)
    except BaseException as err:
        if show:  # a tool's caller reads the error, as a REPL prints it (the last line, no grader frames)
            print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return
    for i, test in enumerate(tests):
        try:
            exec(compile(test, f"test_{i}.py", "exec"), dict(space))
        except BaseException:
            continue
        result.write(f"{key} {i}\n")
        result.flush()

main()
'''


def _rlimits(limits: Limits) -> dict[str, tuple[int, int]]:
    """The OS limits (soft, hard) the grader sets on itself before the code runs; past RLIMIT_CPU's soft limit
    the kernel sends SIGXCPU (read as "cpu"), a second later SIGKILL."""
    both = lambda v: (v, v)  # noqa: E731
    return {"RLIMIT_CPU": (limits.cpu_seconds, limits.cpu_seconds + 1), "RLIMIT_AS": both(limits.memory_mb << 20),
            "RLIMIT_FSIZE": both(limits.output_bytes), "RLIMIT_NOFILE": both(limits.open_files),
            "RLIMIT_CORE": both(0)}


_SIGNALS = {signal.SIGXCPU: "cpu", signal.SIGXFSZ: "output", signal.SIGKILL: "killed", signal.SIGSEGV: "crash"}


class Ran(NamedTuple):
    output: str  # what the code printed (stdout, then stderr), at most `limits.output_bytes` of each
    failure: str  # as Graded's


def grade(code: str, tests: list[str], limits: Limits = Limits()) -> Graded:
    """Run `code` and then each test (a Python statement, usually an assert) in a contained subprocess."""
    passed, failure, _ = _contained(code, tests, limits)
    return Graded(len(passed), len(tests), failure)


def run(code: str, limits: Limits = Limits()) -> Ran:
    """Run `code` in the same containment and return what it printed: a Python tool an agent calls. An
    exception ends the output with its one-line message (`ZeroDivisionError: division by zero`), as a REPL's
    last line shows it."""
    _, failure, output = _contained(code, [], limits, show_errors=True)
    return Ran(output, failure)


def _contained(code: str, tests: list[str], limits: Limits, show_errors: bool = False) -> tuple[set, str, str]:
    """(the tests passed, why the run ended early or "", stdout + stderr as text) of one contained run."""
    folder = tempfile.mkdtemp(prefix="jaxmarl-sandbox-")
    key = secrets.token_hex(16)
    read, write = os.pipe()
    failure, child = "", None
    try:
        with open(os.path.join(folder, "stdout"), "wb") as out, open(os.path.join(folder, "stderr"), "wb") as err:
            child = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", GRADER], stdin=subprocess.PIPE, stdout=out, stderr=err,
                cwd=folder, env={"PATH": "/usr/bin:/bin", "HOME": folder, "TMPDIR": folder}, pass_fds=(write,),
                start_new_session=True, close_fds=True)  # its own process group: killed whole on a timeout
        os.close(write)
        try:
            child.stdin.write(json.dumps({"code": code, "tests": list(tests), "key": key, "root": folder,
                                          "fd": write, "limits": _rlimits(limits), "show": show_errors}).encode())
            child.stdin.close()
        except BrokenPipeError:
            pass
        try:
            child.wait(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            failure = "timeout"
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        with os.fdopen(read, "r", errors="replace") as marks:
            lines = marks.read(1 << 16).splitlines()
        marks = (re.fullmatch(rf"{key} (\d+)", line) for line in lines)
        passed = {int(m.group(1)) for m in marks if m is not None and int(m.group(1)) < len(tests)}
        if not failure and child.returncode:
            code_ = child.returncode
            failure = _SIGNALS.get(signal.Signals(-code_), f"signal {-code_}") if code_ < 0 else f"exit {code_}"
        output = ""
        for name in ("stdout", "stderr"):
            with open(os.path.join(folder, name), "rb") as f:
                output += f.read(limits.output_bytes).decode(errors="replace")
        return passed, failure, output
    finally:
        if child is not None:
            try:
                os.killpg(child.pid, signal.SIGKILL)  # anything the group left behind
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(folder, ignore_errors=True)

