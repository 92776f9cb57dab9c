#!/usr/bin/env bash
# Check the accelerator of this machine (or the CPU, at small sizes) and write docs/accelerators.md.
# Arguments go to tools/accelerator_check.py (--small, --tests EXPR, --out FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python
exec "$PY" tools/accelerator_check.py "$@"
