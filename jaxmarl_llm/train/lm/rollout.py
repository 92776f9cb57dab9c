"""One rollout of an LM game: `lax.scan` over turns, every LM seat generating its reply with the KV-cache sampler.

The acting itself is the rollout path's (train/lm/paths.py): `act_reread` prefills every LM seat's whole
transcript each turn (any env); `act_incremental` (token games whose transcripts only grow) keeps each (env, seat)
row's KV cache across turns and reads only the tokens added since it last acted, `plan.chunk` at a time, for the
movers only (one seat per env in turn-based games). Both draw each (env, seat)'s sample from the same key, so they
sample the same replies. Recorded per (turn, env, seat): prompt, action tokens, sampling log-probs, value, reward,
who acted.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmarl_llm.envs.text.base import INFO_RATIOS, TOKEN_REWARD
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.mixture import GAME_INFO
from jaxmarl_llm.models import fsdp
from jaxmarl_llm.policies import central_critic, transcripts
from jaxmarl_llm.policies.lm_policy import LMPolicy, model_weights
from jaxmarl_llm.train.lm.plan import Plan, Turns
from jaxmarl_llm.train.lm.seats import acting_weights, draw_seats, take_agents


def rollout(plan: Plan, path, env, policy: LMPolicy, key: jax.Array, base, trainable, pool, env_ids: jax.Array):
    """Reset the local envs (groups share a seed) and play `plan.num_turns` turns, acting as `path` (paths.py) does.

    env_ids [n]: global env indices (per-env randomness ignores the device split).
    Returns (Turns [T, n, A, ...], Seats, final transcripts [n, A, L])."""
    per_env = lambda k: jax.vmap(lambda i: jax.random.fold_in(k, i))(env_ids)  # noqa: E731
    base = model_weights(trainable, base)  # train_base: the policy's own trained copy of the base
    k_reset, k_turns = jax.random.split(key)
    seats = draw_seats(plan, jax.random.fold_in(k_reset, 0x5EA7), env_ids)
    weights = acting_weights(plan, trainable, pool, seats)
    group_keys = jax.vmap(lambda i: jax.random.fold_in(k_reset, i))(env_ids // plan.group_size)
    obs, env_state = jax.vmap(env.reset)(group_keys)
    n, a, m = env_ids.shape[0], plan.num_agents, plan.max_action_tokens
    lm = jnp.asarray(plan.lm_agents)

    def live_turn(carry, t):
        env_state, obs, alive, cache = carry
        k_act, k_env = jax.random.split(jax.random.fold_in(k_turns, t))
        active = jax.vmap(env.active)(env_state)  # [n, A]
        tokens = jnp.full((n, a, m), plan.pad_id, jnp.int32)
        mask = jnp.zeros((n, a, m), bool)
        logprob = jnp.zeros((n, a, m), jnp.float32)
        value = jnp.zeros((n, a), jnp.float32)
        valid = jax.vmap(env.candidate_mask)(env_state) if plan.actions != "free" else jnp.zeros((n, a, 0), bool)
        if plan.num_lm:
            s, cache = path.act(plan, policy, per_env(k_act), base, weights, obs, active, cache, valid)
            tokens, mask = tokens.at[:, lm].set(s.tokens), mask.at[:, lm].set(s.mask)
            logprob, value = logprob.at[:, lm].set(s.logprobs), value.at[:, lm].set(s.value)
        for seat, kind in plan.scripted:  # the game's own player; log-prob 0, never in a loss
            use = jnp.broadcast_to(jnp.arange(a) == seat, (n, a))
            tokens, mask = builtin_moves(env, kind, per_env(jax.random.fold_in(k_act, 1_000_003 + seat)), env_state,
                                         use, tokens, mask)
        for i, (kind, _) in enumerate(plan.league):  # league groups: a built-in player replaces the snapshot
            use = (seats.builtin == i + 1)[:, None] & ~seats.learns
            tokens, mask = builtin_moves(env, kind, per_env(jax.random.fold_in(k_act, 2_000_003 + i)), env_state,
                                         use, tokens, mask)
        mask = mask & active[..., None]  # an inactive seat's sample is never played nor scored
        if plan.world_critic:  # the critic reads the env's world state (centralized training)
            critic_obs = central_critic.world_inputs(jax.vmap(env.world_state)(env_state), a)
        elif plan.central and path.keep_prompts:  # the critic reads every seat's prompt end at this turn
            feats = central_critic.transcript_features(base, policy.cfg, obs.tokens.reshape(n * a, -1),
                                                       (obs.length - 1).reshape(n * a, 1))
            critic_obs = central_critic.critic_inputs(feats.reshape(n, a, -1))
        else:
            critic_obs = jnp.zeros((n, a, 0), jnp.float32)
        action = TextAction(tokens=jnp.where(mask, tokens, plan.pad_id), length=mask.sum(-1).astype(jnp.int32))
        # a scored turn is one choice among the candidates: its log-prob sits on token 0, the loss reads only that
        loss_mask = mask & (jnp.arange(m) == 0) if plan.actions == "scored" else mask
        next_obs, env_state2, reward, term, trunc, info = jax.vmap(env.step)(per_env(k_env), env_state, action)
        done = jnp.all(term | trunc, axis=-1) & alive
        token_reward = info.get(TOKEN_REWARD, jnp.zeros(tokens.shape, jnp.float32)) * loss_mask  # [N, A, M]
        rec = Turns(
            prompt=obs.tokens if path.keep_prompts else obs.tokens[..., :0], prompt_len=obs.length,
            action=action.tokens, action_mask=loss_mask, logprob=jnp.where(loss_mask, logprob, 0.0),
            value=value * active, critic_obs=critic_obs, valid=valid, reward=reward * alive[:, None],
            token_reward=token_reward * alive[:, None, None], alive=alive,
            acted=active & alive[:, None], acts=active & alive[:, None] & seats.learns, slot=seats.pick, done=done,
            info={k: v for k, v in info.items() if jnp.ndim(v) <= 2 and k != TOKEN_REWARD},
        )
        return (env_state2, next_obs, alive & ~done, cache), rec

    def turn(carry, t):
        # once every local game has ended, later turns only record zeros (no model call)
        def dead_turn(carry, t):
            shapes = jax.eval_shape(live_turn, carry, t)[1]
            return carry, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)

        # sharded weights (mesh.fsdp): the forwards' gathers need every device of the group in the same branch
        return jax.lax.cond(fsdp.agree_max(carry[2].any(), base, policy.cfg), live_turn, dead_turn, carry, t)

    alive0 = jnp.ones((n,), bool)
    cache = path.init_cache(plan, policy, obs)
    (_, last_obs, _, _), turns = jax.lax.scan(turn, (env_state, obs, alive0, cache), jnp.arange(plan.num_turns))
    if plan.central:
        if not path.keep_prompts and not plan.world_critic:  # every turn's prompt is a prefix of the final transcript
            feats = critic_features(plan, policy, base, last_obs.tokens, turns.prompt_len)
            turns = turns._replace(critic_obs=feats * turns.alive[..., None, None])  # ended games: 0, as read live
        value = central_critic.critic_apply(trainable["critic"], turns.critic_obs) * turns.acted
        turns = turns._replace(value=value)
    return turns, seats, last_obs.tokens


def builtin_moves(env, kind: str, keys: jax.Array, env_state, use: jax.Array, tokens: jax.Array, mask: jax.Array):
    """The game's built-in player `kind` moves in the seats where use [n, A] is True: tokens / mask [n, A, M]."""
    scr = jax.vmap(lambda k, st: env.opponent_action(k, st, kind))(keys, env_state)  # [n, A, M]
    play = use[..., None]
    return (jnp.where(play, scr.tokens, tokens),
            jnp.where(play, jnp.arange(tokens.shape[-1]) < scr.length[..., None], mask))


