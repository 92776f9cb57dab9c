"""Optional Weights & Biases logging (`run.wandb=True`): the rows metrics.csv gets, the config, the transcripts.

Offline works with no network: `run.wandb_mode="auto"` logs online only when WANDB_API_KEY is set, else to
`<out_dir>/wandb/offline-run-*` (upload later with `wandb sync <that folder>`). A resumed run continues the same
W&B run (its id is kept in `<out_dir>/wandb_run_id`); rows are logged at step = update, so the updates a resume
repeats after its checkpoint are dropped by W&B (its steps only grow), as metrics.csv drops them.
"""

from __future__ import annotations

import html
import os
import secrets
from typing import Any, Iterable, Mapping

RUN_ID_FILE = "wandb_run_id"


def mode(setting: str) -> str:
    """"online" / "offline" from run.wandb_mode ("auto": online only with an API key in the environment)."""
    if setting != "auto":
        return setting
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


class WandbLog:
    """One W&B run for one run folder (the primary process's)."""

    def __init__(self, run_config, out_dir: str, config: Mapping[str, Any], resumed: bool):
        import wandb

        id_path = os.path.join(out_dir, RUN_ID_FILE)
        run_id = None
        if resumed and os.path.exists(id_path):
            with open(id_path) as f:
                run_id = f.read().strip() or None
        if run_id is None:
            run_id = secrets.token_hex(4)  # W&B run ids: lower-case letters and digits
            with open(id_path, "w") as f:
                f.write(run_id + "\n")
        self.mode = mode(run_config.wandb_mode)
        self.run = wandb.init(
            project=run_config.wandb_project, entity=run_config.wandb_entity or None,
            name=run_config.wandb_name or os.path.basename(os.path.normpath(out_dir)), dir=out_dir, id=run_id,
            resume="allow", mode=self.mode, config=dict(config), settings=wandb.Settings(silent=True))
        self._html = wandb.Html

    def write(self, rows: Iterable[Mapping[str, float]]) -> None:
        for row in rows:
            values = {k: float(v) for k, v in row.items() if k != "update" and v == v}  # NaN: not measured
            self.run.log(values, step=int(row["update"]))

    def text(self, tag: str, text: str, update: int) -> None:
        """A block of text at `update` (the transcripts' markdown), as W&B's HTML panel shows it."""
        self.run.log({tag: self._html(f"<pre>{html.escape(text)}</pre>")}, step=int(update))

    def close(self) -> None:
        self.run.finish()

