"""Matches on a token game between chosen players, compiled: evaluation, transcripts, benchmarks.

    players = (Player("lm"), Player("minimax"))                 # seat 0 (X) and seat 1 (O)
    match = make_match(env, policy, kinds(players), num_turns)
    final_state, returns, outcomes = match(key, base, loras(players), num_episodes)

A player is an LM (`lora` = one adapter tree without a slot axis, or None for
the bare base model) or one of the game's built-in players ("random",
"minimax": `env.opponent_action`). Every episode gets its own reset key
(`fold_in(key, i)`), so results do not depend on how many episodes run at once.
Greedy or sampled decoding is the policy's `SamplingConfig` (`with_temperature`).
On games whose transcripts only grow (`env.appends_actions`) each LM seat keeps its
KV cache across turns and reads only the new tokens (`transcripts.act_rows`), as the
trainer does; `incremental=False` re-reads every transcript each turn (same moves).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxmarl_llm.envs.text.base import BUILTIN_PLAYERS, INFO_RATIOS
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.evaluation import evaluate
from jaxmarl_llm.policies import transcripts
from jaxmarl_llm.policies.lm_policy import LMPolicy


class Player(NamedTuple):
    kind: str  # "lm" or a scripted kind ("random" | "minimax")
    lora: Any = None  # "lm": one adapter tree (no slot axis); None = the bare base model


def kinds(players) -> tuple[str, ...]:
    return tuple(p.kind if p.kind in BUILTIN_PLAYERS else ("lm" if p.lora is not None else "base") for p in players)


def loras(players) -> tuple[Any, ...]:
    return tuple(p.lora if p.kind not in BUILTIN_PLAYERS else None for p in players)


def with_temperature(policy: LMPolicy, temperature: float) -> LMPolicy:
    """The same policy decoding at `temperature` (0 = greedy)."""
    return dataclasses.replace(policy, sampling=dataclasses.replace(policy.sampling, temperature=float(temperature)))


class Outcomes(NamedTuple):
    """Per episode and seat, [N, A]: the return and (when the game reports them) won / drew / moved illegally,
    and the game's `INFO_RATIOS` counts (e.g. answers, right answers) of the seat's own moves."""

    ret: jax.Array
    won: jax.Array
    draw: jax.Array
    illegal: jax.Array
    format_error: jax.Array
    counts: dict[str, jax.Array] | None = None  # {name: int [N, A]}; {} when the game reports none
    solved: jax.Array | None = None  # a task's `solved` (calculator, guess the number); None when it has none


def make_match(env, policy: LMPolicy, seat_kinds: tuple[str, ...], num_turns: int, incremental: bool | None = None,
               chunk: int = 64, compiler_options: dict[str, str] | None = None,
               start: Callable[[jax.Array], tuple[Any, Any]] | None = None):
    """jit fn(key, base, loras (one entry per seat), num_episodes) -> (final env state [N], Outcomes).

    start(i) -> (obs, state): episode i's start (default: `env.reset` with the match's key).

    incremental: keep each LM seat's KV cache across turns (default: when the env's transcripts only grow).
    compiler_options: for a top-level call, what the policy's attention backend needs
    (models/attention.compiler_options); JAX refuses them on a match nested in a bigger program."""
    if len(seat_kinds) != env.num_agents:
        raise ValueError(f"{len(seat_kinds)} players for a {env.num_agents}-seat game")
    for kind in seat_kinds:
        if kind in BUILTIN_PLAYERS and not hasattr(env, "opponent_action"):
            raise ValueError(f"{type(env).__name__} has no built-in player {kind!r}")
    pad, m = env.codec.pad_id, env.max_action_tokens
    cached = bool(getattr(env, "appends_actions", False)) if incremental is None else bool(incremental)

    def seat_action(seat: int, kind: str, key, base, lora, obs, state, cache):
        """tokens [N, M], mask [N, M] for one seat in every env, and the seat's cache (None if not kept)."""
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(obs.tokens.shape[0]))
        if kind in BUILTIN_PLAYERS:
            act = jax.vmap(lambda k, s: env.opponent_action(k, s, kind))(keys, state)
            return act.tokens[:, seat], jnp.arange(m)[None, :] < act.length[:, seat, None], cache
        trainable = None if lora is None else {"lora": lora}
        valid = jax.vmap(env.candidate_mask)(state)[:, seat]  # [N, K]: the replies legal now (restricted actions)
        if cache is None:
            sample = jax.vmap(lambda k, t, n, v: policy.sample(k, base, trainable, t[None], n[None], valid=v[None]))(
                keys, obs.tokens[:, seat], obs.length[:, seat], valid)
            return sample.tokens[:, 0], sample.mask[:, 0], None
        length = obs.length[:, seat]
        # per-row keys = the keys above: the same draws as the re-reading path
        sample, part = transcripts.act_rows(policy, keys, base, trainable, obs.tokens[:, seat], length, cache, chunk,
                                            per_row=False, valid=valid)
        moved = jax.vmap(env.active)(state)[:, seat]  # a seat that did not move has read up to its length only
        return sample.tokens, sample.mask, part._replace(seen=jnp.where(moved, part.seen, length))

    @functools.partial(jax.jit, static_argnames="num_episodes", compiler_options=compiler_options)
    def match(key, base, seat_loras, num_episodes: int):
        k_reset, k_play = jax.random.split(key)
        if start is None:
            obs, state = jax.vmap(env.reset)(jax.vmap(lambda i: jax.random.fold_in(k_reset, i))(jnp.arange(num_episodes)))
        else:
            obs, state = jax.vmap(start)(jnp.arange(num_episodes))
        a = env.num_agents
        zeros = jnp.zeros((num_episodes, a), bool)
        width = obs.tokens.shape[-1] + m
        caches0 = tuple(transcripts.init_rows(policy.cfg, num_episodes, width) if cached and kind not in BUILTIN_PLAYERS
                        else None for kind in seat_kinds)

        def turn(carry, t):
            obs, state, ret, seen, counts, caches = carry
            k_turn = jax.random.fold_in(k_play, t)
            rows = [seat_action(s, kind, jax.random.fold_in(k_turn, s), base, seat_loras[s], obs, state, caches[s])
                    for s, kind in enumerate(seat_kinds)]
            caches = tuple(r[2] for r in rows)
            tokens = jnp.stack([r[0] for r in rows], 1)  # [N, A, M]
            mask = jnp.stack([r[1] for r in rows], 1)
            action = TextAction(jnp.where(mask, tokens, pad), mask.sum(-1).astype(jnp.int32))
            keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.fold_in(k_turn, a), i))(jnp.arange(num_episodes))
            moving = jax.vmap(env.active)(state)  # [N, A]
            obs, state, reward, _, _, info = jax.vmap(env.step)(keys, state, action)
            seen = {k: seen[k] | jnp.broadcast_to(info.get(k, zeros), zeros.shape).astype(bool) for k in seen}
            counts = {k: c + jnp.broadcast_to(info[k], zeros.shape) * moving for k, c in counts.items()}
            return (obs, state, ret + reward, seen, counts, caches), None

        flags = ("won", "draw", "illegal", "format_error") + (("solved",) if "solved" in info_of(state) else ())
        seen0 = {k: zeros for k in flags}
        counts0 = {k: jnp.zeros((num_episodes, a), jnp.int32) for k in evaluate.ratio_counts(info_of(state))}
        (obs, state, ret, seen, counts, _), _ = jax.lax.scan(
            turn, (obs, state, jnp.zeros((num_episodes, a)), seen0, counts0, caches0), jnp.arange(num_turns))
        return state, Outcomes(ret, seen["won"], seen["draw"], seen["illegal"], seen["format_error"], counts,
                               seen.get("solved"))

    def info_of(state) -> dict:
        """The step info's shapes (nothing runs): which counts the game reports."""
        n = state.turn.shape[0]
        action = TextAction(jnp.zeros((n, env.num_agents, m), jnp.int32), jnp.zeros((n, env.num_agents), jnp.int32))
        keys = jax.random.split(jax.random.PRNGKey(0), n)
        return jax.eval_shape(jax.vmap(env.step), keys, state, action)[-1]

    return match


