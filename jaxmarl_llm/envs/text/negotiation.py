"""Negotiation: two players trade wood, stone and gold one unit for one, each valuing the goods privately.

In the spirit of TextArena's SimpleNegotiation (one of SPIRAL's self-play games), made small enough that the legal
replies are a short menu a tiny model can learn. At reset each seat draws its goods (0..`max_goods` units of each)
and its value per unit of each good (1..`max_value`, seen only by itself). Seats alternate, player 1 first, for
`max_moves` moves in all. A reply is one of eight moves:

    Move: offer <give> for <get>    give one unit of <give> for one unit of the other's <get> (6 offers)
    Move: accept                    take the offer the other player made on the last move: the two units change hands
    Move: pass                      do nothing

An offer stands for one move: the other player's next move accepts it, or any other move drops it. An offer is
legal when the mover holds a unit of <give>; accept when an offer stands and the mover holds the unit it asks for;
pass always. Legal moves are the candidates (`policy.actions="constrained"`). Each seat's observation is rewritten
every move (`appends_actions` False) from what it may know: its own values, both players' goods (public), the moves
so far from its point of view and whose move it is, e.g. for player 2 at move 4 of 6:

    Negotiation, 6 moves, player 1 first. Trade wood, stone and gold, one unit for one.
    ... (two more lines of rules, then the scoring)
    You are player 2.
    Your values: wood 1, stone 2, gold 5.
    You have wood 2, stone 2, gold 2. They have wood 0, stone 3, gold 2.
    Moves: they offer gold for stone, you offer stone for wood, they offer stone for wood.
    Move 4 of 6. They offer stone for your wood; accepting gains you +1. Your move: offer wood, stone or gold for another, accept, or pass?

(a standing offer says what accepting it is worth at the reader's own values) and at the end
`Game over. Your gain: 4.` (its own gain only: an observation never depends on the other seat's values). A seat's gain is the value of its goods at the end minus at the start, at its own values. Rewards come at
the end: `zero_sum=True` pays each seat half the difference of the gains, (g_me - g_other) / 2 (the rewards sum to
0); `zero_sum=False` pays each seat its own gain (general-sum: a trade both value more helps both). A reply that is
not a legal move (unparsable, or not legal now) ends the game: the trades so far are scored as at the end and the
mover loses `penalty` (2) more, so it never beats passing; `info["format_error"]` marks an unparsable reply,
`info["illegal"]` any reply that is not a legal move. `info["won"]`: a seat gained strictly more than the other
(at a legal end); `draw`: equal gains.

`rules=False` drops the rules and scoring lines (the header is `You are player N.` only): a model trained from
scratch learns the game from its rewards, and reads half the tokens (configs/negotiation.py). `capacity` defaults
to the longest observation in the tokenizer, `max_action_tokens` (0) to the longest move.

Built-in player: `random` (uniform over the legal moves).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxmarl_llm.envs.text import parsing
from jaxmarl_llm.envs.text.base import TextEnv, TextParams, TextState
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.codec import encode_many
from jaxmarl_llm.envs.text.tic_tac_toe import sample_uniform

GOODS = ("wood", "stone", "gold")
OFFERS = tuple((g, h) for g in range(3) for h in range(3) if g != h)  # (give, get): 6 offers
MOVES = tuple(f"offer {GOODS[g]} for {GOODS[h]}" for g, h in OFFERS) + ("accept", "pass")
NUM_OFFERS = len(OFFERS)
ACCEPT, PASS = NUM_OFFERS, NUM_OFFERS + 1
GIVE = np.asarray([g for g, _ in OFFERS], np.int32)  # [6]: the good the offerer gives
GET = np.asarray([h for _, h in OFFERS], np.int32)  # [6]: the good the offerer asks for
NONE_OFFER = -1

RULES = (
    "Negotiation, {moves} moves, player 1 first. Trade wood, stone and gold, one unit for one.\n"
    "'offer X for Y': you give one X for one of their Y if they accept on their next move.\n"
    "Values per unit are private. Your gain: your goods' value at the end minus at the start.\n"
)
SCORING = ("Your score: your gain.\n", "Your score: (your gain - their gain) / 2.\n")


def _either(words: list[str]) -> str:
    """'wood', 'wood or gold', 'wood, stone or gold'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def legal_moves(goods: jax.Array, offer: jax.Array, mover: jax.Array) -> jax.Array:
    """[8]: the mover's legal moves: offers of goods it holds, accept of a standing offer it can fill, pass."""
    mine, theirs = goods[mover], goods[1 - mover]  # [3], [3]
    o = jnp.maximum(offer, 0)
    give, get = jnp.asarray(GIVE), jnp.asarray(GET)
    accept = (offer >= 0) & (mine[get[o]] >= 1) & (theirs[give[o]] >= 1)
    return jnp.concatenate([mine[give] >= 1, accept[None], jnp.ones((1,), bool)])


