#!/usr/bin/env bash
# The local network checks (tests/vm/checks/local_net.sh) in this kernel's
# guest: no Landlock right can refuse this machine's own addresses, so the
# connect supervisor alone keeps a stand-in build daemon on 127.0.0.1, ::1
# and 127.0.0.2 from writing for `run`, while the command's own servers and
# an --allow-connect port keep working. Its lines are passed on indented,
# then one verdict line.
set -u
name=$CHECK_NAME
status=0
out=$(bash "$(dirname "${BASH_SOURCE[0]}")/../local_net.sh" "$CHECK_DIR" 2>&1) || status=$?
summary=$(tail -n1 <<<"$out")
grep -v '^[0-9]* passed, [0-9]* failed$' <<<"$out" | sed 's/^/  /'
if [ "$status" = 0 ] && [[ $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
  printf 'ok %s: ABI %s: %s (tests/vm/checks/local_net.sh)\n' "$name" "$CHECK_ABI" "$summary"
else
  printf 'FAIL %s: tests/vm/checks/local_net.sh exited %s: %s\n' "$name" "$status" "$summary"
  exit 1
fi
