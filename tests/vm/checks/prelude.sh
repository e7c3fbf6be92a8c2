# shellcheck shell=bash
# Sourced by the checks every kernel shares (tests/vm/checks/deputies.sh,
# local_net.sh): tests/scenarios/lib.sh's pieces (ok, not_ok, summary, ...),
# and
#   fail NAME DETAIL      a failed result; the check goes on
#   finish                the summary line, then exit: 0 only when every
#                         check passed
#   fake_home SCRATCH NAME
#                         sets $home (a new directory in SCRATCH named
#                         for NAME) and $project in it, and $pids, the
#                         processes to kill on exit, when $home goes too
#   check_prelude SCRATCH TOOL...
#                         sets $sandbox to the strument-sandbox to check
#                         ($SANDBOX, default: on PATH), or finishes naming
#                         what is missing: the sandbox, a TOOL (the Debian
#                         package of the same name), or a SCRATCH that
#                         exists outside every temp root the sandbox grants
#                         (a fake home there would prove nothing)
# shellcheck source=tests/scenarios/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scenarios/lib.sh"

fail() { not_ok "$@"; }

finish() {
  summary
  [ "$failed" -eq 0 ]
  exit
}

check_prelude() {
  local scratch=$1 tool missing temp
  shift
  if ! sandbox=$(resolve_sandbox); then
    fail "sandbox" "SANDBOX=${SANDBOX:-strument-sandbox} is not an executable"
    finish
  fi
  for tool in "$@"; do
    if missing=$(missing_tool "$tool" "$tool"); then
      fail "tools" "$missing"
      finish
    fi
  done
  if ! temp=$(granted_temp_root "$sandbox" "$scratch"); then
    fail "scratch" "$scratch does not exist, or $sandbox policy did not say which temp roots it grants"
    finish
  elif [ -n "$temp" ]; then
    fail "scratch" "$scratch is under $temp, a temp root the sandbox grants: the checks would prove nothing"
    finish
  fi
}

fake_home() {
  home=$(mktemp -d "$1/$2-home.XXXXXX")
  project=$home/project
  mkdir -p "$project"
  pids=()
  trap fake_home_cleanup EXIT
}

fake_home_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$home"
}
