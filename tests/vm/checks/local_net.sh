#!/usr/bin/env bash
# No service on this machine's own addresses acts for a confined command:
# the connect supervisor refuses every port there that was not bound inside
# the sandbox or named, on every kernel (no Landlock ABI can say "not this
# host"). Runs on any kernel:
#
#   a stand-in build daemon started outside on 127.0.0.1, ::1 and 127.0.0.2
#   writes a file for an unconfined client and nothing from `run`, which
#   names the port after the command; next to it, the command's own TCP and
#   UDP servers on loopback answer it, and `--allow-connect 127.0.0.1:PORT`
#   reaches that daemon; a UDP stand-in on 127.0.0.1 and ::1 hears a datagram
#   sent with sendmsg and an address from an unconfined client and nothing
#   from `run`, whose own UDP server hears it. The other way: a unix server
#   the command starts in /tmp answers its own client, and a client outside
#   gets nothing (the supervisor performs its accept).
#
# Usage: local_net.sh SCRATCH
#   SCRATCH  a directory for the fake home, not under /tmp, /var/tmp,
#            /dev/shm or $TMPDIR (those are granted roots)
# Environment: SANDBOX, the strument-sandbox binary (default: on PATH).
# Needs python3 and ip (Debian: python3 iproute2; busybox's ip will do).
#
# Output: `ok <name>: <detail>` or `FAIL <name>: <detail>` per check, then
# `N passed, M failed`; exit status 0 only when every check passed.

set -uo pipefail

scratch=${1:?usage: local_net.sh SCRATCH}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ports=$here/../../fixtures/ports.py
# fail, finish, check_prelude (and tests/scenarios/lib.sh's pieces).
# shellcheck source=tests/vm/checks/prelude.sh
. "$here/prelude.sh"
check_prelude "$scratch" python3 ip
# The guest's initramfs leaves loopback down: no 127.0.0.1, no ::1.
ip link set lo up 2>/dev/null
# (grep reads it all: with pipefail, `grep -q` leaving early can fail the
# pipeline through ip's SIGPIPE although the address is there.)
if ! ip addr show lo | grep 'inet 127.0.0.1' >/dev/null; then
  fail "loopback" "lo has no 127.0.0.1: $(ip addr show lo 2>&1 | tr '\n' ' ')"
  finish
fi

fake_home "$scratch" local-net

confined() {
  env -i HOME="$home" PATH="$PATH" "$sandbox" run --project "$project" "$@"
}

# daemon HOST [udp]: starts the stand-in, sets $port.
daemon() {
  local fifo=$home/port.$RANDOM
  mkfifo "$fifo"
  python3 "$ports" serve "$1" 0 "$home/accepted.log" ${2:+"$2"} >"$fifo" &
  pids+=($!)
  read -r port <"$fifo"
  rm -f "$fifo"
}

for host in 127.0.0.1 ::1 127.0.0.2; do
  daemon "$host"
  free=$home/written-for-an-unconfined-client
  if [ "$(python3 "$ports" ask "$host" "$port" "$free")" = ok ] && [ -e "$free" ]; then
    ok "daemon-serves-outside" "the daemon on $host:$port writes for an unconfined client"
  else
    fail "daemon-serves-outside" "the daemon on $host:$port did not write for an unconfined client"
  fi
  rm -f "$free" "$home/accepted.log"
  target=$home/written-for-a-confined-client
  out=$(confined -- python3 "$ports" ask "$host" "$port" "$target" 2>"$home/err")
  err=$(cat "$home/err")
  if [ "$out" = "refused: errno 13" ] && [ ! -e "$target" ] && [ ! -e "$home/accepted.log" ]; then
    ok "daemon-refused" "a confined client of $host:$port: EACCES, nothing written"
  else
    fail "daemon-refused" "a confined client of $host:$port: $out; written: $([ -e "$target" ] && echo yes || echo no)"
  fi
  if grep -q "refused a connection to tcp .*:$port.*--allow-connect" <<<"$err"; then
    ok "refusal-reported" "run names $host:$port and the --allow-connect that allows it"
  else
    fail "refusal-reported" "no refusal line for $host:$port: $err"
  fi
  if [ "$host" = 127.0.0.1 ]; then
    named=$home/written-for-a-named-port
    out=$(confined --allow-connect "127.0.0.1:$port" -- python3 "$ports" ask "$host" "$port" "$named" 2>&1)
    if [ "$out" = ok ] && [ -e "$named" ]; then
      ok "allow-connect" "--allow-connect 127.0.0.1:$port reaches the daemon"
    else
      fail "allow-connect" "--allow-connect 127.0.0.1:$port: $out"
    fi
  fi
