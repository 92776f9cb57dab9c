"""A mixture of games (envs/text/mixture.py) evaluated game by game: each game played alone, with its own measures.

    evaluate = versus_each_game(env, policy, num_turns, opponents, episodes, seed)   # env.games: the sub-envs
    metrics = evaluate(base, seat_loras)    # {"tic_tac_toe/minimax_draw", "kuhn_poker/exploitability", ...}

Each game plays `play.versus_builtins`'s greedy matches against the opponents among `opponents` that it offers
(`builtin_players`), and a game with a tree of information sets (poker) adds `exploitability.lm_exploitability`'s
numbers. A one-seat task (calculator, guess the number, a host task) plays `episodes` greedy episodes alone:
`<game>/solved` (where it reports it), `<game>/mean_return`, `<game>/format_error`. The games run as the
sub-envs themselves (their own observation widths and reply widths), with the same model and adapters acting
among the game's own replies (`game_policy`): restricted to a game's valid replies, the mixture's union of
candidates gives the same distribution, so these are the moves the mixture's policy makes in that game.
Jittable: train/lm_rl.py's in-graph evaluation runs it inside the update.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from jaxmarl_llm.evaluation import exploitability, play
from jaxmarl_llm.policies import candidates as cand_lib
from jaxmarl_llm.policies.lm_policy import LMPolicy


def game_policy(policy: LMPolicy, env) -> LMPolicy:
    """`policy` (its model, adapters, sampling) acting in one game `env` of a mixture: at most the game's reply width,
    among the game's own candidates (constrained / scored). Constrained decoding restricted to the game's valid
    replies draws as the mixture's policy does; scored candidates too, unless a reply of one game is a proper prefix
    of another game's (the union then ends it with eos, whose log-prob joins its score)."""
    sampling = dataclasses.replace(policy.sampling, max_new_tokens=env.max_action_tokens)
    cands = None
    if policy.actions != "free":
        cands = cand_lib.build(env.action_candidates, env.tokenizer.eos_id, env.max_action_tokens)
    return dataclasses.replace(policy, sampling=sampling, candidates=cands)


def alone(env, policy: LMPolicy, num_turns: int, episodes: int, seed: int = 0, chunk: int = 64):
    """fn(base, seat_loras) -> {"solved" (when the task reports it), "mean_return", "format_error": []}: greedy
    episodes of a one-seat task (what `experiments/eval.py` reports for it). A task with held-out starts
    (`env.heldout_start(i)`: guess the number's held-out secrets) plays those, else its own resets. Jittable."""
    match = play.make_match(env, play.with_temperature(policy, 0.0), ("lm",), num_turns, chunk=chunk,
                            start=getattr(env, "heldout_start", None))
    key = jax.random.PRNGKey(seed)

    def evaluate(base, seat_loras: tuple) -> dict[str, jax.Array]:
        _, outcomes = match(key, base, (seat_loras[0],), episodes)
        rates = play.outcome_rates(outcomes, 0)
        return {k: rates[k] for k in ("solved", "mean_return", "format_error") if k in rates}

    return evaluate


def evaluator(env, policy: LMPolicy, num_turns: int, opponents: tuple[str, ...], episodes: int, seed: int = 0):
    """The in-graph evaluation of `env`, fn(base, seat_loras) -> metrics: a mixture game by game
    (`versus_each_game`), a one-seat task alone (`alone`), a game against its built-in players."""
    if hasattr(env, "games"):
        return versus_each_game(env, policy, num_turns, opponents, episodes, seed)
    if env.num_agents == 1:
        return alone(env, policy, num_turns, episodes, seed)
    return play.versus_builtins(env, policy, num_turns, opponents, episodes, seed)


def versus_each_game(env, policy: LMPolicy, num_turns: int, opponents: tuple[str, ...], episodes: int, seed: int = 0,
                     chunk: int = 64):
    """fn(base, seat_loras) -> {"<game>/<key>": []} for every game of the mixture `env`: `play.versus_builtins`'
    keys against the opponents among `opponents` the game has, and on games with a tree of information sets
    `exploitability.lm_exploitability`'s (exploitability, nash_conv, per seat). Jittable."""
    games = []
    for name, game in zip(env.game_names, env.games):
        own = game_policy(policy, game)
        offered = tuple(o for o in opponents if o in getattr(game, "builtin_players", ()))
        if game.num_agents == 1:
            versus = alone(game, own, num_turns, episodes, seed, chunk)
        else:
            versus = play.versus_builtins(game, own, num_turns, offered, episodes, seed, chunk) if offered else None
        games.append((name, game, own, versus))

    def evaluate(base, seat_loras: tuple[Any, ...]) -> dict:
        out = {}
        for name, game, own, versus in games:
            metrics = versus(base, seat_loras) if versus is not None else {}
            if exploitability.has_infosets(game):
                metrics.update(exploitability.lm_exploitability(game, own, base, seat_loras))
            out.update({f"{name}/{k}": v for k, v in metrics.items()})
        return out

    return evaluate
