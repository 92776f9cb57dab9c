"""Cross-play: every pair of players on a two-seat game, both seat orders, and a rating per player.

    players = {"learner": Player("lm", lora), "snap@20": Player("lm", old), "random": Player("random")}
    results = cross_play(env, policy, base, players, num_turns, episodes=100, key=jax.random.PRNGKey(0))
    elo = ratings(results)                                  # {"learner": 1234.5, ..., "random": 1000.0}

Each unordered pair plays `episodes // 2` games in each seat order from the same key (a duplicate match: on a
game with chance, such as poker's deal, each player gets both sides of the same deals), so on a zero-sum game
`score` is exactly antisymmetric. The key depends only on the two names, not on who else is in the table. One
match is compiled per distinct pair of seat kinds (`play.kinds`); LM players differ only in their adapter, an
argument of the compiled match, so n snapshots cost the compiles of one.

Ratings are Elo-scale (400 log10) strengths of a Bradley-Terry model fitted by maximum likelihood to `points`
(per game: 1 to the seat with the larger return, 1/2 each on equal returns), with one virtual drawn game between
every two players so that a player who wins or loses everything keeps a finite rating.
"""

from __future__ import annotations

import csv
import functools
import zlib
from typing import Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.evaluation import play
from jaxmarl_llm.policies.lm_policy import LMPolicy

ELO = 400.0 / np.log(10.0)  # natural-log strength -> Elo points


class CrossPlay(NamedTuple):
    """Every statistic is the row player's against the column player, over both seat orders."""

    names: tuple[str, ...]
    score: np.ndarray  # [P, P] mean return
    points: np.ndarray  # [P, P] share of games with the larger return, ties half: what `ratings` fits
    games: np.ndarray  # [P, P] int: games played (both seat orders; a player against itself: one match)
    win: np.ndarray | None  # [P, P] as `play.outcome_rates`; None where the game reports no winner
    draw: np.ndarray | None
    loss: np.ndarray | None


def reports_outcomes(env) -> bool:
    """Does the game's step info say who won (`won`)? Nothing runs: the step's shapes only."""
    _, state = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    m, a = env.max_action_tokens, env.num_agents
    action = TextAction(jnp.zeros((a, m), jnp.int32), jnp.zeros((a,), jnp.int32))
    return "won" in jax.eval_shape(env.step, jax.random.PRNGKey(0), state, action)[-1]


def pair_key(key: jax.Array, a: str, b: str) -> jax.Array:
    """The key of the pair {a, b}: the same for both seat orders and whatever other players are listed."""
    for name in sorted((a, b)):
        key = jax.random.fold_in(key, zlib.crc32(name.encode()) & 0x7FFFFFFF)
    return key


def seat_stats(outcomes: play.Outcomes, seat: int) -> dict[str, np.ndarray]:
    """Per game [N], for the player in `seat` of a two-seat match: return, point (1 / 0.5 / 0 by the returns),
    win, draw, loss (as `play.outcome_rates`: a loss includes its own illegal moves)."""
    ret = np.asarray(outcomes.ret, np.float64)
    mine, theirs = ret[:, seat], ret[:, 1 - seat]
    won, draw = np.asarray(outcomes.won)[:, seat], np.asarray(outcomes.draw)[:, seat]
    return {"score": mine, "points": (mine > theirs) + 0.5 * (mine == theirs), "win": won.astype(np.float64),
            "draw": draw.astype(np.float64), "loss": (~won & ~draw & (mine < 0)).astype(np.float64)}


STATS = ("score", "points", "win", "draw", "loss")


