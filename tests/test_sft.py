"""SFT warm start: scripted transcripts, learning the format, export round trip, resume, held-out evaluation;
the other sources: a JSONL file of transcripts, and the policy's own episodes filtered by return.

Budgets are tiny (2-turn episodes, a 1-layer model) so the file runs in about a
minute on 2 CPU cores; the full recipe (SFT then GRPO to >= 90% on held-out
secrets) is the `slow` test at the end.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.data import files
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.guess_number import GuessNumber
from jaxmarl_llm.envs.text.tic_tac_toe import TicTacToe, board_code
from jaxmarl_llm.envs.text.twenty_questions import TwentyQuestions
from jaxmarl_llm.evaluation import evaluate, play
from jaxmarl_llm.models.hf import load_pretrained
from jaxmarl_llm.models.transformer import forward
from jaxmarl_llm.run import entry, trainers
from jaxmarl_llm.run.runner import run_training
from jaxmarl_llm.train import lm_rl, sft
from jaxmarl_llm.train.config import ConfigError, lm_rl_defaults, sft_defaults, validate_sft
from killing import Killed, assert_resumed_identically, dying_after
from jaxmarl_llm.data.teachers import binary_search, greedy_splitter, minimax_selfplay
from tiny_configs import TINY_MODEL


def _config(out_dir="runs/test_sft", **kw):
    c = sft_defaults()
    c.env_kwargs = {"capacity": 192, "max_action_tokens": 12, "max_turns": 2}  # prompt 146 + 2 x 22
    c.num_turns = 2
    c.model.update(TINY_MODEL, max_position_embeddings=256, init_std=0.02)
    c.num_envs, c.total_episodes, c.lr, c.warmup_updates = 16, 16 * 60, 1e-2, 5
    c.mesh.num_devices = 1
    c.run.out_dir, c.run.updates_per_chunk, c.run.checkpoint_every = str(out_dir), 2, 1
    c.run.progress, c.run.tensorboard, c.run.plot = False, False, False
    for k, v in kw.items():
        c[k] = v
    return c


def _run(trainer, updates, seed=0):
    state = trainer.init(jax.random.PRNGKey(seed), trainer.hparams)
    step = jax.jit(lambda s, hp, b: jax.lax.scan(lambda r, _: trainer.update(r, hp, b), s, None, length=updates))
    return step(state, trainer.hparams, trainer.base)


def test_transcripts_target_only_the_teachers_own_moves_and_an_eos_after_each():
    env = GuessNumber(capacity=192, max_action_tokens=12, max_turns=2)
    tok = env.tokenizer
    data = jax.jit(lambda k: sft.collect(k, env, binary_search(env), 2, jnp.arange(4), tok.eos_id))(
        jax.random.PRNGKey(0))
    for row in range(4):
        text = tok.decode(np.asarray(data.tokens[row]))
        targets = [tok.pieces[int(t)] for t, m in zip(data.targets[row], data.mask[row]) if m]
        assert "".join(targets).startswith("Guess: 512<eos>")  # bisection's first move, then the stop token
        # one eos per move; nothing from the prompt or the feedback
        assert targets.count("<eos>") == text.count("\nGuess:") == 2
    # noise: random moves are played but are not targets
    noisy = jax.jit(lambda k: sft.collect(k, env, binary_search(env, noise=1.0), 2, jnp.arange(4), tok.eos_id))(
        jax.random.PRNGKey(0))
    assert not bool(noisy.mask.any())


def _teacher_games(env, script, num_turns, secrets=None, num_episodes=None, key=jax.random.PRNGKey(0)):
    """Play the teacher: guesses [E, T], target flags [E, T], solved-at-turn [E] (num_turns + 1 = never), secrets [E]."""

    def one(k, s):
        obs, state = env.reset(k) if s is None else env.reset_to(s)
        memory = script.init(state)

        def turn(carry, t):
            state, memory, alive = carry
            action, target, memory = script.act(jax.random.fold_in(k, t), memory, state)
            _, state2, _, _, _, info = env.step(jax.random.fold_in(k, 100 + t), state, action)
            solved = info["solved"][0] & alive
            return (state2, memory, alive & ~solved), (memory[2], target[0], solved, info["format_error"][0] & alive)

        _, (guess, target, solved, bad) = jax.lax.scan(turn, (state, memory, jnp.bool_(True)), jnp.arange(num_turns))
        when = jnp.where(solved.any(), jnp.argmax(solved) + 1, num_turns + 1)
        return guess, target, when, bad.any(), state.secret

    if secrets is None:
        keys = jax.random.split(key, num_episodes)
        return jax.jit(jax.vmap(lambda k: one(k, None)))(keys)
    return jax.jit(jax.vmap(one))(jax.random.split(key, secrets.shape[0]), secrets)


@pytest.mark.parametrize("digits,recover", [(0, "bisect"), (4, "bisect"), (4, "step")])
def test_teacher_bisects_every_secret_in_the_optimal_number_of_turns(digits, recover):
    env = GuessNumber(split="all", capacity=384, max_action_tokens=12, max_turns=11)
    guess, target, when, bad, _ = _teacher_games(env, binary_search(env, digits=digits, recover=recover), 11,
                                                 secrets=jnp.arange(1024))
    when, guess = np.asarray(when), np.asarray(guess)
    assert not bool(np.asarray(bad).any()) and bool(np.asarray(target).all())  # every (padded) guess parses
    assert when.max() == 11 and (when <= 10).sum() == 1023  # 3-way answers: 10 guesses certify 1023 numbers
    assert when.mean() == pytest.approx(9.0117, abs=1e-4)  # sum of depths in the full tree / 1024
    assert guess[:, 0].tolist() == [512] * 1024 and set(guess[when > 1, 1].tolist()) == {256, 768}
    script = binary_search(env, digits=digits, recover=recover)
    _, state = env.reset_to(jnp.int32(3))
    action, _, _ = script.act(jax.random.PRNGKey(0), script.init(state), state)
    assert env.tokenizer.decode(np.asarray(action.tokens[0, :action.length[0]])) == ("Guess: 0512" if digits else "Guess: 512")


def test_step_recovery_makes_every_heldout_secret_a_target_guess_without_playing_one():
    """With random moves, "step" recovery writes every number as a target guess, held-out secrets included,
    while the SFT games themselves only ever use training secrets."""
    env = GuessNumber(capacity=384, max_action_tokens=12)  # the split SFT plays: "train"
    heldout = set(np.asarray(GuessNumber(split="test").secrets).tolist())
    guess, target, when, _, secrets = _teacher_games(
        env, binary_search(env, noise=0.1, digits=4, recover="step"), 10, num_episodes=4096)
    guess, target, when = np.asarray(guess), np.asarray(target), np.asarray(when)
    assert not heldout & set(np.asarray(secrets).tolist())
    played = np.arange(10)[None, :] < when[:, None]  # moves made before the game ended
    assert heldout <= set(guess[target & played].tolist())
    # the tree alone ("bisect", no noise) never writes the held-out leaves: they are only reached by their own secret
    g0, t0, w0, _, _ = _teacher_games(env, binary_search(env, digits=4), 10, num_episodes=4096)
    played0 = np.arange(10)[None, :] < np.asarray(w0)[:, None]
    missing = heldout - set(np.asarray(g0)[np.asarray(t0) & played0].tolist())
    assert len(missing) > 50


def test_sft_loss_falls_and_greedy_format_errors_drop():
    config = _config()
    trainer = sft.make_train(config)
    before = trainers.heldout_eval(config, trainer, trainer.init(jax.random.PRNGKey(0), trainer.hparams), 32)
    state, metrics = _run(trainer, trainer.num_updates)
    nll = np.asarray(metrics["nll"])
    after = trainers.heldout_eval(config, trainer, state, 32)
    assert nll[-5:].mean() < 0.5 * nll[:3].mean(), nll
    assert before["format_error_rate"] > 0.9, before
    assert after["format_error_rate"] < 0.2, after


@pytest.mark.parametrize("train_base", [True, False])
def test_exported_model_loads_back_with_identical_logits(tmp_path, train_base):
    config = _config(train_base=train_base, total_episodes=16 * 3)
    trainer = sft.make_train(config)
    state, _ = _run(trainer, 3)
    params, trainable = trainer.weights(state, trainer.base)
    if not train_base:
        assert max(float(jnp.abs(v["b"]).max()) for v in trainable["lora"].values()) > 0  # adapters moved
    path = trainer.export(state, str(tmp_path / "model"))
    cfg, loaded = load_pretrained(path)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 40)), jnp.int32)
    lora = None if trainable is None else trainable["lora"]
    want, _, _ = forward(params, tokens, trainer.policy.cfg, lora=lora, lora_scale=trainer.policy.lora.scale)
    got, _, _ = forward(loaded, tokens, cfg)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-4 if not train_base else 0, rtol=1e-4)
    # the RL trainer starts from the folder with the same char tokenizer
    rl = lm_rl_defaults()
    rl.env_kwargs, rl.model.checkpoint = dict(config.env_kwargs), path
    rl_trainer = lm_rl.make_train(rl)
    for a, b in zip(jax.tree.leaves(rl_trainer.base), jax.tree.leaves(loaded)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))



def _killed_and_resumed(small) -> tuple[dict, dict, str]:
    """Train `small("full")`; train `small("killed")`, kill it in its third chunk (after two checkpoints),
    resume it; check the two end alike (6 updates). Returns (full, resumed, headline metric)."""
    full = entry.train_from_config(small("full"))
    config = small("killed")
    trainer, chunk_fn, steps, headline = entry.build(config)
    with pytest.raises(Killed):
        run_training(config, trainer, dying_after(chunk_fn, 3), steps, headline)
    config.resume = "True"
    resumed = entry.train_from_config(config)
    assert_resumed_identically(full, resumed, config.run.out_dir, "nll", updates=6)
    return full, resumed, headline


def test_killed_run_resumes_to_identical_results_and_exports(tmp_path):
    def small(out):
        return _config(out_dir=tmp_path / out, total_episodes=16 * 6)

    full, resumed, headline = _killed_and_resumed(small)
    assert os.path.exists(os.path.join(resumed["model_dir"], "model.safetensors"))


def test_evaluate_counts_successes_turns_and_format_errors():
    env = GuessNumber(split="test", capacity=512, max_action_tokens=12)
    reset = evaluate.enumerate_secrets(env)
    n = int(env.secrets.shape[0])
    always_512 = lambda key, tokens, length, valid: env.guess_action(jnp.int32(512))  # noqa: E731
    r = evaluate.evaluate(env, always_512, n, 10, reset=reset)
    assert r["success_rate"] == pytest.approx(float((np.asarray(env.secrets) == 512).mean()))
    assert r["format_error_rate"] == 0.0 and r["mean_turns"] >= 9.9
    garbage = lambda key, tokens, length, valid: TextAction(jnp.full((1, 12), 5, jnp.int32), jnp.full((1,), 12))  # noqa: E731
    r = evaluate.evaluate(env, garbage, 8, 10, reset=reset)
    assert r["success_rate"] == 0.0 and r["format_error_rate"] == 1.0


def _ttt_teacher_games(env, noises, num_games, tie_break="random"):
    """The tic-tac-toe teacher against itself at each noise level (one compile); per turn [S, N, T]:
    illegal, target, optimal (a minimax move), first (the lowest optimal cell), moved, draw, won."""

    def one(noise, key):
        script = minimax_selfplay(env, noise=noise, tie_break=tie_break)
        _, state = env.reset(key)
        memory = script.init(state)

        def turn(carry, t):
            state, memory = carry
            k_act, k_env = jax.random.split(jax.random.fold_in(key, t))
            action, target, memory = script.act(k_act, memory, state)
            mover = state.mover
            cell, _ = env.parse_move(action.tokens[mover], action.length[mover])
            moving = ~state.done
            _, state2, _, _, _, info = env.step(k_env, state, action)
            rec = {"illegal": info["illegal"].any() & moving, "target": target[mover] & moving,
                   "optimal": env.best[board_code(state.board), cell], "moved": moving,
                   "first": cell == jnp.argmax(env.best[board_code(state.board)]),
                   "draw": info["draw"].any() & moving, "won": info["won"].any() & moving}
            return (state2, memory), rec

        return jax.lax.scan(turn, (state, memory), jnp.arange(9))[1]

    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.PRNGKey(0), i))(jnp.arange(num_games))
    games = jax.jit(jax.vmap(lambda noise: jax.vmap(lambda k: one(noise, k))(keys)))
    return jax.device_get(games(jnp.asarray(noises, jnp.float32)))


def test_tic_tac_toe_teacher_plays_only_legal_optimal_targets_and_always_draws_itself():
    env = TicTacToe(capacity=544, max_action_tokens=8)
    clean, noisy = ({k: v[i] for k, v in _ttt_teacher_games(env, (0.0, 0.5), 256).items()} for i in range(2))
    assert not clean["illegal"].any()
    assert clean["draw"].any(-1).all() and not clean["won"].any()  # perfect play: every game a draw
    assert (clean["moved"].sum(-1) == 9).all()  # a draw fills the board
    assert (clean["target"] == clean["moved"]).all() and clean["optimal"][clean["moved"]].all()
    assert not noisy["illegal"].any()  # exploration moves are legal too
    assert noisy["won"].any()  # and they lose games: positions perfect play never reaches
    target, moved = noisy["target"], noisy["moved"]
    assert 0.35 < target.sum() / moved.sum() < 0.65
    assert noisy["optimal"][target].all()  # every SFT target is a minimax move
    # transcripts: targets are the movers' `Move: N` and an eos, in both seats' rows
    tok = env.tokenizer
    data = jax.jit(lambda k: sft.collect(k, env, minimax_selfplay(env), 9, jnp.arange(2), tok.eos_id))(
        jax.random.PRNGKey(0))
    for row in range(4):  # env 0 X, env 0 O, env 1 X, env 1 O
        targets = "".join(tok.pieces[int(t)] for t, m in zip(data.targets[row], data.mask[row]) if m)
        assert targets.count("<eos>") == (5 if row % 2 == 0 else 4)
        assert targets.replace("<eos>", "").count("Move: ") == targets.count("<eos>")


def test_tic_tac_toe_teacher_with_first_tie_break_targets_the_lowest_optimal_cell():
    env = TicTacToe(capacity=544, max_action_tokens=8)
    clean, noisy = ({k: v[i] for k, v in _ttt_teacher_games(env, (0.0, 0.3), 64, "first").items()} for i in range(2))
    assert clean["draw"].any(-1).all() and (clean["first"] | ~clean["moved"]).all()
    assert noisy["first"][noisy["target"]].all() and not noisy["first"][noisy["moved"] & ~noisy["target"]].all()
    with pytest.raises(ValueError, match="tie_break"):
        minimax_selfplay(env, tie_break="center")


def _tq_greedy_reference(answers: list[list[bool]], secret: int, max_turns: int) -> tuple[list[tuple[str, int]], int]:
    """The greedy splitter in plain Python loops: moves [("ask", q) | ("guess", w)], turn solved (0 = never)."""
    words, questions = len(answers), len(answers[0])
    candidates = list(range(words))
    moves = []
    for turn in range(max_turns):
        splits = [min(sum(answers[w][q] for w in candidates), sum(not answers[w][q] for w in candidates))
                  for q in range(questions)]
        best = max(range(questions), key=lambda q: (splits[q], -q))  # most even split, first on ties
        if len(candidates) == 1 or splits[best] == 0 or turn == max_turns - 1:
            moves.append(("guess", candidates[0]))
            if candidates[0] == secret:
                return moves, turn + 1
            candidates = candidates[1:]
        else:
            moves.append(("ask", best))
            candidates = [w for w in candidates if answers[w][best] == answers[secret][best]]
    return moves, 0


def _tq_teacher_games(env, noise: float, max_turns: int):
    """The twenty questions teacher on every word once; per turn [W, T]: kind (0 ask, 1 guess), question, word,
    target, playing (the episode was still on), solved; and each transcript's largest length [W]."""
    secrets = jnp.arange(len(env.words))

    def one(secret, key):
        script = greedy_splitter(env, noise=noise)
        _, state = env.reset_to(secret)

        def turn(carry, t):
            state, memory = carry
            k_act, k_env = jax.random.split(jax.random.fold_in(key, t))
            action, target, memory = script.act(k_act, memory, state)
            kind, question, word = env.parse_question(action.tokens[0], action.length[0])
            _, state2, _, _, _, info = env.step(k_env, state, action)
            playing = ~state.done
            rec = {"kind": kind, "question": question, "word": word, "target": target[0] & playing,
                   "playing": playing, "solved": info["solved"][0] & playing, "length": state2.length[0],
                   "overflow": state2.overflow[0]}
            return (state2, memory), rec

        return jax.lax.scan(turn, (state, script.init(state)), jnp.arange(max_turns))[1]

    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.PRNGKey(0), i))(secrets)
    return jax.device_get(jax.jit(jax.vmap(one))(secrets, keys))


