"""Tic-tac-toe rules by brute force over every reachable position; minimax is never beaten; pgx agrees."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs.text import tic_tac_toe as ttt


def _reachable():
    """Every position reachable from the empty board (5478), as tuples."""
    seen, frontier = {(0,) * 9}, [(0,) * 9]
    while frontier:
        b = frontier.pop()
        if ttt._py_winner(b) or all(b):
            continue
        mover = 1 if b.count(1) == b.count(2) else 2
        for i in range(9):
            if not b[i]:
                nb = b[:i] + (mover,) + b[i + 1 :]
                if nb not in seen:
                    seen.add(nb)
                    frontier.append(nb)
    return sorted(seen)


@pytest.fixture(scope="module")
def positions():
    return _reachable()


def _py_winner_by_lines(b):
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
    for p in (1, 2):
        if any(all(b[i] == p for i in line) for line in lines):
            return p
    return 0


def test_winner_and_legal_moves_on_every_reachable_position(positions):
    assert len(positions) == 5478
    boards = jnp.asarray(positions, jnp.int32)
    win = np.asarray(jax.jit(jax.vmap(ttt.winner))(boards))
    legal = np.asarray(jax.jit(jax.vmap(ttt.legal_moves))(boards))
    for b, w, lg in zip(positions, win, legal):
        want_w = _py_winner_by_lines(b)
        assert w == want_w, b
        over = want_w != 0 or all(b)
        assert lg.tolist() == [not over and v == 0 for v in b], b


def test_env_step_matches_rules_on_every_reachable_position(positions):
    """Play every legal move (and one illegal move) from every reachable position through env.step."""
    env = ttt.TicTacToe()
    _, s0 = env.reset(jax.random.PRNGKey(0))
    live = [b for b in positions if not (ttt._py_winner(b) or all(b))]
    boards, cells = [], []
    for b in live:
        for i in range(9):
            boards.append(b)
            cells.append(i)
    boards = jnp.asarray(boards, jnp.int32)
    cells = jnp.asarray(cells, jnp.int32)

    def play(board, cell):
        mover = jnp.where(jnp.sum(board == 1) == jnp.sum(board == 2), 0, 1)
        s = s0.replace(board=board, mover=mover, active=jnp.arange(2) == mover)
        _, s2, r, term, trunc, info = env.step(jax.random.PRNGKey(0), s, env.move_action(s, cell))
        return s2.board, r, term, info["illegal"]

    nb, r, term, illegal = (np.asarray(x) for x in jax.jit(jax.vmap(play))(boards, cells))
    for k in range(len(cells)):
        b, i = tuple(np.asarray(boards[k]).tolist()), int(cells[k])
        me = 0 if b.count(1) == b.count(2) else 1
        if b[i]:  # occupied: illegal, -2 for the mover, game over, board unchanged
            assert illegal[k, me] and r[k, me] == -2 and r[k, 1 - me] == 0 and term[k].all()
            assert tuple(nb[k]) == b
            continue
        after = b[:i] + (me + 1,) + b[i + 1 :]
        assert tuple(nb[k]) == after and not illegal[k].any()
        w = _py_winner_by_lines(after)
        if w:
            assert r[k, me] == 1 and r[k, 1 - me] == -1 and term[k].all()
        elif all(after):
            assert (r[k] == 0).all() and term[k].all()
        else:
            assert (r[k] == 0).all() and not term[k].any()


def test_minimax_is_never_beaten(positions):
    """Against every possible opponent line, the minimax player (any of its tie-broken choices) never loses."""
    env = ttt.TicTacToe()
    best = ttt.minimax_table()
    # every move in the table is optimal by an independent full search
    for b in positions:
        if ttt._py_winner(b) or all(b):
            continue
        mover = 1 if b.count(1) == b.count(2) else 2
        vals = {i: ttt._value(b[:i] + (mover,) + b[i + 1 :]) for i in range(9) if not b[i]}
        target = max(vals.values()) if mover == 1 else min(vals.values())
        code = int(np.dot(b, ttt.POW3))
        assert {i for i in range(9) if best[code, i]} == {i for i, v in vals.items() if v == target}

    # exhaustive game tree: minimax (as X or as O) follows every optimal move, the opponent every legal move
    def lines(b, minimax_mark):
        w = ttt._py_winner(b)
        if w or all(b):
            yield w
            return
        mover = 1 if b.count(1) == b.count(2) else 2
        code = int(np.dot(b, ttt.POW3))
        moves = [i for i in range(9) if best[code, i]] if mover == minimax_mark else [i for i in range(9) if not b[i]]
        for i in moves:
            yield from lines(b[:i] + (mover,) + b[i + 1 :], minimax_mark)

    for mark in (1, 2):
        outcomes = set(lines((0,) * 9, mark))
        assert 3 - mark not in outcomes  # the opponent never wins
    # and the jitted opponent only picks table moves
    _, s = env.reset(jax.random.PRNGKey(0))
    def pick_cell(k):
        action = env.opponent_action(k, s, "minimax")
        return env.parse_move(action.tokens[0], action.length[0])[0]

    pick = jax.jit(jax.vmap(pick_cell))
    cells = np.asarray(pick(jax.random.split(jax.random.PRNGKey(1), 64)))
    assert all(best[0, c] for c in cells)


def test_minimax_vs_random_through_env():
    """Full games through env.step: minimax never loses to the random player, from either seat."""
    env = ttt.TicTacToe()
    n = 256

    def episode(key, minimax_seat):
        _, s = env.reset(key)

        def body(carry, k):
            s, ret = carry
            ka, kb = jax.random.split(k)
            a_min = env.opponent_action(ka, s, "minimax")
            a_rnd = env.opponent_action(ka, s, "random")
            a = jax.tree.map(lambda x, y: jnp.where(s.mover == minimax_seat, x, y), a_min, a_rnd)
            _, s, r, *_ = env.step(kb, s, a)
            return (s, ret + r), None

        (s, ret), _ = jax.lax.scan(body, (s, jnp.zeros(2)), jax.random.split(key, 9))
        return ret, s.done

    for seat in (0, 1):
        ret, done = jax.jit(jax.vmap(episode, in_axes=(0, None)))(jax.random.split(jax.random.PRNGKey(seat), n), seat)
        assert bool(done.all())
        assert bool((ret[:, seat] >= 0).all()) and float(ret[:, seat].mean()) > 0.5


def test_agrees_with_pgx():
    pgx = pytest.importorskip("pgx")
    penv = pgx.make("tic_tac_toe")
    env = ttt.TicTacToe()
    n = 200

    def game(key):
        k0, key = jax.random.split(key)
        ps = penv.init(k0)
        _, s = env.reset(k0)
        first = ps.current_player  # pgx seat of X

        def body(carry, k):
            ps, s, ok = carry
            legal_ours = ttt.legal_moves(s.board)
            live = ~s.done
            same_mask = jnp.all(jnp.where(live, legal_ours == ps.legal_action_mask, True))
            cell = jax.random.categorical(k, jnp.where(legal_ours, 0.0, -jnp.inf))
            ps2 = penv.step(ps, cell)
            _, s2, r, term, *_ = env.step(k, s, env.move_action(s, cell))
            # rewards: ours per seat (0 = X); pgx per player id
            pgx_r = jnp.stack([ps2.rewards[first], ps2.rewards[1 - first]])
            same = jnp.where(live, (term[0] == ps2.terminated) & jnp.all(r == pgx_r), True)
            ps = jax.tree.map(lambda a, b: jnp.where(live, a, b), ps2, ps)
            return (ps, s2, ok & same & same_mask), None

        (ps, s, ok), _ = jax.lax.scan(body, (ps, s, jnp.bool_(True)), jax.random.split(key, 9))
        return ok & s.done & ps.terminated

    ok = jax.jit(jax.vmap(game))(jax.random.split(jax.random.PRNGKey(0), n))
    assert bool(ok.all())


def test_tagged_board_plays_the_same_game_and_names_every_taken_cell():
    """board="tagged" (`X5`) changes only the picture; "word" ids make each tagged cell one token."""
    from jaxmarl_llm.train.lm.setup import build_tokenizer

    assert ttt.board_picture((1, 2, 0, 0, 1, 0, 0, 0, 2), "tagged") == "\nX1|O2|3\n4|X5|6\n7|8|O9\n"
    with pytest.raises(ValueError, match="board style"):
        ttt.board_picture((0,) * 9, "ascii")
    word = build_tokenizer("word", "text/tic_tac_toe", {"board": "tagged"})
    assert word.pieces == build_tokenizer("word", "text/tic_tac_toe", {"board": "tagged"}).pieces  # same ids every build
    assert len(word.encode("X5|O9")) == 3 and len(word.encode("Move: 7")) == 4
    with pytest.raises(ValueError, match="env_name"):
        build_tokenizer("word")
    envs = {"grid": ttt.TicTacToe(capacity=640), "tagged": ttt.TicTacToe(word, capacity=640, board="tagged")}

    def game(env):
        _, s = env.reset(jax.random.PRNGKey(0))
        out = []
        for cell in (0, 3, 1, 4, 2):  # X takes the top row
            a = env.move_action(s, jnp.int32(cell))
            _, s, r, term, *_ = env.step(jax.random.PRNGKey(1), s, a)
            out.append((np.asarray(r).tolist(), bool(np.all(term))))
            if np.all(term):
                break
        return out, env.tokenizer.decode(np.asarray(s.buf[0, : int(s.length[0])]).tolist())

    (grid_steps, grid_text), (tag_steps, tag_text) = game(envs["grid"]), game(envs["tagged"])
    assert grid_steps == tag_steps and grid_steps[-1] == ([1.0, -1.0], True)
    assert tag_text.endswith("\nX1|X2|X3\nO4|O5|6\n7|8|9\nYou win.\n") and grid_text.endswith("\nX|X|X\nO|O|6\n7|8|9\nYou win.\n")
    assert len(envs["tagged"].tokenizer.encode(tag_text)) < 0.7 * len(grid_text)


def test_without_history_each_observation_is_the_header_and_the_current_position():
    """history=False: the same game, each seat's observation rewritten to `You are X.` + board + status (the tail of
    the full transcript), short enough for a word-sized capacity; a finished game keeps its last observation."""
    from jaxmarl_llm.train.lm.setup import build_tokenizer

    kw = {"board": "tagged"}
    word = build_tokenizer("word", "text/tic_tac_toe", kw)  # the header's words are the rules' words
    full, short = ttt.TicTacToe(word, capacity=384, **kw), ttt.TicTacToe(word, capacity=32, history=False, **kw)
    assert full.appends_actions and not short.appends_actions
    key = jax.random.PRNGKey(3)
    _, sf = full.reset(key)
    _, ss = short.reset(key)
    for i in range(10):  # a random game to its end, then one absorbing step
        a = full.opponent_action(jax.random.fold_in(key, i), sf, "random")
        rf, rs = full.step(key, sf, a), short.step(key, ss, a)
        np.testing.assert_array_equal(rf.reward, rs.reward)
        np.testing.assert_array_equal(rf.terminated, rs.terminated)
        assert int(rs.obs.length.max()) <= 32 and not bool(rs.state.overflow.any())
        for seat, mark in enumerate("XO"):
            tail = word.decode(np.asarray(rf.obs.tokens[seat, : int(rf.obs.length[seat])]).tolist())
            obs = word.decode(np.asarray(rs.obs.tokens[seat, : int(rs.obs.length[seat])]).tolist())
            assert obs.startswith(f"You are {mark}.\n") and tail.endswith(obs[len(f"You are {mark}.\n"):])
            assert obs.count("|") == 6  # one board
        sf, ss = rf.state, rs.state
    assert bool(ss.done)


def test_world_state_is_the_board_and_the_mover_one_hot():
    """The world-state critic's input (critic.kind="world_state"): 9 cells x (empty, X, O), then the mover."""
    env = ttt.TicTacToe(capacity=640)
    _, s = env.reset(jax.random.PRNGKey(0))
    for cell in (4, 0):  # X centre, O top-left: X to move
        s = env.step(jax.random.PRNGKey(1), s, env.move_action(s, jnp.int32(cell))).state
    w = np.asarray(env.world_state(s))
    assert w.shape == (29,) and w.dtype == np.float32
    np.testing.assert_array_equal(w[:27].reshape(9, 3).argmax(-1), [2, 0, 0, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(w[:27].reshape(9, 3).sum(-1), np.ones(9))
    np.testing.assert_array_equal(w[27:], [1.0, 0.0])
