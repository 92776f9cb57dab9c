"""IPPO with MLP policies on MPE simple_spread (N=3), tuned for 2 CPU cores.

Starts from JaxMARL's IPPO-FF hyper-parameters (`mlp_ppo_defaults`) and
changes three things, found with experiments/sweep.py (docs/benchmarks.md):
  - 64 envs x 64 steps (4096 steps per update, 2x JaxMARL's 2048): lower-variance
    updates at the same compute per env step;
  - 2 minibatches of 2048 steps (32 steps x 64 envs), as big as JaxMARL's;
  - lr 1e-3 (4x): the bigger batch tolerates it. Not more: at 1.5e-3 and above
    some seeds collapse early (entropy falls, agents drift off and the team return
    sinks below the random policy's -80): 3 of 8 seeds at 1.5e-3, 2 of 4 at 2e-3, 1 of 4 at 3e-3,
    0 of 12 at 1e-3 (400k-step vmapped sweeps, docs/benchmarks.md).
Team return passes -61 after ~0.3M env steps and reaches about -47 at 3M.
"""

from jaxmarl_llm.train.config import mlp_ppo_defaults


def get_config():
    c = mlp_ppo_defaults()
    c.env_name = "mpe/simple_spread"
    c.env_kwargs.num_agents = 3
    c.num_envs = 64
    c.num_steps = 64
    c.num_minibatches = 2
    c.lr = 1e-3
    c.total_timesteps = 3_000_000
    c.run.out_dir = "runs/spread_mlp"
    c.run.updates_per_chunk = 20
    return c
