#!/usr/bin/env bash
# Runs one of the shared checks (tests/vm/checks/$CHECK_NAME.sh: deputies,
# local_net) in a kernel's guest, for that kernel's check of the same name.
# Its lines are passed on indented as they come (suite::vm looks for the ones
# that prove a route closed; a check that hangs shows how far it got), then
# one verdict line. The check's end is read from a marker line, not from the
# end of its output, which a process it left behind could hold open.
set -u
name=$CHECK_NAME
script=tests/vm/checks/$name.sh
marker="shared-sh-exit-$$"
{
  bash "$(dirname "${BASH_SOURCE[0]}")/$name.sh" "$CHECK_DIR" 2>&1
  printf '\n%s %s\n' "$marker" "$?"
} | {
  summary='' status=1
  while IFS= read -r line; do
    if [[ $line == "$marker "* ]]; then
      status=${line#"$marker "}
      break
    fi
    [ -n "$line" ] && summary=$line
    [[ $line =~ ^[0-9]*\ passed,\ [0-9]*\ failed$ ]] || [ -z "$line" ] || printf '  %s\n' "$line"
  done
  if [ "$status" = 0 ] && [[ $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
    printf 'ok %s: ABI %s: %s (%s)\n' "$name" "$CHECK_ABI" "$summary" "$script"
  else
    printf 'FAIL %s: %s exited %s: %s\n' "$name" "$script" "$status" "$summary"
    exit 1
  fi
}
