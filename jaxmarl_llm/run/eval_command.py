"""Play N episodes of a trained (or base) LM against a chosen opponent; print rates and a few transcripts:

    python experiments/eval.py --config=configs/tic_tac_toe.py --checkpoint=runs/tic_tac_toe --opponent=minimax
    python experiments/eval.py --config=configs/tic_tac_toe.py --opponent=random --episodes=200 --temperature=1
    python experiments/eval.py --config=configs/tic_tac_toe.py --checkpoint=runs/a --opponent=runs/b

--checkpoint: a run directory of experiments/train.py (its latest checkpoint; in each seat the adapter slot the run
trained that seat with, e.g. X's and O's own with `share_policy=False`, or slot --slot in every seat); without it the
player is the bare base model (`--config.model.checkpoint`, e.g. an SFT model). --opponent: random | minimax
(the game's built-in players), base (the bare base model), self (the same adapter), or another run directory.
Two-seat games alternate seats (half the episodes as each); one-seat games report the success rate.
Games that count answers (twenty questions' `:lm` game) also print answer_accuracy: the share of the
answers to listed questions that equal the oracle's, given by whichever seat answers in those games
(in seat 0's games the opponent answers, in seat 1's the player):

    python experiments/eval.py --config=configs/twenty_questions.py:lm \
        --config.model.checkpoint=runs/sft_twenty_questions_lm/model --opponent=base --episodes=200

--heldout instead plays the run's own greedy held-out evaluation (what `eval_episodes` reports after training:
the run's seats, every secret once where the env lists them, `config.eval_episodes` of them when set) of the
checkpoint's latest state or, without --checkpoint, of the starting model (update 0: before RL):

    python experiments/eval.py --config=configs/twenty_questions.py:lm_scratch \
        --config.model.checkpoint=runs/sft_twenty_questions_answerer/model --heldout

--exact (tic-tac-toe with `history=False`) reads the greedy player's move at every position of each seat and
computes its win / draw / loss rates against random, minimax and the tactician exactly, over the opponents'
choices (no sampled games: 200 games per seat estimate a 10% loss rate to +-2 points), its one-move tactics, and
lists the positions where its move is not optimal, most reached first (jaxmarl_llm/evaluation/tic_tac_toe_exact.py):

    python experiments/eval.py --config=configs/free_tic_tac_toe.py --checkpoint=runs/free_tic_tac_toe --exact

--cross_play plays a self-play run's opponent-pool snapshots (`snap@<update>`), its earlier kept checkpoints
(`ckpt@<update>`: raise `--config.run.keep_checkpoints` to keep a run's history), its learner and the game's
built-in players against each other, every pair --episodes games (half in each seat order, the same deals), prints
the mean-return matrix with a Bradley-Terry Elo rating per player (random = 1000) and writes cross_play.csv,
cross_play.png and ratings.csv into the run directory (jaxmarl_llm/evaluation/cross_play.py):

    python experiments/eval.py --config=configs/tic_tac_toe.py --checkpoint=runs/tic_tac_toe --cross_play
"""

from __future__ import annotations

import os
import sys

import jax
from absl import flags
from ml_collections import config_flags

from jaxmarl_llm.envs.text.base import BUILTIN_PLAYERS
from jaxmarl_llm.evaluation import cross_play, play
from jaxmarl_llm.models import attention
from jaxmarl_llm.run import trainers
from jaxmarl_llm.run.cli import (check_overrides, command_config, config_name, fail, main_guard, order_cpu_collectives,
                                 run_program)
from jaxmarl_llm.run.run_dirs import check_run_dir, restore_adapter, restore_state, restore_states
from jaxmarl_llm.run.run_identity import saved_steps
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import validate_lm_rl

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file (an lm_rl config).", lock_config=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", "", "Run directory whose latest checkpoint is the player ('' = base model).")
_SLOT = flags.DEFINE_integer("slot", -1, "Adapter slot of the checkpoint that plays every seat (-1: each seat the "
                             "slot the run played it with).")
_OPPONENT = flags.DEFINE_string("opponent", "random", "random | minimax | equilibrium | best_response (the game's "
                                "built-in players) | base | self | a run directory.")
_EPISODES = flags.DEFINE_integer("episodes", 100, "Episodes (split evenly over the seats of a two-seat game).")
_TEMPERATURE = flags.DEFINE_float("temperature", 0.0, "0 = greedy decoding; > 0 samples.")
_TRANSCRIPTS = flags.DEFINE_integer("transcripts", 2, "Rendered games to print per seat.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of resets, sampling and the scripted opponents.")
_HELDOUT = flags.DEFINE_bool("heldout", False, "The run's own greedy held-out evaluation (as eval_episodes after "
                             "training) of --checkpoint, or of the starting model without one; no matches.")
