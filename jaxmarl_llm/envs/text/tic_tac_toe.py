"""Tic-tac-toe between two LM agents (agent 0 plays X and moves first).

Turn-based: `state.active` marks the player to move. The mover replies
`Move: N` with N the cell 1..9 (numbered left to right, top to bottom, as the
board picture shows). After each move both transcripts get the new board and
a status line ("Your move.", "You win." ...). Rewards: win +1 / loss -1, draw
0; an illegal or unparsable move costs the mover -2 and ends the game (the
opponent gets 0). Self-play with one shared policy (the seat is in the prompt)
or one adapter per seat are both just two agent slots to the trainer.

`board="grid"` draws a taken cell as `X`, `board="tagged"` as `X5` (each cell
names its number: what a small from-scratch model reads best, with
`tokenizer="word"` one id per cell; configs/tic_tac_toe.py uses it),
`board="commas"` as `X,2,O` (with a BPE tokenizer each cell one token at a
fixed place: configs/free_tic_tac_toe.py).

`history=False` makes each observation the current position only: a one-line
seat header (`You are X.`), the board and the status line, rewritten every
move (~20 tokens instead of a transcript of up to 344). A from-scratch model's
attention then averages over the board, not over the rules text and every
earlier board, so what it reads depends on the position (configs/tic_tac_toe.py
`:scratch` uses it). Such observations do not only grow (`appends_actions` is
False): the trainer re-reads each one, which at this length is cheap.

`exact=True` refuses a reply with anything besides `Move: N` (an RL policy in free text would otherwise pad its
replies with noise an entropy bonus pays for: configs/free_tic_tac_toe.py).

`opponent_action(key, state, "random" | "minimax" | "tactician")` gives built-in evaluation
opponents; minimax is exact (a table over every position, solved at import).
Board pictures for all 3**9 boards are encoded once when the env is built.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxmarl_llm.envs.text import buffers, parsing
from jaxmarl_llm.envs.text.base import TextEnv, TextParams, TextState
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.codec import encode_many

EMPTY, X, O = 0, 1, 2
LINES = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]], np.int32)
POW3 = 3 ** np.arange(9, dtype=np.int32)
NUM_BOARDS = 3**9

PROMPT = (
    "Tic-tac-toe. Players take turns placing marks; three in a row (across, down or diagonal) wins.\n"
    "You are {mark}. X moves first. On your turn reply 'Move: N' with N the number of an empty cell.\n"
)
HEADER = "You are {mark}.\n"  # history=False: the seat, then the current board and status
STATUS = ("Your move.\n", "Their move.\n", "You win.\n", "You lose.\n", "Draw.\n", "Illegal move. You lose.\n", "They moved illegally.\n")
YOUR_MOVE, THEIR_MOVE, WIN, LOSS, DRAW, ILLEGAL_YOU, ILLEGAL_THEM = range(7)


# ---- rules (pure, jittable) ---------------------------------------------------------------------
def winner(board: jax.Array) -> jax.Array:
    """board [9] in {0,1,2} -> 0 (none), 1 (X) or 2 (O)."""
    cells = board[LINES]  # [8, 3]
    line = (cells[:, 0] != EMPTY) & (cells[:, 0] == cells[:, 1]) & (cells[:, 1] == cells[:, 2])
    return jnp.max(jnp.where(line, cells[:, 0], 0))


def legal_moves(board: jax.Array) -> jax.Array:
    """bool[9]: empty cells while nobody has won (no moves in a finished game)."""
    over = (winner(board) != 0) | jnp.all(board != EMPTY)
    return (board == EMPTY) & ~over


def finishing_cells(board: jax.Array, mark) -> jax.Array:
    """bool[9]: the empty cells where `mark` would complete a line (two of its marks and the empty third)."""
    cells = board[LINES]  # [8, 3]
    two = jnp.sum(cells == mark, axis=-1) == 2  # [8]
    hit = two[:, None] & (cells == EMPTY)  # [8, 3]: the open third of each such line
    return jnp.zeros((9,), bool).at[LINES.reshape(-1)].max(hit.reshape(-1))


def tactician_moves(board: jax.Array, mark) -> jax.Array:
    """bool[9]: the one-move tactician's choices for `mark`: complete its own line if it can, else block the
    other's, else any legal cell."""
    other = jnp.where(mark == X, O, X)
    win, block, legal = finishing_cells(board, mark), finishing_cells(board, other), legal_moves(board)
    return jnp.where(win.any(), win, jnp.where(block.any(), block, legal)) & legal


