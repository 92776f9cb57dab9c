"""Memory of the compiled LM update, from XLA's own view of it (compiled, nothing runs)."""

import re

import jax

from jaxmarl_llm.run import entry
from jaxmarl_llm.run.cli import load_config_file


def _compiled_update(config):
    trainer, _, _, _ = entry.build(config)
    state = jax.eval_shape(trainer.init, jax.random.PRNGKey(0), trainer.hparams)
    return trainer, jax.jit(trainer.update).lower(state, trainer.hparams, trainer.base).compile()


def _array_shapes(hlo: str) -> set[tuple[int, ...]]:
    """Every array shape an instruction of the compiled program produces."""
    return {tuple(int(d) for d in dims.split(",")) for dims in re.findall(r"= \w+\[([\d,]+)\]", hlo)}


def test_reread_update_holds_no_copy_of_the_base_per_turn():
    """Tic-tac-toe from scratch scores its 9 turns one at a time (games end early; ended turns are skipped).
    Its gradient once stacked a copy of every base weight per turn ([9, ...weight] buffers: 46 GiB at 0.6B for 4
    games, the OOM of a real-size run); no buffer of the compiled update has that shape now."""
    c = load_config_file("configs/tic_tac_toe.py:scratch")
    c.mesh.num_devices, c.num_envs, c.in_graph_eval.every = 1, 4, 0
    c.model.update(hidden_size=256, intermediate_size=2048, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=64)
    trainer, compiled = _compiled_update(c)
    turns = trainer.plan.num_turns
    assert not trainer.plan.incremental and turns == 9
    stacked = {(turns,) + x.shape for x in jax.tree.leaves(trainer.base) if x.ndim >= 2}
    assert stacked & _array_shapes(compiled.as_text()) == set()
