"""A tic-tac-toe policy's exact results against the built-in players, without sampling games.

    table = greedy_table(env, policy, base, lora, seat=1)     # bool [3**9, 9]: the LM's move at each O position
    rates = exact_rates(table, seat=1, opponent="random")     # {"win", "draw", "loss"}: exact, not estimated
    rows = blunders(table, seat=1)                            # where the move gives away value, by how often
    skill = tactics(table, seat=1, opponent="random")         # {"block", "take_win"}: shares of the forced moves
    cost = exact_rates(sharpened(table, seat=1), 1, "random")  # what it would lose with those made perfect
    metrics = in_graph(env, policy)(base, seat_loras)         # the same rates inside jit (the in-graph evaluation)

With observations that are the position alone (`history=False`), a greedy LM is a function from boards to
moves: one batched greedy decode over every position where its seat moves gives that table. Its results against
the random player (uniform legal moves) and minimax (a uniform choice among the optimal moves) are then
expectations over the opponent's choices, computed over the game tree. 400 sampled games per opponent (200 per
seat) estimate a 10% loss rate with a standard error of 2 points; this has none. A reply that does not parse or
names a taken cell loses the game, as in play.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.text import tic_tac_toe as ttt
from jaxmarl_llm.evaluation.play import with_temperature

OPPONENTS = ("random", "minimax", "tactician")


_MARKS = (ttt.X, ttt.O)  # seat -> its mark


def _mover(board) -> int:
    """0 (X) or 1 (O): the seat to move on a legal board."""
    return 0 if board.count(ttt.X) == board.count(ttt.O) else 1


def positions(seat: int) -> list[tuple[int, ...]]:
    """Every reachable unfinished board where `seat` moves."""
    boards, _, mover, _, ended, _ = _tree()
    return [tuple(int(c) for c in b) for b in boards[(mover == seat) & ~ended]]


def position_state(env, board: jax.Array):
    """(obs, state) of the env at `board` [9] (a reachable position), as play would leave it with `history=False`:
    each seat's header, the board picture and its status line, the seat to move active. Jittable."""
    if env.history:
        raise ValueError("positions are observations only with history=False (a transcript depends on the move order)")
    _, state = env.reset(jax.random.PRNGKey(0))
    marks = jnp.sum(board != ttt.EMPTY)
    mover = (marks % 2).astype(jnp.int32)
    state = state.replace(buf=env.header_buf, length=env.header_length, board=board.astype(jnp.int32), mover=mover,
                          active=jnp.arange(2) == mover, turn=marks.astype(state.turn.dtype))
    state = env._append_table(state, env.feedback, 2 * env.row_of_code[ttt.board_code(board)] + jnp.arange(2))
    return env.get_obs(state), state


def applies(env) -> bool:
    """Whether `env` is tic-tac-toe with position-only observations (what the exact evaluation needs)."""
    return isinstance(env, ttt.TicTacToe) and not env.history


