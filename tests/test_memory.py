"""Memory of the compiled LM update, from XLA's own view of it (compiled, nothing runs)."""

import copy
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.run import entry
from jaxmarl_llm.run.cli import load_config_file
from jaxmarl_llm.train.config import validate_lm_rl
from jaxmarl_llm.train.lm import memory
from jaxmarl_llm.train.lm import seats as lm_seats
from jaxmarl_llm.train.lm.paths import rollout_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _compiled_update(config):
    trainer, _, _, _ = entry.build(config)
    state = jax.eval_shape(trainer.init, jax.random.PRNGKey(0), trainer.hparams)
    return trainer, jax.jit(trainer.update).lower(state, trainer.hparams, trainer.base).compile()


def _array_shapes(hlo: str) -> set[tuple[int, ...]]:
    """Every array shape an instruction of the compiled program produces."""
    return {tuple(int(d) for d in dims.split(",")) for dims in re.findall(r"= \w+\[([\d,]+)\]", hlo)}


def test_reread_update_holds_no_copy_of_the_base_per_turn():
    """Tic-tac-toe from scratch re-reads its 9 turns (games end early). A per-turn loop in its gradient once
    stacked a copy of every base weight per turn ([9, ...weight] buffers: 46 GiB at 0.6B for 4
    games, the OOM of a real-size run); no buffer of the compiled update has that shape now."""
    c = load_config_file("configs/tic_tac_toe.py:scratch")
    c.mesh.num_devices, c.num_envs, c.in_graph_eval.every = 1, 4, 0
    c.model.update(hidden_size=256, intermediate_size=2048, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=64)
    trainer, compiled = _compiled_update(c)
    turns = trainer.plan.num_turns
    assert not trainer.plan.incremental and turns == 9
    stacked = {(turns,) + x.shape for x in jax.tree.leaves(trainer.base) if x.ndim >= 2}
    assert stacked & _array_shapes(compiled.as_text()) == set()


def _small_model(c, **kw):
    c.mesh.num_devices, c.in_graph_eval.every = 1, 0
    c.model.update(hidden_size=256, intermediate_size=768, num_layers=4, num_heads=4, num_kv_heads=2, head_dim=64)
    for k, v in kw.items():
        c[k] = v
    return c


def _xla_bytes(compiled) -> int:
    m = compiled.memory_analysis()
    return m.argument_size_in_bytes + m.temp_size_in_bytes


@pytest.mark.parametrize("remat", ["off", "on"])
@pytest.mark.parametrize("spec,kw", [
    ("tic_tac_toe.py", {"num_envs": 8, "group_size": 8}),  # incremental: KV cache, whole episodes in the loss
    ("tic_tac_toe.py:scratch", {"num_envs": 8}),  # re-read: every turn's prompt and reply, one batched forward
])
def test_memory_plan_within_15_percent_of_xlas_analysis(spec, kw, remat):
    """The plan of a built trainer (train/lm/memory.py trainer_memory) against XLA's own analysis of the compiled
    update: arguments + temporaries, per device, float32 (XLA:CPU adds float32 copies of bfloat16 operands that a
    GPU does not make); with the layers kept and rematerialised (model.remat)."""
    c = _small_model(load_config_file(os.path.join(ROOT, "configs", spec)), **kw)
    c.model.remat = remat
    trainer, compiled = _compiled_update(c)
    assert trainer.policy.cfg.remat == (remat == "on")
    planned = memory.trainer_memory(trainer)[memory.PEAK]
    xla = _xla_bytes(compiled)
    assert abs(planned - xla) <= 0.15 * xla, (planned / 2**20, xla / 2**20)


def _refused_then_auto_fits(c, lean, full, hint, set_auto):
    """With a device budget between the plans of `full` and `lean` ((trainer, compiled update) each; `full` built
    from `c`): XLA's analysis of lean's update fits it and full's does not; full is refused at start-up in one
    line naming `hint`; `c` after `set_auto(c)` compiles to an update that fits and passes the check.
    Returns (that trainer, full's plan)."""
    plan_full, plan_lean = (memory.trainer_memory(t)[memory.PEAK] for t, _ in (full, lean))
    budget = (plan_full + plan_lean) / 2
    assert _xla_bytes(lean[1]) < budget < _xla_bytes(full[1])
    c.mesh.device_memory_gib = budget / 2**30
    with pytest.raises(ConfigError) as err:
        memory.check_fits(full[0], c, counted=True)
    assert hint in str(err.value) and "\n" not in str(err.value)
    set_auto(c)
    auto, compiled_auto = _compiled_update(c)
    assert _xla_bytes(compiled_auto) < budget
    memory.check_fits(auto, c, counted=True)  # no error
    return auto, plan_full


