"""A centralized critic for LM agents (MAPPO): each seat's value from every seat's transcript, or from the
env's world state (`critic.kind="world_state"`: an MLP over the same floats the MLP job's MAPPO critic reads).

    feats = transcript_features(base, cfg, tokens, positions)   # [B, T, D] frozen-base summaries
    x = critic_inputs(feats_by_seat)                             # [..., A, A*D + A]
    values = critic_apply(params, x)                             # [..., A]

A seat's state at a turn is summarised by the frozen base model's last hidden
state at the last token it has read (its prompt end). The critic is an MLP over
the concatenation of every seat's summary plus a one-hot of the seat it values,
so it sees text a seat's own value head cannot (the answerer's secret, the
partner's draft, the other particles' positions). As in MAPPO the critic is a
network of its own, not a head on the actor: the features do not depend on
the adapters, so they are computed once per update without gradients and
training the critic costs only the MLP. With a real checkpoint those features
are a pretrained LM's reading of the transcript; on a random tiny base they are
random (but deterministic) features of the recent text.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxmarl_llm.models.config import ModelConfig
from jaxmarl_llm.models.transformer import Params, forward


def critic_init(key: jax.Array, num_agents: int, feature_size: int, width: int, per_seat: bool = True) -> Params:
    """MLP [A*D + A] (per_seat=False: one world-state vector [D + A]) -> width -> 1; the output layer starts at
    zero (values start at 0, like the value head)."""
    in_dim = (num_agents if per_seat else 1) * feature_size + num_agents
    w1 = jax.random.normal(key, (in_dim, width), jnp.float32) / math.sqrt(in_dim)
    return {"w1": w1, "b1": jnp.zeros((width,), jnp.float32),
            "w2": jnp.zeros((width,), jnp.float32), "b2": jnp.zeros((), jnp.float32)}


def critic_apply(params: Params, x: jax.Array) -> jax.Array:
    """x [..., F] -> values [...] (float32)."""
    h = jnp.tanh(x.astype(jnp.float32) @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def critic_inputs(features: jax.Array) -> jax.Array:
    """features [..., A, D] (one summary per seat) -> [..., A, A*D + A]: every seat's summary, then who is valued."""
    *lead, a, d = features.shape
    return _with_seat(jnp.broadcast_to(features.reshape(*lead, 1, a * d), (*lead, a, a * d)))


def _with_seat(joint: jax.Array) -> jax.Array:
    """joint [..., A, F] (what every seat's value reads) -> [..., A, F + A]: then a one-hot of the valued seat."""
    *lead, a, _ = joint.shape
    onehot = jnp.broadcast_to(jnp.eye(a, dtype=joint.dtype), (*lead, a, a))
    return jnp.concatenate([joint, onehot], axis=-1)


def world_inputs(world: jax.Array, num_agents: int) -> jax.Array:
    """The env's world state [..., S] (floats: positions, velocities, ...) -> [..., A, S + A]: the state, then who
    is valued. Centralized training only: the critic reads what no seat's text says; the LM acts on its text."""
    lead = world.shape[:-1]
    return _with_seat(jnp.broadcast_to(world[..., None, :].astype(jnp.float32), (*lead, num_agents, world.shape[-1])))


def transcript_features(base: Params, cfg: ModelConfig, tokens: jax.Array, positions: jax.Array) -> jax.Array:
    """The base model's final hidden state at `positions` of each row: tokens [B, W], positions [B, T] -> [B, T, D].

    Adapters off and no gradient: the critic's input is a fixed function of the text."""
    width = tokens.shape[1]
    _, hidden, _ = forward(base, tokens, cfg, logit_index=jnp.zeros((tokens.shape[0],), jnp.int32))
    pos = jnp.clip(positions, 0, width - 1)
    feats = jnp.take_along_axis(hidden, pos[..., None], axis=1)
    return jax.lax.stop_gradient(feats.astype(jnp.float32))
