"""Greedy evaluation: play N episodes of any token game with any actor, in one jitted program.

    act = lm_actor(greedy(policy), base, trainable)            # or any act(key, tokens [A, L], length [A], valid [A, K])
    env = GuessNumber(tokenizer, split="test", ...)            # held-out secrets
    result = evaluate(env, act, num_episodes=len(env.secrets), num_turns=10, reset=enumerate_secrets(env))
    # {"success_rate", "mean_turns", "mean_turns_solved", "format_error_rate", "episode_return"}
    # (+ "answer_accuracy", "answered" in games whose info counts answers: twenty questions with an LM answerer)

Success is the env's `solved` info when it reports one, else a positive
episode return (summed over agents). `reset(i) -> (obs, state)` picks episode
i's start (e.g. every held-out secret once); by default episodes start from
`env.reset(key_i)`. `evaluate_trainer` glues this to a trained run's `SeatWeights`
(run/trainers.py's `heldout_eval` takes any trainer's state).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jax.sharding import PartitionSpec as P

from jaxmarl_llm.envs.text.base import INFO_RATIOS
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.models import fsdp
from jaxmarl_llm.parallel import mesh as mesh_lib, multihost
from jaxmarl_llm.policies.lm_policy import LMPolicy, model_weights, slotted


# (key, tokens [A, L], length [A], valid [A, K]: env.candidate_mask) -> action [A, M]
Actor = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], TextAction]


def greedy(policy: LMPolicy) -> LMPolicy:
    """The same policy sampling at temperature 0 (argmax)."""
    return dataclasses.replace(policy, sampling=dataclasses.replace(policy.sampling, temperature=0.0))


def lm_actor(policy: LMPolicy, base: Any, trainable: Any | None = None, scale: jax.Array | None = None) -> Actor:
    """Every agent generates from its own transcript. trainable: leaves [A, ...] or None (the bare base);
    scale [A]: adapter scale per agent (0 = that agent plays the bare base)."""

    def act(key, tokens, length, valid):  # tokens [A, L], length [A], valid [A, K]
        def one(a, tr, t, n, v):
            if tr is not None and scale is not None:
                tr = {**tr, "lora": jax.tree.map(lambda x: x * scale[a], tr["lora"])}
            s = policy.sample(jax.random.fold_in(key, a), base, tr, t[None], n[None], valid=v[None])
            return jax.tree.map(lambda x: x[0], s)

        agents = jnp.arange(tokens.shape[0])
        sample = jax.vmap(one, in_axes=(0, None if trainable is None else 0, 0, 0, 0))(
            agents, trainable, tokens, length, valid)
        return TextAction(tokens=jnp.where(sample.mask, sample.tokens, policy.sampling.pad_id),
                          length=sample.mask.sum(-1).astype(jnp.int32))

    return act


def enumerate_secrets(env) -> Callable[[jax.Array], tuple[Any, Any]]:
    """reset(i): episode i plays secret i (cyclically) of an env with `secrets` and `reset_to` (guess_number)."""
    return lambda i: env.reset_to(env.secrets[i % env.secrets.shape[0]])


def play(key: jax.Array, env, act: Actor, num_episodes: int, num_turns: int,
         reset: Callable[[jax.Array], tuple[Any, Any]] | None = None, ids: jax.Array | None = None
         ) -> dict[str, jax.Array]:
    """Per-episode results [E]: return, turns, solved, format_errors, moves (acting turns). Jittable.
    ids [E]: the episodes' numbers (their starts and keys; default 0..E-1): one device's share of a sharded run."""
    k_reset, k_play = jax.random.split(key)
    ids = jnp.arange(num_episodes) if ids is None else ids
    if reset is None:
        obs, state = jax.vmap(lambda i: env.reset(jax.random.fold_in(k_reset, i)))(ids)
    else:
        obs, state = jax.vmap(reset)(ids)

    def turn(carry, t):
        obs, state, alive = carry
        k_act, k_env = jax.random.split(jax.random.fold_in(k_play, t))
        keys = lambda k: jax.vmap(lambda i: jax.random.fold_in(k, i))(ids)  # noqa: E731
        action = jax.vmap(act)(keys(k_act), obs.tokens, obs.length, jax.vmap(env.candidate_mask)(state))
        moving = jax.vmap(env.active)(state) & alive[:, None]  # [E, A]
        obs, state, reward, term, trunc, info = jax.vmap(env.step)(keys(k_env), state, action)
        done = jnp.all(term | trunc, axis=-1) & alive
        fe = info.get("format_error", jnp.zeros(moving.shape, bool))
        fe = jnp.broadcast_to(fe if fe.ndim == 2 else fe[:, None], moving.shape)
        reports[0] = "solved" in info  # known when tracing
        solved = info.get("solved", jnp.zeros(moving.shape, bool))
        solved = jnp.any(solved if solved.ndim == 2 else solved[:, None], axis=-1) & alive
        rec = {"reward": (reward * alive[:, None]).sum(-1), "alive": alive, "solved": solved,
               "format_errors": (fe & moving).sum(-1), "moves": moving.sum(-1), **mover_counts(info, moving)}
        return (obs, state, alive & ~done), rec

    reports = [False]
    _, rec = jax.lax.scan(turn, (obs, state, jnp.ones((num_episodes,), bool)), jnp.arange(num_turns))
    ret = rec["reward"].sum(0)
    counts = {name: rec[name].sum(0) for name in ratio_counts(rec)}
    return {"return": ret, "turns": rec["alive"].sum(0), "solved": rec["solved"].any(0) if reports[0] else ret > 0,
            "format_errors": rec["format_errors"].sum(0), "moves": rec["moves"].sum(0), **counts}


def ratio_counts(info: dict) -> tuple[str, ...]:
    """The INFO_RATIOS counts a game reports (both of a pair, or neither)."""
    return tuple(name for pair in INFO_RATIOS.values() if all(k in info for k in pair) for name in pair)


def mover_counts(info: dict, moving: jax.Array) -> dict[str, jax.Array]:
    """[E] per INFO_RATIOS count the game reports: the value of the seats that moved (moving [E, A]), summed."""
    def one(v):
        v = v if v.ndim == 2 else v[:, None]
        return (jnp.broadcast_to(v, moving.shape) * moving).sum(-1).astype(jnp.int32)

    return {name: one(info[name]) for name in ratio_counts(info)}


def ratio_rates(counts: dict[str, Any]) -> dict[str, float]:
    """INFO_RATIOS as floats from summed counts (NaN when there were no tries), and the tries' total."""
    out = {}
    for rate, (hits, tries) in INFO_RATIOS.items():
        if hits in counts and tries in counts:
            n = float(np.sum(counts[tries]))
            out[rate] = float(np.sum(counts[hits])) / n if n else float("nan")
            out[tries] = n
    return out


