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
# install.sh --bucket BUCKET mounts the Cloud Storage bucket BUCKET at $BUCKET_ROOT/BUCKET on every host.
BUCKET_ROOT=/gcs

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

# The shell line that installs Cloud Storage FUSE (gcsfuse, from Google's apt repository) when the host lacks it
# and mounts the bucket $1 at $BUCKET_ROOT/$1 unless something is mounted there already. --implicit-dirs: folders
# that other hosts wrote show up; --rename-dir-limit: orbax checkpoints and our config / metrics writes rename
# folders. Plain commands joined by ";" (no "a && b"), so that set -e stops at the first that fails.
remote_mount_bucket() {
  local dir="$BUCKET_ROOT/$1" repo=https://packages.cloud.google.com/apt key=/usr/share/keyrings/cloud.google.asc
  local list=/etc/apt/sources.list.d/gcsfuse.list
  printf '%s' "set -e; if ! command -v gcsfuse >/dev/null; then " \
    "export GCSFUSE_REPO=gcsfuse-\$(lsb_release -c -s); " \
    "echo \"deb [signed-by=$key] $repo \$GCSFUSE_REPO main\" | sudo tee $list >/dev/null; " \
    "curl -fsSL $repo/doc/apt-key.gpg | sudo tee $key >/dev/null; " \
    "sudo apt-get update -q; sudo apt-get install -y -q gcsfuse; fi; " \
    "if ! mountpoint -q $dir; then sudo mkdir -p $dir; sudo chown \"\$USER\" $dir; " \
    "gcsfuse --implicit-dirs --rename-dir-limit=200000 $1 $dir; fi"
}