def gains(goods: jax.Array, start: jax.Array, values: jax.Array) -> jax.Array:
    """[2]: each seat's gain at its own values (goods, start, values [2, 3])."""
    return jnp.sum(values * (goods - start), axis=-1)


def scores(gain: jax.Array, zero_sum: bool) -> jax.Array:
    """[2] end-of-game rewards from the gains [2]: the gains, or half their difference (zero-sum)."""
    return (gain - gain[::-1]) / 2.0 if zero_sum else gain.astype(jnp.float32)


def trade(goods: jax.Array, offer: jax.Array, mover: jax.Array) -> jax.Array:
    """[2, 3]: goods after the mover accepts `offer` (the offerer gives GIVE[offer] and gets GET[offer])."""
    o = jnp.maximum(offer, 0)
    give, get = jnp.asarray(GIVE)[o], jnp.asarray(GET)[o]
    delta = jax.nn.one_hot(give, 3, dtype=goods.dtype) - jax.nn.one_hot(get, 3, dtype=goods.dtype)  # the mover's
    sign = jnp.where(jnp.arange(2) == mover, 1, -1).astype(goods.dtype)  # [2]
    return goods + sign[:, None] * delta[None, :]


@struct.dataclass
class NegotiationState(TextState):
    goods: jax.Array  # [2, 3] int32: units held now (public)
    start: jax.Array  # [2, 3] int32: units held at reset
    values: jax.Array  # [2, 3] int32: value per unit, 1..max_value (private to each seat)
    offer: jax.Array  # [] int32: the standing offer 0..5 by the last mover, -1 none
    history: jax.Array  # [max_moves] int32: move t (0..7), -1 not made yet
    illegal_by: jax.Array  # [] int32: the seat whose reply ended the game, -1 none


