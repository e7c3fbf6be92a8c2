#!/usr/bin/env bash
# The deputies checks (tests/vm/checks/deputies.sh) in this kernel's
# guest, below ABI 9: the connect supervisor alone closes the pathname
# socket routes: a tmux server started outside cannot be driven from `run`,
# while the ssh-agent named by $SSH_AUTH_SOCK, a command's own sockets and
# `git commit` keep working. Its lines are passed on indented (suite::vm
# looks for the ones that prove the route closed), then one verdict line.
set -u
name=$CHECK_NAME
status=0
out=$(bash "$(dirname "${BASH_SOURCE[0]}")/../deputies.sh" "$CHECK_DIR" 2>&1) || status=$?
summary=$(tail -n1 <<<"$out")
grep -v '^[0-9]* passed, [0-9]* failed$' <<<"$out" | sed 's/^/  /'
if [ "$status" = 0 ] && [[ $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
  printf 'ok %s: ABI %s: %s (tests/vm/checks/deputies.sh)\n' "$name" "$CHECK_ABI" "$summary"
else
  printf 'FAIL %s: tests/vm/checks/deputies.sh exited %s: %s\n' "$name" "$status" "$summary"
  exit 1
fi
