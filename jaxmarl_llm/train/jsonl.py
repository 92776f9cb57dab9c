"""JSONL data files (SFT transcripts, DPO pairs): one JSON object per line, errors that name file:line."""

from __future__ import annotations

import json
import os
from typing import Any

from jaxmarl_llm.train.config import ConfigError


def read_objects(path: str, where: str, example: str, what: str) -> list[tuple[str, Any]]:
    """[("<where>:<line>", parsed line)] for every non-blank line of `path`.

    ConfigError (naming `where`, the config key and file) for a missing file, a line that is not JSON,
    or a file with no lines; checking each object's keys is the caller's job.
    """
    if not os.path.isfile(path):
        raise ConfigError(f"{where} does not exist; pass a JSONL file with one {example} object per line")
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(f"{where}:{lineno}: not valid JSON ({err.msg}); write one JSON object per line") from None
            out.append((f"{where}:{lineno}", item))
    if not out:
        raise ConfigError(f"{where} has no {what}; write one JSON object per line")
    return out
