"""Config schemas and start-up validation, one module per trainer.

`configs/*.py` start from a trainer's defaults (`mlp_ppo_defaults()`, `lm_rl_defaults()`, `sft_defaults()`,
`dpo_defaults()`) and change what they need. Every check runs before anything compiles, and every message
names the key and says what to do, so a typo on the command line costs seconds, not a run.

common.py   ConfigError and the checks the trainers share (keys, counts, mesh, checkpoint folder, run and stop groups)
mlp_ppo.py  lm_rl.py  sft.py  dpo.py: each trainer's defaults + validator
free_text.py  the two stages of a free-text recipe from a format-only warm start (configs/free_*.py)
"""

from jaxmarl_llm.train.config.common import (ConfigError, check_env_name, check_eval_episodes, check_keys,
                                             check_mesh, check_model_checkpoint, check_non_negative, check_one_update,
                                             check_positive, check_positive_ints, check_run, check_stop,
                                             parse_resume, stop_defaults)
from jaxmarl_llm.train.config.dpo import dpo_defaults, parse_players, validate_dpo
from jaxmarl_llm.train.config.lm_rl import lm_rl_defaults, validate_lm_rl
from jaxmarl_llm.train.config.mlp_ppo import mlp_ppo_defaults, validate_mlp_ppo
from jaxmarl_llm.train.config.sft import sft_defaults, validate_sft

__all__ = [
    "ConfigError", "check_keys", "check_env_name", "check_positive_ints", "check_positive", "check_non_negative",
    "check_eval_episodes", "check_one_update", "check_mesh", "check_model_checkpoint", "check_run", "parse_resume",
    "stop_defaults", "check_stop",
    "mlp_ppo_defaults", "validate_mlp_ppo", "lm_rl_defaults", "validate_lm_rl",
    "sft_defaults", "validate_sft", "dpo_defaults", "validate_dpo", "parse_players",
]
