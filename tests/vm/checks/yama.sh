#!/usr/bin/env bash
# A process the command leaves running keeps its sockets mediated, not
# broken, under Yama's ptrace_scope 1 (Ubuntu's default), where a process
# may take another's descriptors (`pidfd_getfd`, which the connect
# supervisor needs for every call it performs) only from its descendants.
# `run` adopts what its command leaves (a child subreaper), so the
# supervisor stays an ancestor of everything in the sandbox. Needs a kernel
# with Yama, its ptrace_scope set to 1 before (guest.sh does, as root):
#
#   an orphan (its parent gone while it runs) reaches a unix socket named
#   with --allow-socket, as a direct child of the command does, and is
#   refused (EACCES, the supervisor's answer, not Yama's EPERM) a socket
#   outside that nothing names; its own socket in the project answers it;
#   the same orphan under --explain-denials reaches the named socket.
#
# Usage: yama.sh SCRATCH
#   SCRATCH  a directory for the fake home, not under /tmp, /var/tmp,
#            /dev/shm or $TMPDIR (those are granted roots)
# Environment: SANDBOX, the strument-sandbox binary (default: on PATH).
# Needs python3 (Debian: python3).
#
# Output: `ok <name>: <detail>` or `FAIL <name>: <detail>` per check, then
# `N passed, M failed`; exit status 0 only when every check passed.

set -uo pipefail

scratch=${1:?usage: yama.sh SCRATCH}
# fail, finish, check_prelude (and tests/scenarios/lib.sh's pieces).
# shellcheck source=tests/vm/checks/prelude.sh
. "$(dirname "${BASH_SOURCE[0]}")/prelude.sh"
check_prelude "$scratch" python3

scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>&1)
if [ "$scope" != 1 ]; then
  fail "yama" "kernel.yama.ptrace_scope is ${scope:-empty}, not 1: boot a kernel with Yama in its LSM list and set it to 1 first (guest.sh does)"
  finish
fi
ok "yama" "ptrace_scope 1: pidfd_getfd only from descendants, as on Ubuntu"

fake_home "$scratch" yama

# confined ARGS...: run, --explain-denials too when $traced is set.
confined() {
  env -i HOME="$home" PATH="$PATH" "$sandbox" run --project "$project" --allow-socket "$named" \
    ${traced:+--explain-denials} -- "$@"
}

wait_for() { # PATH: a bounded poll, 20 s (TCG is slow)
  for _ in $(seq 200); do
    [ -s "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# Two services outside, started unconfined in the home: one named with
# --allow-socket, one named by nothing.
serve='import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[1] + ".up", "w").write("up")
while True:
    c, _ = s.accept(); c.sendall(b"hi"); c.close()'
named=$home/named.sock
unnamed=$home/unnamed.sock
for sock in "$named" "$unnamed"; do
  python3 -c "$serve" "$sock" &
  pids+=($!)
  wait_for "$sock.up" || {
    fail "services" "the stand-in at $sock did not start"
    finish
  }
done

# client SOCKET OUT: connects (an own socket in the project when SOCKET is
# `own`), writes `ok <answer>` or `errno <n>` and its parent's pid to OUT.
client='import os, socket, sys
target, out = sys.argv[1], sys.argv[2]
try:
    if target == "own":
        p = os.path.join(os.path.dirname(out), "own-%d.sock" % os.getpid())
        s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)
        c = socket.socket(socket.AF_UNIX); c.connect(p)
        a, _ = s.accept(); a.sendall(b"own"); r = "ok " + c.recv(8).decode()
    else:
        c = socket.socket(socket.AF_UNIX); c.connect(target); r = "ok " + c.recv(8).decode()
except OSError as e:
    r = "errno %d" % e.errno
open(out + ".tmp", "w").write("%s parent %d\n" % (r, os.getppid()))
os.rename(out + ".tmp", out)'

# orphan SOCKET OUT: the command starts the client in a subshell that
# exits at once, so the client runs on orphaned (adopted by `run`, or by
# init without it), and waits for its answer.
orphan() {
  confined sh -c '( python3 -c "$1" "$2" "$3" & ); i=0
    while [ ! -s "$3" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done' sh "$client" "$1" "$2"
}

# verdict NAME OUT PREFIX GOOD BAD: ok NAME GOOD when OUT begins with
# PREFIX; otherwise FAIL NAME BAD, with what OUT holds.
verdict() {
  local got
  got=$(cat "$2" 2>&1)
  if [[ $got == "$3"* ]]; then
    ok "$1" "$4"
  else
    fail "$1" "$5: $got"
  fi
}

confined python3 -c "$client" "$named" "$project/direct.txt" >/dev/null 2>&1
verdict "direct-granted" "$project/direct.txt" "ok hi parent " \
  "a direct child of the command reaches the socket --allow-socket names" \
  "a direct child of the command, to the named socket"

orphan "$named" "$project/orphan-named.txt" >/dev/null 2>&1
verdict "orphan-granted" "$project/orphan-named.txt" "ok hi parent " \
  "an orphan the command left reaches the named socket" \
  "an orphan the command left, to the named socket (errno 1, EPERM: Yama refused the supervisor)"

orphan own "$project/orphan-own.txt" >/dev/null 2>&1
verdict "orphan-own-socket" "$project/orphan-own.txt" "ok own parent " \
  "an orphan's own socket in the project answers it" \
  "an orphan's own socket in the project"

traced=1 orphan "$named" "$project/orphan-traced.txt" >/dev/null 2>&1
verdict "orphan-granted-traced" "$project/orphan-traced.txt" "ok hi parent " \
  "under --explain-denials too, whose tracer reaps what run adopted" \
  "an orphan under --explain-denials, to the named socket"

orphan "$unnamed" "$project/orphan-unnamed.txt" >/dev/null 2>&1
verdict "orphan-refused" "$project/orphan-unnamed.txt" "errno 13 parent " \
  "an orphan is refused a socket outside that nothing names, by the supervisor (EACCES)" \
  "an orphan, to a socket nothing names, not errno 13 (EACCES)"

finish