_EXACT = flags.DEFINE_bool("exact", False, "Tic-tac-toe with history=False: the greedy player's exact win / draw / "
                           "loss rates per seat against random, minimax and the tactician (every position's move, no "
                           "sampled games) and the positions where its move is not optimal, most reached first.")
_CROSS_PLAY = flags.DEFINE_bool("cross_play", False, "Every pair among --checkpoint's opponent-pool snapshots, its "
                                "learner and the game's built-in players, --episodes games each; Elo ratings; "
                                "cross_play.csv, cross_play.png, ratings.csv in the run directory.")


OPPONENTS = (*BUILTIN_PLAYERS, "base", "self")  # or a run directory


def check_flags(config) -> None:
    """Every flag's mistake in one line (status 2), before the model is built."""
    if _EPISODES.value < 1:
        fail(f"--episodes={_EPISODES.value}: play at least 1 episode (a two-seat game splits them over the seats)")
    if _TEMPERATURE.value < 0:
        fail(f"--temperature={_TEMPERATURE.value}: 0 (greedy) or more")
    if _TRANSCRIPTS.value < 0:
        fail(f"--transcripts={_TRANSCRIPTS.value}: 0 or more")
    if _SLOT.value < -1:
        fail(f"--slot={_SLOT.value}: an adapter slot (0, 1, ...) or -1 (each seat its own)")
    if _CHECKPOINT.value:
        check_run_dir("checkpoint", _CHECKPOINT.value)
    if not _HELDOUT.value and _OPPONENT.value not in OPPONENTS:
        if not os.path.isdir(_OPPONENT.value):
            fail(f"--opponent={_OPPONENT.value!r}: expected {', '.join(OPPONENTS)} or a run directory")
        check_run_dir("opponent", _OPPONENT.value)
    if _CROSS_PLAY.value:
        check_cross_play(config)


def check_cross_play(config) -> None:
    """--cross_play needs a self-play run with a pool: its snapshots are most of the table."""
    if _HELDOUT.value:
        fail("--cross_play and --heldout: choose one")
    if not _CHECKPOINT.value:
        fail("--cross_play: name a self-play run with --checkpoint=RUN_DIR (its pool snapshots and learner play "
             "each other and the game's built-in players)")
    if not int(config.opponent_pool.size) and len(saved_steps(_CHECKPOINT.value)) < 2:
        fail(f"--cross_play: {config_name(sys.argv) or 'the config'} trains without an opponent pool "
             "(config.opponent_pool.size=0) and the run keeps one checkpoint: no snapshots to play; cross-play "
             "ranks a self-play run's pool or its kept checkpoints (--config.run.keep_checkpoints)")
    if _EPISODES.value < 2:
        fail(f"--episodes={_EPISODES.value}: cross-play plays each pair in both seat orders (at least 2)")


def opponent_player(trainer, spec: str, me: play.Player, trained_base: bool) -> play.Player:
    if spec in BUILTIN_PLAYERS:
        offered = tuple(getattr(trainer.env, "builtin_players", ()))
        if spec not in offered:
            fail(f"--opponent={spec!r}: {type(trainer.env).__name__}'s built-in players are "
                 f"{', '.join(offered) or 'none'}; or base, self or a run directory")
        return play.Player(spec)
    if trained_base and spec != "self":  # both seats of a match run one base
        fail(f"--opponent={spec!r}: the checkpoint trained its base (train_base); play it against "
                             "random, minimax or self")
    if spec == "base":
        return play.Player("lm", None)
    if spec == "self":  # the checkpoint in the other seat too (with seat adapters: that seat's own)
        return me
    if os.path.isdir(spec):
        lora, other_base = restore_adapter(trainer, spec, 0)
        if other_base is not None:
            fail(f"--opponent={spec!r} trained its base (train_base): it can only play random, "
                                 "minimax or itself")
        return play.Player("lm", lora)
    fail(f"--opponent={spec!r}: expected {', '.join(OPPONENTS)} or a run directory")