done

# A datagram sent with sendmsg and an address (msg_name): every sendmsg is
# performed by the supervisor, on every kernel.
for host in 127.0.0.1 ::1; do
  daemon "$host" udp
  free=$home/written-for-an-unconfined-sendmsg
  target=$home/written-for-a-confined-sendmsg
  if [ "$(python3 "$ports" ask "$host" "$port" "$free" sendmsg)" = ok ] && [ -e "$free" ]; then
    ok "datagram-serves-outside" "the UDP daemon on $host:$port writes for an unconfined sendmsg"
  else
    fail "datagram-serves-outside" "the UDP daemon on $host:$port did not write for an unconfined sendmsg"
  fi
  rm -f "$home/accepted.log"
  out=$(confined -- python3 "$ports" ask "$host" "$port" "$target" sendmsg 2>/dev/null)
  if [ "$out" = "refused: errno 13" ] && [ ! -e "$target" ] && [ ! -e "$home/accepted.log" ]; then
    ok "datagram-refused" "a confined sendmsg to $host:$port: EACCES, nothing written"
  else
    fail "datagram-refused" "a confined sendmsg to $host:$port: $out; written: $([ -e "$target" ] && echo yes || echo no)"
  fi
done

for host in 127.0.0.1 ::1; do
  for transport in tcp udp sendmsg; do
    arg=()
    [ "$transport" != tcp ] && arg=("$transport")
    out=$(confined -- python3 "$ports" own "$host" "${arg[@]}" 2>&1)
    if [ "$out" = "own ok" ]; then
      ok "own-server" "a confined command's own $transport server on $host answers it"
    else
      fail "own-server" "its own $transport server on $host: $out"
    fi
  done
done

# The other way: a server the command starts answers the sandbox, not a unix
# client outside.
sockdir=$(mktemp -d /tmp/strument-inbound.XXXXXX)
# shellcheck disable=SC2016
confined -- python3 -c '
import os, socket, sys, threading, time
d = sys.argv[1]
s = socket.socket(socket.AF_UNIX)
s.bind(os.path.join(d, "s.sock"))
s.listen(4)
def serve():
    while True:
        c, _ = s.accept()
        c.sendall(b"hello")
        c.close()
threading.Thread(target=serve, daemon=True).start()
c = socket.socket(socket.AF_UNIX)
c.connect(os.path.join(d, "s.sock"))
open(os.path.join(d, "inside"), "w").write(c.recv(100).decode())
open(os.path.join(d, "ready"), "w").close()
while not os.path.exists(os.path.join(d, "done")):
    time.sleep(0.05)
' "$sockdir" >/dev/null 2>"$sockdir/err" &
server=$!
i=0
while [ ! -e "$sockdir/ready" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
outside=$(python3 -c '
import socket, sys
c = socket.socket(socket.AF_UNIX)
c.settimeout(5)
c.connect(sys.argv[1])
print(repr(c.recv(100)))
' "$sockdir/s.sock" 2>&1)
touch "$sockdir/done"
wait "$server"
inside=$(cat "$sockdir/inside" 2>/dev/null)
if [ "$inside" = hello ] && [ "$outside" = "b''" ] && grep -q "outside the sandbox" "$sockdir/err"; then
  ok "inbound-unix" "a confined unix server answers its own client, and a client outside gets nothing (named after the command)"
else
  fail "inbound-unix" "inside: '$inside'; outside: $outside; run said: $(tr '\n' ' ' <"$sockdir/err")"
fi
rm -rf "$sockdir"

finish