def cross_play(env, policy: LMPolicy, base, players: Mapping[str, play.Player], num_turns: int, episodes: int,
               key: jax.Array, include_self: bool = True, compiler_options: dict[str, str] | None = None,
               log: Callable[[str], None] | None = None) -> CrossPlay:
    """Every pair of `players` (names in order), `episodes // 2` games per seat order.

    include_self: also each player against itself (one match: its two seat orders are the same games); on a
    zero-sum game its score is 0, its win / draw rates show how the player's self-play ends."""
    if env.num_agents != 2:
        raise ValueError(f"cross-play needs a two-seat game; {type(env).__name__} has {env.num_agents} seats")
    if episodes < 2:
        raise ValueError(f"episodes={episodes}: at least one game in each seat order (2)")
    names = tuple(players)
    n, per_order = len(names), episodes // 2
    table = {s: np.full((n, n), np.nan) for s in STATS}
    games = np.zeros((n, n), np.int64)
    matches: dict[tuple[str, ...], Callable] = {}

    def run(first: str, second: str, k: jax.Array) -> play.Outcomes:
        seated = (players[first], players[second])
        kinds = play.kinds(seated)
        if kinds not in matches:  # one compile per pair of seat kinds; the adapters are arguments
            matches[kinds] = play.make_match(env, policy, kinds, num_turns, compiler_options=compiler_options)
        return jax.device_get(matches[kinds](k, base, play.loras(seated), per_order)[1])

    for i, a in enumerate(names):
        for j in range(i if include_self else i + 1, n):
            b = names[j]
            k = pair_key(key, a, b)
            first = run(a, b, k)  # a in seat 0
            second = first if i == j else run(b, a, k)  # b in seat 0: the same deals
            a_rows = (seat_stats(first, 0), seat_stats(second, 1))  # a's games in seat 0, then in seat 1
            b_rows = (seat_stats(first, 1), seat_stats(second, 0))
            for s in STATS:
                table[s][i, j] = np.concatenate([r[s] for r in a_rows]).mean()
                table[s][j, i] = np.concatenate([r[s] for r in b_rows]).mean()
            games[i, j] = games[j, i] = per_order if i == j else 2 * per_order
            if log is not None:
                log(f"{a} vs {b}: score {table['score'][i, j]:+.3f}, points {table['points'][i, j]:.3f} "
                    f"({games[i, j]} games)")
    outcomes = reports_outcomes(env)
    return CrossPlay(names, table["score"], table["points"], games,
                     *((table[s] if outcomes else None) for s in ("win", "draw", "loss")))


def league(env, policy: LMPolicy, num_turns: int, names: tuple[str, ...], builtins: tuple[str, ...], episodes: int,
           seed: int = 0) -> Callable[[object, object], tuple[jax.Array, jax.Array]]:
    """fn(base, loras) -> (score [P, P], points [P, P]), jittable: `cross_play` inside a compiled program.

    The players are `len(names) - len(builtins)` LMs (adapters stacked on a leading axis of `loras`, no slot axis),
    then the built-in players `builtins`; `names` labels all of them, in that order, and keys each pair's games as
    `cross_play` does (`pair_key(PRNGKey(seed), a, b)`), so the same players and names give the same table. Every
    unordered pair plays `episodes // 2` games in each seat order; a player does not play itself (NaN diagonal).
    One match is compiled per pair of seat kinds: the LM pairs run through one match by `lax.map`."""
    if env.num_agents != 2:
        raise ValueError(f"cross-play needs a two-seat game; {type(env).__name__} has {env.num_agents} seats")
    n, q, per_order = len(names), len(names) - len(builtins), episodes // 2
    kind = ("lm",) * q + tuple(builtins)
    key = jax.random.PRNGKey(seed)
    ordered = [(i, j) for i in range(n) for j in range(n) if i != j]  # (seat 0, seat 1)
    by_kinds: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for i, j in ordered:
        by_kinds.setdefault((kind[i], kind[j]), []).append((i, j))
    matches = {kinds: play.make_match(env, policy, kinds, num_turns) for kinds in by_kinds}

    def table(base, loras) -> tuple[jax.Array, jax.Array]:
        stats = {}  # (i, j) -> (i's score, i's points, j's score, j's points) over i-first games
        for kinds, pairs in by_kinds.items():
            first, second = (np.array([p[s] for p in pairs]) for s in (0, 1))
            keys = jnp.stack([pair_key(key, names[i], names[j]) for i, j in pairs])

            def one(args, kinds=kinds):
                k, a, b = args
                lora = lambda i, kd: jax.tree.map(lambda x: x[i], loras) if kd == "lm" else None  # noqa: E731
                ret = matches[kinds](k, base, (lora(a, kinds[0]), lora(b, kinds[1])), per_order)[1].ret  # [N, 2]
                ahead = (ret[:, 0] > ret[:, 1]) + 0.5 * (ret[:, 0] == ret[:, 1])  # seat 0's points
                return jnp.stack([ret[:, 0].mean(), ahead.mean(), ret[:, 1].mean(), 1.0 - ahead.mean()])

            # LM indices into `loras` (built-in players' indices are never read)
            out = jax.lax.map(one, (keys, jnp.asarray(np.minimum(first, q - 1)), jnp.asarray(np.minimum(second, q - 1))))
            stats.update({pair: out[k] for k, pair in enumerate(pairs)})
        score, points = jnp.full((n, n), jnp.nan), jnp.full((n, n), jnp.nan)
        for i, j in ordered:
            if i < j:  # i's games in seat 0 (i first) and in seat 1 (j first)
                ij, ji = stats[i, j], stats[j, i]
                score = score.at[i, j].set((ij[0] + ji[2]) / 2).at[j, i].set((ij[2] + ji[0]) / 2)
                points = points.at[i, j].set((ij[1] + ji[3]) / 2).at[j, i].set((ij[3] + ji[1]) / 2)
        return score, points

    return table


