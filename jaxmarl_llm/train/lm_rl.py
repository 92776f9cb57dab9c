"""LM agents playing token games: one compiled rollout + advantage + update (PPO, GRPO, RLOO).

    trainer = make_train(config)                 # same interface as mlp_ppo.make_train
    state = trainer.init(key, trainer.hparams)
    state, metrics = trainer.update(state, trainer.hparams, trainer.base)

One update:
  1. Reset `num_envs` games. Envs come in groups of `group_size` that share a
     seed (same secret / problem), so GRPO and RLOO can compare samples.
  2. `lax.scan` over `num_turns` turns. In each turn every agent's policy
     prompts on its own transcript and generates up to M tokens with the
     KV-cache sampler (agents batched by `vmap` over their adapter slots, the
     base shared); the env appends actions and feedback. Recorded per
     (turn, env, agent): prompt, action tokens, sampling log-probs, value,
     reward, who was active, whether the episode was still running.
  3. Advantages: PPO = GAE over each seat's own turns with the turn's value
     (turn-level credit: every action token of a turn gets its turn's
     advantage), or with `credit="token"` GAE over the seat's generated tokens
     (the turn reward on its last token, a value per token from one no-grad
     forward); the critic is a value head on each seat's trunk (IPPO) or, with
     `critic.kind="mappo"`, one MLP over every seat's transcript summary
     (policies/central_critic.py); `clip_value` clips the value loss. GRPO =
     group-normalized episode returns (`grpo.group_advantages`, or Dr.GRPO);
     RLOO = leave-one-out baseline; both give every token the episode's advantage.
  4. `update_epochs` x `num_minibatches` gradient steps on the adapters (and
     value head) only; each minibatch takes a slice of every env's turns.

Episodes are run to the end inside each update (num_turns >= the game's turn
limit), so there is no bootstrapping across updates. Agent slots: with
`share_policy` all learning agents use adapter slot 0; otherwise agent a uses
slot a. Agents listed in `frozen_agents` (a judge, an answerer, a fixed
opponent) act through the bare base model (adapter scale 0) and never enter a
loss. The KL reference is the same base with adapters off: no weight copy.

Opponents inside the same compiled rollout (their rows never enter a loss):
  * `scripted_agents` ("1:minimax", or {1: "random"}): the game's built-in
    `opponent_action(key, state, kind)` plays that seat; no LM runs for it.
  * `opponent_pool.size = P` (self-play, shared policy, two seats): the runner
    state holds P frozen snapshots of the learner's adapter, stacked [P, ...].
    Each group of envs draws the learner's seat (the role is in the game's
    prompt) and one snapshot for the other seat, from global group ids. Every
    `opponent_pool.refresh_every` updates the learner's adapter overwrites the
    oldest snapshot (a `where` inside the compiled update). Only the learner's
    seat enters the loss.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import PartitionSpec as P

from jaxmarl_llm.algos import grpo, kl, rloo
from jaxmarl_llm.algos import token_credit as token_credit_lib
from jaxmarl_llm.algos.gae import own_turn_gae
from jaxmarl_llm.algos.ppo import PPOCoefs, ppo_loss, shard_mean
from jaxmarl_llm.envs import registry
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.models import config as model_config
from jaxmarl_llm.models.lora import LoraConfig
from jaxmarl_llm.models.sampling import SamplingConfig
from jaxmarl_llm.models.transformer import init_params
from jaxmarl_llm.policies import central_critic, transcripts
from jaxmarl_llm.policies.lm_policy import LMPolicy, append_tokens
from jaxmarl_llm.train.mesh import DATA, global_index, shard_over_data
from jaxmarl_llm.tokenizers import CharTokenizer, HFTokenizer, WordTokenizer


class LMHParams(NamedTuple):
    lr: jax.Array
    clip_eps: jax.Array
    ent_coef: jax.Array
    vf_coef: jax.Array
    kl_coef: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    max_grad_norm: jax.Array

    @classmethod
    def from_config(cls, config) -> "LMHParams":
        return cls(*(jnp.asarray(config[name], jnp.float32) for name in cls._fields))


@struct.dataclass
class LMRunnerState:
    trainable: Any  # {"lora": ..., "value_head": ...}, leaves [S, ...] (S adapter slots); MAPPO adds "critic"
    opt_state: Any
    key: jax.Array
    update_step: jax.Array
    pool: Any = None  # opponent snapshots: lora leaves [P, ...] (None without a pool)


class Turns(NamedTuple):
    """One rollout, [T, N, A, ...]."""

    prompt: jax.Array  # [T, N, A, L] int32 (width 0 in incremental mode: the final transcript holds every prompt)
    prompt_len: jax.Array  # [T, N, A]
    action: jax.Array  # [T, N, A, M]
    action_mask: jax.Array  # [T, N, A, M] bool: generated tokens
    logprob: jax.Array  # [T, N, A, M]
    value: jax.Array  # [T, N, A] (MAPPO: the centralized critic's)
    critic_obs: jax.Array  # [T, N, A, F] MAPPO critic input (width 0 with per-seat value heads)
    reward: jax.Array  # [T, N, A]
    alive: jax.Array  # [T, N] bool: the episode was running at this turn
    acted: jax.Array  # [T, N, A] bool: active and alive (the seat chose an action)
    acts: jax.Array  # [T, N, A] bool: active, alive and learning (its tokens enter the policy loss)
    done: jax.Array  # [T, N] bool: the episode ended at this turn
    info: dict


class LMTrainer(NamedTuple):
    env: Any
    config: Any
    hparams: LMHParams
    policy: LMPolicy
    base: Any  # frozen base params (passed to update as an argument, never closed over)
    init: Any
    update: Any  # update(state, hp, base, axis_name=None)
    state_specs: Any
    num_updates: int
    tokenizer: Any
    slot_of_agent: np.ndarray  # [A] int: the adapter slot each agent acts with
    agent_scale: jax.Array  # [A] float: 0 for frozen agents (adapters off), else 1
    rollout: Any = None  # rollout(key, base, trainable, pool, env_ids) -> (Turns, Seats)


def parse_agent_map(value) -> dict[int, str]:
    """`scripted_agents` as {agent index: kind}, from "1:minimax,0:random" or a mapping."""
    if not value:
        return {}
    if isinstance(value, str):
        items = [part.split(":", 1) for part in value.replace(" ", "").split(",") if part]
        if any(len(kv) != 2 for kv in items):
            raise ValueError(f"expected 'index:kind[,index:kind]', got {value!r}")
        return {int(k): v for k, v in items}
    return {int(k): str(v) for k, v in dict(value).items()}


class Seats(NamedTuple):
    """Who plays each (env, agent) seat in one rollout."""

    learns: jax.Array  # [N, A] bool: the seat's tokens enter the loss
    pick: jax.Array  # [N, A] int32: adapter row in concat(learner slots [S], pool [P])
    scale: jax.Array  # [N, A] float32: 0 = bare base model


def build_tokenizer(spec: str, env_name: str = "", env_kwargs=None):
    """"char" or "word" (built-in) or a local Hugging Face tokenizer folder.

    "word" is a `WordTokenizer` over every fixed string the env `env_name` encodes
    when it is built (prompts, feedback, board pictures): whole words become one id,
    so a from-scratch model reads short transcripts; the same env and kwargs always
    give the same ids, so a saved model and a later run agree.
    """
    if spec in ("", "char"):
        return CharTokenizer()
    if spec == "word":
        if not env_name:
            raise ValueError("tokenizer='word' is built from an env's texts: set config.env_name")
        return WordTokenizer.from_texts(_env_texts(env_name, dict(env_kwargs or {})))
    return HFTokenizer(spec)


class _RecordingTokenizer(CharTokenizer):
    def __init__(self):
        super().__init__()
        self.texts: list[str] = []

    def encode(self, text: str) -> list[int]:
        self.texts.append(text)
        return super().encode(text)


def _env_texts(env_name: str, env_kwargs: dict) -> list[str]:
    """Every string env `env_name` encodes while it is built, in order."""
    recorder = _RecordingTokenizer()
    registry.make(env_name, tokenizer=recorder, **env_kwargs)
    return recorder.texts


def build_model(mcfg, tokenizer, seed: int):
    """(ModelConfig, params): a checkpoint folder when given, else a random model sized by `mcfg`."""
    if mcfg.checkpoint:
        from jaxmarl_llm.models.hf import load_pretrained

        cfg, params = load_pretrained(mcfg.checkpoint, dtype=mcfg.dtype)
        if tokenizer.vocab_size > cfg.vocab_size:
            raise ValueError(f"tokenizer has {tokenizer.vocab_size} ids but the checkpoint's vocab is {cfg.vocab_size}")
        return cfg, params
    # exactly the tokenizer's ids: a model never samples an id the env cannot decode
    cfg = model_config.tiny(
        mcfg.family, vocab_size=tokenizer.vocab_size, hidden_size=mcfg.hidden_size, intermediate_size=mcfg.intermediate_size,
        num_layers=mcfg.num_layers, num_heads=mcfg.num_heads, num_kv_heads=mcfg.num_kv_heads, head_dim=mcfg.head_dim,
        max_position_embeddings=mcfg.max_position_embeddings, dtype=mcfg.dtype, param_dtype=mcfg.dtype,
    )
    # std 0.1 (not 0.02): with RMSNorm fixing |h|, LoRA on the blocks can only steer the logits
    # as far as |lm_head rows| allows; a from-scratch base needs room to express preferences.
    return cfg, init_params(cfg, jax.random.PRNGKey(seed), std=mcfg.init_std)


def make_train(config, env=None) -> LMTrainer:
    tokenizer = build_tokenizer(config.tokenizer, config.env_name, config.env_kwargs)
    if env is None:
        env = registry.make(config.env_name, tokenizer=tokenizer, **config.env_kwargs)
    cfg, base = build_model(config.model, tokenizer, config.model.init_seed)
    num_agents = env.num_agents
    scripted = parse_agent_map(config.scripted_agents)
    pool_size, refresh_every = int(config.opponent_pool.size), int(config.opponent_pool.refresh_every)
    _check_seats(env, config, scripted, pool_size)
    frozen = np.zeros((num_agents,), bool)
    frozen[list(config.frozen_agents)] = True
    is_scripted = np.zeros((num_agents,), bool)
    is_scripted[list(scripted)] = True
    if config.share_policy:
        slot_of_agent = np.where(frozen, 1 if frozen.any() else 0, 0)
    else:
        slot_of_agent = np.arange(num_agents)
    num_slots = int(slot_of_agent.max()) + 1
    policy = LMPolicy(
        cfg,
        LoraConfig(rank=config.lora.rank, alpha=config.lora.alpha, targets=tuple(config.lora.targets)),
        SamplingConfig(
            max_new_tokens=env.max_action_tokens, temperature=config.sampling.temperature, top_k=config.sampling.top_k,
            top_p=config.sampling.top_p, stop_ids=(tokenizer.eos_id,), pad_id=tokenizer.pad_id,
        ),
    )
    num_turns, num_envs, group = config.num_turns, config.num_envs, config.group_size
    algo = config.algo
    use_kl = float(config.kl_coef) != 0.0
    mb = config.num_minibatches
    static_learn = ~frozen & ~is_scripted  # [A] (with a pool the learner's seat is drawn per group instead)
    lm_agents = np.flatnonzero(~is_scripted)  # seats an LM plays (scripted seats never run the model)
    # seats scored in the loss; with a pool each env's learner seat is gathered into one column (slot 0)
    loss_agents = np.zeros((1,), np.int64) if pool_size else np.flatnonzero(static_learn)
    agent_scale = jnp.asarray(np.where(frozen, 0.0, 1.0), jnp.float32)  # frozen agents: adapters off
    slots = jnp.asarray(slot_of_agent)
    num_updates = int(config.total_episodes // num_envs)
    pad_id = tokenizer.pad_id
    m_tokens = env.max_action_tokens
    num_lm = len(lm_agents)
    # token games: keep each seat's KV cache across turns and score an episode in one forward
    incremental = bool(config.rollout.incremental) and bool(getattr(env, "appends_actions", False)) and num_lm > 0
    movers = min(env.max_movers or num_lm, num_lm)  # LM rows computed per env and turn
    chunk = int(config.rollout.chunk)
    micro = int(config.num_microbatches)
    widths = transcripts.score_widths(env.capacity + m_tokens, config.rollout.min_score_width) if incremental else ()
    central = config.critic.kind == "mappo"  # one critic over every seat's transcript (else a value head per seat)
    token_credit = algo == "ppo" and config.credit == "token"  # GAE over generated tokens (else over turns)
    clip_value = bool(config.clip_value)
    from jaxmarl_llm.train.config import ConfigError

    if incremental and num_envs % mb:
        raise ConfigError(f"config.num_minibatches: {mb} must divide the envs of each device (num_envs={num_envs}): "
                          "with incremental rollouts a minibatch is a set of whole episodes")
    if micro > 1 and (not incremental or num_envs % (mb * micro)):
        raise ConfigError(f"config.num_microbatches: {micro} needs an incremental rollout (a token game) and must "
                          f"divide each minibatch's envs (num_envs={num_envs} / num_minibatches={mb} per device)")
    if not incremental and num_turns % mb:
        raise ConfigError(f"config.num_minibatches: {mb} must divide num_turns ({num_turns}): each minibatch "
                          "takes a slice of every episode's turns")

    def per_agent(trainable, agents):
        """Slot-stacked trainable [S, ...] -> one entry per listed agent [A', ...] (a gather: grads flow back)."""
        per_slot = {k: v for k, v in trainable.items() if k != "critic"}  # the central critic has no slot axis
        return jax.tree.map(lambda x: x[slots[agents]], per_slot)

    def scaled(trainable_a, scale):
        """Adapters times `scale` (0 for frozen agents: exactly the base model)."""
        return {**trainable_a, "lora": jax.tree.map(lambda x: x * scale, trainable_a["lora"])}

    # ---- who plays each seat --------------------------------------------------------------------
    def draw_seats(key, env_ids) -> Seats:
        """Fixed seats, or (pool) the learner's seat and the opponent's snapshot drawn per global group id."""
        n = env_ids.shape[0]
        if not pool_size:
            return Seats(jnp.broadcast_to(jnp.asarray(static_learn), (n, num_agents)),
                         jnp.broadcast_to(slots, (n, num_agents)), jnp.broadcast_to(agent_scale, (n, num_agents)))
        gid = env_ids // group
        k_seat, k_snap = jax.random.split(key)
        seat = jax.vmap(lambda g: jax.random.randint(jax.random.fold_in(k_seat, g), (), 0, num_agents))(gid)
        snap = jax.vmap(lambda g: jax.random.randint(jax.random.fold_in(k_snap, g), (), 0, pool_size))(gid)
        learns = jnp.arange(num_agents)[None, :] == seat[:, None]  # [N, A]
        pick = jnp.where(learns, 0, num_slots + snap[:, None]).astype(jnp.int32)
        return Seats(learns, pick, jnp.ones((n, num_agents), jnp.float32))

    def acting_weights(trainable, pool, seats: Seats):
        """(adapters, scales, per_env) for the LM seats: [A', ...] shared by envs, or [N, A', ...] with a pool."""
        if not pool_size:
            return per_agent(trainable, lm_agents), agent_scale[lm_agents], False
        pick = seats.pick[:, lm_agents]  # [N, A']
        bank = jax.tree.map(lambda s, p: jnp.concatenate([s, p]), trainable["lora"], pool)  # [S + P, ...]
        value_slot = jnp.where(pick < num_slots, pick, 0)  # snapshots carry no value head; theirs is unused
        adapters = {"lora": jax.tree.map(lambda x: x[pick], bank),
                    "value_head": jax.tree.map(lambda x: x[value_slot], trainable["value_head"])}
        return adapters, seats.scale[:, lm_agents], True

    # ---- acting: every (env, LM seat) generates from its own transcript ---------------------------
    def act(key, base, adapters, scale, per_env: bool, tokens, length):  # tokens [N, A', L], length [N, A']
        agent_ids = jnp.asarray(lm_agents)

        def one_env(k, tr_env, sc_env, tok, ln):
            def one_agent(a, tr, s, t, n):
                sample = policy.sample(jax.random.fold_in(k, a), base, scaled(tr, s), t[None], n[None])
                return jax.tree.map(lambda x: x[0], sample)

            return jax.vmap(one_agent)(agent_ids, tr_env, sc_env, tok, ln)

        axis = 0 if per_env else None
        return jax.vmap(one_env, in_axes=(0, axis, axis, 0, 0))(key, adapters, scale, tokens, length)  # [N, A', ...]

    def take_agents(x: jax.Array, agents: np.ndarray, axis: int) -> jax.Array:
        return x if len(agents) == num_agents else jnp.take(x, jnp.asarray(agents), axis=axis)

    # ---- scoring a batch of turns under the current (or reference) policy -------------------------
    def score(base, trainable, batch, reference: bool = False):
        """batch fields [B, N, A_l, ...] (loss seats) -> logprob, entropy, value [B, N, A_l, M] (value: at each
        token's context; [..., 0] is the turn's)."""
        agents_tr = per_agent(trainable, loss_agents)

        def one_agent(tr, prompt, plen, action, amask):
            lead = prompt.shape[:-1]
            flat = lambda x: x.reshape((-1,) + x.shape[len(lead):])  # noqa: E731
            tokens, lengths, mask = append_tokens(flat(prompt), flat(plen), flat(action), flat(amask))
            lp, ent, values = policy.score(base, None if reference else tr, tokens, lengths, mask)
            take = jax.vmap(lambda row, start: jax.lax.dynamic_slice(row, (start,), (action.shape[-1],)))
            out_lp = take(lp, flat(plen)).reshape(action.shape)
            out_ent = take(ent, flat(plen)).reshape(action.shape)
            value = take(values, flat(plen)).reshape(action.shape)
            return out_lp, out_ent, value

        # agent axis is -2 of prompt/action fields, -1 of plen: move it first for vmap
        to_front = lambda x, ax: jnp.moveaxis(x, ax, 0)  # noqa: E731
        lp, ent, value = jax.vmap(one_agent)(
            agents_tr, to_front(batch.prompt, -2), to_front(batch.prompt_len, -1),
            to_front(batch.action, -2), to_front(batch.action_mask, -2),
        )
        return jnp.moveaxis(lp, 0, -2), jnp.moveaxis(ent, 0, -2), jnp.moveaxis(value, 0, -2)

    # ---- optimizer over the adapters and value head only --------------------------------------------
    def make_tx(hp: LMHParams):
        return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm), optax.adam(hp.lr, eps=1e-5))

    def init(key: jax.Array, hp: LMHParams) -> LMRunnerState:
        key, k_init = jax.random.split(key)
        trainable = policy.init_trainable(k_init, num_agents=num_slots)
        if central:
            trainable["critic"] = central_critic.critic_init(
                jax.random.fold_in(k_init, 7), num_agents, cfg.hidden_size, config.critic.hidden)
        pool = None
        if pool_size:  # every snapshot starts as the initial learner (B = 0: the base model)
            pool = jax.tree.map(lambda x: jnp.broadcast_to(x[0], (pool_size, *x.shape[1:])), trainable["lora"])
        return LMRunnerState(trainable, make_tx(hp).init(trainable), key, jnp.zeros((), jnp.int32), pool)

    # ---- one update ------------------------------------------------------------------------------------
    def rollout(key, base, trainable, pool, env_ids):
        per_env = lambda k: jax.vmap(lambda i: jax.random.fold_in(k, i))(env_ids)  # noqa: E731
        k_reset, k_turns = jax.random.split(key)
        seats = draw_seats(jax.random.fold_in(k_reset, 0x5EA7), env_ids)
        adapters, scale, per_env_weights = acting_weights(trainable, pool, seats)
        group_keys = jax.vmap(lambda i: jax.random.fold_in(k_reset, i))(env_ids // group)
        obs, env_state = jax.vmap(env.reset)(group_keys)
        n = env_ids.shape[0]

        def act_full(k_act, obs, active, cache):
            """Every LM seat prefills its whole transcript and generates (any env)."""
            s = act(per_env(k_act), base, adapters, scale, per_env_weights,
                    take_agents(obs.tokens, lm_agents, 1), take_agents(obs.length, lm_agents, 1))
            return s, cache

        def act_incremental(k_act, obs, active, cache):
            """Movers only (K rows per env), each reading just the tokens added since its last turn."""
            act_lm = active[:, lm_agents]  # [N, A']
            if movers == num_lm:
                seat = jnp.broadcast_to(jnp.arange(num_lm), (n, num_lm))
            else:
                seat = jnp.argmax(act_lm, axis=-1)[:, None]  # [N, 1] (turn-based: the one mover)
            env_of = jnp.broadcast_to(jnp.arange(n)[:, None], seat.shape)
            rows = (env_of * num_lm + seat).reshape(-1)  # [N*K] rows of the cache
            pick = lambda x: x[:, jnp.asarray(lm_agents)][env_of, seat].reshape((-1,) + x.shape[2:])  # noqa: E731
            if per_env_weights:
                row_ad = jax.tree.map(lambda x: x[env_of, seat].reshape((-1,) + x.shape[2:]), adapters)
                row_scale = scale[env_of, seat].reshape(-1)
            else:
                row_ad = jax.tree.map(lambda x: x[seat].reshape((-1,) + x.shape[1:]), adapters)
                row_scale = scale[seat].reshape(-1)
            row_ad = {**row_ad, "lora": jax.tree.map(
                lambda x: x * row_scale.reshape((-1,) + (1,) * (x.ndim - 1)).astype(x.dtype), row_ad["lora"])}
            row_len = pick(obs.length)
            # the key of (env, seat) that the full path uses, so both paths draw the same samples
            row_keys = jax.vmap(jax.random.fold_in)(per_env(k_act)[env_of.reshape(-1)],
                                                     jnp.asarray(lm_agents)[seat].reshape(-1))
            sample, part = transcripts.act_rows(policy, row_keys, base, row_ad, pick(obs.tokens), row_len,
                                                transcripts.take_rows(cache, rows), chunk)
            acting = act_lm[env_of, seat].reshape(-1)
            cache = transcripts.put_rows(cache, rows, part._replace(seen=jnp.where(acting, part.seen, row_len)))
            # back to [N, A', ...]: rows of seats that did not move stay empty (masked below)
            full = lambda x, fill: jnp.full((n, num_lm) + x.shape[1:], fill, x.dtype).at[env_of, seat].set(  # noqa: E731
                x.reshape(seat.shape + x.shape[1:]))
            out = type(sample)(full(sample.tokens, pad_id), full(sample.logprobs, 0.0), full(sample.mask, False),
                               full(sample.value, 0.0))
            return out, cache

        def live_turn(carry, t):
            env_state, obs, alive, cache = carry
            k_act, k_env = jax.random.split(jax.random.fold_in(k_turns, t))
            active = jax.vmap(env.active)(env_state)  # [N, A]
            tokens = jnp.full((n, num_agents, m_tokens), pad_id, jnp.int32)
            mask = jnp.zeros((n, num_agents, m_tokens), bool)
            logprob = jnp.zeros((n, num_agents, m_tokens), jnp.float32)
            value = jnp.zeros((n, num_agents), jnp.float32)
            if len(lm_agents):
                s, cache = (act_incremental if incremental else act_full)(k_act, obs, active, cache)
                idx = jnp.asarray(lm_agents)
                tokens, mask = tokens.at[:, idx].set(s.tokens), mask.at[:, idx].set(s.mask)
                logprob, value = logprob.at[:, idx].set(s.logprobs), value.at[:, idx].set(s.value)
            for a, kind in scripted.items():  # the game's own player; log-prob 0, never in a loss
                k_opp = per_env(jax.random.fold_in(k_act, 1_000_003 + a))
                scr = jax.vmap(lambda k, st: env.opponent_action(k, st, kind))(k_opp, env_state)  # [N, A, M]
                tokens = tokens.at[:, a].set(scr.tokens[:, a])
                mask = mask.at[:, a].set(jnp.arange(m_tokens)[None, :] < scr.length[:, a, None])
            mask = mask & active[..., None]  # an inactive seat's sample is never played nor scored
            if central and not incremental:  # the critic reads every seat's prompt end at this turn
                feats = central_critic.transcript_features(base, cfg, obs.tokens.reshape(n * num_agents, -1),
                                                           (obs.length - 1).reshape(n * num_agents, 1))
                critic_obs = central_critic.critic_inputs(feats.reshape(n, num_agents, -1))
            else:
                critic_obs = jnp.zeros((n, num_agents, 0), jnp.float32)
            length = mask.sum(-1).astype(jnp.int32)
            action = TextAction(tokens=jnp.where(mask, tokens, pad_id), length=length)
            next_obs, env_state2, reward, term, trunc, info = jax.vmap(env.step)(per_env(k_env), env_state, action)
            done = jnp.all(term | trunc, axis=-1) & alive
            rec = Turns(
                prompt=obs.tokens[..., :0] if incremental else obs.tokens, prompt_len=obs.length,
                action=action.tokens, action_mask=mask, logprob=jnp.where(mask, logprob, 0.0),
                value=value * active, critic_obs=critic_obs, reward=reward * alive[:, None], alive=alive,
                acted=active & alive[:, None], acts=active & alive[:, None] & seats.learns, done=done,
                info={k: v for k, v in info.items() if jnp.ndim(v) <= 2},
            )
            return (env_state2, next_obs, alive & ~done, cache), rec

        def turn(carry, t):
            # once every local game has ended, later turns only record zeros (no model call)
            def dead_turn(carry, t):
                shapes = jax.eval_shape(live_turn, carry, t)[1]
                return carry, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)

            return jax.lax.cond(carry[2].any(), live_turn, dead_turn, carry, t)

        alive0 = jnp.ones((n,), bool)
        cache = transcripts.init_rows(policy.cfg, n * num_lm, obs.tokens.shape[-1] + m_tokens) if incremental else None
        (_, last_obs, _, _), turns = jax.lax.scan(turn, (env_state, obs, alive0, cache), jnp.arange(num_turns))
        if central:
            if incremental:  # every turn's prompt is a prefix of the final transcript: one forward per seat
                feats = critic_features(base, last_obs.tokens, turns.prompt_len)
                turns = turns._replace(critic_obs=feats * turns.alive[..., None, None])  # ended games: 0, as read live
            value = central_critic.critic_apply(trainable["critic"], turns.critic_obs) * turns.acted
            turns = turns._replace(value=value)
        return turns, seats, last_obs.tokens

    def critic_features(base, final, prompt_len):
        """MAPPO critic inputs [T, N, A, F] from each seat's final transcript (final [N, A, L], prompt_len [T, N, A])."""
        t_len, n_env, a = prompt_len.shape
        rows = final.reshape(n_env * a, -1)
        pos = (jnp.moveaxis(prompt_len, 0, -1) - 1).reshape(n_env * a, t_len)  # each turn's last read token
        feat_widths = transcripts.score_widths(rows.shape[1], config.rollout.min_score_width)
        branch = transcripts.width_index(feat_widths, prompt_len.max())
        feats = jax.lax.switch(branch, [lambda r, w=w: central_critic.transcript_features(base, cfg, r[:, :w], pos)
                                        for w in feat_widths], rows)  # [N*A, T, D]
        return central_critic.critic_inputs(jnp.moveaxis(feats.reshape(n_env, a, t_len, -1), 2, 0))

    def advantages(turns: Turns, hp: LMHParams, axis_name):
        """Per-turn advantages [T, N, A] and value targets [T, N, A]."""
        if algo == "ppo":  # each seat's own turns are its MDP; others' moves are part of its environment
            return own_turn_gae(turns.reward, turns.value, turns.acted, hp.gamma, hp.gae_lambda)
        returns = turns.reward.sum(0)  # [N, A] episode return per agent
        grouped = jnp.moveaxis(returns.reshape(-1, group, num_agents), -1, 0)  # [A, N/G, G]
        if algo == "grpo":
            a = grpo.group_advantages(grouped, normalize_std=config.grpo_normalize_std)
        else:
            a = rloo.rloo_advantages(grouped)
        adv = jnp.moveaxis(a, 0, -1).reshape(returns.shape)  # [N, A]
        adv = jnp.broadcast_to(adv[None], turns.reward.shape)
        return adv, jnp.zeros_like(adv)

    def loss_view(x: jax.Array, learns: jax.Array) -> jax.Array:
        """x [T, N, A, ...] -> [T, N, A_l, ...]: the learning seats (with a pool: each env's learner seat)."""
        if not pool_size:
            return take_agents(x, loss_agents, 2)
        seat = jnp.argmax(learns, axis=-1)  # [N]
        idx = seat.reshape((1, -1, 1) + (1,) * (x.ndim - 3))
        return jnp.take_along_axis(x, idx, axis=2)

    def loss_seats(turns: Turns, learns: jax.Array) -> Turns:
        """Only the seats that can learn go into the loss (scripted, frozen, snapshot seats are never scored)."""
        sub = lambda x, ax: loss_view(x, learns)  # noqa: E731
        return turns._replace(prompt=sub(turns.prompt, 2), prompt_len=sub(turns.prompt_len, 2),
                              action=sub(turns.action, 2), action_mask=sub(turns.action_mask, 2),
                              logprob=sub(turns.logprob, 2), value=sub(turns.value, 2), reward=sub(turns.reward, 2),
                              critic_obs=sub(turns.critic_obs, 2),
                              acted=sub(turns.acted, 2), acts=sub(turns.acts, 2), info={})

    def score_turns(base, trainable, batch: Turns, reference: bool = False):
        """`score` one turn slice at a time, skipping slices with nothing to learn (ended games cost nothing)."""
        if batch.prompt.shape[0] == 1:
            return score(base, trainable, batch, reference)

        def one(row: Turns):
            one_batch = jax.tree.map(lambda x: x[None], row)
            need = row.acts.any() | (row.alive.any() if algo == "ppo" else False)
            shapes = jax.eval_shape(lambda b: score(base, trainable, b, reference), one_batch)
            skip = lambda b: jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)  # noqa: E731
            out = jax.lax.cond(need, lambda b: score(base, trainable, b, reference), skip, one_batch)
            return jax.tree.map(lambda x: x[0], out)

        return jax.lax.map(one, batch._replace(info={}))

    def score_episodes(base, trainable, batch: Turns, seqs, reference: bool = False, width: int | None = None):
        """Incremental mode: one forward per (env, loss seat) over its episode (seqs [n, A_l, W]) scores every
        turn; batch fields [T, n, A_l, ...] -> logprob, entropy, value [T, n, A_l, M]."""
        agents_tr = per_agent(trainable, loss_agents)
        mask = batch.action_mask & batch.acts[..., None]
        need = transcripts.needed_width(batch.prompt_len, mask)  # one width for all agents (an unbatched switch)
        at = widths if width is None else (width,)

        def one_agent(tr, seq, plen, action, amask):  # seq [n, W], plen [T, n], action [T, n, M]
            lp, ent, value = transcripts.score_transcripts(
                policy, base, None if reference else tr, seq, plen.T, jnp.swapaxes(action, 0, 1),
                jnp.swapaxes(amask, 0, 1), at, need)
            return jnp.swapaxes(lp, 0, 1), jnp.swapaxes(ent, 0, 1), jnp.swapaxes(value, 0, 1)

        lp, ent, value = jax.vmap(one_agent, in_axes=(0, 1, 2, 2, 2), out_axes=(2, 2, 2))(
            agents_tr, seqs, batch.prompt_len, batch.action, mask)
        return lp, ent, value

    def episode_seqs(final_tokens, train_turns: Turns, learns):
        """Each loss seat's final transcript with its last action written back: [N, A_l, L + M]."""
        final = loss_view(final_tokens[None], learns)[0]  # [N, A_l, L]
        t_total = train_turns.acts.shape[0]
        last = t_total - 1 - jnp.argmax(train_turns.acts[::-1], axis=0)  # [N, A_l] last turn the seat acted
        at_last = lambda x: jnp.take_along_axis(x, last.reshape((1,) + last.shape + (1,) * (x.ndim - 3)), 0)[0]  # noqa: E731
        lead = final.shape[:2]
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        seq = transcripts.episode_sequence(flat(final), flat(at_last(train_turns.prompt_len)),
                                           flat(at_last(train_turns.action)), flat(at_last(train_turns.action_mask)))
        return seq.reshape(lead + seq.shape[1:])

    def loss_fn(trainable, base, mb_turns: Turns, adv, ret, hp: LMHParams, axis_name, seqs=None, width=None):
        if incremental:
            score_batch = lambda reference: score_episodes(base, trainable, mb_turns, seqs, reference, width)  # noqa: E731
        else:
            score_batch = lambda reference: score_turns(base, trainable, mb_turns, reference)  # noqa: E731
        ref_lp = jax.lax.stop_gradient(score_batch(True)[0]) if use_kl else None
        return loss_of_scores(score_batch(False), trainable.get("critic"), ref_lp, mb_turns, adv, ret, hp, axis_name)

    def loss_of_scores(scores, critic, ref_lp, mb_turns: Turns, adv, ret, hp: LMHParams, axis_name):
        """The loss as a function of the scored tokens (logprob, entropy, value) of the whole minibatch and the
        central critic's weights (MAPPO: the values come from it, not from the scores)."""
        logprob, entropy, value = scores  # value [B, N, A_l, M]
        if central:
            value = central_critic.critic_apply(critic, mb_turns.critic_obs)  # [B, N, A_l]
        elif not token_credit:
            value = value[..., 0]  # the turn's value: at its prompt's last token
        token_mask = mb_turns.action_mask & mb_turns.acts[..., None]  # [B, N, A_l, M]
        token_adv = adv if token_credit else jnp.broadcast_to(adv[..., None], logprob.shape)
        metrics = {}
        if algo == "ppo":
            # policy: token-level clipped surrogate with turn-level advantages; value: one per turn
            coefs = PPOCoefs(hp.clip_eps, 0.0, hp.ent_coef, clip_value=False, normalize_advantages=True)
            pl, metrics = ppo_loss(logprob, mb_turns.logprob, token_adv, jnp.zeros_like(logprob),
                                   jnp.zeros_like(logprob), jnp.zeros_like(logprob), entropy, coefs,
                                   mask=token_mask, axis_name=axis_name)
            value_mask = token_mask if token_credit else mb_turns.acts  # where the seat chose (own-turn GAE)
            err = jnp.square(value - ret)
            if clip_value:  # PPO's value clipping around the values the advantages were computed with
                old = mb_turns.value
                err = jnp.maximum(err, jnp.square(old + jnp.clip(value - old, -hp.clip_eps, hp.clip_eps) - ret))
            vl = 0.5 * shard_mean(err, value_mask, axis_name)
            loss = pl + hp.vf_coef * vl
            metrics = {**metrics, "value_loss": vl}
        elif algo == "grpo":
            loss, metrics = grpo.grpo_loss(logprob, mb_turns.logprob, token_adv, token_mask, None,
                                           clip_eps=hp.clip_eps, aggregation=config.grpo_aggregation,
                                           max_len=logprob.shape[-1], axis_name=axis_name)
        else:
            loss, metrics = rloo.rloo_loss(logprob, token_adv, token_mask, axis_name=axis_name)
        if use_kl:
            kl_term = kl.mean_kl(logprob, ref_lp, token_mask, kind=config.kl_estimator, axis_name=axis_name)
            loss = loss + hp.kl_coef * kl_term
            metrics = {**metrics, "kl_ref": kl_term}
        return loss, metrics

    def accumulated_grads(trainable, base, mb_turns: Turns, adv, ret, hp: LMHParams, axis_name, seqs, width):
        """The minibatch gradient with activations for only 1/micro of its episodes alive at a time.

        Exact (not an average of per-microbatch losses): pass 1 scores every microbatch without
        gradients, the loss's gradient with respect to those scores is taken on the whole minibatch
        (cheap: no model in it), and pass 2 pulls it back through each microbatch's forward (a vjp,
        recomputing that forward) and sums. Costs one extra forward, like rematerialization.
        """
        def split(x, env_axis):  # [.., n, ..] -> [micro, .., n/micro, ..]
            x = jnp.moveaxis(x, env_axis, 0)
            x = x.reshape((micro, x.shape[0] // micro) + x.shape[1:])
            return jnp.moveaxis(x, 1, env_axis + 1)

        def join(x, env_axis):  # inverse of split
            x = jnp.moveaxis(x, env_axis + 1, 1)
            x = x.reshape((-1,) + x.shape[2:])
            return jnp.moveaxis(x, 0, env_axis)

        parts = (jax.tree.map(lambda x: split(x, 1), mb_turns._replace(info={})), split(seqs, 0))
        score_part = lambda tr, part, reference=False: score_episodes(base, tr, part[0], part[1], reference, width)  # noqa: E731
        scores = jax.tree.map(lambda x: join(x, 1), jax.lax.map(lambda part: score_part(trainable, part), parts))
        ref_lp = None
        if use_kl:
            ref_lp = join(jax.lax.map(lambda part: score_part(trainable, part, True)[0], parts), 1)
        (g_scores, g_critic), metrics = jax.grad(loss_of_scores, argnums=(0, 1), has_aux=True)(
            scores, trainable.get("critic"), ref_lp, mb_turns, adv, ret, hp, axis_name)
        g_parts = jax.tree.map(lambda x: split(x, 1), g_scores)

        def pull_back(total, xs):
            part, g = xs
            _, vjp = jax.vjp(lambda tr: score_part(tr, part), trainable)
            return jax.tree.map(jnp.add, total, vjp(g)[0]), None

        grads, _ = jax.lax.scan(pull_back, jax.tree.map(jnp.zeros_like, trainable), (parts, g_parts))
        if central:  # the critic is not in the scored forward: its gradient is the loss's own
            grads = {**grads, "critic": g_critic}
        return grads, metrics

    def refresh_pool(pool, lora, step):
        """Every `refresh_every` updates the learner's adapter (slot 0) overwrites the oldest snapshot."""
        if not pool_size:
            return pool
        due = step % refresh_every == 0
        oldest = (step // refresh_every - 1) % pool_size
        return jax.tree.map(lambda p, x: p.at[oldest].set(jnp.where(due, x[0], p[oldest])), pool, lora)

    def update(state: LMRunnerState, hp: LMHParams, base, axis_name: str | None = None):
        key, k_roll, k_epochs = jax.random.split(state.key, 3)
        n_local = num_envs if axis_name is None else num_envs // jax.lax.psum(1, axis_name)
        env_ids = global_index(n_local, axis_name)
        turns, seats, final_tokens = rollout(k_roll, base, state.trainable, state.pool, env_ids)
        train_turns = loss_seats(turns, seats.learns)
        seqs = episode_seqs(final_tokens, train_turns, seats.learns) if incremental else None
        if token_credit:
            # every generated token is a step: its value (at the context it was chosen in) from one forward of
            # the acting policy, no gradient; GAE then runs over each seat's tokens, turn after turn
            score_all = score_episodes(base, state.trainable, train_turns, seqs) if incremental else score_turns(
                base, state.trainable, train_turns)
            tmask = train_turns.action_mask & train_turns.acts[..., None]  # [T, N, A_l, M]
            old_v = jax.lax.stop_gradient(score_all[2]) * tmask
            adv, ret = token_credit_lib.own_turn_token_gae(train_turns.reward, old_v, tmask, hp.gamma, hp.gae_lambda)
            train_turns = train_turns._replace(value=old_v)  # what value clipping clips around
        else:
            adv, ret = advantages(turns, hp, axis_name)
            adv, ret = loss_view(adv, seats.learns), loss_view(ret, seats.learns)
        tx = make_tx(hp)

        def minibatch_step(carry, batch):
            trainable, opt_state = carry
            mb_turns, mb_adv, mb_ret, mb_seqs = batch
            if incremental and micro > 1:
                grad_fn = lambda width: accumulated_grads(  # noqa: E731
                    trainable, base, mb_turns, mb_adv, mb_ret, hp, axis_name, mb_seqs, width)
            else:
                grad_fn = lambda width: jax.grad(loss_fn, has_aux=True)(  # noqa: E731
                    trainable, base, mb_turns, mb_adv, mb_ret, hp, axis_name, mb_seqs, width)
            if incremental:
                # the forward width follows the longest episode; the switch sits outside the gradient so
                # only the taken width's activations exist (a switch inside `grad` keeps every branch's)
                need = transcripts.needed_width(mb_turns.prompt_len, mb_turns.action_mask & mb_turns.acts[..., None])
                if axis_name is not None:
                    need = jax.lax.pmax(need, axis_name)
                branch = transcripts.width_index(widths, need)
                branches = [lambda w=w: grad_fn(w) for w in widths]
                if algo != "ppo" and not use_kl:
                    # GRPO/RLOO without KL: a minibatch whose advantages are all 0 (every group tied) has an
                    # exactly zero gradient, so skip its forward/backward (the optimizer still steps on zeros)
                    signal = jnp.any((mb_adv != 0) & mb_turns.acts)
                    if axis_name is not None:
                        signal = jax.lax.pmax(signal.astype(jnp.int32), axis_name) > 0
                    shapes = jax.eval_shape(branches[0])
                    branches.append(lambda: jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes))
                    branch = jnp.where(signal, branch, len(widths))
                grads, metrics = jax.lax.switch(branch, branches)
            else:
                grads, metrics = grad_fn(None)
            if axis_name is not None:
                grads, metrics = jax.lax.psum((grads, metrics), axis_name)
            updates, opt_state = tx.update(grads, opt_state, trainable)
            return (optax.apply_updates(trainable, updates), opt_state), metrics

        if incremental:
            if n_local % (mb * micro):
                from jaxmarl_llm.train.config import ConfigError

                raise ConfigError(f"config.num_minibatches x num_microbatches = {mb} x {micro} does not divide the "
                                  f"{n_local} envs of a device; with incremental rollouts a minibatch is a set of "
                                  "whole episodes")
            to_env_first = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731  [T, N, ...] -> [N, T, ...]
            data = (jax.tree.map(to_env_first, train_turns._replace(info={})), jax.tree.map(to_env_first, (adv, ret)), seqs)

            def epoch(carry, epoch_key):
                # a minibatch is a set of whole episodes (each is scored in one forward)
                order = jnp.arange(n_local) if mb == 1 else jax.random.permutation(
                    jax.random.fold_in(epoch_key, env_ids[0]), n_local)
                parts = jax.tree.map(lambda x: x[order].reshape((mb, n_local // mb) + x.shape[1:]), data)
                parts = (jax.tree.map(lambda x: jnp.swapaxes(x, 1, 2), parts[0]),
                         *jax.tree.map(lambda x: jnp.swapaxes(x, 1, 2), parts[1]), parts[2])
                return jax.lax.scan(minibatch_step, carry, parts)
        else:
            def epoch(carry, epoch_key):
                # every env shuffles its own turns; minibatch k takes slice k of each env's order
                data = (train_turns, adv, ret)
                if mb == 1:  # one minibatch: order is irrelevant, and turn slices stay whole turns (skippable)
                    shuffled = data
                else:
                    perms = jax.vmap(lambda i: jax.random.permutation(jax.random.fold_in(epoch_key, i), num_turns))(
                        env_ids)
                    shuffled = jax.tree.map(lambda x: _gather_turns(x, perms), data)
                minibatches = jax.tree.map(lambda x: x.reshape(mb, num_turns // mb, *x.shape[1:]), shuffled)
                return jax.lax.scan(minibatch_step, carry, (*minibatches, None))

        (trainable, opt_state), loss_metrics = jax.lax.scan(
            epoch, (state.trainable, state.opt_state), jax.random.split(k_epochs, config.update_epochs)
        )
        metrics = {k: v.mean() for k, v in loss_metrics.items()}
        metrics.update(_episode_metrics(turns, seats.learns, axis_name))
        step = state.update_step + 1
        pool = refresh_pool(state.pool, trainable["lora"], step)
        return LMRunnerState(trainable, opt_state, key, step, pool), metrics

    state_specs = LMRunnerState(trainable=P(), opt_state=P(), key=P(), update_step=P(),
                                pool=P() if pool_size else None)
    return LMTrainer(env, config, LMHParams.from_config(config), policy, base, init, update, state_specs,
                     num_updates, tokenizer, slot_of_agent, agent_scale, rollout)


def _check_seats(env, config, scripted: dict[int, str], pool_size: int) -> None:
    """Seat settings that cannot work for this env fail at build time, naming the key."""
    from jaxmarl_llm.train.config import ConfigError

    a = env.num_agents
    for i, kind in scripted.items():
        if not 0 <= i < a:
            raise ConfigError(f"config.scripted_agents: agent {i} does not exist ({a} agents)")
        if not hasattr(env, "opponent_action"):
            raise ConfigError(f"config.scripted_agents: {type(env).__name__} has no built-in `opponent_action`")
        if kind not in ("random", "minimax"):
            raise ConfigError(f"config.scripted_agents: agent {i} kind {kind!r}; expected 'random' or 'minimax'")
    if set(scripted) & set(config.frozen_agents):
        raise ConfigError("config.scripted_agents: an agent cannot be both scripted and in frozen_agents")
    if pool_size:
        if a != 2 or scripted or config.frozen_agents or not config.share_policy:
            raise ConfigError("config.opponent_pool: self-play with a pool needs a two-seat game, share_policy=True, "
                              "and no scripted_agents or frozen_agents")
    elif not any(i not in scripted and i not in config.frozen_agents for i in range(a)):
        raise ConfigError("config.scripted_agents / frozen_agents: no agent is left to learn")


def _gather_turns(x: jax.Array, perms: jax.Array) -> jax.Array:
    """x [T, N, ...] reordered per env along turns by perms [N, T]."""
    idx = perms.T.reshape(perms.shape[1], perms.shape[0], *([1] * (x.ndim - 2)))
    return jnp.take_along_axis(x, idx, axis=0)


def _episode_metrics(turns: Turns, learns: jax.Array, axis_name: str | None) -> dict:
    """Mean episode return over learning seats (learns [N, A]), success rate (a positive return), turns, tokens
    per turn, format errors per learner turn, and `<key>_rate` per learner episode for boolean game outcomes."""

    def total(x):
        x = jnp.sum(x)
        return x if axis_name is None else jax.lax.psum(x, axis_name)

    n = total(jnp.ones(turns.alive.shape[1:]))
    learns = learns.astype(jnp.float32)  # [N, A]
    returns = turns.reward.sum(0)  # [N, A]
    per_env = (returns * learns).sum(-1) / jnp.maximum(learns.sum(-1), 1.0)
    acting = turns.acts.astype(jnp.float32)
    tokens = (turns.action_mask.sum(-1) * acting).sum()
    out = {
        "episode_return": total(per_env) / n,
        "success_rate": total((per_env > 0).astype(jnp.float32)) / n,
        "episode_turns": total(turns.alive.sum(0)) / n,
        "tokens_per_turn": total(tokens) / jnp.maximum(total(acting.sum()), 1.0),
    }
    if "format_error" in turns.info:
        fe = turns.info["format_error"]
        fe = fe if fe.ndim == 3 else fe[..., None]
        out["format_error_rate"] = total((fe * turns.acts).astype(jnp.float32)) / jnp.maximum(total(acting.sum()), 1.0)
    learner_eps = total(jnp.minimum(learns.sum(-1), 1.0))
    for name, v in turns.info.items():  # e.g. tic-tac-toe's won / draw / illegal: [T, N, A] bool
        if name != "format_error" and v.ndim == 3 and v.dtype == jnp.bool_:
            happened = jnp.any(v, axis=0).astype(jnp.float32) * learns  # [N, A]
            out[f"{name}_rate"] = total(happened.max(-1)) / jnp.maximum(learner_eps, 1.0)
    return out


def sharded_chunk(trainer: LMTrainer, mesh, num_updates: int):
    """jit(shard_map(scan of updates)) with the base weights as a replicated argument (never a constant)."""

    def chunk(runner, hp, base):
        return jax.lax.scan(lambda r, _: trainer.update(r, hp, base, axis_name=DATA), runner, None, length=num_updates)

    fn = jax.jit(shard_over_data(chunk, mesh, in_specs=(trainer.state_specs, P(), P()),
                                 out_specs=(trainer.state_specs, P())), donate_argnums=0)
    base = trainer.base
    return lambda runner, hp: fn(runner, hp, base)