def _scaled(adapters, scale):
    """Adapters times `scale` (0 for frozen seats: exactly the base model)."""
    return {**adapters, "lora": jax.tree.map(lambda x: x * scale, adapters["lora"])}


def act_reread(plan: Plan, policy: LMPolicy, keys: jax.Array, base, weights, obs, active, cache, valid: jax.Array):
    """Every LM seat prefills its whole transcript and generates: keys [n] -> (Sample fields [n, A', ...], cache).
    valid [n, A, K]: allowed candidates (width 0 with free actions). Nothing is cached between turns. In a
    turn-based game (`plan.movers` < A') only the mover's row is read; the others stay empty (masked anyway)."""
    adapters, scale, per_env_weights = weights
    tokens = take_agents(plan, obs.tokens, plan.lm_agents, 1)  # [n, A', L]
    length = take_agents(plan, obs.length, plan.lm_agents, 1)  # [n, A']
    valid = take_agents(plan, valid, plan.lm_agents, 1)  # [n, A', K]
    agent_ids = jnp.asarray(plan.lm_agents)

    def one_agent(k, seat, ad, s, t, l, o):
        sample = policy.sample(jax.random.fold_in(k, seat), base, _scaled(ad, s), t[None], l[None],
                               o[None] if plan.actions != "free" else None)
        return jax.tree.map(lambda x: x[0], sample)

    if plan.movers < plan.num_lm:
        seat, env_of, full = mover_rows(plan, active)  # [n, 1]
        pick = lambda x: x[env_of, seat][:, 0]  # noqa: E731  [n, A', ...] -> the movers' [n, ...]
        if one_weight_set(plan, per_env_weights):  # every row reads the same adapters: no per-row copies
            sample = jax.vmap(one_agent, in_axes=(0, 0, None, None, 0, 0, 0))(
                keys, agent_ids[seat[:, 0]], jax.tree.map(lambda x: x[0], adapters), scale[0], pick(tokens),
                pick(length), pick(valid))
        else:
            row_ad, row_scale = row_weights(adapters, scale, per_env_weights, env_of, seat)
            sample = jax.vmap(one_agent)(keys, agent_ids[seat[:, 0]], row_ad, row_scale, pick(tokens), pick(length),
                                         pick(valid))
        return type(sample)(full(sample.tokens, plan.pad_id), full(sample.logprobs, 0.0), full(sample.mask, False),
                            full(sample.value, 0.0)), cache

    def one_env(k, ad_env, sc_env, tok, ln, ok):
        return jax.vmap(lambda *xs: one_agent(k, *xs))(agent_ids, ad_env, sc_env, tok, ln, ok)

    axis = 0 if per_env_weights else None
    return jax.vmap(one_env, in_axes=(0, axis, axis, 0, 0, 0))(keys, adapters, scale, tokens, length, valid), cache


