"""Play N episodes of a token game and write each seat's transcript, with its return, as JSONL that SFT reads:

    python experiments/collect.py --config=configs/tic_tac_toe.py:scratch --checkpoint=runs/tic_tac_toe_scratch \
        --episodes=1000 --min_return=1 --out=wins.jsonl
    python experiments/collect.py --config=configs/tic_tac_toe.py --player=minimax --episodes=200 --out=mm.jsonl

--player: lm (the checkpoint's adapter --slot, or the bare base model without --checkpoint, sampling at
--temperature), one of the game's built-in players (random, minimax, ...), or the game's scripted teacher
(expert). Every seat is that player. One line per seat that moved: {"turns": [context, move, context, move, ...],
"return", "seat", "episode"}, the transcript as the seat read it split at its own moves (a game that rewrites its
observation each turn gives one line per move: {"prompt", "completion", ...}); `--config.data_path=FILE` with
the SFT trainer (configs/sft_*.py) trains on it. --min_return keeps the lines whose seat's return is at least
that (MRLM's `collect`: the episodes worth imitating).
"""

from __future__ import annotations

import json
import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from ml_collections import config_flags

from jaxmarl_llm.data.collect import collect, policy_script
from jaxmarl_llm.data.teachers import make_script, stateless
from jaxmarl_llm.envs.text.base import BUILTIN_PLAYERS
from jaxmarl_llm.evaluation import play
from jaxmarl_llm.run.cli import check_overrides, command_config, fail, main_guard, run_program
from jaxmarl_llm.run.run_dirs import check_run_dir, restore_adapter
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import validate_lm_rl

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file (an lm_rl config).", lock_config=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", "", "Run directory whose latest checkpoint plays ('' = base model).")
_SLOT = flags.DEFINE_integer("slot", 0, "Adapter slot of the checkpoint that plays.")
_PLAYER = flags.DEFINE_string("player", "lm", "lm | expert | a built-in player of the game (random, minimax, ...).")
_EPISODES = flags.DEFINE_integer("episodes", 100, "Episodes to play.")
_OUT = flags.DEFINE_string("out", "", "The JSONL file to write.")
_MIN_RETURN = flags.DEFINE_float("min_return", -math.inf, "Keep only the lines whose seat's return is at least this.")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "The LM's sampling temperature (0 = greedy).")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of resets and sampling.")


def check_flags() -> None:
    """Every flag's mistake in one line (status 2), before the model is built."""
    if _EPISODES.value < 1:
        fail(f"--episodes={_EPISODES.value}: collect at least 1 episode")
    if not _OUT.value:
        fail("--out=FILE.jsonl is required")
    folder = os.path.dirname(os.path.abspath(_OUT.value))
    if not os.path.isdir(folder):
        fail(f"--out={_OUT.value}: no folder {folder}")
    if _TEMPERATURE.value < 0:
        fail(f"--temperature={_TEMPERATURE.value}: 0 (greedy) or more")
    if _CHECKPOINT.value:
        if _PLAYER.value != "lm":
            fail(f"--checkpoint with --player={_PLAYER.value}: a checkpoint plays as --player=lm")
        check_run_dir("checkpoint", _CHECKPOINT.value)


def player_script(config, trainer):
    """The Script every seat plays (data/teachers.py), or a refusal naming the choices."""
    env, kind = trainer.env, _PLAYER.value
    if kind == "lm":
        lora, trained_base = restore_adapter(trainer, _CHECKPOINT.value, _SLOT.value) if _CHECKPOINT.value \
            else (None, None)
        policy = play.with_temperature(trainer.policy, _TEMPERATURE.value)
        return policy_script(env, policy, trainer.base if trained_base is None else trained_base,
                             None if lora is None else {"lora": lora})
    offered = tuple(getattr(env, "builtin_players", ())) if hasattr(env, "opponent_action") else ()
    if kind in offered:
        return stateless(lambda key, memory, state: (env.opponent_action(key, state, kind),
                                                     jnp.ones((env.num_agents,), bool), memory))
    if kind == "expert":
        try:
            return make_script(config.env_name, env, teacher="expert", **dict(config.get("teacher_kwargs", {})))
        except ValueError as err:
            fail(f"--player=expert: {err}")
    fail(f"--player={kind!r}: expected lm, expert or one of {config.env_name}'s built-in players "
         f"({', '.join(offered) or 'none'}; {', '.join(BUILTIN_PLAYERS)} exist in some games)")


def rows_of(rows, num_agents: int, num_episodes: int, decode, pad_id: int) -> list[dict]:
    """JSONL objects from `collect`'s rows, [N*A, ...] (one per env and seat) or [T*N*A, ...] (one per turn, env
    and seat, for games that rewrite their observation): each transcript split at its own moves."""
    tokens, turn_mask, returns = (np.asarray(x) for x in (rows.tokens, rows.turn_mask, rows.returns))
    out = []
    for b in range(tokens.shape[0]):
        spans = [np.flatnonzero(m) for m in turn_mask[b] if m.any()]  # each move's positions and its eos after
        if not spans:
            continue  # a seat that never moved
        row = tokens[b]
        end = len(row) - int(np.argmax(row[::-1] != pad_id)) if (row != pad_id).any() else 0
        pieces, pos = [], 0
        for span in sorted(spans, key=lambda s: s[0]):
            start, stop = int(span[0]), int(span[-1])  # the move is [start, stop): stop is its eos target
            pieces += [decode(row[pos:start]), decode(row[start:stop])]
            pos = stop
        tail = decode(row[pos:end]) if pos < end else ""
        item = {"turns": pieces + ([tail] if tail else [])} if len(pieces) > 2 or tail else \
            {"prompt": pieces[0], "completion": pieces[1]}
        out.append({**item, "return": float(returns[b]), "seat": b % num_agents,
                    "episode": b // num_agents % num_episodes})
    return out


@main_guard
def main(argv):
    config = command_config(argv, _CONFIG.value)
    check_flags()
    with config.unlocked():  # episodes are played on one device: the run's mesh does not apply
        config.mesh.num_devices, config.mesh.fsdp = 1, 1
    validate_lm_rl(config)
    trainer = lm_rl.make_train(config)
    env = trainer.env
    script = player_script(config, trainer)
    rows = jax.jit(lambda key: collect(key, env, script, config.num_turns, jnp.arange(_EPISODES.value),
                                       env.codec.eos_id))(jax.random.PRNGKey(_SEED.value))
    decode = lambda ids: env.codec.decode([int(i) for i in ids])  # noqa: E731
    items = rows_of(rows, env.num_agents, _EPISODES.value, decode, env.codec.pad_id)
    kept = [item for item in items if item["return"] >= _MIN_RETURN.value]
    with open(_OUT.value, "w") as f:
        for item in kept:
            f.write(json.dumps(item) + "\n")
    returns = [item["return"] for item in items]
    print(f"{_EPISODES.value} episodes of {config.env_name} by {_PLAYER.value}"
          + (f" ({_CHECKPOINT.value})" if _CHECKPOINT.value else "")
          + f": {len(items)} lines, mean return {np.mean(returns) if returns else float('nan'):+.3f}; kept "
          f"{len(kept)} with return >= {_MIN_RETURN.value:g} in {_OUT.value}")


def run() -> None:
    """The command (`jaxmarl-collect`, experiments/collect.py)."""
    check_overrides(sys.argv)
    run_program(main)
