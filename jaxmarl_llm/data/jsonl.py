"""JSONL data files (SFT transcripts, DPO pairs): one JSON object per line, errors that name file:line."""

from __future__ import annotations

import json
import os
from typing import Any

from jaxmarl_llm.errors import ConfigError


def read_objects(path: str, where: str, example: str, what: str) -> list[tuple[str, Any]]:
    """[("<where>:<line>", parsed line)] for every non-blank line of `path`.

    ConfigError (naming `where`, the config key and file) for a missing file, a line that is not JSON,
    or a file with no lines; checking each object's keys is the caller's job.
    """
    if not os.path.isfile(path):
        raise ConfigError(f"{where} does not exist; pass a JSONL file with one {example} object per line")
    out = []
    with open(path, "rb") as f:  # bytes, decoded per line: a bad byte is named with its line
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ConfigError(f"{where}:{lineno}: not UTF-8 (byte {err.start} of the line is "
                                  f"{raw[err.start]:#04x}); save the file as UTF-8") from None
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
