#!/usr/bin/env bash
# Stop the run launch.sh started, on every host of a slice.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

USAGE="tpu_scripts/stop.sh $TPU_USAGE [--signal SIGNAL] [--dry-run]"
HELP="Send SIGNAL to the process group of the run launch.sh started (its id in ~/$REMOTE_DIR/$REMOTE_PID) on
every host, so every process of the run ends: one host alone would leave the others waiting in a collective.
Resume it later with the same --config.run.out_dir and --config.resume=True.

$TPU_HELP
  --signal SIGNAL          TERM (default), INT or KILL"
OPTIONS="$TPU_OPTIONS signal="
opt_signal=TERM
parse_args "$@"
no_rest
require name zone
case $opt_signal in
  TERM | INT | KILL) ;;
  *) usage_error "--signal must be TERM, INT or KILL, got '$opt_signal'" ;;
esac

on_workers all "cd ~/$REMOTE_DIR; \
if [ -s $REMOTE_PID ] && kill -0 \"\$(cat $REMOTE_PID)\" 2>/dev/null; then \
kill -$opt_signal -- \"-\$(cat $REMOTE_PID)\" && echo \"\$(hostname): sent $opt_signal to run \$(cat $REMOTE_PID)\"; \
else echo \"\$(hostname): no run going\"; fi; rm -f $REMOTE_PID"
