"""Kuhn and Leduc poker as token games: the env walks the game tree, reads as the tree says, its built-in
players play what they claim, and the exploitability the update logs equals one computed outside it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs.text.poker import KuhnPoker, LeducPoker, equilibrium
from jaxmarl_llm.gametheory import exploitability as ex
from jaxmarl_llm.gametheory.tree import TERMINAL
from jaxmarl_llm.tokenizers import WordTokenizer


@pytest.fixture(scope="module", params=["kuhn", "leduc"])
def env(request):
    return {"kuhn": KuhnPoker, "leduc": LeducPoker}[request.param]()


def _play(env, kinds, n, seed=0, record=False):
    """n hands, seat s played by built-in kind[s]: (summed rewards [n, 2], final nodes [n], nodes per step)."""
    def hand(key):
        obs, st = env.reset(key)

        def body(c, k):
            st, tot = c
            ka, kb, ks = jax.random.split(k, 3)
            a0, a1 = env.opponent_action(ka, st, kinds[0]), env.opponent_action(kb, st, kinds[1])
            act = jax.tree.map(lambda x, y: jnp.where(env.player[st.node] == 0, x, y), a0, a1)
            r = env.step(ks, st, act)
            return (r.state, tot + r.reward), (st.node, r.state.node)

        (st, tot), path = jax.lax.scan(body, (st, jnp.zeros(2)), jax.random.split(key, len(env.tree.levels)))
        return tot, st.node, path, st.done

    tot, node, path, done = jax.jit(jax.vmap(hand))(jax.random.split(jax.random.PRNGKey(seed), n))
    assert bool(done.all())
    return np.asarray(tot), np.asarray(node), tuple(np.asarray(p) for p in path)


def test_hands_follow_the_tree_and_pay_its_returns(env):
    tot, node, (before, after) = _play(env, ("random", "random"), 2000)
    tree = env.tree
    assert (tree.player[node] == TERMINAL).all()
    np.testing.assert_allclose(tot, tree.payoff[node])
    for b, a in zip(before.reshape(-1), after.reshape(-1)):  # every move goes to a child (through chance)
        if b != a:
            hb, ha = tree.histories[b], tree.histories[a]
            assert ha[: len(hb)] == hb and 1 <= len(ha) - len(hb) <= 2


def test_built_in_players_earn_their_exact_values(env):
    """Monte Carlo over hands through the env equals the tree's exact value of (equilibrium, random) and
    (random, equilibrium): the players play the tables they claim."""
    tree = env.tree
    eq, uni = np.asarray(equilibrium(env.game)), ex.uniform_policy(tree)
    seat = tree.infoset_player[:-1][:, None]
    for kinds, seat0, seat1 in ((("equilibrium", "random"), eq, uni), (("random", "equilibrium"), uni, eq)):
        exact = float(ex.exploitability(tree, np.where(seat == 0, seat0, seat1)).policy_value[0])
        tot, _, _ = _play(env, kinds, 20000, seed=1)
        sem = tot[:, 0].std() / np.sqrt(len(tot))
        assert abs(tot[:, 0].mean() - exact) < 4 * sem, (kinds, tot[:, 0].mean(), exact)


def test_best_response_player_wins_its_exact_value(env):
    """'best_response' plays the exact best response to its target (uniform play by default): in each seat,
    against the random player, its Monte Carlo return over 20000 hands equals the tree's best-response value
    (the two average to uniform play's exploitability: 0.4583 in Kuhn, 2.3736 in Leduc)."""
    exact = np.asarray(ex.exploitability(env.tree, ex.uniform_policy(env.tree)).best_response_value)
    assert abs(exact.mean() - {"kuhn": 0.4583, "leduc": 2.3736}[env.game]) < 1e-4
    for s, kinds in ((0, ("best_response", "random")), (1, ("random", "best_response"))):
        tot, _, _ = _play(env, kinds, 20000, seed=2)
        sem = tot[:, s].std() / np.sqrt(len(tot))
        assert abs(tot[:, s].mean() - exact[s]) < 4 * sem, (kinds, tot[:, s].mean(), exact[s])


def test_best_response_to_a_policy_file(tmp_path):
    """best_response_to=<JSON file of {information-set key: probabilities}>: the best response to that policy.
    Against Kuhn's equilibrium (written to the file by key, played by the 'equilibrium' player) it wins the
    tree's value of that pairing and no more (about -1/18 for the first seat); a file that cannot be read is one
    line naming the setting."""
    import json

    tree = KuhnPoker().tree
    eq = np.asarray(equilibrium("kuhn"))
    path = tmp_path / "target.json"
    path.write_text(json.dumps({key: eq[i, :2].tolist() for i, key in enumerate(tree.keys)}))
    env = KuhnPoker(best_response_to=str(path))
    np.testing.assert_allclose(env.best_response_to, ex.tabular_policy(tree, json.loads(path.read_text())))
    exact = float(ex.exploitability(tree, eq).best_response_value[0])
    assert abs(exact + 1 / 18) < 2e-3
    tot, _, _ = _play(env, ("best_response", "equilibrium"), 20000, seed=3)
    sem = tot[:, 0].std() / np.sqrt(len(tot))
    assert abs(tot[:, 0].mean() - exact) < 4 * sem, (tot[:, 0].mean(), exact)
    with pytest.raises(ValueError, match=r"^best_response_to='/no/such.json': 'uniform' or a JSON file"):
        KuhnPoker(best_response_to="/no/such.json")


def test_equilibrium_player_is_unexploitable(env):
    assert float(ex.exploitability(env.tree, equilibrium(env.game)).exploitability) < 1e-3


def test_observations_are_the_information_sets_words(env):
    """At every decision the mover reads the text of its information set (`infoset_views`), and two
    histories of one set read the same; the other seat reads its own view."""
    tree = env.tree
    rows, seats = env.infoset_views()
    rng = np.random.default_rng(0)
    nodes = [n for n in range(tree.sink) if tree.player[n] in (0, 1)]
    for n in rng.choice(nodes, min(60, len(nodes)), replace=False):
        st = env.state_at(tree.histories[n])
        mover = int(tree.player[n])
        text = env.tokenizer.decode(np.asarray(st.buf[mover, : st.length[mover]]).tolist())
        assert text == env.view_texts[rows[tree.infoset[n]]]
        assert seats[tree.infoset[n]] == mover
        assert "Your move" in text and "Their move" in env.tokenizer.decode(
            np.asarray(st.buf[1 - mover, : st.length[1 - mover]]).tolist())


@pytest.mark.parametrize("game", [KuhnPoker, LeducPoker])
def test_without_rules_a_view_loses_only_its_first_line(game):
    """rules=False: every (node, seat) view is the full view less the rules line, so no two information sets
    read alike that did not before, and the longest observation is shorter."""
    full, short = game(), game(rules=False)
    rows_full, rows_short = np.asarray(full.view_row), np.asarray(short.view_row)
    assert len(full.view_texts) == len(short.view_texts)
    for a, b in zip(rows_full.reshape(-1), rows_short.reshape(-1)):
        head, rest = full.view_texts[a].split("\n", 1)
        assert short.view_texts[b] == rest
        assert head.startswith(("Kuhn poker.", "Leduc poker."))
    assert short.views.width < full.views.width


@pytest.mark.parametrize("game", [KuhnPoker, LeducPoker])
def test_compact_views_tell_apart_exactly_what_the_words_do(game):
    """compact=True: two (node, seat) pairs read alike in symbols exactly when they read alike in words, so the
    policy sees the same information sets (and the same endings); the word tokenizer reads each symbol as one
    token, and the longest view is a fraction of the words'."""
    words, short = game(rules=False), game(compact=True)
    a, b = np.asarray(words.view_row).reshape(-1), np.asarray(short.view_row).reshape(-1)
    pairs = set(zip(a.tolist(), b.tolist()))
    assert len(pairs) == len({x for x, _ in pairs}) == len({y for _, y in pairs})  # a bijection of views
    tok = WordTokenizer.from_texts(short.view_texts)
    compact = game(tokenizer=tok, compact=True)
    assert compact.views.width * 4 <= game(tokenizer=WordTokenizer.from_texts(words.view_texts), rules=False
                                           ).views.width
    if game is LeducPoker:  # player 2 holds a queen, the table a king; raise, call; raise; player 2 to move
        st = compact.state_at((0, 2, 2, 1, 5, 2))
        text = tok.decode(np.asarray(st.buf[1, : st.length[1]]).tolist())
        assert text == "P2:Q:K;+=/+;?\n"
        assert len(tok.encode(text)) == len(text) - 1  # "P2" one token, every other character one


def test_replies_parse_and_a_bad_one_loses_two_chips():
    env = LeducPoker(tokenizer=WordTokenizer.from_texts(LeducPoker().view_texts + ("Move: fold call raise",)))
    st = env.state_at((0, 2))  # seat 0 to open: fold is not legal (nothing to call)
    enc = lambda s: env.codec.table([s], width=env.max_action_tokens)  # noqa: E731
    for reply, legal in (("Move: raise", True), ("Move: fold", False), ("Move: bluff", False)):
        t = enc(reply)
        action = env.make_action(t, jnp.zeros(2, jnp.int32), jnp.array([True, False]))
        r = env.step(jax.random.PRNGKey(0), st, action)
        if legal:
            assert not bool(r.state.done) and float(r.reward.sum()) == 0.0
            assert env.tree.histories[int(r.state.node)] == (0, 2, 2)
        else:
            assert bool(r.state.done) and r.reward.tolist() == [-2.0, 0.0]
            assert bool(r.info["illegal"][0]) and bool(r.info["format_error"][0]) == (reply == "Move: bluff")


def _kuhn_trainer(**kw):
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import validate_lm_rl
    from tiny_configs import tiny_lm_rl

    c = tiny_lm_rl("text/kuhn_poker", "word", env_kwargs={})
    c.policy.actions = "constrained"
    c.algo, c.group_size, c.num_envs, c.num_turns, c.lr, c.ent_coef = "ppo", 1, 8, 3, 3e-2, 0.05
    c.in_graph_eval.update(every=1, episodes=8, opponents=("random", "equilibrium"))
    c.update(kw)
    validate_lm_rl(c)
    return lm_rl.make_train(c)


def test_in_graph_exploitability_equals_the_policy_read_outside_the_update():
    """After two updates of self-play, the update's eval/exploitability equals: the trained adapter's action
    distribution read at a state of every information set (env.state_at, the mover's own observation),
    then the exact best responses; and that distribution is what sampling draws."""
    from jaxmarl_llm.policies.lm_policy import model_weights

    trainer = _kuhn_trainer()
    env, policy = trainer.env, trainer.policy
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    step = jax.jit(trainer.update)
    for _ in range(2):
        state, metrics = step(state, trainer.hparams, trainer.base)
    lora = jax.tree.map(lambda x: x[0], state.trainable["lora"])
    weights = model_weights(state.trainable, trainer.base)
    tree = env.tree
    table = np.zeros((tree.num_infosets, tree.num_actions), np.float32)
    firsts = {}
    for n in range(tree.sink):
        firsts.setdefault(int(tree.infoset[n]), n)
    for i in range(tree.num_infosets):
        st = env.state_at(tree.histories[firsts[i]])
        mover = int(tree.player[firsts[i]])
        valid = env.candidate_mask(st)[mover][None]
        table[i, :2] = policy.candidate_distribution(weights, {"lora": lora}, st.buf[mover][None].astype(jnp.int32),
                                                     st.length[mover][None], valid)[0]
    want = ex.exploitability(tree, table)
    assert float(metrics["eval/exploitability"]) == pytest.approx(float(want.exploitability), abs=1e-5)
    assert float(metrics["eval/nash_conv_seat1"]) == pytest.approx(
        float(want.best_response_value[1] - want.policy_value[1]), abs=1e-5)
    assert 0.0 < float(metrics["eval/exploitability"]) <= 1.0

    # sampling draws that distribution: 4000 draws at the opening set of K
    i = tree.index("K||")
    st = env.state_at(tree.histories[firsts[i]])
    n = 4000
    sample = jax.jit(lambda k: policy.sample(k, weights, {"lora": lora},
                                             jnp.repeat(st.buf[:1].astype(jnp.int32), n, 0),
                                             jnp.repeat(st.length[:1], n, 0), jnp.repeat(env.candidate_mask(st)[:1], n, 0)))
    tokens = np.asarray(sample(jax.random.PRNGKey(3)).tokens)
    bets = np.mean([env.tokenizer.decode(t.tolist()).strip().endswith("bet") for t in tokens])
    p_bet = table[i, 1]
    assert abs(bets - p_bet) < 4 * np.sqrt(p_bet * (1 - p_bet) / n) + 1e-3, (bets, p_bet)


@pytest.mark.parametrize("start,every,average_every", [(0, 1, 0), (2, 1, 0), (0, 3, 1), (0, 2, 3)])
def test_the_average_policy_in_the_update_equals_the_average_taken_outside(start, every, average_every):
    """in_graph_eval.average: the update's eval/average_exploitability equals the exploitability of the
    reach-weighted average of the tables read outside after every update that joined it (weights = update step,
    "linear"): each evaluated one (`every`, and update 1), or with `average_every` every such update whether
    evaluated or not, from update `average_from` on; after the first counted update the average is that
    update's policy."""
    from jaxmarl_llm.evaluation import exploitability as lm_ex
    from jaxmarl_llm.policies.lm_policy import model_weights

    trainer = _kuhn_trainer(in_graph_eval={"every": every, "episodes": 8, "opponents": ("random",), "seed": 0,
                                           "average": "linear", "average_from": start,
                                           "average_every": average_every})
    env, tree = trainer.env, trainer.env.tree
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    step = jax.jit(trainer.update)
    total = lm_ex.empty_total(tree)
    for t in range(1, 7 if every > 1 else 4):
        state, metrics = step(state, trainer.hparams, trainer.base)
        lora = jax.tree.map(lambda x: x[0], state.trainable["lora"])
        table = lm_ex.policy_table(env, trainer.policy, model_weights(state.trainable, trainer.base), (lora, lora))
        joins = t % average_every == 0 if average_every else (t % every == 0 or t == 1)
        if joins:
            total = lm_ex.accumulate(tree, total, table, float(t) * (t >= start))
        if not (t % every == 0 or t == 1):
            assert np.isnan(float(metrics["eval/average_exploitability"]))
            continue
        want = ex.exploitability(tree, lm_ex.average(tree, total))
        assert float(metrics["eval/average_exploitability"]) == pytest.approx(float(want.exploitability), abs=1e-5)
        if t == max(start, 1) and joins:
            assert float(metrics["eval/average_nash_conv"]) == pytest.approx(float(metrics["eval/nash_conv"]),
                                                                            abs=1e-5)
    assert float(metrics["eval/average_exploitability"]) != pytest.approx(float(metrics["eval/exploitability"]),
                                                                          abs=1e-6)


def test_an_average_policy_needs_a_game_tree_and_an_evaluation():
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import ConfigError, lm_rl_defaults, validate_lm_rl
    from tiny_configs import TINY_MODEL

    with pytest.raises(ConfigError, match="in_graph_eval.average: must be one of"):
        _kuhn_trainer(in_graph_eval={"every": 1, "episodes": 8, "opponents": ("random",), "seed": 0,
                                     "average": "last"})
    with pytest.raises(ConfigError, match="set in_graph_eval.every > 0 too"):
        _kuhn_trainer(in_graph_eval={"every": 0, "episodes": 8, "opponents": ("random",), "seed": 0,
                                     "average": "uniform"})
    with pytest.raises(ConfigError, match="in_graph_eval.average_from: must be an update number >= 0, got -5"):
        _kuhn_trainer(in_graph_eval={"every": 1, "episodes": 8, "opponents": ("random",), "seed": 0,
                                     "average": "uniform", "average_from": -5})
    with pytest.raises(ConfigError, match="in_graph_eval.average_every: must be a number of updates >= 0"):
        _kuhn_trainer(in_graph_eval={"every": 1, "episodes": 8, "opponents": ("random",), "seed": 0,
                                     "average": "uniform", "average_every": -1})
    c = lm_rl_defaults()
    c.env_name, c.tokenizer = "text/tic_tac_toe", "word"
    c.model.update(TINY_MODEL)
    c.in_graph_eval.update(every=1, episodes=8, average="uniform")
    c.mesh.num_devices = 1
    validate_lm_rl(c)
    with pytest.raises(ConfigError, match="in_graph_eval.average: text/tic_tac_toe has no tree of information"):
        lm_rl.make_train(c)


def test_a_game_offers_only_its_own_built_in_players():
    from jaxmarl_llm.train.config import ConfigError

    with pytest.raises(ConfigError, match="in_graph_eval.opponents: 'minimax'; KuhnPoker's built-in players are "
                                          "random, equilibrium, best_response"):
        _kuhn_trainer(in_graph_eval={"every": 1, "episodes": 8, "opponents": ("minimax",), "seed": 0})


def test_the_world_state_spells_the_whole_hand():
    """world_state: every card dealt and every move as one-hots, the mover last; two hands a seat cannot tell
    apart (the same view) differ in it by the other seat's card."""
    env = LeducPoker(rules=False, compact=True)
    a = env.tree.num_actions  # 6: the widest choice (the cards)
    h = (5, 0, 2, 1, 3, 1)  # Kh to seat 0, Js to seat 1, raise, call, Qh on the table, seat 0 checks
    w = np.asarray(env.world_state(env.state_at(h)))
    assert w.shape == (11 * a + 2,)  # 3 draws, at most 8 moves, the mover
    assert list(np.flatnonzero(w)) == [5, a + 0, 2 * a + 3, 3 * a + 2, 4 * a + 1, 5 * a + 1, 11 * a + 1]
    other = (5, 1, 2, 1, 3, 1)  # seat 1 holds Jh instead: seat 1's view is the same, the world's is not
    s1, s2 = env.state_at(h), env.state_at(other)
    np.testing.assert_array_equal(np.asarray(s1.buf[1]), np.asarray(s2.buf[1]))
    assert not np.array_equal(w, np.asarray(env.world_state(s2)))
    assert len(np.unique(np.asarray(env.node_features[:-1]), axis=0)) == env.tree.sink  # one per node


def test_a_world_state_critic_knows_the_other_hand():
    """critic.kind="world_state" on Kuhn self-play: with the policy held still (lr 1e-9), the critic that reads
    both cards predicts the returns better than the value head on a seat's own view (the card it cannot see is
    most of a hand's noise); and the update runs on the running-hands-only loss (row_buckets) too."""
    losses = {}
    for kind in ("ippo", "world_state"):
        trainer = _kuhn_trainer(critic={"kind": kind, "hidden": 64, "lr": 1e-2, "value_norm": False}, lr=1e-9,
                                num_envs=32, in_graph_eval={"every": 0}, rollout={"row_buckets": 3})
        state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
        step = jax.jit(trainer.update)
        curve = []
        for _ in range(60):
            state, metrics = step(state, trainer.hparams, trainer.base)
            curve.append(float(metrics["value_loss"]))
        losses[kind] = np.mean(curve[-15:])
        assert ("critic" in state.trainable) == (kind == "world_state")
    assert losses["world_state"] < 0.7 * losses["ippo"], losses


def test_mmd_pulls_toward_a_magnet_that_follows_the_learner():
    """algo="mmd": the KL's reference is the magnet adapter, moved by magnet_rate toward the learner after each
    update. At rate 1 the magnet is the learner itself, so the next update's KL (taken before its one gradient
    step) is 0, where PPO's KL to the base is not; at rate 0.25 the magnet sits a quarter of the way."""
    def two_updates(**kw):
        trainer = _kuhn_trainer(update_epochs=1, num_minibatches=1, kl_coef=0.5, **kw)
        state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
        step = jax.jit(trainer.update)
        s1, _ = step(state, trainer.hparams, trainer.base)
        s2, m2 = step(s1, trainer.hparams, trainer.base)
        return state, s1, m2

    _, s1, m2 = two_updates(algo="mmd", magnet_rate=1.0)
    assert float(m2["kl_ref"]) == pytest.approx(0.0, abs=1e-6)
    for m, x in zip(jax.tree.leaves(s1.trainable["magnet"]), jax.tree.leaves(s1.trainable["lora"])):
        np.testing.assert_array_equal(np.asarray(m), np.asarray(x))
    _, _, m2_ppo = two_updates(algo="ppo")
    assert float(m2_ppo["kl_ref"]) > 1e-5
    s0, s1, _ = two_updates(algo="mmd", magnet_rate=0.25)
    for m0, m, x in zip(*(jax.tree.leaves(t) for t in (s0.trainable["magnet"], s1.trainable["magnet"],
                                                         s1.trainable["lora"]))):
        np.testing.assert_allclose(np.asarray(m), np.asarray(m0) + 0.25 * (np.asarray(x) - np.asarray(m0)),
                                   atol=1e-6)
    # the rate is a traced hyper-parameter (a sweep vmaps it): one compiled update, two rates, each row's magnet
    trainer = _kuhn_trainer(update_epochs=1, num_minibatches=1, kl_coef=0.5, algo="mmd", magnet_rate=0.25)
    rates = jnp.asarray([1.0, 0.25], jnp.float32)
    hps = jax.tree.map(lambda x: jnp.stack([x, x]), trainer.hparams)._replace(magnet_rate=rates)
    states = jax.vmap(trainer.init, in_axes=(None, 0))(jax.random.PRNGKey(0), hps)
    s1, _ = jax.jit(jax.vmap(trainer.update, in_axes=(0, 0, None)))(states, hps, trainer.base)
    for m0, m, x in zip(*(jax.tree.leaves(t) for t in (states.trainable["magnet"], s1.trainable["magnet"],
                                                         s1.trainable["lora"]))):
        for row, rate in enumerate((1.0, 0.25)):
            np.testing.assert_allclose(np.asarray(m[row]), np.asarray(m0[row]) + rate * (np.asarray(x[row])
                                       - np.asarray(m0[row])), atol=1e-6)
    with pytest.raises(Exception, match="kl_coef"):
        _kuhn_trainer(algo="mmd", kl_coef=0.0)


def test_the_entropy_bonus_moves_linearly_to_ent_coef_end():
    """ent_coef_end: the bonus is ent_coef at the first update and ent_coef_end at the last, linear between; the
    trainer reads it: the first update equals a constant-bonus run's, the second does not."""
    from jaxmarl_llm.train.config import ConfigError

    steady = _kuhn_trainer(ent_coef=0.2, total_episodes=8 * 5)
    falling = _kuhn_trainer(ent_coef=0.2, ent_coef_end=0.0, total_episodes=8 * 5)
    hp = falling.hparams
    assert [round(float(hp.at_step(jnp.int32(t), 5).ent_coef), 6) for t in (0, 2, 4, 9)] == [0.2, 0.1, 0.0, 0.0]
    assert float(steady.hparams.at_step(jnp.int32(4), 5).ent_coef) == pytest.approx(0.2)

    def two(trainer):
        state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
        out = []
        for _ in range(2):
            state, _ = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
            out.append(np.concatenate([np.ravel(x) for x in jax.tree.leaves(state.trainable["lora"])]))
        return out

    (a1, a2), (b1, b2) = two(steady), two(falling)
    np.testing.assert_array_equal(a1, b1)
    assert np.abs(a2 - b2).max() > 1e-7
    with pytest.raises(ConfigError, match="ent_coef_end: must be a number >= 0 or None"):
        _kuhn_trainer(ent_coef_end=-0.1)
    # unset by default, and a number on the command line
    from absl import flags
    from ml_collections import config_flags

    from jaxmarl_llm.train.config import lm_rl_defaults

    argv = ["train.py", "--config.ent_coef_end=0.05"]
    fv = flags.FlagValues()  # override flags are defined from the argv they will parse (not pytest's sys.argv)
    config_flags.DEFINE_config_dict("config", lm_rl_defaults(), flag_values=fv, sys_argv=argv)
    fv(argv)
    assert lm_rl_defaults().ent_coef_end is None and fv.config.ent_coef_end == 0.05


def test_entropy_max_turns_the_bonus_off_at_and_above_it():
    """entropy_max: a minibatch whose mean entropy is at or above the cap gets no bonus (the update equals one at
    ent_coef 0), one below it the whole bonus (the update equals the uncapped one); `ent_coef` logs what was paid."""
    from jaxmarl_llm.train.config import ConfigError

    def one_update(**kw):
        trainer = _kuhn_trainer(update_epochs=1, num_minibatches=1, **kw)  # one minibatch: its entropy is logged
        state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
        state, metrics = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
        return np.concatenate([np.ravel(x) for x in jax.tree.leaves(state.trainable["lora"])]), metrics

    paid, m = one_update(ent_coef=0.05)
    unpaid, _ = one_update(ent_coef=0.0)
    assert np.abs(paid - unpaid).max() > 1e-7 and float(m["ent_coef"]) == pytest.approx(0.05)
    entropy = float(m["entropy"])
    above, m_above = one_update(ent_coef=0.05, entropy_max=0.5 * entropy)
    below, m_below = one_update(ent_coef=0.05, entropy_max=2.0 * entropy)
    np.testing.assert_array_equal(above, unpaid)
    np.testing.assert_array_equal(below, paid)
    assert float(m_above["ent_coef"]) == 0.0 and float(m_below["ent_coef"]) == pytest.approx(0.05)
    with pytest.raises(ConfigError, match="entropy_max: must be a number > 0 or None"):
        _kuhn_trainer(entropy_max=0.0)


@pytest.mark.slow
def test_mmd_self_play_cuts_kuhn_exploitability_from_a_random_model():
    """configs/kuhn_poker.py as shipped (random tiny model, MMD, seed 0) for 150 updates: the exact
    exploitability of the sampling policy falls from the random model's 0.80 (read before the first update) to
    under 0.35 (plain PPO self-play turns deterministic and sits at 1/3; the full run reaches the figures in
    docs/results.md).
    ~13 min on 2 shared cores: slow (`pytest -m slow tests/test_poker.py`)."""
    from jaxmarl_llm.run.cli import load_config_file
    from jaxmarl_llm.train import lm_rl

    import os

    config = load_config_file(os.path.join(os.path.dirname(os.path.dirname(__file__)), "configs", "kuhn_poker.py"))
    config.mesh.num_devices = 1
    config.in_graph_eval.update(every=150, episodes=8)
    config.total_episodes = config.num_envs * 150
    trainer = lm_rl.make_train(config)
    state = trainer.init(jax.random.PRNGKey(config.seed), trainer.hparams)
    from jaxmarl_llm.evaluation import exploitability as lm_ex
    from jaxmarl_llm.policies.lm_policy import model_weights

    lora = jax.tree.map(lambda x: x[0], state.trainable["lora"])
    table = lm_ex.policy_table(trainer.env, trainer.policy, model_weights(state.trainable, trainer.base), (lora, lora))
    start = float(ex.exploitability(trainer.env.tree, table).exploitability)

    def chunk(state, _):
        return trainer.update(state, trainer.hparams, trainer.base)

    run = jax.jit(lambda s: jax.lax.scan(chunk, s, None, length=75))
    state, first = run(state)
    state, second = run(state)
    end = float(second["eval/exploitability"][-1])
    assert start > 0.5 and end < 0.35, (start, end)


def test_the_capacity_probe_fits_the_model_to_an_equilibrium():
    """tools/poker_capacity.py, the floor under self-play's figures: fitting the test's tiny model (its shared
    adapter) to Kuhn's equilibrium at every information set takes its exploitability from the random model's to
    near 0, the cross-entropy falling as it goes; a game without information sets is refused with one line,
    status 2."""
    import importlib.util
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("poker_capacity", os.path.join(root, "tools", "poker_capacity.py"))
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    from jaxmarl_llm.envs.text import poker

    trainer = _kuhn_trainer(in_graph_eval={"every": 0})
    seen = list(probe.fit(trainer, poker.equilibrium("kuhn"), steps=300, lr=1e-2, every=100,
                          key=jax.random.PRNGKey(0)))
    (_, loss0, start), (_, loss1, end) = seen[0], seen[-1]
    assert [t for t, _, _ in seen] == [0, 100, 200, 300]
    assert start > 0.3 and end < 0.05, (start, end)  # 0.336 -> 0.032
    assert loss1 < loss0
    done = subprocess.run([sys.executable, os.path.join(root, "tools", "poker_capacity.py"),
                           "--config=" + os.path.join(root, "configs", "tic_tac_toe.py"), "--steps=1"],
                          capture_output=True, text=True, cwd=root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "no information sets" in done.stderr, done.stderr