def one_weight_set(plan: Plan, per_env_weights: bool) -> bool:
    """Every LM seat acts with the same adapters at the same scale (self-play with one shared policy)."""
    lm = plan.lm_agents
    return not per_env_weights and plan.one_slot(lm) and len({plan.agent_scale[a] for a in lm}) == 1


def mover_rows(plan: Plan, active: jax.Array):
    """The rows that act this turn: (seat, env_of) [n, K] into the LM seats (K = A' when all may move, else the
    one mover; an env with no mover picks seat 0, masked later), and `full(x [n*K, ...], fill)` -> [n, A', ...]
    with the other seats' rows filled."""
    n, num_lm = active.shape[0], plan.num_lm
    act_lm = active[:, jnp.asarray(plan.lm_agents)]  # [n, A']
    if plan.movers == num_lm:
        seat = jnp.broadcast_to(jnp.arange(num_lm), (n, num_lm))
    else:
        seat = jnp.argmax(act_lm, axis=-1)[:, None]  # [n, 1] (turn-based: the one mover)
    env_of = jnp.broadcast_to(jnp.arange(n)[:, None], seat.shape)

    def full(x, fill):
        return jnp.full((n, num_lm) + x.shape[1:], fill, x.dtype).at[env_of, seat].set(
            x.reshape(seat.shape + x.shape[1:]))

    return seat, env_of, full


def row_weights(adapters, scale: jax.Array, per_env_weights: bool, env_of: jax.Array, seat: jax.Array):
    """The adapters and scale of each acting row (`mover_rows`' [n, K] seat and env): ([n*K, ...], [n*K]).
    Per-env weights (an opponent pool) are [n, A', ...], else [A', ...]."""
    if per_env_weights:
        take = lambda x: x[env_of, seat].reshape((-1,) + x.shape[2:])  # noqa: E731
    else:
        take = lambda x: x[seat].reshape((-1,) + x.shape[1:])  # noqa: E731
    return jax.tree.map(take, adapters), take(scale)


