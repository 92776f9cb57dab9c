"""The MPE particle world: mpe2's `World.step` as pure array functions.

Entities are agents first, then landmarks (mpe2's `world.entities` order).
Per-entity properties are static (numpy, baked in at trace time) and live in a
`WorldSpec`; the dynamic part is positions, velocities and the communication
state. Noise-free, exactly mpe2's formulas:

    force  = u * accel + sum_j contact(i, j)               (movable agents only)
    p_pos += p_vel * dt
    p_vel  = p_vel * (1 - damping) + force / mass * dt     (then clipped to max_speed)

with the soft contact of mpe2
    penetration = logaddexp(0, -(dist - (r_i + r_j)) / margin) * margin
    contact     = contact_force * (p_i - p_j) / dist * penetration.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

DIM_P = 2
MOVE_DIM = 2 * DIM_P + 1  # mpe2's movement actions: no-op, -x, +x, -y, +y


@dataclasses.dataclass(frozen=True, eq=False)
class WorldSpec:
    """Static per-entity structure of a world (Python/numpy, never traced)."""

    num_agents: int
    num_landmarks: int
    dim_c: int
    size: np.ndarray  # [E] radius
    movable: np.ndarray  # [E] bool
    collide: np.ndarray  # [E] bool
    mass: np.ndarray  # [E]
    max_speed: np.ndarray  # [E], inf where mpe2 has None
    accel: np.ndarray  # [A] action sensitivity (mpe2: 5.0 unless agent.accel is set)
    silent: np.ndarray  # [A] bool
    dt: float = 0.1
    damping: float = 0.25
    contact_force: float = 1e2
    contact_margin: float = 1e-3

    @property
    def num_entities(self) -> int:
        return self.num_agents + self.num_landmarks


def make_spec(
    num_agents: int,
    num_landmarks: int,
    dim_c: int,
    *,
    agent_size=0.05,
    landmark_size=0.05,
    agent_movable=True,
    agent_collide=True,
    landmark_collide=True,
    agent_max_speed=np.inf,
    accel=5.0,
    silent=False,
) -> WorldSpec:
    """A spec with mpe2's defaults. Agent arguments are a scalar or one value per agent;
    landmarks never move. `agent_max_speed=inf` is mpe2's `max_speed=None`."""

    def agents(value, dtype):
        return np.broadcast_to(np.asarray(value, dtype), (num_agents,)).copy()

    def landmarks(value, dtype):
        return np.broadcast_to(np.asarray(value, dtype), (num_landmarks,)).copy()

    return WorldSpec(
        num_agents=num_agents,
        num_landmarks=num_landmarks,
        dim_c=dim_c,
        size=np.concatenate([agents(agent_size, np.float64), landmarks(landmark_size, np.float64)]),
        movable=np.concatenate([agents(agent_movable, bool), landmarks(False, bool)]),
        collide=np.concatenate([agents(agent_collide, bool), landmarks(landmark_collide, bool)]),
        mass=np.ones(num_agents + num_landmarks),
        max_speed=np.concatenate([agents(agent_max_speed, np.float64), landmarks(np.inf, np.float64)]),
        accel=agents(accel, np.float64),
        silent=agents(silent, bool),
    )


# ---- actions ------------------------------------------------------------------------------


def action_sizes(spec: WorldSpec, continuous: bool) -> tuple[int, ...]:
    """Per-agent action sizes, as mpe2's SimpleEnv builds its action spaces."""
    sizes = []
    for i in range(spec.num_agents):
        if spec.movable[i]:
            n = MOVE_DIM
        else:
            n = 0 if continuous else 1
        if not spec.silent[i]:
            n = n + spec.dim_c if continuous else n * spec.dim_c
        sizes.append(int(n))
    return tuple(sizes)


def _movement(move: jax.Array) -> jax.Array:
    """Discrete move index [A] -> unit direction [A, 2]: 1 -x, 2 +x, 3 -y, 4 +y, else none."""
    ux = (move == 2).astype(jnp.float32) - (move == 1).astype(jnp.float32)
    uy = (move == 4).astype(jnp.float32) - (move == 3).astype(jnp.float32)
    return jnp.stack([ux, uy], axis=-1)


