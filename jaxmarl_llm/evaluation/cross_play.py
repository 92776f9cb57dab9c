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


def bradley_terry(wins: np.ndarray, games: np.ndarray, iterations: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Natural-log strengths theta [P] (mean 0) maximising sum_ij wins_ij log sigmoid(theta_i - theta_j).

    wins [P, P]: row's wins over the column (draws as halves), wins + wins.T = games [P, P]. The log-likelihood is
    concave: Newton steps (the Hessian is a graph Laplacian; its constant direction is pinned by the mean), halved
    until the likelihood rises. Finite when every player has both won and lost part of a game against a connected
    set of players (`ratings` adds a virtual draw per pair for that)."""
    p = wins.shape[0]
    theta = np.zeros(p)

    def loglik(t: np.ndarray) -> float:
        return float(-(wins * np.logaddexp(0.0, -(t[:, None] - t[None, :]))).sum())

    for _ in range(iterations):
        prob = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))  # [P, P]: row beats column
        grad = (wins - games * prob).sum(axis=1)  # [P]; sums to 0
        weight = games * prob * (1.0 - prob)
        laplacian = np.diag(weight.sum(axis=1)) - weight
        step = np.linalg.solve(laplacian + np.ones((p, p)) / p, grad)
        before, scale = loglik(theta), 1.0
        while scale > 1e-6 and loglik(theta + scale * step) < before - 1e-12:
            scale /= 2
        theta = theta + scale * step
        if np.abs(scale * step).max() < tol:
            break
    return theta - theta.mean()


def ratings(results: CrossPlay, anchor: str | None = "random", anchor_rating: float = 1000.0,
            prior_games: float = 1.0) -> dict[str, float]:
    """{name: Elo rating}: a Bradley-Terry fit to every pair's `points` (the diagonal is left out).

    prior_games: virtual games between every two players, drawn (half a win each): a player who wins everything
    keeps a finite (the highest) rating. Anchored so that `anchor` (when listed) has `anchor_rating`, else so that
    the mean rating is `anchor_rating`; differences are 400 log10 of the odds of winning. A rating says how often
    a player ends ahead, not by how much: where returns are graded (poker's chips) read it beside `score`."""
    off = ~np.eye(len(results.names), dtype=bool)
    games = np.where(off, results.games, 0).astype(np.float64)
    wins = np.where(off & (games > 0), np.nan_to_num(results.points) * games, 0.0)
    prior = prior_games * off
    theta = bradley_terry(wins + prior / 2, games + prior) * ELO
    shift = theta[results.names.index(anchor)] if anchor in results.names else theta.mean()
    return {name: float(anchor_rating + t - shift) for name, t in zip(results.names, theta)}


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
