# shellcheck shell=bash disable=SC2034  # (its variables are for the scripts that source it)
# Sourced by tpu_scripts/*.sh: the options every TPU script takes (--name, --zone, --project), the gcloud
# calls, and the shell lines each host of the slice runs. Option parsing, quoting and --dry-run:
# launch/common.sh.

# shellcheck source-path=SCRIPTDIR source=../launch/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../launch/common.sh"

opt_name=""
opt_zone=""
opt_project=""
TPU_OPTIONS="name= zone= project="
TPU_USAGE="--name NAME --zone ZONE [--project ID]"
TPU_HELP="  --name NAME              the TPU VM slice
  --zone ZONE              its zone, e.g. us-central2-b
  --project ID             the Google Cloud project (default: gcloud's configured one)"

# Every host keeps the checkout in ~/$REMOTE_DIR, its virtualenv in ~/$REMOTE_DIR/.venv, and a run's output in
# ~/$REMOTE_DIR/$REMOTE_LOG (its process group id in ~/$REMOTE_DIR/$REMOTE_PID), for logs.sh and stop.sh.
REMOTE_DIR=jaxmarl_llm
REMOTE_LOG=logs/run.log
REMOTE_PID=logs/run.pid
PYTHON_VERSION=3.11  # what constraints.txt's pins need (jax, numpy: Python >= 3.11)

# gcloud compute tpus tpu-vm ARGS... [--project=ID]
tpu_gcloud() {
  run gcloud compute tpus tpu-vm "$@" ${opt_project:+"--project=$opt_project"}
}

# Run one shell line on the slice's workers WORKER ("all", "0", "1-3") over ssh.
on_workers() {
  tpu_gcloud ssh "$opt_name" --zone="$opt_zone" --worker="$1" --command "$2"
}

# The shell line that makes ~/$REMOTE_DIR/.venv (Python $PYTHON_VERSION through uv, the TPU images ship an older
# python3) and installs the checkout in it with jax[tpu], at the versions constraints.txt pins.
remote_venv_install() {
  local uv="\$HOME/.local/bin/uv"
  printf '%s' "cd ~/$REMOTE_DIR && python3 -m pip install -q --user uv && " \
    "{ [ -x .venv/bin/python ] || $uv venv -q --python $PYTHON_VERSION .venv; } && " \
    "$uv pip install -q --python .venv/bin/python -c constraints.txt -e . \"jax[tpu]\""
}
