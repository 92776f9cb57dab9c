"""`make("mpe/simple_spread", **kwargs)`: build an environment by name.

Entries are "module:Class" strings imported on first use, so importing the
registry stays cheap and optional dependencies are only needed by the envs
that use them. Register new envs with `register(name, "pkg.module:Class")`.
"""

from __future__ import annotations

import importlib
import inspect

from jaxmarl_llm.envs.core import Env

_REGISTRY: dict[str, str] = {
    "mpe/simple_spread": "jaxmarl_llm.envs.mpe.simple_spread:SimpleSpread",
    "mpe/simple_tag": "jaxmarl_llm.envs.mpe.simple_tag:SimpleTag",
    "mpe/simple_reference": "jaxmarl_llm.envs.mpe.simple_reference:SimpleReference",
    "mpe/simple_speaker_listener": "jaxmarl_llm.envs.mpe.simple_speaker_listener:SimpleSpeakerListener",
    "text/guess_number": "jaxmarl_llm.envs.text.guess_number:GuessNumber",
    "text/twenty_questions": "jaxmarl_llm.envs.text.twenty_questions:TwentyQuestions",
    "text/tic_tac_toe": "jaxmarl_llm.envs.text.tic_tac_toe:TicTacToe",
    "text/kuhn_poker": "jaxmarl_llm.envs.text.poker:KuhnPoker",
    "text/leduc_poker": "jaxmarl_llm.envs.text.poker:LeducPoker",
    "text/negotiation": "jaxmarl_llm.envs.text.negotiation:Negotiation",
    "text/mixture": "jaxmarl_llm.envs.text.mixture:GameMixture",
    "text/debate": "jaxmarl_llm.envs.text.debate:Debate",
    "text/cooperative_writing": "jaxmarl_llm.envs.text.cooperative_writing:CooperativeWriting",
    "text/arithmetic": "jaxmarl_llm.envs.text.arithmetic:Arithmetic",
    "text/calculator": "jaxmarl_llm.envs.text.calculator:Calculator",
    "text/tokenized_mpe": "jaxmarl_llm.envs.text.tokenized_mpe:TokenizedMPE",
    "host/tic_tac_toe": "jaxmarl_llm.envs.host.tic_tac_toe:HostTicTacToe",
    "host/textarena": "jaxmarl_llm.envs.host.textarena:TextArenaEnv",
    "host/code": "jaxmarl_llm.envs.host.code:CodeEnv",
    "host/tools": "jaxmarl_llm.envs.host.tools:ToolEnv",
    "host/pettingzoo_tic_tac_toe": "jaxmarl_llm.envs.host.pettingzoo:PettingZooTicTacToe",
}


def register(name: str, target: str) -> None:
    """Add an env: `target` is "module.path:ClassName"."""
    if name in _REGISTRY and _REGISTRY[name] != target:
        raise ValueError(f"environment {name!r} is already registered as {_REGISTRY[name]!r}")
    _REGISTRY[name] = target


def registered() -> list[str]:
    return sorted(_REGISTRY)


def _resolve(name: str) -> type:
    module_name, _, attr = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)


def make(name: str, **kwargs) -> Env:
    """Build env `name`; unknown names and keywords fail with the valid choices listed."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown environment {name!r}; registered environments: {', '.join(registered())}")
    cls = _resolve(name)
    signature = inspect.signature(cls.__init__)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    valid = [p for p in signature.parameters if p != "self" and signature.parameters[p].kind is not inspect.Parameter.VAR_KEYWORD]
    unknown = sorted(set(kwargs) - set(valid))
    if unknown and not accepts_any:
        raise EnvArgumentError(f"{name}: unknown keyword(s) {', '.join(map(repr, unknown))}; valid keywords: {', '.join(valid) or '(none)'}")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:  # an argument the env refuses (num_agents=0, a board style, ...)
        if isinstance(err, EnvArgumentError):
            raise
        raise EnvArgumentError(f"{name}: {err}") from err


class EnvArgumentError(ValueError, TypeError):
    """Keywords an env cannot be built with (unknown, or a value it refuses): bad input, not a bug, so the
    command line reports it in one line (run/cli.py main_guard). A TypeError too, as unknown keywords were."""
