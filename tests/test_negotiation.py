"""Negotiation as a token game: random play keeps the goods and pays what a replay of the rendered text says, the
legal moves are the candidates and anything else is punished, a seat never reads the other's values, every reply
on the menu parses to its move, and the game runs batched under jit."""

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs import core, registry
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.negotiation import ACCEPT, GOODS, MOVES, OFFERS, PASS, Negotiation
from jaxmarl_llm.train.lm.setup import build_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def envs():
    return {zs: Negotiation(zero_sum=zs) for zs in (True, False)}


def _random_games(env, n, seed=0):
    """n games of random legal moves under jit(vmap): (first states, final states, goods after each step
    [T, n, 2, 3], rewards summed [n, 2], info flags ever set {key: [n, 2]})."""

    def game(key):
        _, st = env.reset(key)

        def body(c, k):
            st, tot, seen = c
            ka, ks = jax.random.split(k)
            r = env.step(ks, st, env.random_action(ka, st))
            seen = {name: seen[name] | r.info[name] for name in seen}
            return (r.state, tot + r.reward, seen), r.state.goods

        seen0 = {name: jnp.zeros(2, bool) for name in ("format_error", "illegal", "won", "draw")}
        (last, tot, seen), goods = jax.lax.scan(body, (st, jnp.zeros(2), seen0), jax.random.split(key, env.max_moves))
        return st, last, goods, tot, seen

    first, last, goods, tot, seen = jax.jit(jax.vmap(game))(jax.random.split(jax.random.PRNGKey(seed), n))
    return first, last, np.moveaxis(np.asarray(goods), 1, 0), np.asarray(tot), {k: np.asarray(v) for k, v in seen.items()}


def _text(env, state, i, seat):
    return env.tokenizer.decode(np.asarray(state.buf[i, seat, : state.length[i, seat]]).tolist())


def _numbers(text, prefix):
    """[3] units or values after `prefix` ('You have', 'They have', 'Your values:')."""
    m = re.search(prefix + r" wood (\d+), stone (\d+), gold (\d+)\.", text)
    return np.asarray([int(g) for g in m.groups()])


def _moves(text):
    """[(mover seat relative to the reader: 0 you, 1 they, move index)] from the 'Moves:' line."""
    line = re.search(r"Moves:(.*)\n", text).group(1).strip().rstrip(".")
    if line == "none yet":
        return []
    return [(int(item.split(" ", 1)[0] == "they"), MOVES.index(item.split(" ", 1)[1])) for item in line.split(", ")]


def _replay(start, moves):
    """Goods [2, 3] after seat 0's view of the moves, with every accept checked against the offer it takes."""
    goods, offer = start.copy(), None
    for t, (they, move) in enumerate(moves):
        seat = t % 2
        assert they == seat  # seat 0 reads its own moves as 'you', player 2's as 'they'
        if move == ACCEPT:
            give, get = OFFERS[offer]  # the other seat gives `give`, the mover `get`
            goods[seat, give] += 1
            goods[seat, get] -= 1
            goods[1 - seat, give] -= 1
            goods[1 - seat, get] += 1
        offer = move if move < ACCEPT else None
    return goods


def test_random_games_conserve_goods_and_pay_the_replayed_gains(envs):
    """2000 random games in both scorings: the totals of every good never change, a game is max_moves legal moves,
    and each reward equals a numpy replay of the moves, values and goods read from the rendered texts."""
    n = 2000
    runs = {zs: _random_games(env, n) for zs, env in envs.items()}
    env = envs[True]
    first, last, goods, _, seen = runs[True]
    assert bool(last.done.all()) and (np.asarray(last.turn) == env.max_moves).all()
    assert not seen["illegal"].any() and not seen["format_error"].any()
    assert (np.asarray(first.length) <= env.capacity).all() and not np.asarray(last.overflow).any()
    start = np.asarray(first.goods)
    np.testing.assert_array_equal(goods.sum(2), np.broadcast_to(start.sum(1), goods.sum(2).shape))  # [T, n, 3]
    assert (goods >= 0).all()
    np.testing.assert_array_equal(np.asarray(runs[False][1].history), np.asarray(last.history))  # same games
    trades = 0
    for i in range(n):
        texts = [_text(env, last, i, s) for s in (0, 1)]
        starts = [_text(env, first, i, s) for s in (0, 1)]
        start_goods = np.stack([_numbers(starts[0], "You have"), _numbers(starts[0], "They have")])
        values = np.stack([_numbers(t, "Your values:") for t in texts])
        moves = _moves(texts[0])
        assert [(1 - they, m) for they, m in moves] == _moves(texts[1])  # the other seat reads the same moves
        assert len(moves) == env.max_moves
        trades += sum(m == ACCEPT for _, m in moves)
        final = _replay(start_goods, moves)
        np.testing.assert_array_equal(final, [_numbers(texts[0], "You have"), _numbers(texts[0], "They have")])
        np.testing.assert_array_equal(final, np.asarray(last.goods[i]))
        gain = (values * (final - start_goods)).sum(1)
        for s in (0, 1):
            assert f"Game over. Your gain: {gain[s]}.\n" in texts[s]
        np.testing.assert_allclose(runs[True][3][i], [(gain[0] - gain[1]) / 2, (gain[1] - gain[0]) / 2])
        np.testing.assert_allclose(runs[False][3][i], gain)
        for zs in (True, False):
            np.testing.assert_array_equal(runs[zs][4]["won"][i], gain > gain[::-1])
            np.testing.assert_array_equal(runs[zs][4]["draw"][i], [gain[0] == gain[1]] * 2)
    np.testing.assert_allclose(runs[True][3].sum(1), 0.0)
    assert trades > 100  # random play accepts often enough for the replay to check trades