@main_guard
def main(argv):
    config = command_config(argv, _CONFIG.value)
    check_flags(config)
    order_cpu_collectives(config)  # a sharded base (mesh.fsdp > 1): --heldout plays sharded
    validate_lm_rl(config)
    trainer = lm_rl.make_train(config)
    if _HELDOUT.value:
        state = restore_state(trainer, _CHECKPOINT.value) if _CHECKPOINT.value else \
            jax.jit(trainer.init)(jax.random.PRNGKey(config.seed), trainer.hparams)
        result = trainers.heldout_eval(config, trainer, state)
        print(f"{_CHECKPOINT.value or 'starting model'}, held-out greedy eval: "
              + ", ".join(f"{k} {v:.4f}" for k, v in result.items()))
        return
    if _CROSS_PLAY.value:
        run_cross_play(config, trainer, _CHECKPOINT.value)
        return
    if _EXACT.value:
        run_exact(trainer, _CHECKPOINT.value)
        return
    env = trainer.env
    policy = play.with_temperature(trainer.policy, _TEMPERATURE.value)
    me, trained_base = checkpoint_players(trainer, _CHECKPOINT.value, _SLOT.value)
    base = trainer.base if trained_base is None else trained_base
    key = jax.random.PRNGKey(_SEED.value)
    if env.num_agents == 1:
        seat_games = [(0, (me[0],))]
    elif env.num_agents == 2:
        other = [opponent_player(trainer, _OPPONENT.value, me[1 - s], trained_base is not None) for s in (0, 1)]
        seat_games = [(0, (me[0], other[0])), (1, (other[1], me[1]))]
    else:
        fail(f"{config.env_name} has {env.num_agents} seats; eval.py plays one- and two-seat games")
    if _EPISODES.value < len(seat_games):
        fail(f"--episodes={_EPISODES.value}: a two-seat game plays at least one episode in each seat (2)")
    per_seat = _EPISODES.value // len(seat_games)
    name = _CHECKPOINT.value or "base model"
    print(f"{name} vs {_OPPONENT.value if env.num_agents > 1 else '(solo)'}: {per_seat} episodes per seat, "
          f"temperature {_TEMPERATURE.value}")
    totals = {}
    for seat, players in seat_games:
        match = play.make_match(env, policy, play.kinds(players), config.num_turns,
                                compiler_options=attention.compiler_options(policy.cfg.attention_backend))
        state, outcomes = match(jax.random.fold_in(key, seat), base, play.loras(players), per_seat)
        stats = play.summarize(outcomes, seat)
        for k, v in stats.items():
            totals[k] = totals.get(k, 0.0) + float(v) * per_seat
        print(f"seat {seat} ({env.agents[seat]}): " + ", ".join(f"{k} {float(v):.3f}" for k, v in stats.items()
                                                                 if k != "episodes"))
        for i in range(min(_TRANSCRIPTS.value, per_seat)):
            print(f"----- seat {seat}, episode {i}: return {float(outcomes.ret[i, seat]):+.1f} -----")
            print(env.render(state, index=i)[seat])
    n = per_seat * len(seat_games)
    print("overall: " + ", ".join(f"{k} {v / n:.3f}" for k, v in totals.items() if k != "episodes") + f" ({n} episodes)")


def checkpoint_players(trainer, run_dir: str, slot: int) -> tuple[list[play.Player], object]:
    """([the player in each seat], the run's trained base or None): `run_dir`'s latest adapters, each seat with
    the slot the run played it with (slot -1) or slot `slot` everywhere; the bare base without a run."""
    seats = range(trainer.env.num_agents)
    if not run_dir:
        return [play.Player("lm", None) for _ in seats], None
    state = restore_state(trainer, run_dir)
    lora = state.trainable["lora"]
    slots = jax.tree.leaves(lora)[0].shape[0]
    if slot >= slots:
        fail(f"--slot={slot}: {run_dir} has {slots} adapter slot{'s' * (slots > 1)} (0..{slots - 1})")
    # a frozen seat's slot (the bare base in the run) is no trained player: the learner's slot 0 plays it
    own = [int(trainer.slot_of_agent[s]) if float(trainer.agent_scale[s]) else 0 for s in seats]
    pick = [slot if slot >= 0 else own[s] for s in seats]
    return [play.Player("lm", jax.tree.map(lambda x, k=k: x[k], lora)) for k in pick], state.trainable.get("base")


