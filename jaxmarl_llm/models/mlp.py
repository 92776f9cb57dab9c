"""MLP actor and critic nets (Flax NNX) for vector-observation envs such as MPE.

Built as NNX modules, used as pytrees: `graphdef, params = nnx.split(net)` at
the edge, `nnx.merge(graphdef, params)(x)` inside compiled code. Per-agent
parameters are the same pytree with a leading agent axis, made by `jax.vmap`
over the init key and applied with `jax.vmap` over that axis.
"""

from __future__ import annotations

from typing import Callable

import distrax
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

ACTIVATIONS: dict[str, Callable] = {"tanh": jnp.tanh, "relu": jax.nn.relu, "gelu": jax.nn.gelu}


def _dense(din: int, dout: int, scale: float, rngs: nnx.Rngs) -> nnx.Linear:
    """Orthogonal init with a chosen gain, zero bias: the PPO default since Engstrom et al. 2020."""
    return nnx.Linear(
        din, dout, kernel_init=nnx.initializers.orthogonal(scale), bias_init=nnx.initializers.zeros_init(), rngs=rngs
    )


class MLP(nnx.Module):
    """Hidden layers with one activation, then a linear head with its own init gain."""

    def __init__(self, din: int, hidden: tuple[int, ...], dout: int, activation: str, head_scale: float, rngs: nnx.Rngs):
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation {activation!r} unknown; choose one of {sorted(ACTIVATIONS)}")
        sizes = (din, *hidden)
        self.layers = nnx.List([_dense(a, b, np.sqrt(2.0), rngs) for a, b in zip(sizes[:-1], sizes[1:])])
        self.head = _dense(sizes[-1], dout, head_scale, rngs)
        self.activation = activation

    def __call__(self, x: jax.Array) -> jax.Array:  # [..., din] -> [..., dout]
        # One 2-D matmul per layer: XLA:CPU runs the backward of a dot with several leading dims
        # (a [T, N, A, O] minibatch) through transposed copies, ~1.5x slower per PPO step.
        lead = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1])
        act = ACTIVATIONS[self.activation]
        for layer in self.layers:
            x = act(layer(x))
        x = self.head(x)
        return x.reshape(*lead, x.shape[-1])


class DiscreteActor(nnx.Module):
    """Categorical policy; padded actions (action_mask False) get zero probability."""

    def __init__(self, obs_dim: int, num_actions: int, hidden: tuple[int, ...], activation: str, rngs: nnx.Rngs):
        self.net = MLP(obs_dim, hidden, num_actions, activation, 0.01, rngs)

    def __call__(self, obs: jax.Array, action_mask: jax.Array | None = None) -> distrax.Distribution:
        logits = self.net(obs)
        if action_mask is not None:
            logits = jnp.where(action_mask, logits, -1e9)
        return distrax.Categorical(logits=logits)


class GaussianActor(nnx.Module):
    """Diagonal Gaussian policy with a state-independent log-std."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...], activation: str, rngs: nnx.Rngs):
        self.net = MLP(obs_dim, hidden, action_dim, activation, 0.01, rngs)
        self.log_std = nnx.Param(jnp.full((action_dim,), -0.5))

    def __call__(self, obs: jax.Array, action_mask: jax.Array | None = None) -> distrax.Distribution:
        mean = self.net(obs)
        log_std = jnp.broadcast_to(self.log_std[...], mean.shape)
        if action_mask is not None:  # padded dims: a fixed unit Gaussian that the loss ignores
            mean = jnp.where(action_mask, mean, 0.0)
            log_std = jnp.where(action_mask, log_std, -20.0)
        return distrax.MultivariateNormalDiag(mean, jnp.exp(log_std))


class Critic(nnx.Module):
    """V(x) with `num_values` heads: 1 for an agent's own critic, A for a centralized one."""

    def __init__(self, in_dim: int, hidden: tuple[int, ...], activation: str, rngs: nnx.Rngs, num_values: int = 1):
        self.net = MLP(in_dim, hidden, num_values, activation, 1.0, rngs)
        self.num_values = num_values

    def __call__(self, x: jax.Array) -> jax.Array:
        v = self.net(x)
        return v[..., 0] if self.num_values == 1 else v


def init_stacked(make: Callable[[nnx.Rngs], nnx.Module], key: jax.Array, num: int | None):
    """(graphdef, params) of `make`; params get a leading axis of size `num` (one net each) unless None."""
    graphdef, _ = nnx.split(nnx.eval_shape(lambda: make(nnx.Rngs(0))))

    def one(k):
        return nnx.split(make(nnx.Rngs(k)))[1]

    params = one(key) if num is None else jax.vmap(one)(jax.random.split(key, num))
    return graphdef, params