def outcome_rates(outcomes: Outcomes, seat: int) -> dict[str, jax.Array]:
    """Rates for the player in `seat` (jittable): win / draw / loss (a loss includes its own illegal moves), illegal,
    the opponent's forfeit (an illegal move by another seat: the game ends without a winner), success."""
    won, draw, illegal = outcomes.won[:, seat], outcomes.draw[:, seat], outcomes.illegal[:, seat]
    ret = outcomes.ret[:, seat]
    lost = ~won & ~draw & (ret < 0)
    rate = lambda x: jnp.mean(x.astype(jnp.float32))  # noqa: E731
    return {"win": rate(won), "draw": rate(draw), "loss": rate(lost), "illegal": rate(illegal),
            "forfeit": rate(outcomes.illegal.any(-1) & ~illegal), "format_error": rate(outcomes.format_error[:, seat]),
            "success": rate(ret > 0), "mean_return": jnp.mean(ret), **match_ratios(outcomes.counts or {}),
            **({} if outcomes.solved is None else {"solved": rate(outcomes.solved[:, seat])})}


def match_ratios(counts: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """`INFO_RATIOS` over every seat's moves (jittable; NaN without tries): e.g. twenty questions'
    answer_accuracy is the accuracy of whichever seat answers in these games."""
    out = {}
    for name, (hits, tries) in INFO_RATIOS.items():
        if hits in counts and tries in counts:
            n = jnp.sum(counts[tries]).astype(jnp.float32)
            out[name] = jnp.where(n > 0, jnp.sum(counts[hits]) / jnp.maximum(n, 1.0), jnp.nan)
    return out


def summarize(outcomes: Outcomes, seat: int) -> dict[str, float]:
    """`outcome_rates` as Python floats, with the episode count."""
    return {"episodes": float(outcomes.ret.shape[0]),
            **{k: float(v) for k, v in outcome_rates(jax.tree.map(jnp.asarray, outcomes), seat).items()}}


def versus_builtins(env, policy: LMPolicy, num_turns: int, opponents: tuple[str, ...], episodes: int, seed: int = 0,
                    chunk: int = 64):
    """fn(base, seat_loras) -> {"<opp>_<win|draw|loss|illegal|format_error>", "<opp>_seat<s>_<win|draw|loss>": []},
    jittable.

    Greedy games of the LM (seat s acting with adapter `seat_loras[s]`, no slot axis; None = the bare base)
    against each of the game's built-in players, half of `episodes` in each seat: the games that
    `experiments/eval.py --opponent=<opp> --episodes=<episodes> --seed=<seed>` plays (seat s's episodes start
    from `fold_in(PRNGKey(seed), s)`), so a run's own curve and eval.py agree."""
    greedy = with_temperature(policy, 0.0)
    per_seat = episodes // 2
    seats = range(env.num_agents)
    matches = {(opp, seat): make_match(env, greedy, tuple("lm" if s == seat else opp for s in seats), num_turns,
                                       chunk=chunk) for opp in opponents for seat in seats}
    key = jax.random.PRNGKey(seed)

    def evaluate(base, seat_loras: tuple) -> dict[str, jax.Array]:
        out = {}
        for opp in opponents:
            for seat in seats:
                players = tuple(seat_loras[seat] if s == seat else None for s in seats)
                _, outcomes = matches[opp, seat](jax.random.fold_in(key, seat), base, players, per_seat)
                rates = outcome_rates(outcomes, seat)
                for name in ("win", "draw", "loss"):
                    out[f"{opp}_seat{seat}_{name}"] = rates[name]
                for name in ("win", "draw", "loss", "illegal", "format_error"):  # the last two: games lost that way
                    out[f"{opp}_{name}"] = out.get(f"{opp}_{name}", 0.0) + rates[name] / len(seats)
        return out

    return evaluate