def test_twenty_questions_teacher_is_the_brute_force_greedy_splitter():
    env = TwentyQuestions(max_turns=8, capacity=864, max_action_tokens=20)  # configs/sft_twenty_questions.py
    answers = np.asarray(env.answers).tolist()
    games = _tq_teacher_games(env, 0.0, 8)
    solved_at = []
    for w in range(len(env.words)):
        moves, when = _tq_greedy_reference(answers, w, 8)
        solved_at.append(when)
        n = len(moves)
        assert games["playing"][w].sum() == n and games["target"][w][:n].all()
        got = [("ask", int(q)) if k == 0 else ("guess", int(g))
               for k, q, g in zip(games["kind"][w][:n], games["question"][w][:n], games["word"][w][:n])]
        assert got == moves, env.words[w]
        assert bool(games["solved"][w].any()) == (when > 0)
    solved_at = np.asarray(solved_at)
    # 7 questions and a guess certify at most 2**7 words: the greedy tree reaches that optimum
    assert (solved_at > 0).sum() == 128 and set(solved_at[solved_at > 0].tolist()) == {8}
    assert not games["overflow"].any() and games["length"].max() < 864 - 1  # the eos after the last move fits too


def test_twenty_questions_teacher_with_noise_targets_only_its_own_fresh_questions_and_candidates():
    env = TwentyQuestions(max_turns=8, capacity=864, max_action_tokens=20)
    answers = np.asarray(env.answers)
    g = _tq_teacher_games(env, 0.5, 8)
    assert (g["kind"][g["playing"]] >= 0).all() and (g["question"][g["playing"] & (g["kind"] == 0)] >= 0).all()
    explored = g["playing"] & ~g["target"]
    assert 0.2 < explored.sum() / g["playing"].sum() < 0.5 and (g["kind"][explored] == 0).all()  # random asks only
    for w in range(len(env.words)):
        candidates, asked = np.ones(len(env.words), bool), set()
        for t in np.flatnonzero(g["playing"][w]):
            if g["kind"][w, t] == 0:
                q = int(g["question"][w, t])
                if g["target"][w, t]:  # a target question is fresh and splits the words still possible
                    assert q not in asked and 0 < answers[candidates, q].sum() < candidates.sum()
                asked.add(q)
                candidates &= answers[:, q] == answers[w, q]
            else:  # a guess is a word every answer so far allows
                assert candidates[g["word"][w, t]]
                candidates[g["word"][w, t]] = False
    assert 0.1 < g["solved"].any(-1).mean() < 128 / 187  # random asks waste turns
    tok = env.tokenizer
    data = jax.jit(lambda k: sft.collect(k, env, greedy_splitter(env), 8, jnp.arange(2), tok.eos_id))(
        jax.random.PRNGKey(0))
    for row in range(2):
        moves = "".join(tok.pieces[int(t)] for t, m in zip(data.targets[row], data.mask[row]) if m).split("<eos>")
        assert len(moves) == 9 and moves[-1] == ""  # 8 moves, an eos after each
        assert all(m.startswith("Ask: ") for m in moves[:7]) and moves[7].startswith("Guess: ")


