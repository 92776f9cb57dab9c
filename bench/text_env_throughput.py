"""Env steps per second of every token game, 1024 parallel envs, random legal actions (with auto-reset).

Peers in the same run: pgx's tic_tac_toe (JAX board game, no text) under the
same jitted loop, and textarena's TicTacToe (Python text env; one env stepped
in a loop, random legal moves). Targets: >= 100x textarena, within 3x of pgx.

    python bench/text_env_throughput.py [--envs 1024] [--steps 64] [--games text/tic_tac_toe,...]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import time

import jax
import jax.numpy as jnp

from jaxmarl_llm.envs import core
from jaxmarl_llm.envs.registry import make
from jaxmarl_llm.envs.text.tic_tac_toe import sample_uniform

GAMES = {
    "text/guess_number": {},
    "text/tic_tac_toe": {},
    "text/twenty_questions": {},
    "text/debate": {},
    "text/cooperative_writing": {},
    "text/arithmetic": {},
    "text/tokenized_mpe": {},
}


def _time(run, *args, repeats: int = 5) -> tuple[float, float]:
    """Best (wall, process-CPU) seconds over `repeats` runs: the best run is the least disturbed on a shared machine."""
    jax.block_until_ready(run(*args))  # compile
    wall = cpu = float("inf")
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(run(*args))
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu


def ours(name: str, n: int, steps: int) -> float:
    base = make(name, **GAMES[name])
    env = core.AutoReset(base)

    def body(carry, key):
        state, total = carry
        k1, k2 = jax.random.split(key)
        action = jax.vmap(base.random_action)(jax.random.split(k1, n), state)
        obs, state, reward, *_ = jax.vmap(env.step)(jax.random.split(k2, n), state, action)
        return (state, total + reward.sum() + obs.length.sum()), None

    @jax.jit
    def run(state, key):
        return jax.lax.scan(body, (state, jnp.float32(0)), jax.random.split(key, steps))[0]

    _, state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), n))
    return tuple(n * steps / t for t in _time(run, state, jax.random.PRNGKey(1)))


def pgx_tic_tac_toe(n: int, steps: int) -> float:
    import pgx

    env = pgx.make("tic_tac_toe")

    def body(carry, key):
        s, total = carry
        k1, k2 = jax.random.split(key)
        a = jax.vmap(sample_uniform)(jax.random.split(k1, n), s.legal_action_mask)  # the sampler our envs use
        s = jax.vmap(env.step)(s, a)
        fresh = jax.vmap(env.init)(jax.random.split(k2, n))
        done = s.terminated | s.truncated
        s = jax.tree.map(lambda x, y: jnp.where(done.reshape((-1,) + (1,) * (x.ndim - 1)), y, x), s, fresh)
        return (s, total + s.rewards.sum()), None

    @jax.jit
    def run(s, key):
        return jax.lax.scan(body, (s, jnp.float32(0)), jax.random.split(key, steps))[0]

    s = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.PRNGKey(0), n))
    return tuple(n * steps / t for t in _time(run, s, jax.random.PRNGKey(1)))


def textarena_tic_tac_toe(seconds: float = 3.0) -> float:
    import textarena as ta

    env = ta.make("TicTacToe-v0")
    rng = random.Random(0)
    n_steps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        env.reset(num_players=2, seed=rng.randrange(1 << 30))
        done = False
        while not done:
            _, obs = env.get_observation()
            moves = re.findall(r"'\[(\d)\]'", obs.split("Available Moves:")[-1] if isinstance(obs, str) else str(obs))
            done, _ = env.step(f"[{rng.choice(moves)}]")
            n_steps += 1
    return n_steps / (time.perf_counter() - t0), n_steps / (time.process_time() - c0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--games", default=",".join(GAMES))
    args = p.parse_args()
    print(f"device: {jax.devices()[0].platform} ({os.cpu_count()} cores), envs: {args.envs}, steps per timed run: {args.steps}")
    rows = []
    ta_rate = textarena_tic_tac_toe()
    pgx_rate = pgx_tic_tac_toe(args.envs, args.steps)
    rows.append(("textarena TicTacToe (peer, 1 env, Python)", ta_rate))
    rows.append(("pgx tic_tac_toe (peer, no text)", pgx_rate))
    for name in args.games.split(","):
        rows.append((name, ours(name, args.envs, args.steps)))
    print("\nsteps/s by wall time and per process-CPU second (steadier when the machine is shared)")
    print("| env | steps/s (wall) | x textarena | pgx / env | steps per CPU-s | x textarena | pgx / env |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (wall, cpu) in rows:
        print(
            f"| {name} | {wall:,.0f} | {wall / ta_rate[0]:,.0f} | {pgx_rate[0] / wall:.2f} "
            f"| {cpu:,.0f} | {cpu / ta_rate[1]:,.0f} | {pgx_rate[1] / cpu:.2f} |"
        )


if __name__ == "__main__":
    main()
