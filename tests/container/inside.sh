#!/bin/bash
# Runs inside the container tier's podman container (run-container.sh), as
# whichever user podman started it as, with podman's seccomp profile,
# capabilities and no_new_privs as the case set them. Prints what the
# process got from the container (`fact: KEY: VALUE` lines), tries bubblewrap,
# then runs the shared scenarios in the case's mode; exits with their status.
#
# Environment (set by run-container.sh):
#   CONTAINER_MODE   the scenarios' mode: enabled or disabled; or `refused`:
#                    no scenarios, only what `run` answers (`fact: run:`)
#                    and whether its command ran (`fact: ran:`)
#   SANDBOX, SCENARIO_*  passed on to tests/scenarios/scenarios.sh
set -u

fact() { printf 'fact: %s\n' "$*"; }

fact "uid: $(id -u) ($(id -un 2>/dev/null || echo '?')), gid $(id -g)"
fact "home: $HOME"
status_of() { sed -n "s/^$1:[[:space:]]*//p" /proc/self/status; }
fact "seccomp: $(status_of Seccomp) (filters: $(status_of Seccomp_filters))"
fact "no_new_privs: $(status_of NoNewPrivs)"
fact "cap_eff: $(status_of CapEff)"
fact "cap_bnd: $(status_of CapBnd)"
fact "apparmor: $(cat /proc/self/attr/current 2>/dev/null || echo none)"

# What the sandbox sees here: its first lines are the facts that matter.
probe_status=0
probe=$("$SANDBOX" probe 2>&1) || probe_status=$?
fact "probe-exit: $probe_status"
while IFS= read -r line; do
  case $line in
    landlock:* | abi:* | reason:* | errno:* | hint:*) fact "probe: $line" ;;
  esac
done <<<"$probe"

# Bubblewrap, the namespace sandbox this tier exists to compare with: its
# exit status and its own words (podman's profile may or may not let it
# create namespaces; the test asserts which).
if command -v bwrap >/dev/null; then
  bwrap_status=0
  bwrap_out=$(bwrap --ro-bind / / --dev /dev --proc /proc true 2>&1) || bwrap_status=$?
  fact "bwrap: exit $bwrap_status${bwrap_out:+: $(printf '%s' "$bwrap_out" | head -n1)}"
else
  fact "bwrap: not installed (Debian: apt-get install bubblewrap)"
fi

if [ "$CONTAINER_MODE" = refused ]; then
  run_status=0
  mkdir -p "$HOME/project"
  run_err=$(cd "$HOME/project" && "$SANDBOX" run -- sh -c ': >"$HOME/ran"' 2>&1 >/dev/null) || run_status=$?
  fact "run: exit $run_status: $(printf '%s' "$run_err" | head -n1)"
  if [ -e "$HOME/ran" ]; then fact "ran: yes"; else fact "ran: no"; fi
  exit 0
fi

bash "$SCENARIO_SCRIPT" "$CONTAINER_MODE"
