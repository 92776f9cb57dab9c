"""The host-environment bridge (jaxmarl_llm/envs/host): Python games inside the compiled update.

Tic-tac-toe in Python equals the jitted game move for move; one host call per step for the whole batch; texts
cut at their room are said (overflow); a game's error is one line naming the game and the episode; a trainer
through the bridge repeats by seed, gives the same update on 8 devices as on 1, and learns."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmarl_llm.envs.host.bridge import HostTextEnv, Turn
from jaxmarl_llm.envs.registry import make
from jaxmarl_llm.envs.text.buffers import TextAction
from jaxmarl_llm.errors import HostEnvError, host_env_cause
from jaxmarl_llm.tokenizers import GAMES_BPE
from jaxmarl_llm.train.lm.setup import build_tokenizer


def _play(env, keys, moves, lengths):
    """Every step's (obs, active, reward, terminated, truncated, info) of vmapped games driven by `moves`."""
    step = jax.jit(jax.vmap(env.step))
    obs, state = jax.jit(jax.vmap(env.reset))(keys)
    out = [(obs, state.active)]
    for t in range(moves.shape[0]):
        obs, state, *rest = step(keys, state, TextAction(moves[t], lengths[t]))
        out.append((obs, state.active, *rest))
    return out, state


def _moves(env, cells: np.ndarray, unparsable: np.ndarray):
    """[T, N, 2, M] replies `Move: cell+1` in both seats (only the mover's is read), `pass` where unparsable."""
    table, lens = np.asarray(env.moves.ids), np.asarray(env.moves.lens)
    junk = np.asarray(env.codec.table(["pass"], width=table.shape[1]).ids)[0]
    tokens = np.where(unparsable[..., None], junk, table[cells])  # [T, N, M]
    length = np.where(unparsable, 4, lens[cells])
    return (jnp.asarray(np.repeat(tokens[:, :, None], 2, axis=2)),
            jnp.asarray(np.repeat(length[:, :, None], 2, axis=2)))


def _plays_like_ours(jitted, other, keys, ours, theirs, info_keys):
    """Drive our jitted game with replies `ours` and `other` with `theirs` ((tokens, lengths) [T, N, 2, M]), the
    same games: before every move the same legal moves in the games still on, after it the same ends, rewards and
    `info_keys`. Returns the two final states and how many games ended."""
    step_j, step_o = jax.jit(jax.vmap(jitted.step)), jax.jit(jax.vmap(other.step))
    (_, sj), (_, so) = jax.vmap(jitted.reset)(keys), jax.vmap(other.reset)(keys)
    ends = 0
    for t in range(ours[0].shape[0]):
        live = ~np.asarray(sj.done)
        np.testing.assert_array_equal(np.asarray(jax.vmap(jitted.candidate_mask)(sj))[live],
                                      np.asarray(jax.vmap(other.candidate_mask)(so))[live], err_msg=f"move {t}")
        _, sj, rj, tj, _, ij = step_j(keys, sj, TextAction(ours[0][t], ours[1][t]))
        _, so, ro, to, _, io = step_o(keys, so, TextAction(theirs[0][t], theirs[1][t]))
        np.testing.assert_array_equal(np.asarray(tj), np.asarray(to), err_msg=f"ends after move {t}")
        np.testing.assert_array_equal(np.asarray(rj), np.asarray(ro), err_msg=f"rewards after move {t}")
        for k in info_keys:
            np.testing.assert_array_equal(np.asarray(ij[k]), np.asarray(io[k]), err_msg=f"{k} after move {t}")
        ends += int(np.asarray(tj).all(-1)[live].sum())
    return sj, so, ends


