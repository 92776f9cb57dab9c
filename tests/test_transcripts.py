"""Incremental acting (KV cache kept across turns) and one-forward episode scoring agree with the reference path.

The reference re-reads each whole transcript every turn (`LMPolicy.sample`) and scores
every turn's prompt + action separately (`LMPolicy.score`); the incremental path reads
only new tokens and scores each episode once. Greedy sampling makes the two paths'
actions comparable token by token.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs import registry
from jaxmarl_llm.models import config as model_config
from jaxmarl_llm.models.lora import LoraConfig
from jaxmarl_llm.models.sampling import SamplingConfig
from jaxmarl_llm.models.transformer import init_params
from jaxmarl_llm.policies import transcripts
from jaxmarl_llm.policies.lm_policy import LMPolicy, append_tokens
from jaxmarl_llm.tokenizers import CharTokenizer
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import lm_rl_defaults, validate_lm_rl

GAMES = ("text/guess_number", "text/tic_tac_toe", "text/twenty_questions", "text/debate", "text/cooperative_writing",
         "text/arithmetic")


def _policy(temperature=0.0, m=6):
    tok = CharTokenizer()
    cfg = model_config.tiny("qwen3", vocab_size=tok.vocab_size, max_position_embeddings=512)
    base = init_params(cfg, jax.random.PRNGKey(0), std=0.1)
    policy = LMPolicy(cfg, LoraConfig(rank=4, alpha=8.0), SamplingConfig(max_new_tokens=m, temperature=temperature,
                                                                         stop_ids=(tok.eos_id,), pad_id=tok.pad_id))
    trainable = policy.init_trainable(jax.random.PRNGKey(1), num_agents=3)
    # non-zero B so the adapters matter, a different one per row
    trainable["lora"] = jax.tree.map(lambda x: x + 0.05 * jax.random.normal(jax.random.PRNGKey(2), x.shape), trainable["lora"])
    trainable["value_head"]["kernel"] = jax.random.normal(jax.random.PRNGKey(3), trainable["value_head"]["kernel"].shape)
    return tok, policy, base, trainable


def test_act_rows_over_two_turns_matches_full_prefill():
    tok, policy, base, trainable = _policy()
    b, cap, m = 3, 96, policy.sampling.max_new_tokens
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(3, tok.vocab_size, (b, cap)), jnp.int32)
    length = jnp.asarray([17, 40, 5], jnp.int32)
    tokens = jnp.where(jnp.arange(cap)[None] < length[:, None], tokens, tok.pad_id)
    cache = transcripts.init_rows(policy.cfg, b, cap + m)
    one = lambda x, i: jax.tree.map(lambda y: y[i], x)  # noqa: E731
    for turn in range(2):
        key = jax.random.PRNGKey(turn)
        got, cache = jax.jit(transcripts.act_rows, static_argnums=(0, 7))(policy, key, base, trainable, tokens, length,
                                                                           cache, 8)
        for r in range(b):
            ref = policy.sample(key, base, one(trainable, r), tokens[r:r + 1], length[r:r + 1])
            np.testing.assert_array_equal(np.asarray(got.tokens[r]), np.asarray(ref.tokens[0]))
            np.testing.assert_allclose(np.asarray(got.logprobs[r]), np.asarray(ref.logprobs[0]), atol=2e-5)
            np.testing.assert_allclose(float(got.value[r]), float(ref.value[0]), atol=2e-5, rtol=1e-5)
        # the env's echo: the action up to its stop token, then 11 tokens of feedback
        echoed = jnp.where(got.mask & (got.tokens != tok.eos_id), got.tokens, tok.pad_id)
        feedback = jnp.asarray(rng.integers(3, tok.vocab_size, (b, 11)), jnp.int32)
        piece = jnp.concatenate([echoed, feedback], axis=1)
        tokens, length, _ = append_tokens(tokens, length, piece, jnp.concatenate(
            [echoed != tok.pad_id, jnp.ones_like(feedback, bool)], 1))
        tokens = tokens[:, :cap]
        assert int(cache.seen.max()) <= int(length.max())


def test_score_transcripts_matches_per_turn_scoring():
    tok, policy, base, trainable = _policy(temperature=0.7)
    one = jax.tree.map(lambda y: y[0], trainable)
    rng = np.random.default_rng(1)
    b, t, m, cap = 2, 3, policy.sampling.max_new_tokens, 80
    # build an episode: prompt, then per turn action (with eos on turn 0) + feedback
    seq = list(rng.integers(3, tok.vocab_size, 10))
    prompt_len, actions, masks = [], [], []
    for turn in range(t):
        prompt_len.append(len(seq))
        k = 4 if turn else 2
        act = list(rng.integers(3, tok.vocab_size, k)) + ([tok.eos_id] if turn == 0 else [])
        actions.append(act + [tok.pad_id] * (m - len(act)))
        masks.append([1] * len(act) + [0] * (m - len(act)))
        seq += [a for a in act if a != tok.eos_id] + list(rng.integers(3, tok.vocab_size, 7))
    final = np.full((cap,), tok.pad_id)
    final[: len(seq)] = seq
    final = jnp.asarray(np.stack([final] * b), jnp.int32)
    plen = jnp.asarray([prompt_len] * b, jnp.int32)
    action = jnp.asarray([actions] * b, jnp.int32)
    mask = jnp.asarray([masks] * b, bool)
    whole = transcripts.episode_sequence(final, plen[:, -1], action[:, -1], mask[:, -1])
    lp, ent, value = transcripts.score_transcripts(policy, base, one, whole, plen, action, mask, (32, 64, cap + m))
    for turn in range(t):
        prompt = jnp.where(jnp.arange(cap)[None] < plen[:, turn, None], final, tok.pad_id)
        toks, lens, amask = append_tokens(prompt, plen[:, turn], action[:, turn], mask[:, turn])
        ref_lp, ref_ent, ref_v = policy.score(base, one, toks, lens, amask)
        take = jax.vmap(lambda row, s: jax.lax.dynamic_slice(row, (s,), (m,)))
        np.testing.assert_allclose(np.asarray(lp[:, turn]), np.asarray(take(ref_lp, plen[:, turn])), atol=2e-5)
        np.testing.assert_allclose(np.asarray(ent[:, turn]), np.asarray(take(ref_ent, plen[:, turn])), atol=2e-5)
        # per-token values (token-level credit): the value head at each token's context, as policy.score gives
        np.testing.assert_allclose(np.asarray(value[:, turn]), np.asarray(take(ref_v, plen[:, turn])), atol=2e-5)


@pytest.mark.parametrize("name", GAMES)
def test_games_echo_actions_and_respect_max_movers(name):
    """What the incremental rollout relies on: transcripts only grow, the mover's cleaned action sits verbatim at
    the end of its previous transcript, and no more than `max_movers` seats are active at once."""
    env = registry.make(name)
    assert env.appends_actions
    movers = env.max_movers or env.num_agents
    keys = jax.random.split(jax.random.PRNGKey(0), 64)

    def episode(key):
        obs, state = env.reset(key)

        def turn(carry, k):
            obs, state = carry
            action = env.random_action(k, state)
            active = env.active(state)
            nxt, state2, *_ = env.step(k, state, action)
            done = state.done
            tokens, length = action.tokens, jnp.where(active & ~done, action.length, 0)
            m = tokens.shape[-1]
            at_prompt = jax.vmap(lambda row, s: jax.lax.dynamic_slice(row, (s,), (m,)))(
                jnp.pad(nxt.tokens, ((0, 0), (0, m))), obs.length)
            fits = obs.length + length <= env.capacity
            ok = jnp.all(jnp.where((jnp.arange(m)[None] < length[:, None]) & fits[:, None], at_prompt == tokens, True))
            prefix = jnp.all(jnp.where(jnp.arange(obs.tokens.shape[-1])[None] < obs.length[:, None],
                                       nxt.tokens == obs.tokens, True))
            return (nxt, state2), (ok & prefix, jnp.where(done, 0, active.sum()))

        _, (ok, n_active) = jax.lax.scan(turn, (obs, state), jax.random.split(key, 12))
        return ok, n_active

    ok, n_active = jax.jit(jax.vmap(episode))(keys)
    assert bool(ok.all())
    assert int(n_active.max()) <= movers


def _trainer(env_name, incremental, **kw):
    c = lm_rl_defaults()
    c.env_name = env_name
    c.algo = "ppo"
    c.group_size = 1
    c.num_envs, c.num_turns = 4, 4
    c.sampling.temperature = 0.0
    c.share_policy = False
    c.lr = 1e-2
    c.model.max_position_embeddings = 1024
    c.mesh.num_devices = 1
    c.rollout.incremental = incremental
    c.rollout.chunk = 32
    for k, v in kw.items():
        *path, leaf = k.split(".")
        node = c
        for p in path:
            node = node[p]
        node[leaf] = v
    validate_lm_rl(c)
    return lm_rl.make_train(c)


@pytest.mark.parametrize("env_name,kw", [
    ("text/guess_number", {"env_kwargs": {"capacity": 320, "max_action_tokens": 12}, "rollout.min_score_width": 192,
                           "credit": "token", "clip_value": True}),
    ("text/cooperative_writing", {"env_kwargs": {"capacity": 256, "max_action_tokens": 8}, "num_turns": 5,
                                  "sampling.temperature": 1.0, "rollout.min_score_width": 256, "critic.kind": "mappo"}),
])
def test_incremental_rollout_and_update_equal_reference(env_name, kw):
    """Same actions, log-probs and values turn by turn, and the same adapters after one PPO update (guess_number:
    token-level credit with value clipping; cooperative_writing: the MAPPO critic, whose inputs read off the final
    transcripts equal those read turn by turn)."""
    out = {}
    for inc in (False, True):
        trainer = _trainer(env_name, inc, **kw)
        state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
        # non-zero adapters and value heads so both paths have something to disagree about
        state = state.replace(trainable=jax.tree.map(
            lambda x: x + 0.03 * jax.random.normal(jax.random.PRNGKey(5), x.shape), state.trainable))
        turns, _, _ = jax.jit(lambda s: trainer.rollout(jax.random.PRNGKey(1), trainer.base, s.trainable, s.pool,
                                                        jnp.arange(4)))(state)
        new, metrics = jax.jit(lambda s: trainer.update(s, trainer.hparams, trainer.base))(state)
        out[inc] = (turns, new, metrics)
    (t0, s0, m0), (t1, s1, m1) = out[False], out[True]
    assert int(t0.acted.sum()) > 4  # several turns were played
    np.testing.assert_array_equal(np.asarray(t0.action), np.asarray(t1.action))
    np.testing.assert_array_equal(np.asarray(t0.action_mask), np.asarray(t1.action_mask))
    np.testing.assert_allclose(np.asarray(t0.logprob), np.asarray(t1.logprob), atol=5e-5)
    np.testing.assert_allclose(np.asarray(t0.value), np.asarray(t1.value), atol=5e-5, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(t0.critic_obs), np.asarray(t1.critic_obs), atol=5e-5, rtol=1e-4)
    assert set(m0) == set(m1) and "value_loss" in m0
    work = ("tokens_rollout", "tokens_loss", "flops_rollout", "flops_loss")  # what each path reads: its own
    for k in set(m0) - set(work):
        np.testing.assert_allclose(np.asarray(m0[k]), np.asarray(m1[k]), atol=1e-4, rtol=1e-4, err_msg=k)  # the
        # sampled episodes (episodes/*) too: both paths played the same games
    assert all(float(m0[k]) >= float(m1[k]) > 0 for k in work)  # re-reading every prompt costs at least the cache
    for a, b in zip(jax.tree.leaves(s0.trainable), jax.tree.leaves(s1.trainable)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-4)


def test_incremental_needs_minibatches_of_whole_episodes():
    from jaxmarl_llm.train.config import ConfigError

    with pytest.raises(ConfigError, match="num_minibatches"):
        _trainer("text/guess_number", True, num_minibatches=3)


def test_microbatch_accumulation_gives_the_same_update():
    """num_microbatches=2: the same gradient (PPO + KL, all loss terms) with half the episodes' activations alive."""
    kw = {"env_kwargs": {"capacity": 320, "max_action_tokens": 12}, "rollout.min_score_width": 512,
          "kl_coef": 0.1, "ent_coef": 0.01, "sampling.temperature": 1.0}
    out = []
    for micro in (1, 2):
        trainer = _trainer("text/guess_number", True, num_microbatches=micro, **kw)
        state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
        state = state.replace(trainable=jax.tree.map(
            lambda x: x + 0.03 * jax.random.normal(jax.random.PRNGKey(5), x.shape), state.trainable))
        out.append(jax.jit(lambda s: trainer.update(s, trainer.hparams, trainer.base))(state))
    (s1, m1), (s2, m2) = out
    for k in m1:
        np.testing.assert_allclose(np.asarray(m1[k]), np.asarray(m2[k]), atol=1e-5, rtol=1e-4, err_msg=k)
    moved = [float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(s1.trainable), jax.tree.leaves(state.trainable))]
    assert max(moved) > 1e-4  # the update did something
    for a, b in zip(jax.tree.leaves(s1.trainable), jax.tree.leaves(s2.trainable)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5)