def test_sft_twenty_questions_learns_the_opening_question():
    """Two-turn games (the opener `Ask: has_e`, then a guess): the tiny model learns the opener from scratch in
    40 updates (teacher-forced move accuracy ~0.75: every opener and some guesses; 0 before)."""
    config = _config(env_name="text/twenty_questions", num_turns=2, num_envs=4, total_episodes=4 * 40, lr=2e-2)
    config.env_kwargs = {"max_turns": 2, "capacity": 720, "max_action_tokens": 20}  # prompt 652 + 10 + 6 + <= 19 + 21
    config.model.max_position_embeddings = 768
    trainer = sft.make_train(config)
    _, metrics = _run(trainer, trainer.num_updates)
    nll, accuracy = np.asarray(metrics["nll"]), np.asarray(metrics["move_accuracy"])
    assert accuracy[:10].max() == 0.0, accuracy
    assert nll[-5:].mean() < 0.1 * nll[:3].mean(), nll
    assert accuracy[-5:].mean() >= 0.5, accuracy


# ---- twenty questions with an LM answerer (answerer="lm"): the teacher plays both seats ----------------------


def _tq_lm_env(max_turns: int = 8, capacity: int = 384) -> TwentyQuestions:
    return TwentyQuestions(answerer="lm", max_turns=max_turns, capacity=capacity, max_action_tokens=20)


def _tq_lm_teacher_games(env, steps: int):
    """The teacher on every word once, per env step [W, S]: who moved (0 asks / 1 answers), the parsed question, the
    question the env routed to the answerer (state.pending before the step), the reply (1/0/-1), targets, the info."""

    def one(secret):
        script = greedy_splitter(env)
        _, state = env.reset_to(secret)

        def step(carry, t):
            state, memory = carry
            action, target, memory = script.act(jax.random.PRNGKey(0), memory, state)
            kind, question, word = env.parse_question(action.tokens[0], action.length[0])
            reply = env.parse_answer(action.tokens[1], action.length[1])
            _, state2, _, _, _, info = env.step(jax.random.PRNGKey(0), state, action)
            rec = {"playing": ~state.done, "seat": jnp.argmax(state.active), "kind": kind, "question": question,
                   "word": word, "pending": state.pending, "reply": reply, "target": target & state.active,
                   "solved": info["solved"][0], "answered": info["answered"][0], "correct": info["answer_correct"][0]}
            return (state2, memory), rec

        return jax.lax.scan(step, (state, script.init(state)), jnp.arange(steps))[1]

    return jax.device_get(jax.jit(jax.vmap(one))(env.secrets))


def test_twenty_questions_lm_teacher_answers_every_question_truthfully_on_the_greedy_tree():
    """Seat 1 replies Yes/No = the attribute table (brute force) to every question, so seat 0 walks the same greedy
    tree as in the oracle game (128 words solved at turn 8); each question is two env steps, both moves targets."""
    env = _tq_lm_env()
    answers = np.asarray(env.answers)
    g = _tq_lm_teacher_games(env, 16)
    for w in range(len(env.words)):
        moves, when = _tq_greedy_reference(answers.tolist(), w, 8)
        on = g["playing"][w]
        asker = on & (g["seat"][w] == 0)
        replier = on & (g["seat"][w] == 1)
        got = [("ask", int(q)) if k == 0 else ("guess", int(x))
               for k, q, x in zip(g["kind"][w][asker], g["question"][w][asker], g["word"][w][asker])]
        assert got == moves, env.words[w]
        asked = [q for kind, q in moves if kind == "ask"]
        assert g["pending"][w][replier].tolist() == asked  # the env routed each question to the answerer
        assert g["reply"][w][replier].tolist() == [int(answers[w, q]) for q in asked], env.words[w]
        assert g["answered"][w][replier].all() and not g["answered"][w][~replier].any()
        assert (g["correct"][w] == g["answered"][w]).all()
        assert g["target"][w][on].any(-1).all()  # the mover's move is a target at every step
        assert bool(g["solved"][w].any()) == (when > 0)
    assert g["solved"].any(-1).sum() == 128
    # SFT rows: the answerer's row targets exactly its Yes/No replies, the questioner's its 8 moves
    tok = env.tokenizer
    data = jax.jit(lambda k: sft.collect(k, env, greedy_splitter(env), 16, jnp.arange(2), tok.eos_id))(
        jax.random.PRNGKey(0))
    for row in range(4):  # (env 0, questioner), (env 0, answerer), (env 1, ...)
        moves = "".join(tok.pieces[int(t)] for t, m in zip(data.targets[row], data.mask[row]) if m).split("<eos>")
        assert moves[-1] == ""
        if row % 2 == 0:
            assert len(moves) == 9 and all(m.startswith("Ask: ") for m in moves[:7]) and moves[7].startswith("Guess: ")
        else:
            assert len(moves) == 8 and set(moves[:7]) <= {"Yes", "No"}


