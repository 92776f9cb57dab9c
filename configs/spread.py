"""LM agents on MPE simple_spread (N=3): PPO from a random tiny model, with a centralized world-state critic.

The world of configs/spread_mlp.py (3 agents cover 3 landmarks, 25 steps, local_ratio 0.5) seen as text through
`text/tokenized_mpe`: each step every agent reads its 18 observation numbers quantized to 16 levels, one
field-named word token each, plus the step count ("a8b8c11...t7\nAction:", 22 tokens), and replies with one of
the five moves. Decoding can only spell a move (`policy.actions="constrained"`, policies/candidates.py).
Seats: all three agents learn, one shared adapter. The critic (`critic.kind="world_state"`,
policies/central_critic.py) is an MLP over the env's world state; the LM acts on its own text only.

    .venv/bin/python experiments/train.py --config=configs/spread.py         # world-state critic
    .venv/bin/python experiments/train.py --config=configs/spread.py:ippo    # per-seat value heads on the adapter
    .venv/bin/python experiments/train.py --config=configs/spread.py:mappo   # a critic over all seats' prompt summaries

PPO: 16 envs x 25 turns an update, one epoch of 5 minibatches, lr 1e-3 annealed to 0, the critic on its own Adam
at lr 1e-2, entropy bonus 0.01, 1200 updates (480k env steps).
Measured (seed 0, AMD EPYC, 2 cores, idle): team return -84 (updates 1-10) -> -59.3 (mean of the last 20 updates)
in 5 min 39 s; the 20-update mean passes -61 at update ~714 (JaxMARL's 10M-step IPPO: -61; random policy: about
-80). With `:ippo` the critic fits far worse and the team return hardly moves (docs/results.md).
Metrics: `team_return` (the sum of the three agents' returns), `return_agent<i>`, `env_steps`.
Options: `--config.policy.actions=scored` (each move scored whole, GLAM) or `=free` (unconstrained text: a random
model then writes no move); `--config.critic.value_norm=True`, `--config.lora.lr_ratio=4.0` (LoRA+),
`--config.train_base=True` (each within the seed-to-seed spread, docs/results.md); `--config.ent_coef`,
`--config.total_episodes`; `--config.model.checkpoint=/path/to/hf_folder --config.tokenizer=/path/to/hf_folder`
starts from a real checkpoint (then give it a readable prompt: `--config.env_kwargs.prompt=...`).
"""

from jaxmarl_llm.train.config import lm_rl_defaults


CRITICS = {"": "world_state", "ippo": "ippo", "mappo": "mappo"}


def get_config(variant: str = ""):
    if variant not in CRITICS:
        raise ValueError(f"configs/spread.py:{variant}: the variant is 'ippo' or 'mappo' (default: the world-state critic)")
    c = lm_rl_defaults()
    c.critic.kind = CRITICS[variant]  # policies/central_critic.py
    c.env_name = "text/tokenized_mpe"
    c.env_kwargs = {
        "env": "mpe/simple_spread", "num_agents": 3, "local_ratio": 0.5, "max_cycles": 25, "continuous_actions": False,
        "bins": 16, "low": -2.0, "high": 2.0, "max_action_tokens": 0, "format_penalty": -0.1,
        "prompt": "", "outro": "\nAction:", "separator": "", "field_names": True, "show_step": True,
    }
    c.tokenizer = "word"
    c.policy.actions = "constrained"
    c.algo = "ppo"
    c.share_policy = True
    c.num_turns = 25  # max_cycles: one turn per env step
    c.num_envs = 16
    c.group_size = 1
    c.update_epochs = 1  # a second epoch doubles the update's cost and learns no more per update
    c.num_minibatches = 5  # 5 turns of every episode per minibatch
    c.lr = 1e-3
    c.anneal_lr = True  # PPO's linear decay to 0, as the MLP job
    c.critic.lr = 1e-2  # the critic's own Adam: it must reach returns of -20..-30 from 0 before advantages mean much
    c.gamma = 0.99
    c.gae_lambda = 0.95
    c.vf_coef = 0.5
    c.ent_coef = 0.01  # keeps every seed from collapsing to a near-greedy policy (which stalls near -72)
    c.total_episodes = 16 * 1200  # 1200 updates, 480k env steps (docs/results.md: the wall time)
    c.run.out_dir = "runs/spread"
    # the plot's reference lines: uniform random moves, JaxMARL's MLP IPPO after 10M steps (docs/results.md)
    c.run.references = {"uniform random moves": -80.0, "JaxMARL MLP IPPO, 10M steps": -61.0}
    c.run.updates_per_chunk = 5
    return c
