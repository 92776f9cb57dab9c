"""Sweep numeric hyper-parameters and seeds in one compiled program:

    python experiments/sweep.py --config=configs/spread_mlp.py --sweep.lr=1e-4,3e-4,1e-3 --sweep.seeds=4
"""

from __future__ import annotations

import os
import sys

import ml_collections
from ml_collections import config_flags

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.run import entry
from jaxmarl_llm.run.cli import check_overrides, command_config, fail, main_guard, maybe_init_distributed, run_program
from jaxmarl_llm.run.run_lock import RunLock
from jaxmarl_llm.run.sweep import SWEEP_TABLE, format_table, make_grid, parse_values, run_sweep

_SWEEPABLE = ("lr", "clip_eps", "ent_coef", "ent_coef_end", "entropy_max", "vf_coef", "gamma", "gae_lambda",
              "max_grad_norm", "max_step_kl", "kl_coef",
              "magnet_rate", "rae_decay",  # MMD's magnet, RAE's baselines
              "weight_decay", "beta", "label_smoothing", "sft_coef",  # beta .. sft_coef: DPO
              "min_return")  # SFT with source="policy"


def _sweep_defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict({name: "" for name in _SWEEPABLE})
    c.seeds = 1
    c.out_dir = ""
    c.overwrite = False  # True: replace an earlier sweep's table and plot in out_dir
    # the metric of the curves and the table ("" = the trainer's headline), e.g. eval/exploitability; minimize:
    # the table lists the lowest first
    c.metric = ""
    c.minimize = False
    return c


_FLAGS: dict = {}  # --config and --sweep, defined by run()


def define_flags() -> None:
    """--config and --sweep (a dict flag reads its overrides from sys.argv when it is defined)."""
    _FLAGS["config"] = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file.", lock_config=True)
    _FLAGS["sweep"] = config_flags.DEFINE_config_dict("sweep", _sweep_defaults(),
                                                      "Comma-separated values per hyper-parameter.")


@main_guard
def main(argv):
    config, sweep = command_config(argv, _FLAGS["config"].value), _FLAGS["sweep"].value
    if sweep.seeds < 1:
        fail(f"--sweep.seeds={sweep.seeds}: at least 1 seed per setting")
    overrides = {k: parse_values(sweep[k], k) for k in _SWEEPABLE if str(sweep[k]).strip()}
    empty = [k for k, values in overrides.items() if not values]
    if empty:
        fail(f"--sweep.{empty[0]}={sweep[empty[0]]!r}: no value to sweep")
    out_dir = sweep.out_dir or os.path.join(config.run.out_dir, "sweep")
    with RunLock(out_dir):
        if os.path.exists(os.path.join(out_dir, SWEEP_TABLE)) and not sweep.overwrite:
            fail(f"--sweep.out_dir: {out_dir!r} holds an earlier sweep's {SWEEP_TABLE}; choose another "
                 "--sweep.out_dir, or pass --sweep.overwrite=True to replace its table and plot")
        _sweep(config, sweep, overrides, out_dir)


def compile_swept(config, overrides: dict) -> None:
    """What a swept number needs in the compiled program: the step bound's forward, absent while the config's
    max_step_kl is None (each row then reads its own value, `inf` for none)."""
    if "max_step_kl" in overrides and config.get("max_step_kl") is None:
        config.max_step_kl = max(overrides["max_step_kl"])


def _sweep(config, sweep, overrides: dict, out_dir: str) -> None:
    maybe_init_distributed()
    if config.get("mesh", {}).get("fsdp", 1) != 1:
        raise ConfigError("config.mesh.fsdp: a sweep vmaps the trainer on one device, with the whole base on it; "
                          "shard a large base with experiments/train.py (one run per setting)")
    compile_swept(config, overrides)
    trainer, _, steps_per_update, headline = entry.build(config)
    rows, hparams, keys = make_grid(trainer.hparams, overrides, sweep.seeds, config.seed)
    print(f"{len(rows)} runs x {trainer.num_updates} updates in one program")
    metric = sweep.metric or headline
    result = run_sweep(trainer, rows, hparams, keys, steps_per_update, out_dir, config.run.updates_per_chunk, metric)
    print(format_table(rows, result["final"], metric, sweep.minimize))
    print(f"plot and table in {out_dir}")


def run() -> None:
    """The command (`jaxmarl-sweep`, experiments/sweep.py): an unknown --sweep. or --config. key is named first."""
    check_overrides(sys.argv, flag="sweep", defaults=_sweep_defaults())
    define_flags()
    check_overrides(sys.argv)
    run_program(main)