def _say(env, lines: list[str]) -> TextAction:
    """One action per seat from strings (inactive seats' rows are dropped by the env)."""
    table = env.codec.table(lines, width=env.max_action_tokens)
    return TextAction(tokens=table.ids, length=table.lens)


def test_answer_accuracy_equals_a_hand_count_of_the_replies():
    """A scripted episode (horse, 4 questions): a right Yes, a wrong No, a Yes to an unlisted question (not counted),
    a `Maybe` to a listed question by its text (counted, wrong): 1 right of 3 answered, in the env's info, in
    evaluate's and in play's rates. Then evaluate.play end to end: always `Ask: has_e` / `Yes` over every word is
    right exactly for the words with an E, and so in play.make_match (experiments/eval.py) with those lines."""
    env = _tq_lm_env(max_turns=4)
    horse = env.words.index("horse")
    assert env.answers[horse, env.question_names.index("has_e")] and env.answers[horse, env.question_names.index("mammal")]
    script = [("Ask: has_e", "Yes", 1, 1), ("Ask: mammal", "No", 1, 0), ("Ask: is it blue", "Yes", 0, 0),
              ("Ask: Is it a bird?", "Maybe", 1, 0)]
    _, state = env.reset_to(horse)
    counts = {"answered": [], "answer_correct": []}
    for question, reply, answered, correct in script:
        for seat, line in ((0, question), (1, reply)):
            moving = env.active(state)
            assert bool(moving[seat])
            _, state, _, _, trunc, info = env.step(jax.random.PRNGKey(0), state, _say(env, [question, reply]))
            want = (answered, correct) if seat == 1 else (0, 0)
            assert (int(info["answered"][0]), int(info["answer_correct"][0])) == want, (question, seat)
            for name, c in evaluate.mover_counts({k: info[k][None] for k in counts}, moving[None]).items():
                counts[name].append(c)
    assert bool(trunc.all())  # 4 questions answered: the episode is over
    counts = {k: np.concatenate(v) for k, v in counts.items()}
    assert evaluate.ratio_rates(counts) == {"answer_accuracy": pytest.approx(1 / 3), "answered": 3.0}
    assert float(play.match_ratios({k: jnp.asarray(v)[:, None] for k, v in counts.items()})["answer_accuracy"]) == \
        pytest.approx(1 / 3)
    env = _tq_lm_env()
    line = _say(env, ["Ask: has_e", "Yes"])
    result = evaluate.evaluate(env, lambda key, tokens, length, valid: line, len(env.words), 16,
                               reset=evaluate.enumerate_secrets(env))
    has_e = np.asarray(env.answers)[:, env.question_names.index("has_e")]
    assert result["answered"] == 8 * len(env.words)  # 8 questions an episode, every one answered
    assert result["answer_accuracy"] == pytest.approx(has_e.mean()) and 0.3 < has_e.mean() < 0.7
    # experiments/eval.py's path: play.make_match with the same two lines as the game's built-in players
    env = _SaysHasEAndYes(answerer="lm", max_turns=8, capacity=384, max_action_tokens=20)
    final, outcomes = play.make_match(env, None, ("random", "random"), 16)(jax.random.PRNGKey(0), None, (None, None), 40)
    assert np.asarray(outcomes.counts["answered"]).sum(0).tolist() == [0, 8 * 40]  # seat 1 gave every answer
    assert play.summarize(outcomes, 0)["answer_accuracy"] == pytest.approx(has_e[np.asarray(final.secret)].mean())


class _SaysHasEAndYes(TwentyQuestions):
    """Built-in players for play.make_match: seat 0 always asks `has_e`, seat 1 always answers Yes."""

    def opponent_action(self, key, state, kind):
        return _say(self, ["Ask: has_e", "Yes"])


def _tq_lm_answer_accuracy(updates: int, first: int) -> list[dict]:
    """SFT of the tiny model on the lm game with one question (the opener `Ask: has_e`, its answer, a guess); greedy
    evaluation of the model in both seats over every word: untrained, after `first` updates, after `updates`."""
    config = _config(env_name="text/twenty_questions", num_turns=3, num_envs=16, total_episodes=16 * updates, lr=1e-2)
    config.env_kwargs = {"answerer": "lm", "max_turns": 2, "capacity": 240, "max_action_tokens": 20}  # 232 at most
    config.model.max_position_embeddings = 288
    config.anneal_lr = False  # the answers click late (~update 130 of 200); a cosine decay stalls them at ~0.7
    trainer = sft.make_train(config)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    results = [trainers.heldout_eval(config, trainer, state, 187)]
    for n in (first, updates - first):
        step = jax.jit(lambda s, hp, b, n=n: jax.lax.scan(lambda r, _: trainer.update(r, hp, b), s, None, length=n))
        state, metrics = step(state, trainer.hparams, trainer.base)
        seats = ("move_accuracy", "move_accuracy_questioner", "move_accuracy_answerer")
        results.append({**trainers.heldout_eval(config, trainer, state, 187),
                        **{name: np.asarray(metrics[name][-10:]) for name in seats}})  # teacher-forced, last 10
    return results


def test_sft_lm_twenty_questions_answerer_learns_the_oracles_answers():
    """One model, both seats: untrained it asks nothing listed (no answers to score); after 50 updates it asks
    `has_e` and answers Yes/No at chance (measured 0.487 over the 187 words); after 200 (measured 1.0; 20-60 s on 2
    shared cores) its answers equal the oracle's on >= 90% of the words."""
    from fresh_process import run_optimized

    untrained, early, late = run_optimized(_tq_lm_answer_accuracy, 200, 50)
    assert untrained["answered"] == 0.0 and untrained["format_error_rate"] > 0.9, untrained
    for result in (early, late):
        assert result["answered"] == 187.0 and result["format_error_rate"] == 0.0, result  # one question per word
    assert 0.35 <= early["answer_accuracy"] <= 0.65, early
    assert late["answer_accuracy"] >= 0.9, late
    # per-seat teacher-forced accuracy: the questioner's 2 moves are learnt first; the mix lies between the seats
    assert early["move_accuracy_questioner"].mean() >= 0.9 and early["move_accuracy_answerer"].mean() <= 0.7, early
    assert late["move_accuracy_answerer"].mean() >= 0.9, late
    for r in (early, late):
        lo = np.minimum(r["move_accuracy_questioner"], r["move_accuracy_answerer"])
        hi = np.maximum(r["move_accuracy_questioner"], r["move_accuracy_answerer"])
        assert ((lo - 1e-6 <= r["move_accuracy"]) & (r["move_accuracy"] <= hi + 1e-6)).all(), r


def _tq_lm_seat_accuracy(target_agents: tuple[int, ...], updates: int) -> dict[str, float]:
    """SFT on the one-question lm game (`Ask: has_e`, its answer, a guess) with `target_agents`; then each seat's
    teacher-forced move accuracy, read from an every-seat trainer's metrics on the trained weights (an update's
    metrics are computed before its step)."""
    config = _config(env_name="text/twenty_questions", num_turns=3, num_envs=16, total_episodes=16 * updates, lr=1e-2)
    config.env_kwargs = {"answerer": "lm", "max_turns": 2, "capacity": 240, "max_action_tokens": 20}
    config.model.max_position_embeddings = 288
    config.anneal_lr, config.target_agents = False, target_agents
    trainer = sft.make_train(config)
    state, metrics = _run(trainer, updates)
    config.target_agents = ()
    every = sft.make_train(config)
    _, probe = jax.jit(lambda s: every.update(s, every.hparams, every.base))(state)
    return {"questioner": float(probe["move_accuracy_questioner"]), "answerer": float(probe["move_accuracy_answerer"]),
            "own_seats": sorted(k for k in metrics if k.startswith("move_accuracy_")),
            "target_tokens": float(np.asarray(metrics["target_tokens"])[-1])}


