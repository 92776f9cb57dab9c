"""The main job, LM version: IPPO-style PPO with a language-model policy on tokenized MPE simple_spread (N=3).

The same world as configs/spread_mlp.py (3 agents cover 3 landmarks, 25 steps, local_ratio 0.5), seen as
text through `text/tokenized_mpe`: each step every agent reads its 18 observation numbers quantized to 16
levels and replies with one of the five moves.

Actions are constrained (`policy.actions="constrained"`, policies/candidates.py): the env lists its five
move words and decoding can only spell one of them, so every reply is a move (format errors 0%) and the
log-prob is under the distribution renormalised over the moves. `--config.policy.actions=free` is the
old setting: a random tiny model then never writes a move word (100% format errors, a flat line).

Sized for a from-scratch tiny model on 2 CPU cores: the word tokenizer with no separator and
`field_names` writes each number as one token that names its field and level ("a8b8c11..."), `show_step`
adds the step count ("t7": the value of a state depends on the steps left, which MPE observations do not
say), and the prompt is only that plus "\nAction:": 22 tokens a turn, each move one token, so acting
needs no decode loop (docs/benchmarks.md has the cost per update before and after).

Seats: all three agents learn, one shared adapter (like the MLP baseline's shared parameters). PPO, not
GRPO: the reward is dense and an episode is 25 decisions, so GAE over turns gives each turn its own credit.
The critic is centralized (MAPPO's centralized training): an MLP over the env's world state (positions,
velocities, the share of the episode played), the input the MLP job's `--config.algo=mappo` critic reads;
the LM acts on its own text only. With the per-seat value head on the adapter trunk
(`configs/spread.py:ippo`) the critic is far worse (value loss 20-35 vs 3-6 over 100 updates) and the
team return hardly moves (docs/benchmarks.md).
Optimizer: one epoch of 5 minibatches per update (a second epoch doubled the cost and learned no more per
update), lr 1e-3 falling linearly to 0 (`anneal_lr`), and the critic on its own Adam at lr 1e-2
(`critic.lr`): at one shared lr the critic needed ~100 updates to fit returns of -20..-30 from 0, and until
then the advantages were noise and the policy hardly moved (docs/benchmarks.md, "what limits it").
An entropy bonus `ent_coef=0.01` (the MLP job's): without it some seeds collapse to a near-greedy policy
(entropy 0.05 nats by update 300) and stall at -72; with it no seed collapsed. 1200 updates (480k env steps):
with the bonus, more updates keep paying, as for the MLP at these settings (docs/benchmarks.md, session 16).
Measured (seed 0, 2 idle cores, AMD EPYC): 6 min 46 s wall, team return -84 (updates 1-10) -> -59.7 (mean of
the last 20 updates); the 20-update mean passes -61 at update ~720.
Metrics: `team_return` is the sum of the three agents' returns (the MLP job's `team_return`; JaxMARL's
10M-step IPPO reaches -61, the random policy about -80), `return_agent<i>` each agent's, `env_steps`
the env steps played. `--config.policy.actions=scored` scores each move as a whole (GLAM; with one-token
moves it is the same distribution as constrained). `configs/spread.py:mappo` reads all three agents'
prompt summaries (the frozen base's last hidden state) instead of the world state.
Also measured (docs/benchmarks.md, session 15): `--config.critic.value_norm=True` (MAPPO's ValueNorm),
`--config.lora.lr_ratio=4.0` (LoRA+) and `--config.train_base=True` (every weight trains) each gain ~3 at 240
updates on one seed, within the seed-to-seed spread; a second epoch gains nothing per unit of compute.
`--config.model.checkpoint=/path/to/hf_folder --config.tokenizer=/path/to/hf_folder` starts from a real
checkpoint (then prefer the readable default prompt: `--config.env_kwargs.prompt=...`).
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
        "bins": 16, "low": -2.0, "high": 2.0, "max_action_tokens": 8, "format_penalty": -0.1,
        "prompt": "", "outro": "\nAction:", "separator": "", "field_names": True, "show_step": True,
    }
    c.tokenizer = "word"
    c.policy.actions = "constrained"
    c.algo = "ppo"
    c.share_policy = True
    c.num_turns = 25  # max_cycles: one turn per env step
    c.num_envs = 16
    c.group_size = 1
    c.update_epochs = 1  # a second epoch doubles the update's cost and did not learn more per update
    c.num_minibatches = 5  # 5 turns of every episode per minibatch
    c.lr = 1e-3
    c.anneal_lr = True  # PPO's linear decay to 0, as the MLP job
    c.critic.lr = 1e-2  # the critic's own Adam: it must reach returns of -20..-30 from 0 before advantages mean much
    c.gamma = 0.99
    c.gae_lambda = 0.95
    c.vf_coef = 0.5
    c.ent_coef = 0.01  # keeps every seed from collapsing to a near-greedy policy (docstring)
    c.total_episodes = 16 * 1200  # 1200 updates, 480k env steps (docs/benchmarks.md: the wall time)
    c.run.out_dir = "runs/spread"
    c.run.updates_per_chunk = 5
    return c
