#!/usr/bin/env bash
# Put jaxmarl_llm on every host of a slice (a git clone, or a copy of a local checkout) and install it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

USAGE="tpu_scripts/install.sh $TPU_USAGE (--repo URL [--branch BRANCH] | --local DIR) [--bucket BUCKET] [--dry-run]"
HELP="Put the code in ~/$REMOTE_DIR on every host of the slice, make ~/$REMOTE_DIR/.venv (Python $PYTHON_VERSION
through uv) and install it there with jax[tpu] at the versions constraints.txt pins. Run it again after a
change: it updates the checkout and reinstalls. The hosts need internet access (pip, uv, git).

$TPU_HELP
  --repo URL               git clone URL on every host (a fetch when ~/$REMOTE_DIR is a clone already)
  --branch BRANCH          the branch or tag to check out (default: main)
  --local DIR              instead: copy this local checkout (its files git tracks or does not ignore: not .venv/,
                           runs/) to every host as a tarball
  --bucket BUCKET          also mount the Cloud Storage bucket BUCKET at $BUCKET_ROOT/BUCKET on every host (Cloud
                           Storage FUSE, installed if missing): pass --config.run.out_dir=$BUCKET_ROOT/BUCKET/runs/NAME
                           so every host reads and writes the same run folder (checkpoints, metrics). Mounts do not
                           survive a reboot: run install.sh again after a host restarts"
OPTIONS="$TPU_OPTIONS repo= branch= local= bucket="
opt_repo=""
opt_branch=main
opt_local=""
opt_bucket=""
parse_args "$@"
no_rest
require name zone
if [ -n "$opt_repo" ] && [ -n "$opt_local" ]; then
  usage_error "--repo and --local exclude each other"
fi
case $opt_bucket in
  gs://* | */*) usage_error "--bucket takes a bucket name (my-bucket), not a URL or path, got '$opt_bucket'" ;;
esac
if [ -n "$opt_bucket" ] && ! [[ $opt_bucket =~ ^[a-z0-9][a-z0-9._-]*[a-z0-9]$ ]]; then
  usage_error "--bucket must be a bucket name (lowercase letters, digits, . _ -), got '$opt_bucket'"
fi

if [ -n "$opt_local" ]; then
  [ -d "$opt_local" ] || usage_error "--local $opt_local is not a directory"
  src=$(cd "$opt_local" && pwd)
  archive="${TMPDIR:-/tmp}/$REMOTE_DIR-$opt_name.tar.gz"
  run_shell "$(shell_join git -C "$src" ls-files -z --cached --others --exclude-standard) | $(shell_join tar -C "$src" --null -T - -czf "$archive")"
  tpu_gcloud scp "$archive" "$opt_name:$REMOTE_DIR.tar.gz" --zone="$opt_zone" --worker=all
  run rm -f "$archive"
  fetch="mkdir -p ~/$REMOTE_DIR; tar -xzf ~/$REMOTE_DIR.tar.gz -C ~/$REMOTE_DIR; rm -f ~/$REMOTE_DIR.tar.gz"
elif [ -n "$opt_repo" ]; then
  repo=$(shell_quote "$opt_repo")
  branch=$(shell_quote "$opt_branch")
  fetch="if [ -d ~/$REMOTE_DIR/.git ]; then git -C ~/$REMOTE_DIR fetch -q --depth=1 $repo $branch; git -C ~/$REMOTE_DIR checkout -q --force FETCH_HEAD; else git clone -q --depth=1 --branch $branch $repo ~/$REMOTE_DIR; fi"
else
  usage_error "missing --repo URL or --local DIR"
fi

on_workers all "set -e; $fetch; $(remote_venv_install)"
if [ -n "$opt_bucket" ]; then
  on_workers all "$(remote_mount_bucket "$opt_bucket")"
fi
