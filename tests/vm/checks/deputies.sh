#!/usr/bin/env bash
# No unconfined service acts for a confined command over a unix socket: the
# connect supervisor on every kernel, and Landlock's RESOLVE_UNIX (ABI 9,
# Linux 7.1) a second time. Runs on any kernel:
#
#   every ABI  a tmux server started outside cannot be driven from `run`
#              (run-shell, send-keys: the client fails with tmux's connect
#              error and no file appears, while a line typed unconfined after
#              the confined send-keys does run) and `run` names it after the
#              command, next to a stand-in ssh-agent at $SSH_AUTH_SOCK that
#              answers, a command's own socket in /tmp and in the project that
#              it reaches, and `git commit` in the project that works;
#              `policy` lists no reachable service; io_uring and a seccomp
#              listener of the command's own are refused.
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
# fail, finish, check_prelude (and tests/scenarios/lib.sh's pieces).
# shellcheck source=tests/vm/checks/prelude.sh
. "$(dirname "${BASH_SOURCE[0]}")/prelude.sh"
check_prelude "$scratch" tmux python3 git

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

wait_for() { # PATH [TENTHS]: a bounded poll, 5 s unless told
  for _ in $(seq "${2:-50}"); do
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

# By the socket's path: `-L` alone looks in the TMUX_TMPDIR `run` gives the
# command (a directory of the session's own), and finds no server there. A
# command that names the user's socket is the route this checks.
# The confined clients: their status and what they said, kept for the verdicts.
declare -A tmux_status tmux_out
tmux_status[run-shell]=0
tmux_out[run-shell]=$(confined tmux -S "$socket" run-shell "touch '$home/tmux-run-shell'" 2>&1) ||
  tmux_status[run-shell]=$?
tmux_status[send-keys]=0
tmux_out[send-keys]=$(confined tmux -S "$socket" send-keys "touch '$home/tmux-send-keys'" Enter 2>&1) ||
  tmux_status[send-keys]=$?
run_stderr=${tmux_out[send-keys]}
# The positive control for send-keys: a line typed unconfined after it. The
# pane's shell runs its input in order, so once this marker is there a line
# the confined client had typed would have run too (20 s at most, for TCG).
tmux -L "$tmux_name" send-keys "touch '$home/tmux-send-keys-after'" Enter
if ! wait_for "$home/tmux-send-keys-after" 200; then
  fail "tmux-send-keys-control" "a line typed unconfined with send-keys never ran in the pane: the send-keys check would prove nothing"
  finish
fi
policy_status=0
policy=$(env -i HOME="$home" PATH="$PATH" "$sandbox" policy --project "$project" 2>&1) ||
  policy_status=$?
# The greps for what policy lists below mean something only if it answered.
if [ "$policy_status" != 0 ] || ! grep -qF "$project" <<<"$policy"; then
  fail "policy" "policy exited $policy_status without listing the project $project: $policy"
  finish
fi

# Nothing routes around the supervisor: io_uring is refused, and a seccomp
# listener of the command's own (which would take connect first) is refused
# by the kernel, while a plain filter of its own still installs.
escapes=$(confined python3 "$(dirname "${BASH_SOURCE[0]}")/../../fixtures/sockets.py" escapes 2>&1)
if [ "$escapes" = $'io_uring_setup EPERM\nown listener EBUSY\nown filter ok' ]; then
  ok "no-route-around" "io_uring_setup EPERM, a second listener EBUSY, a plain filter installs"
else
  fail "no-route-around" "sockets.py escapes answered: $escapes"
fi

# Every ABI: the connect supervisor refuses (and from ABI 9 RESOLVE_UNIX
# too). Refused means: the client could not connect (non-zero, tmux's own
# message naming the socket), and nothing was written, although the pane ran
# the unconfined line typed after it.
for how in run-shell send-keys; do
  status=${tmux_status[$how]} out=${tmux_out[$how]}
  said=$(grep -F "error connecting to $socket (" <<<"$out" | head -n1)
  if [ -e "$home/tmux-$how" ]; then
    fail "tmux-$how-refused" "ABI $abi: a confined tmux $how made the server write $home/tmux-$how"
  elif [ "$status" = 0 ] || [ -z "$said" ]; then
    fail "tmux-$how-refused" "ABI $abi: a confined tmux $how exited $status without tmux's connect error for $socket: $out"
  else
    ok "tmux-$how-refused" "ABI $abi: a confined tmux $how exited $status, \"$said\"; nothing written"
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
