"""A resume must continue the same run: each run records its config in `<run dir>/config.json`.

A resumed run restores the runner state (adapters, optimizer, envs) but reads everything else (the base model
folder, lr, env, ...) from the current config. Nothing stopped a resume from silently mixing two runs: a different
base model of the same shapes, another lr or env. So a run writes its resolved config (plus a fingerprint of the
base model folder) when it starts, and a resume compares it with the current config before touching a file.
The budget, `run.*`, `stop.*` and the resume flags may change between the two; anything else refuses the resume,
unless `resume_force=True` (then the differences are a warning).

config.json stays what the run was started with. A resume that changes anything (a forced lr, a longer budget)
appends, once its checkpoint has been restored, a line to `config_history.jsonl`: the update it continued from,
what changed and the whole config from then on; the next resume is compared with that latest config. So a failed
forced resume changes no file, and every update's settings can be read back.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from typing import Any

from jaxmarl_llm.errors import ConfigError

CONFIG_FILE = "config.json"  # in the run directory (a HF model's config.json lives in model/ or elsewhere)
HISTORY_FILE = "config_history.jsonl"  # one line per resume that changed the config
FINGERPRINT_KEY = "_model_fingerprint"
# top-level keys a resume may change: how long to train (budget), how to log and save (run.*), the resume itself,
# the held-out evaluation after training and the divergence bounds (stop.*): none of them touches the trained state
RESUMABLE_KEYS = frozenset({"resume", "resume_force", "run", "total_episodes", "total_updates", "total_timesteps",
                            "eval_episodes", "stop"})
# keys added after runs were recorded, with the value every run before them had: a config.json without the key is
# the same run as a config holding that value (an older run resumes without resume_force)
LATER_DEFAULTS = {"mesh.fsdp": 1, "lora.lr_ratio": 1.0, "critic.value_norm": False, "train_base": False,
                  "target_agents": [], "model.tie_embeddings": False, "model.attention_backend": "xla",
                  "model.attention_block_q": 0, "model.attention_block_k": 0, "model.remat": "off",
                  "model.rope_theta": 0.0, "teacher": "expert",
                  "opponent_pool.seat_weights": [], "opponent_pool.equilibrium": 0.0,
                  "in_graph_eval.average": "none", "in_graph_eval.average_from": 0, "in_graph_eval.average_every": 0,
                  "ent_coef_end": None, "entropy_max": None, "max_step_kl": None,
                  "in_graph_eval.cross_play": 0, "in_graph_eval.cross_play_temperature": 1.0,
                  "env_kwargs.sizes": [1024], "env_kwargs.say_range": False,
                  "env_kwargs.bonus": "found", "env_kwargs.guess_last": False, "env_kwargs.padded": False,
                  "env_kwargs.result_field": False,
                  "entropy_tokens": "all", "opponent_pool.tactician": 0.0, "rollout.row_buckets": 1}
HASHED_FILES = ("config.json", "model.safetensors.index.json")  # small files whose content defines the model
SAMPLES, SAMPLE_BYTES = 16, 1 << 16  # safetensors data: 16 evenly spaced 64 KiB samples (all of it under 1 MiB)
SHOWN = 5  # differing keys named in a message


def model_fingerprint(folder: str) -> dict[str, dict[str, Any]]:
    """What identifies a base model folder without reading it whole: {file: {"bytes": size[, "sha256": hex]}}.

    Every (non-hidden) file's size; the sha256 of config.json and the shard index; and for each safetensors file
    the sha256 of its header (8 length bytes + JSON: names, shapes, dtypes, offsets) and of evenly spaced samples
    of its tensor data. The header alone is the same for two models of the same shapes (e.g. two init seeds),
    the samples tell them apart; reading ~1 MiB per file keeps this instant for a multi-GB model."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        entry: dict[str, Any] = {"bytes": os.path.getsize(path)}
        if name in HASHED_FILES:
            with open(path, "rb") as f:
                entry["sha256"] = hashlib.sha256(f.read()).hexdigest()
        elif name.endswith(".safetensors"):
            entry["sha256"] = safetensors_digest(path)
        out[name] = entry
    return out


