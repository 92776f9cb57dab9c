"""Tic-tac-toe through the host bridge (envs/host: the game in Python, one `io_callback` per step for the batch)
against the same game jitted (envs/text/tic_tac_toe.py): env steps per second, and what the bridge costs a whole
LM update (its time and the share of it spent on the host).

    python bench/host_bridge.py [--envs 256] [--repeats 5] [--updates 5]

Both sides run in this process, the same moves (a legal game per env: a random order of the cells) and the same
tiny free-text trainer; the ratio is jitted / bridged.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.registry import make
from jaxmarl_llm.envs.text.buffers import TextAction


def _best(fn, *args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))  # compile
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def env_steps(env, n: int, repeats: int) -> float:
    """Seconds for n games of 9 moves (a random order of the cells each; games end at a win or a draw)."""
    moves = make("text/tic_tac_toe").moves  # `Move: N`, the same tokens for both games
    table, lens = np.asarray(moves.ids), np.asarray(moves.lens)
    cells = np.stack([np.random.default_rng(i).permutation(9) for i in range(n)], 1)  # [9, n]
    tokens = jnp.asarray(np.repeat(table[cells][:, :, None], 2, axis=2))  # [9, n, 2, M]
    length = jnp.asarray(np.repeat(lens[cells][:, :, None], 2, axis=2))
    keys = jax.random.split(jax.random.PRNGKey(0), n)

    @jax.jit
    def play(tokens, length):
        obs, state = jax.vmap(env.reset)(keys)

        def move(state, action):
            obs, state, reward, *_ = jax.vmap(env.step)(keys, state, TextAction(*action))
            return state, reward.sum() + obs.length.sum()

        return jax.lax.scan(move, state, (tokens, length))[1].sum()

    return _best(play, tokens, length, repeats=repeats)


def update_cost(env_name: str, updates: int) -> tuple[float, float]:
    """(seconds per update, share of it in host calls) of a tiny self-play PPO trainer on legal moves (the
    candidates), 64 games per update."""
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import lm_rl_defaults, validate_lm_rl
    from jaxmarl_llm.tokenizers import GAMES_BPE

    c = lm_rl_defaults()
    c.env_name, c.tokenizer = env_name, GAMES_BPE
    c.env_kwargs = {"capacity": 384, "max_action_tokens": 6}
    c.model.update(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                   max_position_embeddings=400)
    c.policy.actions, c.share_policy = "constrained", True  # legal moves: every game is played to its end
    c.algo, c.group_size, c.num_envs, c.num_turns = "ppo", 1, 64, 9
    c.mesh.num_devices = 1
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c)
    update = jax.jit(trainer.update)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    state, metrics = update(state, trainer.hparams, trainer.base)  # compile
    jax.block_until_ready(metrics)
    host = getattr(trainer.env, "host_seconds", 0.0)
    start = time.perf_counter()
    for _ in range(updates):
        state, metrics = update(state, trainer.hparams, trainer.base)
    jax.block_until_ready(metrics)
    wall = time.perf_counter() - start
    return wall / updates, (getattr(trainer.env, "host_seconds", 0.0) - host) / wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--updates", type=int, default=5)
    args = p.parse_args()
    cpu = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")] \
        if os.path.exists("/proc/cpuinfo") else []
    print(f"machine: {cpu[0] if cpu else platform.processor()}, {os.cpu_count()} cores, "
          f"{jax.devices()[0].platform}; {args.envs} games of 9 moves")
    jitted, host = make("text/tic_tac_toe"), make("host/tic_tac_toe")
    t_jit, t_host = env_steps(jitted, args.envs, args.repeats), env_steps(host, args.envs, args.repeats)
    steps = 9 * args.envs
    print(f"env steps/s: jitted {steps / t_jit:,.0f}, bridged {steps / t_host:,.0f}: "
          f"the jitted game is {t_host / t_jit:.1f}x faster")
    (u_jit, _), (u_host, share) = update_cost("text/tic_tac_toe", args.updates), update_cost("host/tic_tac_toe",
                                                                                            args.updates)
    print(f"LM self-play update (64 games to their end, tiny model): jitted {u_jit:.3f} s, bridged {u_host:.3f} s "
          f"({u_host / u_jit:.2f}x); {share:.1%} of the bridged update's time is spent on the host")


if __name__ == "__main__":
    main()
