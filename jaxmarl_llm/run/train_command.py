"""Train from a config file:

    python experiments/train.py --config=configs/spread_mlp.py
    python experiments/train.py --config=configs/spread_mlp.py --config.lr=1e-3 --config.resume=True
"""

from __future__ import annotations

import sys

from ml_collections import config_flags

from jaxmarl_llm.parallel import multihost
from jaxmarl_llm.run.cli import (check_overrides, command_config, config_name, main_guard, maybe_init_distributed,
                                  order_cpu_collectives, run_program)
from jaxmarl_llm.run.entry import train_from_config

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file.", lock_config=True)


@main_guard
def main(argv):
    config = command_config(argv, _CONFIG.value)
    if not config.run.get("title", "x"):  # the plots say which config (and variant) drew them
        config.run.title = config_name(sys.argv)
    order_cpu_collectives(config)  # before jax starts its backend
    maybe_init_distributed()
    result = train_from_config(config)
    if not multihost.primary():  # one process of several: the primary reports the run
        return
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in result["metrics"].items()})
    print(f"outputs in {result['out_dir']}")



def run() -> None:
    """The command (`jaxmarl-train`, experiments/train.py): a config key the file lacks is named before flags parse."""
    check_overrides(sys.argv)
    run_program(main)
