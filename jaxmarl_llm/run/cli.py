"""Command-line helpers shared by experiments/*.py.

`ml_collections.config_flags` reports an unknown `--config.x=...` override with
a bare AttributeError deep in flag parsing (and an unknown `configs/NAME.py:VARIANT`
with a traceback); `check_overrides` runs first and names the key, or the file
and variant, instead. Every such mistake is one line on stderr and exit status 2;
a run that diverged (run/runner.py) is one line on stderr and exit status 3.
`--verbose` (or JAXMARL_VERBOSE=1) prints the traceback behind such a line.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import re
import sys
import traceback
from typing import Any, Mapping, MutableMapping, NoReturn

import ml_collections
from absl import flags
from absl import logging as absl_logging


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
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:  # a typo in the file: where, not a traceback through importlib
        fail(f"--config: {err.filename}:{err.lineno}: {err.msg}")
    if sep and not inspect.signature(module.get_config).parameters:
        raise ValueError(f"{path}:{variant}: this config file has no variants; pass --config={path}")
    return module.get_config(variant) if sep else module.get_config()


def command_config(argv: list[str], config: ml_collections.ConfigDict | None) -> ml_collections.ConfigDict:
    """A config-driven command's config, after refusing stray arguments and a missing --config (one line each,
    status 2); absl's logging quietened to warnings."""
    if len(argv) > 1:
        fail(f"unexpected arguments: {argv[1:]}")
    if config is None:
        fail("--config=configs/NAME.py is required")
    absl_logging.set_verbosity(absl_logging.WARNING)
    return config


def config_name(argv: list[str]) -> str:
    """`configs/NAME.py[:VARIANT]` as --config gave it, from the last `configs/` on ('' without --config)."""
    path = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), "")
    return path[path.rfind("configs/"):] if "configs/" in path else os.path.basename(path)


def check_overrides(argv: list[str], flag: str = "config", defaults: ml_collections.ConfigDict | None = None) -> None:
    """Exit with a clear message when an override names a key the config file (or `defaults`, a flag defined by a
    ConfigDict, e.g. --sweep) does not have."""
    path = next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{flag}=")), None)
    if path is None and defaults is None:
        return
    try:
        config = defaults if defaults is not None else load_config_file(path)
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


flags.DEFINE_bool("verbose", False, "On an error that is otherwise one line (a config mistake, a broken model "
                  "folder, a full disk, a diverged run), print its traceback first (or set JAXMARL_VERBOSE=1).")


def verbose() -> bool:
    """--verbose (once flags are parsed) or JAXMARL_VERBOSE=1: show the traceback behind a one-line error."""
    return os.environ.get("JAXMARL_VERBOSE", "") not in ("", "0") or (flags.FLAGS.is_parsed() and flags.FLAGS.verbose)


