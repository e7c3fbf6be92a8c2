# shellcheck shell=bash
# Sourced by the checks in tests/vm/checks/<case>/ (see doc/vm-tier.md): the
# pieces every tier shares (tests/scenarios/lib.sh: missing_tool,
# granted_temp_root, the sentinels, ...), and fail DETAIL [OUTPUT], which
# prints `FAIL <name>: DETAIL`, OUTPUT indented, and ends the check.
set -u
# shellcheck source=tests/scenarios/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scenarios/lib.sh"
name=$CHECK_NAME
fail() {
  printf 'FAIL %s: %s\n' "$name" "$1"
  [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/    | /'
  exit 1
}
