#!/usr/bin/env bash
# No unconfined service acts for a confined command over a unix socket: the
# connect supervisor on every kernel, and Landlock's RESOLVE_UNIX (ABI 9,
# Linux 7.1) a second time. Runs on any kernel:
#
#   every ABI  a tmux server started outside cannot be driven from `run`
#              (run-shell, send-keys: no file appears) and `run` names it
#              after the command, next to a stand-in ssh-agent at
#              $SSH_AUTH_SOCK that answers, a command's own socket in /tmp
#              and in the project that it reaches, and `git commit` in the
#              project that works; `policy` lists no reachable service;
#              io_uring and a seccomp listener of the command's own are
#              refused.
#
# Usage: deputies.sh SCRATCH
#   SCRATCH  a directory for the fake home, not under /tmp, /var/tmp,
#            /dev/shm or $TMPDIR (those are granted roots)
# Environment: SANDBOX, the strument-sandbox binary (default: on PATH).
# Needs tmux, python3 and git (Debian: tmux python3 git).
#
# Output: `ok <name>: <detail>` or `FAIL <name>: <detail>` per check, then
# `N passed, M failed`; exit status 0 only when every check passed.

# shellcheck disable=SC2016
set -uo pipefail

unset TMUX TMUX_TMPDIR
scratch=${1:?usage: deputies.sh SCRATCH}
# ok, not_ok, summary, resolve_sandbox, missing_tool, granted_temp_root.
# shellcheck source=tests/scenarios/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scenarios/lib.sh"
fail() { not_ok "$@"; }
finish() {
  summary
  [ "$failed" -eq 0 ]
  exit
}

if ! sandbox=$(resolve_sandbox); then
  fail "sandbox" "SANDBOX=${SANDBOX:-strument-sandbox} is not an executable"
  finish
fi
for tool in tmux python3 git; do
  if missing=$(missing_tool "$tool" "$tool"); then
    fail "tools" "$missing"
    finish
  fi
done
if ! temp=$(granted_temp_root "$sandbox" "$scratch"); then
  fail "scratch" "$scratch does not exist, or $sandbox policy did not say which temp roots it grants"
  finish
elif [ -n "$temp" ]; then
  fail "scratch" "$scratch is under $temp, a temp root the sandbox grants: the checks would prove nothing"
  finish
fi

abi=$("$sandbox" probe | sed -n 's/^abi: //p')
if [ -z "$abi" ]; then
  fail "probe" "no Landlock ABI: $("$sandbox" probe 2>&1 | tr '\n' ' ')"
  finish
fi

home=$(mktemp -d "$scratch/deputies-home.XXXXXX")
project=$home/project
mkdir -p "$project"
agent_dir=$(mktemp -d /tmp/strument-agent.XXXXXX)
tmux_name=strument-deputies-$$
pids=()
cleanup() {
  tmux -L "$tmux_name" kill-server 2>/dev/null
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$agent_dir" "$home"
}
trap cleanup EXIT

# A command under the sandbox, with a clean environment and the agent named.
confined() {
  env -i HOME="$home" PATH="$PATH" USER="${USER:-root}" SSH_AUTH_SOCK="$agent_dir/agent.sock" \
    GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=T GIT_AUTHOR_EMAIL=t@example.com \
    GIT_COMMITTER_NAME=T GIT_COMMITTER_EMAIL=t@example.com \
    "$sandbox" run --project "$project" -- "$@"
}