def board_code(board: jax.Array) -> jax.Array:
    return jnp.sum(board * POW3).astype(jnp.int32)


BOARD_STYLES = ("grid", "tagged", "commas")


def board_picture(board, style: str = "grid") -> str:
    """Three rows; an empty cell shows its number. `grid` marks a taken cell `X` (`X|2|O`), `tagged` as `X5`,
    `commas` as `X` between commas (`X,2,O`).

    Why `commas`: a BPE tokenizer merges `|O` into one piece but `|2` not, so under `grid` a cell's token
    position moves with what the cells before it hold; between commas (never merged with a mark or a digit in
    the games' BPE) every cell is one token at a fixed place, the same for every board.

    Why `tagged`: a from-scratch model reads the cells with attention, whose values
    carry no position under RoPE; in `X5` every piece says what is where, so one
    head averaging the last board already knows the whole position.
    """
    if style not in BOARD_STYLES:
        raise ValueError(f"board style must be one of {BOARD_STYLES}, got {style!r}")
    tag, sep = style == "tagged", "," if style == "commas" else "|"
    marks = [".XO"[v] + (str(i + 1) if tag else "") if v else str(i + 1) for i, v in enumerate(board)]
    return "".join("\n" + sep.join(marks[r * 3 : r * 3 + 3]) for r in range(3)) + "\n"


def status_after(board, agent: int) -> int:
    """The status line agent 0 (X) / 1 (O) reads after a legal move produced `board`."""
    w = _py_winner(board)
    if w:
        return WIN if w == agent + 1 else LOSS
    if all(board):
        return DRAW
    x_to_move = list(board).count(X) == list(board).count(O)
    return YOUR_MOVE if x_to_move == (agent == 0) else THEIR_MOVE


def sample_uniform(key: jax.Array, mask: jax.Array) -> jax.Array:
    """A uniform index among the True entries of mask [n] (one random number, not n Gumbels)."""
    count = mask.sum()
    k = jax.random.randint(key, (), 0, jnp.maximum(count, 1))
    return jnp.argmax(mask & (jnp.cumsum(mask) == k + 1)).astype(jnp.int32)


# ---- exact minimax, solved once ------------------------------------------------------------------
def _py_winner(b) -> int:
    for i, j, k in LINES:
        if b[i] and b[i] == b[j] == b[k]:
            return b[i]
    return 0


@functools.lru_cache(maxsize=None)
def _value(b: tuple) -> int:
    """Game value for X under perfect play (+1 X wins, 0 draw, -1 O wins)."""
    w = _py_winner(b)
    if w:
        return 1 if w == X else -1
    if all(b):
        return 0
    mover = X if b.count(X) == b.count(O) else O
    vals = [_value(b[:i] + (mover,) + b[i + 1 :]) for i in range(9) if not b[i]]
    return max(vals) if mover == X else min(vals)


@functools.lru_cache(maxsize=None)
def reachable_boards() -> tuple[tuple[int, ...], ...]:
    """Every position reachable from the empty board by legal play (5478), sorted."""
    seen, frontier = {(0,) * 9}, [(0,) * 9]
    while frontier:
        b = frontier.pop()
        if _py_winner(b) or all(b):
            continue
        mover = X if b.count(X) == b.count(O) else O
        for i in range(9):
            if not b[i]:
                nb = b[:i] + (mover,) + b[i + 1 :]
                if nb not in seen:
                    seen.add(nb)
                    frontier.append(nb)
    return tuple(sorted(seen))


