"""IPPO with MLP policies on MPE simple_spread (N=3), sized for 2 CPU cores.

Seats: the 3 agents learn, one shared network; each agent's critic reads its own observation (IPPO).
JaxMARL's IPPO-FF hyper-parameters (`mlp_ppo_defaults`) with three changes: 64 envs x 64 steps (4096 steps an
update), 2 minibatches of 2048 steps, lr 1e-3. Higher learning rates are unstable: from 1.5e-3 on some seeds
collapse below the random policy's -80 (docs/results.md has the sweep).

    .venv/bin/python experiments/train.py --config=configs/spread_mlp.py

Measured (seed 0, the project's 2-core CPU box): the team return (the sum of the agents' returns) passes -61
after ~0.3M env steps and reaches about -47 at 3M (JaxMARL's own IPPO: about -61 after 10M).
Options: `--config.critic.kind=mappo` (one critic on the world state), `--config.lr`, `--config.num_envs`,
`--config.total_timesteps`, `--config.seed`.
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
    # the plot's reference lines: uniform random moves, JaxMARL's MLP IPPO after 10M steps (docs/results.md)
    c.run.references = {"uniform random moves": -80.0, "JaxMARL MLP IPPO, 10M steps": -61.0}
    c.run.updates_per_chunk = 20
    return c
