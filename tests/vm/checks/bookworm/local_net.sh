#!/usr/bin/env bash
# The local network checks (tests/vm/checks/local_net.sh) in this kernel's
# guest: no Landlock right can refuse this machine's own addresses, so the
# connect supervisor alone keeps a stand-in build daemon on 127.0.0.1, ::1
# and 127.0.0.2 from writing for `run`, while the command's own servers and
# an --allow-connect port keep working. Its lines are passed on indented,
# then one verdict line.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../shared.sh"
