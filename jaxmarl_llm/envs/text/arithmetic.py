"""Arithmetic: a generated multi-step problem, one reply `Answer: N`, checked exactly.

Each agent gets its own problem, e.g. `((7 + 12) * 3) - 5`: `num_ops` operations
(+, -, *) on operands in 1..max_operand, evaluated as parenthesized. The
problem text is assembled inside `jit` from pre-encoded pieces (numbers,
operators, brackets). One turn: reward 1 for the right integer, 0 for a wrong
one, `format_penalty` (default -1) when no `Answer: N` can be read.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxmarl_llm.envs.text import buffers, parsing
from jaxmarl_llm.envs.text.base import TextEnv, TextParams, TextState
from jaxmarl_llm.envs.text.buffers import TextAction

PROMPT = "Solve the arithmetic problem. Reply with 'Answer: N'.\nProblem: "
OUTRO = " = ?\n"
OPS = (" + ", " - ", " * ")


@struct.dataclass
class ArithmeticParams(TextParams):
    max_steps: int = 1
    format_penalty: float = -1.0


@struct.dataclass
class ArithmeticState(TextState):
    answer: jax.Array  # [A] int32


def evaluate(operands: jax.Array, ops: jax.Array) -> jax.Array:
    """Left to right (as bracketed): operands [n+1], ops [n] in {0:+, 1:-, 2:*}."""

    def body(acc, x):
        b, op = x
        return jnp.where(op == 0, acc + b, jnp.where(op == 1, acc - b, acc * b)), None

    return jax.lax.scan(body, operands[0], (operands[1:], ops))[0]


class Arithmetic(TextEnv):
    def __init__(self, tokenizer=None, num_agents: int = 1, num_ops: int = 3, max_operand: int = 20, capacity: int = 128, max_action_tokens: int = 16):
        super().__init__(tokenizer, tuple(f"solver_{i}" for i in range(num_agents)), capacity, max_action_tokens)
        self.num_ops, self.max_operand = int(num_ops), int(max_operand)
        # piece rows: numbers 0..max_operand | operators | ")" | opening brackets for n-1 | outro
        strings = [str(i) for i in range(max_operand + 1)] + list(OPS) + [")", "(" * (num_ops - 1), OUTRO]
        self.pieces = self.codec.table(strings)
        self._op0, self._close = max_operand + 1, max_operand + 4
        self._open, self._outro = self._close + 1, self._close + 2
        self.answers = self._action_table([f"Answer: {v}" for v in range(-999, 1000)])
        width = (3 * num_ops + 3) * self.pieces.width
        self._setup([self.codec.encode(PROMPT)] * num_agents, [width])

    @property
    def default_params(self) -> ArithmeticParams:
        return ArithmeticParams()

    def problem(self, key):
        """Operands [n+1], ops [n] and the answer for one agent."""
        k1, k2 = jax.random.split(key)
        operands = jax.random.randint(k1, (self.num_ops + 1,), 1, self.max_operand + 1)
        ops = jax.random.randint(k2, (self.num_ops,), 0, len(OPS))
        return operands, ops, evaluate(operands, ops)

    def _problem_pieces(self, operands, ops):
        n = self.num_ops
        rows = [jnp.int32(self._open), operands[0]]
        for i in range(n):
            rows += [self._op0 + ops[i], operands[i + 1], jnp.int32(self._close if i < n - 1 else -1)]
        rows.append(jnp.int32(self._outro))
        rows = jnp.stack([jnp.asarray(r, jnp.int32) for r in rows])
        lens = jnp.where(rows >= 0, self.pieces.lens[jnp.maximum(rows, 0)], 0)
        return buffers.concat_pieces(self.pieces.ids[jnp.maximum(rows, 0)], lens, self.codec.pad_id)

    def reset(self, key, params=None):
        operands, ops, answer = jax.vmap(self.problem)(jax.random.split(key, self.num_agents))
        ids, lens = jax.vmap(self._problem_pieces)(operands, ops)
        state = ArithmeticState(**self._base_state(jnp.ones((self.num_agents,), bool)), answer=answer.astype(jnp.int32))
        state = self._append(state, ids, lens)
        return self.get_obs(state), state

    def _step(self, key, state, tokens, length, params):
        chars, n = self._chars(tokens, length)
        value, ok = jax.vmap(lambda c, k: parsing.parse_int(c, k, keyword="answer", max_digits=9, signed=True))(chars, n)
        correct = ok & (value == state.answer)
        reward = jnp.where(correct, 1.0, jnp.where(ok, 0.0, params.format_penalty))
        new = self._append(state, tokens, length).replace(turn=state.turn + 1)
        info = {"format_error": ~ok, "solved": correct}
        return new, reward, jnp.bool_(True), jnp.bool_(False), info

    def random_action(self, key, state) -> TextAction:
        """A random answer near the true one (right about a third of the time, when in range)."""
        offset = jax.random.randint(key, (self.num_agents,), -1, 2)
        guess = jnp.clip(state.answer + offset, -999, 999)
        return self.make_action(self.answers, guess + 999)
