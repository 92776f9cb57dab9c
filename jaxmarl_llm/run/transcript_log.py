"""Where a run's sampled episodes go: transcripts.jsonl, TensorBoard's text tab and transcripts.html.

The trainer keeps a few of each update's episodes beside its metrics (LM runs: train/lm/episode_sample.py); the
runner hands those of update 1 and of every `run.transcripts_every`-th update here, already decoded into records
(one episode each: its seats with their transcript, player and return, its turns with reply, reward, log-prob and
value). The JSONL file is the source of truth: a resumed run drops the records past its checkpoint, as
metrics.csv does, and the page is drawn again from the file after every write (run/transcript_page.py).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterable

from jaxmarl_llm.run.transcript_page import number, write_page

JSONL = "transcripts.jsonl"
PAGE = "transcripts.html"


def due(update: int, every: int) -> bool:
    """Whether `update` (1-based) writes its episodes: the first update and every `every`-th."""
    return every > 0 and (update == 1 or update % every == 0)


def read_records(path: str) -> list[dict]:
    """The records of a transcripts.jsonl, less a line torn by a kill."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return records


def markdown(records: Iterable[dict]) -> str:
    """One update's episodes as TensorBoard's text tab shows them (markdown: a table of turns per episode)."""
    parts = []
    for r in records:
        seats = ", ".join(f"{s['name']} ({s['player']}) {s['return']:+.3g}" for s in r["seats"])
        rows = ["| turn | seat | reply | reward | log-prob | value |", "|---|---|---|---|---|---|"]
        for t in r["turns"]:
            reply = t["reply"].replace("|", "\\|").replace("\n", " ")
            rows.append(f"| {t['turn']} | {t['name']} | `{reply}` | {t['reward']:+.3g} | {number(t['logprob'])} | "
                        f"{number(t['value'])} |")
        parts.append(f"**episode {r['episode']}**: {seats}\n\n" + "\n".join(rows))
    return "\n\n".join(parts)


class TranscriptLog:
    """Append each due update's episode records; keep the page in step with the file.

    describe(update, episodes) -> records: the trainer's decoding of one update's sampled arrays."""

    def __init__(self, out_dir: str, describe: Callable[[int, dict], list[dict]], every: int, title: str = "",
                 text_sink: Any = None, resume_from_update: int | None = None):
        self.path, self.page = os.path.join(out_dir, JSONL), os.path.join(out_dir, PAGE)
        self.describe, self.every, self.title, self.text_sink = describe, every, title, text_sink
        if resume_from_update is not None and os.path.exists(self.path):
            kept = [r for r in read_records(self.path) if r["update"] <= resume_from_update]
            with open(self.path + ".tmp", "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in kept)
            os.replace(self.path + ".tmp", self.path)  # a kill here leaves the old file or the new one
        else:
            for path in (self.path, self.page):
                if os.path.exists(path):
                    os.remove(path)

    def write(self, update: int, episodes: dict) -> list[dict]:
        """Write update `update`'s episodes (arrays of that update alone) when due; returns the records written."""
        if not due(update, self.every):
            return []
        records = self.describe(update, episodes)
        with open(self.path, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
        if self.text_sink is not None:
            self.text_sink("transcripts", markdown(records), update)
        write_page(self.page, read_records(self.path), self.title)
        return records
