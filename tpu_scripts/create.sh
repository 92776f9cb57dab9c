#!/usr/bin/env bash
# Create a TPU VM slice (then install.sh puts the code on every host).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

USAGE="tpu_scripts/create.sh $TPU_USAGE --accelerator-type TYPE [--version RUNTIME] [--spot] [--dry-run]"
HELP="Create the TPU VM slice NAME (gcloud compute tpus tpu-vm create).

$TPU_HELP
  --accelerator-type TYPE  e.g. v4-32 (4 hosts), v5litepod-16, v6e-8
  --version RUNTIME        the TPU software version (default by TYPE: v6e* v2-alpha-tpuv6e, v5p* v2-alpha-tpuv5,
                           v5litepod* / v5e* v2-alpha-tpuv5-lite, else tpu-ubuntu2204-base)
  --spot                   a Spot slice (cheaper, can be preempted)"
OPTIONS="$TPU_OPTIONS accelerator-type= version= spot"
opt_accelerator_type=""
opt_version=""
opt_spot=""
parse_args "$@"
no_rest
require name zone accelerator-type

if [ -z "$opt_version" ]; then
  case $opt_accelerator_type in
    v6e*) opt_version=v2-alpha-tpuv6e ;;
    v5p*) opt_version=v2-alpha-tpuv5 ;;
    v5litepod* | v5e*) opt_version=v2-alpha-tpuv5-lite ;;
    *) opt_version=tpu-ubuntu2204-base ;;
  esac
fi
spot=()
if [ -n "$opt_spot" ]; then spot=(--spot); fi

tpu_gcloud create "$opt_name" --zone="$opt_zone" --accelerator-type="$opt_accelerator_type" \
  --version="$opt_version" ${spot[@]+"${spot[@]}"}