def _reply(env, state, text):
    table = env.codec.table([text], width=env.max_action_tokens)
    return env.make_action(table, jnp.zeros(2, jnp.int32), jnp.arange(2) == state.turn % 2)


def test_the_legal_moves_are_masked_and_any_other_reply_ends_the_game(envs):
    """Offers of a good the mover lacks and accept without an offer it can fill are masked; replying them (or
    text off the menu) ends the game: the trades so far are scored and the mover loses 2 more."""
    env = envs[False]
    step = jax.jit(env.step)
    _, st = env.reset(jax.random.PRNGKey(0))
    st = env.observe(st.replace(goods=jnp.asarray([[0, 2, 1], [1, 0, 3]]), start=jnp.asarray([[0, 2, 1], [1, 0, 3]]),
                                values=jnp.asarray([[1, 2, 3], [3, 2, 1]])))
    mask = np.asarray(env.candidate_mask(st))
    want = [GOODS[g] != "wood" for g, _ in OFFERS] + [False, True]  # no wood to give, no offer to accept
    np.testing.assert_array_equal(mask, [want, want])
    assert "Your move: offer stone or gold for another, or pass?" in env.render(st)[0]
    for reply, parsed in (("Move: offer wood for stone", True), ("Move: accept", True), ("Move: bargain", False)):
        r = step(jax.random.PRNGKey(1), st, _reply(env, st, reply))
        assert bool(r.state.done) and r.reward.tolist() == [-2.0, 0.0], reply
        assert r.info["illegal"].tolist() == [True, False] and r.info["format_error"].tolist() == [not parsed, False]
        assert not r.info["won"].any() and not r.info["draw"].any()
        texts = env.render(r.state)
        assert "You moved illegally. Game over. Your gain: 0." in texts[0]
        assert "They moved illegally. Game over. Your gain: 0." in texts[1]

    # seat 0 offers stone for wood; seat 1 holds wood, so it may accept: one stone and one wood change hands
    st = step(jax.random.PRNGKey(2), st, _reply(env, st, "Move: offer stone for wood")).state
    assert "They offer stone for your wood; accepting gains you -1." in env.render(st)[1]  # gets 2, gives 3
    assert bool(env.candidate_mask(st)[1, ACCEPT])
    poor = env.observe(st.replace(goods=st.goods.at[1, 0].set(0), start=st.start.at[1, 0].set(0)))
    assert not bool(env.candidate_mask(poor)[1, ACCEPT])  # nothing to fill the offer with
    st = step(jax.random.PRNGKey(3), st, _reply(env, st, "Move: accept")).state
    np.testing.assert_array_equal(np.asarray(st.goods), [[1, 1, 1], [0, 1, 3]])
    assert not bool(env.candidate_mask(st)[0, ACCEPT]) and not bool(st.done)  # the offer was taken
    # gains so far: seat 0 got wood (1) for stone (2): -1; seat 1 got stone (2) for wood (3): -1; then a reply off
    # the menu: general-sum [-1 - 2, -1], zero-sum [0 - 2, 0]
    r = step(jax.random.PRNGKey(4), st, _reply(env, st, "Move: offer gold for gold"))
    assert r.reward.tolist() == [-1.0 - 2.0, -1.0] and bool(r.info["format_error"][0])
    zs = envs[True]  # the same position in the zero-sum game (its header, so its buffers, differ)
    _, z = zs.reset(jax.random.PRNGKey(0))
    z = zs.observe(z.replace(**{f: getattr(st, f) for f in ("goods", "start", "values", "offer", "history", "turn",
                                                            "active")}))
    rz = jax.jit(zs.step)(jax.random.PRNGKey(4), z, _reply(zs, z, "Move: offer gold for gold"))
    assert rz.reward.tolist() == [0.0 - 2.0, 0.0]