def run_exact(trainer, run_dir: str) -> None:
    """--exact: the greedy player's exact rates in each seat against each built-in player, and its worst moves."""
    from jaxmarl_llm.envs.text.tic_tac_toe import TicTacToe
    from jaxmarl_llm.evaluation import tic_tac_toe_exact as exact

    env = trainer.env
    if not exact.applies(env):
        fail(f"--exact: tic-tac-toe with history=False (a position is then the whole observation); got "
             f"{type(env).__name__}" + (" with history=True" if isinstance(env, TicTacToe) else ""))
    me, trained_base = checkpoint_players(trainer, run_dir, _SLOT.value)
    base = trainer.base if trained_base is None else trained_base
    totals: dict[str, dict[str, float]] = {}
    for seat in (0, 1):
        table = exact.greedy_table(env, trainer.policy, base, me[seat].lora, seat)
        for opp in exact.OPPONENTS:
            rates = exact.exact_rates(table, seat, opp)
            totals[opp] = {k: totals.get(opp, {}).get(k, 0.0) + v / 2 for k, v in rates.items()}
            print(f"seat {seat} ({env.agents[seat]}) vs {opp}, exact: "
                  + ", ".join(f"{k} {v:.4f}" for k, v in rates.items()))
        skill = exact.tactics(table, seat)
        cost = [exact.exact_rates(exact.sharpened(table, seat, win, block), seat, "random")["loss"]
                for win, block in ((True, False), (False, True), (True, True))]
        print(f"  against random: blocks {skill['block']:.4f} of the threats it must block, completes its line "
              f"{skill['take_win']:.4f} of the times it can; its loss with every win taken {cost[0]:.4f}, "
              f"with every block made {cost[1]:.4f}, with both {cost[2]:.4f}")
        worst = exact.blunders(table, seat)
        print(f"  {len(worst)} positions where its move is not optimal; most reached against random:")
        for row in worst[:5]:
            print(f"    board {''.join('.XO'[c] for c in row['board'])} reached {row['reach']:.4f}: cell "
                  f"{[c + 1 for c in row['move']] or 'none'}, best {[c + 1 for c in row['best']]}, value "
                  f"{row['value']:+d} -> {row['after']:+d}")
    for opp, rates in totals.items():
        print(f"overall vs {opp} (half per seat), exact: " + ", ".join(f"{k} {v:.4f}" for k, v in rates.items()))


def pool_players(config, state) -> dict[str, play.Player]:
    """The learner (slot 0) and each distinct pool snapshot, newest first, named by the update after which it was
    taken; a snapshot of the current update (the learner itself) is left out, and slots never refreshed since the
    start (the initial learner) appear once, as snap@0."""
    learner = jax.tree.map(lambda x: x[0], state.trainable["lora"])
    step = int(jax.device_get(state.update_step))
    steps = cross_play.snapshot_steps(step, int(config.opponent_pool.size), int(config.opponent_pool.refresh_every))
    players = {"learner": play.Player("lm", learner)}
    for slot in sorted(range(len(steps)), key=lambda s: -steps[s]):
        if steps[slot] != step and f"snap@{steps[slot]}" not in players:
            players[f"snap@{steps[slot]}"] = play.Player("lm", jax.tree.map(lambda x: x[slot], state.pool))
    return players


def run_cross_play(config, trainer, run_dir: str) -> None:
    """Cross-play of the run's pool, kept checkpoints, learner and built-in players; the table and ratings printed
    and written."""
    states = restore_states(trainer, run_dir, sorted(saved_steps(run_dir), reverse=True))
    _, state = next(states)  # the latest: its learner and pool (the learner alone without a pool)
    env = trainer.env
    players = pool_players(config, state)
    # the learner of each earlier kept checkpoint, newest first
    players.update({f"ckpt@{step}": play.Player("lm", jax.tree.map(lambda x: x[0], earlier.trainable["lora"]))
                    for step, earlier in states})
    offered = tuple(getattr(env, "builtin_players", ())) if hasattr(env, "opponent_action") else ()
    players.update({kind: play.Player(kind) for kind in offered})
    base = state.trainable.get("base", trainer.base)  # a trained base (train_base) is every LM player's
    policy = play.with_temperature(trainer.policy, _TEMPERATURE.value)
    print(f"cross-play of {', '.join(players)}: {_EPISODES.value // 2 * 2} games per pair (half in each seat "
          f"order), temperature {_TEMPERATURE.value}")
    results = cross_play.cross_play(env, policy, base, players, config.num_turns, _EPISODES.value,
                                    jax.random.PRNGKey(_SEED.value), include_self=False,
                                    compiler_options=attention.compiler_options(policy.cfg.attention_backend),
                                    log=print)
    elo = cross_play.ratings(results)
    print("mean return of the row player against the column (Bradley-Terry Elo, "
          + ("random = 1000" if "random" in players else "mean 1000") + "):")
    print(cross_play.table_text(results, elo))
    written = (cross_play.write_csv(results, os.path.join(run_dir, "cross_play.csv")),
               cross_play.write_ratings(results, elo, os.path.join(run_dir, "ratings.csv")),
               cross_play.plot_scores(results, elo, os.path.join(run_dir, "cross_play.png"),
                                      f"{config.env_name}: {os.path.basename(os.path.abspath(run_dir))}"))
    print("wrote " + ", ".join(written))


def run() -> None:
    """The command (`jaxmarl-eval`, experiments/eval.py): a config key the file lacks is named before flags parse."""
    check_overrides(sys.argv)
    run_program(main)
