#!/usr/bin/env bash
# The truncate right came with ABI 3 (Linux 6.2). Before it, truncate(2) of a
# file outside the roots cannot be denied: the limitation must be reported
# (probe, policy) and it is real (the file is emptied), while opening the same
# file for writing stays refused. From ABI 3 on, the same truncate is refused
# and no limitation is reported. Each side pairs with a truncate inside the
# project, which must work.
# shellcheck source=tests/vm/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

project=$CHECK_DIR/project
outside=$CHECK_DIR/outside.txt
mkdir -p "$project"
printf 'outside the roots\n' >"$outside"
printf 'inside the project\n' >"$project/inside.txt"
run() { "$SANDBOX" run --project "$project" -- "$@" 2>&1; }
# truncate(2) by path: truncate(1) opens the file for writing first, which
# the write right refuses on every ABI.
# shellcheck disable=SC2016 # $ARGV and $! are perl's
truncate_path=(perl -e 'truncate($ARGV[0], 0) or die "$!\n"')

# Both must have answered, and about this kernel, before a grep for a
# missing line below can mean anything.
probe_status=0 policy_status=0
probe=$("$SANDBOX" probe --json 2>&1) || probe_status=$?
policy=$("$SANDBOX" policy --project "$project" 2>&1) || policy_status=$?
[ "$probe_status" = 0 ] && grep -q "\"abi\":$CHECK_ABI," <<<"$probe" ||
  fail "probe --json exited $probe_status without reporting abi $CHECK_ABI" "$probe"
[ "$policy_status" = 0 ] && grep -qF "$project" <<<"$policy" ||
  fail "policy exited $policy_status without listing the project $project" "$policy"
write_status=0
write_out=$(run sh -c 'echo pwned >"$1"' sh "$outside") || write_status=$?
[ "$write_status" != 0 ] && [ "$(cat "$outside")" = "outside the roots" ] ||
  fail "writing to a file outside the roots was not refused" "$write_out"
inside_status=0
inside_out=$(run "${truncate_path[@]}" "$project/inside.txt") || inside_status=$?
[ "$inside_status" = 0 ] && [ ! -s "$project/inside.txt" ] ||
  fail "truncating a file inside the project failed" "$inside_out"
status=0
out=$(run "${truncate_path[@]}" "$outside") || status=$?

if [ "$CHECK_ABI" -lt 3 ]; then
  grep -q '"truncate-unrestricted"' <<<"$probe" ||
    fail "probe --json on ABI $CHECK_ABI does not list the truncate-unrestricted limitation" "$probe"
  grep -q 'limitation: .*truncate' <<<"$policy" ||
    fail "policy on ABI $CHECK_ABI does not report the truncate limitation" "$policy"
  [ "$status" = 0 ] && [ ! -s "$outside" ] ||
    fail "truncate of a file outside the roots on ABI $CHECK_ABI: exit $status, expected it to succeed (the reported limitation)" "$out"
  printf 'ok %s: ABI %s: the truncate limitation is reported (probe, policy) and real: truncate outside the roots succeeded while writing there was refused; truncate inside worked\n' "$name" "$CHECK_ABI"
else
  ! grep -q '"truncate-unrestricted"' <<<"$probe" ||
    fail "probe --json on ABI $CHECK_ABI lists the truncate limitation" "$probe"
  [ "$status" != 0 ] && [ "$(cat "$outside")" = "outside the roots" ] ||
    fail "truncate of a file outside the roots on ABI $CHECK_ABI was not refused" "$out"
  printf 'ok %s: ABI %s: truncate outside the roots refused, file intact, no limitation reported; truncate inside worked\n' "$name" "$CHECK_ABI"
fi
