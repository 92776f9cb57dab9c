#!/usr/bin/env bash
# Create .venv (if missing) and install jaxmarl_llm with its test extra; with the test extra, also Debian's
# headless Chromium and its driver (tests/test_transcript_log.py reads transcripts.html in it) where missing.
# Idempotent and quick when nothing changed: a stamp of the inputs skips pip.
# torch is installed first and pinned, so nothing later pulls a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${EXTRAS:-test}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.setup-stamp
want="$(cat pyproject.toml constraints.txt tools/setup.sh | sha256sum | cut -d' ' -f1) $EXTRAS"
if [[ "$EXTRAS" == *test* ]] && { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; }; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver > /dev/null
  else
    echo "setup: no /usr/bin/chromium: install Debian's chromium and chromium-driver for the page test" >&2
  fi
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -c constraints.txt -e ".[$EXTRAS]"
echo "$want" > "$stamp"