def safetensors_digest(path: str) -> str:
    """sha256 of a safetensors file's header (the little-endian u64 length + the JSON) and of SAMPLES evenly spaced
    SAMPLE_BYTES-long pieces of its tensor data (the whole data when it is shorter than those pieces together)."""
    size = os.path.getsize(path)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        prefix = f.read(8)
        header_len = int.from_bytes(prefix, "little") if len(prefix) == 8 else size
        start = 8 + header_len if 8 + header_len <= size else 0  # not a safetensors header: sample the whole file
        if start:
            digest.update(prefix + f.read(header_len))
        data = size - start
        if data <= SAMPLES * SAMPLE_BYTES:
            f.seek(start)
            digest.update(f.read(data))
        else:
            for i in range(SAMPLES):  # the first and the last piece included
                f.seek(start + i * (data - SAMPLE_BYTES) // (SAMPLES - 1))
                digest.update(f.read(SAMPLE_BYTES))
    return digest.hexdigest()


def run_record(config) -> dict[str, Any]:
    """The resolved config as JSON values (tuples -> lists, anything else non-JSON -> str) plus, when
    `model.checkpoint` names a folder, its fingerprint under FINGERPRINT_KEY: what config.json holds."""
    record = json.loads(json.dumps(config.to_dict(), default=str))
    model = config.get("model")
    checkpoint = model.get("checkpoint", "") if model is not None else ""
    if checkpoint and os.path.isdir(checkpoint):
        record[FINGERPRINT_KEY] = model_fingerprint(checkpoint)
    return record


def write_run_record(out_dir: str, record: dict[str, Any]) -> None:
    """Write config.json atomically (a kill leaves the old file or the new one, never half of one)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, CONFIG_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(path + ".tmp", path)


def read_run_record(out_dir: str) -> dict[str, Any] | None:
    """The run's config.json; None when absent (a run from before config.json was recorded).
    ValueError when it is not a JSON object."""
    path = os.path.join(out_dir, CONFIG_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        record = json.load(f)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


def read_history(out_dir: str) -> list[dict[str, Any]]:
    """config_history.jsonl's entries, oldest first ([] when absent); a line a kill tore is skipped."""
    path = os.path.join(out_dir, HISTORY_FILE)
    if not os.path.exists(path):
        return []
    entries = []
    with open(path) as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("config"), dict):
                entries.append(entry)
    return entries


def current_record(out_dir: str) -> dict[str, Any] | None:
    """The config the run continues with now: the latest history entry's, else config.json's (None: neither).
    ValueError when config.json is needed and is not a JSON object."""
    history = read_history(out_dir)
    return history[-1]["config"] if history else read_run_record(out_dir)