def test_match_with_kept_caches_plays_the_same_games(temperature: float = 1.0):
    """play.make_match (evaluation, eval.py) keeping each LM seat's cache: the same transcripts and outcomes as
    re-reading every transcript each turn (sampled: the per-row keys match), an adapter on one seat, the base on the other."""
    from jaxmarl_llm.evaluation import play

    trainer = _trainer("text/cooperative_writing", True, env_kwargs={"max_action_tokens": 8, "capacity": 384}, num_turns=5)
    policy = play.with_temperature(trainer.policy, temperature)
    lora = jax.tree.map(lambda x: x[0] + 0.05 * jax.random.normal(jax.random.PRNGKey(2), x[0].shape),
                        trainer.init(jax.random.PRNGKey(0), trainer.hparams).trainable["lora"])
    players = (play.Player("lm", lora), play.Player("lm"))
    out = {}
    for inc in (False, True):
        match = play.make_match(trainer.env, policy, play.kinds(players), 5, incremental=inc, chunk=32)
        state, outcomes = match(jax.random.PRNGKey(3), trainer.base, play.loras(players), 6)
        out[inc] = (np.asarray(trainer.env.get_obs(state).tokens), jax.tree.map(np.asarray, outcomes))
    (t0, o0), (t1, o1) = out[False], out[True]
    assert (t0 != trainer.tokenizer.pad_id).sum() > 0
    np.testing.assert_array_equal(t0, t1)
    for a, b in zip(jax.tree.leaves(o0), jax.tree.leaves(o1)):  # Outcomes' arrays and its counts
        np.testing.assert_allclose(a, b, atol=1e-6)
