#!/usr/bin/env bash
# Run one command on every host of a slice.  Usage: launch.sh NAME ZONE "COMMAND"
# JAXMARL_MULTIHOST=1 makes experiments/*.py call jax.distributed.initialize() first.
set -euo pipefail
NAME=$1; ZONE=$2; CMD=$3
gcloud compute tpus tpu-vm ssh "$NAME" --zone="$ZONE" --worker=all --command \
  "cd ~/jaxmarl_llm && JAXMARL_MULTIHOST=1 .venv/bin/$CMD"
