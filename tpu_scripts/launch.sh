#!/usr/bin/env bash
# Start one command on every host of a slice, in the background, each host's output in its own log file.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

USAGE="tpu_scripts/launch.sh $TPU_USAGE [--dry-run] -- COMMAND..."
HELP="Start COMMAND on every host of the slice at once, in ~/$REMOTE_DIR with its .venv first on PATH and
JAXMARL_MULTIHOST=1 (experiments/train.py and sweep.py then call jax.distributed.initialize(), which finds the
other hosts of the slice by itself). It runs in the background (nohup, its own process group): the output of
each host goes to ~/$REMOTE_DIR/$REMOTE_LOG on that host (appended: logs.sh shows it), stop.sh ends it. A host
where a run started by launch.sh is still going refuses to start another.

$TPU_HELP
  COMMAND                  e.g. python experiments/train.py --config=configs/spread_mlp.py --config.run.out_dir=...
                           (each word is passed as it is; write -- before it)"
OPTIONS="$TPU_OPTIONS"
parse_args "$@"
require name zone
[ "${#REST[@]}" -gt 0 ] || usage_error "missing COMMAND (after --)"

command=$(shell_join "${REST[@]}")
already="\$(hostname): a run is still going (pid \$(cat $REMOTE_PID)); stop it first (tpu_scripts/stop.sh)"
on_workers all "set -e; cd ~/$REMOTE_DIR; mkdir -p logs; \
if [ -s $REMOTE_PID ] && kill -0 \"\$(cat $REMOTE_PID)\" 2>/dev/null; then echo \"$already\" >&2; exit 1; fi; \
echo \"=== \$(date -u +%FT%TZ) \$(hostname):\" $command >> $REMOTE_LOG; \
JAXMARL_MULTIHOST=1 PYTHONUNBUFFERED=1 PATH=\"\$PWD/.venv/bin:\$PATH\" nohup setsid $command >> $REMOTE_LOG 2>&1 < /dev/null & \
echo \$! > $REMOTE_PID; echo \"\$(hostname): started pid \$!, output in ~/$REMOTE_DIR/$REMOTE_LOG\""
