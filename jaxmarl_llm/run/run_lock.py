"""One run at a time per run folder: a lock held for the run's life.

Two runs started on the same `run.out_dir` interleave their metrics.csv rows, write checkpoints of unknown origin
and crash each other in orbax. So a run takes `<out_dir>/run.lock` before it touches the folder and holds it until
it ends. The lock is an `flock` on the open file, which the kernel drops when its process dies (kill -9 included),
so a lock can never outlive its run; the file's text names the holder (pid, host, start time, command) for the
one line that refuses a second run. A file left by a dead run (nobody holds its flock) is taken over, with a line
naming the run that left it. Under several processes each process takes its own file (`run.lock.<index>`), so
every process of a second run is refused alike without a word between them.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time

from jaxmarl_llm.errors import NO_SPACE_ERRNOS, ConfigError

LOCK_FILE = "run.lock"


def lock_path(out_dir: str, process_index: int = 0) -> str:
    """The lock file of process `process_index` of a run in `out_dir`."""
    return os.path.join(out_dir, LOCK_FILE if process_index == 0 else f"{LOCK_FILE}.{process_index}")


def _holder(text: str) -> str:
    """Who a lock file names, for a message: `pid 123 on host h (started 2026-11-26 06:40:01: python train.py ...)`."""
    try:
        who = json.loads(text)
        command = " ".join(who.get("command", []))
        command = command if len(command) <= 160 else command[:159] + "…"  # cut, and said to be
        return f"pid {who['pid']} on host {who['host']} (started {who['started']}: {command})"
    except (ValueError, KeyError, TypeError):
        return "a process that left no readable record"


class RunLock:
    """The lock on one run folder; `acquire` takes it or raises ConfigError, `release` drops it (idempotent)."""

    def __init__(self, out_dir: str, process_index: int = 0):
        self.out_dir = out_dir
        self.path = lock_path(out_dir, process_index)
        self.fd: int | None = None
        self.made = False  # the folder was made by acquire: release removes it if the run left it empty

    def acquire(self) -> str | None:
        """Take the lock; returns a line to print when it took over a dead run's file (else None). ConfigError
        (one line, naming the holder) when a live process holds it."""
        self.made = not os.path.isdir(self.out_dir)
        try:
            os.makedirs(self.out_dir, exist_ok=True)
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644))
        except OSError as err:  # not permitted, a path through a file, a read-only filesystem
            if err.errno in NO_SPACE_ERRNOS:  # a full disk has its own line (errors.py)
                raise
            raise ConfigError(f"config.run.out_dir: cannot write in {self.out_dir!r} ({err.strerror}: "
                              f"{err.filename}); choose a folder this user can write") from None
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                raise ConfigError(
                    f"config.run.out_dir: {self.out_dir!r} is in use by another run, {_holder(text)}; wait for it "
                    f"to end, or choose another --config.run.out_dir (its lock: {self.path})") from None
            # the holder before us may have deleted the file between our open and our flock: lock the file that
            # is at the path now, not an unlinked one
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        left = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                  "command": sys.argv}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self.fd = fd
        if left.strip():
            return f"took over the lock of {self.out_dir}, left by a run that is gone: {_holder(left)}"
        return None

    def release(self) -> None:
        """Delete the file and drop the lock (the file first: no one may lock a file that is about to go); remove
        the folder when acquire made it and nothing else was written there."""
        if self.fd is None:
            return
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None
        if self.made:  # a run refused before writing anything leaves no empty folder behind
            try:
                os.rmdir(self.out_dir)
            except OSError:  # not empty: the run's files
                pass

    def __enter__(self) -> "RunLock":
        line = self.acquire()
        if line:
            print(line, file=sys.stderr, flush=True)
        return self

    def __exit__(self, *exc) -> None:
        self.release()
