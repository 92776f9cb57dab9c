#!/usr/bin/env bash
# Create a TPU VM slice and install jaxmarl_llm on every host.  Usage: create.sh NAME ACCELERATOR ZONE
set -euo pipefail
NAME=$1; TYPE=$2; ZONE=$3
gcloud compute tpus tpu-vm create "$NAME" --zone="$ZONE" --accelerator-type="$TYPE" --version=tpu-ubuntu2204-base
gcloud compute tpus tpu-vm scp --recurse --zone="$ZONE" --worker=all "$(dirname "$0")/.." "$NAME":~/jaxmarl_llm
gcloud compute tpus tpu-vm ssh "$NAME" --zone="$ZONE" --worker=all --command \
  "cd ~/jaxmarl_llm && python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e . 'jax[tpu]'"
