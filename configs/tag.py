"""MPE simple_tag (3 adversaries chase 1 good agent, 2 obstacles): IPPO with MLP policies, or LM agents.

    .venv/bin/python experiments/train.py --config=configs/tag.py       # MLP agents
    .venv/bin/python experiments/train.py --config=configs/tag.py:lm    # LM agents

Default: IPPO with MLP policies, all four agents learning. Adversaries and the good agent have different
observation sizes: the env pads them and per-agent nets (share_params=False) learn each role.

`:lm`: LM agents on the same world seen as text (`text/tokenized_mpe`, as configs/spread.py), moves constrained
to the five move words, PPO with configs/spread.py's settings and its world-state critic (one value per seat).
All four learn; roles are adapters on one base (`adapter_of_agent=(0, 0, 0, 1)`): the three predators share
adapter 0, the prey has adapter 1. A predator's return is 10 x the collisions of the episode (every predator is
paid for every catch), so `return_agent0 / 10` is the catch count per episode; `return_agent3` is the prey's
(collisions cost it 10 each, leaving the arena costs more).
Measured (`:lm`, seed 0, 150 updates, 2 CPU cores shared with the test suite): catches per episode flat (0.43 ->
0.49, 30-update means) while the prey's return rises -17.8 -> -7.8. With the prey frozen (`--config.frozen_agents=
"(3,)" --config.adapter_of_agent="()" --config.share_policy=True --config.ent_coef=0.01`, 300 updates) the catch
rate rises 0.44 -> 0.57 (docs/results.md).
Options: `--config.total_timesteps` (MLP), `--config.total_episodes` (LM), `--config.seed`.
"""

from jaxmarl_llm.train.config import lm_rl_defaults, mlp_ppo_defaults

WORLD = {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2, "max_cycles": 25, "continuous_actions": False}


def get_config(variant: str = ""):
    if variant not in ("", "lm"):
        raise ValueError(f"configs/tag.py:{variant}: the variant is 'lm' (LM agents) or none (MLP agents)")
    return lm_config() if variant == "lm" else mlp_config()


def mlp_config():
    c = mlp_ppo_defaults()
    c.env_name = "mpe/simple_tag"
    c.env_kwargs = dict(WORLD)
    c.share_params = False
    c.num_envs = 64
    c.total_timesteps = 5_000_000
    c.run.out_dir = "runs/tag"
    return c


def lm_config():
    c = lm_rl_defaults()
    c.env_name = "text/tokenized_mpe"
    c.env_kwargs = {
        "env": "mpe/simple_tag", **WORLD,
        "bins": 16, "low": -2.0, "high": 2.0, "max_action_tokens": 0, "format_penalty": -0.1,
        "prompt": "", "outro": "\nAction:", "separator": "", "field_names": True, "show_step": True,
    }
    c.tokenizer = "word"
    c.policy.actions = "constrained"
    c.critic.kind = "world_state"
    c.algo = "ppo"
    c.share_policy = False
    c.adapter_of_agent = (0, 0, 0, 1)  # predators share adapter 0, the prey has adapter 1
    c.num_turns = 25
    c.num_envs = 16
    c.group_size = 1
    c.update_epochs = 1
    c.num_minibatches = 5
    c.lr = 1e-3
    c.anneal_lr = True
    c.critic.lr = 1e-2  # configs/spread.py's settings
    c.gamma = 0.99
    c.gae_lambda = 0.95
    c.total_episodes = 16 * 200
    c.run.out_dir = "runs/tag_lm"
    c.run.updates_per_chunk = 5
    return c
