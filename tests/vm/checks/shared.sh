#!/usr/bin/env bash
# Runs one of the shared checks (tests/vm/checks/$CHECK_NAME.sh: deputies,
# local_net) in a kernel's guest, for that kernel's check of the same name.
# Its lines are passed on indented (suite::vm looks for the ones that prove a
# route closed), then one verdict line.
set -u
name=$CHECK_NAME
script=tests/vm/checks/$name.sh
status=0
out=$(bash "$(dirname "${BASH_SOURCE[0]}")/$name.sh" "$CHECK_DIR" 2>&1) || status=$?
summary=$(tail -n1 <<<"$out")
grep -v '^[0-9]* passed, [0-9]* failed$' <<<"$out" | sed 's/^/  /'
if [ "$status" = 0 ] && [[ $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
  printf 'ok %s: ABI %s: %s (%s)\n' "$name" "$CHECK_ABI" "$summary" "$script"
else
  printf 'FAIL %s: %s exited %s: %s\n' "$name" "$script" "$status" "$summary"
  exit 1
fi