def no_cache(plan: Plan, policy: LMPolicy, obs):
    """The re-read path carries nothing between turns."""
    return None


def init_cache(plan: Plan, policy: LMPolicy, obs):
    """The incremental path's KV cache: one row per (env, LM seat), as wide as a transcript plus one reply."""
    n = obs.tokens.shape[0]
    return transcripts.init_rows(policy.cfg, n * plan.num_lm, obs.tokens.shape[-1] + plan.max_action_tokens)


def act_incremental(plan: Plan, policy: LMPolicy, keys: jax.Array, base, weights, obs, active, cache, valid):
    """Movers only (K rows per env), each reading just the tokens added since its last turn.

    Returns (Sample fields [n, A', ...] with non-movers empty, the updated cache)."""
    adapters, scale, per_env_weights = weights
    num_lm = plan.num_lm
    lm = jnp.asarray(plan.lm_agents)
    act_lm = active[:, lm]  # [n, A']
    seat, env_of, full = mover_rows(plan, active)
    rows = (env_of * num_lm + seat).reshape(-1)  # [n*K] rows of the cache
    pick = lambda x: x[:, lm][env_of, seat].reshape((-1,) + x.shape[2:])  # noqa: E731
    row_ad, row_scale = row_weights(adapters, scale, per_env_weights, env_of, seat)
    row_ad = {**row_ad, "lora": jax.tree.map(
        lambda x: x * row_scale.reshape((-1,) + (1,) * (x.ndim - 1)).astype(x.dtype), row_ad["lora"])}
    row_len = pick(obs.length)
    # the key of (env, seat) that the full path uses, so both paths draw the same samples
    row_keys = jax.vmap(jax.random.fold_in)(keys[env_of.reshape(-1)], lm[seat].reshape(-1))
    row_valid = pick(valid) if plan.actions != "free" else None
    sample, part = transcripts.act_rows(policy, row_keys, base, row_ad, pick(obs.tokens), row_len,
                                        transcripts.take_rows(cache, rows), plan.chunk, valid=row_valid)
    acting = act_lm[env_of, seat].reshape(-1)
    cache = transcripts.put_rows(cache, rows, part._replace(seen=jnp.where(acting, part.seen, row_len)))

    out = type(sample)(full(sample.tokens, plan.pad_id), full(sample.logprobs, 0.0), full(sample.mask, False),
                       full(sample.value, 0.0))
    return out, cache


def critic_features(plan: Plan, policy: LMPolicy, base, final: jax.Array, prompt_len: jax.Array) -> jax.Array:
    """MAPPO critic inputs [T, N, A, F] from each seat's final transcript (final [N, A, L], prompt_len [T, N, A])."""
    t_len, n_env, a = prompt_len.shape
    rows = final.reshape(n_env * a, -1)
    pos = (jnp.moveaxis(prompt_len, 0, -1) - 1).reshape(n_env * a, t_len)  # each turn's last read token
    feat_widths = transcripts.score_widths(rows.shape[1], plan.min_score_width)
    branch = fsdp.agree_max(transcripts.width_index(feat_widths, prompt_len.max()), base, policy.cfg)
    feats = jax.lax.switch(branch, [lambda r, w=w: central_critic.transcript_features(base, policy.cfg, r[:, :w], pos)
                                    for w in feat_widths], rows)  # [N*A, T, D]
    return central_critic.critic_inputs(jnp.moveaxis(feats.reshape(n_env, a, t_len, -1), 2, 0))


