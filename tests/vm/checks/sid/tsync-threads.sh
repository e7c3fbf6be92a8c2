#!/usr/bin/env bash
# ABI 8 (Linux 7.0) and later: Policy::apply in a process whose threads were
# started before it confines every one of them (LANDLOCK_RESTRICT_SELF_TSYNC).
# examples/confine_threads.rs starts 3 threads, applies a policy granting
# root/ only, then each thread and the main one write a file in root/ and one
# in outside/. Every write inside must land and every write outside must be
# refused: a thread left unconfined would leave its file in outside/.
# shellcheck source=tests/vm/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

bin=$CHECK_EXAMPLES/confine_threads
[ -x "$bin" ] || fail "$bin is missing: build it (cargo build --examples)"
[ "$CHECK_ABI" -ge 8 ] || fail "this kernel reports Landlock ABI $CHECK_ABI: TSYNC needs ABI 8 (Linux 7.0)"

root=$CHECK_DIR/root
outside=$CHECK_DIR/outside
mkdir -p "$root" "$outside"
status=0
out=$("$bin" "$root" "$outside" 3 2>&1) || status=$?
[ "$status" = 0 ] || fail "confine_threads exited $status (3: apply refused)" "$out"
grep -qx 'apply: confined, all threads: true' <<<"$out" ||
  fail "apply did not report every thread confined" "$out"
for who in main thread-1 thread-2 thread-3; do
  [ "$(cat "$root/$who" 2>/dev/null)" = "written by $who" ] ||
    fail "$who could not write inside the granted root ($root/$who)" "$out"
  [ ! -e "$outside/$who" ] ||
    fail "$who wrote outside the roots: $outside/$who exists (that thread was not confined)" "$out"
  grep -q "^$who: .*$outside/$who refused: Permission denied" <<<"$out" ||
    fail "$who's write outside was not refused with EACCES" "$out"
done
printf 'ok %s: apply confined 4 threads started before it (TSYNC): each wrote inside the root, each write outside refused (EACCES)\n' "$name"
