#!/usr/bin/env bash
# Start one process of a multi-node run of experiments/train.py; run it on every node, each with its own
# --process-id (or print what each node runs: --dry-run without --process-id).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

USAGE="launch/multinode.sh --coordinator HOST:PORT --num-processes N --process-id I [--local-device-ids IDS] [--dry-run] -- TRAIN_ARGS..."
HELP="Run .venv/bin/python experiments/train.py TRAIN_ARGS (\$PYTHON instead, when set) from the repository root
as process I of N, with JAXMARL_MULTIHOST=1 and the group in JAXMARL_COORDINATOR, JAXMARL_NUM_PROCESSES,
JAXMARL_PROCESS_ID (and JAXMARL_LOCAL_DEVICE_IDS), which experiments/train.py passes to
jax.distributed.initialize(). Start it on every node with the same coordinator, N and TRAIN_ARGS, and
I = 0 .. N-1; each process uses all of its node's GPUs unless --local-device-ids names some. Each option may
instead come from the environment variable of that name.

  --coordinator HOST:PORT  process 0's node and a free port there, reachable from every node (\$JAXMARL_COORDINATOR)
  --num-processes N        how many processes in all (\$JAXMARL_NUM_PROCESSES)
  --process-id I           this one, 0 .. N-1 (\$JAXMARL_PROCESS_ID); --dry-run without it prints every node's
                           command, one a line
  --local-device-ids IDS   the GPUs this process uses, e.g. 0,1 (\$JAXMARL_LOCAL_DEVICE_IDS; default: all)
  TRAIN_ARGS               experiments/train.py's flags, e.g. --config=configs/spread_mlp.py
                           --config.run.out_dir=/shared/runs/spread (a folder every node reaches)"
OPTIONS="coordinator= num-processes= process-id= local-device-ids="
opt_coordinator=${JAXMARL_COORDINATOR:-}
opt_num_processes=${JAXMARL_NUM_PROCESSES:-}
opt_process_id=${JAXMARL_PROCESS_ID:-}
opt_local_device_ids=${JAXMARL_LOCAL_DEVICE_IDS:-}
parse_args "$@"
require coordinator num-processes
[ "$DRY_RUN" = 1 ] || require process-id
[ "${#REST[@]}" -gt 0 ] || usage_error "missing TRAIN_ARGS (experiments/train.py's flags, after --)"
case $opt_coordinator in
  ?*:[0-9]*) ;;
  *) usage_error "--coordinator must be HOST:PORT, got '$opt_coordinator'" ;;
esac
case $opt_num_processes in
  '' | *[!0-9]* | 0) usage_error "--num-processes must be a positive number, got '$opt_num_processes'" ;;
esac
if [ -n "$opt_process_id" ]; then
  case $opt_process_id in
    *[!0-9]*) usage_error "--process-id must be a number, got '$opt_process_id'" ;;
  esac
  [ "$opt_process_id" -lt "$opt_num_processes" ] ||
    usage_error "--process-id must be below --num-processes ($opt_num_processes), got $opt_process_id"
fi
case $opt_local_device_ids in
  *[!0-9,]*) usage_error "--local-device-ids must be numbers separated by commas, got '$opt_local_device_ids'" ;;
esac

cd "$(dirname "${BASH_SOURCE[0]}")/.."
node_command() {  # the command process $1 runs
  local ids=()
  if [ -n "$opt_local_device_ids" ]; then ids=("JAXMARL_LOCAL_DEVICE_IDS=$opt_local_device_ids"); fi
  run env JAXMARL_MULTIHOST=1 "JAXMARL_COORDINATOR=$opt_coordinator" "JAXMARL_NUM_PROCESSES=$opt_num_processes" \
    "JAXMARL_PROCESS_ID=$1" ${ids[@]+"${ids[@]}"} PYTHONUNBUFFERED=1 "${PYTHON:-.venv/bin/python}" \
    experiments/train.py "${REST[@]}"
}
if [ -n "$opt_process_id" ]; then
  node_command "$opt_process_id"
else
  for ((i = 0; i < opt_num_processes; i++)); do node_command "$i"; done
fi
