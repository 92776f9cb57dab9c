"""The errors every start-up check and the run loop raise (a leaf module, so any module can raise them without an
import circle)."""

import errno
import re


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""


class MissingFileError(FileNotFoundError):
    """A model or tokenizer folder without a file it must hold; the message names the folder and the file. The
    entry points print it as one line (exit status 2); a FileNotFoundError, so callers that catch that still do."""


class DivergenceError(FloatingPointError):
    """A run stopped because it diverged (run/runner.py): a non-finite metric, or a `config.stop` bound crossed.

    The message is one line naming the metric, the update and the last checkpoint kept (the diverged chunk is never
    saved); experiments/*.py print it and exit with EXIT_STATUS (run/cli.py main_guard). A FloatingPointError, so
    code that caught the earlier NaN stop still catches it."""

    EXIT_STATUS = 3

    def __init__(self, message: str, *, metric: str, update: int, last_checkpoint: int | None):
        super().__init__(message)
        self.metric, self.update, self.last_checkpoint = metric, update, last_checkpoint


class DiskFullError(OSError):
    """A run stopped because a write found no space (ENOSPC / EDQUOT) on its disk.

    Raised by run/runner.py with the file, the update and the last complete checkpoint (a checkpoint is written
    to a temporary folder and renamed when complete, so a failed save never replaces a good one; metrics.csv rows
    past the checkpoint, and a torn last row, are dropped on resume). experiments/*.py print the one line and exit
    with EXIT_STATUS (run/cli.py main_guard)."""

    EXIT_STATUS = 2

    def __init__(self, message: str, path: str | None = None):
        super().__init__(errno.ENOSPC, message, path)

    def __str__(self) -> str:
        return self.strerror


NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# how tensorstore (orbax's writer) reports ENOSPC / EDQUOT: a ValueError("RESOURCE_EXHAUSTED: ... local file
# "<dir>": Failed writing: "<file>": ...: No space left on device [os_error_code='28']")
_NO_SPACE_TEXT = re.compile(r"No space left on device|Disk quota exceeded|os_error_code='(?:%d|%d)'" % NO_SPACE_ERRNOS)
_FAILED_PATH = re.compile(r'(?:Failed writing|local file):? "([^"]+)"')


def no_space_cause(err: BaseException) -> tuple[BaseException, str | None] | None:
    """The error in `err`'s chain (itself, its __cause__ / __context__) that says the disk is full, and the file
    it names (None when it names none); None when no error in the chain is about disk space."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, DiskFullError):
            return err, err.filename
        if isinstance(err, OSError) and err.errno in NO_SPACE_ERRNOS:
            return err, err.filename
        text = str(err)
        if _NO_SPACE_TEXT.search(text):
            paths = _FAILED_PATH.findall(text)
            return err, (paths[0] if paths else None)
        err = err.__cause__ or err.__context__
    return None


class ProcessGroupError(RuntimeError):
    """The processes of a run could not form their group (parallel/rendezvous.py): a process that never came, an
    unreachable process 0, an address that cannot be used. One line naming the processes, exit status 2."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during a run (run/runner.py): the message says the update reached, the last checkpoint and
    how to continue; experiments/*.py print it and exit with EXIT_STATUS (128 + SIGINT, as a shell reports it)."""

    EXIT_STATUS = 130


class HostEnvError(RuntimeError):
    """A game running on the host (envs/host/bridge.py) raised: the message is one line naming the game, the
    episode, its seed and the moves played. It reaches the caller wrapped by XLA; `host_env_cause` finds it and
    experiments/*.py print that line and exit with EXIT_STATUS (run/cli.py main_guard)."""

    EXIT_STATUS = 4


_HOST_ENV_LINE = re.compile(r"HostEnvError: (host env [^\n]*)")


def host_env_cause(err: BaseException) -> str | None:
    """The `HostEnvError` line inside `err` or its chain (XLA passes a callback's error on as text); None if none."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, HostEnvError):
            return str(err)
        found = _HOST_ENV_LINE.search(str(err))
        if found:
            return found.group(1)
        err = err.__cause__ or err.__context__
    return None