def test_auto_microbatches_fit_where_one_slice_does_not():
    """With a device budget between the plans of 1 and 4 loss slices, num_microbatches="auto" picks a split that
    fits, XLA's analysis of its compiled update fits too (that of one slice does not), and the one-slice run is
    refused at start-up in one line that names the fix."""
    c = _small_model(load_config_file(os.path.join(ROOT, "configs", "tic_tac_toe.py")), num_envs=8, group_size=8)
    one, compiled_one = _compiled_update(c)
    c4 = copy.deepcopy(c)
    c4.num_microbatches = 4
    four, compiled_four = _compiled_update(c4)
    auto, _ = _refused_then_auto_fits(c, (four, compiled_four), (one, compiled_one), "num_microbatches='auto'",
                                      lambda c: c.update(num_microbatches="auto"))
    assert auto.plan.num_microbatches > 1


def test_remat_gives_the_same_gradient_and_auto_turns_it_on_where_the_run_would_not_fit():
    """Tic-tac-toe from scratch (re-read: no loss slices to cut): the same loss and adapter gradient with each
    layer rematerialised (model.remat, to float rounding); with a device budget between the two plans the run is
    refused in one line that names model.remat, "auto" turns it on, and XLA's analysis of that compiled update
    fits the budget where the one without remat does not."""
    c = _small_model(load_config_file(os.path.join(ROOT, "configs", "tic_tac_toe.py:scratch")), num_envs=8)
    kept, compiled_kept = _compiled_update(c)
    cr = copy.deepcopy(c)
    cr.model.remat = "on"
    remat, compiled_remat = _compiled_update(cr)

    def loss_and_grad(trainer):
        plan, policy = trainer.plan, trainer.policy
        path = rollout_path(plan)
        state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
        turns, seats, final = trainer.rollout(jax.random.PRNGKey(1), trainer.base, state.trainable, state.pool,
                                              jnp.arange(plan.num_envs))
        train = lm_seats.loss_seats(plan, turns, seats.learns)
        seqs = path.episode_seqs(plan, final, train, seats.learns)

        def scored(trainable):
            return path.score(plan, policy, trainer.base, trainable, train, seqs)[0].sum()

        return jax.jit(jax.value_and_grad(scored))(state.trainable)

    (v0, g0), (v1, g1) = loss_and_grad(kept), loss_and_grad(remat)
    np.testing.assert_allclose(v1, v0, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g0)):  # another summation order: rounding apart
        assert np.linalg.norm(a - b) <= 1e-5 * np.linalg.norm(b)
    auto, plan_kept = _refused_then_auto_fits(c, (remat, compiled_remat), (kept, compiled_kept), "model.remat=on",
                                              lambda c: c.model.update(remat="auto"))
    assert auto.policy.cfg.remat and auto.plan.num_microbatches == 1
    c.mesh.device_memory_gib = 2 * plan_kept / 2**30  # room enough: "auto" keeps the activations
    assert not _compiled_update(c)[0].policy.cfg.remat


def test_device_memory_gib_and_auto_are_checked():
    c = load_config_file(os.path.join(ROOT, "configs", "tic_tac_toe.py"))
    for key, value, what in [("num_microbatches", "some", "positive integer"), ("num_microbatches", 0, "positive"),
                             ("mesh.device_memory_gib", -1.0, ">= 0"),
                             ("model.remat", "True", "'off', 'on' or 'auto'")]:
        bad = copy.deepcopy(c)
        group, _, name = key.rpartition(".")
        (bad[group] if group else bad)[name] = value
        with pytest.raises(ConfigError, match=what):
            validate_lm_rl(bad)


def test_memory_plan_of_qwen3_0_6b_within_15_percent_of_xlas_analysis():
    """The smallest real preset, bfloat16, 4 tic-tac-toe games (the run that once asked for 40 GB): the plan
    against XLA's analysis of the compiled update (compiled, not run). On CPU the plan counts bfloat16
    activations at 4 bytes: XLA:CPU computes bfloat16 math in float32 and keeps those values."""
    c = load_config_file(os.path.join(ROOT, "configs", "tic_tac_toe.py:scratch"))
    c.mesh.num_devices, c.num_envs, c.in_graph_eval.every = 1, 4, 0
    c.model.update(preset="qwen3-0.6b", dtype="bfloat16", max_position_embeddings=512)
    trainer, compiled = _compiled_update(c)
    planned, xla = memory.trainer_memory(trainer)[memory.PEAK], _xla_bytes(compiled)
    assert abs(planned - xla) <= 0.15 * xla, (planned / 2**30, xla / 2**30)
