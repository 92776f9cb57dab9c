"""Several games in one env (envs/text/mixture.py): the draw follows the weights, an episode is its game played alone,
the candidates map onto each game's, and a trainer on the mixture logs every game's evaluation, Kuhn poker's
exploitability equal to the one computed outside on the Kuhn env itself."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs import registry
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.mixture import GAME_INFO
from jaxmarl_llm.tokenizers import _WORD_RE
from jaxmarl_llm.train.lm.setup import build_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAMES = ("text/tic_tac_toe", "text/kuhn_poker", "text/negotiation")
KWARGS = {"games": GAMES, "game_kwargs": {"tic_tac_toe": {"board": "tagged", "history": False, "capacity": 32},
                                         "negotiation": {"rules": False}}}


@pytest.fixture(scope="module")
def env():
    tokenizer = build_tokenizer("word", "text/mixture", KWARGS)
    return registry.make("text/mixture", tokenizer=tokenizer, **KWARGS)


def test_the_mixture_is_built_from_its_games(env):
    assert env.game_names == ("tic_tac_toe", "kuhn_poker", "negotiation") and env.num_agents == 2
    assert env.capacity == max(g.capacity for g in env.games) > min(g.capacity for g in env.games)
    assert env.max_action_tokens == max(g.max_action_tokens for g in env.games)
    assert env.appends_actions is False and env.max_movers == 1 and env.builtin_players == ("random",)
    # every game's words are whole words of the one tokenizer: no text falls back to characters
    tok = env.tokenizer
    for text in ("Kuhn poker. Your card: Q.", "You have wood 2, stone 2, gold 2.", "X5|O2|3\nYour move.",
                 "Move: offer stone for gold", "Move: bet"):
        assert all(piece in tok.index for piece in _WORD_RE.findall(text)), text
    # the union lists `Move: pass` (Kuhn poker and negotiation) once; candidate k of game g is union column idx[k]
    assert len(env.action_candidates) == 9 + 2 + 8 - 1
    for game, idx in zip(env.games, env.candidate_index):
        assert [env.action_candidates[i] for i in idx] == list(game.action_candidates)
    with pytest.raises(ValueError, match="game_kwargs"):
        registry.make("text/mixture", games=GAMES, game_kwargs={"chess": {}})
    with pytest.raises(ValueError, match="weights"):
        registry.make("text/mixture", games=GAMES, weights=(1, 1))


def test_each_game_is_drawn_about_as_often_as_its_weight(env):
    weighted = registry.make("text/mixture", tokenizer=env.tokenizer, weights=(0.5, 0.3, 0.2), **KWARGS)
    n = 2000
    games = np.asarray(jax.jit(jax.vmap(weighted.draw_game))(jax.random.split(jax.random.PRNGKey(0), n)))
    _, states = jax.jit(jax.vmap(weighted.reset))(jax.random.split(jax.random.PRNGKey(0), n)[:64])
    np.testing.assert_array_equal(np.asarray(states.game), games[:64])  # reset plays the drawn game
    for g, w in enumerate(weighted.weights):
        share = np.mean(games == g)
        assert abs(share - w) < 4 * np.sqrt(w * (1 - w) / n), (g, share, w)
    uniform = np.asarray(jax.jit(jax.vmap(env.draw_game))(jax.random.split(jax.random.PRNGKey(1), n)))
    assert all(abs(np.mean(uniform == g) - 1 / 3) < 0.05 for g in range(3))


def _keys_for(env, game: int, count: int) -> list:
    """Reset keys whose episode plays `game`."""
    keys = jax.random.split(jax.random.PRNGKey(7), 64)
    drawn = np.asarray(jax.vmap(env.draw_game)(keys))
    return [keys[i] for i in np.flatnonzero(drawn == game)[:count]]


def _padded(env, action: TextAction) -> TextAction:
    width = env.max_action_tokens - action.tokens.shape[-1]
    return TextAction(jnp.pad(action.tokens, ((0, 0), (0, width)), constant_values=env.codec.pad_id), action.length)


@pytest.mark.parametrize("game", [0, 1, 2], ids=["tic_tac_toe", "kuhn_poker", "negotiation"])
def test_an_episode_of_the_mixture_is_its_game_played_alone(env, game):
    """Same reset key, same step keys, same actions (the game's random legal moves; in one episode a malformed
    first reply): the same rewards, ends, info and observations (the mixture's padded to its width); the candidate
    mask is the game's in the union's columns and nothing else; the mixture's random player is the game's."""
    sub, idx = env.games[game], env.candidate_index[game]
    cap, pad = sub.capacity, env.codec.pad_id
    others = np.setdiff1d(np.arange(len(env.action_candidates)), idx)
    m_reset, m_step, m_mask = jax.jit(env.reset), jax.jit(env.step), jax.jit(env.candidate_mask)
    s_reset, s_step, s_mask = jax.jit(sub.reset), jax.jit(sub.step), jax.jit(sub.candidate_mask)
    m_random, s_random = jax.jit(env.random_action), jax.jit(sub.random_action)
    for episode, key in enumerate(_keys_for(env, game, 3)):
        (m_obs, m_st), (s_obs, s_st) = m_reset(key), s_reset(key)
        for t in range(10):
            assert int(m_st.game) == game
            np.testing.assert_array_equal(np.asarray(m_obs.tokens[:, :cap]), np.asarray(s_obs.tokens))
            assert (np.asarray(m_obs.tokens[:, cap:]) == pad).all()
            np.testing.assert_array_equal(np.asarray(m_obs.length), np.asarray(s_obs.length))
            np.testing.assert_array_equal(np.asarray(env.active(m_st)), np.asarray(sub.active(s_st)))
            mask = np.asarray(m_mask(m_st))
            np.testing.assert_array_equal(mask[:, idx], np.asarray(s_mask(s_st)))
            assert not mask[:, others].any()
            if bool(s_st.done):
                break
            k_act, k_step = jax.random.split(jax.random.fold_in(key, t))
            action = s_random(k_act, s_st)
            m_action = m_random(k_act, m_st)
            np.testing.assert_array_equal(np.asarray(m_action.tokens), np.asarray(_padded(env, action).tokens))
            if episode == 2 and t == 0:  # a malformed reply: a format error ends the game
                action = TextAction(jnp.full_like(action.tokens, pad), jnp.ones_like(action.length))
            m_obs, m_st, m_r, m_term, m_trunc, m_info = m_step(k_step, m_st, _padded(env, action))
            s_obs, s_st, s_r, s_term, s_trunc, s_info = s_step(k_step, s_st, action)
            for a, b in ((m_r, s_r), (m_term, s_term), (m_trunc, s_trunc), (m_st.done, s_st.done)):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            for name, v in m_info.items():
                want = (s_info[name] if name in s_info else np.zeros_like(v)) if not name.startswith(GAME_INFO) else (
                    np.full(2, name == GAME_INFO + env.game_names[game]))
                np.testing.assert_array_equal(np.asarray(v), np.asarray(want), err_msg=name)
            if episode == 2 and t == 0:
                assert bool(s_st.done) and np.asarray(s_info["format_error"]).any()
        assert bool(s_st.done), "the episode ended within 10 moves"


def test_the_candidate_mask_is_the_live_games_in_the_union(env):
    """Over a batch of random positions of every game: the live game's valid replies are exactly its own mask, and a
    reply of another game (one it does not list) is never valid."""
    n = 96
    keys = jax.random.split(jax.random.PRNGKey(3), n)
    _, st = jax.jit(jax.vmap(env.reset))(keys)
    step, rand = jax.jit(jax.vmap(env.step)), jax.jit(jax.vmap(env.random_action))
    mask = jax.jit(jax.vmap(env.candidate_mask))
    sub_masks = [jax.jit(jax.vmap(g.candidate_mask)) for g in env.games]
    for t in range(4):
        got = np.asarray(mask(st))  # [n, 2, K]
        games = np.asarray(st.game)
        for g, idx in enumerate(env.candidate_index):
            live = games == g
            own = np.asarray(sub_masks[g](st.games[g]))[live]
            np.testing.assert_array_equal(got[live][:, :, idx], own)
            outside = np.ones(len(env.action_candidates), bool)
            outside[idx] = False
            assert not got[live][:, :, outside].any()
            assert own.any(-1).all() or t > 0  # a game's first position has valid moves
        _, st, *_ = step(jax.random.split(jax.random.PRNGKey(10 + t), n), st,
                         rand(jax.random.split(jax.random.PRNGKey(20 + t), n), st))


def _mixture_trainer():
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import validate_lm_rl
    from tiny_configs import tiny_lm_rl

    c = tiny_lm_rl("text/mixture", "word", env_kwargs=KWARGS)
    c.policy.actions = "constrained"
    c.share_policy = True
    c.algo, c.group_size, c.num_envs, c.num_turns, c.lr, c.ent_coef = "ppo", 1, 6, 9, 3e-2, 0.05
    c.in_graph_eval.update(every=1, episodes=4, opponents=("random",))
    c.run.transcripts_every = 0
    validate_lm_rl(c)
    return lm_rl.make_train(c)


def test_a_trainer_on_the_mixture_logs_every_games_evaluation():
    """Two updates of self-play on the mixture: each game's own evaluation (its own opponents only) and its rollout
    share, all finite; Kuhn poker's exploitability equals `lm_exploitability` on the Kuhn env itself for the trained
    adapter, and the table behind it is what the mixture's policy plays at the mixture's own (padded) Kuhn states."""
    from jaxmarl_llm.evaluation import exploitability as lm_ex
    from jaxmarl_llm.policies.lm_policy import make_policy, model_weights

    trainer = _mixture_trainer()
    env, policy, config = trainer.env, trainer.policy, trainer.config
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    step = jax.jit(trainer.update)
    for _ in range(2):
        state, metrics = step(state, trainer.hparams, trainer.base)
    metrics = {k: float(v) for k, v in metrics.items()}
    for key in ("eval/tic_tac_toe/random_win", "eval/tic_tac_toe/random_seat1_draw", "eval/kuhn_poker/random_loss",
                "eval/kuhn_poker/exploitability", "eval/kuhn_poker/nash_conv_seat1", "eval/negotiation/random_draw",
                "episodes_tic_tac_toe", "return_kuhn_poker", "return_negotiation_agent1"):
        assert np.isfinite(metrics[key]), key
    assert all(np.isfinite(v) for v in metrics.values())
    assert sum(metrics[f"episodes_{g}"] for g in env.game_names) == pytest.approx(1.0)
    assert metrics["format_error_rate"] == 0.0

    # outside the update: a policy of the Kuhn env alone (its own candidates), the same model and adapter
    kuhn = env.games[env.game_names.index("kuhn_poker")]
    lora = jax.tree.map(lambda x: x[0], state.trainable["lora"])
    weights = model_weights(state.trainable, trainer.base)
    alone = make_policy(policy.cfg, config.lora, config.sampling, env.tokenizer, kuhn.max_action_tokens,
                        "constrained", kuhn.action_candidates)
    want = jax.jit(lambda w, a: lm_ex.lm_exploitability(kuhn, alone, w, (a, a)))(weights, lora)
    assert metrics["eval/kuhn_poker/exploitability"] == pytest.approx(float(want["exploitability"]), abs=1e-5)
    assert metrics["eval/kuhn_poker/nash_conv_seat0"] == pytest.approx(float(want["nash_conv_seat0"]), abs=1e-5)
    # ... and the mixture's policy (the union of replies) at the same observations padded to the mixture's width
    table = np.asarray(lm_ex.policy_table(kuhn, alone, weights, (lora, lora)))
    rows, _ = kuhn.infoset_views()
    ids = np.full((len(rows), env.capacity), env.codec.pad_id, np.int32)
    ids[:, : kuhn.views.width] = np.asarray(kuhn.views.ids)[rows]
    idx = env.candidate_index[env.game_names.index("kuhn_poker")]
    valid = np.zeros((len(rows), len(env.action_candidates)), bool)
    valid[:, idx] = kuhn.tree.infoset_legal[:-1, : len(idx)]
    lens = np.asarray(kuhn.views.lens)[rows]
    probs = np.asarray(policy.candidate_distribution(weights, {"lora": lora}, jnp.asarray(ids), jnp.asarray(lens),
                                                     jnp.asarray(valid)))
    np.testing.assert_allclose(probs[:, idx], table[:, : len(idx)], atol=1e-5)
    assert probs[:, np.setdiff1d(np.arange(probs.shape[1]), idx)].max() == 0.0


def test_each_game_is_evaluated_alone_against_the_opponents_it_has(env, monkeypatch):
    """versus_each_game plays each sub-env itself with a policy of its own replies and width, against the asked
    opponents that game offers (tic-tac-toe random and minimax, Kuhn poker random and equilibrium, negotiation
    random); keys are prefixed with the game's name."""
    from jaxmarl_llm.evaluation import per_game, play
    from jaxmarl_llm.policies.lm_policy import build_model, make_policy
    from jaxmarl_llm.train.config import lm_rl_defaults
    from tiny_configs import TINY_MODEL

    c = lm_rl_defaults()
    c.model.update(TINY_MODEL)
    cfg, _ = build_model(c.model, env.tokenizer, 0)
    policy = make_policy(cfg, c.lora, c.sampling, env.tokenizer, env.max_action_tokens, "constrained",
                         env.action_candidates)
    played = {}

    def versus(game, own, num_turns, offered, episodes, seed, chunk):
        played[game] = (own, offered)
        return lambda base, seat_loras: {f"{o}_win": 0.5 for o in offered}

    monkeypatch.setattr(play, "versus_builtins", versus)
    evaluate = per_game.versus_each_game(env, policy, 9, ("random", "minimax", "equilibrium"), 4)
    assert {g: played[g][1] for g in env.games} == {env.games[0]: ("random", "minimax"),
                                                   env.games[1]: ("random", "equilibrium"), env.games[2]: ("random",)}
    for game, (own, _) in played.items():
        assert own.candidates.replies == tuple(game.action_candidates)  # no reply of these games is another's prefix
        assert own.sampling.max_new_tokens == game.max_action_tokens and own.cfg is policy.cfg
    monkeypatch.setattr(per_game.exploitability, "lm_exploitability", lambda *a: {"exploitability": 0.25})
    assert evaluate(None, (None, None)) == {
        "tic_tac_toe/random_win": 0.5, "tic_tac_toe/minimax_win": 0.5, "kuhn_poker/random_win": 0.5,
        "kuhn_poker/equilibrium_win": 0.5, "kuhn_poker/exploitability": 0.25, "negotiation/random_win": 0.5}


@pytest.mark.parametrize("game,turns,opponents", [
    ("tic_tac_toe", 9, ("random", "minimax")), ("kuhn_poker", 3, ("random", "equilibrium")),
    ("negotiation", 6, ("random",))])
def test_single_game_variants_are_the_same_recipe_on_one_game(game, turns, opponents):
    """configs/multi_game.py:<game>: the single-game side of the comparison. Only the games, their turns, the
    evaluation opponents and the run folder differ from the three-game config; the game sees the same
    observations (its own keyword arguments kept)."""
    from jaxmarl_llm.run import entry
    from jaxmarl_llm.run.cli import load_config_file

    both = load_config_file(os.path.join(ROOT, "configs", "multi_game.py"))
    one = load_config_file(os.path.join(ROOT, "configs", f"multi_game.py:{game}"))
    differ = {k for k in set(both.keys()) | set(one.keys()) if both.get(k) != one.get(k)}
    assert differ - {"num_turns"} == {"env_kwargs", "in_graph_eval", "run"}  # tic-tac-toe's 9 turns are the mix's
    assert one.num_turns == turns and tuple(one.in_graph_eval.opponents) == opponents
    assert one.in_graph_eval.every == both.in_graph_eval.every and one.run.out_dir.endswith(game)
    assert dict(one.env_kwargs.game_kwargs) == {k: v for k, v in both.env_kwargs.game_kwargs.items() if k == game}
    one.mesh.num_devices = 1
    trainer, *_ = entry.build(one)
    assert trainer.env.game_names == (game,)
    with pytest.raises(ValueError, match="the variants are tic_tac_toe, kuhn_poker, negotiation"):
        load_config_file(os.path.join(ROOT, "configs", "multi_game.py:chess"))


def test_the_config_builds_with_every_games_opponents():
    """configs/multi_game.py at full size (nothing compiles): the mixture of the three games, one shared adapter, the
    longest game's turns; an evaluation opponent that no game of the mixture has is refused at start-up."""
    from jaxmarl_llm.errors import ConfigError
    from jaxmarl_llm.run import entry
    from jaxmarl_llm.run.cli import load_config_file

    config = load_config_file(os.path.join(ROOT, "configs", "multi_game.py"))
    config.mesh.num_devices = 1  # conftest forces 8 host devices; a CPU run has one
    trainer, *_ = entry.build(config)
    assert trainer.env.game_names == ("tic_tac_toe", "kuhn_poker", "negotiation")
    assert config.num_turns == 9  # tic-tac-toe's 9 moves (Kuhn poker 3, negotiation 6)
    assert trainer.plan.num_slots == 1 and trainer.plan.eval_opponents == ("random", "minimax", "equilibrium")
    config.env_kwargs.update(games=("text/tic_tac_toe", "text/negotiation"), weights=(1.0, 1.0))  # no poker:
    # nobody plays 'equilibrium'
    with pytest.raises(ConfigError, match="in_graph_eval.opponents: 'equilibrium'; its games offer minimax, random"):
        entry.build(config)


MIXED = {"games": ("text/tic_tac_toe", "text/calculator"),
         "game_kwargs": {"tic_tac_toe": {"capacity": 40, "max_action_tokens": 8, "board": "grid", "history": False,
                                         "exact": True},
                         "calculator": {"digits": 1, "capacity": 96, "max_action_tokens": 12}}}


@pytest.fixture(scope="module")
def mixed():
    from jaxmarl_llm.tokenizers import GAMES_BPE, HFTokenizer

    return registry.make("text/mixture", tokenizer=HFTokenizer(GAMES_BPE), **MIXED)


@pytest.mark.parametrize("game", [0, 1], ids=["tic_tac_toe", "calculator"])
def test_a_one_seat_task_beside_a_two_seat_game_plays_as_alone(mixed, game):
    """A mixture of a two-seat game and a one-seat task has two seats; an episode of the task is the task alone in
    seat 0 and an empty seat 1 (no transcript, never active, reward 0, terminated, every info value 0, its game flag
    off); an episode of the game is the game alone."""
    env, sub = mixed, mixed.games[game]
    assert env.num_agents == 2 and env.seats == (2, 1) and env.builtin_players == ("random", "minimax", "tactician")
    a, cap, pad = sub.num_agents, sub.capacity, env.codec.pad_id
    m_reset, m_step, s_reset, s_step = jax.jit(env.reset), jax.jit(env.step), jax.jit(sub.reset), jax.jit(sub.step)
    s_random, m_opp = jax.jit(sub.random_action), jax.jit(lambda k, s: env.opponent_action(k, s, "random"))
    for key in _keys_for(env, game, 3):
        (m_obs, m_st), (s_obs, s_st) = m_reset(key), s_reset(key)
        for t in range(10):
            np.testing.assert_array_equal(np.asarray(m_obs.tokens[:a, :cap]), np.asarray(s_obs.tokens))
            np.testing.assert_array_equal(np.asarray(m_obs.length[:a]), np.asarray(s_obs.length))
            np.testing.assert_array_equal(np.asarray(env.active(m_st)[:a]), np.asarray(sub.active(s_st)))
            if a == 1:  # the seat the task lacks
                assert (np.asarray(m_obs.tokens[1]) == pad).all() and int(m_obs.length[1]) == 0
                assert not bool(env.active(m_st)[1])
                assert (np.asarray(m_opp(key, m_st).length) == 0).all()  # the task has no built-in player
            if bool(s_st.done):
                break
            k_act, k_step = jax.random.split(jax.random.fold_in(key, t))
            action = s_random(k_act, s_st)
            m_obs, m_st, m_r, m_term, m_trunc, m_info = m_step(k_step, m_st, _padded(env, TextAction(
                jnp.pad(action.tokens, ((0, 2 - a), (0, 0)), constant_values=pad),
                jnp.pad(action.length, (0, 2 - a)))))
            s_obs, s_st, s_r, s_term, s_trunc, s_info = s_step(k_step, s_st, action)
            np.testing.assert_array_equal(np.asarray(m_r), np.pad(np.asarray(s_r), (0, 2 - a)))
            np.testing.assert_array_equal(np.asarray(m_term), np.pad(np.asarray(s_term), (0, 2 - a),
                                                                     constant_values=True))
            assert bool(m_st.done) == bool(s_st.done)
            for name, v in m_info.items():
                if name.startswith(GAME_INFO):
                    want = np.arange(2) < a if name == GAME_INFO + env.game_names[game] else np.zeros(2, bool)
                elif name in s_info and np.ndim(s_info[name]) and np.shape(s_info[name])[0] == a:
                    want = np.pad(np.asarray(s_info[name]), [(0, 2 - a)] + [(0, 0)] * (np.ndim(s_info[name]) - 1))
                else:
                    want = s_info[name] if name in s_info else np.zeros_like(v)
                np.testing.assert_array_equal(np.asarray(v), np.asarray(want), err_msg=name)
        assert bool(s_st.done), "the episode ended within 10 moves"


def _mixed_config(**kw):
    from jaxmarl_llm.train.config import validate_lm_rl
    from jaxmarl_llm.tokenizers import GAMES_BPE
    from tiny_configs import apply_fields, tiny_lm_rl

    c = tiny_lm_rl("text/mixture", GAMES_BPE, env_kwargs=MIXED, model={"max_position_embeddings": 128})
    c.share_policy = True
    c.algo, c.group_size, c.num_envs, c.num_turns, c.lr, c.ent_coef = "ppo", 1, 8, 9, 3e-2, 0.05
    c.in_graph_eval.update(every=1, episodes=4, opponents=("random",))
    c.run.transcripts_every = 0
    apply_fields(c, kw)
    validate_lm_rl(c)
    return c


def test_a_trainer_on_a_mixture_of_seat_counts_counts_the_seats_that_played():
    """lm_rl on tic-tac-toe + the calculator (one shared adapter, both seats learn): the task's episodes count
    their one seat, so `return_calculator` is seat 0's mean return over them (not halved by the empty seat), and
    the update evaluates both: tic-tac-toe against random, the calculator alone."""
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.lm.rollout import episode_metrics

    trainer = lm_rl.make_train(_mixed_config())
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    turns, seats, _ = jax.jit(trainer.rollout)(jax.random.PRNGKey(1), trainer.base, state.trainable, state.pool,
                                               jnp.arange(8))
    calc = np.asarray(turns.info[GAME_INFO + "calculator"]).any(axis=(0, 2))  # [N]
    assert 0 < calc.sum() < 8
    assert not np.asarray(turns.acted)[:, calc, 1].any()  # the empty seat never acts
    returns = np.asarray(turns.reward).sum(0)  # [N, 2]
    metrics = {k: float(v) for k, v in episode_metrics(turns, seats.learns, None).items()}
    assert metrics["return_calculator"] == pytest.approx(returns[calc, 0].mean(), abs=1e-5)
    per_env = np.where(calc, returns[:, 0], returns.mean(-1))
    assert metrics["episode_return"] == pytest.approx(per_env.mean(), abs=1e-5)
    assert metrics["return_calculator"] != pytest.approx(returns[calc].mean(-1).mean(), abs=1e-4)
    _, metrics = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
    for key in ("eval/tic_tac_toe/random_loss", "eval/calculator/mean_return", "eval/calculator/solved",
                "return_calculator", "return_tic_tac_toe", "episode_return"):
        assert np.isfinite(float(metrics[key])), key


def test_a_mixture_of_seat_counts_refuses_a_snapshot_pool_and_scripted_seats_its_task_plays():
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import ConfigError

    with pytest.raises(ConfigError, match="config.opponent_pool.size: GameMixture's games have 1 to 2 seats"):
        lm_rl.make_train(_mixed_config(opponent_pool={"size": 1, "random": 1.0}))
    with pytest.raises(ConfigError, match="config.scripted_agents: GameMixture's games have 1 to 2 seats"):
        lm_rl.make_train(_mixed_config(scripted_agents="0:random"))
    lm_rl.make_train(_mixed_config(scripted_agents="1:random"))  # the seat the task lacks may be a built-in player
