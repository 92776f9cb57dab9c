"""Env steps per second on simple_spread (N=3) with random discrete actions.

    python bench/mpe_throughput.py [--envs 1024] [--steps 128] [--seconds 30]

Ours and JaxMARL run the same way: `jit(scan(vmap(step)))` over `--envs`
parallel envs, `--steps` steps per call, repeated for about `--seconds`
(after one compile call); rows take turns and each reports its median call. Rows:
  ours step          SimpleSpread.step (no reset)
  ours auto-reset    AutoReset(SimpleSpread).step (what a trainer runs)
  jaxmarl step_env   MPE_simple_spread_v3.step_env (no reset)
  jaxmarl step       MPE_simple_spread_v3.step (auto-reset, what a trainer runs)
  mpe2               parallel_env in a Python loop over a few envs, resets included;
                     a Python loop gets no faster with more envs, so its env steps/s
                     is measured directly.
One env step = all agents acting once. Everything runs in one process.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np


def make_runner(step_fn, reset_fn, num_envs: int, num_steps: int, num_agents: int):
    """A compiled `jit(scan(vmap(step)))` call over `num_steps` steps; returns call() -> seconds."""

    @jax.jit
    def run(state, key):
        def body(state, key):
            k_act, k_step = jax.random.split(key)
            act = jax.random.randint(k_act, (num_envs, num_agents), 0, 5)
            state, reward = step_fn(jax.random.split(k_step, num_envs), state, act)
            return state, reward.sum()

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    carry = {"state": jax.jit(reset_fn)(jax.random.split(jax.random.PRNGKey(0), num_envs)), "i": 0}

    def call() -> float:
        start = time.perf_counter()
        state, out = run(carry["state"], jax.random.PRNGKey(carry["i"]))
        jax.block_until_ready(out)
        carry["state"], carry["i"] = state, carry["i"] + 1
        return time.perf_counter() - start

    call()  # compile
    return call


def ours(num_envs, num_steps, auto_reset: bool):
    from jaxmarl_llm.envs.core import AutoReset
    from jaxmarl_llm.envs.mpe.simple_spread import SimpleSpread

    env = SimpleSpread(num_agents=3)
    wrapped = AutoReset(env) if auto_reset else env

    def reset(keys):
        return jax.vmap(wrapped.reset)(keys)[1]

    def step(keys, state, act):
        res = jax.vmap(wrapped.step)(keys, state, act)
        return res.state, res.reward

    return make_runner(step, reset, num_envs, num_steps, env.num_agents)


def jaxmarl_env(num_envs, num_steps, auto_reset: bool):
    import jaxmarl

    env = jaxmarl.make("MPE_simple_spread_v3")
    agents = env.agents

    def reset(keys):
        return jax.vmap(env.reset)(keys)[1]

    def step(keys, state, act):
        actions = {a: act[:, i] for i, a in enumerate(agents)}
        fn = env.step if auto_reset else env.step_env
        _, state, reward, _, _ = jax.vmap(fn)(keys, state, actions)
        return state, jnp.stack([reward[a] for a in agents], axis=1)

    return make_runner(step, reset, num_envs, num_steps, env.num_agents)


def bench_mpe2(seconds: float, num_envs: int = 8) -> float:
    from mpe2 import simple_spread_v3

    envs = [simple_spread_v3.parallel_env(N=3) for _ in range(num_envs)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for e in envs:
            if not e.agents:
                e.reset()
            e.step({a: int(rng.integers(5)) for a in e.agents})
            steps += 1
    return steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=128, help="scan length per compiled call")
    parser.add_argument("--seconds", type=float, default=30.0, help="total timing budget of the JAX rows")
    args = parser.parse_args()

    runners = {
        "ours step": ours(args.envs, args.steps, auto_reset=False),
        "ours auto-reset": ours(args.envs, args.steps, auto_reset=True),
        "jaxmarl step_env": jaxmarl_env(args.envs, args.steps, auto_reset=False),
        "jaxmarl step": jaxmarl_env(args.envs, args.steps, auto_reset=True),
    }
    # Round-robin so every row sees the same machine load; the median call time
    # is robust to the stalls a shared machine causes.
    times = {name: [] for name in runners}
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds or min(len(t) for t in times.values()) < 5:
        for name, call in runners.items():
            times[name].append(call())
    rate = {name: args.envs * args.steps / float(np.median(t)) for name, t in times.items()}
    rate["mpe2 (python loop)"] = bench_mpe2(min(10.0, args.seconds / 3))
    calls = {name: len(t) for name, t in times.items()}

    print(f"\nsimple_spread N=3, {args.envs} envs x {args.steps} steps per call, {jax.devices()[0].platform}, "
          f"{os.cpu_count()} CPUs visible, load avg {os.getloadavg()[0]:.2f}")
    print(f"{'implementation':<22}{'env steps/s':>14}{'calls':>8}")
    for name, r in rate.items():
        print(f"{name:<22}{r:>14,.0f}{calls.get(name, ''):>8}")
    print(f"\nours/jaxmarl (no reset)    {rate['ours step'] / rate['jaxmarl step_env']:.2f}x")
    print(f"ours/jaxmarl (auto-reset)  {rate['ours auto-reset'] / rate['jaxmarl step']:.2f}x")
    print(f"ours/mpe2    (auto-reset)  {rate['ours auto-reset'] / rate['mpe2 (python loop)']:,.0f}x")


if __name__ == "__main__":
    main()
