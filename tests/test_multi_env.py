"""One run over several environments, jitted and on the host: a calculator (jitted) and the code judge (Python,
sandboxed) in one mixture, one compiled update, each environment's rollout metrics and its own evaluation."""

import jax
import numpy as np
import pytest

from jaxmarl_llm.tokenizers import GAMES_BPE


def _trainer():
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import validate_lm_rl
    from tiny_configs import tiny_lm_rl

    c = tiny_lm_rl("text/mixture", GAMES_BPE,
                   env_kwargs={"games": ("text/calculator", "host/code"), "weights": (1.0, 1.0),
                               "game_kwargs": {"calculator": {"digits": 2, "call_credit": 0.5},
                                               "code": {"max_action_tokens": 24, "capacity": 384, "workers": 2}}},
                   model={"max_position_embeddings": 416})
    c.policy.actions = "free"
    c.algo, c.group_size, c.num_envs, c.num_turns, c.lr = "ppo", 1, 8, 3, 1e-2
    c.in_graph_eval.update(every=1, episodes=4, opponents=("random",))
    c.run.transcripts_every = 0
    validate_lm_rl(c)
    return lm_rl.make_train(c)


def test_a_run_over_a_jitted_and_a_host_environment_logs_each_ones_metrics_and_evaluation():
    """Two updates: each environment's share of the episodes and its return; each evaluated alone, greedy
    (`eval/<env>/...`), and the calculator's numbers equal per_game.alone played outside the update on the
    calculator env itself with the same adapter; the code judge ran only the episodes that drew it."""
    from jaxmarl_llm.evaluation import per_game
    from jaxmarl_llm.policies.lm_policy import model_weights

    trainer = _trainer()
    env = trainer.env
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    step = jax.jit(trainer.update)
    for _ in range(2):
        state, metrics = step(state, trainer.hparams, trainer.base)
    metrics = {k: float(v) for k, v in metrics.items()}
    for key in ("episodes_calculator", "episodes_code", "return_calculator", "return_code",
                "eval/calculator/solved", "eval/calculator/mean_return", "eval/calculator/format_error",
                "eval/code/solved", "eval/code/mean_return"):
        assert np.isfinite(metrics[key]), key
    assert metrics["episodes_calculator"] + metrics["episodes_code"] == pytest.approx(1.0)
    assert 0 < metrics["episodes_code"] < 1
    calculator, code = env.games
    # the host built a game for each code episode of the rollouts and of the evaluations, none for the others
    assert 0 < code.games_started < 2 * trainer.config.num_envs + 2 * 4 and not code.live

    policy = per_game.game_policy(trainer.policy, calculator)
    lora = jax.tree.map(lambda x: x[0], state.trainable["lora"])
    want = jax.jit(per_game.alone(calculator, policy, trainer.config.num_turns, 4, trainer.config.in_graph_eval.seed))(
        model_weights(state.trainable, trainer.base), (lora,))
    for k in ("solved", "mean_return", "format_error"):
        assert metrics[f"eval/calculator/{k}"] == pytest.approx(float(want[k]), abs=1e-6), k
