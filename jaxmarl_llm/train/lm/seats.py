"""Who sits where in an LM game: learners, frozen agents, scripted players, opponent-pool snapshots.

Agent slots: with `share_policy` every learning seat uses adapter slot 0 (frozen seats slot 1, run with
adapters off); otherwise seat a uses slot a; `adapter_of_agent` names the slot of each seat (roles: tag's
predators share one adapter, the prey has its own). Seats in `frozen_agents` (a judge, an answerer, a fixed
opponent) act through the bare base model (adapter scale 0) and never enter a loss.

Opponents inside the same compiled rollout (their rows never enter a loss):
  * `scripted_agents` ("1:minimax", or {1: "random"}): the game's built-in
    `opponent_action(key, state, kind)` plays that seat; no LM runs for it.
  * `opponent_pool.size = P` (self-play, two seats): the runner state holds P
    frozen snapshots of the learner's S adapter slots, stacked [P * S, ...]
    (snapshot p's slot s at row p * S + s). Each group of envs draws the
    learner's seat (the role is in the game's prompt) and one snapshot for the
    other seat, from global group ids. Every `opponent_pool.refresh_every`
    updates the learner's adapters overwrite the oldest snapshot (a `where`
    inside the compiled update). Only the learner's seat enters the loss.
    With `share_policy` S = 1 (one adapter plays either seat); without it each
    seat has its own slot (S = 2: X and O learn apart, a snapshot's opponent
    plays with that snapshot's adapter of its seat), and the loss gathers each
    episode's adapter by the learner's seat (`Turns.slot`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.text.base import BUILTIN_PLAYERS
from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.policies.lm_policy import slotted
from jaxmarl_llm.train.lm.plan import Plan, Turns


def check_seats(env, config, scripted: dict[int, str], pool_size: int) -> None:
    """Seat settings that cannot work for this env fail at build time, naming the key."""
    a = env.num_agents
    for i, kind in scripted.items():
        if not 0 <= i < a:
            raise ConfigError(f"config.scripted_agents: agent {i} does not exist ({a} agents)")
        if not hasattr(env, "opponent_action"):
            raise ConfigError(f"config.scripted_agents: {type(env).__name__} has no built-in `opponent_action`")
        if kind not in _players(env):
            raise ConfigError(f"config.scripted_agents: agent {i} kind {kind!r}; {_offers(env)}")
    groups = tuple(config.adapter_of_agent)
    if groups:
        if len(groups) != a or sorted(set(groups)) != list(range(max(groups) + 1)):
            raise ConfigError(f"config.adapter_of_agent: {groups} must give each of the {a} agents an adapter "
                              f"slot, numbered 0, 1, ... without gaps, e.g. {(0,) * (a - 1) + (1,)}")
        if config.frozen_agents or pool_size:
            raise ConfigError("config.adapter_of_agent: set either adapter_of_agent or frozen_agents / "
                              "opponent_pool (they place adapters themselves)")
    fewest = min(getattr(env, "seats", (a,)))  # a mixture may hold games of fewer seats (a one-seat task)
    if fewest < a and (pool_size or any(i < fewest for i in scripted)):
        key = "opponent_pool.size" if pool_size else "scripted_agents"
        raise ConfigError(f"config.{key}: {type(env).__name__}'s games have {fewest} to {a} seats; a game of "
                          f"{fewest} plays its seats {tuple(range(fewest))} with the learner alone (scripted seats "
                          f"from {fewest} on only; no snapshot pool)")
    if set(scripted) & set(config.frozen_agents):
        raise ConfigError("config.scripted_agents: an agent cannot be both scripted and in frozen_agents")
    league = any(config.opponent_pool.get(kind, 0.0) for kind in BUILTIN_PLAYERS)
    if (league or (config.in_graph_eval.every and a > 1)) and not hasattr(env, "opponent_action"):
        key = "opponent_pool.random" if league else "in_graph_eval.every"
        raise ConfigError(f"config.{key}: {type(env).__name__} has no built-in players (`opponent_action`)")
    for kind in BUILTIN_PLAYERS:
        if config.opponent_pool.get(kind, 0.0) and kind not in _players(env):
            raise ConfigError(f"config.opponent_pool.{kind}: {_offers(env)}")
    if config.in_graph_eval.every and a > 1 and config.in_graph_eval.episodes % 2:
        raise ConfigError(f"config.in_graph_eval.episodes: a game of {a} seats plays an even number of games (half in "
                          f"each seat), got {config.in_graph_eval.episodes}")
    if config.in_graph_eval.every and env.num_agents > 1:
        # a mixture of games (envs/text/mixture.py) evaluates each game against the opponents it has (a mixture of
        # one-seat tasks plays each alone: no opponent)
        offered = set(_players(env)).union(*(_players(g) for g in getattr(env, "games", ())))
        for kind in config.in_graph_eval.opponents:
            if kind not in offered:
                offers = f"its games offer {', '.join(sorted(offered))}" if hasattr(env, "games") else _offers(env)
                raise ConfigError(f"config.in_graph_eval.opponents: {kind!r}; {offers}")
    if config.opponent_pool.get("seat_weights", ()) and len(config.opponent_pool.seat_weights) != a:
        raise ConfigError(f"config.opponent_pool.seat_weights: one weight per seat ({a}), got "
                          f"{tuple(config.opponent_pool.seat_weights)}")
    if pool_size:
        if a != 2 or scripted or config.frozen_agents:
            raise ConfigError("config.opponent_pool: self-play with a pool needs a two-seat game and no "
                              "scripted_agents or frozen_agents")
        if not config.share_policy and config.in_graph_eval.get("cross_play", 0):
            raise ConfigError("config.in_graph_eval.cross_play: cross-play rates one adapter per player; with "
                              "share_policy=False each snapshot is a pair of seat adapters (set share_policy=True "
                              "or cross_play=0)")
    elif not any(i not in scripted and i not in config.frozen_agents for i in range(a)):
        raise ConfigError("config.scripted_agents / frozen_agents: no agent is left to learn")


def _players(env) -> tuple[str, ...]:
    return tuple(getattr(env, "builtin_players", ())) if hasattr(env, "opponent_action") else ()


def _offers(env) -> str:
    players = _players(env)
    return (f"{type(env).__name__}'s built-in players are {', '.join(players)}" if players
            else f"{type(env).__name__} has no built-in players")


def seat_layout(config, num_agents: int, scripted: dict[int, str]) -> dict[str, Any]:
    """The seat fields of a `Plan` (slots, scales, which seats an LM plays and which are scored)."""
    pool_size = int(config.opponent_pool.size)
    frozen = np.zeros((num_agents,), bool)
    frozen[list(config.frozen_agents)] = True
    is_scripted = np.zeros((num_agents,), bool)
    is_scripted[list(scripted)] = True
    if config.adapter_of_agent:
        slot_of_agent = np.asarray(config.adapter_of_agent, int)
    elif config.share_policy:
        slot_of_agent = np.where(frozen, 1 if frozen.any() else 0, 0)
    else:
        slot_of_agent = np.arange(num_agents)
    learns = ~frozen & ~is_scripted
    return dict(
        lm_agents=tuple(int(a) for a in np.flatnonzero(~is_scripted)),
        loss_agents=(0,) if pool_size else tuple(int(a) for a in np.flatnonzero(learns)),
        learns=tuple(bool(x) for x in learns),
        slot_of_agent=tuple(int(s) for s in slot_of_agent),
        num_slots=int(slot_of_agent.max()) + 1,
        agent_scale=tuple(0.0 if f else 1.0 for f in frozen),
        scripted=tuple(sorted(scripted.items())),
        pool_size=pool_size,
        refresh_every=int(config.opponent_pool.refresh_every),
        league=tuple((kind, float(config.opponent_pool.get(kind, 0.0))) for kind in BUILTIN_PLAYERS
                     if config.opponent_pool.get(kind, 0.0) > 0),
        seat_weights=tuple(float(w) for w in config.opponent_pool.get("seat_weights", ())),
    )


class Seats(NamedTuple):
    """Who plays each (env, agent) seat in one rollout."""

    learns: jax.Array  # [N, A] bool: the seat's tokens enter the loss
    pick: jax.Array  # [N, A] int32: adapter row in concat(learner slots [S], pool [P])
    scale: jax.Array  # [N, A] float32: 0 = bare base model
    builtin: jax.Array  # [N] int32: 0 = the opponent is an LM; i > 0 = the built-in player plan.league[i - 1]


def draw_seats(plan: Plan, key: jax.Array, env_ids: jax.Array) -> Seats:
    """Fixed seats, or (pool) the learner's seat and the opponent's snapshot drawn per global group id."""
    n, a = env_ids.shape[0], plan.num_agents
    if not plan.pool_size:
        return Seats(jnp.broadcast_to(jnp.asarray(np.asarray(plan.learns)), (n, a)),
                     jnp.broadcast_to(plan.slots(), (n, a)), jnp.broadcast_to(plan.scale(), (n, a)),
                     jnp.zeros((n,), jnp.int32))
    gid = env_ids // plan.group_size
    k_seat, k_snap = jax.random.split(key)
    if plan.seat_weights:  # the learner's seat in proportion to the weights (more games in a harder seat)
        p = jnp.asarray(plan.seat_weights, jnp.float32)
        seat = jax.vmap(lambda g: jax.random.choice(jax.random.fold_in(k_seat, g), a, p=p / p.sum()))(gid)
    else:
        seat = jax.vmap(lambda g: jax.random.randint(jax.random.fold_in(k_seat, g), (), 0, a))(gid)
    snap = jax.vmap(lambda g: jax.random.randint(jax.random.fold_in(k_snap, g), (), 0, plan.pool_size))(gid)
    learns = jnp.arange(a)[None, :] == seat[:, None]  # [N, A]
    slots = plan.slots()[None, :]  # [1, A]: each seat's own slot (all 0 with a shared policy)
    pick = jnp.where(learns, slots, plan.num_slots * (1 + snap[:, None]) + slots).astype(jnp.int32)
    return Seats(learns, pick, jnp.ones((n, a), jnp.float32), league_opponents(plan, key, gid))


def league_opponents(plan: Plan, key: jax.Array, gid: jax.Array) -> jax.Array:
    """[N] int32 per env from its group id: 0 = a snapshot, i = the built-in player plan.league[i - 1]."""
    if not plan.league:
        return jnp.zeros(gid.shape, jnp.int32)
    u = jax.vmap(lambda g: jax.random.uniform(jax.random.fold_in(jax.random.fold_in(key, 0x1EA6), g)))(gid)
    edges = np.cumsum([share for _, share in plan.league])  # [K]
    if edges[-1] >= 1.0 - 1e-6:  # shares summing to 1 (in floats, 0.7 + 0.3 < 1): a snapshot never plays
        edges[-1] = np.inf
    kind = jnp.sum(u[:, None] >= edges[None, :], axis=-1)  # index of the first edge above u (K = none)
    return jnp.where(kind < len(plan.league), kind + 1, 0).astype(jnp.int32)


def per_agent(plan: Plan, trainable, agents: tuple[int, ...]):
    """Slot-stacked trainable [S, ...] -> one entry per listed seat [A', ...] (a gather: grads flow back)."""
    return jax.tree.map(lambda x: x[plan.slots()[jnp.asarray(agents)]], slotted(trainable))


def loss_adapters(plan: Plan, trainable, slot: jax.Array):
    """The adapters the loss scores each loss seat with: [A_l, ...] shared by the envs, or (seat adapters in a
    pool: the learner's seat differs per env) [n, A_l, ...] gathered by `slot` [n, A_l] (grads flow back)."""
    if not plan.seat_adapters:
        return per_agent(plan, trainable, plan.loss_agents)
    return jax.tree.map(lambda x: x[slot], slotted(trainable))


def acting_weights(plan: Plan, trainable, pool, seats: Seats):
    """(adapters, scales, per_env) for the LM seats: [A', ...] shared by envs, or [N, A', ...] with a pool."""
    lm = jnp.asarray(plan.lm_agents)
    if not plan.pool_size:
        return per_agent(plan, trainable, plan.lm_agents), plan.scale()[lm], False
    pick = seats.pick[:, lm]  # [N, A']
    bank = jax.tree.map(lambda s, p: jnp.concatenate([s, p]), trainable["lora"], pool)  # [S + P, ...]
    value_slot = jnp.where(pick < plan.num_slots, pick, 0)  # snapshots carry no value head; theirs is unused
    adapters = {"lora": jax.tree.map(lambda x: x[pick], bank),
                "value_head": jax.tree.map(lambda x: x[value_slot], trainable["value_head"])}
    return adapters, seats.scale[:, lm], True


def take_agents(plan: Plan, x: jax.Array, agents: tuple[int, ...], axis: int) -> jax.Array:
    return x if len(agents) == plan.num_agents else jnp.take(x, jnp.asarray(agents), axis=axis)


def loss_view(plan: Plan, x: jax.Array, learns: jax.Array) -> jax.Array:
    """x [T, N, A, ...] -> [T, N, A_l, ...]: the learning seats (with a pool: each env's learner seat)."""
    if not plan.pool_size:
        return take_agents(plan, x, plan.loss_agents, 2)
    seat = jnp.argmax(learns, axis=-1)  # [N]
    idx = seat.reshape((1, -1, 1) + (1,) * (x.ndim - 3))
    return jnp.take_along_axis(x, idx, axis=2)


def loss_seats(plan: Plan, turns: Turns, learns: jax.Array) -> Turns:
    """Only the seats that can learn go into the loss (scripted, frozen, snapshot seats are never scored)."""
    per_seat = [f for f in Turns._fields if f not in Turns.PER_EPISODE]
    return turns._replace(**{f: loss_view(plan, getattr(turns, f), learns) for f in per_seat}, info={})


def init_pool(plan: Plan, lora):
    """Every snapshot starts as the initial learner (B = 0: the base model), [P * S, ...]; None without a pool."""
    if not plan.pool_size:
        return None
    return jax.tree.map(lambda x: jnp.tile(x[:plan.num_slots], (plan.pool_size,) + (1,) * (x.ndim - 1)), lora)


def refresh_pool(plan: Plan, pool, lora, step: jax.Array):
    """Every `refresh_every` updates the learner's adapters (its S slots) overwrite the oldest snapshot."""
    if not plan.pool_size:
        return pool
    due = step % plan.refresh_every == 0
    oldest = (step // plan.refresh_every - 1) % plan.pool_size
    s = plan.num_slots

    def put(p, x):
        now = jax.lax.dynamic_slice_in_dim(p, oldest * s, s)
        return jax.lax.dynamic_update_slice_in_dim(p, jnp.where(due, x[:s].astype(p.dtype), now), oldest * s, 0)

    return jax.tree.map(put, pool, lora)


def pool_by_age(plan: Plan, pool, step: jax.Array):
    """The snapshots newest first, as `refresh_pool` left them after update `step` (before any refresh every slot
    is the initial learner): leaves [P, ...], the one written last at index 0. A shared policy's pool only
    (S = 1; cross-play is refused for seat adapters)."""
    last = step // plan.refresh_every - 1  # the last refresh's count from 0 (negative: none yet)
    order = (last - jnp.arange(plan.pool_size)) % plan.pool_size  # [P]
    return jax.tree.map(lambda x: x[order], pool)
