"""Actions restricted to an env's valid replies: constrained decoding and scored candidates.

An env that lists its valid replies (`env.action_candidates`, K token sequences, and per state
`env.candidate_mask(state) -> [A, K]`) lets a policy act in one of three modes (`policy.actions`):

  * "free": plain sampling over the vocabulary (the reply may not parse);
  * "constrained" (grammar-constrained decoding): at decode step j only tokens that continue some
    valid candidate keep their logits: a prefix trie over the candidates' token ids, built once outside
    `jit` as static arrays (`Trie`); a row walks it one node per token, and a child is allowed when some
    candidate valid in this state lies below it. So the reply always parses, and the log-prob of a token
    is under the distribution renormalised over the allowed children of its node;
  * "scored" (GLAM / TWOSOME): one forward scores every candidate's whole sequence under the free
    LM (summed log-probs, or their mean with `length_normalize`), and the action is drawn from the
    softmax over the valid candidates.

Every function here is shared by acting and by the loss, so the log-prob recorded at acting is the one
the loss recomputes (PPO's ratio starts at 1), and the entropy and the KL reference are the restricted
distribution's. Only [..., C] gathers of the logits (C: the widest branching): no [V]-wide mask is built.

    cands = build(replies, eos_id, max_tokens)       # once, outside jit: Candidates (its trie is numpy)
    tokens, lp, mask, cache = constrained_decode(keys, logits, cache, step_fn, cands, valid, temperature, m, pad)
    lp, ent = restricted_scores(cands, logits [..., M, V], action [..., M], valid [..., K], temperature)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

ACTION_MODES = ("free", "constrained", "scored")
_NEG = -1e30  # logit of a token outside the node's children (finite: 0 * logp stays finite in entropies)


class Trie(NamedTuple):
    """The candidates' prefix trie as static arrays (N nodes, node 0 the root, C = the widest branching)."""

    child_tok: np.ndarray  # [N, C] int32: the token leading to each child (0 where none)
    child_node: np.ndarray  # [N, C] int32: the child's node (0 where none)
    has_child: np.ndarray  # [N, C] bool
    path: np.ndarray  # [K, D] int32: the node after each token of candidate k (N past its end: a sink)
    leaf_cand: np.ndarray  # [N] int32: the candidate ending at this node (-1 inside the trie)


@dataclasses.dataclass(frozen=True)
class Candidates:
    """K valid replies (tuples: hashable, so a policy holding them can be a static argument of `jit`)."""

    replies: tuple[tuple[int, ...], ...]  # each reply's ids (+ eos where one reply is a prefix of another)

    @property
    def size(self) -> int:  # K
        return len(self.replies)

    @property
    def depth(self) -> int:  # D: decode steps of the longest reply
        return max(len(r) for r in self.replies)

    @property
    def lens(self) -> np.ndarray:  # [K] int32
        return np.asarray([len(r) for r in self.replies], np.int32)

    def table(self, width: int | None = None) -> np.ndarray:
        """[K, width] int32 ids (default width D), 0 after each reply."""
        width = self.depth if width is None else width
        out = np.zeros((self.size, max(width, self.depth)), np.int32)
        for i, r in enumerate(self.replies):
            out[i, : len(r)] = r
        return out[:, :width]

    @property
    def trie(self) -> Trie:
        return _trie(self.replies)


@functools.lru_cache(maxsize=32)
def _trie(replies: tuple[tuple[int, ...], ...]) -> Trie:
    children: list[dict[int, int]] = [{}]
    path = np.zeros((len(replies), max(len(r) for r in replies)), np.int32)
    ends: dict[int, int] = {}
    for k, reply in enumerate(replies):
        node = 0
        for j, tok in enumerate(reply):
            if tok not in children[node]:
                children[node][tok] = len(children)
                children.append({})
            node = children[node][tok]
            path[k, j] = node
        ends[node] = k
    n, c = len(children), max(1, max(len(ch) for ch in children))
    path = np.where(np.arange(path.shape[1])[None, :] < np.asarray([len(r) for r in replies])[:, None], path, n)
    child_tok, child_node = np.zeros((n, c), np.int32), np.zeros((n, c), np.int32)
    has = np.zeros((n, c), bool)
    for i, ch in enumerate(children):
        for j, (tok, node) in enumerate(ch.items()):
            child_tok[i, j], child_node[i, j], has[i, j] = tok, node, True
    leaf = np.full((n,), -1, np.int32)
    for node, k in ends.items():
        leaf[node] = k
    return Trie(child_tok, child_node, has, path.astype(np.int32), leaf)