def decode_discrete(spec: WorldSpec, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """mpe2's discrete decoding: movable agents use `a % 5` to move and `a // 5` to speak.

    action: [A] int. Returns u [A, 2] (already scaled by accel) and c [A, dim_c] one-hot
    (zeros for silent agents, and for padded/illegal comm indices).
    """
    action = action.astype(jnp.int32)
    movable = jnp.asarray(spec.movable[: spec.num_agents])
    move = jnp.where(movable, action % MOVE_DIM, 0)
    say = jnp.where(movable, action // MOVE_DIM, action)
    u = _movement(move) * jnp.asarray(spec.accel * spec.movable[: spec.num_agents], jnp.float32)[:, None]
    if spec.silent.all():
        return u, jnp.zeros((spec.num_agents, spec.dim_c), jnp.float32)
    c = jax.nn.one_hot(say, spec.dim_c, dtype=jnp.float32) * jnp.asarray(~spec.silent, jnp.float32)[:, None]
    return u, c


def decode_continuous(spec: WorldSpec, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """mpe2's continuous decoding (after its clip to [0, 1]).

    action: [A, D]. Movable agents: u = (a2 - a1, a4 - a3) * accel and, unless silent,
    c = a[5 : 5 + dim_c]. Immobile speakers: c = a[0 : dim_c]. Entry a0 is unused.
    """
    a = jnp.clip(action.astype(jnp.float32), 0.0, 1.0)
    need = MOVE_DIM + spec.dim_c
    if a.shape[-1] < need:
        a = jnp.pad(a, ((0, 0), (0, need - a.shape[-1])))
    movable = spec.movable[: spec.num_agents]
    u = jnp.stack([a[:, 2] - a[:, 1], a[:, 4] - a[:, 3]], axis=-1)
    u = u * jnp.asarray(spec.accel * movable, jnp.float32)[:, None]
    if spec.silent.all():
        return u, jnp.zeros((spec.num_agents, spec.dim_c), jnp.float32)
    c_moving = a[:, MOVE_DIM:need]
    c_still = a[:, : spec.dim_c]
    if movable.all():
        c = c_moving
    elif not movable.any():
        c = c_still
    else:
        c = jnp.where(jnp.asarray(movable)[:, None], c_moving, c_still)
    return u, c * jnp.asarray(~spec.silent, jnp.float32)[:, None]


# ---- forces and integration ---------------------------------------------------------------


def _contiguous(idx: np.ndarray) -> bool:
    return len(idx) > 0 and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx)))


def off_diagonal(x: jax.Array) -> jax.Array:
    """[N, N, ...] -> [N, N-1, ...]: row i without entry i, order kept. Slices only (no gather)."""
    n = x.shape[0]
    rest = x.shape[2:]
    if n == 1:
        return x[:, :0]
    flat = x.reshape((n * n,) + rest)[1:]
    return flat.reshape((n - 1, n + 1) + rest)[:, :-1].reshape((n, n - 1) + rest)


def contact_forces(spec: WorldSpec, p_pos: jax.Array) -> jax.Array:
    """Sum of mpe2's soft contact forces on every entity. p_pos [E, 2] -> [E, 2].

    Only the colliding entities (a static subset) are paired, all at once as a
    [K, K] matrix; force[i, j] = -force[j, i], so the force on i is its row sum.
    """
    idx = np.flatnonzero(spec.collide)
    k = len(idx)
    if k < 2 or not spec.movable[idx].any():
        return jnp.zeros_like(p_pos)
    p = p_pos[idx[0] : idx[0] + k] if _contiguous(idx) else p_pos[idx]  # [K, 2]
    delta = p[:, None, :] - p[None, :, :]  # [K, K, 2]
    delta = off_diagonal(delta)  # [K, K-1, 2]
    dist = jnp.sqrt(jnp.sum(jnp.square(delta), axis=-1))  # [K, K-1]
    sizes = spec.size[idx]
    dist_min = jnp.asarray(off_diagonal(sizes[:, None] + sizes[None, :]), jnp.float32)  # [K, K-1]
    margin = spec.contact_margin
    penetration = jnp.logaddexp(0.0, -(dist - dist_min) / margin) * margin  # [K, K-1]
    force = spec.contact_force * delta / dist[..., None] * penetration[..., None]  # [K, K-1, 2]
    force = force.sum(axis=1) * jnp.asarray(spec.movable[idx], jnp.float32)[:, None]  # [K, 2]
    if _contiguous(idx):
        pad = ((idx[0], spec.num_entities - idx[0] - k), (0, 0))
        return jnp.pad(force, pad)
    return jnp.zeros_like(p_pos).at[idx].set(force)


def integrate(spec: WorldSpec, p_pos: jax.Array, p_vel: jax.Array, force: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Semi-implicit step of mpe2: position moves with the old velocity. [E, 2] each."""
    new_pos = p_pos + p_vel * spec.dt
    if not np.all(spec.mass == 1.0):
        force = force / jnp.asarray(spec.mass, jnp.float32)[:, None]
    vel = p_vel * (1.0 - spec.damping) + force * spec.dt
    if np.isfinite(spec.max_speed[spec.movable]).any():
        max_speed = jnp.asarray(spec.max_speed, jnp.float32)[:, None]  # [E, 1], inf = unlimited
        speed = jnp.sqrt(jnp.square(vel[:, :1]) + jnp.square(vel[:, 1:]))  # [E, 1]
        too_fast = speed > max_speed
        vel = jnp.where(too_fast, vel / jnp.where(too_fast, speed, 1.0) * jnp.where(too_fast, max_speed, 1.0), vel)
    movable = spec.movable[:, None]
    if movable.all():
        return new_pos, vel
    movable = jnp.asarray(movable)
    return jnp.where(movable, new_pos, p_pos), jnp.where(movable, vel, p_vel)


def world_step(spec: WorldSpec, p_pos: jax.Array, p_vel: jax.Array, u: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One noise-free `World.step`: action forces u [A, 2] + contacts, then integration."""
    force = jnp.pad(u, ((0, spec.num_landmarks), (0, 0))) + contact_forces(spec, p_pos)  # [E, 2]
    return integrate(spec, p_pos, p_vel, force)


def pairwise_dist(a: jax.Array, b: jax.Array) -> jax.Array:
    """Euclidean distances [N, 2] x [M, 2] -> [N, M]."""
    return jnp.sqrt(jnp.sum(jnp.square(a[:, None, :] - b[None, :, :]), axis=-1))