def record_resume(out_dir: str, record: dict[str, Any], update: int) -> list[str]:
    """After a resume restored `update`: append the change of config to the history (nothing when `record` equals
    the current one in every key but the resume flags); a run without a readable config.json gets one. Returns
    the changes."""
    try:
        saved = current_record(out_dir)
    except (OSError, ValueError):
        saved = None
    if saved is None:
        write_run_record(out_dir, record)
        return []
    changes = config_differences(saved, record, skip=frozenset({"resume", "resume_force"}))
    if changes:
        entry = {"update": update, "time": time.strftime("%Y-%m-%d %H:%M:%S"), "changes": changes, "config": record}
        with open(os.path.join(out_dir, HISTORY_FILE), "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())
    return changes


def config_differences(saved: dict[str, Any], now: dict[str, Any],
                       skip: frozenset[str] = RESUMABLE_KEYS) -> list[str]:
    """`key: saved -> now` for every leaf that differs, except RESUMABLE_KEYS; in `now`'s order, then the keys only
    `saved` has (`skip`: top-level keys left out). When both records fingerprint their base model, the folders' content is compared
    (`model.checkpoint/<file>.<bytes|sha256>`) instead of their paths: a moved folder is the same model."""
    saved, now = dict(saved), dict(now)
    saved_fp, now_fp = saved.pop(FINGERPRINT_KEY, None), now.pop(FINGERPRINT_KEY, None)
    flat_saved, flat_now = flatten(saved), flatten(now)
    if saved_fp is not None and now_fp is not None:
        for flat, fingerprint in ((flat_saved, saved_fp), (flat_now, now_fp)):
            flat.pop("model.checkpoint", None)
            flat.update({f"model.checkpoint/{key}": value for key, value in flatten(fingerprint).items()})
    keys = list(flat_now) + [key for key in flat_saved if key not in flat_now]
    missing = object()
    out = []
    for key in keys:
        if key.split(".", 1)[0].split("/", 1)[0] in skip:
            continue
        a, b = flat_saved.get(key, missing), flat_now.get(key, missing)
        if a is missing and key in LATER_DEFAULTS:
            a = LATER_DEFAULTS[key]
        if not _same(a, b):
            out.append(f"{key}: {_show(a, missing)} -> {_show(b, missing)}")
    return out


def check_same_run(config, out_dir: str, announce: bool = True) -> None:
    """Before a resume touches a file of `out_dir`: refuse (ConfigError, one line) when the current config is
    not the one the run continues with (config.json, or its latest change in config_history.jsonl), unless
    config.resume_force. `announce`: print the
    warnings (a forced resume's differences, a run without config.json) on stderr; False for an early check
    whose caller checks again later."""
    force = bool(config.get("resume_force", False))
    path = os.path.join(out_dir, CONFIG_FILE)
    try:
        saved = current_record(out_dir)
    except (OSError, ValueError) as err:  # a torn or hand-edited file
        if not force:
            raise ConfigError(f"config.resume: {path} is unreadable ({err}); fix or delete it, or pass "
                              "--config.resume_force=True to continue anyway (it is rewritten)") from None
        _warn(announce, f"warning: {path} is unreadable ({err}); resume_force=True: continuing, it is rewritten")
        return
    if saved is None:
        if not holds_checkpoints(out_dir):  # a misspelled folder: nothing to continue
            raise ConfigError(f"config.resume: no run in {out_dir!r} (no {CONFIG_FILE}, no checkpoint) to continue; "
                              "check the folder's name, or start a fresh run without --config.resume")
        _warn(announce, f"warning: {out_dir} has no {CONFIG_FILE} (a run from before runs recorded their config); "
                        "resuming without checking that this config is the run's")
        return
    differences = config_differences(saved, run_record(config))
    if not differences:
        return
    listed = "; ".join(differences[:SHOWN]) + (f"; and {len(differences) - SHOWN} more" if len(differences) > SHOWN
                                               else "")
    record = HISTORY_FILE + "'s last entry" if read_history(out_dir) else CONFIG_FILE
    if force:
        _warn(announce, f"warning: resume_force=True: {out_dir} continues with a config that differs from its "
                        f"{record}: {listed}")
        return
    raise ConfigError(f"config.resume: {out_dir} was started with a different config ({record}): {listed}; "
                      "resume with the run's settings (only the budget, run.* and eval_episodes may change), or "
                      "pass --config.resume_force=True to continue anyway")


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists are leaves; an empty group is a leaf ({})."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal JSON values, NaN equal to NaN (json round-trips it, `==` would call it a difference)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b or (_number(a) and _number(b) and a == b)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: Any, missing: object) -> str:
    """A value in a message: its repr, a 64-hex digest cut to 12 characters, anything long cut to 40."""
    if value is missing:
        return "<absent>"
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return repr(value[:12] + "...")
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _warn(announce: bool, line: str) -> None:
    if announce:
        print(line, file=sys.stderr, flush=True)


def saved_steps(out_dir: str, folder: str = "checkpoints") -> list[int]:
    """The updates of the complete checkpoints in `out_dir`'s `folder` (the latest ones; "best": the best kept,
    run/checkpoints.py BestCheckpoint), read from the folder's names; orbax's temporary folder of a save that did
    not finish (a kill, a full disk) is not one."""
    directory = os.path.join(out_dir, folder)
    return [int(name) for name in os.listdir(directory) if name.isdigit()] if os.path.isdir(directory) else []


def holds_checkpoints(out_dir: str) -> bool:
    """Whether `out_dir` holds an earlier run's complete checkpoints (a finished, killed or diverged run)."""
    return bool(saved_steps(out_dir))