def test_a_seat_never_reads_the_other_seats_values(envs):
    """Along 256 random games (every move and the end), giving the other seat new values leaves a seat's
    observation token for token the same; rewriting from the state reproduces the game's own observation."""
    env = envs[True]
    n = 256

    def game(key):
        _, st = env.reset(key)

        def body(st, k):
            ka, ks = jax.random.split(k)
            nxt = env.step(ks, st, env.random_action(ka, st)).state
            return nxt, nxt

        _, states = jax.lax.scan(body, st, jax.random.split(key, env.max_moves))
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), st, states)

    states = jax.jit(jax.vmap(game))(jax.random.split(jax.random.PRNGKey(5), n))
    states = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), states)  # [n * (T + 1), ...]
    observe = jax.jit(jax.vmap(env.observe))
    same = observe(states)
    np.testing.assert_array_equal(np.asarray(same.length), np.asarray(states.length))
    np.testing.assert_array_equal(np.asarray(same.buf), np.asarray(states.buf))
    other = jax.random.randint(jax.random.PRNGKey(6), states.values.shape, 1, env.max_value + 1)
    for seat in (0, 1):
        values = states.values.at[:, 1 - seat].set(other[:, 1 - seat])
        changed = observe(states.replace(values=values))
        np.testing.assert_array_equal(np.asarray(changed.length[:, seat]), np.asarray(states.length[:, seat]))
        np.testing.assert_array_equal(np.asarray(changed.buf[:, seat]), np.asarray(states.buf[:, seat]))
        assert (np.asarray(changed.buf[:, 1 - seat]) != np.asarray(states.buf[:, 1 - seat])).any(axis=-1).mean() > 0.9


@pytest.mark.parametrize("tokenizer", ["char", "word"])
def test_every_candidate_parses_to_its_move(tokenizer):
    env = Negotiation(tokenizer=build_tokenizer(tokenizer, "text/negotiation", {}))
    assert len(env.action_candidates) == len(MOVES) == PASS + 1
    assert env.max_action_tokens == max(len(c) for c in env.action_candidates)
    parse = jax.jit(env.parse_move)
    for k, ids in enumerate(env.action_candidates):
        tokens = jnp.asarray(list(ids) + [env.codec.pad_id] * (env.max_action_tokens - len(ids)))
        move, ok = parse(tokens, jnp.int32(len(ids)))
        assert bool(ok) and int(move) == k, env.tokenizer.decode(list(ids))
        assert env.tokenizer.decode(list(ids)) == f"Move: {MOVES[k]}"
    width = 40  # off-menu spellings fall back to characters under the word tokenizer
    for text, want in (("move: OFFER Gold for Wood", MOVES.index("offer gold for wood")), ("Move:pass", PASS),
                       ("Move: offer wood for wood", -1), ("Move: accept it", -1), ("offer wood for stone", -1)):
        ids = env.codec.encode(text)[:width]
        tokens = jnp.asarray(ids + [env.codec.pad_id] * (width - len(ids)))
        move, ok = parse(tokens, jnp.int32(len(ids)))
        assert (int(move) if bool(ok) else -1) == want, text


def test_batched_play_under_jit_with_junk_replies():
    """64 envs from the registry under jit(vmap) with auto-reset: one seat moves at a time, half the replies are
    junk tokens (a format error ends the game), rewards stay finite and games keep finishing."""
    base = registry.make("text/negotiation")
    env = core.wrap_for_training(base)
    n, vocab, m = 64, base.codec.vocab_size, base.max_action_tokens

    def body(state, k):
        k1, k2, k3, k4 = jax.random.split(k, 4)
        good = jax.vmap(base.random_action)(jax.random.split(k1, n), state.env_state)
        junk = TextAction(jax.random.randint(k2, good.tokens.shape, 0, vocab), jax.random.randint(k3, good.length.shape, 0, m + 1))
        use = jax.random.uniform(k4, (n, 1, 1)) < 0.2
        action = TextAction(jnp.where(use, junk.tokens, good.tokens), jnp.where(use[..., 0], junk.length, good.length))
        active = jax.vmap(base.active)(state.env_state)
        mask = jax.vmap(base.candidate_mask)(state.env_state)
        obs, state, r, _, _, info = jax.vmap(env.step)(jax.random.split(k, n), state, action)
        return state, (active, mask, r, info["returned_episode"], info["format_error"])

    @jax.jit
    def run(key):
        obs, state = jax.vmap(env.reset)(jax.random.split(key, n))
        return obs, jax.lax.scan(body, state, jax.random.split(key, 24))

    obs, (_, (active, mask, r, returned, errors)) = run(jax.random.PRNGKey(7))
    assert obs.tokens.shape == (n, 2, base.capacity) and mask.shape == (24, n, 2, len(MOVES))
    assert (np.asarray(active).sum(-1) == 1).all() and bool(np.asarray(mask)[..., PASS].all())
    assert np.isfinite(np.asarray(r)).all() and int(np.asarray(returned).sum()) >= 3 * n
    assert np.asarray(errors).any()


def test_the_config_builds_with_two_learning_seats():
    """configs/negotiation.py at full size (nothing compiles): self-play of one adapter, constrained replies, the
    random trader in the in-graph evaluation."""
    from jaxmarl_llm.run import entry
    from jaxmarl_llm.run.cli import load_config_file

    config = load_config_file(os.path.join(ROOT, "configs", "negotiation.py"))
    config.mesh.num_devices = 1  # conftest forces 8 host devices; a CPU run has one
    trainer, _, _, headline = entry.build(config)
    assert trainer.env.num_agents == 2 and headline == "episode_return"
    assert config.num_turns == trainer.env.max_moves and config.policy.actions == "constrained"
    assert tuple(config.in_graph_eval.opponents) == ("random",) and trainer.env.builtin_players == ("random",)
