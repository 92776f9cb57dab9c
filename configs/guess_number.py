"""One LM agent plays guess-the-number (0..1023, 10 turns) with GRPO over groups sharing a secret.

From a random tiny model this game needs a warm start (the agent must first
learn the `Guess: N` format); start from a checkpoint with
`--config.model.checkpoint=... --config.tokenizer=...`.
"""

from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name = "text/guess_number"
    c.env_kwargs = {"capacity": 768, "max_action_tokens": 12}
    c.algo = "grpo"
    c.num_turns = 10
    c.num_envs = 16
    c.group_size = 8
    c.total_episodes = 16 * 200
    c.run.out_dir = "runs/guess_number"
    return c