METRIC_PREFIXES = ("eval/rating/", "eval/xplay/")  # what `league_metrics` logs, under the in-graph "eval/"


def from_metrics(rows: list[Mapping[str, str]]) -> tuple[CrossPlay, dict[str, float]] | None:
    """(the table, the ratings) of the last row of metrics.csv `rows` that played in-graph cross-play (as
    `league_metrics` logged them); None when the run did not play it. Only `score` is logged: points, games and
    outcomes are left empty."""
    played = [r for r in rows if any(k.startswith(METRIC_PREFIXES[0]) and np.isfinite(float(v)) for k, v in r.items())]
    if not played:
        return None
    row = played[-1]
    names = tuple(k[len(METRIC_PREFIXES[0]):] for k in row if k.startswith(METRIC_PREFIXES[0]))
    score = np.array([[float(row[f"{METRIC_PREFIXES[1]}{a}/{b}"]) if a != b else np.nan for b in names]
                      for a in names])
    empty = np.full(score.shape, np.nan)
    elo = {name: float(row[METRIC_PREFIXES[0] + name]) for name in names}
    return CrossPlay(names, score, empty, np.zeros(score.shape, np.int64), None, None, None), elo


def league_metrics(names: tuple[str, ...], score: jax.Array, points: jax.Array, games: int) -> dict[str, jax.Array]:
    """{"rating/<name>": Elo (random = 1000 when it plays, else a mean of 1000), "xplay/<row>/<col>": the row's
    mean return against the column} of a `league` table with `games` games per pair; jittable."""
    p = len(names)
    rated = elo(points, jnp.full((p, p), float(games)), names.index("random") if "random" in names else None)
    out = {f"rating/{name}": rated[i] for i, name in enumerate(names)}
    out.update({f"xplay/{a}/{b}": score[i, j] for i, a in enumerate(names) for j, b in enumerate(names) if i != j})
    return out


@functools.partial(jax.jit, static_argnames="iterations")
def bradley_terry(wins: jax.Array, games: jax.Array, iterations: int = 50) -> jax.Array:
    """Natural-log strengths theta [P] (mean 0) maximising sum_ij wins_ij log sigmoid(theta_i - theta_j); jittable.

    wins [P, P]: row's wins over the column (draws as halves), wins + wins.T = games [P, P]. The log-likelihood is
    concave: Newton steps (the Hessian is a graph Laplacian; its constant direction is pinned by the mean), each
    at the largest of 1, 1/2, 1/4, ... that does not lower the likelihood. Finite when every player has both won
    and lost part of a game against a connected set of players (`elo` adds a virtual draw per pair for that)."""
    p = wins.shape[0]

    def loglik(t: jax.Array) -> jax.Array:
        return -(wins * jnp.logaddexp(0.0, -(t[:, None] - t[None, :]))).sum()

    def newton(theta: jax.Array, _) -> tuple[jax.Array, None]:
        prob = jax.nn.sigmoid(theta[:, None] - theta[None, :])  # [P, P]: row beats column
        grad = (wins - games * prob).sum(axis=1)  # [P]; sums to 0
        weight = games * prob * (1.0 - prob)
        laplacian = jnp.diag(weight.sum(axis=1)) - weight
        step = jnp.linalg.solve(laplacian + jnp.ones((p, p), wins.dtype) / p, grad)
        scales = 0.5 ** jnp.arange(21, dtype=wins.dtype)  # [21]
        rises = jax.vmap(lambda s: loglik(theta + s * step))(scales) >= loglik(theta) - 1e-12
        scale = jnp.where(rises.any(), scales[jnp.argmax(rises)], 0.0)
        return theta + scale * step, None

    theta = jax.lax.scan(newton, jnp.zeros(p, wins.dtype), None, length=iterations)[0]
    return theta - theta.mean()


def elo(points: jax.Array, games: jax.Array, anchor: int | None = None, anchor_rating: float = 1000.0,
        prior_games: float = 1.0) -> jax.Array:
    """[P] Elo ratings, jittable: a Bradley-Terry fit to every pair's `points` [P, P] over `games` [P, P] (the
    diagonal and unplayed pairs are left out), with `prior_games` virtual drawn games between every two players;
    player `anchor` is rated `anchor_rating` (None: the mean is)."""
    off = ~jnp.eye(points.shape[0], dtype=bool)
    games = jnp.where(off, games, 0).astype(points.dtype)
    wins = jnp.where(off & (games > 0), jnp.nan_to_num(points) * games, 0.0)
    prior = prior_games * off
    theta = bradley_terry(wins + prior / 2, games + prior) * ELO
    return anchor_rating + theta - (theta.mean() if anchor is None else theta[anchor])


