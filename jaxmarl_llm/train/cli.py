"""Command-line helpers shared by experiments/*.py.

`ml_collections.config_flags` reports an unknown `--config.x=...` override with
a bare AttributeError deep in flag parsing (and an unknown `configs/NAME.py:VARIANT`
with a traceback); `check_overrides` runs first and names the key, or the file
and variant, instead. Every such mistake is one line on stderr and exit status 2;
a run that diverged (train/runner.py) is one line on stderr and exit status 3.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from typing import NoReturn

import ml_collections


def fail(message: str) -> NoReturn:
    """A command-line mistake: one line on stderr, exit status 2 (as main_guard does for config errors)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def load_config_file(path: str) -> ml_collections.ConfigDict:
    """`configs/NAME.py`, or `configs/NAME.py:VARIANT` -> get_config("VARIANT") (as ml_collections' --config does)."""
    path, sep, variant = path.partition(":")
    spec = importlib.util.spec_from_file_location("_config_module", path)
    if spec is None or spec.loader is None:
        fail(f"--config: cannot load {path!r}; pass a configs/NAME.py file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if sep and not inspect.signature(module.get_config).parameters:
        raise ValueError(f"{path}:{variant}: this config file has no variants; pass --config={path}")
    return module.get_config(variant) if sep else module.get_config()


def check_overrides(argv: list[str], flag: str = "config") -> None:
    """Exit with a clear message when an override names a key the config file does not have."""
    path = next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{flag}=")), None)
    if path is None:
        return
    try:
        config = load_config_file(path)
    except FileNotFoundError:
        fail(f"--{flag}: no such file {path!r}")
    except ValueError as err:
        if ":" not in path:  # a bug in the config file itself: keep its traceback
            raise
        # config modules raise it for an unknown variant (configs/NAME.py:VARIANT); name the file and variant
        fail(f"--{flag}: {err}" if path in str(err) else f"--{flag}={path}: {err}")
    for arg in argv:
        if not arg.startswith(f"--{flag}."):
            continue
        dotted = arg[len(f"--{flag}.") :].split("=", 1)[0]
        node, walked = config, []
        for part in dotted.split("."):
            if not isinstance(node, (ml_collections.ConfigDict, dict)) or part not in node:
                valid = ", ".join(sorted(node.keys())) if isinstance(node, (ml_collections.ConfigDict, dict)) else "(none)"
                where = ".".join([flag, *walked]) if walked else flag
                fail(f"{flag}.{dotted}: unknown key {part!r} in {where}; valid keys: {valid}")
            node, walked = node[part], [*walked, part]


def main_guard(fn):
    """Run fn(); turn config errors, env keywords an env refuses (envs/registry.py EnvArgumentError) and model
    folders that do not match the config (models/hf.py CheckpointError) into a one-line message and exit status 2, and a diverged run (train/errors.py
    DivergenceError: the metric, the update, the last checkpoint kept) into one line and exit status 3."""
    from jaxmarl_llm.envs.registry import EnvArgumentError
    from jaxmarl_llm.models.hf import CheckpointError
    from jaxmarl_llm.train.errors import ConfigError, DivergenceError

    def wrapped(argv):
        try:
            return fn(argv)
        except (ConfigError, CheckpointError) as err:
            fail(str(err))
        except EnvArgumentError as err:
            fail(f"config.env_kwargs: {err}")
        except DivergenceError as err:
            print(f"error: {err}", file=sys.stderr)
            raise SystemExit(DivergenceError.EXIT_STATUS) from None

    return wrapped


def maybe_init_distributed() -> None:
    """On a multi-host pod (JAXMARL_MULTIHOST=1, set by tpu_scripts/launch.sh) join all hosts into one mesh."""
    if os.environ.get("JAXMARL_MULTIHOST") == "1":
        import jax

        jax.distributed.initialize()
