# shellcheck shell=bash
# Sourced by the checks in tests/vm/checks/<case>/ (see doc/vm-tier.md):
# fail DETAIL [OUTPUT] prints `FAIL <name>: DETAIL`, OUTPUT indented, and
# ends the check.
set -u
name=$CHECK_NAME
fail() {
  printf 'FAIL %s: %s\n' "$name" "$1"
  [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/    | /'
  exit 1
}
