"""How close the policy's model can come to a Nash equilibrium when it is shown one: the floor under what self-play
can reach with that model, adapters and observations.

    .venv/bin/python tools/poker_capacity.py --config=configs/leduc_poker.py:compact
    .venv/bin/python tools/poker_capacity.py --config=configs/kuhn_poker.py --steps=300

Builds the config's trainer as experiments/train.py does (the same random tiny model, LoRA adapters and views of
the information sets), takes the game's equilibrium (envs/text/poker.py `equilibrium`: CFR+ for Leduc) and fits
the adapters to it directly: cross-entropy between the equilibrium's action distribution and the LM's
(`evaluation/exploitability.policy_table`, one batched forward over every information set) at every set, all
sets every step, Adam at `--lr`. Prints the fitted policy's exact exploitability as it goes. Self-play's
figures (docs/results.md) sit above this floor; when the floor itself is above a target, the model, not the
RL, is the limit. Supervision, not RL: a diagnostic of the function class, never a warm start.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from jaxmarl_llm.envs.text import poker  # noqa: E402
from jaxmarl_llm.evaluation import exploitability as lm_ex  # noqa: E402
from jaxmarl_llm.policies.lm_policy import model_weights  # noqa: E402
from jaxmarl_llm.run.cli import fail, load_config_file  # noqa: E402
from jaxmarl_llm.train import lm_rl  # noqa: E402


def fit(trainer, target: np.ndarray, steps: int, lr: float, every: int, key: jax.Array):
    """Fit the trainer's (shared) adapters to the tabular policy `target` [I, A]; yields (step, cross-entropy,
    exploitability) of the adapters after that step, at 0, every `every` steps and at the last."""
    env, policy, base = trainer.env, trainer.policy, trainer.base
    state = trainer.init(key, trainer.hparams)
    lora0 = state.trainable["lora"]  # [slots, ...]: one shared adapter
    weights = model_weights(state.trainable, base)
    legal = jnp.asarray(env.tree.infoset_legal[:-1])  # [I, A]
    goal = jnp.asarray(target, jnp.float32)  # [I, A]

    def table_of(lora):
        one = jax.tree.map(lambda x: x[0], lora)
        return lm_ex.policy_table(env, policy, weights, (one, one))  # [I, A]

    def cross_entropy(table):
        return -jnp.where(legal, goal * jnp.log(jnp.maximum(table, 1e-12)), 0.0).sum(-1).mean()  # over [I]

    opt = optax.adam(lr)

    @jax.jit
    def step(lora, opt_state):
        grads = jax.grad(lambda x: cross_entropy(table_of(x)))(lora)
        updates, opt_state = opt.update(grads, opt_state, lora)
        return optax.apply_updates(lora, updates), opt_state

    @jax.jit
    def measure(lora):  # (cross-entropy, exploitability) of the adapters as they are, from one table
        table = table_of(lora)
        return cross_entropy(table), lm_ex.table_metrics(env.tree, table)["exploitability"]

    lora, opt_state = lora0, opt.init(lora0)
    yield 0, *map(float, measure(lora))
    for t in range(1, steps + 1):
        lora, opt_state = step(lora, opt_state)
        if t % every == 0 or t == steps:
            yield t, *map(float, measure(lora))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/leduc_poker.py:compact", help="a poker config")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--lr", type=float, default=4e-3, help="Adam's (the Leduc config's RL lr)")
    parser.add_argument("--every", type=int, default=100, help="print the exploitability every this many steps")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.every < 1 or not args.lr > 0:
        fail("--steps and --every must be >= 1 and --lr > 0")
    config = load_config_file(args.config)
    config.mesh.num_devices = 1
    config.in_graph_eval.every = 0
    config.in_graph_eval.average = "none"
    config.total_episodes = config.num_envs
    trainer = lm_rl.make_train(config)
    env = trainer.env
    if not lm_ex.has_infosets(env):
        fail(f"--config: {config.env_name} has no information sets to fit (a poker game has: kuhn, leduc)")
    target = poker.equilibrium(env.game)
    floor = float(lm_ex.table_metrics(env.tree, jnp.asarray(target))["exploitability"])
    print(f"{config.env_name}: {env.tree.num_infosets} information sets; the equilibrium fitted to has "
          f"exploitability {floor:.4f}; lr {args.lr}, seed {args.seed}")
    start = time.perf_counter()
    for t, loss, value in fit(trainer, target, args.steps, args.lr, args.every, jax.random.PRNGKey(args.seed)):
        print(f"step {t:6d}  cross-entropy {loss:.4f}  exploitability {value:.4f}  "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
