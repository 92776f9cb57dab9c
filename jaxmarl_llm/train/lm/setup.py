"""The one setup path of every LM trainer (lm_rl, sft, dpo): tokenizer -> env -> base model -> policy.

    setup = setup_lm(config)            # LMSetup(tokenizer, env, cfg, base, policy)

`config` is any LM trainer's config: it reads `tokenizer`, `env_name`, `env_kwargs`, `model`,
`lora` and `sampling`. Pass `env` to play an env built elsewhere (tests, custom games).
"""

from __future__ import annotations

import dataclasses
import filecmp
import os
from typing import Any, NamedTuple

from jaxmarl_llm.envs import registry
from jaxmarl_llm.errors import ConfigError
from jaxmarl_llm.policies.lm_policy import LMPolicy, build_model, make_policy
from jaxmarl_llm.tokenizers import CharTokenizer, HFTokenizer, WordTokenizer


class LMSetup(NamedTuple):
    tokenizer: Any
    env: Any
    cfg: Any  # ModelConfig
    base: Any  # base params pytree (frozen in RL; trained by SFT/DPO with train_base)
    policy: LMPolicy


def setup_lm(config, env=None) -> LMSetup:
    """Tokenizer, env (unless given), base model (a checkpoint folder or a random tiny model) and the policy."""
    check_checkpoint_tokenizer(config.model.get("checkpoint", ""), config.tokenizer)
    tokenizer = build_tokenizer(config.tokenizer, config.env_name, config.env_kwargs)
    if env is None:
        env = registry.make(config.env_name, tokenizer=tokenizer, **config.env_kwargs)
    mesh = config.get("mesh") or {}
    # a base sharded over mesh.fsdp devices stays in host memory until parallel/mesh.py places its blocks
    cfg, base = build_model(config.model, tokenizer, config.model.init_seed, host=int(mesh.get("fsdp", 1)) > 1)
    acting = config.get("policy") or {}
    actions = acting.get("actions", "free")
    if actions != "free" and not getattr(env, "action_candidates", None):
        raise ConfigError(f"config.policy.actions={actions!r} acts among the env's valid replies, but "
                          f"{type(env).__name__} lists none (env.action_candidates): use 'free'")
    policy = make_policy(cfg, config.lora, config.sampling, tokenizer, max_new_tokens=env.max_action_tokens,
                         actions=actions, replies=getattr(env, "action_candidates", None),
                         length_normalize=bool(acting.get("length_normalize", False)))
    return LMSetup(tokenizer, env, cfg, base, policy)


def check_checkpoint_tokenizer(checkpoint: str, spec: str) -> None:
    """A checkpoint folder that holds its own tokenizer must be read with it: the ids a model learnt mean nothing
    under another tokenizer, and a run would train without a word. ConfigError when `spec` names another one."""
    if not checkpoint or not any(os.path.exists(os.path.join(checkpoint, f)) for f in HFTokenizer.REQUIRED_ANY):
        return
    same = os.path.isdir(spec) and all(_same_file(os.path.join(checkpoint, f), os.path.join(spec, f))
                                       for f in HFTokenizer.REQUIRED_ANY)
    if not same:
        raise ConfigError(f"model.checkpoint {checkpoint!r} holds its own tokenizer but config.tokenizer is {spec!r}: "
                          f"pass --config.tokenizer={checkpoint}")


def _same_file(a: str, b: str) -> bool:
    """Both absent, or both present with the same bytes."""
    if not (os.path.exists(a) and os.path.exists(b)):
        return os.path.exists(a) == os.path.exists(b)
    return filecmp.cmp(a, b, shallow=False)


def build_tokenizer(spec: str, env_name: str = "", env_kwargs=None):
    """"char" or "word" (built-in) or a local Hugging Face tokenizer folder.

    "word" is a `WordTokenizer` over every fixed string the env `env_name` encodes
    when it is built (prompts, feedback, board pictures): whole words become one id,
    so a from-scratch model reads short transcripts; the same env and kwargs always
    give the same ids, so a saved model and a later run agree.
    """
    if spec in ("", "char"):
        return CharTokenizer()
    if spec == "word":
        if not env_name:
            raise ValueError("tokenizer='word' is built from an env's texts: set config.env_name")
        return WordTokenizer.from_texts(env_texts(env_name, dict(env_kwargs or {})))
    return HFTokenizer(spec)


class _RecordingTokenizer(CharTokenizer):
    def __init__(self):
        super().__init__()
        self.texts: list[str] = []

    def encode(self, text: str) -> list[int]:
        self.texts.append(text)
        return super().encode(text)


def env_texts(env_name: str, env_kwargs: dict) -> list[str]:
    """Every string env `env_name` encodes while it is built, in order."""
    recorder = _RecordingTokenizer()
    registry.make(env_name, tokenizer=recorder, **_roomy(env_kwargs))
    return recorder.texts


def _roomy(env_kwargs) -> dict:
    """The recorder counts characters: a capacity or an action width sized for words must not stop the build (texts
    do not depend on them); nested groups too (a mixture's `game_kwargs`)."""
    least = {"capacity": 4096, "max_action_tokens": 256}
    out = {}
    for key, value in env_kwargs.items():
        if hasattr(value, "items"):
            value = _roomy(value)
        elif key in least and value is not None:
            value = max(int(value), least[key])
        out[key] = value
    return out


def with_remat(setup: LMSetup, remat: bool) -> LMSetup:
    """`setup` whose model rematerialises its layers under a gradient (or not): model.remat="auto"."""
    if setup.policy.cfg.remat == remat:
        return setup
    cfg = setup.cfg.replace(remat=remat)
    return setup._replace(cfg=cfg, policy=dataclasses.replace(setup.policy, cfg=cfg))