def episode_metrics(turns: Turns, learns: jax.Array, axis_name: str | None) -> dict:
    """Mean episode return over learning seats (learns [N, A]), the team return (their sum), each seat's return,
    success rate (a positive return), turns, tokens per turn, format errors per learner turn, `<key>_rate`
    per learner episode for boolean game outcomes (and `<key>_rate_agent<i>` per learning seat), and the games'
    declared `INFO_RATIOS` over every seat's moves (0 when there were no tries); a mixture of games
    (envs/text/mixture.py) adds each game's share of the episodes, `episodes_<game>`, and its `return_<game>` (and
    `return_<game>_agent<i>`) over its episodes."""

    def total(x):
        x = jnp.sum(x)
        return x if axis_name is None else jax.lax.psum(x, axis_name)

    n = total(jnp.ones(turns.alive.shape[1:]))
    learns = learns.astype(jnp.float32)  # [N, A]
    games = [v for k, v in turns.info.items() if k.startswith(GAME_INFO)]
    if games:  # a mixture: a game of fewer seats flags only its own, and only those count (returns, rates)
        learns = learns * jnp.any(jnp.stack(games), axis=(0, 1)).astype(jnp.float32)
    returns = turns.reward.sum(0)  # [N, A]
    per_env = (returns * learns).sum(-1) / jnp.maximum(learns.sum(-1), 1.0)
    acting = turns.acts.astype(jnp.float32)
    tokens = (turns.action_mask.sum(-1) * acting).sum()
    out = {
        "episode_return": total(per_env) / n,
        "team_return": total((returns * learns).sum(-1)) / n,  # the learning seats' returns summed
        "success_rate": total((per_env > 0).astype(jnp.float32)) / n,
        "episode_turns": total(turns.alive.sum(0)) / n,
        "tokens_per_turn": total(tokens) / jnp.maximum(total(acting.sum()), 1.0),
    }
    if "format_error" in turns.info:
        fe = turns.info["format_error"]
        fe = fe if fe.ndim == 3 else fe[..., None]
        out["format_error_rate"] = total((fe * turns.acts).astype(jnp.float32)) / jnp.maximum(total(acting.sum()), 1.0)
    if returns.shape[-1] > 1:  # each seat's own return, over the episodes it learned in
        for seat in range(returns.shape[-1]):
            eps = total(learns[:, seat].sum())
            out[f"return_agent{seat}"] = total((returns[:, seat] * learns[:, seat]).sum()) / jnp.maximum(eps, 1.0)
    for rate, (hits, tries) in INFO_RATIOS.items():  # e.g. a frozen answerer's accuracy on the learner's questions
        if hits in turns.info and tries in turns.info:
            moved = lambda v: total(jnp.broadcast_to(v, turns.acted.shape) * turns.acted)  # noqa: E731  the mover's
            out[rate] = moved(turns.info[hits]) / jnp.maximum(moved(turns.info[tries]), 1.0)
    learner_eps = total(jnp.minimum(learns.sum(-1), 1.0))
    for name, v in turns.info.items():  # a mixture of games: each game's share of the episodes and its returns
        if name.startswith(GAME_INFO):
            game, played = name[len(GAME_INFO):], jnp.any(v, axis=(0, 2)).astype(jnp.float32)  # [N]
            eps = total(played)
            out[f"episodes_{game}"] = eps / n
            out[f"return_{game}"] = total(per_env * played) / jnp.maximum(eps, 1.0)
            if returns.shape[-1] > 1:  # each seat's, over the game's episodes it learned in
                for seat in range(returns.shape[-1]):
                    mine = learns[:, seat] * played
                    out[f"return_{game}_agent{seat}"] = total(returns[:, seat] * mine) / jnp.maximum(total(mine), 1.0)
    for name, v in turns.info.items():  # e.g. tic-tac-toe's won / draw / illegal: [T, N, A] bool
        if name != "format_error" and not name.startswith(GAME_INFO) and v.ndim == 3 and v.dtype == jnp.bool_:
            happened = jnp.any(v, axis=0).astype(jnp.float32) * learns  # [N, A]
            out[f"{name}_rate"] = total(happened.max(-1)) / jnp.maximum(learner_eps, 1.0)
            if happened.shape[-1] > 1:  # each seat's own rate (e.g. debater A's wins vs B's), over its episodes
                for seat in range(happened.shape[-1]):
                    eps = total(learns[:, seat].sum())
                    out[f"{name}_rate_agent{seat}"] = total(happened[:, seat]) / jnp.maximum(eps, 1.0)
    return out
