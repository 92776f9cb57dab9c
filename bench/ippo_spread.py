"""IPPO on simple_spread (N=3): training throughput and team-return curve, ours vs JaxMARL.

Both sides run JaxMARL's published IPPO-FF hyper-parameters (lr 2.5e-4 annealed,
16 envs x 128 steps, 4 epochs x 4 minibatches, clip 0.2, ent 0.01, gamma 0.99,
lambda 0.95, 64-unit tanh MLPs) in the same process, each as chunks of
compiled updates timed after compilation.

JaxMARL side: `jaxmarl.make("MPE_simple_spread_v3")` + its `MPELogWrapper` and
a PureJaxRL-style IPPO-FF loop (shared actor-critic, flat shuffle of the
[T * N * A] batch), as in JaxMARL's baselines/IPPO/ippo_ff_mpe.py.

Team return = sum over agents of an episode's return. JaxMARL's episodes
last 26 steps (its done flag fires one step after max_steps=25) where mpe2's
and ours last 25, so JaxMARL's team return is also reported scaled by 25/26
(same per-step reward, 25-step episode): the "like with like" column.

    python bench/ippo_spread.py                       # 2M env steps each (~3 min on 2 cores)
    python bench/ippo_spread.py --total_timesteps=10000000 --config=configs/spread_mlp.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import distrax  # noqa: E402
import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

HP = dict(lr=2.5e-4, num_envs=16, num_steps=128, epochs=4, minibatches=4, clip=0.2, ent=0.01, vf=0.5,
          gamma=0.99, lam=0.95, max_grad_norm=0.5)


# ---- ours --------------------------------------------------------------------------------
def run_ours(total_timesteps: int, chunk: int, config_path: str | None):
    from jaxmarl_llm.parallel import mesh as mesh_lib
    from jaxmarl_llm.train import mlp_ppo
    from jaxmarl_llm.run.cli import load_config_file

    if config_path:
        config = load_config_file(config_path)
    else:
        from configs import spread_mlp

        config = spread_mlp.get_config()
        config.lr, config.num_envs, config.num_steps = HP["lr"], HP["num_envs"], HP["num_steps"]
        config.update_epochs, config.num_minibatches = HP["epochs"], HP["minibatches"]
    config.total_timesteps = total_timesteps
    config.mesh.num_devices = 1
    trainer = mlp_ppo.make_train(config)
    mesh = mesh_lib.make_mesh(1)
    state = mesh_lib.put(jax.jit(trainer.init)(jax.random.PRNGKey(0), trainer.hparams), mesh, trainer.state_specs)
    steps_per_update = config.num_envs * config.num_steps
    return _timed_loop(state, trainer.num_updates, chunk, steps_per_update,
                       lambda k: _bind(mesh_lib.sharded_chunk(trainer, mesh, k), trainer.hparams),
                       lambda m: m["team_return"])


def _bind(fn, hp):
    """One compiled chunk per size: build it once, call it with the hyper-parameters bound."""
    return lambda state: fn(state, hp)


# ---- JaxMARL IPPO-FF ------------------------------------------------------------------------
class _ActorCritic(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        init = nn.initializers.orthogonal
        a = nn.tanh(nn.Dense(64, kernel_init=init(np.sqrt(2)))(x))
        a = nn.tanh(nn.Dense(64, kernel_init=init(np.sqrt(2)))(a))
        logits = nn.Dense(self.action_dim, kernel_init=init(0.01))(a)
        c = nn.tanh(nn.Dense(64, kernel_init=init(np.sqrt(2)))(x))
        c = nn.tanh(nn.Dense(64, kernel_init=init(np.sqrt(2)))(c))
        v = nn.Dense(1, kernel_init=init(1.0))(c)
        return distrax.Categorical(logits=logits), v[..., 0]


def make_jaxmarl(total_timesteps: int):
    import jaxmarl
    from jaxmarl.wrappers.baselines import MPELogWrapper

    env = MPELogWrapper(jaxmarl.make("MPE_simple_spread_v3"))
    agents, n_agents = env.agents, env.num_agents
    n_envs, n_steps = HP["num_envs"], HP["num_steps"]
    n_actors = n_agents * n_envs
    num_updates = total_timesteps // (n_envs * n_steps)
    net = _ActorCritic(env.action_space(agents[0]).n)
    sched = lambda c: HP["lr"] * (1.0 - (c // (HP["epochs"] * HP["minibatches"])) / num_updates)  # noqa: E731
    tx = optax.chain(optax.clip_by_global_norm(HP["max_grad_norm"]), optax.adam(sched, eps=1e-5))

    def batchify(x):  # dict of [N, ...] -> [A * N, ...]
        return jnp.stack([x[a] for a in agents]).reshape((n_actors, -1))

    def init(key):
        k1, k2, k3 = jax.random.split(key, 3)
        params = net.init(k1, jnp.zeros(env.observation_space(agents[0]).shape))
        obs, env_state = jax.vmap(env.reset)(jax.random.split(k2, n_envs))
        return (params, tx.init(params), env_state, obs, k3)

    def update(runner, _):
        params, opt_state, env_state, obs, key = runner

        def env_step(carry, _):
            env_state, obs, key = carry
            key, k_act, k_env = jax.random.split(key, 3)
            obs_b = batchify(obs)
            pi, value = net.apply(params, obs_b)
            action = pi.sample(seed=k_act)
            log_prob = pi.log_prob(action)
            acts = {a: action.reshape(n_agents, n_envs)[i] for i, a in enumerate(agents)}
            obs2, env_state, reward, done, info = jax.vmap(env.step)(jax.random.split(k_env, n_envs), env_state, acts)
            info = jax.tree.map(lambda x: x.reshape(n_actors), info)
            t = (batchify(done).squeeze(), action, value, batchify(reward).squeeze(), log_prob, obs_b, info)
            return (env_state, obs2, key), t

        (env_state, obs, key), traj = jax.lax.scan(env_step, (env_state, obs, key), None, n_steps)
        done, action, value, reward, log_prob, obs_b, info = traj
        _, last_val = net.apply(params, batchify(obs))

        def gae_step(carry, x):
            g, next_v = carry
            d, v, r = x
            delta = r + HP["gamma"] * next_v * (1 - d) - v
            g = delta + HP["gamma"] * HP["lam"] * (1 - d) * g
            return (g, v), g

        _, adv = jax.lax.scan(gae_step, (jnp.zeros_like(last_val), last_val), (done, value, reward), reverse=True)
        targets = adv + value

        def loss_fn(p, mb):
            o, a, lp_old, v_old, g, tgt = mb
            pi, v = net.apply(p, o)
            lp = pi.log_prob(a)
            vc = v_old + (v - v_old).clip(-HP["clip"], HP["clip"])
            vloss = 0.5 * jnp.maximum(jnp.square(v - tgt), jnp.square(vc - tgt)).mean()
            ratio = jnp.exp(lp - lp_old)
            g = (g - g.mean()) / (g.std() + 1e-8)
            aloss = -jnp.minimum(ratio * g, jnp.clip(ratio, 1 - HP["clip"], 1 + HP["clip"]) * g).mean()
            return aloss + HP["vf"] * vloss - HP["ent"] * pi.entropy().mean()

        def epoch(carry, _):
            p, s, key = carry
            key, k = jax.random.split(key)
            batch = (obs_b, action, log_prob, value, adv, targets)
            size = n_steps * n_actors
            batch = jax.tree.map(lambda x: x.reshape((size,) + x.shape[2:]), batch)
            perm = jax.random.permutation(k, size)
            batch = jax.tree.map(lambda x: jnp.take(x, perm, 0).reshape((HP["minibatches"], -1) + x.shape[1:]), batch)

            def mb_step(c, mb):
                p, s = c
                grads = jax.grad(loss_fn)(p, mb)
                upd, s = tx.update(grads, s, p)
                return (optax.apply_updates(p, upd), s), None

            (p, s), _ = jax.lax.scan(mb_step, (p, s), batch)
            return (p, s, key), None

        (params, opt_state, key), _ = jax.lax.scan(epoch, (params, opt_state, key), None, HP["epochs"])
        team = info["returned_episode_returns"].mean()  # mean per-agent return x num_agents, as JaxMARL logs it
        return (params, opt_state, env_state, obs, key), {"team_return": team}

    return init, update, num_updates


def run_jaxmarl(total_timesteps: int, chunk: int):
    init, update, num_updates = make_jaxmarl(total_timesteps)
    state = jax.jit(init)(jax.random.PRNGKey(0))
    make = lambda k: jax.jit(lambda s: jax.lax.scan(update, s, None, length=k))  # noqa: E731
    return _timed_loop(state, num_updates, chunk, HP["num_envs"] * HP["num_steps"], make, lambda m: m["team_return"])


# ---- shared timing loop -----------------------------------------------------------------
def _timed_loop(state, num_updates, chunk, steps_per_update, make_fn, headline):
    """Compile each chunk size once (untimed), then time the real run chunk by chunk."""
    sizes = {min(chunk, num_updates - u) for u in range(0, num_updates, chunk)}
    fns = {k: make_fn(k) for k in sizes}
    t0 = time.perf_counter()
    for k in sizes:  # compile (and run once) on a copy of the initial state, outside the timed region
        jax.block_until_ready(fns[k](jax.tree.map(jnp.copy, state)))
    compile_s = time.perf_counter() - t0
    curve, elapsed, u = [], 0.0, 0
    while u < num_updates:
        k = min(chunk, num_updates - u)
        t = time.perf_counter()
        state, metrics = fns[k](state)
        values = np.asarray(jax.device_get(headline(metrics)))
        elapsed += time.perf_counter() - t
        u += k
        for i, v in enumerate(values):
            curve.append(((u - k + i + 1) * steps_per_update, elapsed, float(v)))
    return {"curve": np.asarray(curve), "seconds": elapsed, "compile_s": compile_s,
            "sps": num_updates * steps_per_update / elapsed}


def _smoothed(curve: np.ndarray, window: int = 20) -> np.ndarray:
    y = curve[:, 2]
    return np.convolve(y, np.ones(window) / window, mode="valid") if len(y) >= window else y


def time_to(curve: np.ndarray, threshold: float, window: int = 20) -> str:
    """Wall seconds until the `window`-update moving average of team return first reaches `threshold`."""
    smooth = _smoothed(curve, window)
    hit = np.nonzero(smooth >= threshold)[0]
    if len(hit) == 0:
        return "not reached"
    row = curve[hit[0] + min(window, len(curve)) - 1]
    return f"{row[1]:.1f} s ({row[0] / 1e6:.2f}M steps)"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--total_timesteps", type=int, default=2_000_000)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--config", default=None, help="our side: a configs/*.py instead of the JaxMARL hyper-parameters")
    args = parser.parse_args()

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} cpus; {args.total_timesteps:,} env steps each")
    ours = run_ours(args.total_timesteps, args.chunk, args.config)
    theirs = run_jaxmarl(args.total_timesteps, args.chunk)
    scale = 25.0 / 26.0
    o_final = _smoothed(ours["curve"])[-1]
    t_final = _smoothed(theirs["curve"])[-1]
    print()
    print("| side | env steps/s | train s | compile s | final team return (20-update mean) | to -65 | to -61 |")
    print("|---|---|---|---|---|---|---|")
    print(f"| jaxmarl_llm | {ours['sps']:,.0f} | {ours['seconds']:.1f} | {ours['compile_s']:.1f} | {o_final:.2f} | "
          f"{time_to(ours['curve'], -65)} | {time_to(ours['curve'], -61)} |")
    scaled = theirs["curve"].copy()
    scaled[:, 2] *= scale
    print(f"| JaxMARL IPPO-FF | {theirs['sps']:,.0f} | {theirs['seconds']:.1f} | {theirs['compile_s']:.1f} | "
          f"{t_final:.2f} raw, {t_final * scale:.2f} x25/26 | {time_to(scaled, -65)} | {time_to(scaled, -61)} |")
    print(f"\nthroughput ratio ours / JaxMARL: {ours['sps'] / theirs['sps']:.2f}x")


if __name__ == "__main__":
    main()