def test_sft_target_agents_trains_only_the_listed_seat():
    """target_agents=(1,): the lm game's answerer alone learns. After 40 updates the every-seat model writes the
    questioner's `Ask: has_e` / guess (accuracy >= 0.9; measured 1.0), the answerer-only model never its format
    (0.0: its rows were dropped, the questioner's moves never a target), while both write the answerer's
    `Yes` / `No` (>= 0.25: about chance this early, measured 0.44 on the probe's 16 answers). Only the trained seat's
    per-seat metric is reported; each row's targets are the answerer's two moves (`Yes`/`No` + eos, a guess is
    not its move)."""
    from fresh_process import run_optimized

    both = run_optimized(_tq_lm_seat_accuracy, (), 40)
    answerer = run_optimized(_tq_lm_seat_accuracy, (1,), 40)
    assert both["questioner"] >= 0.9 and answerer["questioner"] == 0.0, (both, answerer)
    assert both["answerer"] >= 0.25 and answerer["answerer"] >= 0.25, (both, answerer)
    assert both["own_seats"] == ["move_accuracy_answerer", "move_accuracy_questioner"]
    assert answerer["own_seats"] == ["move_accuracy_answerer"]
    assert answerer["target_tokens"] == pytest.approx(4.0, abs=0.5)  # `Yes` + eos or `No` + eos: 3.5 on average


@pytest.mark.parametrize("variant", ["", "lm", "answerer"])
def test_sft_twenty_questions_variants_build(variant):
    """configs/sft_twenty_questions.py's variants validate and build (nothing compiles); `:answerer` trains seat 1
    alone on balanced random questions, with the word tokenizer its RL stage (twenty_questions.py:lm_scratch) uses."""
    from configs import sft_twenty_questions, twenty_questions

    config = sft_twenty_questions.get_config(variant)
    config.mesh.num_devices = 1
    validate_sft(config)
    trainer = sft.make_train(config)
    assert trainer.env.num_agents == (1 if not variant else 2)
    if variant == "answerer":
        assert tuple(config.target_agents) == (1,) and config.script_noise == 1.0
        rl = twenty_questions.get_config("lm_scratch")
        assert (rl.tokenizer, rl.env_kwargs.answerer, rl.env_kwargs.max_turns) == \
            (config.tokenizer, config.env_kwargs.answerer, config.env_kwargs.max_turns)  # the same word ids
    with pytest.raises(ValueError, match="variant"):
        sft_twenty_questions.get_config("questioner")


def test_sft_target_agents_rows_and_bad_values():
    """seat_rows picks (env, seat) rows in collect's order; bad target_agents name the key."""
    np.testing.assert_array_equal(sft.seat_rows(3, 2, (1,)), [1, 3, 5])
    np.testing.assert_array_equal(sft.seat_rows(2, 3, (2, 0)), [2, 0, 5, 3])
    env = TwentyQuestions(answerer="lm", max_turns=2, capacity=240, max_action_tokens=20)
    data = jax.jit(lambda k: sft.collect(k, env, greedy_splitter(env), 3, jnp.arange(2), env.tokenizer.eos_id))(
        jax.random.PRNGKey(0))
    kept = sft.take_rows(data, sft.seat_rows(2, 2, (1,)))
    for row in np.asarray(kept.tokens):
        assert "The secret word is" in env.tokenizer.decode(row.tolist())
    for value in [(2,), (1, 1), (-1,), ("1",)]:
        config = _config(env_name="text/twenty_questions", num_turns=3, target_agents=value)
        config.env_kwargs = {"answerer": "lm", "max_turns": 2, "capacity": 240, "max_action_tokens": 20}
        with pytest.raises(ConfigError, match="config.target_agents"):
            validate_sft(config)
            sft.make_train(config)
    with pytest.raises(ConfigError, match="config.target_agents"):
        validate_sft(_config(source="file", data_path=__file__, target_agents=(0,)))


def _tic_tac_toe_move_accuracy(updates: int) -> np.ndarray:
    from configs import sft_tic_tac_toe

    config = sft_tic_tac_toe.get_config()
    config.num_envs, config.total_episodes, config.mesh.num_devices = 8, 8 * updates, 1
    trainer = sft.make_train(config)
    _, metrics = _run(trainer, trainer.num_updates)
    return np.asarray(metrics["move_accuracy"])  # [updates]


def test_sft_tic_tac_toe_learns_minimax_moves_from_tagged_boards():
    """The recipe's stage 1, shortened to 40 updates of 8 games: the teacher-forced move accuracy (the lowest
    optimal cell) is 0 until the `Move: N` format is learnt (~7 updates), ~0.25 (a legal cell, about
    chance) right after, and ~0.46 over the last 10 (the old char/`X` setup stayed at ~0.2 for 400 updates)."""
    from fresh_process import run_optimized

    accuracy = run_optimized(_tic_tac_toe_move_accuracy, 40)  # 40 updates: its time is running, not compiling
    assert accuracy[:3].max() == 0.0 and accuracy[7:12].mean() < 0.3, accuracy
    assert accuracy[-10:].mean() > 0.38, accuracy


@pytest.mark.parametrize(
    "key,value,match",
    [("env_name", "text/cooperative_writing", "config.env_name"), ("num_envs", 0, "config.num_envs"),
     ("script_noise", 1.5, "config.script_noise"), ("script_kwargs", {"digitz": 4}, "config.script_kwargs"),
     ("lr", 0.0, "config.lr")],
)
def test_bad_sft_configs_name_the_key(key, value, match):
    with pytest.raises(ConfigError, match=match):
        validate_sft(_config(**{key: value}))


@pytest.mark.slow
def test_recipe_sft_then_grpo_solves_heldout_secrets(tmp_path):
    """configs/sft_guess_number.py then configs/guess_number.py from its checkpoint: >= 90% held-out success
    after each stage (measured 97.6% and 97.1%; ~16 + 20 min on 2 shared CPU cores)."""
    from configs import guess_number, sft_guess_number

    c1 = sft_guess_number.get_config()
    c1.run.out_dir, c1.run.progress = str(tmp_path / "sft"), False
    c1.mesh.num_devices = 1  # as on the command line (conftest forces 8 host devices)
    stage1 = entry.train_from_config(c1)
    c2 = guess_number.get_config()
    c2.model.checkpoint, c2.run.out_dir, c2.run.progress = stage1["model_dir"], str(tmp_path / "grpo"), False
    c2.mesh.num_devices = 1
    stage2 = entry.train_from_config(c2)
    print("sft:", stage1["eval"], "grpo:", stage2["eval"])
    assert stage1["eval"]["success_rate"] >= 0.9, stage1["eval"]
    assert stage2["eval"]["success_rate"] >= 0.9, stage2["eval"]
    assert stage2["eval"]["mean_turns_solved"] <= 10.0


@pytest.mark.slow
def test_recipe_sft_then_grpo_twenty_questions_beats_the_untrained_rate(tmp_path):
    """configs/sft_twenty_questions.py then configs/twenty_questions.py from its model: greedy success on every
    word once >= 40% after each stage, against 0% untrained (the teacher's 68.4%; measured 58.3% and 60.4%,
    ~30 + 14 min on 2 shared CPU cores)."""
    from configs import sft_twenty_questions, twenty_questions

    c1 = sft_twenty_questions.get_config()
    c1.run.out_dir, c1.run.progress = str(tmp_path / "sft"), False
    c1.mesh.num_devices = 1  # as on the command line (conftest forces 8 host devices)
    stage1 = entry.train_from_config(c1)
    c2 = twenty_questions.get_config()
    c2.model.checkpoint, c2.run.out_dir, c2.run.progress = stage1["model_dir"], str(tmp_path / "grpo"), False
    c2.eval_episodes, c2.mesh.num_devices = 187, 1
    stage2 = entry.train_from_config(c2)
    print("sft:", stage1["eval"], "grpo:", stage2["eval"])
    for stage in (stage1, stage2):
        assert stage["eval"]["success_rate"] >= 0.4, stage["eval"]
        assert stage["eval"]["format_error_rate"] <= 0.02, stage["eval"]