def summarize(episodes: dict[str, Any]) -> dict[str, float]:
    e = {k: np.asarray(v) for k, v in episodes.items()}
    solved = e["solved"].astype(bool)
    return {
        "success_rate": float(solved.mean()),
        "mean_turns": float(e["turns"].mean()),
        "mean_turns_solved": float(e["turns"][solved].mean()) if solved.any() else float("nan"),
        "format_error_rate": float(e["format_errors"].sum() / max(e["moves"].sum(), 1)),
        "episode_return": float(e["return"].mean()),
        "episodes": int(solved.shape[0]),
        **ratio_rates(e),
    }


def evaluate(env, act: Actor, num_episodes: int, num_turns: int, key: jax.Array | None = None,
             reset: Callable | None = None, compiler_options: dict[str, str] | None = None) -> dict[str, float]:
    """Play and summarize (one compiled program; `compiler_options`: what the actor's attention backend needs,
    models/attention.compiler_options)."""
    key = jax.random.PRNGKey(0) if key is None else key
    fn = jax.jit(lambda k: play(k, env, act, num_episodes, num_turns, reset), compiler_options=compiler_options)
    return summarize(jax.device_get(fn(key)))


def evaluate_sharded(env, policy: LMPolicy, weights: "SeatWeights", mesh, num_episodes: int, num_turns: int,
                     key: jax.Array | None = None, reset: Callable | None = None,
                     compiler_options: dict[str, str] | None = None) -> dict[str, float]:
    """`evaluate` of `policy` (its sampling as given) with the base weights sharded over the mesh's `fsdp` axis
    (a base that does not fit one device, parallel/mesh.py): each device plays its share of the episodes, padded up
    to a multiple of the device count (the extra ones dropped), gathering one layer at a time. The same episodes,
    keys and results as `evaluate` on one device (tests/test_fsdp.py)."""
    key = jax.random.PRNGKey(0) if key is None else key
    n_dev, axes = mesh.devices.size, mesh_lib.batch_axes(mesh)
    local_n = -(-num_episodes // n_dev)  # episodes a device plays
    specs = fsdp.param_specs(policy.cfg, mesh_lib.fsdp_size(mesh))

    def local(k, params, trainable, scale):
        ids = mesh_lib.global_index(local_n, axes)  # this device's episodes, in the order P(axes) gathers them
        return play(k, env, lm_actor(policy, params, trainable, scale), local_n, num_turns, reset, ids=ids)

    fn = jax.jit(mesh_lib.shard_over_data(local, mesh, in_specs=(P(), specs, P(), P()), out_specs=P(axes)),
                 compiler_options=compiler_options)
    out = fn(key, mesh_lib.put(weights.params, mesh, specs), weights.trainable, weights.scale)
    return summarize({k: np.asarray(v)[:num_episodes] for k, v in multihost.to_host(out).items()})


# ---- glue for trained runs -----------------------------------------------------------------------


def heldout_env(config, tokenizer):
    """The run's env on its held-out split (envs without a `split` keyword: the same env)."""
    import inspect

    from jaxmarl_llm.envs import registry

    kwargs = dict(config.env_kwargs)
    cls = registry._resolve(config.env_name)
    if "split" in inspect.signature(cls.__init__).parameters:
        kwargs["split"] = "test"
    return registry.make(config.env_name, tokenizer=tokenizer, **kwargs)


class SeatWeights(NamedTuple):
    """What every seat of a trained LM run acts with (a trainer's `seat_weights` hook, run/trainers.py)."""

    params: Any  # the base params every seat runs
    trainable: Any | None  # leaves [A, ...]: each agent's trainable weights, or None (the bare base)
    scale: jax.Array | None = None  # [A] adapter scale per agent (0 = the bare base), or None (all 1)


def every_seat(trainable: Any | None, num_agents: int) -> Any | None:
    """One trainable tree (no agent axis) as leaves [A, ...]: every seat plays it; None stays None (the bare base)."""
    if trainable is None:
        return None
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (num_agents, *x.shape)), trainable)


