"""The errors every start-up check and the run loop raise (a leaf module, so any module can raise them without an
import circle)."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""


class DivergenceError(FloatingPointError):
    """A run stopped because it diverged (train/runner.py): a non-finite metric, or a `config.stop` bound crossed.

    The message is one line naming the metric, the update and the last checkpoint kept (the diverged chunk is never
    saved); experiments/*.py print it and exit with EXIT_STATUS (train/cli.py main_guard). A FloatingPointError, so
    code that caught the earlier NaN stop still catches it."""

    EXIT_STATUS = 3

    def __init__(self, message: str, *, metric: str, update: int, last_checkpoint: int | None):
        super().__init__(message)
        self.metric, self.update, self.last_checkpoint = metric, update, last_checkpoint
