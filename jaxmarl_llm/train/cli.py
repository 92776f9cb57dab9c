"""Command-line helpers shared by experiments/*.py.

`ml_collections.config_flags` reports an unknown `--config.x=...` override with
a bare AttributeError deep in flag parsing; `check_overrides` runs first and
names the key and the valid choices instead.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import ml_collections


def load_config_file(path: str) -> ml_collections.ConfigDict:
    """`configs/NAME.py`, or `configs/NAME.py:VARIANT` -> get_config("VARIANT") (as ml_collections' --config does)."""
    path, sep, variant = path.partition(":")
    spec = importlib.util.spec_from_file_location("_config_module", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--config: cannot load {path!r}; pass a configs/NAME.py file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config(variant) if sep else module.get_config()


def check_overrides(argv: list[str], flag: str = "config") -> None:
    """Exit with a clear message when an override names a key the config file does not have."""
    path = next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{flag}=")), None)
    if path is None:
        return
    try:
        config = load_config_file(path)
    except FileNotFoundError:
        raise SystemExit(f"--{flag}: no such file {path!r}")
    for arg in argv:
        if not arg.startswith(f"--{flag}."):
            continue
        dotted = arg[len(f"--{flag}.") :].split("=", 1)[0]
        node, walked = config, []
        for part in dotted.split("."):
            if not isinstance(node, (ml_collections.ConfigDict, dict)) or part not in node:
                valid = ", ".join(sorted(node.keys())) if isinstance(node, (ml_collections.ConfigDict, dict)) else "(none)"
                where = ".".join([flag, *walked]) if walked else flag
                raise SystemExit(f"{flag}.{dotted}: unknown key {part!r} in {where}; valid keys: {valid}")
            node, walked = node[part], [*walked, part]


def main_guard(fn):
    """Run fn(); turn config errors into a one-line message and exit status 2."""
    from jaxmarl_llm.train.config import ConfigError

    def wrapped(argv):
        try:
            return fn(argv)
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            raise SystemExit(2) from None

    return wrapped


def maybe_init_distributed() -> None:
    """On a multi-host pod (JAXMARL_MULTIHOST=1, set by tpu_scripts/launch.sh) join all hosts into one mesh."""
    if os.environ.get("JAXMARL_MULTIHOST") == "1":
        import jax

        jax.distributed.initialize()