def shared_seat_weights(trainer, state) -> SeatWeights:
    """SFT / DPO: one set of weights (`trainer.weights`) plays every seat."""
    params, trainable = trainer.weights(state, trainer.base)
    return SeatWeights(params, every_seat(trainable, trainer.env.num_agents))


def slot_seat_weights(trainer, state) -> SeatWeights:
    """lm_rl: each agent acts with its adapter slot (`trainer.slot_of_agent`), frozen agents at scale 0."""
    per_agent = jax.tree.map(lambda x: x[jnp.asarray(trainer.slot_of_agent)], slotted(state.trainable))
    return SeatWeights(model_weights(state.trainable, trainer.base), per_agent, trainer.agent_scale)


def trained_actor(trainer, weights: SeatWeights) -> Actor:
    """Greedy actor of a trained run's seat weights."""
    return lm_actor(greedy(trainer.policy), weights.params, weights.trainable, weights.scale)


def evaluate_trainer(config, trainer, weights: SeatWeights, num_episodes: int | None = None) -> dict[str, float]:
    """Greedy results on the held-out split; guess_number plays every held-out secret once by default.
    (`trainers.heldout_eval(config, trainer, state)` finds the weights of any trainer's state.)"""
    env = heldout_env(config, trainer.tokenizer)
    reset = enumerate_secrets(env) if hasattr(env, "reset_to") and hasattr(env, "secrets") else None
    n = num_episodes or config.eval_episodes or (int(env.secrets.shape[0]) if reset is not None else 64)
    options = mesh_lib.compiler_options(trainer)
    fsdp_ways = int((config.get("mesh") or {}).get("fsdp", 1))
    if fsdp_ways > 1:  # the base does not fit one device: play sharded, as the run trained
        mesh = mesh_lib.make_mesh(config.mesh.num_devices, fsdp_ways)
        return evaluate_sharded(env, greedy(trainer.policy), weights, mesh, n, config.num_turns, reset=reset,
                                compiler_options=options)
    return evaluate(env, trained_actor(trainer, weights), n, config.num_turns, reset=reset, compiler_options=options)