wait_for() { # PATH: up to 5 s
  for _ in $(seq 50); do
    [ -e "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# A stand-in ssh-agent under /tmp, which no directory grant covers: only the
# grant by name ($SSH_AUTH_SOCK) can make it reachable.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(b"agent-ok"); c.close()
' "$agent_dir/agent.sock" &
pids+=($!)
wait_for "$agent_dir/agent.sock"

client='import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); print(c.recv(64).decode())'
if out=$(confined python3 -c "$client" "$agent_dir/agent.sock" 2>&1) && [ "$out" = agent-ok ]; then
  ok "ssh-agent-reachable" "a confined command reaches \$SSH_AUTH_SOCK ($agent_dir/agent.sock)"
else
  fail "ssh-agent-reachable" "the stand-in agent did not answer: $out"
fi

# A command's own sockets: bind, listen, connect, in /tmp and in the project.
own='import os, socket, sys
p = sys.argv[1]
s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect(p); a, _ = s.accept()
c.sendall(b"own-ok"); print(a.recv(64).decode()); os.unlink(p)'
for where in /tmp "$project"; do
  sock=$where/strument-own-$$.sock
  if out=$(confined python3 -c "$own" "$sock" 2>&1) && [ "$out" = own-ok ]; then
    ok "own-socket-reachable" "a confined command connects to its own socket in $where"
  else
    fail "own-socket-reachable" "its own socket in $where: $out"
  fi
done

# git in the project: init, commit, the commit is there.
if confined git -C "$project" init -q 2>&1 &&
  confined git -C "$project" commit -q --allow-empty -m deputies 2>&1 &&
  [ "$(git -C "$project" log --format=%s)" = deputies ]; then
  ok "git-commit" "git commit in the project works under the sandbox"
else
  fail "git-commit" "git commit in the project failed"
fi

# A tmux server started outside, with a shell in its pane.
tmux -L "$tmux_name" new-session -d -x 80 -y 24 sh
control=$home/tmux-driven-unconfined
tmux -L "$tmux_name" run-shell "touch '$control'"
if wait_for "$control"; then
  ok "tmux-drivable-outside" "the tmux server runs commands for an unconfined client"
else
  fail "tmux-drivable-outside" "tmux run-shell did not work even unconfined: the checks below would prove nothing"
  finish
fi
socket=${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$tmux_name

confined tmux -L "$tmux_name" run-shell "touch '$home/tmux-run-shell'" >/dev/null 2>&1
run_stderr=$(confined tmux -L "$tmux_name" send-keys "touch '$home/tmux-send-keys'" Enter 2>&1 >/dev/null)
sleep 1
policy=$(env -i HOME="$home" PATH="$PATH" "$sandbox" policy --project "$project")

# Nothing routes around the supervisor: io_uring is refused, and a seccomp
# listener of the command's own (which would take connect first) is refused
# by the kernel, while a plain filter of its own still installs.
escapes=$(confined python3 "$(dirname "${BASH_SOURCE[0]}")/../../fixtures/sockets.py" escapes 2>&1)
if [ "$escapes" = $'io_uring_setup EPERM\nown listener EBUSY\nown filter ok' ]; then
  ok "no-route-around" "io_uring_setup EPERM, a second listener EBUSY, a plain filter installs"
else
  fail "no-route-around" "sockets.py escapes answered: $escapes"
fi

# Every ABI: the connect supervisor refuses (and from ABI 9 RESOLVE_UNIX too).
for how in run-shell send-keys; do
  if [ -e "$home/tmux-$how" ]; then
    fail "tmux-$how-refused" "ABI $abi: a confined tmux $how made the server write $home/tmux-$how"
  else
    ok "tmux-$how-refused" "ABI $abi: a confined tmux $how cannot reach the server; nothing written"
  fi
done
if grep -qF "refused a connection to tmux at $socket" <<<"$run_stderr"; then
  ok "tmux-refusal-reported" "run names the refused server after the command"
else
  fail "tmux-refusal-reported" "run's standard error does not name $socket: $run_stderr"
fi
if grep -q '^reachable:' <<<"$policy"; then
  fail "nothing-reported" "ABI $abi: the route is closed, yet policy lists: $(grep '^reachable:' <<<"$policy")"
else
  ok "nothing-reported" "ABI $abi: policy lists no reachable service"
fi

finish
