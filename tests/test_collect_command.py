"""experiments/collect.py: episodes played by a checkpoint, a built-in player or the game's teacher, written as
JSONL that the SFT loader reads, each seat's line with its return; --min_return keeps the lines worth imitating."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TTT = os.path.join(ROOT, "configs", "tic_tac_toe.py")


def _collect(tmp_path, *args: str) -> tuple[list[dict], str]:
    out = str(tmp_path / "rows.jsonl")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "experiments", "collect.py"), f"--out={out}", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out) as f:
        return [json.loads(line) for line in f], done.stdout


def test_minimax_games_are_written_whole_per_seat_and_load_as_sft_rows(tmp_path):
    """Minimax against itself on the game with history: every game a draw (return 0), one line per seat whose
    turns (context, move, ...) join into the seat's whole transcript, its moves `Move: N` on empty cells; the SFT
    loader reads the file with every move a target."""
    from jaxmarl_llm.data.files import load_transcripts
    from jaxmarl_llm.train.lm.setup import build_tokenizer

    rows, stdout = _collect(tmp_path, f"--config={TTT}", "--player=minimax", "--episodes=6")
    assert "6 episodes of text/tic_tac_toe by minimax: 12 lines, mean return +0.000" in stdout
    assert sorted((r["episode"], r["seat"]) for r in rows) == [(e, s) for e in range(6) for s in (0, 1)]
    for r in rows:
        assert r["return"] == 0.0 and r["turns"][-1].endswith("Draw.\n")
        moves = r["turns"][1::2]
        assert all(re.fullmatch(r"Move: [1-9]", m) for m in moves) and len(set(moves)) == len(moves)
        assert r["turns"][0].startswith("Tic-tac-toe.") and f"You are {'XO'[r['seat']]}." in r["turns"][0]
    assert {len(r["turns"][1::2]) for r in rows if r["seat"] == 0} == {5}  # X moves 5 times in a draw
    rows_t = load_transcripts(str(tmp_path / "rows.jsonl"), build_tokenizer("word", "text/tic_tac_toe"), 400)
    assert rows_t.tokens.shape[0] == 12 and np.asarray(rows_t.turn_mask).any(-1).sum() == 12 * 4.5


def test_min_return_keeps_the_winning_moves_of_random_play(tmp_path):
    """Random play on the game that rewrites its observation: one line per move, {"prompt", "completion"}; with
    --min_return=1 only the moves of seats that won, each on an empty cell of the board its prompt shows."""
    rows, stdout = _collect(tmp_path, f"--config={TTT}:scratch", "--player=random", "--episodes=40",
                            "--min_return=1", "--seed=3")
    total, kept = map(int, re.search(r": (\d+) lines, .*; kept (\d+) with return >= 1", stdout).groups())
    assert 0 < kept < total and len(rows) == kept
    for r in rows:
        assert r["return"] == 1.0 and set(r) == {"prompt", "completion", "return", "seat", "episode"}
        cell = int(r["completion"].removeprefix("Move: "))
        cells = "|".join(r["prompt"].split("\n")[2:5]).split("|")  # the board's rows (`1|X|3`) after the seat line
        assert str(cell) in cells, (r["prompt"], cell)  # an empty cell shows its number
    # an episode's winner moved 3 to 5 times: its lines share the episode and the seat
    per = {}
    for r in rows:
        per[(r["episode"], r["seat"])] = per.get((r["episode"], r["seat"]), 0) + 1
    assert all(3 <= n <= 5 for n in per.values())


def test_a_checkpoint_plays_its_own_adapter_not_the_base_model(tmp_path):
    """--checkpoint plays the run's adapter: greedy, its moves are those the adapter samples in this process (the
    same episodes through data/collect.py) and not the bare base model's; an adapter tree handed to the policy
    without its {"lora": ...} wrapper is refused, not read as the base model."""
    import jax

    from jaxmarl_llm.data.collect import collect, policy_script
    from jaxmarl_llm.evaluation import play
    from jaxmarl_llm.run.checkpoints import Checkpoints
    from jaxmarl_llm.run.cli import load_config_file
    from jaxmarl_llm.run.collect_command import rows_of
    from jaxmarl_llm.train import lm_rl

    from test_cross_play import TINY_POOL, _nudged

    path = tmp_path / "tiny_ttt.py"
    path.write_text(TINY_POOL)
    trainer = lm_rl.make_train(load_config_file(str(path)))
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    lora = _nudged(state.trainable["lora"], seed=1, scale=1.0)  # off zero: a fresh adapter is the base model
    ckpt = Checkpoints(str(tmp_path / "run" / "checkpoints"))
    try:
        ckpt.save(1, state.replace(update_step=jax.numpy.int32(1), trainable={**state.trainable, "lora": lora}))
    finally:
        ckpt.close()

    args = (f"--config={path}", "--episodes=6", "--temperature=0")
    mine, stdout = _collect(tmp_path, *args, f"--checkpoint={tmp_path / 'run'}")
    assert f"by lm ({tmp_path / 'run'})" in stdout
    base, _ = _collect(tmp_path, *args)
    moves = lambda rows: [(r["episode"], r["seat"], r["completion"]) for r in rows]  # noqa: E731
    assert moves(mine) != moves(base)

    env, policy = trainer.env, play.with_temperature(trainer.policy, 0.0)
    adapter = {"lora": jax.tree.map(lambda x: x[0], lora)}
    rows = jax.jit(lambda key: collect(key, env, policy_script(env, policy, trainer.base, adapter), 9,
                                       jax.numpy.arange(6), env.codec.eos_id))(jax.random.PRNGKey(0))
    decode = lambda ids: env.codec.decode([int(i) for i in ids])  # noqa: E731
    assert moves(mine) == moves(rows_of(rows, env.num_agents, 6, decode, env.codec.pad_id))

    with pytest.raises(TypeError, match="an adapter tree; pass"):
        policy_script(env, policy, trainer.base, adapter["lora"]).act(
            jax.random.PRNGKey(0), (), env.reset(jax.random.PRNGKey(0))[1])
