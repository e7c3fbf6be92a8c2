#!/usr/bin/env bash
# The Yama checks (tests/vm/checks/yama.sh) in this kernel's guest, with
# ptrace_scope 1 as on Ubuntu: what a command leaves running is adopted by
# `run`, so the connect supervisor may still take its sockets: an orphan
# reaches a named socket and its own, and is refused one nothing names. Its
# lines are passed on indented, then one verdict line.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../shared.sh"
