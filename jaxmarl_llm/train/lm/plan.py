"""What an LM run fixes before it compiles (`Plan`), its numeric hyper-parameters, and one rollout's record.

Every function of the LM trainer takes the `Plan` as an explicit argument instead of closing over
~25 locals: a reader sees what a function depends on, and a fork changes a field, not a closure.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.algos.lm_objective import ALGORITHMS


class LMHParams(NamedTuple):
    """The numbers a sweep may vmap over (arrays, traced)."""

    lr: jax.Array
    clip_eps: jax.Array
    ent_coef: jax.Array  # the entropy bonus at the first update
    ent_coef_end: jax.Array  # ... and at the last: it moves linearly in between (`at_step`); = ent_coef: constant
    entropy_max: jax.Array  # the bonus is off in a minibatch whose mean entropy is at or above this (inf: never)
    vf_coef: jax.Array
    kl_coef: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    max_grad_norm: jax.Array
    critic_lr: jax.Array  # the critic's (value head's) own lr when `Plan.critic_optimizer`; config.critic.lr
    rae_decay: jax.Array  # RAE: decay of the per-role running mean returns
    magnet_rate: jax.Array  # MMD: after each update magnet += magnet_rate x (learner - magnet), adapter weights
    max_step_kl: jax.Array  # an update's policy step is scaled back to this KL on its batch (inf: never)

    @classmethod
    def from_config(cls, config) -> "LMHParams":
        values = {name: config.critic.lr if name == "critic_lr" else config.get(name) for name in cls._fields}
        if values["ent_coef_end"] is None:
            values["ent_coef_end"] = config.ent_coef
        for name in ("entropy_max", "max_step_kl"):  # None: no cap
            if values[name] is None:
                values[name] = float("inf")
        return cls(**{name: jnp.asarray(v, jnp.float32) for name, v in values.items()})

    def at_step(self, step: jax.Array, num_updates: int) -> "LMHParams":
        """The numbers of update `step` (0-based): the entropy bonus on its linear way to ent_coef_end."""
        frac = jnp.minimum(step.astype(jnp.float32) / max(num_updates - 1, 1), 1.0)
        return self._replace(ent_coef=self.ent_coef + frac * (self.ent_coef_end - self.ent_coef))


@dataclasses.dataclass(frozen=True)
class Plan:
    """Static settings of one LM run (Python values: they shape the compiled program)."""

    algo: str  # a key of algos.lm_objective.ALGORITHMS
    num_agents: int  # A: seats of the game
    num_envs: int  # N: episodes per update (all devices)
    group_size: int  # envs sharing a reset seed (GRPO / RLOO groups)
    num_turns: int  # T: turns scanned per episode
    update_epochs: int
    num_minibatches: int
    num_microbatches: int
    max_action_tokens: int  # M
    pad_id: int
    actions: str  # "free" | "constrained" | "scored" (the policy's; policies/candidates.py)
    # seats
    lm_agents: tuple[int, ...]  # seats an LM plays (scripted seats never run the model)
    loss_agents: tuple[int, ...]  # seats scored in the loss; with a pool (0,): each env's learner seat
    learns: tuple[bool, ...]  # [A] seats that learn (with a pool the learner's seat is drawn per group)
    slot_of_agent: tuple[int, ...]  # [A] adapter slot each seat acts with
    num_slots: int  # S: adapter slots in the trainable tree
    agent_scale: tuple[float, ...]  # [A] 0 for frozen seats (adapters off: the bare base), else 1
    scripted: tuple[tuple[int, str], ...]  # (seat, "random" | "minimax"): the game's built-in player
    pool_size: int  # P opponent snapshots (0: no self-play pool)
    refresh_every: int
    league: tuple[tuple[str, float], ...]  # pool groups facing a built-in player instead of a snapshot: (kind, share)
    seat_weights: tuple[float, ...]  # [A] how often the learner takes each seat (with a pool); () = uniform
    # rollout and scoring
    incremental: bool  # KV cache kept across turns; an episode scored in one forward
    movers: int  # LM rows computed per env and turn (1 in turn-based games)
    chunk: int  # tokens prefilled per step of the incremental rollout
    widths: tuple[int, ...]  # loss-forward widths (incremental); the narrowest that fits is run
    min_score_width: int
    # re-read: the loss forward reads the fewest of R x 1/row_buckets, 2/row_buckets, ..., R of its R (turn, env)
    # rows that holds every row with something to learn (ended games are left out); 1: every row
    row_buckets: int
    # objective
    central: bool  # MAPPO: one critic over every seat's transcript summary (or the env's world state)
    world_critic: int  # > 0: the central critic reads env.world_state, a vector of this size
    critic_hidden: int
    clip_value: bool
    use_kl: bool
    kl_estimator: str
    grpo_normalize_std: bool
    loss_aggregation: str  # GRPO / RAE token-loss aggregation (algos/grpo.py)
    # optimizer: lr falls linearly to 0 over the run's updates (PPO's schedule) when anneal_lr
    anneal_lr: bool = False
    num_updates: int = 1
    critic_optimizer: bool = False  # the critic / value head steps with its own Adam and lr (hp.critic_lr > 0)
    value_norm: bool = False  # the critic learns normalised returns (algos/value_norm.py; config.critic.value_norm)
    train_base: bool = False  # the base's weights train too (trainable["base"]); config.train_base
    lora_lr_ratio: float = 1.0  # LoRA+: B's lr over A's (config.lora.lr_ratio; static: 1 keeps plain Adam's state)
    # in-graph evaluation: every `eval_every` updates (and after the first) greedy games against the game's
    # built-in players (0 = off); evaluation/play.py `versus_builtins`
    eval_every: int = 0
    eval_episodes: int = 0
    eval_opponents: tuple[str, ...] = ()
    eval_seed: int = 0
    # poker: also the average policy of the evaluated iterates, each weighted as AVERAGE_WEIGHTS[eval_average]
    # (evaluation/exploitability.py); "none" = off
    eval_average: str = "none"
    eval_average_from: int = 0  # ... counting only the iterates evaluated at this update (metrics.csv numbers) or later
    # ... an iterate joins the average every `eval_average_every` updates (its policy table only: one batched
    # forward, no games); 0 = at each evaluation
    eval_average_every: int = 0
    # self-play with a pool: also every pair among the learner, its snapshots and `eval_opponents`, this many
    # games a pair, sampled at `eval_cross_play_temperature` (evaluation/cross_play.py `league`); 0 = off
    # tic-tac-toe with position-only observations: also the exact rates (evaluation/tic_tac_toe_exact.py `in_graph`)
    eval_exact: bool = False
    eval_cross_play: int = 0
    eval_cross_play_temperature: float = 1.0
    # transcripts: this many of each update's episodes are returned beside its metrics (train/lm/episode_sample.py)
    transcript_episodes: int = 0
    # the entropy bonus counts only generated tokens with these ids, each the entropy of the choice among them
    # (`config.entropy_tokens`, e.g. the digits that name a move: the choice keeps exploring, the format is left
    # alone); () = every generated token, the whole vocabulary's entropy
    entropy_tokens: tuple[int, ...] = ()
    # each update's policy step held to `hp.max_step_kl` on its batch (train/lm/step_bound.py): one more forward
    bound_step: bool = False

    @property
    def num_lm(self) -> int:
        return len(self.lm_agents)

    @property
    def token_credit(self) -> bool:  # the algorithm reads a value per generated token (PPO's `credit="token"`)
        return ALGORITHMS[self.algo].token_values

    @property
    def seat_adapters(self) -> bool:  # a pool with an adapter per seat: the loss seat's adapter differs per env
        return self.pool_size > 0 and self.num_slots > 1

    def one_slot(self, agents: tuple[int, ...]) -> bool:  # these seats act with the same adapters
        return len({self.slot_of_agent[a] for a in agents}) == 1

    def slots(self) -> jax.Array:  # [A] int
        return jnp.asarray(np.asarray(self.slot_of_agent))

    def scale(self) -> jax.Array:  # [A] float32
        return jnp.asarray(np.asarray(self.agent_scale, np.float64), jnp.float32)


class Turns(NamedTuple):
    """One rollout, [T, N, A, ...] (after `loss_seats`: A -> the loss seats A_l)."""

    prompt: jax.Array  # [T, N, A, L] int32 (width 0 in incremental mode: the final transcript holds every prompt)
    prompt_len: jax.Array  # [T, N, A]
    action: jax.Array  # [T, N, A, M]
    action_mask: jax.Array  # [T, N, A, M] bool: generated tokens
    logprob: jax.Array  # [T, N, A, M]
    value: jax.Array  # [T, N, A] (MAPPO: the centralized critic's; token credit: [T, N, A, M])
    critic_obs: jax.Array  # [T, N, A, F] MAPPO critic input (width 0 with per-seat value heads)
    valid: jax.Array  # [T, N, A, K] bool: the candidates allowed at this turn (width 0 with free actions)
    reward: jax.Array  # [T, N, A]
    # [T, N, A, M]: the part of `reward` the env paid to each token of the reply (`info["token_reward"]`; zeros
    # when it pays the reply as a whole); token-level credit places it on its tokens
    token_reward: jax.Array
    alive: jax.Array  # [T, N] bool: the episode was running at this turn
    acted: jax.Array  # [T, N, A] bool: active and alive (the seat chose an action)
    acts: jax.Array  # [T, N, A] bool: active, alive and learning (its tokens enter the policy loss)
    slot: jax.Array  # [T, N, A] int32: the adapter row the seat acted with (seats.Seats.pick; 0 on ended turns)
    done: jax.Array  # [T, N] bool: the episode ended at this turn
    info: dict

    # the fields without a seat axis; every other field is [T, N, A, ...] and `seats.loss_seats` cuts it to the
    # loss seats (a new per-seat field needs nothing, a new per-episode field is listed here)
    PER_EPISODE = ("alive", "done", "info")

    def token_mask(self) -> jax.Array:  # [T, N, A, M] bool: tokens that enter the policy loss
        return self.action_mask & self.acts[..., None]
