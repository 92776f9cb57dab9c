"""The error every start-up check raises (a leaf module, so any module can raise it without an import circle)."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""