def build(ids: Sequence[Sequence[int]], eos_id: int, max_tokens: int) -> Candidates:
    """The candidates of replies `ids` (lists of token ids). A reply that is a proper prefix of another
    ("Guess: 1" / "Guess: 10") gets `eos_id` appended so the trie knows where it ends; the others end at a leaf."""
    replies = [tuple(int(t) for t in r) for r in ids]
    if not replies or any(len(r) == 0 for r in replies):
        raise ValueError("action candidates must be non-empty token sequences")
    if len(set(replies)) != len(replies):
        dups = sorted({r for r in replies if replies.count(r) > 1})
        raise ValueError(f"action candidates repeat a reply ({dups[0]}): every candidate must encode differently")
    prefixes = {r[:i] for r in replies for i in range(1, len(r))}
    replies = [r + (eos_id,) if r in prefixes else r for r in replies]
    depth = max(len(r) for r in replies)
    if depth > max_tokens:
        raise ValueError(f"an action candidate has {depth} tokens > max_action_tokens={max_tokens}")
    return Candidates(tuple(replies))


def some_valid(valid: jax.Array) -> jax.Array:
    """valid [..., K] with rows that allow nothing (a finished board, an idle seat) opened to every candidate."""
    return jnp.where(valid.any(-1, keepdims=True), valid, True)


def node_ok(cands: Candidates, valid: jax.Array) -> jax.Array:
    """[..., N] bool: trie nodes on the path of some valid candidate (valid [..., K])."""
    trie = cands.trie
    n = trie.child_tok.shape[0]
    flat = jnp.asarray(trie.path.reshape(-1))  # [K * D]
    hits = jnp.repeat(some_valid(valid), trie.path.shape[1], axis=-1)  # [..., K * D]
    ok = jnp.zeros(valid.shape[:-1] + (n + 1,), bool).at[..., flat].max(hits)
    return ok[..., :n]


def children(cands: Candidates, node: jax.Array, ok: jax.Array):
    """The children of trie nodes node [...]: (tokens [..., C], allowed [..., C], next nodes [..., C])."""
    trie = cands.trie
    tok = jnp.asarray(trie.child_tok)[node]
    nxt = jnp.asarray(trie.child_node)[node]
    allowed = jnp.asarray(trie.has_child)[node] & jnp.take_along_axis(ok, nxt, axis=-1)
    return tok, allowed, nxt


def node_distribution(logits_at: jax.Array, allowed: jax.Array, temperature: float):
    """The restricted distribution at a trie node: logits of its children's tokens [..., C] and which are
    allowed [..., C] -> (log-probs [..., C], entropy [...])."""
    g = logits_at.astype(jnp.float32) / (temperature if temperature > 0 else 1.0)
    lp = jax.nn.log_softmax(jnp.where(allowed, g, _NEG), axis=-1)
    return lp, -jnp.sum(jnp.where(allowed, jnp.exp(lp) * lp, 0.0), axis=-1)


def _pick(key: jax.Array, lp: jax.Array, allowed: jax.Array, temperature: float) -> jax.Array:
    """One index per row of lp [C] among the allowed entries (greedy at temperature 0)."""
    masked = jnp.where(allowed, lp, -jnp.inf)
    return jnp.argmax(masked, axis=-1) if temperature == 0 else jax.random.categorical(key, masked, axis=-1)


def constrained_decode(keys: jax.Array, logits: jax.Array, cache, step_fn, cands: Candidates, valid: jax.Array,
                       temperature: float, max_new_tokens: int, pad_id: int):
    """Decode one valid reply per row by walking the trie (`sampling.decode`'s contract).

    keys [B] (one per row), logits [B, V] predict the first token, step_fn(tokens [B], cache) -> (logits, cache),
    valid [B, K]. Returns (tokens [B, M], logprobs [B, M], mask [B, M], cache); the cache holds every sampled
    token but the last, as `decode` leaves it. D - 1 model calls (none when every reply is one token).
    """
    b, depth = logits.shape[0], cands.depth
    leaf = jnp.asarray(cands.trie.leaf_cand)
    step_keys = jax.vmap(lambda k: jax.random.split(k, depth))(keys)  # [B, D, ...]
    ok = node_ok(cands, valid)  # [B, N]
    node = jnp.zeros((b,), jnp.int32)
    done = jnp.zeros((b,), bool)
    out_tok, out_lp, out_mask = [], [], []
    for j in range(depth):  # D is small and static: an unrolled loop
        tok_c, allowed, nxt = children(cands, node, ok)  # [B, C]
        lp_c, _ = node_distribution(jnp.take_along_axis(logits, tok_c, axis=-1), allowed, temperature)
        c = jax.vmap(lambda key, l, a: _pick(key, l, a, temperature))(step_keys[:, j], lp_c, allowed)  # [B]
        pick = lambda x: jnp.take_along_axis(x, c[:, None], axis=-1)[:, 0]  # noqa: E731
        out_tok.append(jnp.where(done, pad_id, pick(tok_c)))
        out_lp.append(jnp.where(done, 0.0, pick(lp_c)))
        out_mask.append(~done)
        node = jnp.where(done, node, pick(nxt))
        done = done | (leaf[node] >= 0)
        if j + 1 < depth:
            logits, cache = step_fn(out_tok[-1], cache)
    pad = max_new_tokens - depth
    tokens = jnp.pad(jnp.stack(out_tok, 1), ((0, 0), (0, pad)), constant_values=pad_id).astype(jnp.int32)
    logprobs = jnp.pad(jnp.stack(out_lp, 1), ((0, 0), (0, pad)))
    mask = jnp.pad(jnp.stack(out_mask, 1), ((0, 0), (0, pad)))
    return tokens, logprobs, mask, cache


