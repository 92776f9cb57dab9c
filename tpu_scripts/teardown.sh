#!/usr/bin/env bash
# Delete a TPU VM slice.  Usage: teardown.sh NAME ZONE
set -euo pipefail
gcloud compute tpus tpu-vm delete "$1" --zone="$2" --quiet