@pytest.mark.parametrize("tokenizer", ["char", GAMES_BPE])
def test_python_tic_tac_toe_equals_the_jitted_game_move_for_move(tokenizer):
    """Random cells (many taken: illegal) and some unparsable replies, 9 moves of 24 games: the same rewards,
    ends, movers and info at every step, and the same transcripts (token for token with one id per character;
    as text with the games' BPE, which the jitted game encodes piece by piece)."""
    tok = None if tokenizer == "char" else build_tokenizer(tokenizer)
    jitted, host = make("text/tic_tac_toe", tokenizer=tok), make("host/tic_tac_toe", tokenizer=tok)
    rng = np.random.default_rng(0)
    n = 24
    cells = rng.integers(0, 9, size=(9, n))
    cells[:, :8] = np.stack([rng.permutation(9) for _ in range(8)], 1)  # 8 games of legal moves only
    unparsable = (rng.random((9, n)) < 0.1) & (np.arange(n) >= 8)
    moves, lengths = _moves(jitted, cells, unparsable)
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    a, a_state = _play(jitted, keys, moves, lengths)
    b, b_state = _play(host, keys, moves, lengths)
    for t, (x, y) in enumerate(zip(a, b)):
        for name, u, v in zip(("obs", "active", "reward", "terminated", "truncated", "info"), x, y):
            if name == "obs" and tokenizer != "char":
                continue
            for p, q in zip(jax.tree.leaves(u), jax.tree.leaves(v)):
                np.testing.assert_array_equal(np.asarray(p), np.asarray(q), err_msg=f"{name} after move {t}")
    for i in range(n):
        assert jitted.render(a_state, i) == host.render(b_state, i)
    finished = np.asarray(jax.tree.leaves(a[-1][3])).reshape(n, 2).all(-1)
    assert finished[:8].all() and np.asarray(a[-1][5]["draw"])[:8].any() and np.asarray(a[-1][5]["won"]).any()
    assert np.asarray(jnp.stack([x[5]["format_error"] for x in a[1:]])).any()  # some games end unparsable


def test_a_host_game_inside_a_mixture_plays_as_alone_and_only_where_drawn():
    """text/mixture of a jitted game and a host game: the host builds a game only for the episodes that draw it
    (no idle games left on the host), and each of those plays exactly as the host game alone from the same key."""
    mixture = make("text/mixture", games=("text/kuhn_poker", "host/tic_tac_toe"))
    host_alone = make("host/tic_tac_toe")
    n = 16
    keys = jax.random.split(jax.random.PRNGKey(2), n)
    rng = np.random.default_rng(1)
    cells = np.stack([rng.permutation(9) for _ in range(n)], 1)  # [9, N] legal moves only
    moves, lengths = _moves(make("text/tic_tac_toe"), cells, np.zeros((9, n), bool))
    mixed, m_state = _play(mixture, keys, moves, lengths)
    alone, _ = _play(host_alone, keys, moves, lengths)
    drawn = np.asarray(m_state.game) == 1
    hosted = mixture.games[1]
    assert 0 < drawn.sum() < n and hosted.games_started == drawn.sum() and not hosted.live  # every game finished
    for t, (x, y) in enumerate(zip(mixed[1:], alone[1:])):
        for name, u, v in zip(("reward", "terminated", "truncated"), x[2:5], y[2:5]):
            np.testing.assert_array_equal(np.asarray(u)[drawn], np.asarray(v)[drawn], err_msg=f"{name} after {t}")
    assert np.asarray(mixed[-1][5]["game_tic_tac_toe"]).shape == (n, 2)


class _Digits:
    """A test game: each of 3 turns the player to move earns the share of digits in its reply."""

    def reset(self, seed):
        self.turn, self.rng = 0, np.random.default_rng(seed)
        return [f"Say digits. {self.rng.integers(100)}\n", "Wait.\n"], 0

    def step(self, action):
        me = self.turn % 2
        self.turn += 1
        share = sum(c.isdigit() for c in action) / max(len(action), 1)
        rewards = [share if p == me else 0.0 for p in (0, 1)]
        return Turn([f"{share:.1f}\n", "ok\n"], rewards, self.turn == 3, 1 - me, {"won": [share > 0.5, False]})


class _Boom(_Digits):
    def step(self, action):
        if self.turn == 1:
            raise ValueError("the board caught fire")
        return super().step(action)


def _digits_env(game=_Digits, turn_tokens=8, tokenizer="char"):
    return HostTextEnv(game, "digits", ("a", "b"), build_tokenizer(tokenizer), capacity=48, max_action_tokens=4,
                       turn_tokens=turn_tokens, info_keys=("won",))


