"""Play against your agent in the terminal, in any two-seat token game (tic-tac-toe, twenty questions, debate):

    python experiments/play.py --config=configs/tic_tac_toe.py:scratch --checkpoint=runs/tic_tac_toe_scratch
    python experiments/play.py --config=configs/tic_tac_toe.py:scratch --seat=0     # you move first

Each turn shows your transcript (the board or the conversation so far); the agent's reply is printed with its
probability under the agent's policy (the product of its tokens' probabilities, sampled at --temperature; 0 =
greedy). You type a reply: where the game lists its legal replies (tic-tac-toe's empty cells, the listed
questions), one that is not legal now is asked again, with the legal ones named; a reply may be written whole
(`Move: 5`) or by its last word (`5`). Without --checkpoint the agent is the bare base model. Ctrl-D ends the game.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from ml_collections import config_flags

from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.evaluation import play
from jaxmarl_llm.run.cli import check_overrides, command_config, fail, main_guard, run_program
from jaxmarl_llm.run.run_dirs import check_run_dir, restore_adapter
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import validate_lm_rl

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file (an lm_rl config).", lock_config=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", "", "Run directory whose latest checkpoint plays ('' = base model).")
_SLOT = flags.DEFINE_integer("slot", 0, "Adapter slot of the checkpoint that plays.")
_SEAT = flags.DEFINE_integer("seat", 1, "Your seat (tic-tac-toe: 0 = X, moves first; 1 = O).")
_TEMPERATURE = flags.DEFINE_float("temperature", 0.0, "The agent's sampling temperature; 0 = greedy.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the game's reset and the agent's sampling.")


def legal_replies(env, state, seat: int) -> list[str] | None:
    """The replies the game accepts from `seat` now (None: any text; the game parses it)."""
    if not hasattr(env, "candidate_mask") or not hasattr(env, "action_candidates"):
        return None
    mask = np.asarray(env.candidate_mask(state))[seat]
    return [env.tokenizer.decode(list(row)) for row, ok in zip(env.action_candidates, mask) if ok]


def read_reply(prompt: str, legal: list[str] | None) -> str | None:
    """Ask until the reply is legal (or any non-empty text where the game has no list); None at end of input."""
    while True:
        try:
            text = input(prompt).strip()
        except EOFError:
            return None
        if legal is None and text:
            return text
        if legal is not None:
            match = [r for r in legal if r == text or r.split()[-1] == text]
            if len(match) == 1:
                return match[0]
        print(f"not a legal reply now; legal: {', '.join(legal) if legal else 'any text'}", flush=True)


def one_reply(env, seat: int, tokens: list[int]) -> TextAction:
    """A TextAction with `tokens` in `seat`'s row (cut to max_action_tokens), the other rows empty."""
    m = env.max_action_tokens
    ids = np.full((env.num_agents, m), env.codec.pad_id, np.int32)
    ids[seat, : min(len(tokens), m)] = tokens[:m]
    length = np.zeros((env.num_agents,), np.int32)
    length[seat] = min(len(tokens), m)
    return TextAction(jnp.asarray(ids), jnp.asarray(length))


@main_guard
def main(argv):
    config = command_config(argv, _CONFIG.value)
    if _TEMPERATURE.value < 0:
        fail(f"--temperature={_TEMPERATURE.value}: 0 (greedy) or more")
    if _CHECKPOINT.value:
        check_run_dir("checkpoint", _CHECKPOINT.value)
    validate_lm_rl(config)
    trainer = lm_rl.make_train(config)
    env = trainer.env
    if env.num_agents != 2:
        fail(f"{config.env_name} has {env.num_agents} seat(s); play.py plays two-seat games")
    if _SEAT.value not in (0, 1):
        fail(f"--seat={_SEAT.value}: 0 or 1 ({', '.join(env.agents)})")
    you, agent = _SEAT.value, 1 - _SEAT.value
    lora, trained_base = restore_adapter(trainer, _CHECKPOINT.value, _SLOT.value) if _CHECKPOINT.value else (None, None)
    base = trainer.base if trained_base is None else trained_base
    policy = play.with_temperature(trainer.policy, _TEMPERATURE.value)
    trainable = None if lora is None else {"lora": lora}
    sample = jax.jit(lambda k, t, n, v: policy.sample(k, base, trainable, t[None], n[None], valid=v))
    step = jax.jit(env.step)
    key = jax.random.PRNGKey(_SEED.value)
    obs, state = env.reset(jax.random.fold_in(key, 0))
    print(f"you are seat {you} ({env.agents[you]}); the agent plays {env.agents[agent]}"
          f" ({_CHECKPOINT.value or 'the base model'})", flush=True)
    total = np.zeros((env.num_agents,))
    for turn in range(config.num_turns):
        movers = np.asarray(state.active)
        if movers[you]:
            print(f"\n----- your transcript -----\n{env.render(state)[you]}", flush=True)
            legal = legal_replies(env, state, you)
            text = read_reply(f"your reply ({env.agents[you]})> ", legal)
            if text is None:
                print("\nend of input: game left unfinished")
                return
            action = one_reply(env, you, env.tokenizer.encode(text))
        else:
            valid = (np.asarray(env.candidate_mask(state))[agent][None]
                     if policy.actions != "free" and hasattr(env, "candidate_mask") else None)
            out = sample(jax.random.fold_in(key, turn + 1), obs.tokens[agent], obs.length[agent], valid)
            n = int(np.asarray(out.mask[0]).sum())
            tokens = [int(t) for t in np.asarray(out.tokens[0])[:n]]
            p = float(np.exp(np.asarray(out.logprobs[0])[:n].sum()))
            print(f"agent ({env.agents[agent]}): {env.tokenizer.decode(tokens)!r}  (p = {p:.3f})", flush=True)
            action = one_reply(env, agent, tokens)
        result = step(jax.random.fold_in(key, 10_000 + turn), state, action)
        obs, state = result.obs, result.state
        total += np.asarray(result.reward)
        if bool(state.done):
            break
    print(f"\n----- the end -----\n{env.render(state)[you]}")
    print(f"your return {total[you]:+g}, the agent's {total[agent]:+g}", flush=True)


def run() -> None:
    """The command (`jaxmarl-play`, experiments/play.py)."""
    check_overrides(sys.argv)
    run_program(main)
