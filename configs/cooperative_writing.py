"""Two LM agents write together: agent 0 a short setup, agent 1 an expansion 2-3x as long.

Tiny random model with the built-in character tokenizer by default (2 CPU
cores); `--config.model.checkpoint=/path/to/hf_folder --config.tokenizer=/path/to/hf_folder`
starts from a real checkpoint with rank-16 adapters instead. GRPO over groups
of 8 episodes that share a theme, one adapter per agent.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name = "text/cooperative_writing"
    c.env_kwargs = {"capacity": 192, "max_action_tokens": 24}
    c.algo = "grpo"
    c.share_policy = False
    c.num_turns = 2
    c.num_envs = 32
    c.group_size = 8
    c.lr = 1e-2
    c.total_episodes = 32 * 100
    c.run.out_dir = "runs/cooperative_writing"
    c.run.updates_per_chunk = 10
    return c