def _greedy_cells(env, policy, base, lora, obs, states, seat: int, batch: int):
    """(cell [B], ok [B]): the greedy reply at each position (`position_state`'s obs/states [B]), parsed; jittable.
    A restricted policy (constrained / scored) chooses among the legal moves, as in play."""
    greedy = with_temperature(policy, 0.0)
    pad = policy.sampling.pad_id
    trainable = None if lora is None else {"lora": lora}
    valid = jax.vmap(env.candidate_mask)(states)[:, seat] if policy.actions != "free" else None
    n = obs.tokens.shape[0]
    chunks = -(-n // batch)
    fill = chunks * batch - n  # rows padded to whole chunks (copies of row 0, dropped after)

    def padded(x):
        x = jnp.concatenate([x, jnp.broadcast_to(x[:1], (fill,) + x.shape[1:])])
        return x.reshape((chunks, batch) + x.shape[1:])

    def one(part):
        tok, ln, ok = part
        sample = greedy.sample(jax.random.PRNGKey(0), base, trainable, tok, ln, ok)
        reply = jnp.where(sample.mask, sample.tokens, pad)
        return jax.vmap(env.parse_move)(reply, sample.mask.sum(-1).astype(jnp.int32))

    parts = (padded(obs.tokens[:, seat]), padded(obs.length[:, seat]),
             None if valid is None else padded(valid))
    cell, ok = jax.lax.map(one, parts)
    return cell.reshape(-1)[:n], ok.reshape(-1)[:n]


@functools.lru_cache(maxsize=None)
def _tree():
    """The reachable boards as static arrays: boards [B, 9], child [B, 9] (the board index after a move there; B =
    none), mover [B], outcome [B, 2, 3] (each seat's win / draw / loss where the game is over, else 0), ended [B],
    and the built-in players' move distributions [B, 9]."""
    boards = ttt.reachable_boards()
    index = {b: i for i, b in enumerate(boards)}
    n = len(boards)
    child = np.full((n, 9), n, np.int32)
    mover = np.zeros(n, np.int32)
    outcome = np.zeros((n, 2, 3))
    ended = np.zeros(n, bool)
    opp = {k: np.zeros((n, 9)) for k in OPPONENTS}
    for i, b in enumerate(boards):
        w = ttt._py_winner(b)
        if w or all(b):
            ended[i] = True
            for seat in (0, 1):
                outcome[i, seat] = (0, 1, 0) if not w else ((1, 0, 0) if w == _MARKS[seat] else (0, 0, 1))
            continue
        mover[i] = _mover(b)
        for c in range(9):
            if not b[c]:
                child[i, c] = index[b[:c] + (_MARKS[mover[i]],) + b[c + 1:]]
        for k in OPPONENTS:
            opp[k][i] = _opponent(b, k)
    return np.asarray(boards, np.int32), child, mover, outcome, ended, opp


def _finishing(boards: np.ndarray) -> np.ndarray:
    """bool [B, 2, 9]: the empty cells of each board [B, 9] where seat s's mark would complete a line."""
    out = np.zeros((len(boards), 2, 9), bool)
    for line in ttt.LINES:
        cells = boards[:, line]  # [B, 3]
        for seat in (0, 1):
            two = (cells == _MARKS[seat]).sum(-1) == 2
            for k in range(3):
                out[:, seat, line[k]] |= two & (cells[:, k] == ttt.EMPTY)
    return out


@functools.lru_cache(maxsize=None)
def _finishing_cells() -> np.ndarray:
    """`_finishing` of every reachable board (`_tree`'s order)."""
    return _finishing(_tree()[0])


_LOSS = np.asarray([0.0, 0.0, 1.0])


def _backward(probs, seat: int, xp=np):
    """[win, draw, loss] of `seat` from the empty board, by backward induction over every reachable board at once
    (depth <= 9). probs [B, 9]: the move distribution at each board (the policy's where `seat` moves, the
    opponent's elsewhere); mass on a taken cell, or missing, loses. xp: numpy (float64, on the host) or jax.numpy
    (inside jit)."""
    _, child, _, outcome, ended, _ = _tree()
    n = child.shape[0]
    probs = probs * (child < n)
    v = xp.zeros((n, 3))
    for _ in range(10):
        below = xp.concatenate([v, xp.zeros((1, 3))])[child]  # [B, 9, 3]
        here = xp.einsum("bc,bck->bk", probs, below) + (1.0 - probs.sum(-1))[:, None] * _LOSS
        v = xp.where(ended[:, None], outcome[:, seat], here)
    return v[0]  # the empty board (the first of the sorted boards)


def _reach(probs, xp=np):
    """[B]: the probability that a game from the empty board passes through each reachable board, both players
    moving by `probs` [B, 9] (mass on a taken cell ends the game there)."""
    _, child, _, _, ended, _ = _tree()
    n = child.shape[0]
    flow_ok = (child < n) & ~ended[:, None]
    start = np.zeros(n)
    start[0] = 1.0
    reach = xp.asarray(start)
    for _ in range(9):  # a board at depth d is final after d rounds
        flow = (reach[:, None] * probs * flow_ok).ravel()
        into = (np.bincount(child.ravel(), flow, minlength=n + 1) if xp is np
                else jnp.zeros(n + 1).at[child.ravel()].add(flow))
        reach = start + into[:n]
    return reach


def _tactics(probs, seat: int, xp=np) -> dict:
    """{"block", "take_win"} of `seat` (see `tactics`); probs [B, 9] as in `_backward`."""
    _, _, mover, _, ended, _ = _tree()
    finish = _finishing_cells()
    mine = (mover == seat) & ~ended
    can_win = mine & finish[:, seat].any(-1)
    must_block = mine & finish[:, 1 - seat].any(-1) & ~can_win
    reach = _reach(probs, xp)
    takes = (probs * finish[:, seat]).sum(-1)  # [B]: the chance its move completes its own line
    blocks = (probs * finish[:, 1 - seat]).sum(-1)  # [B]: ... takes a cell that completes the opponent's
    out = {}
    for name, where, did in (("block", must_block, blocks), ("take_win", can_win, takes)):
        weight = reach * where
        total = weight.sum()
        out[name] = xp.where(total > 0, (weight * did).sum() / xp.where(total > 0, total, 1.0), xp.nan)
    return out


def tactics(table: np.ndarray, seat: int, opponent: str = "random") -> dict[str, float]:
    """The policy's one-move tactics in `seat`, over the positions a game against `opponent` reaches (weighted by
    how often): "block", the share of positions where the opponent threatens to complete a line and the policy
    cannot complete one in which it takes a threatened cell (against two threats a block is still a block), and
    "take_win", the share of positions where it can complete a line in which it does (nan where no game reaches
    such a position). A missed block against the random player is where most of a weak O's losses come from."""
    return {k: float(v) for k, v in _tactics(_joint(table, seat, opponent), seat).items()}


def sharpened(table: np.ndarray, seat: int, take_win: bool = True, block: bool = True) -> np.ndarray:
    """[3**9, 9] move probabilities: `table` with `seat`'s one-move tactics made perfect, so that `exact_rates` of
    the result says what its misses cost: where it can complete a line it does (take_win), else where the other
    threatens one it takes a threatened cell (block; uniform among several), elsewhere its own move."""
    out = _probs(table).copy()
    boards, _, mover, _, ended, _ = _tree()
    finish = _finishing_cells()
    for board, m, over, f in zip(boards, mover, ended, finish):
        if over or m != seat:
            continue
        row = f[seat] if take_win and f[seat].any() else None
        if row is None and block and f[1 - seat].any() and not f[seat].any():
            row = f[1 - seat]
        if row is not None:
            out[int(board @ ttt.POW3)] = row / row.sum()
    return out


def in_graph(env, policy, batch: int = 512):
    """fn(base, seat_loras) -> {"exact_<opp>_<win|draw|loss>", "exact_<opp>_seat<s>_<...>": []}, jittable: the
    greedy policy's exact rates (seat s acting with seat_loras[s]) against each of OPPONENTS, half per seat, as
    `exact_rates(greedy_table(...))` computes them on the host, and each seat's `tactics`
    ("exact_<opp>_seat<s>_block", "..._take_win"); the game tree's backward induction in arrays."""
    boards, child, mover, _, ended, opp = _tree()
    n = boards.shape[0]
    starts = jax.vmap(lambda b: position_state(env, b))

    def evaluate(base, seat_loras: tuple) -> dict[str, jax.Array]:
        out = {}
        for seat in (0, 1):
            at = np.flatnonzero((mover == seat) & ~ended)  # the positions where this seat moves
            obs, states = starts(jnp.asarray(boards[at]))
            cell, ok = _greedy_cells(env, policy, base, seat_loras[seat], obs, states, seat, batch)
            legal = ok & (jnp.take_along_axis(jnp.asarray(child[at]), cell[:, None], 1)[:, 0] < n)
            # [B, 9]: the move at each of its positions; a row of 0s (a reply that does not parse or names a taken
            # cell) loses
            mine = jnp.zeros((n, 9)).at[jnp.asarray(at)].set(jax.nn.one_hot(cell, 9) * legal[:, None])
            for kind in OPPONENTS:
                probs = jnp.where(jnp.asarray(mover == seat)[:, None], mine, jnp.asarray(opp[kind]))  # [B, 9]
                v = _backward(probs, seat, jnp)
                for k, name in enumerate(("win", "draw", "loss")):
                    out[f"exact_{kind}_seat{seat}_{name}"] = v[k]
                    out[f"exact_{kind}_{name}"] = out.get(f"exact_{kind}_{name}", 0.0) + v[k] / 2
                for name, value in _tactics(probs, seat, jnp).items():
                    out[f"exact_{kind}_seat{seat}_{name}"] = value
        return out

    return evaluate


def greedy_table(env, policy, base, lora, seat: int, batch: int = 512) -> np.ndarray:
    """bool [3**9, 9]: the cell the greedy policy (adapter `lora`, None = the base) names at every board where
    `seat` moves; a row of all False where its reply does not parse or names a taken cell (a lost game)."""
    boards = positions(seat)
    obs, states = jax.vmap(lambda b: position_state(env, b))(jnp.asarray(boards, jnp.int32))
    cell, ok = jax.jit(lambda o, st: _greedy_cells(env, policy, base, lora, o, st, seat, batch))(obs, states)
    cell, ok = np.asarray(cell), np.asarray(ok)
    table = np.zeros((ttt.NUM_BOARDS, 9), bool)
    for b, c, k in zip(boards, cell, ok):
        if k and not b[c]:
            table[int(np.dot(b, ttt.POW3)), c] = True
    return table


def _opponent(board, kind: str) -> np.ndarray:
    """The opponent's move distribution [9] at `board`."""
    legal = np.asarray([c == 0 for c in board], np.float64)
    if kind == "minimax":
        legal = ttt.minimax_table()[int(np.dot(board, ttt.POW3))].astype(np.float64)
    elif kind == "tactician":  # its own line, else the other's, else any cell (envs/text/tic_tac_toe.py)
        finish, me = _finishing(np.asarray([board]))[0], _mover(board)
        for cells in (finish[me], finish[1 - me]):
            if cells.any():
                legal = cells.astype(np.float64)
                break
    return legal / legal.sum()


def _probs(table: np.ndarray) -> np.ndarray:
    """[3**9, 9] move probabilities: a bool table plays uniformly among each row's True cells."""
    table = np.asarray(table)
    if table.dtype != np.bool_:
        return table.astype(np.float64)
    return table / np.maximum(table.sum(-1, keepdims=True), 1)


def _joint(table: np.ndarray, seat: int, opponent: str) -> np.ndarray:
    """[B, 9]: the move distribution at every reachable board, the policy `table`'s where `seat` moves and
    `opponent`'s elsewhere."""
    if opponent not in OPPONENTS:
        raise ValueError(f"opponent must be one of {OPPONENTS}, got {opponent!r}")
    boards, _, mover, _, _, opp = _tree()
    mine = _probs(table)[boards @ ttt.POW3]  # [B, 9]: the policy's rows at the reachable boards
    return np.where((mover == seat)[:, None], mine, opp[opponent])


def exact_rates(table: np.ndarray, seat: int, opponent: str) -> dict[str, float]:
    """{"win", "draw", "loss"} of the policy `table` in `seat` against `opponent`, exact over both players'
    choices. table [3**9, 9]: move probabilities per board (the mass off the empty cells loses), or bool (uniform
    among a row's True cells; a row of all False loses)."""
    win, draw, loss = _backward(_joint(table, seat, opponent), seat)
    return {"win": float(win), "draw": float(draw), "loss": float(loss)}


def blunders(table: np.ndarray, seat: int, opponent: str = "random") -> list[dict]:
    """The positions where the policy's move is not optimal (minimax), each with how often the game reaches it
    against `opponent` and what the move gives away (the game's value for the policy before and after, in
    {-1, 0, 1}), most reached first."""
    table = _probs(table)
    reach: dict[tuple[int, ...], float] = {(0,) * 9: 1.0}
    order = sorted(ttt.reachable_boards(), key=lambda b: sum(c != 0 for c in b))
    out = []
    sign = 1 if seat == 0 else -1  # ttt._value is X's value
    for board in order:
        p = reach.get(board, 0.0)
        if p == 0 or ttt._py_winner(board) or all(board):
            continue
        mover = _mover(board)
        code = int(np.dot(board, ttt.POW3))
        probs = table[code] if mover == seat else _opponent(board, opponent)
        for c in range(9):
            if probs[c] > 0 and not board[c]:
                child = board[:c] + (_MARKS[mover],) + board[c + 1:]
                reach[child] = reach.get(child, 0.0) + p * probs[c]
        if mover == seat:
            best = ttt.minimax_table()[code]
            chosen = [c for c in range(9) if table[code, c] > 0 and not board[c]]
            if not chosen or not best[chosen].all():
                # the value left after the worst chosen move (-1: no legal move, the game is lost)
                after = min((sign * ttt._value(board[:c] + (_MARKS[seat],) + board[c + 1:]) for c in chosen),
                            default=-1)
                out.append({"board": board, "reach": p, "move": chosen, "best": [int(c) for c in np.flatnonzero(best)],
                            "value": sign * ttt._value(board), "after": after})
    return sorted(out, key=lambda r: -r["reach"])
