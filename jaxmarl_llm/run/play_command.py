"""Play against your agent in the terminal, in any token game with a seat or a part for you:

    python experiments/play.py --config=configs/tic_tac_toe.py:scratch --checkpoint=runs/tic_tac_toe_scratch
    python experiments/play.py --config=configs/tic_tac_toe.py:scratch --seat=0     # you move first
    python experiments/play.py --config=configs/twenty_questions.py:lm --seat=1     # you answer its questions
    python experiments/play.py --config=configs/debate.py:lm --seat=2               # you judge two agents' debate
    python experiments/play.py --config=configs/guess_number.py:scratch             # you keep the secret

Every seat but yours is the agent (the checkpoint's adapter --slot). In guess the number, a one-seat game, you
keep the secret: answer each guess too high (h), too low (l) or correct (c); the game's own feedback then says
what you said (evaluation/keepers.py), and an answer that contradicts your earlier ones is asked again.

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
from jaxmarl_llm.evaluation.keepers import KEEPERS, Keeper
from jaxmarl_llm.run.cli import check_overrides, command_config, fail, main_guard, run_program
from jaxmarl_llm.run.run_dirs import check_run_dir, restore_adapter
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import validate_lm_rl

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file (an lm_rl config).", lock_config=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", "", "Run directory whose latest checkpoint plays ('' = base model).")
_SLOT = flags.DEFINE_integer("slot", 0, "Adapter slot of the checkpoint that plays.")
_SEAT = flags.DEFINE_integer("seat", 1, "Your seat (tic-tac-toe: 0 = X, moves first; 1 = O; debate :lm: 2 = the judge). "
                             "One-seat games (guess the number): you keep the secret.")
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


def replies(env, rows: dict[int, list[int]]) -> TextAction:
    """A TextAction with each seat's tokens of `rows` (cut to max_action_tokens), the other rows empty."""
    m = env.max_action_tokens
    ids = np.full((env.num_agents, m), env.codec.pad_id, np.int32)
    length = np.zeros((env.num_agents,), np.int32)
    for seat, tokens in rows.items():
        ids[seat, : min(len(tokens), m)] = tokens[:m]
        length[seat] = min(len(tokens), m)
    return TextAction(jnp.asarray(ids), jnp.asarray(length))


def keep(keeper: Keeper, state, reply: str):
    """The person answers the agent's move as the env's keeper would: the state with the env's secret set to
    that answer (asked again while it contradicts the earlier ones); None at end of input. A reply the env
    refuses is not asked about (the env says why)."""
    move = keeper.move(reply)
    if move is None:
        return state
    while True:
        try:
            typed = input(keeper.question.format(move=move)).strip().lower()
        except EOFError:
            return None
        if typed not in keeper.answers:
            print(f"answer one of: {', '.join(keeper.answers)}", flush=True)
            continue
        try:
            return state.replace(secret=jnp.int32(keeper.secret(state, move, keeper.answers[typed])))
        except ValueError as err:
            print(err, flush=True)


@main_guard
def main(argv):
    config = command_config(argv, _CONFIG.value)
    if _TEMPERATURE.value < 0:
        fail(f"--temperature={_TEMPERATURE.value}: 0 (greedy) or more")
    if _CHECKPOINT.value:
        check_run_dir("checkpoint", _CHECKPOINT.value)
    config.mesh.num_devices = 1  # one game on one device: the training batch's split over devices does not apply
    validate_lm_rl(config)
    trainer = lm_rl.make_train(config)
    env = trainer.env
    keeper = KEEPERS.get(type(env).__name__) if env.num_agents == 1 else None
    if env.num_agents == 1 and keeper is None:
        fail(f"{config.env_name} has one seat and no part for you to play (play.py plays games of two or more "
             f"seats, and {', '.join(KEEPERS)} as its keeper)")
    you = None if keeper is not None else _SEAT.value
    if you is not None and not 0 <= you < env.num_agents:
        fail(f"--seat={you}: one of {', '.join(f'{i} ({name})' for i, name in enumerate(env.agents))}")
    lora, trained_base = restore_adapter(trainer, _CHECKPOINT.value, _SLOT.value) if _CHECKPOINT.value else (None, None)
    base = trainer.base if trained_base is None else trained_base
    policy = play.with_temperature(trainer.policy, _TEMPERATURE.value)
    trainable = None if lora is None else {"lora": lora}
    sample = jax.jit(lambda k, t, n, v: policy.sample(k, base, trainable, t[None], n[None], valid=v))
    step = jax.jit(env.step)
    key = jax.random.PRNGKey(_SEED.value)
    obs, state = env.reset(jax.random.fold_in(key, 0))
    shown = 0 if you is None else you  # whose transcript the person reads
    agents = [a for a in range(env.num_agents) if a != you]
    mine = f"you are {keeper.role}" if keeper is not None else f"you are seat {you} ({env.agents[you]})"
    print(f"{mine}; the agent plays {', '.join(env.agents[a] for a in agents)} ({_CHECKPOINT.value or 'the base model'})",
          flush=True)
    total = np.zeros((env.num_agents,))
    for turn in range(config.num_turns):
        rows = {}
        for seat in np.flatnonzero(np.asarray(state.active)):
            seat = int(seat)
            if seat == you:
                print(f"\n----- your transcript -----\n{env.render(state)[you]}", flush=True)
                text = read_reply(f"your reply ({env.agents[you]})> ", legal_replies(env, state, you))
                if text is None:
                    print("\nend of input: game left unfinished")
                    return
                rows[seat] = env.tokenizer.encode(text)
                continue
            valid = (np.asarray(env.candidate_mask(state))[seat][None]
                     if policy.actions != "free" and hasattr(env, "candidate_mask") else None)
            out = sample(jax.random.fold_in(jax.random.fold_in(key, turn + 1), seat), obs.tokens[seat],
                         obs.length[seat], valid)
            n = int(np.asarray(out.mask[0]).sum())
            rows[seat] = [int(t) for t in np.asarray(out.tokens[0])[:n]]
            p = float(np.exp(np.asarray(out.logprobs[0])[:n].sum()))
            print(f"agent ({env.agents[seat]}): {env.tokenizer.decode(rows[seat])!r}  (p = {p:.3f})", flush=True)
            if keeper is not None:
                state = keep(keeper, state, env.tokenizer.decode(rows[seat]))
                if state is None:
                    print("\nend of input: game left unfinished")
                    return
        result = step(jax.random.fold_in(key, 10_000 + turn), state, replies(env, rows))
        obs, state = result.obs, result.state
        total += np.asarray(result.reward)
        if keeper is not None:  # what the env answered, from the transcript's end
            print(env.render(state)[shown].rstrip().splitlines()[-1], flush=True)
        if bool(state.done):
            break
    print(f"\n----- the end -----\n{env.render(state)[shown]}")
    if you is not None and env.num_agents == 2:
        print(f"your return {total[you]:+g}, the agent's {total[agents[0]]:+g}", flush=True)
    else:
        print("returns: " + ", ".join(f"{name} {total[a]:+g}{' (you)' if a == you else ''}"
                                      for a, name in enumerate(env.agents)), flush=True)


def run() -> None:
    """The command (`jaxmarl-play`, experiments/play.py)."""
    check_overrides(sys.argv)
    run_program(main)
