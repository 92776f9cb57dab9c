"""Cooperative writing: agent 0 writes a short setup, agent 1 expands it.

Two turns. Both agents get a theme from `data/writing_prompts.txt`; the
writer's setup is then shown to the expander. Joint reward (both agents) at
the end: 1 when the expansion is 2-3x as long as the setup (in characters),
`exp(-decay * distance)` outside the band (distance of the ratio to the band),
0 for an empty setup.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxmarl_llm.envs.text import datasets
from jaxmarl_llm.envs.text.base import TextEnv, TextParams, TextState
from jaxmarl_llm.envs.text.buffers import TextAction

WRITER_PROMPT = "You write the setup of a short story with a partner. Write two or three sentences. Theme: "
EXPANDER_PROMPT = "You expand your partner's story setup into a story two to three times as long. Theme: "
SHOW_SETUP = "\nSetup: "
ASK_EXPAND = "\nNow write the expanded story.\n"
FILLER = "The night was quiet and the wind moved through the old trees. "


@struct.dataclass
class WritingParams(TextParams):
    max_steps: int = 2
    low: float = 2.0
    high: float = 3.0
    decay: float = 1.0


@struct.dataclass
class WritingState(TextState):
    theme: jax.Array  # [] int32
    setup_chars: jax.Array  # [] int32


def band_reward(ratio: jax.Array, low: float, high: float, decay: float) -> jax.Array:
    distance = jnp.maximum(jnp.maximum(low - ratio, ratio - high), 0.0)
    return jnp.exp(-decay * distance)


class CooperativeWriting(TextEnv):

    max_movers = 1  # turn-based: one seat writes per step
    def __init__(self, tokenizer=None, capacity: int = 1024, max_action_tokens: int = 320):
        super().__init__(tokenizer, ("writer", "expander"), capacity, max_action_tokens)
        self.themes = self.codec.table([t + ".\n" for t in datasets.writing_prompts()])
        self.notes = self.codec.table([SHOW_SETUP, ASK_EXPAND])
        fits = [FILLER * k for k in range(1, 6) if len(self.codec.encode(FILLER * k)) <= self.max_action_tokens]
        self.fillers = self._action_table(fits or [FILLER[: self.max_action_tokens // 2]])
        self._setup([self.codec.encode(WRITER_PROMPT), self.codec.encode(EXPANDER_PROMPT)], [self.themes.width, self.notes.width])

    @property
    def default_params(self) -> WritingParams:
        return WritingParams()

    def reset(self, key, params=None):
        theme = jax.random.randint(key, (), 0, self.themes.ids.shape[0])
        state = WritingState(**self._base_state(jnp.array([True, False])), theme=theme, setup_chars=jnp.int32(0))
        state = self._append_table(state, self.themes, jnp.full((2,), theme))
        return self.get_obs(state), state

    def _chars_of(self, tokens, length):
        valid = jnp.arange(tokens.shape[-1]) < length
        return jnp.sum(jnp.where(valid, self.codec.token_len[tokens], 0))

    def _step(self, key, state, tokens, length, params):
        writing = state.active[0]
        seat = jnp.arange(2)
        new = self._append(state, tokens, length)
        # the expander reads the setup
        show = (seat == 1) & writing
        new = self._append_table(new, self.notes, jnp.zeros((2,), jnp.int32), show)
        new = self._append(new, jnp.broadcast_to(tokens[0], tokens.shape), jnp.where(show, length[0], 0))
        new = self._append_table(new, self.notes, jnp.ones((2,), jnp.int32), show)
        setup_chars = jnp.where(writing, self._chars_of(tokens[0], length[0]), state.setup_chars)
        story_chars = self._chars_of(tokens[1], length[1])
        ratio = story_chars / jnp.maximum(setup_chars, 1)
        score = jnp.where(setup_chars > 0, band_reward(ratio, params.low, params.high, params.decay), 0.0)
        finished = ~writing
        reward = jnp.full((2,), jnp.where(finished, score, 0.0))
        new = new.replace(turn=state.turn + 1, setup_chars=setup_chars, active=seat == 1)
        info = {"ratio": jnp.full((2,), jnp.where(finished, ratio, 0.0))}
        return new, reward, finished, jnp.bool_(False), info

    def random_action(self, key, state) -> TextAction:
        """Random-length filler text from whoever is active."""
        k = jax.random.randint(key, (2,), 0, self.fillers.ids.shape[0])
        return self.make_action(self.fillers, k, state.active)