def test_one_host_call_per_step_for_the_whole_batch():
    """vmap over 5 games: one reset call and one call per step, each with the 5 games (callback.py)."""
    env = _digits_env()
    keys = jax.random.split(jax.random.PRNGKey(1), 5)
    _play(env, keys, jnp.zeros((3, 5, 2, 4), jnp.int32), jnp.ones((3, 5, 2), jnp.int32))
    assert env.host_batches == [5] * 4 and env.host_seconds > 0


def test_a_text_longer_than_its_room_is_cut_and_said():
    """turn_tokens=2: the first answer (`0.0` and a newline: 4 characters) is cut, the episode ends truncated."""
    env = _digits_env(turn_tokens=2, tokenizer="char")
    keys = jax.random.split(jax.random.PRNGKey(2), 3)
    out, state = _play(env, keys, jnp.zeros((1, 3, 2, 4), jnp.int32), jnp.ones((1, 3, 2), jnp.int32))
    assert np.asarray(state.overflow).any(-1).all() and np.asarray(out[1][4]).all()  # truncated, all agents


def test_a_game_error_is_one_line_naming_the_game_and_the_episode():
    env = _digits_env(_Boom)
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    with pytest.raises(Exception) as err:
        _play(env, keys, jnp.zeros((2, 2, 2, 4), jnp.int32), jnp.ones((2, 2, 2), jnp.int32))
    line = host_env_cause(err.value)
    assert line is not None and "\n" not in line, str(err.value)[:2000]
    assert line.startswith("host env digits: episode ") and "after 1 moves" in line
    assert line.endswith("ValueError: the board caught fire") and "seed " in line
    assert host_env_cause(HostEnvError("host env x: episode 3: E: y")) == "host env x: episode 3: E: y"


def test_main_guard_prints_the_host_error_line_and_exits_4(capsys):
    from jaxmarl_llm.run.cli import main_guard

    env = _digits_env(_Boom)
    keys = jax.random.split(jax.random.PRNGKey(3), 2)

    def main(argv):
        _play(env, keys, jnp.zeros((2, 2, 2, 4), jnp.int32), jnp.ones((2, 2, 2), jnp.int32))

    with pytest.raises(SystemExit) as stop:
        main_guard(main)([])
    assert stop.value.code == HostEnvError.EXIT_STATUS
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "host env digits: episode" in err[0] and "the board caught fire" in err[0], err


def _digits_config(num_devices: int = 1, updates: int = 2):
    from jaxmarl_llm.models.config import PROJECTIONS
    from jaxmarl_llm.train.config import validate_lm_rl
    from tiny_configs import tiny_lm_rl

    c = tiny_lm_rl("text/guess_number", "char",  # the env is passed in
                   model={"max_position_embeddings": 64}, lora={"targets": PROJECTIONS})  # adapters on every linear
    c.policy.actions = "free"
    c.share_policy = True
    c.algo, c.group_size, c.num_envs, c.num_turns = "ppo", 1, 16, 3
    c.lr = 1e-2
    c.total_episodes = 16 * updates
    c.mesh.num_devices = num_devices
    validate_lm_rl(c)
    return c


def _train(config, updates: int, seed: int = 0):
    from jaxmarl_llm.parallel import mesh as mesh_lib
    from jaxmarl_llm.train import lm_rl

    env = _digits_env()
    trainer = lm_rl.make_train(config, env=env)
    mesh = mesh_lib.make_mesh(config.mesh.num_devices)
    state = mesh_lib.put(trainer.init(jax.random.PRNGKey(seed), trainer.hparams), mesh, trainer.state_specs)
    state, metrics = mesh_lib.sharded_chunk(trainer, mesh, updates)(state, trainer.hparams)
    return jax.device_get(state), jax.device_get(metrics), env


