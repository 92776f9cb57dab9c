"""The main job, LM version: IPPO-style PPO with a language-model policy on tokenized MPE simple_spread (N=3).

The same world as configs/spread_mlp.py (3 agents cover 3 landmarks, 25 steps,
local_ratio 0.5), seen as text through `text/tokenized_mpe`: each step every
agent reads its 18 observation numbers quantized to 16 levels
("Observation (18 numbers, 0 to 15): 8 8 11 ... Action (stay, left, right,
down, up): ") and writes one of the five words. An unreadable reply plays
`stay` and costs `format_penalty` (-0.1). No history: every prompt is the
current step only, so each turn is a fixed 128-token prompt.

Seats: all three agents learn, one shared adapter (like the MLP baseline's
shared parameters), each acting on its own observation. PPO, not GRPO: the
reward is dense (every step) and an episode is 25 decisions, so GAE over turns
with the value head on the prompt's last hidden state gives each turn its own
credit, where GRPO would give all 25 turns one episode-level advantage;
gamma 0.99, lambda 0.95 as in the MLP job. Tiny random model with the
character tokenizer: sized for 2 CPU cores.
`--config.model.checkpoint=/path/to/hf_folder --config.tokenizer=/path/to/hf_folder`
starts from a real checkpoint with rank-16 adapters instead.

Metrics: `episode_return` is the mean over agents of each agent's episode
return, format penalties included (3x it is comparable to the MLP job's
`team_return`; -61 there is JaxMARL's 10M-step IPPO), `format_error_rate` the
share of turns whose reply was not an action word. A random tiny model: -27
per agent (2.5 of it penalties), format errors 100%.

From scratch a random tiny model almost never writes an exact action word, so
every agent stays put and pays the format penalty whatever it samples: reward
differences come from where the episode started, not from the reply, and PPO
gets almost no signal. Learning needs a warm start: a checkpoint that follows
the instruction in the prompt (above), or SFT of the tiny model on transcripts
of a trained policy (configs/spread_mlp.py's MLP, as a scripted teacher in
train/scripted.py: not written yet), then `--config.model.checkpoint=<sft out>/model`.
`configs/spread.py:mappo` swaps the per-agent value head for MAPPO's centralized critic: an MLP over
all three agents' prompt summaries (the frozen base's last hidden state), so each agent's value sees
where the others are, like the MLP job's `--config.algo=mappo` world-state critic.

The MLP baseline stays the headline: `python experiments/train.py --config=configs/spread_mlp.py`.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config(variant: str = ""):
    if variant not in ("", "ippo", "mappo"):
        raise ValueError(f"configs/spread.py:{variant}: the variant is 'ippo' (default) or 'mappo'")
    c = lm_rl_defaults()
    if variant == "mappo":
        c.critic.kind = "mappo"  # one critic over all three agents' prompts (policies/central_critic.py)
    c.env_name = "text/tokenized_mpe"
    c.env_kwargs = {
        "env": "mpe/simple_spread", "num_agents": 3, "local_ratio": 0.5, "max_cycles": 25, "continuous_actions": False,
        "bins": 16, "low": -2.0, "high": 2.0, "max_action_tokens": 8, "format_penalty": -0.1,
    }
    c.algo = "ppo"
    c.share_policy = True
    c.num_turns = 25  # max_cycles: one turn per env step
    c.num_envs = 16
    c.group_size = 1
    c.update_epochs = 2
    c.num_minibatches = 5  # 5 turns of every episode per minibatch
    c.lr = 1e-3
    c.gamma = 0.99
    c.gae_lambda = 0.95
    c.vf_coef = 0.5
    c.total_episodes = 16 * 100
    c.run.out_dir = "runs/spread"
    c.run.updates_per_chunk = 5
    return c
