"""IPPO with MLP policies on MPE simple_tag (3 adversaries chase 1 good agent, 2 obstacles).

Adversaries and the good agent have different observation sizes: the env pads
them and per-agent nets (share_params=False) learn each role.
"""

from jaxmarl_llm.train.config import mlp_ppo_defaults


def get_config():
    c = mlp_ppo_defaults()
    c.env_name = "mpe/simple_tag"
    c.env_kwargs = {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2, "max_cycles": 25, "continuous_actions": False}
    c.share_params = False
    c.num_envs = 64
    c.total_timesteps = 5_000_000
    c.run.out_dir = "runs/tag"
    return c
