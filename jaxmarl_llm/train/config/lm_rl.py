"""Schema and start-up checks of LM agents trained by RL on a token game (train/lm_rl.py).

The model / lora / sampling / run groups here are also the SFT and DPO defaults' (config/sft.py, config/dpo.py).
"""

from __future__ import annotations

import typing

import ml_collections

from jaxmarl_llm.algos.lm_objective import ALGORITHMS, CREDITS, algo_names, registry_key
from jaxmarl_llm.algos.masked import Aggregation
from jaxmarl_llm.envs.text.base import BUILTIN_PLAYERS
from jaxmarl_llm.evaluation.exploitability import AVERAGE_WEIGHTS
from jaxmarl_llm.tokenizers import TOKEN_SETS
from jaxmarl_llm.train.config.common import (ConfigError, _require, check_env_name, check_eval_episodes, check_keys,
                                             check_fsdp, check_mesh, check_model_checkpoint, check_one_update, check_positive,
                                             check_positive_ints, check_run, check_stop, stop_defaults,
                                             wandb_defaults)


def parse_agent_map(value) -> dict[int, str]:
    """`scripted_agents` as {agent index: kind}, from "1:minimax,0:random" or a mapping."""
    if not value:
        return {}
    if isinstance(value, str):
        items = [part.split(":", 1) for part in value.replace(" ", "").split(",") if part]
        if any(len(kv) != 2 for kv in items):
            raise ValueError(f"expected 'index:kind[,index:kind]', got {value!r}")
        return {int(k): v for k, v in items}
    return {int(k): str(v) for k, v in dict(value).items()}


