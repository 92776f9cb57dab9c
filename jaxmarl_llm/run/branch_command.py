"""Branch a run at one of its checkpoints into a new folder, then train the branch on (run/branch.py):

    python experiments/branch.py --run=runs/calculator --at=best --out=runs/calculator_peak
    python experiments/train.py --config=configs/calculator.py:lead --config.run.out_dir=runs/calculator_peak \
        --config.resume=True --config.resume_force=True

--at: latest, best (the run was trained with --config.run.keep_best=METRIC) or a kept update's number. The
original run is only read.
"""

from __future__ import annotations

from absl import flags

from jaxmarl_llm.run.branch import branch_run
from jaxmarl_llm.run.cli import fail, main_guard, run_program
from jaxmarl_llm.run.run_dirs import check_run_dir

_RUN = flags.DEFINE_string("run", "", "The run folder to branch (a run.out_dir of experiments/train.py).")
_AT = flags.DEFINE_string("at", "latest", "latest | best | an update whose checkpoint the run keeps.")
_OUT = flags.DEFINE_string("out", "", "The new run folder (absent or empty).")


@main_guard
def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments {argv[1:]}: pass --run, --at and --out")
    if not _RUN.value or not _OUT.value:
        fail("--run=RUN_FOLDER and --out=NEW_FOLDER are required")
    check_run_dir("run", _RUN.value)
    step = branch_run(_RUN.value, _AT.value, _OUT.value)  # a ConfigError: main_guard's one line, status 2
    print(f"branched {_RUN.value} at update {step} into {_OUT.value}; train it on with the run's config and "
          f"--config.run.out_dir={_OUT.value} --config.resume=True")


def run() -> None:
    """The command (`jaxmarl-branch`, experiments/branch.py)."""
    run_program(main)
