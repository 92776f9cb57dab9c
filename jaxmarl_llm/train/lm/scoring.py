"""Scoring recorded turns under the current (or reference) policy, and the minibatch gradient.

Two ways to score, one per rollout path (train/lm/paths.py):
  * re-read: `score_turns` runs each turn's prompt + action as one row of a batched forward over the (turn, env)
    rows with something to learn, packed to the fewest of a few static sizes (ended games cost nothing);
    `reread_grads` differentiates the loss of those scores;
  * incremental: `score_episodes` runs one forward per (env, loss seat) over its final transcript and scores every
    turn, at the narrowest of `plan.widths` that covers the episode; `incremental_grads` picks that width outside
    the gradient, skips minibatches without signal, and with `num_microbatches > 1` accumulates the exact
    gradient a slice of episodes at a time.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxmarl_llm.algos.lm_objective import ALGORITHMS, Scored, lm_loss
from jaxmarl_llm.models import fsdp
from jaxmarl_llm.policies import central_critic, transcripts
from jaxmarl_llm.policies.lm_policy import LMPolicy, model_weights
from jaxmarl_llm.train.lm.plan import LMHParams, Plan, Turns
from jaxmarl_llm.train.lm.seats import loss_adapters, loss_view

Scores = tuple  # (logprob, entropy, value), each [B, N, A_l, M]


def score_slice(plan: Plan, policy: LMPolicy, base, trainable, batch: Turns, reference: bool = False) -> Scores:
    """batch fields [B, N, A_l, ...] -> logprob, entropy, value [B, N, A_l, M] (value: at each token's context;
    [..., 0] is the turn's)."""
    base = model_weights(trainable, base, reference)
    agents_tr = loss_adapters(plan, trainable, batch.slot[0])  # [A_l, ...] (seat adapters: [N, A_l, ...])

    # each turn's actions under the policy's action mode (free text, or the restricted distribution); logits
    # only at the reply's tokens, the last layer at their contexts only (forward's read_at)
    def one_agent(tr, prompt, plen, action, amask, valid):
        lead = prompt.shape[:-1]
        rows = math.prod(lead)  # not -1: valid has width 0 with free actions
        flat = lambda x: x.reshape((rows,) + x.shape[len(lead):])  # noqa: E731
        out = policy.score_actions(base, None if reference else tr, flat(prompt), flat(plen), flat(action),
                                   flat(amask), flat(valid))
        return tuple(x.reshape(action.shape) for x in out)

    if movers_only(plan):  # turn-based self-play, one adapter: only the seat that acted at (turn, env) is read
        mover = jnp.argmax(batch.acted, axis=-1)  # [B, N]
        pick = lambda x: jnp.take_along_axis(  # noqa: E731  [B, N, A_l, ...] -> the mover's [B, N, ...]
            x, mover.reshape(mover.shape + (1,) * (x.ndim - 2)), axis=2)[:, :, 0]
        seat = jax.nn.one_hot(mover, len(plan.loss_agents), dtype=bool)  # [B, N, A_l]
        out = one_agent(jax.tree.map(lambda x: x[0], agents_tr), *(pick(x) for x in (
            batch.prompt, batch.prompt_len, batch.action, batch.action_mask, batch.valid)))  # each [B, N, M]
        return tuple(jnp.where(seat[..., None], x[:, :, None], 0.0) for x in out)
    if plan.seat_adapters:  # each env's own adapter: one call per env (fields [B, N, ...], the env axis 1)
        one_agent = jax.vmap(one_agent, in_axes=(0, 1, 1, 1, 1, 1), out_axes=1)
    return jax.vmap(one_agent, in_axes=(int(plan.seat_adapters), -2, -1, -2, -2, -2), out_axes=-2)(
        agents_tr, batch.prompt, batch.prompt_len, batch.action, batch.action_mask, batch.valid)


def movers_only(plan: Plan) -> bool:
    """The loss reads one row per (turn, env): a turn-based game whose loss seats share one adapter (the other
    seats' rows are masked out of every term of the loss, so they are left at 0, not computed)."""
    return (plan.movers == 1 and len(plan.loss_agents) > 1 and not plan.seat_adapters
            and plan.one_slot(plan.loss_agents))


def row_need(batch: Turns) -> jax.Array:
    """[B, N] bool: the (turn, env) rows with something to learn: a learner acted. Every term of the loss is
    masked by the acting seat's tokens (the value too: own-turn GAE), so a running game's turn where only the
    opponent moved scores nothing the loss reads."""
    return batch.acts.any(-1)


def row_sizes(plan: Plan, batch: Turns) -> tuple[int, ...]:
    """The static row counts the loss forward may read (R/b, 2R/b, ..., R of the batch's R = B x N rows)."""
    total = math.prod(batch.acts.shape[:2])
    return tuple(sorted({-(-total * k // plan.row_buckets) for k in range(1, plan.row_buckets + 1)}))


def row_bucket(plan: Plan, policy: LMPolicy, weights, batch: Turns, axis_name: str | None = None) -> jax.Array:
    """The `lax.switch` index of the fewest rows (`row_sizes`) that hold every row with something to learn; the
    same on every device of the fsdp group (their forwards gather together) and of `axis_name`."""
    index = transcripts.width_index(row_sizes(plan, batch), row_need(batch).sum())
    if axis_name is not None:
        index = jax.lax.pmax(index, axis_name)
    return fsdp.agree_max(index.astype(jnp.int32), weights, policy.cfg)


def score_turns(plan: Plan, policy: LMPolicy, base, trainable, batch: Turns, reference: bool = False,
                rows: int | None = None) -> Scores:
    """`score_slice` of the minibatch as one batched forward over `rows` of its (turn, env) rows, those with
    something to learn first (`row_need`; None: every row); the rows left out score 0. Ended games cost
    nothing, and the pick is a gather / scatter, so the gradient flows through it."""
    lead = batch.acts.shape[:2]  # [B, N]
    total = math.prod(lead)
    if rows is None or rows >= total:
        return score_slice(plan, policy, base, trainable, batch, reference)
    order = jnp.argsort(~row_need(batch).reshape(-1), stable=True)[:rows]  # [K] needed rows first
    packed = jax.tree.map(lambda x: x.reshape((total,) + x.shape[2:])[order][None],
                          batch._replace(info={}))  # fields [1, K, ...]
    out = score_slice(plan, policy, base, trainable, packed, reference)  # each [1, K, A_l, M]
    return tuple(jnp.zeros((total,) + x.shape[2:], x.dtype).at[order].set(x[0]).reshape(lead + x.shape[2:])
                 for x in out)


def score_reread(plan: Plan, policy: LMPolicy, base, trainable, batch: Turns, seqs=None, reference: bool = False,
                 width: int | None = None) -> Scores:
    """`score_turns` with the scorer interface of the rollout paths, at the fewest rows that hold the batch's
    (no gradient flows here: the switch's branches keep nothing)."""
    del seqs, width
    weights = model_weights(trainable, base, reference)
    branches = [lambda r=r: score_turns(plan, policy, base, trainable, batch, reference, r)
                for r in row_sizes(plan, batch)]
    return jax.lax.switch(row_bucket(plan, policy, weights, batch), branches)


def score_episodes(plan: Plan, policy: LMPolicy, base, trainable, batch: Turns, seqs: jax.Array,
                   reference: bool = False, width: int | None = None) -> Scores:
    """One forward per (env, loss seat) over its episode (seqs [n, A_l, W]) scores every turn;
    batch fields [T, n, A_l, ...] -> logprob, entropy, value [T, n, A_l, M]."""
    base = model_weights(trainable, base, reference)
    agents_tr = loss_adapters(plan, trainable, batch.slot[0])  # [A_l, ...] (seat adapters: [n, A_l, ...])
    mask = batch.token_mask()
    need = transcripts.needed_width(batch.prompt_len, mask)  # one width for all agents (an unbatched switch)
    at = plan.widths if width is None else (width,)

    def one_agent(tr, seq, plen, action, amask, valid):  # seq [n, W], plen [T, n], action [T, n, M]
        out = transcripts.score_transcripts(policy, base, None if reference else tr, seq, plen.T,
                                            jnp.swapaxes(action, 0, 1), jnp.swapaxes(amask, 0, 1), at, need,
                                            jnp.swapaxes(valid, 0, 1))
        return tuple(jnp.swapaxes(x, 0, 1) for x in out)

    def one_env(tr, seq, plen, action, amask, valid):  # seq [W], plen [T], action [T, M]: one env's own adapter
        out = one_agent(tr, seq[None], plen[:, None], action[:, None], amask[:, None], valid[:, None])
        return tuple(x[:, 0] for x in out)

    # seat adapters: each env its own adapter, one forward per env (a batch of one under vmap)
    score = jax.vmap(one_env, in_axes=(0, 0, 1, 1, 1, 1), out_axes=1) if plan.seat_adapters else one_agent
    return jax.vmap(score, in_axes=(int(plan.seat_adapters), 1, 2, 2, 2, 2), out_axes=(2, 2, 2))(
        agents_tr, seqs, batch.prompt_len, batch.action, mask, batch.valid)


def episode_seqs(plan: Plan, final_tokens: jax.Array, train_turns: Turns, learns: jax.Array) -> jax.Array:
    """Each loss seat's final transcript with its last action written back: [N, A_l, L + M]."""
    final = loss_view(plan, final_tokens[None], learns)[0]  # [N, A_l, L]
    t_total = train_turns.acts.shape[0]
    last = t_total - 1 - jnp.argmax(train_turns.acts[::-1], axis=0)  # [N, A_l] last turn the seat acted
    at_last = lambda x: jnp.take_along_axis(x, last.reshape((1,) + last.shape + (1,) * (x.ndim - 3)), 0)[0]  # noqa: E731
    lead = final.shape[:2]
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
    seq = transcripts.episode_sequence(flat(final), flat(at_last(train_turns.prompt_len)),
                                       flat(at_last(train_turns.action)), flat(at_last(train_turns.action_mask)))
    return seq.reshape(lead + seq.shape[1:])


# ---- the loss ------------------------------------------------------------------------------------------

def loss_of_scores(plan: Plan, scores: Scores, critic, ref_lp, mb: Turns, adv, ret, hp: LMHParams, axis_name):
    """The loss as a function of the scored tokens (logprob, entropy, value) of the whole minibatch and the
    central critic's weights (MAPPO: the values come from it, not from the scores)."""
    logprob, entropy, value = scores  # value [B, N, A_l, M]
    if plan.central:
        value = central_critic.critic_apply(critic, mb.critic_obs)  # [B, N, A_l]
    elif not plan.token_credit:
        value = value[..., 0]  # the turn's value: at its prompt's last token
    token_mask = mb.token_mask()  # [B, N, A_l, M]
    value_mask = token_mask if plan.token_credit else mb.acts  # where the seat chose (own-turn GAE)
    entropy_mask = None
    if plan.entropy_tokens:  # the bonus's tokens: generated tokens of the chosen ids (tokenizers.TOKEN_SETS)
        entropy_mask = token_mask & jnp.isin(mb.action, jnp.asarray(plan.entropy_tokens, mb.action.dtype))
    scored = Scored(logprob, entropy, value, mb.logprob, mb.value, adv, ret, token_mask, value_mask, ref_lp,
                    entropy_mask)
    return lm_loss(ALGORITHMS[plan.algo], scored, hp, aggregation=plan.loss_aggregation,
                   kl_estimator=plan.kl_estimator, clip_value=plan.clip_value, axis_name=axis_name)


def reference_of(trainable) -> tuple[dict, bool]:
    """(trainable, reference flag) the KL's reference is scored with: MMD's magnet adapter in the learner's
    place (no gradient), else the base with adapters off."""
    if "magnet" in trainable:
        return {**trainable, "lora": jax.lax.stop_gradient(trainable["magnet"])}, False
    return trainable, True


def loss_fn(trainable, plan: Plan, scorer, mb: Turns, adv, ret, hp: LMHParams, axis_name):
    """Score the minibatch (and its reference, with KL) and take the loss: differentiate w.r.t. `trainable`.
    scorer(trainable, reference) -> Scores of `mb`."""
    ref_lp = None
    if plan.use_kl:
        ref_lp = jax.lax.stop_gradient(scorer(*reference_of(trainable))[0])
    scores = scorer(trainable, False)
    return loss_of_scores(plan, scores, trainable.get("critic"), ref_lp, mb, adv, ret, hp, axis_name)


def reread_grads(trainable, plan: Plan, policy: LMPolicy, base, mb: Turns, adv, ret, hp: LMHParams, axis_name,
                 seqs=None):
    """(grads, metrics) of one minibatch of turns on the re-read path (not yet reduced over devices)."""
    del seqs

    def grad_at(rows):
        scorer = lambda tr, reference: score_turns(plan, policy, base, tr, mb, reference, rows)  # noqa: E731
        return jax.grad(loss_fn, has_aux=True)(trainable, plan, scorer, mb, adv, ret, hp, axis_name)

    # the forward reads the fewest rows that hold the minibatch's; the switch sits outside the gradient so only
    # the taken size's activations exist
    bucket = row_bucket(plan, policy, model_weights(trainable, base), mb, axis_name)
    return jax.lax.switch(bucket, [lambda r=r: grad_at(r) for r in row_sizes(plan, mb)])


def accumulated_grads(trainable, plan: Plan, policy: LMPolicy, base, mb: Turns, adv, ret, hp: LMHParams,
                      axis_name, seqs, width):
    """The minibatch gradient with activations for only 1/micro of its episodes alive at a time.

    Exact (not an average of per-microbatch losses): pass 1 scores every microbatch without
    gradients, the loss's gradient with respect to those scores is taken on the whole minibatch
    (cheap: no model in it), and pass 2 pulls it back through each microbatch's forward (a vjp,
    recomputing that forward) and sums. Costs one extra forward, like rematerialization.
    """
    micro = plan.num_microbatches

    def split(x, env_axis):  # [.., n, ..] -> [micro, .., n/micro, ..]
        n = x.shape[env_axis]
        x = x.reshape(x.shape[:env_axis] + (micro, n // micro) + x.shape[env_axis + 1:])
        return jnp.moveaxis(x, env_axis, 0)

    def join(x, env_axis):  # inverse of split
        x = jnp.moveaxis(x, 0, env_axis)
        return x.reshape(x.shape[:env_axis] + (x.shape[env_axis] * x.shape[env_axis + 1],) + x.shape[env_axis + 2:])

    parts = (jax.tree.map(lambda x: split(x, 1), mb._replace(info={})), split(seqs, 0))
    score_part = lambda tr, part, reference=False: score_episodes(  # noqa: E731
        plan, policy, base, tr, part[0], part[1], reference, width)
    scores = jax.tree.map(lambda x: join(x, 1), jax.lax.map(lambda part: score_part(trainable, part), parts))
    ref_lp = None
    if plan.use_kl:
        ref_tr, off = reference_of(trainable)
        ref_lp = join(jax.lax.map(lambda part: score_part(ref_tr, part, off)[0], parts), 1)
    (g_scores, g_critic), metrics = jax.grad(
        lambda sc, cr: loss_of_scores(plan, sc, cr, ref_lp, mb, adv, ret, hp, axis_name), argnums=(0, 1),
        has_aux=True)(scores, trainable.get("critic"))
    g_parts = jax.tree.map(lambda x: split(x, 1), g_scores)

    def pull_back(total, xs):
        part, g = xs
        _, vjp = jax.vjp(lambda tr: score_part(tr, part), trainable)
        return jax.tree.map(jnp.add, total, vjp(g)[0]), None

    grads, _ = jax.lax.scan(pull_back, jax.tree.map(jnp.zeros_like, trainable), (parts, g_parts))
    if plan.central:  # the critic is not in the scored forward: its gradient is the loss's own
        grads = {**grads, "critic": g_critic}
    return grads, metrics


def incremental_grads(trainable, plan: Plan, policy: LMPolicy, base, mb: Turns, adv, ret, hp: LMHParams,
                      axis_name, seqs):
    """(grads, metrics) of one minibatch of whole episodes on the incremental path (not yet reduced over devices)."""
    def grad_at(width):
        if plan.num_microbatches > 1:
            return accumulated_grads(trainable, plan, policy, base, mb, adv, ret, hp, axis_name, seqs, width)
        scorer = lambda tr, reference: score_episodes(plan, policy, base, tr, mb, seqs, reference, width)  # noqa: E731
        return jax.grad(loss_fn, has_aux=True)(trainable, plan, scorer, mb, adv, ret, hp, axis_name)

    # the forward width follows the longest episode; the switch sits outside the gradient so only the
    # taken width's activations exist (a switch inside `grad` keeps every branch's)
    need = fsdp.over_sweep(transcripts.needed_width(mb.prompt_len, mb.token_mask()))
    if axis_name is not None:
        need = jax.lax.pmax(need, axis_name)
    branch = transcripts.width_index(plan.widths, need)
    branches = [lambda w=w: grad_at(w) for w in plan.widths]
    if not ALGORITHMS[plan.algo].critic and not plan.use_kl:
        # group baselines without KL: a minibatch whose advantages are all 0 (every group tied) has an
        # exactly zero gradient, so skip its forward/backward (the optimizer still steps on zeros);
        # metrics["scored"] says which minibatches ran (the entropy is averaged over those)
        signal = jnp.any((adv != 0) & mb.acts)
        if axis_name is not None:
            signal = jax.lax.pmax(signal.astype(jnp.int32), axis_name) > 0
        def scored_at(width):
            grads, metrics = grad_at(width)
            out = grads, {**metrics, "scored": jnp.float32(1.0) / _devices(axis_name)}  # the update's psum: 1
            # a sweep's runs run this branch when any of them has signal: one without gets the skip's zeros
            return jax.tree.map(lambda x: jnp.where(signal, x, jnp.zeros_like(x)), out)

        branches = [lambda w=w: scored_at(w) for w in plan.widths]
        shapes = jax.eval_shape(branches[0])
        branches.append(lambda: jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes))
        branch = jnp.where(fsdp.over_sweep(signal), branch, len(plan.widths))
    return jax.lax.switch(branch, branches)


def _devices(axis_name: str | None):
    """Devices on the mesh axis (1 without one): a per-device constant that the update's psum adds back to 1."""
    return 1.0 if axis_name is None else jax.lax.psum(1.0, axis_name)


def token_values(plan: Plan, score, policy: LMPolicy, base, trainable, turns: Turns, seqs) -> jax.Array:
    """Token-level credit: every generated token's value at the context it was chosen in, from one forward of
    the acting policy (`score`: the rollout path's scorer), no gradient: [T, N, A_l, M] (0 off the loss tokens)."""
    values = score(plan, policy, base, trainable, turns, seqs)[2]
    return jax.lax.stop_gradient(values) * turns.token_mask()