def test_a_trainer_through_the_bridge_repeats_by_seed_and_on_eight_devices():
    if len(jax.devices()) < 8:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 (set by conftest)")
    one, m_one, env = _train(_digits_config(1), 2)
    again, m_again, _ = _train(_digits_config(1), 2)
    eight, m_eight, env8 = _train(_digits_config(8), 2)
    for k in ("episode_return", "format_error_rate", "tokens_per_turn"):
        if k in m_one:
            np.testing.assert_array_equal(m_one[k], m_again[k], err_msg=k)
            np.testing.assert_allclose(m_one[k], m_eight[k], rtol=1e-5, err_msg=k)
    for a, b, c in zip(jax.tree.leaves(one.trainable), jax.tree.leaves(again.trainable), jax.tree.leaves(eight.trainable)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, atol=2e-5, rtol=1e-4)
    assert float(np.abs(m_one["episode_return"]).max()) > 0  # replies with digits happened: a real signal
    # one host call per turn per device: 1 reset + 3 steps per update, 16 games on 1 device, 2 on each of 8
    assert env.host_batches == [16] * 8 and env8.host_batches == [2] * 64


def test_ppo_through_the_bridge_learns_to_reply_with_digits():
    """The host game pays the share of digits in each reply: PPO from a random tiny model raises it (0.18 -> 0.55
    over 60 updates; a random reply's share is about 0.1)."""
    _, metrics, _ = _train(_digits_config(1, 60), 60)
    ret = np.asarray(metrics["episode_return"])
    assert ret[-10:].mean() > ret[:10].mean() + 0.25, (ret[:10].mean(), ret[-10:].mean())


def test_legal_replies_come_from_the_host_game_as_the_jitted_game_gives_them():
    """host/tic_tac_toe's candidates are the jitted game's (`Move: 1` .. `Move: 9`), and after every move of
    legal games its mask equals the jitted game's empty cells."""
    jitted, host = make("text/tic_tac_toe"), make("host/tic_tac_toe")
    assert host.action_candidates == jitted.action_candidates
    rng = np.random.default_rng(1)
    n = 6
    cells = np.stack([rng.permutation(9) for _ in range(n)], 1)
    moves, lengths = _moves(jitted, cells, np.zeros((9, n), bool))
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    step_j, step_h = jax.jit(jax.vmap(jitted.step)), jax.jit(jax.vmap(host.step))
    (_, sj), (_, sh) = jax.vmap(jitted.reset)(keys), jax.vmap(host.reset)(keys)
    for t in range(9):
        np.testing.assert_array_equal(jax.vmap(jitted.candidate_mask)(sj), jax.vmap(host.candidate_mask)(sh))
        sj = step_j(keys, sj, TextAction(moves[t], lengths[t]))[1]
        sh = step_h(keys, sh, TextAction(moves[t], lengths[t]))[1]


def test_textarena_tic_tac_toe_through_the_bridge_plays_our_rules():
    """TextArena's TicTacToe-v0 (its own prompts and parser) and our jitted tic-tac-toe, driven by the same legal
    games (TextArena's cell c is our `Move: c+1`; its player 0 moves first, as our X): the same legal moves before
    every move, the same ends, winners and rewards."""
    jitted, arena = make("text/tic_tac_toe"), make("host/textarena", game="TicTacToe-v0", capacity=8192,
                                                      turn_tokens=1024)  # one id per character
    rng = np.random.default_rng(2)
    n = 12
    cells = np.stack([rng.permutation(9) for _ in range(n)], 1)  # [9, n]
    ours = _moves(jitted, cells, np.zeros((9, n), bool))
    table = arena.codec.table([f"[{c}]" for c in range(9)], width=arena.max_action_tokens)
    theirs = (jnp.asarray(np.repeat(np.asarray(table.ids)[cells][:, :, None], 2, axis=2)),
              jnp.asarray(np.repeat(np.asarray(table.lens)[cells][:, :, None], 2, axis=2)))
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    obs_a, _ = jax.vmap(arena.reset)(keys)
    assert "Tic Tac Toe" in arena.codec.decode(np.asarray(obs_a.tokens[0, 0, : obs_a.length[0, 0]]))
    sj, _, ends = _plays_like_ours(jitted, arena, keys, ours, theirs, ("won", "draw"))
    assert ends == n and np.asarray(sj.done).all()


