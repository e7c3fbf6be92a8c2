#!/usr/bin/env bash
# The deputies checks (tests/vm/checks/deputies.sh) in this kernel's
# guest, below ABI 9: the connect supervisor alone closes the pathname
# socket routes: a tmux server started outside cannot be driven from `run`,
# while the ssh-agent named by $SSH_AUTH_SOCK, a command's own sockets and
# `git commit` keep working. Its lines are passed on indented (suite::vm
# looks for the ones that prove the route closed), then one verdict line.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../shared.sh"