@pytest.mark.slow
def test_recipe_sft_then_grpo_twenty_questions_lm_answerer_agrees_with_the_oracle(tmp_path):
    """configs/sft_twenty_questions.py:lm then configs/twenty_questions.py:lm from its model (the frozen answerer):
    the answerer agrees with the oracle on >= 95% of its answers and the questioner solves >= 60% of the words,
    after each stage (measured 99.5% and 67.4% both times, the optimum 68.4%; ~20 + 3 min on 2 shared CPU cores)."""
    from configs import sft_twenty_questions, twenty_questions

    c1 = sft_twenty_questions.get_config("lm")
    c1.run.out_dir, c1.run.progress = str(tmp_path / "sft"), False
    c1.mesh.num_devices = 1  # as on the command line (conftest forces 8 host devices)
    stage1 = entry.train_from_config(c1)
    c2 = twenty_questions.get_config("lm")
    c2.model.checkpoint, c2.run.out_dir, c2.run.progress = stage1["model_dir"], str(tmp_path / "grpo"), False
    c2.eval_episodes, c2.mesh.num_devices = 187, 1
    stage2 = entry.train_from_config(c2)
    print("sft:", stage1["eval"], "grpo:", stage2["eval"])
    for stage in (stage1, stage2):
        assert stage["eval"]["answered"] >= 7 * 120 and stage["eval"]["answer_accuracy"] >= 0.95, stage["eval"]
        assert stage["eval"]["success_rate"] >= 0.6 and stage["eval"]["format_error_rate"] <= 0.02, stage["eval"]

def versus_builtin(trainer, state, opponent: str, episodes_per_seat: int, seed: int = 0) -> dict[str, dict]:
    """Greedy SFT model against the game's built-in player, in each seat: play.summarize rates per seat and overall."""
    params, trainable = trainer.weights(jax.device_get(state), trainer.base)
    assert trainable is None  # train_base: the model is the base
    policy = evaluate.greedy(trainer.policy)
    out = {}
    for seat in (0, 1):
        players = [play.Player("lm"), play.Player(opponent)][:: 1 if seat == 0 else -1]
        match = play.make_match(trainer.env, policy, play.kinds(players), trainer.config.num_turns)
        _, outcomes = match(jax.random.fold_in(jax.random.PRNGKey(seed), seat), params, play.loras(players),
                            episodes_per_seat)
        out[seat] = {k: float(v) for k, v in play.summarize(outcomes, seat).items()}
    out["overall"] = {k: (out[0][k] + out[1][k]) / 2 for k in out[0]}
    return out


@pytest.mark.slow
def test_recipe_sft_tic_tac_toe_draws_minimax_and_beats_random(tmp_path):
    """configs/sft_tic_tac_toe.py then its `polish` stage (greedy): loses <= 5% against random, draws >= 80%
    against minimax (the issue's target; ~40 min on 2 cores; measured numbers in configs/sft_tic_tac_toe.py)."""
    from configs import sft_tic_tac_toe

    for variant, out in (("", "sft"), ("polish", "polish")):
        config = sft_tic_tac_toe.get_config(variant)
        if variant:
            config.model.checkpoint = str(tmp_path / "sft" / "model")
        config.run.out_dir, config.run.progress = str(tmp_path / out), False
        config.run.tensorboard, config.run.plot = False, False
        config.mesh.num_devices = 1  # as on the command line (conftest forces 8 host devices)
        result = entry.train_from_config(config)
    trainer = sft.make_train(config)
    vs_random = versus_builtin(trainer, result["state"], "random", 200)
    vs_minimax = versus_builtin(trainer, result["state"], "minimax", 200)
    print("vs random:", vs_random, "\nvs minimax:", vs_minimax)
    assert vs_random["overall"]["loss"] <= 0.05, vs_random
    assert vs_minimax["overall"]["draw"] >= 0.8, vs_minimax
    assert vs_random["overall"]["illegal"] <= 0.02 and vs_minimax["overall"]["illegal"] <= 0.02


def _one_and_eight_devices_agree(make_config, names):
    """Two updates of `make_config()` on 1 and on 8 forced host devices: same weights, same metrics `names`."""
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 forced host devices (conftest)")
    from jaxmarl_llm.parallel import mesh as mesh_lib

    outs = []
    for n in (1, 8):
        config = make_config()
        config.mesh.num_devices = n
        trainer = sft.make_train(config)
        mesh = mesh_lib.make_mesh(n)
        state = mesh_lib.put(trainer.init(jax.random.PRNGKey(1), trainer.hparams), mesh, trainer.state_specs)
        state, metrics = mesh_lib.sharded_chunk(trainer, mesh, 2)(state, trainer.hparams)
        outs.append((jax.device_get(state.trainable), jax.device_get(metrics)))
    for a, b in zip(jax.tree.leaves(outs[0][0]), jax.tree.leaves(outs[1][0])):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
    for name in names:
        np.testing.assert_allclose(outs[0][1][name], outs[1][1][name], rtol=1e-5)
    return outs


def test_eight_devices_match_one():
    _one_and_eight_devices_agree(_config, ("nll", "move_accuracy", "teacher_success", "target_tokens"))


# ---- source="file": a JSONL of transcripts -------------------------------------------------------------

def _file_config(out_dir="runs/test_sft_file", **kw):
    """The tiny model on text/arithmetic (1 operation on 1..9) with the shipped transcript file."""
    from jaxmarl_llm.envs.text.datasets import DATA_DIR

    kw = {"data_path": os.path.join(DATA_DIR, "arithmetic_sft.jsonl"), "max_length": 96, **kw}
    c = _config(out_dir=out_dir, env_name="text/arithmetic", source="file", num_turns=1, **kw)
    c.env_kwargs = {"num_ops": 1, "max_operand": 9, "capacity": 96, "max_action_tokens": 12}
    c.model.max_position_embeddings = 128
    return c


def _write_lines(path, lines) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _decoded_targets(tok, data, row) -> str:
    return "".join(tok.pieces[int(t)] for t, m in zip(data.targets[row], data.mask[row]) if m)


def test_shipped_transcripts_are_the_generators_output_in_the_envs_prompt_format():
    import importlib.util
    import json

    from jaxmarl_llm.envs.text.arithmetic import Arithmetic
    from jaxmarl_llm.envs.text.datasets import DATA_DIR

    spec = importlib.util.spec_from_file_location("build_sft", os.path.join(DATA_DIR, "build_arithmetic_sft.py"))
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    with open(os.path.join(DATA_DIR, "arithmetic_sft.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert rows == list(build.transcripts()) and len(rows) == 9 * 3 * 9
    env = Arithmetic(num_ops=1, max_operand=9, capacity=96, max_action_tokens=12)
    obs, _ = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 16))
    prompts = {r["prompt"]: r["completion"] for r in rows}
    for i in range(16):  # whatever the env asks is a line of the file, with the right answer
        shown = env.tokenizer.decode(np.asarray(obs.tokens[i, 0, : obs.length[i, 0]]))
        a, op, b = shown.split("Problem: ")[1].split(" = ")[0].split(" ")
        assert prompts[shown] == f"Answer: {eval(f'{a}{op}{b}')}"  # noqa: S307  (digits and one operator)