def lm_rl_defaults() -> ml_collections.ConfigDict:
    """LM agents on a token game: a tiny random model by default, a checkpoint folder when given."""
    c = ml_collections.ConfigDict()
    c.trainer = "lm_rl"
    c.env_name = "text/guess_number"
    c.env_kwargs = ml_collections.ConfigDict({})
    c.tokenizer = "char"  # "char" / "word" (built-in; "word" is built from the env's texts) or a local HF tokenizer folder
    c.model = ml_collections.ConfigDict(
        {
            "checkpoint": "",  # a local HF folder (config.json + safetensors); "" = random tiny model below
            # a real architecture with random weights (models/config.py PRESETS: qwen3-0.6b, qwen3-1.7b,
            # qwen2.5-0.5b, llama-3.2-1b, qwen3-8b), its vocabulary included; the sizes below are then ignored
            "preset": "",
            "dtype": "float32",
            "family": "qwen3",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_layers": 2,
            "num_heads": 4,
            "num_kv_heads": 2,
            "head_dim": 16,
            "max_position_embeddings": 4096,
            "init_seed": 0,
            "init_std": 0.1,
            # the rotary base of the random model (0: its family's, 1e6 for qwen3); with 16-wide heads 1e6 leaves
            # half the frequencies turning less than once in 1000 positions, 1e4 spreads them over short offsets
            "rope_theta": 0.0,
            # the output head is the input embedding (as Qwen3-0.6B / 1.7B): what a role learns about a word's
            # embedding shapes the logits of writing it (twenty questions: the answerer's word knowledge steers
            # the questioner's guesses)
            "tie_embeddings": False,
            # "xla" (reference), "pallas" (flash / decode kernels; interpret mode on CPU), "cudnn", "auto" (the
            # platform's best): docs/attention.md. Block sizes 0 = the platform's default.
            "attention_backend": "xla",
            "attention_block_q": 0,
            "attention_block_k": 0,
            # "on": rematerialise each layer in the loss's backward (one more forward, ~19x less kept activation
            # at Qwen3 sizes); "auto": only where the run's memory plan would not fit the device without it
            "remat": "off",
        }
    )
    # lr_ratio: LoRA+ (Hayou et al. 2024), the B matrices' lr over A's (1 = plain LoRA; the paper uses ~16)
    c.lora = ml_collections.ConfigDict({"rank": 16, "alpha": 32.0, "targets": ("q", "k", "v", "o", "gate", "up", "down"),
                                        "lr_ratio": 1.0})
    c.sampling = ml_collections.ConfigDict({"temperature": 1.0, "top_k": 0, "top_p": 1.0})
    # how a reply is produced (policies/candidates.py): "free" text; "constrained" decoding that can only spell one
    # of the env's valid replies (a prefix trie); "scored": one forward scores every valid reply and the action is
    # drawn from the softmax over them (length_normalize: mean token log-prob, TWOSOME). Needs an env that lists
    # its replies (env.action_candidates: MPE moves, tic-tac-toe cells, guess-the-number guesses).
    c.policy = ml_collections.ConfigDict({"actions": "free", "length_normalize": False})
    # incremental: on token games each seat keeps its KV cache across turns (reads only new tokens, `chunk`
    # at a time) and an episode is scored in one forward over its final transcript; False re-reads the whole
    # transcript every turn (the reference path; envs whose observations are not growing transcripts use it)
    # (the loss forward runs at the narrowest of min_score_width x 1, 2, 4, ... or the capacity that fits)
    # row_buckets (re-read): the loss forward reads the fewest of R/b, 2R/b, ..., R of its R (turn, env) rows
    # that holds every row with something to learn, so ended games cost nothing (b forward/backward programs
    # compiled; 1: every row)
    c.rollout = ml_collections.ConfigDict({"incremental": True, "chunk": 64, "min_score_width": 128,
                                           "row_buckets": 1})
    c.algo = "grpo"  # "ppo" (value head + GAE over turns), "grpo", "rloo", "rae" (per-role running baselines)
    # PPO's critic: "ippo" = a value head on each seat's own adapter trunk; "mappo" = one centralized critic,
    # an MLP (hidden units below) over every seat's transcript summary; "world_state" = that MLP over the env's
    # world state (MPE: positions and velocities, as the MLP job's MAPPO critic) (policies/central_critic.py)
    # lr: > 0 gives the critic (or the value heads) its own Adam at this learning rate (0: one Adam, config.lr)
    # value_norm: the critic learns returns normalised by running statistics (MAPPO's ValueNorm, algos/value_norm.py)
    c.critic = ml_collections.ConfigDict({"kind": "ippo", "hidden": 256, "lr": 0.0, "value_norm": False})
    # PPO's credit: "turn" = GAE over the seat's turns, every token of a turn gets its turn's advantage;
    # "token" = GAE over generated tokens (turn reward on the turn's last token, a value per token; gamma per
    # token); "token_by_turn" = the same with gamma only between turns (a reply's tokens undiscounted)
    c.credit = "turn"
    c.clip_value = False  # PPO value clipping (by clip_eps) around the values the advantages used
    # one adapter for every learning agent, or one per agent (with an opponent pool: one per seat, the loss
    # scoring each episode with its learner seat's adapter)
    c.share_policy = True
    # True: every weight of the model learns too, not only the adapters (a tiny model from scratch); the base is
    # shared by the learning seats, and the KL reference is the initial model. Float32 copy + Adam: 3x its memory
    c.train_base = False
    # agent index -> adapter slot, e.g. (0, 0, 0, 1): tag's predators share adapter 0, the prey has adapter 1
    # (roles on one base); () = share_policy decides
    c.adapter_of_agent = ()
    c.frozen_agents = ()  # agent indices played by the bare base model and never trained
    # agent index -> the game's built-in player (tic-tac-toe: "random" | "minimax" | "tactician"), e.g. "1:minimax";
    # never trained
    c.scripted_agents = ""
    # self-play against P frozen snapshots of the learner (0 = off); the oldest is replaced every K updates.
    # random / minimax / tactician / equilibrium: the share of groups whose opponent is that built-in player instead
    # of a snapshot (a league: the rest face snapshots)
    # seat_weights: how often the learner takes each seat, e.g. (1, 2): O in two games of three (() = uniform)
    c.opponent_pool = ml_collections.ConfigDict({"size": 0, "refresh_every": 10, "random": 0.0, "minimax": 0.0,
                                                 "tactician": 0.0, "equilibrium": 0.0,
                                                 "seat_weights": ()})
    c.seed = 0
    c.num_envs = 16  # episodes per update
    c.group_size = 4  # envs sharing a seed (GRPO/RLOO groups); 1 for PPO
    c.num_turns = 10  # turns per episode in the rollout (>= the game's turn limit)
    c.total_episodes = 1600
    c.update_epochs = 1
    c.num_minibatches = 1
    # gradient accumulation: each minibatch's forward/backward runs over this many slices of its episodes
    # in turn (same gradient, activation memory / num_microbatches; costs one extra forward). "auto": the
    # smallest that the memory plan (train/lm/memory.py) fits in mesh.device_memory_gib (0: the device's own)
    c.num_microbatches = ml_collections.FieldReference(1, field_type=object)
    c.lr = 1e-3
    c.anneal_lr = False  # True: lr falls linearly to 0 over the run's updates (PPO's schedule, as the MLP job)
    c.clip_eps = 0.2
    c.ent_coef = 0.0
    # None: the entropy bonus stays ent_coef; a number: it moves linearly from ent_coef (first update) to this (last),
    # e.g. to let a regularised self-play run (mmd) settle nearer the unregularised equilibrium at the end
    c.ent_coef_end = ml_collections.config_dict.placeholder(float)
    # the generated tokens the entropy bonus counts: "all", or a set of tokenizers.TOKEN_SETS ("digits": only the
    # digits of a reply, the move it names, each the entropy of the choice among the digits, so a bonus large
    # enough to keep the choice exploring moves no probability into the reply's format)
    c.entropy_tokens = "all"
    # None: the bonus always pays; a number: no bonus in a minibatch whose mean entropy (of the tokens it counts) is
    # at or above this, so a policy whose replies all broke their format (every return equal, no advantage) is not
    # carried on by the bonus alone to uniform noise, from which no reply earns anything to come back by
    c.entropy_max = ml_collections.config_dict.placeholder(float)
    c.vf_coef = 0.5
    c.kl_coef = 0.0
    c.kl_estimator = "k3"
    # algo="mmd": how far the magnet (the KL's reference) moves toward the learner after each update, in adapter
    # weights (0: a fixed magnet, the initial adapters)
    c.magnet_rate = 0.05
    c.gamma = 1.0
    c.gae_lambda = 0.95
    c.max_grad_norm = 1.0
    # None: no bound; a number: each update's policy step is scaled back until its KL (rollout policy || stepped
    # policy, on the batch's tokens) is about this (train/lm/step_bound.py; one more forward an update). One
    # minibatch of one epoch has no trust region (PPO's clip acts from the second step): a step can move a free-text
    # reply's structure and break every episode's format at once
    c.max_step_kl = ml_collections.config_dict.placeholder(float)
    c.grpo_normalize_std = True  # False: Dr.GRPO advantages
    c.rae_decay = 0.95  # RAE: each role's baseline moves (1 - rae_decay) of the way to the batch's mean return
    # how GRPO / RAE sum token losses: "token", "sequence", "sequence_sum", "constant" (Dr.GRPO) (algos/grpo.py)
    c.loss_aggregation = "sequence"
    c.eval_episodes = 0  # greedy episodes on the held-out split after training (0 = skip; evaluation/evaluate.py)
    # greedy games against the game's built-in players inside the compiled update, after update 1 and every
    # `every` updates (0 = off), half of `episodes` in each seat: metrics eval/<opponent>_<win|draw|loss> (and per
    # seat), NaN in the rows between; the same games as experiments/eval.py --episodes --seed (evaluation/play.py)
    # average (poker): also evaluate the average policy of the evaluated iterates, "uniform" or "linear" in the
    # update step (evaluation/exploitability.py AVERAGE_WEIGHTS); "none" = the last iterate only; average_from:
    # only the iterates evaluated at this update (as numbered in metrics.csv) or later count (uniform play before)
    # average_every: an iterate joins the average every this many updates (its policy table alone, no games),
    # not only at evaluations (0 = at each evaluation)
    # cross_play (self-play with a pool): also every pair among the learner, its snapshots (snap1 = the newest) and
    # `opponents`, this many games a pair (half per seat order), sampled at cross_play_temperature: a Bradley-Terry
    # Elo per player, eval/rating/<name> (random = 1000), and eval/xplay/<row>/<col> (mean return); 0 = off
    # exact (tic-tac-toe with history=False): also the greedy policy's exact rates against random and minimax from
    # its move at every position, eval/exact_<opponent>_<win|draw|loss> (and per seat) (evaluation/tic_tac_toe_exact.py)
    c.in_graph_eval = ml_collections.ConfigDict({"every": 0, "episodes": 400, "opponents": ("random", "minimax"),
                                                 "seed": 0, "average": "none", "average_from": 0, "average_every": 0,
                                                 "cross_play": 0,
                                                 "cross_play_temperature": 1.0, "exact": False})
    # stability guards (run/runner.py Guard): warn once, with the update number, when the policy's entropy falls
    # below min_entropy or its KL to the reference (adapters off) rises above max_kl_ref; 0 = off. max_kl_ref > 0
    # scores the reference even at kl_coef=0 (one more forward per minibatch)
    c.guard = ml_collections.ConfigDict({"min_entropy": 0.0, "max_kl_ref": 0.0})
    # divergence bounds (run/runner.py; config/common.py STOP_METRICS), 0 = off: past one the run stops before
    # saving that chunk, keeps the last good checkpoint and exits with status 3. max_kl reads approx_kl (not RLOO's:
    # no ratio), max_value_loss value_loss (PPO); max_param_norm_growth: the adapters' + heads' norm over its start
    c.stop = stop_defaults()
    # fsdp: shard the frozen base's weights over this many devices (a base that does not fit one device): the mesh
    # is num_devices / fsdp data rows x fsdp; each forward gathers a layer at a time (parallel/mesh.py). 1 = every
    # device holds the whole base (plain data parallel)
    # device_memory_gib: the memory one device may use (0: detected: an accelerator's limit, a CPU's share of RAM);
    # a run whose memory plan exceeds it is refused at start-up with the setting that would fit
    c.mesh = ml_collections.ConfigDict({"num_devices": 0, "fsdp": 1, "device_memory_gib": 0.0})
    # overwrite: True lets a fresh run delete the earlier run's checkpoints and metrics in out_dir (else refused);
    # plots: `title` (the train command sets the config file and variant), `references` {label: value} dashed on
    # the learning curve, `eval_targets` {eval metric: value} on the evaluation curves;
    # transcripts: `transcript_episodes` of the episodes of update 1 and of every `transcripts_every`-th update
    # (0 = none), as training sampled them, to transcripts.jsonl, TensorBoard's text tab and transcripts.html;
    # wandb: also log to Weights & Biases (pip install wandb; `wandb_mode` "auto" is online when WANDB_API_KEY
    # is set, else offline: `wandb sync <out_dir>/wandb/offline-run-*` uploads it later);
    # keep_best: a metric (e.g. "eval/solved"): the state at its best chunk end (keep_best_mode "max" or "min") is
    # also kept, in <out_dir>/best/ (run/checkpoints.py BestCheckpoint; experiments/branch.py --at=best)
    c.run = ml_collections.ConfigDict(
        {"out_dir": "runs/lm", "updates_per_chunk": 5, "checkpoint_every": 5, "keep_checkpoints": 2,
         "keep_best": "", "keep_best_mode": "max", "overwrite": False, "tensorboard": True, "plot": True,
         "progress": True, "title": "", "references": {}, "eval_targets": {}, "transcripts_every": 100,
         "transcript_episodes": 4,
         **wandb_defaults()}
    )
    c.resume = ""
    c.resume_force = False  # True: resume even when this config differs from the run's config.json
    return c


