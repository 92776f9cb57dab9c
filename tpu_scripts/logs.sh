#!/usr/bin/env bash
# Show the end of the run's log on one host (or all) of a slice.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

USAGE="tpu_scripts/logs.sh $TPU_USAGE [--worker WORKER] [--lines N] [--follow] [--dry-run]"
HELP="Print the last lines of ~/$REMOTE_DIR/$REMOTE_LOG (what launch.sh started writes there), each line
prefixed with the host's name.

$TPU_HELP
  --worker WORKER          which host: 0 (default; process 0 prints the run's metrics), 1-3, 0,2 or all
  --lines N                how many lines (default 100)
  --follow                 keep printing what is appended (tail -F) until Ctrl-C"
OPTIONS="$TPU_OPTIONS worker= lines= follow"
opt_worker=0
opt_lines=100
opt_follow=""
parse_args "$@"
no_rest
require name zone
case $opt_lines in
  '' | *[!0-9]*) usage_error "--lines must be a number, got '$opt_lines'" ;;
esac
follow=""
if [ -n "$opt_follow" ]; then follow=" -F"; fi

on_workers "$opt_worker" \
  "tail -n $opt_lines$follow ~/$REMOTE_DIR/$REMOTE_LOG | sed -u \"s/^/\$(hostname): /\""
