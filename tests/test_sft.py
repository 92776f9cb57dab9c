"""SFT warm start: scripted transcripts, learning the format, export round trip, resume, held-out evaluation.

Budgets are tiny (2-turn episodes, a 1-layer model) so the file runs in about a
minute on 2 CPU cores; the full recipe (SFT then GRPO to >= 90% on held-out
secrets) is the `slow` test at the end.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.envs.text.guess_number import GuessNumber
from jaxmarl_llm.envs.text.tic_tac_toe import TicTacToe, board_code
from jaxmarl_llm.envs.text.twenty_questions import TwentyQuestions
from jaxmarl_llm.models.hf import load_pretrained
from jaxmarl_llm.models.transformer import forward
from jaxmarl_llm.train import entry, evaluate, lm_rl, play, sft
from jaxmarl_llm.train.config import ConfigError, lm_rl_defaults, sft_defaults, validate_sft
from jaxmarl_llm.train.metrics_log import read_csv
from jaxmarl_llm.train.runner import run_training
from killing import Killed, dying_after
from jaxmarl_llm.train.scripted import binary_search, greedy_splitter, minimax_selfplay


def _config(out_dir="runs/test_sft", **kw):
    c = sft_defaults()
    c.env_kwargs = {"capacity": 192, "max_action_tokens": 12, "max_turns": 2}  # prompt 146 + 2 x 22
    c.num_turns = 2
    c.model.update({"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1,
                    "head_dim": 16, "max_position_embeddings": 256, "init_std": 0.02})
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
    before = evaluate.evaluate_trainer(config, trainer, trainer.init(jax.random.PRNGKey(0), trainer.hparams), 32)
    state, metrics = _run(trainer, trainer.num_updates)
    nll = np.asarray(metrics["nll"])
    after = evaluate.evaluate_trainer(config, trainer, state, 32)
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



def test_killed_run_resumes_to_identical_results_and_exports(tmp_path):
    def small(out):
        return _config(out_dir=tmp_path / out, total_episodes=16 * 6)

    full = entry.train_from_config(small("full"))
    config = small("killed")
    trainer, chunk_fn, steps, headline = entry.build(config)
    with pytest.raises(Killed):  # dies during the third chunk, after two checkpoints
        run_training(config, trainer, dying_after(chunk_fn, 3), steps, headline)
    config.resume = "True"
    resumed = entry.train_from_config(config)
    for a, b in zip(jax.tree.leaves(full["state"]), jax.tree.leaves(resumed["state"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows_full = read_csv(os.path.join(full["out_dir"], "metrics.csv"))
    rows_resumed = read_csv(os.path.join(config.run.out_dir, "metrics.csv"))
    assert [r["update"] for r in rows_resumed] == [str(i) for i in range(1, 7)]
    assert [r["nll"] for r in rows_full] == [r["nll"] for r in rows_resumed]
    assert os.path.exists(os.path.join(resumed["model_dir"], "model.safetensors"))


def test_evaluate_counts_successes_turns_and_format_errors():
    env = GuessNumber(split="test", capacity=512, max_action_tokens=12)
    reset = evaluate.enumerate_secrets(env)
    n = int(env.secrets.shape[0])
    always_512 = lambda key, tokens, length: env.guess_action(jnp.int32(512))  # noqa: E731
    r = evaluate.evaluate(env, always_512, n, 10, reset=reset)
    assert r["success_rate"] == pytest.approx(float((np.asarray(env.secrets) == 512).mean()))
    assert r["format_error_rate"] == 0.0 and r["mean_turns"] >= 9.9
    garbage = lambda key, tokens, length: TextAction(jnp.full((1, 12), 5, jnp.int32), jnp.full((1,), 12))  # noqa: E731
    r = evaluate.evaluate(env, garbage, 8, 10, reset=reset)
    assert r["success_rate"] == 0.0 and r["format_error_rate"] == 1.0


def _ttt_teacher_games(env, noises, num_games):
    """The tic-tac-toe teacher against itself at each noise level (one compile); per turn [S, N, T]:
    illegal, target, optimal (a minimax move), moved, draw, won."""

    def one(noise, key):
        script = minimax_selfplay(env, noise=noise)
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


@pytest.mark.parametrize(
    "key,value,match",
    [("env_name", "text/debate", "config.env_name"), ("num_envs", 0, "config.num_envs"),
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
    """configs/sft_tic_tac_toe.py alone (greedy): loses <= 5% against random, draws >= 80% against minimax.

    The target of the issue; not met yet at this budget (see configs/sft_tic_tac_toe.py for the measured numbers).
    """
    from configs import sft_tic_tac_toe

    config = sft_tic_tac_toe.get_config()
    config.run.out_dir, config.run.progress = str(tmp_path / "sft"), False
    config.run.tensorboard, config.run.plot = False, False
    result = entry.train_from_config(config)
    trainer = sft.make_train(config)
    vs_random = versus_builtin(trainer, result["state"], "random", 100)
    vs_minimax = versus_builtin(trainer, result["state"], "minimax", 100)
    print("vs random:", vs_random, "\nvs minimax:", vs_minimax)
    assert vs_random["overall"]["loss"] <= 0.05, vs_random
    assert vs_minimax["overall"]["draw"] >= 0.8, vs_minimax
    assert vs_random["overall"]["illegal"] <= 0.02 and vs_minimax["overall"]["illegal"] <= 0.02

def test_eight_devices_match_one():
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 forced host devices (conftest)")
    from jaxmarl_llm.train import mesh as mesh_lib

    outs = []
    for n in (1, 8):
        config = _config()
        config.mesh.num_devices = n
        trainer = sft.make_train(config)
        mesh = mesh_lib.make_mesh(n)
        state = mesh_lib.put(trainer.init(jax.random.PRNGKey(1), trainer.hparams), mesh, trainer.state_specs)
        state, metrics = lm_rl.sharded_chunk(trainer, mesh, 2)(state, trainer.hparams)
        outs.append((jax.device_get(state.trainable), jax.device_get(metrics)))
    for a, b in zip(jax.tree.leaves(outs[0][0]), jax.tree.leaves(outs[1][0])):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
    for name in ("nll", "move_accuracy", "teacher_success", "target_tokens"):
        np.testing.assert_allclose(outs[0][1][name], outs[1][1][name], rtol=1e-5)