def _one_of(names: tuple[str, ...]) -> str:
    """("ppo", "grpo", "rloo") -> "ppo, grpo or rloo"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def validate_lm_rl(config: ml_collections.ConfigDict) -> None:
    """Raise ConfigError naming the first key that cannot work."""
    check_keys(config, lm_rl_defaults())
    check_env_name(config)
    _require(config.algo in algo_names(), "algo", f"must be {_one_of(algo_names())}, got {config.algo!r}")
    check_positive_ints(config, ("num_envs", "num_turns", "update_epochs", "num_minibatches", "group_size",
                                 "total_episodes"))
    if config.num_microbatches != "auto":
        check_positive_ints(config, ("num_microbatches",))
    _require(config.model.get("remat", "off") in ("off", "on", "auto"), "model.remat",
             f"must be 'off', 'on' or 'auto', got {config.model.get('remat')!r}")
    _require(isinstance(config.mesh.device_memory_gib, (int, float)) and config.mesh.device_memory_gib >= 0,
             "mesh.device_memory_gib", f"must be >= 0 (0: detect), got {config.mesh.device_memory_gib!r}")
    check_positive_ints(config.rollout, ("chunk", "min_score_width", "row_buckets"), prefix="rollout.")
    critic = ALGORITHMS[config.algo].critic
    _require(isinstance(config.magnet_rate, (int, float)) and 0.0 <= config.magnet_rate <= 1.0, "magnet_rate",
             f"must be in [0, 1], got {config.magnet_rate!r}")
    _require(not ALGORITHMS[config.algo].magnet or config.kl_coef > 0, "kl_coef",
             f"{config.algo} pulls the policy toward its magnet by kl_coef: set kl_coef > 0 (e.g. 0.1)")
    _require(not ALGORITHMS[config.algo].magnet or not config.train_base, "train_base",
             f"{config.algo}'s magnet is an adapter: use train_base=False")
    _require(not ALGORITHMS[config.algo].groups or config.group_size > 1, "group_size",
             f"{config.algo} compares the episodes of a group: it needs groups of at least 2")
    _require(config.entropy_tokens in ("all", *TOKEN_SETS), "entropy_tokens",
             f"must be {_one_of(('all', *TOKEN_SETS))}, got {config.entropy_tokens!r}")
    _require(config.get("ent_coef_end") is None or (isinstance(config.ent_coef_end, (int, float))
                                                      and config.ent_coef_end >= 0), "ent_coef_end",
             f"must be a number >= 0 or None (constant ent_coef), got {config.get('ent_coef_end')!r}")
    _require(config.get("entropy_max") is None or (isinstance(config.entropy_max, (int, float))
                                                     and config.entropy_max > 0), "entropy_max",
             f"must be a number > 0 or None (no cap), got {config.get('entropy_max')!r}")
    _require(config.get("max_step_kl") is None or (isinstance(config.max_step_kl, (int, float))
                                                    and config.max_step_kl > 0), "max_step_kl",
             f"must be a number > 0 or None (no bound), got {config.get('max_step_kl')!r}")
    _require(isinstance(config.rae_decay, (int, float)) and 0.0 <= config.rae_decay < 1.0, "rae_decay",
             f"must be in [0, 1), got {config.rae_decay!r}")
    _require(config.critic.kind in ("ippo", "mappo", "world_state"), "critic.kind",
             f"must be 'ippo', 'mappo' or 'world_state', got {config.critic.kind!r}")
    _require(config.critic.kind == "ippo" or critic, "critic.kind",
             f"a centralized critic is for algo='ppo' ({config.algo} has no critic)")
    _require(config.credit in CREDITS, "credit", f"must be one of {', '.join(CREDITS)}, got {config.credit!r}")
    _require(config.credit == "turn" or (registry_key(config.algo, config.credit) in ALGORITHMS
                                         and config.critic.kind == "ippo"), "credit",
             "token-level credit is PPO with per-seat value heads (algo='ppo', critic.kind='ippo')")
    check_positive_ints(config.critic, ("hidden",), prefix="critic.")
    check_positive(config, ("lr", "max_grad_norm"))
    _require(isinstance(config.critic.lr, (int, float)) and config.critic.lr >= 0, "critic.lr",
             f"must be a learning rate > 0, or 0 for the policy's lr, got {config.critic.lr!r}")
    _require(config.critic.lr == 0 or critic, "critic.lr", f"{config.algo} has no critic to give a learning rate")
    _require(not config.critic.value_norm or critic, "critic.value_norm", f"{config.algo} has no critic to normalise")
    _require(not config.critic.value_norm or config.credit == "turn", "critic.value_norm",
             "is for turn-level credit (credit='turn'); token-level values are not normalised")
    check_mesh(config, "num_envs", per_device=config.group_size, why=lambda n_dev: (
        f"{config.num_envs} must be a multiple of num_devices x group_size = {n_dev} x {config.group_size}"))
    check_one_update(config)
    _require(config.kl_estimator in ("k1", "k2", "k3"), "kl_estimator", "must be k1, k2 or k3")
    _require(config.loss_aggregation in typing.get_args(Aggregation), "loss_aggregation",
             f"must be one of {typing.get_args(Aggregation)}, got {config.loss_aggregation!r}")
    _check_seats(config)
    only_builtins = sum(config.opponent_pool.get(kind, 0.0) for kind in BUILTIN_PLAYERS) >= 1.0 - 1e-6
    _require(not config.train_base or (not config.frozen_agents and (config.opponent_pool.size == 0 or only_builtins)),
             "train_base", "frozen seats and snapshot pools play the untrained base; use train_base=False with "
             "them (a league of built-in players only, shares summing to 1, is fine)")
    check_fsdp(config)
    _check_actions(config)
    check_eval_episodes(config)
    _check_in_graph_eval(config)
    for key in ("min_entropy", "max_kl_ref"):
        _require(isinstance(config.guard[key], (int, float)) and config.guard[key] >= 0, f"guard.{key}",
                 f"must be a number >= 0 (0 = off), got {config.guard[key]!r}")
    check_stop(config)
    _require(config.stop.max_value_loss == 0 or critic, "stop.max_value_loss",
             f"{config.algo} has no critic and logs no value_loss; set it to 0 (or use algo='ppo')")
    _require(config.stop.max_kl == 0 or config.algo != "rloo", "stop.max_kl",
             "rloo has no old-vs-new ratio and logs no approx_kl; set it to 0 (guard.max_kl_ref warns on the KL to "
             "the reference)")
    check_run(config)
    check_model_checkpoint(config)


def _check_seats(config: ml_collections.ConfigDict) -> None:
    """scripted_agents parses to known built-in players; the snapshot pool is self-play of one shared policy."""
    try:
        kinds = parse_agent_map(config.scripted_agents)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config.scripted_agents: {err}; write e.g. '1:minimax'") from None
    for agent, kind in kinds.items():
        _require(kind in BUILTIN_PLAYERS, "scripted_agents",
                 f"agent {agent}: kind must be one of {', '.join(BUILTIN_PLAYERS)}, got {kind!r}")
    pool = config.opponent_pool
    _require(isinstance(pool.size, int) and pool.size >= 0, "opponent_pool.size", f"must be an integer >= 0, got {pool.size!r}")
    check_positive_ints(pool, ("refresh_every",), prefix="opponent_pool.")
    for kind in BUILTIN_PLAYERS:
        share = pool.get(kind, 0.0)
        _require(isinstance(share, (int, float)) and 0.0 <= share <= 1.0, f"opponent_pool.{kind}",
                 f"must be a share of groups in [0, 1], got {share!r}")
        _require(share == 0 or pool.size > 0, f"opponent_pool.{kind}",
                 "built-in opponents mix into a snapshot pool: set opponent_pool.size >= 1 (or use scripted_agents)")
    weights = tuple(pool.get("seat_weights", ()))
    _require(not weights or (pool.size > 0 and all(isinstance(w, (int, float)) and w >= 0 for w in weights)
                             and sum(weights) > 0), "opponent_pool.seat_weights",
             f"weights >= 0, not all 0, with a pool (opponent_pool.size >= 1) drawing the learner's seat; got {weights}")
    _require(sum(pool.get(kind, 0.0) for kind in BUILTIN_PLAYERS) <= 1.0, "opponent_pool.random",
             "the built-in players' shares (" + " + ".join(f"opponent_pool.{k}" for k in BUILTIN_PLAYERS)
             + f") must be at most 1, got {' + '.join(str(pool.get(k, 0.0)) for k in BUILTIN_PLAYERS)}")


def _check_in_graph_eval(config: ml_collections.ConfigDict) -> None:
    ev = config.in_graph_eval
    _require(isinstance(ev.every, int) and ev.every >= 0, "in_graph_eval.every",
             f"must be an integer >= 0 (0 = off), got {ev.every!r}")
    if ev.every:
        # >= 1 (a one-seat task: guess the number's 205 held-out secrets); a game of two seats wants an even
        # number, half in each seat (train/lm/seats.py checks it against the env)
        _require(isinstance(ev.episodes, int) and ev.episodes >= 1, "in_graph_eval.episodes",
                 f"must be an integer >= 1, got {ev.episodes!r}")
        _require(len(ev.opponents) > 0 and all(o in BUILTIN_PLAYERS for o in ev.opponents), "in_graph_eval.opponents",
                 f"must name built-in players among {BUILTIN_PLAYERS}, got {tuple(ev.opponents)!r}")
    average = ev.get("average", "none")
    _require(average in ("none", *AVERAGE_WEIGHTS), "in_graph_eval.average",
             f"must be one of {('none', *AVERAGE_WEIGHTS)}, got {average!r}")
    _require(average == "none" or ev.every, "in_graph_eval.average",
             "averages the evaluated iterates: set in_graph_eval.every > 0 too")
    start = ev.get("average_from", 0)
    _require(isinstance(start, int) and start >= 0, "in_graph_eval.average_from",
             f"must be an update number >= 0, got {start!r}")
    every = ev.get("average_every", 0)
    _require(isinstance(every, int) and every >= 0, "in_graph_eval.average_every",
             f"must be a number of updates >= 0 (0 = at each evaluation), got {every!r}")
    games = ev.get("cross_play", 0)
    _require(isinstance(games, int) and games >= 0 and games % 2 == 0, "in_graph_eval.cross_play",
             f"must be an even number of games per pair (half in each seat order), 0 = off; got {games!r}")
    _require(not games or (ev.every and config.opponent_pool.size >= 1), "in_graph_eval.cross_play",
             "plays the learner against its pool's snapshots at each evaluation: set in_graph_eval.every > 0 and "
             "opponent_pool.size >= 1")
    _require(not games or not config.train_base, "in_graph_eval.cross_play",
             "the snapshots keep adapters, not the trained base (train_base=True): set it to 0")
    _require(isinstance(ev.get("exact", False), bool), "in_graph_eval.exact", f"True or False, got {ev.get('exact')!r}")
    _require(not ev.get("exact", False) or ev.every, "in_graph_eval.exact",
             "adds exact rates to each in-graph evaluation: set in_graph_eval.every > 0 too")
    temperature = ev.get("cross_play_temperature", 1.0)
    _require(isinstance(temperature, (int, float)) and temperature >= 0, "in_graph_eval.cross_play_temperature",
             f"must be >= 0 (0 = greedy), got {temperature!r}")
    best = str(config.run.get("keep_best", ""))
    chunk = config.run.updates_per_chunk  # (a chunk that is no count: check_run says so)
    if best.startswith("eval/") and isinstance(chunk, int) and chunk > 0:  # an evaluated state is saved only at
        # a chunk's end
        _require(ev.every and ev.every % chunk == 0, "run.keep_best",
                 f"{best} is played every in_graph_eval.every={ev.every} updates; keeping its best needs "
                 f"evaluations at chunk ends: set in_graph_eval.every to a multiple of run.updates_per_chunk "
                 f"({chunk})")


def _check_actions(config) -> None:
    from jaxmarl_llm.policies.candidates import ACTION_MODES

    actions = config.policy.actions
    _require(actions in ACTION_MODES, "policy.actions", f"must be {_one_of(ACTION_MODES)}, got {actions!r}")
    if actions != "free":
        _require(config.sampling.top_k == 0 and config.sampling.top_p == 1.0, "sampling.top_k",
                 f"top-k / top-p filter free text; with policy.actions={actions!r} the choice is among the valid "
                 "replies already: leave sampling.top_k=0 and sampling.top_p=1.0")
    _require(not (actions == "scored" and config.credit != "turn"), "credit",
             "a scored reply is one choice, not a sequence of tokens: use credit='turn' with policy.actions='scored'")