def test_textarena_against_its_random_player_is_one_agent_in_either_seat():
    """opponent="random": one agent, seated by the seed; the game plays the other seat with legal moves, so every
    game ends with a result (won / drawn / lost by the learner) and a reward of +1 / 0 / -1."""
    env = make("host/textarena", game="TicTacToe-v0", opponent="random", capacity=8192, turn_tokens=4096)
    assert env.num_agents == 1
    n = 8
    keys = jax.random.split(jax.random.PRNGKey(4), n)
    step = jax.jit(jax.vmap(env.step))
    obs, state = jax.vmap(env.reset)(keys)
    first = [env.codec.decode(np.asarray(obs.tokens[i, 0, : obs.length[i, 0]])) for i in range(n)]
    assert all("Tic Tac Toe" in t for t in first)
    assert any("[Player 0]" in t for t in first) and any("[Player 0]" not in t for t in first)  # both seats
    ret = np.zeros(n)
    for _ in range(5):
        mask = np.asarray(jax.vmap(env.candidate_mask)(state))[:, 0]  # [n, 9]
        cell = np.where(mask.any(-1), mask.argmax(-1), 0)
        table = env.codec.table([f"[{c}]" for c in range(9)], width=env.max_action_tokens)
        action = TextAction(jnp.asarray(np.asarray(table.ids)[cell][:, None]), jnp.asarray(np.asarray(table.lens)[cell][:, None]))
        _, state, reward, _, _, info = step(keys, state, action)
        ret += np.asarray(reward)[:, 0]
    assert np.asarray(state.done).all() and set(ret) <= {-1.0, 0.0, 1.0}


def test_the_textarena_config_trains_through_the_bridge():
    """configs/textarena_tic_tac_toe.py as the CLI loads it, shrunk (a 1-layer model, 4 games): an update plays
    TextArena's games to their end on legal moves only and learns from them."""
    import os

    from jaxmarl_llm.run.cli import load_config_file
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.train.config import validate_lm_rl
    from tiny_configs import TINY_MODEL

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    c = load_config_file(os.path.join(root, "configs", "textarena_tic_tac_toe.py"))
    c.model.update(TINY_MODEL)
    c.num_envs, c.total_episodes, c.mesh.num_devices = 4, 8, 1
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c)
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    state, metrics = jax.jit(trainer.update)(state, trainer.hparams, trainer.base)
    assert float(metrics["illegal_rate"]) == 0.0 and float(metrics["episode_turns"]) >= 3
    assert float(metrics["grad_norm"]) > 0 and trainer.env.host_batches[:2] == [4, 4]


def test_pettingzoo_tic_tac_toe_through_the_bridge_plays_our_rules():
    """PettingZoo's classic tic-tac-toe (an AEC env, array observations drawn as a board) and our jitted game,
    driven by the same legal games: the same legal moves before every move, the same ends, winners and rewards."""
    jitted, pz = make("text/tic_tac_toe"), make("host/pettingzoo_tic_tac_toe")
    assert pz.action_candidates == jitted.action_candidates  # `Move: 1` .. `Move: 9`
    rng = np.random.default_rng(5)
    n = 10
    cells = np.stack([rng.permutation(9) for _ in range(n)], 1)
    moves = _moves(jitted, cells, np.zeros((9, n), bool))
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    obs, _ = jax.vmap(pz.reset)(keys)
    assert pz.codec.decode(np.asarray(obs.tokens[0, 0, : obs.length[0, 0]])) == "You are X.\n1|2|3\n4|5|6\n7|8|9\nYour move.\n"
    _, sp, _ = _plays_like_ours(jitted, pz, keys, moves, moves, ("won",))
    assert np.asarray(sp.done).all()


