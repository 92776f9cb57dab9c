#!/usr/bin/env bash
# Delete a TPU VM slice (its disks and everything on them: keep checkpoints in a shared out_dir).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

USAGE="tpu_scripts/teardown.sh $TPU_USAGE [--yes] [--dry-run]"
HELP="Delete the slice NAME (gcloud compute tpus tpu-vm delete). gcloud asks before it deletes; --yes does not ask.

$TPU_HELP
  --yes                    delete without asking (gcloud --quiet)"
OPTIONS="$TPU_OPTIONS yes"
opt_yes=""
parse_args "$@"
no_rest
require name zone
quiet=()
if [ -n "$opt_yes" ]; then quiet=(--quiet); fi

tpu_gcloud delete "$opt_name" --zone="$opt_zone" ${quiet[@]+"${quiet[@]}"}