def ratings(results: CrossPlay, anchor: str | None = "random", anchor_rating: float = 1000.0,
            prior_games: float = 1.0) -> dict[str, float]:
    """{name: Elo rating}: a Bradley-Terry fit to every pair's `points` (the diagonal is left out).

    prior_games: virtual games between every two players, drawn (half a win each): a player who wins everything
    keeps a finite (the highest) rating. Anchored so that `anchor` (when listed) has `anchor_rating`, else so that
    the mean rating is `anchor_rating`; differences are 400 log10 of the odds of winning. A rating says how often
    a player ends ahead, not by how much: where returns are graded (poker's chips) read it beside `score`."""
    names = results.names
    with jax.enable_x64(True):  # float64: ratings that do not move with the order of the players
        rated = np.asarray(elo(jnp.asarray(results.points, jnp.float64), jnp.asarray(results.games, jnp.float64),
                               names.index(anchor) if anchor in names else None, anchor_rating, prior_games))
    return {name: float(r) for name, r in zip(names, rated)}


def table_text(results: CrossPlay, elo: Mapping[str, float]) -> str:
    """The score matrix (row's mean return against the column) with each row's rating, best rated first."""
    order = sorted(range(len(results.names)), key=lambda i: -elo[results.names[i]])
    width = max(8, *(len(results.names[i]) for i in order))  # names in full: `ckpt@1250` and `ckpt@1000` differ
    lines = [" " * width + "  rating " + " ".join(f"{results.names[j]:>{width}}" for j in order)]
    for i in order:
        cells = " ".join(f"{results.score[i, j]:+{width}.3f}" if np.isfinite(results.score[i, j]) else " " * width
                         for j in order)
        lines.append(f"{results.names[i]:<{width}}  {elo[results.names[i]]:6.0f} {cells}")
    return "\n".join(lines)


def write_csv(results: CrossPlay, path: str) -> str:
    """One row per ordered pair played: player, opponent, games, score, points, win, draw, loss (blank where
    the game reports no winner)."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["player", "opponent", "games", *STATS])
        for i, a in enumerate(results.names):
            for j, b in enumerate(results.names):
                if results.games[i, j]:
                    values = [getattr(results, s) for s in STATS]
                    out.writerow([a, b, int(results.games[i, j]),
                                  *("" if v is None else f"{v[i, j]:.6g}" for v in values)])
    return path


def write_ratings(results: CrossPlay, elo: Mapping[str, float], path: str) -> str:
    """One row per player, best first: its rating and its mean score and points against the others."""
    off = ~np.eye(len(results.names), dtype=bool)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["player", "rating", "mean_score", "mean_points"])
        for i in sorted(range(len(results.names)), key=lambda i: -elo[results.names[i]]):
            out.writerow([results.names[i], f"{elo[results.names[i]]:.1f}",
                          f"{np.nanmean(results.score[i][off[i]]):.6g}",
                          f"{np.nanmean(results.points[i][off[i]]):.6g}"])
    return path


def plot_scores(results: CrossPlay, elo: Mapping[str, float], path: str, title: str = "") -> str:
    """A PNG heatmap of the score matrix, best rated first, each label with its rating; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = sorted(range(len(results.names)), key=lambda i: -elo[results.names[i]])
    score = results.score[np.ix_(order, order)]
    labels = [f"{results.names[i]} ({elo[results.names[i]]:.0f})" for i in order]
    span = max(float(np.nanmax(np.abs(score))), 1e-9) if np.isfinite(score).any() else 1.0
    size = 2.5 + 0.6 * len(order)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = ax.imshow(score, cmap="RdBu", vmin=-span, vmax=span)
    ax.set_xticks(range(len(order)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(order)), labels, fontsize=8)
    if len(order) <= 12:
        for r in range(len(order)):
            for c in range(len(order)):
                if np.isfinite(score[r, c]):
                    ax.text(c, r, f"{score[r, c]:+.2f}", ha="center", va="center", fontsize=7,
                            color="white" if abs(score[r, c]) > 0.6 * span else "black")
    ax.set_xlabel("opponent")
    ax.set_ylabel("player (Elo)")
    ax.set_title(title or "mean return of the row player against the column", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def snapshot_steps(update_step: int, pool_size: int, refresh_every: int) -> tuple[int, ...]:
    """[P]: the update after which each pool slot was last written (0: still the initial learner), given the
    runner state's update count. Mirrors train/lm/seats.refresh_pool: after update s with s % refresh_every == 0,
    slot (s // refresh_every - 1) % pool_size takes the learner's adapter."""
    refreshes = update_step // refresh_every
    out = []
    for slot in range(pool_size):
        last = slot + pool_size * ((refreshes - 1 - slot) // pool_size) if refreshes > slot else -1
        out.append(refresh_every * (last + 1))
    return tuple(out)
