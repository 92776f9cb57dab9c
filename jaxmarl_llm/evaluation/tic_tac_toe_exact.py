"""A tic-tac-toe policy's exact results against the built-in players, without sampling games.

    table = greedy_table(env, policy, base, lora, seat=1)     # bool [3**9, 9]: the LM's move at each O position
    rates = exact_rates(table, seat=1, opponent="random")     # {"win", "draw", "loss"}: exact, not estimated
    rows = blunders(table, seat=1)                            # where the move gives away value, by how often

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

OPPONENTS = ("random", "minimax")


_MARKS = (ttt.X, ttt.O)  # seat -> its mark


def _mover(board) -> int:
    """0 (X) or 1 (O): the seat to move on a legal board."""
    return 0 if board.count(ttt.X) == board.count(ttt.O) else 1


def positions(seat: int) -> list[tuple[int, ...]]:
    """Every reachable unfinished board where `seat` moves."""
    return [b for b in ttt.reachable_boards() if not ttt._py_winner(b) and not all(b) and _mover(b) == seat]


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


def greedy_table(env, policy, base, lora, seat: int, batch: int = 512) -> np.ndarray:
    """bool [3**9, 9]: the cell the greedy policy (adapter `lora`, None = the base) names at every board where
    `seat` moves; a row of all False where its reply does not parse or names a taken cell (a lost game)."""
    boards = positions(seat)
    obs, states = jax.jit(jax.vmap(lambda b: position_state(env, b)))(jnp.asarray(boards, jnp.int32))
    # a restricted policy (constrained / scored) chooses among the legal moves, as in play
    valid = jax.vmap(env.candidate_mask)(states)[:, seat] if policy.actions != "free" else None
    greedy = with_temperature(policy, 0.0)
    pad = policy.sampling.pad_id
    trainable = None if lora is None else {"lora": lora}

    @jax.jit
    def moves(tok, ln, ok):
        sample = greedy.sample(jax.random.PRNGKey(0), base, trainable, tok, ln, ok)
        reply = jnp.where(sample.mask, sample.tokens, pad)
        return jax.vmap(env.parse_move)(reply, sample.mask.sum(-1).astype(jnp.int32))

    cells, oks = [], []
    for i in range(0, len(boards), batch):
        part = slice(i, i + batch)
        cell, ok = moves(obs.tokens[part, seat], obs.length[part, seat], None if valid is None else valid[part])
        cells.append(np.asarray(cell))
        oks.append(np.asarray(ok))
    cell, ok = np.concatenate(cells), np.concatenate(oks)
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
    return legal / legal.sum()


def _probs(table: np.ndarray) -> np.ndarray:
    """[3**9, 9] move probabilities: a bool table plays uniformly among each row's True cells."""
    table = np.asarray(table)
    if table.dtype != np.bool_:
        return table.astype(np.float64)
    return table / np.maximum(table.sum(-1, keepdims=True), 1)


def exact_rates(table: np.ndarray, seat: int, opponent: str) -> dict[str, float]:
    """{"win", "draw", "loss"} of the policy `table` in `seat` against `opponent`, exact over both players'
    choices. table [3**9, 9]: move probabilities per board (the mass off the empty cells loses), or bool (uniform
    among a row's True cells; a row of all False loses)."""
    if opponent not in OPPONENTS:
        raise ValueError(f"opponent must be one of {OPPONENTS}, got {opponent!r}")
    table = _probs(table)
    mark = _MARKS[seat]

    @functools.lru_cache(maxsize=None)
    def value(board: tuple[int, ...]) -> np.ndarray:  # [win, draw, loss] from here
        w = ttt._py_winner(board)
        if w:
            return np.asarray([1.0, 0.0, 0.0]) if w == mark else np.asarray([0.0, 0.0, 1.0])
        if all(board):
            return np.asarray([0.0, 1.0, 0.0])
        mover = _mover(board)
        probs = table[int(np.dot(board, ttt.POW3))] if mover == seat else _opponent(board, opponent)
        out = np.zeros(3)
        for c in range(9):
            if probs[c] > 0 and not board[c]:
                out += probs[c] * value(board[:c] + (_MARKS[mover],) + board[c + 1:])
        if mover == seat:  # a reply off the empty cells (or none) loses
            out[2] += 1.0 - sum(probs[c] for c in range(9) if not board[c])
        return out

    win, draw, loss = value((0,) * 9)
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
