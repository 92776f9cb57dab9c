"""Per-device memory of an LM RL run: what the base, the adapters, Adam, the KV cache and the loss's activations
take on each device, for a model, a mesh (num_devices, mesh.fsdp) and a batch.

    rows = lm_rl_memory(cfg, num_devices=16, fsdp=8, num_envs=128, lm_seats=2, context=1664, ...)
    print(format_table(rows))
    rows = trainer_memory(trainer)          # a built trainer: the loss's kept activations counted by JAX

`lm_rl_memory` is arithmetic for planning a layout before anything is built (configs/qwen3_8b_fsdp.py's docstring
is its table); the weights, adapters, Adam and KV-cache entries follow the arrays the trainer builds, the
activation entries are formulas (below). `trainer_memory` replaces the largest of them, the activations the
loss's forward keeps for its backward, with JAX's own list of them (`loss_residual_bytes`, traced on shapes):
within 15% of XLA's analysis of the compiled update (tests/test_memory.py), a little high where XLA fuses some
away. `fit_memory` (num_microbatches / model.remat "auto") and `check_fits` (the start-up refusal) read it.
Bytes, per device.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import jax
import jax.numpy as jnp

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.models import fsdp as fsdp_lib
from jaxmarl_llm.models.config import ModelConfig, param_shapes, projection_shapes
from jaxmarl_llm.models.transformer import num_bytes
from jaxmarl_llm.parallel.device_memory import GIB, device_memory_bytes
from jaxmarl_llm.train.lm.paths import rollout_path
from jaxmarl_llm.train.lm.scoring import score_turns
from jaxmarl_llm.train.lm.seats import loss_seats


def _bytes(shapes, dtype_bytes: int) -> int:
    return sum(math.prod(s) * dtype_bytes for s in _leaves(shapes))


def _leaves(tree) -> list[tuple[int, ...]]:
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in _leaves(v)]
    return [tree]


def lm_rl_memory(cfg: ModelConfig, *, num_devices: int, fsdp: int, num_envs: int, lm_seats: int, context: int,
                 loss_seats: int, scored_tokens: int, movers: int | None = None, adapter_slots: int = 1,
                 lora_rank: int = 16,
                 lora_targets: Sequence[str] = ("q", "k", "v", "o", "gate", "up", "down"),
                 num_minibatches: int = 1, num_microbatches: int = 1, loss_kept: int | None = None,
                 rows_per_episode: int = 1) -> dict[str, int]:
    """{entry: bytes per device}, in the order format_table prints them; the last entry is the peak estimate.

    num_envs episodes per update over num_devices (num_envs / num_devices each: data and fsdp split the batch);
    lm_seats: LM seats per episode (KV-cache rows); movers: the seats that act in a turn (1 in turn-based games;
    default all); context: a row's KV capacity (env capacity + max action tokens) and the loss forward's width;
    loss_seats: learning seats per episode (rows of the loss); cfg.remat: each layer rematerialised (its input
    kept for the backward, as with fsdp > 1);
    scored_tokens: action tokens a learning seat scores per episode (where the loss computes logits);
    rows_per_episode: loss rows a learning seat gives per episode (1 on the incremental path, one transcript; the
    game's turns on the re-read path, one prompt + reply per turn, each `context` wide);
    loss_kept: the loss's kept activations when counted (`loss_residual_bytes`), else the formula below."""
    wb, cb = cfg.weight_dtype.itemsize, cfg.compute_dtype.itemsize
    d, q, kv, f, n, v = (cfg.hidden_size, cfg.q_size, cfg.kv_size, cfg.intermediate_size, cfg.num_layers,
                         cfg.vocab_size)
    envs = num_envs // num_devices
    full = param_shapes(cfg)
    out: dict[str, int] = {}
    # exact: each device's blocks of the base (models/fsdp.py param_specs), in the stored dtype
    out["base weights (sharded over fsdp)"] = _bytes(fsdp_lib.local_shapes(cfg, fsdp), wb)
    # transient: the whole weights a forward gathers (in the compute dtype), one layer at a time; the embedding
    # and the LM head are gathered on their own, and are bigger than a layer at large vocabularies
    sharded = fsdp > 1
    remat = sharded or cfg.remat  # only each layer's input [tokens, D] stays for the backward
    out["one gathered layer (transient)"] = _bytes(full["layers"], cb) // n if sharded else 0
    out["gathered embedding or LM head (transient)"] = v * d * cb if sharded else 0
    # exact: float32 LoRA A [N, in, r] and B [N, r, out] per target and slot, a value head [D] + bias per slot
    shapes = projection_shapes(cfg)
    lora = adapter_slots * sum(n * (shapes[t][0] + shapes[t][1]) * lora_rank for t in lora_targets) * 4
    heads = adapter_slots * (d + 1) * 4
    out["adapters + value heads (float32, replicated)"] = lora + heads
    out["Adam moments (2 x adapters + heads)"] = 2 * (lora + heads)
    out["gradients (transient)"] = lora + heads
    # exact: the rollout's KV cache, [N, rows, context, Hkv, head_dim] for keys and for values
    out["KV cache (rollout)"] = 2 * n * envs * lm_seats * context * kv * cb
    # the movers' rows are taken out of it for a turn (train/lm/rollout.py act_incremental): a copy
    out["KV cache: movers' rows (transient copy)"] = 2 * n * envs * (movers or lm_seats) * context * kv * cb
    # estimate, the loss of one microbatch (train/lm/scoring.py): `tokens` = rows x width. A layer's
    # intermediates are ~(4 D + 2 Q + 2 KV + 3 F) values a token (norms, q/k/v, attention out, the MLP's three;
    # attention keeps only a logsumexp). Sharded (fsdp > 1) or with cfg.remat every layer is rematerialised
    # (models/fsdp.py): only its input [tokens, D] stays for the backward; else autodiff keeps every layer's
    # intermediates.
    # One layer's intermediates and their gradients are live at a time; logits are float32 at the scored
    # positions only (x3: logits, log-softmax, its gradient)
    rows = envs * loss_seats * rows_per_episode // (num_minibatches * num_microbatches)
    tokens = rows * context
    per_token_layer = (4 * d + 2 * q + 2 * kv + 3 * f) * cb
    out["loss: kept for the backward (all layers)"] = (n * tokens * (d * cb if remat else per_token_layer)
                                                       if loss_kept is None else loss_kept)
    # with cfg.remat on one device, a layer's backward holds its recomputed intermediates beside their gradients
    # and the gradients' own products (XLA:CPU keeps ~12 [tokens, F] buffers of the MLP alive there): 3 layers'
    # worth, measured against XLA's analysis (tests/test_memory.py); the sharded program's figure is the formula's
    out["loss: one layer's intermediates + grads"] = (3 if cfg.remat and not sharded else 2) * tokens * per_token_layer
    out["loss: logits at scored tokens (float32, x3)"] = 3 * rows * (scored_tokens // rows_per_episode) * v * 4
    persistent = (out["base weights (sharded over fsdp)"] + out["adapters + value heads (float32, replicated)"]
                  + out["Adam moments (2 x adapters + heads)"])
    gathered = max(out["one gathered layer (transient)"], out["gathered embedding or LM head (transient)"])
    rollout = out["KV cache (rollout)"] + out["KV cache: movers' rows (transient copy)"] + gathered
    loss = (out["loss: kept for the backward (all layers)"] + out["loss: one layer's intermediates + grads"]
            + out["loss: logits at scored tokens (float32, x3)"] + out["gradients (transient)"] + gathered)
    out["peak estimate: persistent + max(rollout, loss)"] = persistent + max(rollout, loss)
    return out


def format_table(columns: dict[str, dict[str, int]]) -> str:
    """{column title: lm_rl_memory(...)} -> a text table, one line per entry, GiB with two decimals per column
    (what a config's docstring shows)."""
    names = list(next(iter(columns.values())))
    width = max(len(k) for k in names)
    head = " " * width + "".join(f"  {title:>12}" for title in columns)
    lines = [f"{k:<{width}}" + "".join(f"  {col[k] / GIB:8.2f} GiB" for col in columns.values()) for k in names]
    return "\n".join([head.rstrip(), *lines])


def loss_residual_bytes(trainer, num_devices: int = 1, platform: str | None = None) -> int:
    """Bytes one (micro)batch's loss forward keeps for its backward on a device, counted by JAX itself (the saved
    residuals of the trainer's own scorer, traced on shapes, nothing compiled or run): the exact figure behind
    "loss: kept for the backward", at the widest loss forward. `platform`: whose bytes (default this backend's)."""
    from jax._src.ad_checkpoint import saved_residuals  # public as jax.ad_checkpoint.print_saved_residuals

    plan, policy, base = trainer.plan, trainer.policy, trainer.base
    path = rollout_path(plan)
    key = jax.random.PRNGKey(0)
    state = jax.eval_shape(trainer.init, key, trainer.hparams)
    n = plan.num_envs // num_devices
    parts = plan.num_minibatches * plan.num_microbatches

    def minibatch(state, base):  # the loss's first (micro)batch, as the update cuts it
        turns, seats, final = trainer.rollout(key, base, state.trainable, state.pool, jnp.arange(n))
        train = loss_seats(plan, turns, seats.learns)
        seqs = path.episode_seqs(plan, final, train, seats.learns)
        if seqs is None:  # re-read: a slice of every episode's turns
            return jax.tree.map(lambda x: x[: x.shape[0] // plan.num_minibatches], train._replace(info={})), None
        return jax.tree.map(lambda x: x[:, : n // parts], train._replace(info={})), seqs[: n // parts]

    mb, seqs = jax.eval_shape(minibatch, state, base)
    width = max(plan.widths) if plan.widths else None

    def scored(trainable, mb, seqs, base):
        base = jax.lax.stop_gradient(base)  # frozen, as in the update (16-bit weights refuse a gradient)
        if seqs is None:  # re-read: every row, the loss's widest forward (`path.score` switches on the rows)
            return sum(x.sum() for x in score_turns(plan, policy, base, trainable, mb))
        return sum(x.sum() for x in path.score(plan, policy, base, trainable, mb, seqs, False, width))

    kept = saved_residuals(scored, state.trainable, mb, seqs, base)
    # the base's layer weights sliced for the layer scan (all layers but the one `read_at` runs apart) are
    # residuals to JAX but views to XLA, which reads them in place: no buffer of their own
    cfg = policy.cfg
    layer = {tuple(s) for s in _leaves(param_shapes(cfg)["layers"])}  # [layers, ...] each
    views = {s[1:] for s in layer} | {(cfg.num_layers - 1,) + s[1:] for s in layer}

    def view(a, why):
        return ("output of slice" in why or "output of squeeze" in why) and tuple(a.shape) in views

    # XLA:CPU computes bfloat16 math in float32 and keeps those float32 values (a GPU / TPU keeps bfloat16)
    cpu = (platform or jax.default_backend()) == "cpu"
    return sum(math.prod(a.shape) * (4 if cpu and a.dtype == jnp.bfloat16 else a.dtype.itemsize)
               for a, why in kept if "argument" not in why and not view(a, why))


def trainer_memory(trainer, num_devices: int = 1, fsdp: int = 1, counted: bool = True,
                   platform: str | None = None) -> dict[str, int]:
    """`lm_rl_memory` of a built LM RL trainer (train/lm_rl.py make_train): its model, plan and env, with the
    loss's kept activations counted by JAX (`loss_residual_bytes`; `counted=False`: the formula, no tracing).
    With fsdp > 1 the formula's: the sharded program rematerialises every layer (models/fsdp.py) and keeps only
    the layers' inputs, which a trace of the unsharded scorer would count as whole."""
    plan, cfg, lora = trainer.plan, trainer.policy.cfg, trainer.config.lora
    counted = counted and fsdp == 1
    m = plan.max_action_tokens
    return lm_rl_memory(
        cfg, num_devices=num_devices, fsdp=fsdp, num_envs=plan.num_envs, lm_seats=plan.num_lm, movers=plan.movers,
        context=trainer.env.capacity + m, loss_seats=len(plan.loss_agents), scored_tokens=plan.num_turns * m,
        adapter_slots=plan.num_slots * (1 + plan.pool_size), lora_rank=int(lora.rank), lora_targets=tuple(lora.targets),
        num_minibatches=plan.num_minibatches, num_microbatches=plan.num_microbatches,
        rows_per_episode=1 if plan.incremental else plan.num_turns,
        loss_kept=loss_residual_bytes(trainer, num_devices, platform) if counted else None)


PEAK = "peak estimate: persistent + max(rollout, loss)"


def _mesh(config) -> tuple[int, int]:
    return int(config.mesh.num_devices or jax.device_count()), int(config.mesh.get("fsdp", 1))


def fit_memory(trainer, build: Callable, config):
    """`num_microbatches="auto"` and / or `model.remat="auto"`: the cheapest trainer (built by `build(plan,
    remat)`) whose memory plan fits `device_memory_bytes`; the most frugal one when none does (the start-up
    check then says so). Cheapest first: as it is; remat alone (one more forward of the loss, the whole batch in
    one slice); then more slices without remat (one more forward, smaller matrices); then slices and remat."""
    plan = trainer.plan
    num_devices, fsdp = _mesh(config)
    envs = plan.num_envs // num_devices // plan.num_minibatches  # a minibatch's episodes on a device
    auto_m = config.num_microbatches == "auto" and plan.incremental
    splits = [m for m in range(1, envs + 1) if envs % m == 0] if auto_m else [plan.num_microbatches]
    remat = config.model.get("remat", "off")
    remats = (False, True) if remat == "auto" and fsdp == 1 else (remat == "on",)  # fsdp > 1 remats anyway
    order = [(r, m) for m in splits[:1] for r in remats] + [(r, m) for r in remats for m in splits[1:]]
    budget = device_memory_bytes(config)
    for r, m in order:
        trainer = build(dataclasses.replace(plan, num_microbatches=m), r)
        if trainer_memory(trainer, num_devices, fsdp)[PEAK] <= budget:
            break
    return trainer


def check_fits(trainer, config, counted: bool | None = None) -> dict[str, int]:
    """The run's memory plan per device; ConfigError (one line: what it needs, what the device has, a setting that
    would fit) when its estimate exceeds `device_memory_bytes`. The estimate errs high (it counts every activation
    autodiff keeps; XLA fuses some away): a run refused by a small margin may set mesh.device_memory_gib.
    `counted` (default: for a model of more than 1/64 of the device) counts the loss's activations by tracing."""
    num_devices, fsdp = _mesh(config)
    have = device_memory_bytes(config)
    if counted is None:  # a small model (tests, tiny runs): the formula, no tracing
        counted = num_bytes(trainer.base) * 64 >= have
    rows = trainer_memory(trainer, num_devices, fsdp, counted)
    need = rows[PEAK]
    if need <= have:
        return rows
    fixed = (rows["base weights (sharded over fsdp)"] + rows["adapters + value heads (float32, replicated)"]
             + rows["Adam moments (2 x adapters + heads)"])
    plan = trainer.plan
    fixes = []  # the settings that would cut the loss's activations, where the run has not set them
    if fsdp == 1 and not trainer.policy.cfg.remat and config.model.get("remat", "off") != "auto":
        fixes.append("model.remat=on keeps each layer's input only ('auto': only where needed)")
    if plan.incremental and config.num_microbatches != "auto":
        fixes.append("num_microbatches='auto' picks the fewest loss slices that fit")
    if fixed >= have:
        hint = (f"the weights and Adam alone take {fixed / GIB:.1f} GiB: shard the base over more devices "
                f"(mesh.fsdp) or use a smaller model")
    elif fixes:
        hint = "; ".join(fixes)
    else:
        share = (have - fixed) / max(need - fixed, 1)
        per_device = plan.num_envs // num_devices
        hint = f"num_envs={max(int(per_device * share), 1) * num_devices} or fewer would fit"
    raise ConfigError(f"memory: this run needs about {need / GIB:.1f} GiB per device, the device has "
                      f"{have / GIB:.1f} GiB (mesh.device_memory_gib to set it); {hint}")