class _ThreadErrorsReachTheCaller(logging.Filter):
    """Drop orbax's log of an exception in one of its writer threads: orbax stores it and raises it again in the
    caller (run/checkpoints.py), where main_guard reports it once; logged, a full disk was 240 lines of the
    same error before the real traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not ("orbax" in record.pathname and "raised an exception" in str(record.msg))


_THREAD_ERRORS = _ThreadErrorsReachTheCaller()


def _quiet_closed_loop(unraisable) -> None:
    """sys.unraisablehook for a script: drop "Event loop is closed" (tensorstore finishing a write for an orbax
    save that already failed, e.g. on a full disk, after orbax closed its event loop), report anything else."""
    if isinstance(unraisable.exc_value, RuntimeError) and str(unraisable.exc_value) == "Event loop is closed":
        return
    sys.__unraisablehook__(unraisable)


def _stop(message: str, status: int, at_once: bool = False) -> NoReturn:
    """One line on stderr, after the traceback under --verbose; exit with `status`. `at_once`: end the process
    without running atexit handlers (a script whose disk is full: tensorboard's and orbax's writer threads would
    retry their writes at exit and print each failure)."""
    if verbose():
        traceback.print_exc()
    print(f"error: {message}", file=sys.stderr)
    if at_once:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    raise SystemExit(status) from None


_PROGRAM = False  # set by run_program: this process is a command (experiments/*.py, jaxmarl-*), not a test


def run_program(main) -> None:
    """Run a command's `main` as the process's program (absl flags parsed from sys.argv): the entry of
    experiments/*.py and of the console commands (jaxmarl-train, jaxmarl-eval, jaxmarl-sweep)."""
    global _PROGRAM
    _PROGRAM = True
    from absl import app

    app.run(main, flags_parser=parse_flags)


_VALUE_ERRORS = ((re.compile(r"invalid literal for int\(\) with base 10: (.*)"), r"expected an integer, not \1"),
                 (re.compile(r"could not convert string to float: (.*)"), r"expected a number, not \1"),
                 (re.compile(r"Unknown command line flag '(.*)'"), r"--\1: unknown flag (--helpfull lists them)"))


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing with a mistake as one line, status 2 (absl prints `FATAL Flags parsing error` and the
    usage hint, status 1): a value of the wrong type (`--config.num_envs=abc`), an unknown flag."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as err:
        message = str(err).removeprefix("flag ")
        for pattern, said in _VALUE_ERRORS:
            message = pattern.sub(said, message)
        fail(message)


def main_guard(fn):
    """Run fn(); turn the errors a user must act on into one line on stderr (the traceback under --verbose):
    config errors, env keywords an env refuses (envs/registry.py EnvArgumentError), model folders that do not match
    the config (models/hf.py CheckpointError) or miss a file (errors.py MissingFileError), a process group that
    cannot form (errors.py ProcessGroupError) and a full disk (errors.py DiskFullError, or any error caused by
    ENOSPC / EDQUOT) exit with status 2; a diverged run (errors.py DivergenceError: the metric, the update, the last
    checkpoint kept) with status 3; a game on the host that raised (errors.py HostEnvError: the game, the episode)
    with 4; Ctrl-C with 130 (errors.py Interrupted: the update reached, the last checkpoint).
    Any other error is a bug and keeps its traceback."""
    from jaxmarl_llm.envs.registry import EnvArgumentError
    from jaxmarl_llm.models.hf import CheckpointError
    from jaxmarl_llm.errors import (ConfigError, DiskFullError, DivergenceError, HostEnvError, Interrupted,
                                    MissingFileError, ProcessGroupError, host_env_cause, no_space_cause)

    def wrapped(argv):
        script = _PROGRAM or fn.__module__ == "__main__"  # a command run as a program, not a test calling it
        if not verbose():
            absl_logging.get_absl_logger().addFilter(_THREAD_ERRORS)
            if script:
                sys.unraisablehook = _quiet_closed_loop
        try:
            return fn(argv)
        except (ConfigError, CheckpointError, MissingFileError, ProcessGroupError) as err:
            _stop(str(err), 2)
        except DiskFullError as err:
            _stop(str(err), DiskFullError.EXIT_STATUS, at_once=script)
        except EnvArgumentError as err:
            _stop(f"config.env_kwargs: {err}", 2)
        except DivergenceError as err:
            _stop(str(err), DivergenceError.EXIT_STATUS)
        except KeyboardInterrupt as err:  # Ctrl-C: a run says where it stopped (Interrupted), anything else just stops
            _stop(str(err) or "interrupted", Interrupted.EXIT_STATUS, at_once=script)
        except Exception as err:
            host = host_env_cause(err)  # a game running on the host raised (envs/host/bridge.py)
            if host is not None:
                _stop(host, HostEnvError.EXIT_STATUS, at_once=script)
            full = no_space_cause(err)
            if full is None:
                raise
            _stop(f"no space left on device writing {full[1] or '(a file)'}: free space on that disk, then run again "
                  "(a run continues from its last complete checkpoint with --config.resume=True)", 2, at_once=script)

    return wrapped


# XLA:CPU's concurrency-optimized scheduler lets independent collectives run at once, in an order that can differ
# between devices: over an fsdp group's all-gathers and the all-device all-reduces of the loss's counts it deadlocked
# (an SFT chunk of 2+ updates at mesh.fsdp=4 on 8 host devices; XLA's rendezvous aborts after 40 s). The option is
# only read from XLA_FLAGS (a per-program `compiler_options` entry is accepted and has no effect), so it is set for
# the process before jax starts its CPU backend. GPUs and TPUs run collectives in the compiled order.
CPU_ORDERED_COLLECTIVES_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def order_cpu_collectives(config, environ: MutableMapping[str, str] | None = None) -> None:
    """A run sharding its base (mesh.fsdp > 1) gets CPU_ORDERED_COLLECTIVES_FLAG in XLA_FLAGS (unless XLA_FLAGS
    already sets that option); call before jax's first device query. Other runs keep XLA's defaults."""
    environ = os.environ if environ is None else environ
    mesh = config.get("mesh") or {}
    flags_now = environ.get("XLA_FLAGS", "")
    if int(mesh.get("fsdp", 1)) > 1 and "xla_cpu_enable_concurrency_optimized_scheduler" not in flags_now:
        environ["XLA_FLAGS"] = f"{flags_now} {CPU_ORDERED_COLLECTIVES_FLAG}".strip()


# a plain multi-node launcher (and tests/test_multiprocess.py) names the coordinator and each process's rank
COORDINATOR, NUM_PROCESSES, PROCESS_ID, LOCAL_DEVICE_IDS = (
    "JAXMARL_COORDINATOR", "JAXMARL_NUM_PROCESSES", "JAXMARL_PROCESS_ID", "JAXMARL_LOCAL_DEVICE_IDS")
JOIN_TIMEOUT, JOIN_TIMEOUT_DEFAULT_S = "JAXMARL_JOIN_TIMEOUT_S", 300.0  # how long a group waits for its processes


def distributed_settings(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """jax.distributed.initialize's keywords from the environment; None: a single-process run.

    JAXMARL_COORDINATOR=host:port with JAXMARL_NUM_PROCESSES and JAXMARL_PROCESS_ID (and optionally
    JAXMARL_LOCAL_DEVICE_IDS=0,1) start one process of an explicit group; JAXMARL_MULTIHOST=1 alone lets jax
    detect the cluster (TPU pod, SLURM, ...): {}. A partial or malformed group is one line, exit status 2."""
    if not environ.get(COORDINATOR):
        return {} if environ.get("JAXMARL_MULTIHOST") == "1" else None
    missing = [name for name in (NUM_PROCESSES, PROCESS_ID) if not environ.get(name)]
    if missing:
        fail(f"{COORDINATOR} is set but {' and '.join(missing)} is not: set all three to start one process of a group")
    try:
        settings: dict[str, Any] = {"coordinator_address": environ[COORDINATOR],
                                    "num_processes": int(environ[NUM_PROCESSES]),
                                    "process_id": int(environ[PROCESS_ID])}
        if environ.get(LOCAL_DEVICE_IDS):
            settings["local_device_ids"] = [int(i) for i in environ[LOCAL_DEVICE_IDS].split(",")]
    except ValueError:
        fail(f"{NUM_PROCESSES}, {PROCESS_ID} and {LOCAL_DEVICE_IDS} must be integers (the last a comma list)")
    if not 0 <= settings["process_id"] < settings["num_processes"]:
        fail(f"{PROCESS_ID}={settings['process_id']} must be in [0, {NUM_PROCESSES}={settings['num_processes']})")
    return settings


def maybe_init_distributed(environ: Mapping[str, str] | None = None) -> None:
    """Join this process to its group (distributed_settings) before any jax computation: jax.devices() is then
    every process's devices and the trainers' mesh spans them all (parallel/multihost.py). CPU processes exchange
    collectives through gloo (set here unless the environment chose another implementation)."""
    environ = os.environ if environ is None else environ
    settings = distributed_settings(environ)
    if settings is None:
        return
    import jax

    from jaxmarl_llm.parallel.rendezvous import rendezvous

    if jax.config.jax_cpu_collectives_implementation in (None, "", "none"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if settings:  # an explicit group: meet first, so a process that never comes is named (parallel/rendezvous.py)
        try:
            timeout = float(environ.get(JOIN_TIMEOUT, JOIN_TIMEOUT_DEFAULT_S))
        except ValueError:
            fail(f"{JOIN_TIMEOUT}={environ[JOIN_TIMEOUT]!r}: expected seconds, e.g. 300")
        rendezvous(settings["coordinator_address"], settings["num_processes"], settings["process_id"], timeout)
    try:
        jax.distributed.initialize(**settings)
    except ValueError as err:
        if settings:
            raise
        # JAXMARL_MULTIHOST=1 alone and jax detected no cluster (TPU pod, SLURM, MPI, ...) to take the group from
        fail(f"JAXMARL_MULTIHOST=1: jax found no cluster to join ({err}); on machines without a cluster manager set "
             f"{COORDINATOR}=host:port, {NUM_PROCESSES} and {PROCESS_ID} for each process (launch/multinode.sh)")