HOST_TTT = '''
from jaxmarl_llm.train.config import lm_rl_defaults


def get_config():
    c = lm_rl_defaults()
    c.env_name, c.tokenizer = "host/tic_tac_toe", "char"
    c.env_kwargs = {"capacity": 640, "max_action_tokens": 8}
    c.model.update(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16,
                   max_position_embeddings=656)
    c.lora.update(rank=4, alpha=8.0)
    c.policy.actions = "constrained"
    c.share_policy = True
    c.algo, c.group_size, c.num_envs, c.num_turns = "ppo", 1, 4, 9
    c.lr = 1e-2
    c.total_episodes = 4 * 6
    c.mesh.num_devices = 1
    c.run.update(updates_per_chunk=1, checkpoint_every=1, progress=False, plot=False, tensorboard=False)
    return c
'''


def test_a_run_through_the_bridge_killed_and_resumed_is_the_run_never_interrupted(tmp_path):
    """kill -9 after a checkpoint, then --config.resume=True: every metric of every update equals the run that was
    never interrupted (episodes start and end inside an update: nothing on the host is saved)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from jaxmarl_llm.run.metrics_log import read_csv

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    config = tmp_path / "host_ttt.py"
    config.write_text(HOST_TTT)

    def command(out: str, resume: bool) -> list[str]:
        return [sys.executable, os.path.join(root, "experiments", "train.py"), f"--config={config}",
                f"--config.run.out_dir={out}", f"--config.resume={resume}"]

    env = {**os.environ, "PYTHONPATH": root}
    reference, killed = str(tmp_path / "reference"), str(tmp_path / "killed")
    done = subprocess.run(command(reference, False), capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    run = subprocess.Popen(command(killed, False), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    checkpoints = os.path.join(killed, "checkpoints")
    while run.poll() is None and not (os.path.isdir(checkpoints) and any(n.isdigit() for n in os.listdir(checkpoints))):
        time.sleep(0.01)
    run.send_signal(signal.SIGKILL)
    run.wait()
    saved = max(int(n) for n in os.listdir(checkpoints) if n.isdigit())
    assert saved < 6, saved  # killed mid-run
    done = subprocess.run(command(killed, True), capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    drop = ("steps_per_second", "tokens_per_second", "mfu")  # wall-clock measures
    rows = lambda out: [{k: v for k, v in r.items() if k not in drop} for r in read_csv(os.path.join(out, "metrics.csv"))]  # noqa: E731
    assert rows(killed) == rows(reference) and len(rows(reference)) == 6
    assert any(float(r["episode_turns"]) > 1 for r in rows(reference))  # games of several moves were played


@pytest.mark.parametrize("game,replies", [
    ("TicTacToe-v0", [f"[{c}]" for c in range(9)]),
    ("KuhnPoker-v0", ["[check]", "[call]"]),
    ("SimpleNegotiation-v0", ["Hello. [Deny]"]),
    ("ConnectFour-v0", [f"[col {c}]" for c in range(7)]),
    ("Nim-v0", ["[0 1]", "[1 1]", "[2 1]"]),
])
def test_five_textarena_games_play_to_their_end_through_the_bridge(game, replies):
    """Each game with its own prompt and parser, free-text replies cycling through a fixed list: both games of
    the batch end within 40 moves, with TextArena's rewards."""
    env = make("host/textarena", game=game, tokenizer=build_tokenizer(GAMES_BPE), capacity=8192, turn_tokens=4096,
               candidates=())
    keys = jax.random.split(jax.random.PRNGKey(7), 2)
    table = env.codec.table(replies, width=env.max_action_tokens + 8)
    assert table.width <= env.max_action_tokens + 8
    step = jax.jit(jax.vmap(env.step))
    _, state = jax.vmap(env.reset)(keys)
    total = np.zeros((2, 2))
    for t in range(40):
        k = t % len(replies)
        ids = np.asarray(table.ids)[k, : env.max_action_tokens]
        action = TextAction(jnp.asarray(np.broadcast_to(ids, (2, 2, len(ids)))),
                            jnp.full((2, 2), min(int(table.lens[k]), env.max_action_tokens), jnp.int32))
        _, state, reward, *_ = step(keys, state, action)
        total += np.asarray(reward)
        if np.asarray(state.done).all():
            break
    assert np.asarray(state.done).all() and not np.asarray(state.overflow).any(), game
    assert set(np.round(total.ravel(), 6)) <= {-1.0, 0.0, 1.0}, total