class Negotiation(TextEnv):
    """Two-seat trading over a fixed move menu; observations from pieces encoded once (see the module doc)."""

    max_movers = 1  # turn-based: one seat writes per step
    appends_actions = False  # every observation is rewritten from what the seat may know

    def __init__(self, tokenizer=None, max_moves: int = 6, max_goods: int = 3, max_value: int = 5,
                 zero_sum: bool = True, penalty: float = 2.0, rules: bool = True, capacity: int | None = None,
                 max_action_tokens: int = 0):
        if max_moves < 1 or max_goods < 1 or max_value < 1:
            raise ValueError(f"max_moves, max_goods and max_value must be >= 1, got {max_moves}, {max_goods}, {max_value}")
        super().__init__(tokenizer, ("player_1", "player_2"), capacity or 1, max_action_tokens or 1)
        self.max_moves, self.max_goods, self.max_value = int(max_moves), int(max_goods), int(max_value)
        self.zero_sum, self.penalty = bool(zero_sum), float(penalty)
        trades = self.max_moves // 2  # each accept answers an offer: at most one trade per two moves
        self.top = self.max_goods + trades  # the most units of one good a seat can hold
        self.max_gain = trades * (self.max_value - 1)  # each trade moves a gain by at most max_value - 1

        replies = [f"Move: {m}" for m in MOVES]
        if not max_action_tokens:  # the longest move (no move's tokens begin another's)
            self.max_action_tokens = max(len(self.codec.encode(r)) for r in replies)
            self.action_space = type(self.action_space)(self.max_action_tokens, self.codec.vocab_size)
        self.moves = self._action_table(replies)
        self.action_candidates = self.moves.rows()  # candidate k: move k
        self.move_set = parsing.StringSet([f"move{m}" for m in MOVES])

        rules_text = RULES.format(moves=self.max_moves) + SCORING[self.zero_sum] if rules else ""
        headers = [self.codec.encode(rules_text + f"You are player {s + 1}.\n") for s in (0, 1)]
        self._build_pieces()
        longest = max(len(h) for h in headers) + self.slot_max
        if capacity is None:  # the longest observation in this tokenizer
            self.capacity = longest
            self.observation_space = type(self.observation_space)(self.capacity, self.codec.vocab_size)
        if longest > self.capacity:
            raise ValueError(f"capacity={capacity} cannot hold the longest observation ({longest} tokens)")
        self._setup(headers, [self.pieces.width])  # the headers start every observation; rows follow

    # ---- the text, as rows of one piece table --------------------------------------------------------------------
    def _build_pieces(self) -> None:
        """Every line fragment, encoded once; an observation is the header then one row per slot (row 0 is empty).
        Lookup tables (numpy, built here) map the state's numbers to rows inside jit."""
        texts: list[str] = [""]

        def add(strings: list[str]) -> np.ndarray:
            first = len(texts)
            texts.extend(strings)
            return np.arange(first, len(texts), dtype=np.int32)

        v, c, m = self.max_value, self.top + 1, self.max_moves
        self.values_row = add([f"Your values: wood {a}, stone {b}, gold {g}.\n"
                               for a, b, g in itertools.product(range(1, v + 1), repeat=3)]).reshape(v, v, v)
        self.goods_row = add([f"{who} have wood {a}, stone {b}, gold {g}.{end}" for who, end in (("You", " "), ("They", "\n"))
                              for a, b, g in itertools.product(range(c), repeat=3)]).reshape(2, c, c, c)
        self.moves_head = add(["Moves:"])[0]
        self.none_yet = add([" none yet.\n"])[0]
        # [later, they, move]: ' you offer wood for stone' (the first) / ', they pass' (the rest)
        self.item_row = add([f"{sep} {who} {mv}" for sep in ("", ",") for who in ("you", "they")
                             for mv in MOVES]).reshape(2, 2, len(MOVES))
        self.moves_end = add([".\n"])[0]
        self.count_row = add([f"Move {t + 1} of {m}." for t in range(m)])  # [M]
        self.over_row = add(["Game over.", "You moved illegally. Game over.", "They moved illegally. Game over."])
        self.gain_row = add([f" Your gain: {g}.\n" for g in range(-self.max_gain, self.max_gain + 1)])  # [2G + 1]
        # [offer, gain + V - 1]: the offer and what accepting it is worth at the reader's own values (no secret: the
        # reader's values are its own; a model need not look the two goods up in its values line)
        self.standing_row = add([f" They offer {GOODS[g]} for your {GOODS[h]}; accepting gains you {d:+d}."
                                 for g, h in OFFERS for d in range(1 - v, v)]).reshape(NUM_OFFERS, 2 * v - 1)
        self.your_move, self.their_move = add([" Your move:", " Their move.\n"])
        # the goods the mover can offer (a subset, as bits wood 1, stone 2, gold 4): ' offer wood or gold for another,'
        self.offer_row = np.r_[0, add([f" offer {_either([GOODS[g] for g in range(3) if bits >> g & 1])} for another,"
                                       for bits in range(1, 8)])]  # [8]
        self.accept_row, self.or_pass, self.only_pass = add([" accept,", " or pass?\n", " pass?\n"])
        self.piece_texts = tuple(texts)
        self.pieces = self.codec.table_from_ids(encode_many(self.codec, texts))
        lens = np.asarray(self.pieces.lens)

        # the rows each slot may hold, for the longest observation
        status = [np.r_[self.count_row, self.over_row], np.r_[self.gain_row, self.standing_row.reshape(-1)],
                  [self.your_move, self.their_move], self.offer_row, [self.accept_row], [self.or_pass, self.only_pass]]
        slots = [self.values_row.reshape(-1), self.goods_row[0].reshape(-1), self.goods_row[1].reshape(-1),
                 [self.moves_head]] + [np.r_[self.item_row.reshape(-1), self.none_yet]] * m + [[self.moves_end]] + status
        self.num_slots = len(slots)
        self.slot_max = int(sum(lens[np.asarray(s)].max() for s in slots))
        for name in ("values_row", "goods_row", "item_row", "count_row", "over_row", "gain_row", "standing_row",
                     "offer_row"):
            setattr(self, name, jnp.asarray(getattr(self, name)))

    def view_rows(self, state: NegotiationState, over: jax.Array) -> jax.Array:
        """[2, S] piece rows of each seat's observation (`over`: the game has ended)."""
        seat = jnp.arange(2)
        mover = state.turn % 2
        v = state.values - 1
        c = jnp.clip(state.goods, 0, self.top)
        own = c[seat], c[1 - seat]  # [2, 3] each
        head = [self.values_row[v[:, 0], v[:, 1], v[:, 2]],
                self.goods_row[0, own[0][:, 0], own[0][:, 1], own[0][:, 2]],
                self.goods_row[1, own[1][:, 0], own[1][:, 1], own[1][:, 2]],
                jnp.full((2,), self.moves_head)]
        items = []
        for t in range(self.max_moves):  # move t was made by seat t % 2 ('you' to it, 'they' to the other)
            move = state.history[t]
            row = self.item_row[min(t, 1), ((t % 2) != seat).astype(jnp.int32), jnp.maximum(move, 0)]  # [2]
            items.append(jnp.where(move >= 0, row, self.none_yet if t == 0 else 0))
        items.append(jnp.where(state.history[0] >= 0, self.moves_end, 0))

        to_move = ~over & (seat == mover)  # [2]
        ended = jnp.where(state.illegal_by < 0, self.over_row[0], jnp.where(seat == state.illegal_by,
                                                                          self.over_row[1], self.over_row[2]))
        count = self.count_row[jnp.minimum(state.turn, self.max_moves - 1)]
        gain = jnp.clip(gains(state.goods, state.start, state.values), -self.max_gain, self.max_gain)[seat]
        o = jnp.maximum(state.offer, 0)
        worth = state.values[seat, jnp.asarray(GIVE)[o]] - state.values[seat, jnp.asarray(GET)[o]]  # [2]
        standing = jnp.where(state.offer >= 0, self.standing_row[o, worth + self.max_value - 1], 0)
        legal = legal_moves(state.goods, state.offer, mover)  # [8]
        status = [jnp.where(over, ended, count),
                  jnp.where(over, self.gain_row[gain + self.max_gain], jnp.where(to_move, standing, 0)),
                  jnp.where(over, 0, jnp.where(to_move, self.your_move, self.their_move))]
        givable = jnp.sum((state.goods[mover] >= 1) * jnp.asarray([1, 2, 4]))  # the offer rows' bits
        last = jnp.where(legal[:ACCEPT + 1].any(), self.or_pass, self.only_pass)
        options = [jnp.where(to_move, self.offer_row[givable], 0), jnp.where(to_move & legal[ACCEPT], self.accept_row, 0),
                   jnp.where(to_move, last, 0)]
        cols = [jnp.broadcast_to(r, (2,)).astype(jnp.int32) for r in head + items + status + options]
        return jnp.stack(cols, axis=1)

    def write_views(self, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Each seat's header then its rows [2, S] -> (buf [2, L + slack], length [2]).

        Each row is written whole at the text's end, so its padding lands where the next row starts (and is
        overwritten) or after the end (pad, as a transcript must be)."""
        ids = self.pieces.ids[rows].astype(self.init_buf.dtype)  # [2, S, P]
        lens = self.pieces.lens[rows]  # [2, S]

        def one(buf, end, ids, lens):
            for s in range(ids.shape[0]):
                buf = jax.lax.dynamic_update_slice(buf, ids[s], (end,))
                end = end + lens[s]
            return buf, end

        return jax.vmap(one)(self.init_buf, self.init_length, ids, lens)

    def observe(self, state: NegotiationState, over: jax.Array | None = None) -> NegotiationState:
        """The state with each seat's observation rewritten from its fields (`over` default: `state.done`)."""
        over = state.done if over is None else over
        buf, length = self.write_views(self.view_rows(state, over))
        return state.replace(buf=buf, length=length.astype(jnp.int32))

    # ---- Env API ----------------------------------------------------------------------------------------------
    @property
    def default_params(self) -> TextParams:
        return TextParams(max_steps=self.max_moves)

    def reset(self, key, params=None):
        k_goods, k_values = jax.random.split(key)
        goods = jax.random.randint(k_goods, (2, 3), 0, self.max_goods + 1, jnp.int32)
        values = jax.random.randint(k_values, (2, 3), 1, self.max_value + 1, jnp.int32)
        state = NegotiationState(**self._base_state(jnp.array([True, False])), goods=goods, start=goods,
                                 values=values, offer=jnp.int32(NONE_OFFER),
                                 history=jnp.full((self.max_moves,), -1, jnp.int32), illegal_by=jnp.int32(-1))
        state = self.observe(state, jnp.bool_(False))
        return self.get_obs(state), state

    def parse_move(self, tokens: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Move index 0..7 from `Move: <move>` (tokens [M], length []); ok False if it names no move."""
        return parsing.match_reply(self.codec, self.move_set, tokens, length)

    def _step(self, key, state, tokens, length, params):
        me = state.turn % 2
        move, parsed = self.parse_move(tokens[me], length[me])
        legal = parsed & legal_moves(state.goods, state.offer, me)[move]
        accepted = legal & (move == ACCEPT)
        goods = jnp.where(accepted, trade(state.goods, state.offer, me), state.goods)
        offer = jnp.where(legal & (move < NUM_OFFERS), move, NONE_OFFER)
        history = state.history.at[jnp.minimum(state.turn, self.max_moves - 1)].set(jnp.where(legal, move, -1))
        turn = state.turn + 1
        over = ~legal | (turn >= self.max_moves)
        seat = jnp.arange(2)
        is_me = seat == me
        gain = gains(goods, state.start, state.values)  # [2]
        reward = jnp.where(over, scores(gain, self.zero_sum) - jnp.where(~legal & is_me, self.penalty, 0.0), 0.0)
        new = state.replace(goods=goods, offer=offer, history=history, turn=turn,
                            illegal_by=jnp.where(legal, -1, me).astype(jnp.int32),
                            active=~over & (seat == turn % 2))
        new = self.observe(new, over)
        new = new.replace(buf=jnp.where(state.done, state.buf, new.buf),  # a finished game keeps its last text
                          length=jnp.where(state.done, state.length, new.length))
        info = {"format_error": ~parsed & is_me, "illegal": ~legal & is_me, "accepted": accepted & is_me,
                "won": legal & over & (gain > gain[::-1]),
                "draw": jnp.broadcast_to(legal & over & (gain[0] == gain[1]), (2,))}
        return new, reward, over, jnp.bool_(False), info

    # ---- candidates and built-in players ----------------------------------------------------------------------
    def legal_action_mask(self, state) -> jax.Array:
        """[8]: the mover's legal moves."""
        return legal_moves(state.goods, state.offer, state.turn % 2)

    def candidate_mask(self, state) -> jax.Array:
        """[2, 8]: the mover's legal moves (for both seats: only the mover acts)."""
        return jnp.broadcast_to(self.legal_action_mask(state), (2, len(MOVES)))

    def move_action(self, state, move: jax.Array) -> TextAction:
        """`Move: <move>` in the mover's row."""
        actor = jnp.arange(2) == state.turn % 2
        return self.make_action(self.moves, jnp.broadcast_to(move, (2,)), actor)

    builtin_players = ("random",)  # the kinds `opponent_action` plays

    def opponent_action(self, key, state, kind: str = "random") -> TextAction:
        """A built-in player for the seat to move: 'random' (uniform over the legal moves)."""
        if kind != "random":
            raise ValueError(f"negotiation has one built-in player, 'random'; got {kind!r}")
        return self.move_action(state, sample_uniform(key, self.legal_action_mask(state)))

    def random_action(self, key, state) -> TextAction:
        return self.opponent_action(key, state, "random")
