"""`jaxmarl-branch` from a source checkout: jaxmarl_llm/run/branch_command.py has the command and its usage."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxmarl_llm.run.branch_command import __doc__, run  # noqa: E402,F401 - absl's --help prints this module's doc

if __name__ == "__main__":
    run()
