"""A few of an update's own episodes, for the transcripts a person reads (run/transcript_log.py).

Inside the compiled update, `sample_episodes` keeps `plan.transcript_episodes` of the episodes the update just
played and learned from (spread over all envs: a GRPO group shares one seed) as small arrays
beside the metrics ("episodes/<field>"); the runner writes them every `run.transcripts_every` updates, and
`episode_records` decodes them on the host: each seat's transcript, each turn's reply, reward, sampling
log-prob and value, and who played the seat. What is shown is what training saw, sampled, not a replay.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxmarl_llm.envs.text.base import BUILTIN_PLAYERS
from jaxmarl_llm.train.lm.plan import Plan, Turns
from jaxmarl_llm.train.lm.seats import Seats

EPISODES = "episodes/"  # the metrics entries that hold sampled episodes (arrays, not scalars)


def sample_episodes(plan: Plan, turns: Turns, seats: Seats, final_tokens: jax.Array, env_ids: jax.Array,
                    axis_name: str | None) -> dict[str, jax.Array]:
    """{"episodes/<field>": [E, ...] or [T, E, ...]}: E = min(plan.transcript_episodes, num_envs) episodes spread
    over the global envs (neighbours share a group's seed), the same whatever the split over devices: each device
    fills the ones it holds (env_ids [n]: its global env ids, contiguous), a psum puts them together."""
    n = final_tokens.shape[0]
    e = min(plan.transcript_episodes, plan.num_envs)
    local = jnp.arange(e) * (plan.num_envs // e) - env_ids[0]  # [E] where each pick sits on this device
    own = (local >= 0) & (local < n)
    idx = jnp.clip(local, 0, n - 1)

    def pick(x, axis: int):  # the picks along the env axis; zeros for those another device holds
        x = jnp.take(x.astype(jnp.int32) if x.dtype == jnp.bool_ else x, idx, axis=axis)
        mine = own.reshape((1,) * axis + (e,) + (1,) * (x.ndim - axis - 1))
        return jnp.where(mine, x, jnp.zeros_like(x))

    fields = {
        "tokens": pick(final_tokens, 0),  # [E, A, L] each seat's transcript at the end
        "prompt_len": pick(turns.prompt_len, 1),  # [T, E, A]
        "action": pick(turns.action, 1),  # [T, E, A, M] the reply's tokens (pad after its end)
        "logprob": pick(turns.logprob.sum(-1), 1),  # [T, E, A] the reply's sampling log-prob
        "value": pick(turns.value, 1),  # [T, E, A] the critic's estimate before the reply
        "reward": pick(turns.reward, 1),  # [T, E, A]
        "acted": pick(turns.acted, 1),  # [T, E, A]
        "learns": pick(seats.learns, 0),  # [E, A]
        "scale": pick(seats.scale, 0),  # [E, A] 0: the bare base model
        "builtin": pick(seats.builtin, 0),  # [E] i > 0: the league's built-in player i - 1
    }
    if "format_error" in turns.info:
        fe = turns.info["format_error"]
        fields["format_error"] = pick(jnp.broadcast_to(fe if fe.ndim == 3 else fe[..., None], turns.acted.shape), 1)
    if axis_name is not None:
        fields = {k: jax.lax.psum(v, axis_name) for k, v in fields.items()}
    return {EPISODES + k: v for k, v in fields.items()}


def take_episodes(metrics: dict) -> dict:
    """Remove the sampled episodes from a chunk's metrics (in place) and return them ({field: [K, ...]})."""
    return {k[len(EPISODES):]: metrics.pop(k) for k in [k for k in metrics if k.startswith(EPISODES)]}


def seat_players(plan: Plan, learns: np.ndarray, scale: np.ndarray, builtin: int) -> list[str]:
    """Who played each seat of one episode: "learner", the game's built-in player, a pool "snapshot", the frozen
    "base model", or "LM"."""
    scripted = dict(plan.scripted)
    names = []
    for a in range(plan.num_agents):
        if a in scripted:
            names.append(scripted[a])
        elif learns[a]:
            names.append("learner")
        elif builtin > 0:
            names.append(plan.league[builtin - 1][0])
        elif scale[a] == 0:
            names.append("base model")
        else:
            names.append("snapshot" if plan.pool_size else "LM")
    return names


def _text(tokenizer, ids, pad_id: int) -> str:
    return tokenizer.decode([int(i) for i in ids if int(i) != pad_id])


def episode_records(plan: Plan, tokenizer, agents: tuple[str, ...], whole: bool, update: int,
                    episodes: dict[str, np.ndarray]) -> list[dict]:
    """One update's sampled episodes ({field: [E, ...] / [T, E, ...]}, host arrays) as JSON-ready records.

    whole: the final transcript holds every turn (games whose transcripts only grow); else it is the last
    observation only (e.g. tokenized MPE), and says so."""
    pad = plan.pad_id
    records = []
    for i in range(episodes["tokens"].shape[0]):
        players = seat_players(plan, episodes["learns"][i], episodes["scale"][i], int(episodes["builtin"][i]))
        lm = [p not in BUILTIN_PLAYERS for p in players]  # the built-in players' moves carry no log-prob
        returns = episodes["reward"][:, i].sum(0)  # [A]
        seats = [{"seat": a, "name": agents[a], "player": players[a], "return": float(returns[a]),
                  "text": _text(tokenizer, episodes["tokens"][i, a], pad)} for a in range(plan.num_agents)]
        turns = []
        for t in range(episodes["acted"].shape[0]):
            for a in range(plan.num_agents):
                if not episodes["acted"][t, i, a]:
                    continue
                turn = {"turn": t, "seat": a, "name": agents[a], "reply": _text(tokenizer, episodes["action"][t, i, a], pad),
                        "reward": float(episodes["reward"][t, i, a]),
                        "logprob": float(episodes["logprob"][t, i, a]) if lm[a] else None,
                        "value": float(episodes["value"][t, i, a]) if episodes["learns"][i, a] else None}
                if "format_error" in episodes:
                    turn["format_error"] = bool(episodes["format_error"][t, i, a])
                turns.append(turn)
        records.append({"update": int(update), "episode": i, "transcript": "whole" if whole else "last observation",
                        "seats": seats, "turns": turns})
    return records
