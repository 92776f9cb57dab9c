"""Play a `Script` (a scripted teacher or the LM policy) in a real env and turn the transcripts into training rows.

    rows = collect(key, env, script, num_turns, env_ids, eos_id)   # Transcripts [N*A, L]

A game whose transcripts only grow (`env.appends_actions`) gives one row per (env, seat): its final transcript,
every target move in place. A game that rewrites each observation (tic-tac-toe with `history=False`) gives one row
per turn, env and seat, [T*N*A, C + M + 1]: that turn's observation, the move after it, the eos after that: what
the policy reads when it acts.

`policy_script` plays the LM policy as a `Script` (SFT on its own best
episodes, DPO's "policy" player), so `collect` serves every player.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmarl_llm.data.teachers import Script, stateless
from jaxmarl_llm.envs.text.buffers import TextAction, clean_action
from jaxmarl_llm.evaluation.evaluate import every_seat, lm_actor
from jaxmarl_llm.policies.lm_policy import LMPolicy


class Transcripts(NamedTuple):
    """Training rows, [B, L]: one per env and agent of played episodes, or one per line of a file."""

    tokens: jax.Array  # [B, L] int32 model input: the final transcript
    targets: jax.Array  # [B, L] int32 tokens, with eos after each target move
    mask: jax.Array  # [B, L] bool: positions whose target counts
    turn_mask: jax.Array  # [B, T, L] bool: the same, split by turn / move (for per-move accuracy)
    solved: jax.Array  # [B] float: the episode's return was positive (0 for file rows)
    returns: jax.Array  # [B] float: the agent's episode return (0 for file rows)


def policy_script(env, policy: LMPolicy, params, trainable) -> Script:
    """The policy as a `Script` (every move a target): each agent samples from its own transcript.

    trainable: {"lora": adapters} without an agent axis, or None (the bare model). The action stops
    before its first eos, as the env records it, so `collect`'s move spans and eos targets line up
    with the transcript (the eos itself is the target after the move).
    """
    a = env.num_agents
    act = lm_actor(policy, params, every_seat(trainable, a))
    pad, eos = policy.sampling.pad_id, env.codec.eos_id

    def step(key, memory, state):
        obs = env.get_obs(state)
        action = act(key, obs.tokens, obs.length, env.candidate_mask(state))
        return TextAction(*clean_action(action.tokens, action.length, pad, eos)), jnp.ones((a,), bool), memory

    return stateless(step)


def collect(key: jax.Array, env, script: Script, num_turns: int, env_ids: jax.Array, eos_id: int,
            all_moves: bool = False, act_key: jax.Array | None = None) -> Transcripts:
    """Play the teacher in `len(env_ids)` envs and turn each agent's transcript into a training row.

    all_moves: every move the agent makes is a target (DPO scores whole trajectories, exploration
    moves included), not only the script's own choices. act_key: the actor's randomness comes from
    this key instead of `key`, so two players see the same envs (same resets and env steps) but make
    independent choices.
    """
    per_env = lambda k: jax.vmap(lambda i: jax.random.fold_in(k, i))(env_ids)  # noqa: E731
    k_reset, k_turns = jax.random.split(key)
    obs, state = jax.vmap(env.reset)(per_env(k_reset))
    memory = jax.vmap(script.init)(state)

    def turn(carry, t):
        state, obs, memory, alive = carry
        k_act, k_env = jax.random.split(jax.random.fold_in(k_turns, t))
        if act_key is not None:
            k_act = jax.random.fold_in(act_key, t)
        action, target, memory = jax.vmap(script.act)(per_env(k_act), memory, state)
        if all_moves:
            target = jnp.ones_like(target)
        active = jax.vmap(env.active)(state)  # [N, A]
        next_obs, state2, reward, term, trunc, _ = jax.vmap(env.step)(per_env(k_env), state, action)
        done = jnp.all(term | trunc, axis=-1) & alive
        # a game appends the mover's own action first, at its transcript length
        rec = (obs.length, action.length, target & active & alive[:, None], reward * alive[:, None])
        # rewritten observations: each turn's own (its row), else nothing more (the final transcript holds them)
        rec += (obs.tokens, action.tokens) if not env.appends_actions else (None, None)
        return (state2, next_obs, memory, alive & ~done), rec

    alive0 = jnp.ones(env_ids.shape, bool)
    (final, _, _, _), (start, length, target, reward, seen, moves) = jax.lax.scan(
        turn, (state, obs, memory, alive0), jnp.arange(num_turns))  # each [T, N, A, ...]
    if not env.appends_actions:
        return turn_rows(seen, moves, start, length, target, reward, eos_id, env.codec.pad_id)
    tokens = jax.vmap(env.get_obs)(final).tokens  # [N, A, L]
    n, a, cap = tokens.shape
    pos = jnp.arange(cap)
    start, end = start[..., None], (start + length)[..., None]  # [T, N, A, 1]
    fits = (end < cap) & target[..., None]  # the eos after the move must fit too
    in_move = (pos >= start) & (pos < end) & fits  # [T, N, A, L]
    at_eos = (pos == end) & fits
    turn_mask = in_move | at_eos
    targets = jnp.where(at_eos.any(0), eos_id, tokens)
    rows = lambda x: x.reshape(n * a, *x.shape[2:])  # noqa: E731  [N, A, ...] -> [N*A, ...]
    return Transcripts(
        tokens=rows(tokens), targets=rows(targets), mask=rows(turn_mask.any(0)),
        turn_mask=rows(jnp.moveaxis(turn_mask, 0, 2)),
        solved=rows((reward.sum(0) > 0).astype(jnp.float32)), returns=rows(reward.sum(0)),
    )


def turn_rows(seen: jax.Array, moves: jax.Array, start: jax.Array, length: jax.Array, target: jax.Array,
              reward: jax.Array, eos_id: int, pad_id: int) -> Transcripts:
    """One row per turn, env and agent: observation seen [T, N, A, C] (its length `start`), the move [T, N, A, M]
    (`length` tokens) written after it and an eos after that, a target where `target` [T, N, A]; rows turn-major
    [T*N*A, C + M + 1] (row = t * N*A + env * A + agent), each with its agent's episode return."""
    t, n, a, cap = seen.shape
    m = moves.shape[-1]
    width = cap + m + 1
    tokens = jnp.pad(seen, ((0, 0),) * 3 + ((0, m + 1),), constant_values=pad_id)
    write = lambda row, move, at: jax.lax.dynamic_update_slice(row, move, (at,))  # noqa: E731
    tokens = jax.vmap(write)(tokens.reshape(-1, width), moves.reshape(-1, m), start.reshape(-1))  # [T*N*A, W]
    pos = jnp.arange(width)
    begin, end = start.reshape(-1, 1), (start + length).reshape(-1, 1)
    fits = target.reshape(-1, 1) & (end < width)
    in_move, at_eos = (pos >= begin) & (pos < end) & fits, (pos == end) & fits
    mask = in_move | at_eos
    ret = jnp.broadcast_to(reward.sum(0), (t, n, a)).reshape(-1)
    return Transcripts(tokens=tokens, targets=jnp.where(at_eos, eos_id, tokens), mask=mask,
                       turn_mask=mask[:, None, :], solved=(ret > 0).astype(jnp.float32), returns=ret)