class Walk(NamedTuple):
    """A recorded reply walked through the trie: per token, the node it was chosen at and which child it is."""

    tokens: jax.Array  # [..., M, C] the node's children's tokens
    allowed: jax.Array  # [..., M, C]
    child: jax.Array  # [..., M] the child the action token is
    live: jax.Array  # [..., M] bool: the token is part of a valid reply
    leaf: jax.Array  # [...] the candidate the reply spells (-1 if it is none)


def walk(cands: Candidates, action: jax.Array, valid: jax.Array) -> Walk:
    """Follow action [..., M] down the trie (valid [..., K]): M small gathers, no model."""
    leaf = jnp.asarray(cands.trie.leaf_cand)
    ok = node_ok(cands, valid)
    node = jnp.zeros(action.shape[:-1], jnp.int32)
    ended = jnp.zeros(action.shape[:-1], bool)
    toks, alloweds, childs, lives = [], [], [], []
    for j in range(action.shape[-1]):
        tok_c, allowed, nxt = children(cands, node, ok)
        hit = allowed & (tok_c == action[..., j, None])
        live = hit.any(-1) & ~ended
        c = jnp.argmax(hit, axis=-1)
        toks.append(tok_c), alloweds.append(allowed), childs.append(c), lives.append(live)
        node = jnp.where(live, jnp.take_along_axis(nxt, c[..., None], -1)[..., 0], node)
        ended = ended | ~live | (leaf[node] >= 0)
    stack = lambda xs: jnp.stack(xs, axis=action.ndim - 1)  # noqa: E731
    return Walk(stack(toks), stack(alloweds), stack(childs), stack(lives), jnp.where(lives[0], leaf[node], -1))


def restricted_scores(cands: Candidates, logits: jax.Array, action: jax.Array, valid: jax.Array,
                      temperature: float) -> tuple[jax.Array, jax.Array]:
    """Log-prob and entropy [..., M] of each action token under the constrained distribution it was decoded from.

    logits [..., M, V]: the logits that predicted action[..., j]; valid [..., K]. Positions past the reply
    score 0 (the caller masks them)."""
    w = walk(cands, action, valid)
    lp_c, ent = node_distribution(jnp.take_along_axis(logits, w.tokens, axis=-1), w.allowed, temperature)
    lp = jnp.take_along_axis(lp_c, w.child[..., None], axis=-1)[..., 0]
    return jnp.where(w.live, lp, 0.0), jnp.where(w.live, ent, 0.0)


# ---- scored candidates ------------------------------------------------------------------------------------

def candidate_logprobs(cands: Candidates, seq_logits: jax.Array, length_normalize: bool) -> jax.Array:
    """Each candidate's sequence score [..., K] from logits [..., K, D, V] (position j predicts token j)."""
    lp_all = jax.nn.log_softmax(seq_logits.astype(jnp.float32), axis=-1)
    tok = jnp.asarray(cands.table())  # [K, D]
    lp = jnp.take_along_axis(lp_all, jnp.broadcast_to(tok, lp_all.shape[:-1])[..., None], -1)[..., 0]
    lens = jnp.asarray(cands.lens)
    lp = jnp.where(jnp.arange(cands.depth)[None, :] < lens[:, None], lp, 0.0).sum(-1)  # [..., K]
    return lp / lens if length_normalize else lp


def scored_distribution(scores: jax.Array, valid: jax.Array, temperature: float):
    """Softmax over the valid candidates' scores [..., K] -> (log-probs [..., K], entropy [...])."""
    ok = some_valid(valid)
    g = jnp.where(ok, scores / (temperature if temperature > 0 else 1.0), _NEG)
    lp = jax.nn.log_softmax(g, axis=-1)
    return lp, -jnp.sum(jnp.where(ok, jnp.exp(lp) * lp, 0.0), axis=-1)


def scored_pick(keys: jax.Array, scores: jax.Array, valid: jax.Array, temperature: float):
    """Sample a candidate per row: keys [B], scores / valid [B, K] -> (index [B], log-prob [B])."""
    lp, _ = scored_distribution(scores, valid, temperature)
    k = jax.vmap(lambda key, l: _pick(key, l, jnp.ones(l.shape, bool), temperature))(keys, lp)
    return k, jnp.take_along_axis(lp, k[:, None], -1)[:, 0]


def candidate_index(cands: Candidates, action: jax.Array) -> jax.Array:
    """The candidate an action [..., M] spells (0 if none): scored turns store the reply's tokens."""
    return jnp.maximum(walk(cands, action, jnp.ones(action.shape[:-1] + (cands.size,), bool)).leaf, 0)