def test_file_rows_target_the_completions_and_an_eos(tmp_path):
    from jaxmarl_llm.tokenizers import CharTokenizer

    tok = CharTokenizer()
    path = _write_lines(tmp_path / "t.jsonl", [
        '{"prompt": "Q: 1+1?\\n", "completion": "Answer: 2"}',
        "",  # blank lines are skipped
        '{"turns": ["Guess a number.\\n", "Guess: 5", "\\nHigher.\\n", "Guess: 7"]}',
        '{"turns": ["Hi.\\n", "Move: 1", "\\nOK.\\n"]}',
    ])
    data = files.load_transcripts(path, tok, 48)
    assert data.tokens.shape == data.targets.shape == data.mask.shape == (3, 48)
    assert data.turn_mask.shape == (3, 2, 48) and (data.turn_mask.any(1) == data.mask).all()
    # the input is the transcript as the env writes it (no eos inside); an eos ends a row that ends on a move
    texts = [tok.decode(data.tokens[r]) for r in range(3)]
    assert texts == ["Q: 1+1?\nAnswer: 2", "Guess a number.\nGuess: 5\nHigher.\nGuess: 7", "Hi.\nMove: 1\nOK.\n"]
    assert [_decoded_targets(tok, data, r) for r in range(3)] == [
        "Answer: 2<eos>", "Guess: 5<eos>Guess: 7<eos>", "Move: 1<eos>"]
    # the eos target of a move that the env answers sits on the reply's first token (the input stays "\n")
    end = int(np.flatnonzero(data.turn_mask[1, 0])[-1])
    assert tok.pieces[int(data.tokens[1, end])] == "\n" and int(data.targets[1, end]) == tok.eos_id
    assert data.turn_mask[1, 1].sum() == len("Guess: 7") + 1 and not data.turn_mask[0, 1].any()
    # nothing of the prompt or the replies is a target, and outside the rows only padding
    assert int(data.mask[0, : len("Q: 1+1?\n")].sum()) == 0 and (data.tokens[0, 19:] == tok.pad_id).all()
    # the shipped file: every row's targets are its completion and an eos
    from jaxmarl_llm.envs.text.datasets import DATA_DIR
    import json

    shipped = os.path.join(DATA_DIR, "arithmetic_sft.jsonl")
    data = files.load_transcripts(shipped, tok, 96)
    with open(shipped, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert data.tokens.shape == (len(rows), 96)
    for r, row in enumerate(rows):
        assert _decoded_targets(tok, data, r) == row["completion"] + "<eos>"
        start = int(np.argmax(data.mask[r]))
        assert tok.decode(data.tokens[r, :start]) == row["prompt"]


@pytest.mark.parametrize(
    "lines,max_length,match",
    [(['{"prompt": "a", "completion": "b"}', '{"prompt": "a", "completion": "b"'], 32, r"t\.jsonl:2: not valid JSON"),
     (['{"prompt": "a"}'], 32, r"t\.jsonl:1: key 'completion' is missing"),
     (['{"prompt": "a", "completion": 3}'], 32, r"t\.jsonl:1: key 'completion' is int"),
     (['["a", "b"]'], 32, r"t\.jsonl:1: expected a JSON object"),
     (['{"prompt": "", "completion": "b"}'], 32, r"t\.jsonl:1: empty prompt"),
     (['{"turns": ["a"]}'], 32, r"t\.jsonl:1: 'turns' must be a list of at least two strings"),
     (['{"turns": ["a", "b", "", "c"]}'], 32, r"t\.jsonl:1: an empty context entry"),
     (['{"prompt": "a", "completion": "b"}', '{"prompt": "abcdef", "completion": "ghij"}'], 8,
      r"t\.jsonl:2: the row needs 11 tokens .* config\.max_length is 8; raise config\.max_length to at least that"),
     ([], 32, r"t\.jsonl has no transcripts")],
)
def test_bad_transcript_files_name_the_file_and_line(tmp_path, lines, max_length, match):
    from jaxmarl_llm.tokenizers import CharTokenizer

    with pytest.raises(ConfigError, match=match):
        files.load_transcripts(_write_lines(tmp_path / "t.jsonl", lines), CharTokenizer(), max_length)
    with pytest.raises(ConfigError, match=r"config\.data_path: .*nope\.jsonl does not exist"):
        files.load_transcripts(str(tmp_path / "nope.jsonl"), CharTokenizer(), max_length)


def test_bad_transcript_files_reach_the_entry_point_as_config_errors(tmp_path):
    config = _file_config(data_path=_write_lines(tmp_path / "t.jsonl", ['{"prompt": "a", "completion": "b"}',
                                                                         '{"prompt": "a", "completion": "b" ,}']))
    with pytest.raises(ConfigError, match=r"t\.jsonl:2"):
        entry.build(config)
    config = _file_config(max_length=0, data_path=_write_lines(tmp_path / "u.jsonl", ['{"prompt": "a", "completion": "'
                                                                                        + "b" * 100 + '"}']))
    with pytest.raises(ConfigError, match=r"u\.jsonl:1: .* the env's capacity \(config\.max_length=0\) is 96; raise "
                                          r"config\.max_length"):
        entry.build(config)


@pytest.mark.parametrize(
    "kw,match",
    [({"source": "bogus"}, "config.source"),
     ({"source": "file", "data_path": ""}, "config.data_path"),
     ({"source": "file", "data_path": "/no/such/file.jsonl"}, "config.data_path"),
     ({"source": "file", "max_length": 1}, "config.max_length"),
     ({"source": "policy", "min_return": float("nan")}, "config.min_return"),
     ({"source": "teacher", "env_name": "text/cooperative_writing"}, "config.env_name")],
)
def test_bad_sft_source_configs_name_the_key(kw, match):
    config = _file_config() if kw.get("source") == "file" else _config()
    for k, v in kw.items():
        config[k] = v
    with pytest.raises(ConfigError, match=match):
        validate_sft(config)


def test_a_teacher_is_needed_only_for_source_teacher():
    config = _config(env_name="text/cooperative_writing", source="policy")
    config.env_kwargs = {}
    validate_sft(config)  # cooperative writing has no scripted teacher; the policy plays it
    validate_sft(_file_config())


def test_sft_on_a_file_lowers_its_loss():
    """A few updates on the shipped transcripts: the NLL of the completions falls, rows come from the file."""
    trainer = sft.make_train(_file_config(total_episodes=16 * 25))
    assert trainer.num_rows == 243
    _, metrics = _run(trainer, 25)
    nll = np.asarray(metrics["nll"])
    assert nll[-3:].mean() < 0.4 * nll[:3].mean(), nll
    # "Answer: N" and an eos: 10 or 11 targets a row
    assert np.all((metrics["target_tokens"] >= 10) & (metrics["target_tokens"] <= 11))



# ---- source="policy": rejection-sampling fine-tuning on the model's own episodes -----------------------

def _policy_config(**kw):
    """The tiny model answering text/arithmetic's three simplest problems (1 + 1, 1 - 1, 1 * 1)."""
    c = _config(env_name="text/arithmetic", num_turns=1, **{"source": "policy", **kw})
    c.env_kwargs = {"num_ops": 1, "max_operand": 1, "capacity": 96, "max_action_tokens": 12}
    c.model.max_position_embeddings = 128
    return c


def test_policy_moves_stop_before_the_eos_as_the_env_records_them():
    """policy_script's action is what the env appends (the eos is not part of the move), so collect's move spans
    and eos targets line up with the transcript."""
    trainer = sft.make_train(_policy_config())
    env, tok = trainer.env, trainer.tokenizer
    params, _ = trainer.weights(trainer.init(jax.random.PRNGKey(0), trainer.hparams), trainer.base)
    script = sft.policy_script(env, trainer.policy, params, None)

    @jax.jit
    def one_turn(key):
        obs, state = jax.vmap(env.reset)(jax.random.split(key, 64))
        keys = jax.random.split(jax.random.fold_in(key, 1), 64)
        action, target, _ = jax.vmap(script.act)(keys, jax.vmap(script.init)(state), state)
        raw = jax.vmap(lambda k, s: trainer.policy.sample(k, params, None, env.get_obs(s).tokens, env.get_obs(s).length))(
            jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys), state)  # the actor's own draw (agent 0's key)
        obs2 = jax.vmap(env.step)(keys, state, action)[0]
        return action, target, raw, obs2.length - obs.length

    action, target, raw, grown = jax.device_get(one_turn(jax.random.PRNGKey(3)))
    ended = (raw.tokens == tok.eos_id) & raw.mask  # [64, 1, M]
    assert ended.any(-1).sum() >= 3  # some samples stop on an eos, some run to max_action_tokens
    np.testing.assert_array_equal(action.length, grown)  # the env appends exactly the move
    np.testing.assert_array_equal(action.length, np.where(ended.any(-1), ended.argmax(-1), raw.mask.sum(-1)))
    assert target.all() and not (action.tokens == tok.eos_id).any()


