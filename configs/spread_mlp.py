"""IPPO with MLP policies on MPE simple_spread (N=3), tuned for 2 CPU cores.

Start: JaxMARL's IPPO-FF hyper-parameters (see `mlp_ppo_defaults`). Changes,
and why: see docs/benchmarks.md ("Tuning configs/spread_mlp.py").
"""

from jaxmarl_llm.train.config import mlp_ppo_defaults


def get_config():
    c = mlp_ppo_defaults()
    c.env_name = "mpe/simple_spread"
    c.env_kwargs.num_agents = 3
    c.run.out_dir = "runs/spread_mlp"
    return c
