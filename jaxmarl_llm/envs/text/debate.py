"""Debate: two debaters argue assigned stances on a motion; a judge picks the winner.

Agents: debater A argues for the motion (from `data/debate_topics.txt`),
debater B against; they alternate for `rounds` rounds (A first). Each argument
is appended to the speaker's transcript and shown to the other debater (and to
the judge). Then:
  judge="rule" (default): a transparent rule-based judge. Each debater scores
    the number of distinct argument markers (`data/argument_markers.txt`:
    "because", "evidence", "for example" ...) used over all its turns; the
    higher score wins, equal scores are a draw.
  judge="lm": a third agent slot (a frozen LM, say) reads the whole debate
    and replies `Winner: A` or `Winner: B`; anything else is a draw.
Rewards at the end: winner +1, loser -0.5, draw 0 for both; the judge gets 0.

Info: `won` (bool per seat: that debater won) for win-rate curves; `spoke` / `new_markers` (a debater's
turn, and the markers it added to its score): runs report `markers_per_speech` (the rule's currency: 3.0 at
best with these arguments, ~1.7 for random ones); with an LM judge, `judged` / `judge_agrees`
(0/1 counts on the verdict turn: the rule judge had a winner, and the LM judge named the same one), which
runs report as `judge_agreement` (its declared info ratios).

Restricted replies (`policy.actions="constrained"`, policies/candidates.py): `action_candidates` lists the
canned ARGUMENTS and, with an LM judge, its two verdicts; `candidate_mask` gives the debaters the arguments
and the judge the verdicts, so a restricted judge always names a winner and RL's debaters choose what to
say, not how to spell it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxmarl_llm.envs.text import datasets, parsing
from jaxmarl_llm.envs.text.base import TextEnv, TextParams, TextState, declare_info_ratios
from jaxmarl_llm.envs.text.buffers import TextAction

# an LM judge's verdicts equal to the rule judge's (no rule draws); the markers a speech adds to its debater's score
declare_info_ratios(judge_agreement=("judge_agrees", "judged"), markers_per_speech=("new_markers", "spoke"))

PROMPTS = (
    "You are debater A. Argue FOR the motion. Keep each turn short.\nMotion: ",
    "You are debater B. Argue AGAINST the motion. Keep each turn short.\nMotion: ",
    "You are the judge of a debate. A argues for the motion, B against. At the end reply 'Winner: A' or 'Winner: B'.\nMotion: ",
)
# label rows: [for the speaker itself, for the other debater, for the judge] x speaker A/B, then "decide"
LABELS = ("\n", "\nOpponent: ", "\nA: ", "\n", "\nOpponent: ", "\nB: ", "\nYour turn.\n", "\nWho won? Reply 'Winner: A' or 'Winner: B'.\n")
ARGUMENTS = (
    "I believe this because the evidence is clear.",
    "For example, studies show the benefits; therefore we should act.",
    "However, the data suggests otherwise.",
    "First, it is fair. Second, it works. In conclusion, yes.",
    "Research says ten percent more people agree.",
    "This is simply wrong.",
)


@struct.dataclass
class DebateParams(TextParams):
    max_steps: int = 5
    win_reward: float = 1.0
    lose_reward: float = -0.5


@struct.dataclass
class DebateState(TextState):
    topic: jax.Array  # [] int32
    markers: jax.Array  # [2, K] bool: argument markers each debater has used
    speeches: jax.Array  # [] int32 debater turns taken


class Debate(TextEnv):

    max_movers = 1  # turn-based: one seat writes per step
    def __init__(self, tokenizer=None, judge: str = "rule", rounds: int = 2, capacity: int = 1536, max_action_tokens: int = 160):
        if judge not in ("rule", "lm"):
            raise ValueError(f"judge must be 'rule' or 'lm', got {judge!r}")
        agents = ("debater_a", "debater_b") + (("judge",) if judge == "lm" else ())
        super().__init__(tokenizer, agents, capacity, max_action_tokens)
        self.judge, self.rounds = judge, int(rounds)
        self.topics = self.codec.table([t + "\n" for t in datasets.debate_topics()])
        self.markers = parsing.StringSet(datasets.argument_markers(), alnum_only=False)
        self.labels = self.codec.table(LABELS)
        self.arguments = self._action_table(list(ARGUMENTS))
        self.verdicts = self._action_table(["Winner: A", "Winner: B"])
        # restricted replies: [arguments, verdicts (lm judge)]; debaters argue, the judge names a winner
        self.action_candidates = self.arguments.rows() + (self.verdicts.rows() if judge == "lm" else ())
        roles = jnp.arange(len(self.action_candidates)) >= len(ARGUMENTS)  # [K] True: a verdict
        self.seat_candidates = (jnp.arange(self.num_agents) == 2)[:, None] == roles[None, :]  # [A, K]
        self._setup([self.codec.encode(p) for p in PROMPTS[: self.num_agents]], [self.topics.width, self.labels.width])

    @property
    def default_params(self) -> DebateParams:
        return DebateParams(max_steps=2 * self.rounds + (self.judge == "lm"))

    def reset(self, key, params=None):
        topic = jax.random.randint(key, (), 0, self.topics.ids.shape[0])
        a = self.num_agents
        state = DebateState(
            **self._base_state(jnp.arange(a) == 0),
            topic=topic,
            markers=jnp.zeros((2, self.markers.codes.shape[0]), bool),
            speeches=jnp.int32(0),
        )
        state = self._append_table(state, self.topics, jnp.full((a,), topic))
        state = self._append_table(state, self.labels, jnp.full((a,), 6), jnp.arange(a) == 0)
        return self.get_obs(state), state

    def parse_verdict(self, tokens, length) -> jax.Array:
        """Judge reply -> 0 (A), 1 (B) or -1 (unreadable)."""
        chars, n = parsing.decode_chars(self.codec.token_chars, self.codec.token_nchars, tokens, length)
        chars, n = parsing.compact_alnum(chars, n)
        found, after = parsing.find_keyword(chars, n, "winner")
        nxt = chars[jnp.minimum(after, chars.shape[0] - 1)]
        ok = found & (after < n)
        return jnp.where(ok & (nxt == ord("a")), 0, jnp.where(ok & (nxt == ord("b")), 1, -1))

    def rule_verdict(self, markers: jax.Array) -> jax.Array:
        score = markers.sum(-1)  # [2]
        return jnp.where(score[0] > score[1], 0, jnp.where(score[1] > score[0], 1, -1))

    def _step(self, key, state, tokens, length, params):
        a = self.num_agents
        seat = jnp.arange(a)
        judging = (state.speeches >= 2 * self.rounds)  # only with an LM judge
        speaker = state.speeches % 2  # 0 A, 1 B
        chars, n = parsing.decode_chars(self.codec.token_chars, self.codec.token_nchars, tokens[speaker], length[speaker])
        used = self.markers.occurs(chars, n) & ~judging
        markers = state.markers.at[speaker].set(state.markers[speaker] | used)
        new = self._append(state, tokens, length)
        # label + argument for each listener: the speaker gets a newline, the other debater and the judge a header
        label = jnp.where(seat == speaker, 3 * speaker, jnp.where(seat == 2, 3 * speaker + 2, 3 * speaker + 1))
        new = self._append_table(new, self.labels, label, ~judging)
        show = (seat != speaker) & ~judging
        new = self._append(new, jnp.broadcast_to(tokens[speaker], tokens.shape), jnp.where(show, length[speaker], 0))
        speeches = state.speeches + 1
        debate_over = speeches >= 2 * self.rounds
        nxt = jnp.where(debate_over, 2, speeches % 2)
        prompt = jnp.where(nxt == 2, 7, 6)
        rule = self.rule_verdict(markers)  # the rule's winner (-1: a draw), also what an LM judge is checked against
        if self.judge == "lm":
            new = self._append_table(new, self.labels, jnp.full((a,), prompt), (seat == nxt) & ~judging)
            verdict = self.parse_verdict(tokens[-1], length[-1])
            finished = judging
        else:
            new = self._append_table(new, self.labels, jnp.full((a,), prompt), (seat == nxt) & ~debate_over)
            verdict = rule
            finished = debate_over
        win = jnp.where(verdict == seat, params.win_reward, params.lose_reward)
        reward = jnp.where(finished & (verdict >= 0) & (seat < 2), win, 0.0)
        new = new.replace(turn=state.turn + 1, markers=markers, speeches=speeches, active=(seat == nxt) & ~finished)
        new_markers = (used & ~state.markers[speaker]).sum()  # what this speech adds to the speaker's score
        info = {"verdict": jnp.full((a,), jnp.where(finished, verdict, -1)),
                "won": finished & (verdict == seat) & (seat < 2),
                "spoke": jnp.broadcast_to(~judging, (a,)).astype(jnp.int32),
                "new_markers": jnp.broadcast_to(jnp.where(judging, 0, new_markers), (a,)).astype(jnp.int32)}
        if self.judge == "lm":  # int, not bool: a bool info becomes a per-episode "<name>_rate" in RL metrics
            judged = finished & (rule >= 0)
            info["judged"] = jnp.broadcast_to(judged, (a,)).astype(jnp.int32)
            info["judge_agrees"] = jnp.broadcast_to(judged & (verdict == rule), (a,)).astype(jnp.int32)
        return new, reward, finished, jnp.bool_(False), info

    def candidate_mask(self, state) -> jax.Array:
        """[A, K]: debaters the arguments, the judge the verdicts."""
        return self.seat_candidates

    def argument_markers(self) -> jax.Array:
        """bool [len(ARGUMENTS), K]: the markers each canned argument uses (what the rule judge credits)."""
        return jax.vmap(lambda t, n: self.markers.occurs(*parsing.decode_chars(
            self.codec.token_chars, self.codec.token_nchars, t, n)))(self.arguments.ids, self.arguments.lens)

    builtin_players = ("random",)  # the kinds `opponent_action` plays

    def opponent_action(self, key, state, kind: str = "random") -> TextAction:
        """The built-in player (`random_action`: a random canned argument), e.g. `scripted_agents="1:random"`."""
        if kind != "random":
            raise ValueError(f"debate has one built-in player, 'random'; got {kind!r}")
        return self.random_action(key, state)

    def random_action(self, key, state) -> TextAction:
        """A canned argument from the speaker; the judge (if any) names a random winner."""
        k1, k2 = jax.random.split(key)
        arg = jax.random.randint(k1, (self.num_agents,), 0, len(ARGUMENTS))
        action = self.make_action(self.arguments, arg, state.active)
        if self.judge == "lm":
            v = jax.random.randint(k2, (), 0, 2)
            action = TextAction(
                action.tokens.at[2].set(self.verdicts.ids[v]),
                action.length.at[2].set(jnp.where(state.active[2], self.verdicts.lens[v], 0)),
            )
        return action
