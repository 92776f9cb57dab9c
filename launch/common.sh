# shellcheck shell=bash
# Sourced by every launcher (launch/*, tpu_scripts/*): option parsing, one-line usage errors, shell quoting and
# --dry-run. Not a program of its own.
#
# A script sets, before `parse_args "$@"`:
#   USAGE    the synopsis (one line), e.g. "tpu_scripts/stop.sh --name NAME --zone ZONE [--dry-run]"
#   HELP     what --help prints under the synopsis
#   OPTIONS  the long options it takes, space separated: "zone=" takes a value, "spot" is a switch;
#            --dry-run and --help are always there
# and a variable opt_<option> (dashes as underscores) for each, holding its default.
# parse_args sets them (--zone Z and --zone=Z alike), DRY_RUN=1 for --dry-run, and REST to the arguments from
# the first one that is not an option (or everything after --).
# Meant to run on bash 3.2 too (macOS; not tried there): no associative arrays or ${x,,}, and an array that may
# be empty is expanded as ${a[@]+"${a[@]}"}.

DRY_RUN=0
REST=()

# Stop with one line on stderr, exit status 2: what is wrong, then the synopsis.
usage_error() {
  printf 'error: %s; usage: %s\n' "$1" "$USAGE" >&2
  exit 2
}

show_help() {
  printf 'usage: %s\n\n%s\n' "$USAGE" "$HELP"
  printf '  %-24s %s\n' "--dry-run" "print the commands (one a line, quoted to paste into a shell), run nothing" \
    "--help" "this text"
}

parse_args() {
  local arg name value has_value spec=" $OPTIONS "
  while [ $# -gt 0 ]; do
    arg=$1
    case $arg in
      --) shift; REST=("$@"); return 0 ;;
      -h | --help) show_help; exit 0 ;;
      --dry-run) DRY_RUN=1; shift; continue ;;
      --?*) ;;
      -?*) usage_error "unknown option $arg" ;;
      *) REST=("$@"); return 0 ;;
    esac
    name=${arg#--}
    value=
    has_value=0
    case $name in
      *=*) value=${name#*=}; name=${name%%=*}; has_value=1 ;;
    esac
    if [[ $spec == *" $name= "* ]]; then
      if [ "$has_value" = 0 ]; then
        [ $# -ge 2 ] || usage_error "--$name needs a value"
        value=$2
        shift
      fi
      printf -v "opt_${name//-/_}" '%s' "$value"
    elif [[ $spec == *" $name "* ]]; then
      [ "$has_value" = 0 ] || usage_error "--$name takes no value"
      printf -v "opt_${name//-/_}" '%s' 1
    else
      usage_error "unknown option --$name"
    fi
    shift
  done
}

# usage_error unless every named option (without its dashes) was given a non-empty value.
require() {
  local name var
  for name in "$@"; do
    var="opt_${name//-/_}"
    [ -n "${!var}" ] || usage_error "missing --$name"
  done
}

# usage_error when there are arguments left over (a script that takes no command).
no_rest() {
  [ "${#REST[@]}" -eq 0 ] || usage_error "unexpected argument ${REST[0]}"
}

_SAFE_WORD='^[A-Za-z0-9_@%+=:,./-]+$'

# One word for a POSIX shell: as it is when it needs no quoting, else in single quotes.
shell_quote() {
  local q="'\\''"
  if [[ $1 =~ $_SAFE_WORD ]]; then
    printf '%s' "$1"
  else
    printf "'%s'" "${1//\'/$q}"
  fi
}

# The words, quoted and joined by spaces: a command line to paste into a shell.
shell_join() {
  local word line=""
  for word in "$@"; do
    line="$line${line:+ }$(shell_quote "$word")"
  done
  printf '%s' "$line"
}

# Run a command, or under --dry-run print it (one line on stdout, quoted) and run nothing.
# Running, the line goes to stderr first, prefixed with "+ ".
run() {
  if [ "$DRY_RUN" = 1 ]; then
    printf '%s\n' "$(shell_join "$@")"
  else
    printf '+ %s\n' "$(shell_join "$@")" >&2
    "$@"
  fi
}

# The same for a shell pipeline given as one line (already quoted by the caller with shell_join).
run_shell() {
  if [ "$DRY_RUN" = 1 ]; then
    printf '%s\n' "$1"
  else
    printf '+ %s\n' "$1" >&2
    bash -o pipefail -c "$1"
  fi
}