@functools.lru_cache(maxsize=None)
def minimax_table() -> np.ndarray:
    """bool[3**9, 9]: the optimal moves of the player to move, for every board (False if none)."""
    table = np.zeros((NUM_BOARDS, 9), bool)
    for b in itertools.product(range(3), repeat=9):
        nx, no = b.count(X), b.count(O)
        if nx - no not in (0, 1) or _py_winner(b) or all(b):
            continue
        mover = X if nx == no else O
        vals = {i: _value(b[:i] + (mover,) + b[i + 1 :]) for i in range(9) if not b[i]}
        best = max(vals.values()) if mover == X else min(vals.values())
        code = int(np.dot(b, POW3))
        for i, v in vals.items():
            table[code, i] = v == best
    return table


# ---- env ----------------------------------------------------------------------------------------
@struct.dataclass
class TicTacToeState(TextState):
    board: jax.Array  # [9] int32
    mover: jax.Array  # [] int32: 0 (X) or 1 (O)


class TicTacToe(TextEnv):

    max_movers = 1  # turn-based: one seat writes per step
    def __init__(self, tokenizer=None, capacity: int = 640, max_action_tokens: int = 8, board: str = "grid",
                 history: bool = True, exact: bool = False):
        super().__init__(tokenizer, ("x", "o"), capacity, max_action_tokens)
        self.board_style = board
        self.history = bool(history)
        self.exact = bool(exact)  # a reply must be `Move: N` and nothing more (parsing.parse_int's `exact`)
        self.appends_actions = self.history  # without history each move rewrites the observation
        # feedback row 2*r + agent: the board (r-th reachable position) after a legal move and that
        # agent's status line; the last two rows: the mover's / the opponent's line after an illegal move.
        boards = reachable_boards()
        self.row_of_code = np.full((NUM_BOARDS,), 0, np.int32)
        self.row_of_code[[int(np.dot(b, POW3)) for b in boards]] = np.arange(len(boards))
        self.row_of_code = jnp.asarray(self.row_of_code)
        self._illegal_row = 2 * len(boards)
        texts = [board_picture(b, board) + STATUS[status_after(b, a)] for b in boards for a in (0, 1)]
        texts += ["\n" + STATUS[ILLEGAL_YOU], "\n" + STATUS[ILLEGAL_THEM]]
        self.feedback = self.codec.table_from_ids(encode_many(self.codec, texts))
        self.moves = self._action_table([f"Move: {i + 1}" for i in range(9)])
        self.action_candidates = self.moves.rows()  # candidate k: cell k
        self.best = jnp.asarray(minimax_table())
        empty = board_picture((0,) * 9, board)
        headers = [self.codec.encode(PROMPT.format(mark=m) if history else HEADER.format(mark=m)) for m in "XO"]
        prompts = [headers[0] + self.codec.encode(empty) + self.codec.encode(STATUS[YOUR_MOVE]),
                   headers[1] + self.codec.encode(empty) + self.codec.encode(STATUS[THEIR_MOVE])]
        self._setup(prompts, [self.feedback.width])
        # history=False: every observation restarts from the seat's header
        self.header_buf, self.header_length = buffers.init_buffers(headers, self.capacity, self.slack, self.codec.pad_id)
        self.header_buf = self.header_buf.astype(self.init_buf.dtype)

    @property
    def default_params(self) -> TextParams:
        return TextParams(max_steps=9)

    def reset(self, key, params=None):
        state = TicTacToeState(
            **self._base_state(jnp.array([True, False])), board=jnp.zeros((9,), jnp.int32), mover=jnp.int32(0)
        )
        return self.get_obs(state), state

    def parse_move(self, tokens: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Cell 0..8 from one action's `Move: N` (tokens [M], length []); ok False if malformed."""
        chars, n = parsing.decode_chars(self.codec.token_chars, self.codec.token_nchars, tokens, length)
        value, ok = parsing.parse_int(chars, n, keyword="move", max_digits=2, exact=self.exact)
        ok = ok & (value >= 1) & (value <= 9)
        return jnp.where(ok, value - 1, 0), ok

    def _step(self, key, state, tokens, length, params):
        me = state.mover
        cell, parsed = self.parse_move(tokens[me], length[me])
        legal = parsed & legal_moves(state.board)[cell]
        mark = me + 1
        board = jnp.where(legal, state.board.at[cell].set(mark), state.board)
        won = legal & (winner(board) == mark)
        draw = legal & ~won & jnp.all(board != EMPTY)
        seat = jnp.arange(2)
        is_me = seat == me
        row = jnp.where(legal, 2 * self.row_of_code[board_code(board)] + seat, self._illegal_row + jnp.where(is_me, 0, 1))
        reward = jnp.where(~legal, jnp.where(is_me, -2.0, 0.0), jnp.where(won, jnp.where(is_me, 1.0, -1.0), 0.0))
        if self.history:
            new = self._append(state, tokens, length)
        else:  # the header again, then the new position (a finished game keeps its last observation)
            new = state.replace(buf=jnp.where(state.done, state.buf, self.header_buf),
                                length=jnp.where(state.done, state.length, self.header_length))
        new = self._append_table(new, self.feedback, row)
        terminated = ~legal | won | draw
        mover = 1 - me
        new = new.replace(turn=state.turn + 1, board=board, mover=mover, active=seat == mover)
        info = {"format_error": ~parsed & is_me, "illegal": ~legal & is_me, "won": won & is_me, "draw": jnp.broadcast_to(draw, (2,))}
        return new, reward, terminated, jnp.bool_(False), info

    def world_state(self, state, params=None) -> jax.Array:
        """[29]: the board one-hot per cell (empty, X, O) and the mover one-hot: the input of a centralized critic
        (`critic.kind="world_state"`), which then values positions without reading the transcript."""
        board = jax.nn.one_hot(state.board, 3).reshape(-1)
        return jnp.concatenate([board, jax.nn.one_hot(state.mover, 2)]).astype(jnp.float32)

    # ---- policies for evaluation, tests and benchmarks -----------------------------------------------
    def legal_action_mask(self, state) -> jax.Array:
        return legal_moves(state.board)

    def candidate_mask(self, state) -> jax.Array:
        """[2, 9]: the empty cells (for both seats: only the mover acts)."""
        return jnp.broadcast_to(legal_moves(state.board), (2, 9))

    def move_action(self, state, cell: jax.Array) -> TextAction:
        """`Move: cell+1` in the mover's row."""
        actor = jnp.arange(2) == state.mover
        return self.make_action(self.moves, jnp.broadcast_to(cell, (2,)), actor)

    builtin_players = ("random", "minimax", "tactician")  # the kinds `opponent_action` plays

    def opponent_action(self, key, state, kind: str = "minimax") -> TextAction:
        """A built-in player for the seat to move: 'random' (uniform legal), 'minimax' (optimal, random
        tie-break) or 'tactician' (completes its line, else blocks the other's, else random: a missed win or
        block against it costs at once, as against minimax, from the varied positions of random play)."""
        if kind == "random":
            mask = legal_moves(state.board)
        elif kind == "minimax":
            mask = self.best[board_code(state.board)]
        elif kind == "tactician":
            mask = tactician_moves(state.board, jnp.where(state.mover == 0, X, O))
        else:
            raise ValueError(f"opponent kind must be one of {', '.join(self.builtin_players)}, got {kind!r}")
        mask = jnp.where(mask.any(), mask, True)  # finished board: any (ignored) move
        cell = sample_uniform(key, mask)
        return self.move_action(state, cell)

    def random_action(self, key, state) -> TextAction:
        return self.opponent_action(key, state, "random")
