"""The main job: IPPO on MPE simple_spread (N=3). Today the MLP baseline of configs/spread_mlp.py."""

from configs.spread_mlp import get_config as _mlp_config


def get_config():
    c = _mlp_config()
    c.run.out_dir = "runs/spread"
    return c