@pytest.mark.parametrize("train_base", [pytest.param(True, marks=pytest.mark.slow), False])  # ~14 s each
def test_policy_rows_are_its_own_moves_and_a_min_return_nobody_reaches_changes_nothing(train_base):
    """min_return=-1 keeps every episode (a random model's unreadable answers return -1): the loss is SFT on the
    very moves the update played. min_return=2 (above any return) keeps none: no step at all, even with Adam's
    moments already non-zero."""
    from jaxmarl_llm.algos.sft import sft_loss

    trainer = sft.make_train(_policy_config(train_base=train_base))
    env, tok, hp = trainer.env, trainer.tokenizer, trainer.hparams
    upd = jax.jit(lambda s, hp: trainer.update(s, hp, trainer.base))
    s0 = trainer.init(jax.random.PRNGKey(0), hp)
    s1, m1 = upd(s0, hp._replace(min_return=jnp.float32(-1.0)))
    # the rows the update played: same data key, same weights, every move a target
    params, trainable = trainer.weights(s0, trainer.base)
    script = sft.policy_script(env, trainer.policy, params, trainable)
    data = jax.jit(lambda k: sft.collect(k, env, script, 1, jnp.arange(16), tok.eos_id, all_moves=True))(
        jax.random.split(s0.key)[1])
    assert float(m1["kept_fraction"]) == 1.0 and bool((data.returns == -1).all())
    assert float(m1["episode_return"]) == -1.0 and float(m1["success_rate"]) == 0.0
    lora = None if trainable is None else trainable["lora"]
    logits, _, _ = forward(params, data.tokens, trainer.policy.cfg, lora=lora, lora_scale=trainer.policy.lora.scale)
    _, want = sft_loss(logits, data.targets, data.mask)
    assert float(m1["nll"]) == pytest.approx(float(want["nll"]), rel=1e-5)
    assert float(m1["target_tokens"]) == pytest.approx(float(data.mask.sum()) / 16)
    for row in range(16):  # each row's targets: the sampled move, then one eos
        targets = _decoded_targets(tok, data, row)
        assert targets.endswith("<eos>") and targets.count("<eos>") == 1
    moved = lambda a, b: any(not np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))  # noqa: E731
    assert moved(s0.trainable, s1.trainable)
    none = hp._replace(min_return=jnp.float32(2.0))
    for before in (s0, s1):  # fresh, and after a real step (Adam moments non-zero)
        after, m = upd(before, none)
        assert float(m["kept_fraction"]) == 0.0 and float(m["target_tokens"]) == 0.0
        assert not moved((before.trainable, before.opt_state), (after.trainable, after.opt_state))
        assert int(after.update_step) == int(before.update_step) + 1 and moved(before.key, after.key)


def test_kept_episodes_weigh_exactly_as_an_sft_batch_of_only_them():
    """keep_episodes: the token-mean loss (and its gradient) over a batch with dropped rows is the loss of the
    kept rows alone. Rows with mixed returns from the noisy teacher (its random moves return 0, right ones 1)."""
    from jaxmarl_llm.algos.sft import select_transcripts, sft_loss

    trainer = sft.make_train(_policy_config())
    env, tok = trainer.env, trainer.tokenizer
    from jaxmarl_llm.data.teachers import make_script

    script = make_script("text/arithmetic", env, noise=0.5)
    data = jax.jit(lambda k: sft.collect(k, env, script, 1, jnp.arange(16), tok.eos_id, all_moves=True))(
        jax.random.PRNGKey(0))
    keep = np.asarray(select_transcripts(data.returns, threshold=1.0))
    assert 3 <= keep.sum() <= 13  # mixed
    params = trainer.weights(trainer.init(jax.random.PRNGKey(0), trainer.hparams), trainer.base)[0]

    def loss(p, d):
        logits, _, _ = forward(p, d.tokens, trainer.policy.cfg)
        return sft_loss(logits, d.targets, d.mask)[0]

    kept = sft.keep_episodes(data, jnp.asarray(keep))
    only = jax.tree.map(lambda x: x[np.flatnonzero(keep)], data)
    (l1, g1), (l2, g2) = jax.value_and_grad(loss)(params, kept), jax.value_and_grad(loss)(params, only)
    assert float(l1) == pytest.approx(float(l2), rel=1e-6)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)
    assert not bool(kept.turn_mask[~keep].any())


def test_rejection_sampling_learns_the_format_a_brief_warm_start_left_unsure(tmp_path):
    """30 SFT updates on a 3-line file leave a model whose samples (temperature 1) are mostly unreadable. Then
    20 source="policy" updates keeping the readable answers (min_return=0: right or wrong, not -1) make most
    samples readable; 10 of the same updates keeping every episode (min_return=-1) make them worse."""
    import json

    from jaxmarl_llm.envs.text import arithmetic

    lines = [json.dumps({"prompt": f"{arithmetic.PROMPT}1{op}1{arithmetic.OUTRO}", "completion": f"Answer: {v}"})
             for op, v in ((" + ", 2), (" - ", 0), (" * ", 1))]
    warm = _policy_config(source="file", data_path=_write_lines(tmp_path / "three.jsonl", lines), max_length=96,
                          total_episodes=16 * 30)
    s_warm, _ = _run(sft.make_train(warm), 30)
    trainer = sft.make_train(_policy_config(total_episodes=16 * 20, lr=3e-3, warmup_updates=1, anneal_lr=False))
    start = trainer.init(jax.random.PRNGKey(1), trainer.hparams).replace(trainable=s_warm.trainable)
    chunk = jax.jit(lambda s, hp: jax.lax.scan(lambda r, _: trainer.update(r, hp, trainer.base), s, None, length=10))

    def readable(m):  # returns are -1 (unreadable), 0 (wrong) or 1 (right): P(readable) = 1 - success + mean return
        return 1.0 - np.asarray(m["success_rate"]) + np.asarray(m["episode_return"])

    hp_kept = trainer.hparams._replace(min_return=jnp.float32(0.0))
    state, first = chunk(start, hp_kept)
    _, second = chunk(state, hp_kept)
    kept = jax.tree.map(lambda a, b: np.concatenate([a, b]), first, second)
    _, every = chunk(start, trainer.hparams._replace(min_return=jnp.float32(-1.0)))
    r_kept, r_every = readable(kept), readable(every)
    print("readable, min_return=0:", r_kept.round(2), "\nreadable, min_return=-1:", r_every.round(2))
    np.testing.assert_allclose(np.asarray(kept["kept_fraction"]), r_kept, atol=1e-6)
    assert r_kept[:3].mean() < 0.4 and r_every[:3].mean() < 0.4
    assert r_kept[-3:].mean() > 0.6, r_kept
    assert r_every[-3:].mean() < r_kept[-3:].mean() - 0.4, r_every


def test_eight_devices_match_one_on_a_file():
    _one_and_eight_devices_agree(_file_config, ("nll", "accuracy", "move_accuracy", "target_tokens"))


def test_eight_devices_match_one_on_the_policys_own_episodes():
    """Every sampled episode is kept (min_return=-1: a random model's answers return -1), so the step is not empty."""
    outs = _one_and_eight_devices_agree(lambda: _policy_config(min_return=-1.0),
                                        ("nll", "target_tokens", "kept_fraction", "episode_return"))
    assert np.all(outs[0][1]["kept_fraction"] == 1.0)


@pytest.mark.parametrize("variant", ["", pytest.param(":policy", marks=pytest.mark.slow)])  # :policy ~60 s
def test_file_and_policy_configs_resume_to_identical_results(tmp_path, variant):
    """configs/sft_file_arithmetic.py[:policy] through the runner (tiny model): a run killed after two checkpoints
    resumes to the uninterrupted run's weights and metrics, and exports its model."""
    from jaxmarl_llm.run.cli import load_config_file

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def small(out):
        c = load_config_file(os.path.join(root, "configs", "sft_file_arithmetic.py") + variant)
        c.model.update(_config().model)
        c.model.max_position_embeddings = 128
        c.num_envs, c.total_episodes, c.eval_episodes = 4, 4 * 6, 0
        if variant:
            c.min_return = -1.0  # a random model: keep its (unreadable) answers so that every update steps
        c.mesh.num_devices = 1
        c.run.out_dir, c.run.updates_per_chunk, c.run.checkpoint_every = str(tmp_path / out), 2, 1
        c.run.progress, c.run.tensorboard, c.run.plot = False, False, False
        return c

    full, resumed, headline = _killed_and_resumed(small)
    assert headline == ("episode_return" if variant else "move_accuracy")
    assert os.path.exists(os.path.join(resumed["model_dir"], "model.safetensors"))


@pytest.mark.parametrize("train_base", [True, False])
def test_bfloat16_model_trains_with_float32_weights_adapters_and_optimizer(train_base):
    """A bfloat16 model (a real-size preset's dtype) trains: the trained weights (the whole model or its adapters)
    and Adam's moments are float32, the forward runs in bfloat16, and the loss falls."""
    config = _config(train_base=train_base, total_episodes=16 * 8)
    config.model.dtype = config.model.param_dtype = "bfloat16"
    trainer = sft.make_train(config)
    state, metrics = _run(trainer, trainer.num_updates)
    assert {x.dtype for x in jax.tree.leaves(state.trainable)} == {jnp.dtype(jnp.float32)}
    assert {x.dtype for x in jax.tree.leaves(state.opt_state) if x.ndim} == {jnp.dtype(jnp.float32)}
    nll = np.asarray(metrics["nll"])
    assert np.isfinite(nll).all() and nll[-2:].mean() < nll[:2].mean(), nll
