#!/bin/bash
# Runs inside the portable VM tier's guest, as root, chrooted in the overlay
# over the host's root (see init.sh); run-vm.sh copies it into the result share.
#
# Checks that the kernel booted with the LSM list the host asked for, records
# the kernel and what `strument-sandbox probe` sees, then runs the shared
# scenarios as an ordinary user. Results go to /run/vm-out for the host:
#   report         key: value facts (kernel, lsm, probe, user, user-uid)
#   scenarios.log  the scenarios' own output
#   checks.log     the output of the case's own checks (tests/vm/checks/<case>/)
#   status         0 when everything held, non-zero otherwise
set -u
out=/run/vm-out
# shellcheck source=/dev/null
. "$out/vm.env"
if [ "${VM_TRACE:-}" = 1 ]; then
  PS4='+[$(read -r up _ </proc/uptime; echo "$up")] '
  set -x
fi

# Each fact goes to the report and, stamped with the guest's uptime, to the console.
report() {
  local up
  read -r up _ </proc/uptime
  printf '%s\n' "$*" >>"$out/report"
  printf '[%8s] %s\n' "$up" "$*"
}
finish() {
  echo "$1" >"$out/status"
  sync
  exit "$1"
}

report "kernel: $(uname -r)"
report "cmdline: $(cat /proc/cmdline)"

lsm=$(cat /sys/kernel/security/lsm 2>/dev/null) || {
  report "FAIL lsm: /sys/kernel/security/lsm is unreadable (securityfs)"
  finish 1
}
report "lsm: $lsm"
case ",$lsm," in
  *,landlock,*) has_landlock=yes ;;
  *) has_landlock=no ;;
esac
if [ "$VM_MODE" = enabled ] && [ "$has_landlock" != yes ]; then
  report "FAIL lsm: booted for Landlock enabled but landlock is not in the active LSM list"
  finish 1
elif [ "$VM_MODE" = disabled ] && [ "$has_landlock" != no ]; then
  report "FAIL lsm: booted with lsm= without landlock but landlock is active"
  finish 1
fi

probe_status=0
probe=$("$VM_SANDBOX" probe 2>&1) || probe_status=$?
report "probe-exit: $probe_status"
while IFS= read -r line; do report "probe: $line"; done <<<"$probe"
probed_abi=$(sed -n 's/^abi: *\([0-9][0-9]*\).*/\1/p' <<<"$probe" | head -n1)

# Loopback, which the initramfs leaves down: tests/vm/checks/local_net.sh
# runs services on 127.0.0.1 and ::1, as the test user, who cannot raise it.
ip link set lo up 2>/dev/null || busybox ip link set lo up 2>/dev/null || true

# An ordinary user, added to the guest's copy of /etc/passwd (the host's files
# are untouched: every write lands in the tmpfs overlay).
user=sandbox-test
uid=1500
while cut -d: -f3 /etc/passwd | grep -qx "$uid"; do uid=$((uid + 1)); done
home=/home/$user
echo "$user:x:$uid:$uid:strument-sandbox test user:$home:/bin/sh" >>/etc/passwd
echo "$user:x:$uid:" >>/etc/group
mkdir -p "$home"
chown "$uid:$uid" "$home"
chmod 0755 "$home"

# The host's toolchains may sit under a private home (rustup under /root is
# mode 0700): let the test user traverse the directories on the way to every
# tool and input, in the guest's copy only. (One stat and one chmod: every
# process start costs a fifth of a second under TCG.)
IFS=: read -r -a tool_dirs <<<"$VM_PATH"
declare -A ancestors=()
for p in "$VM_SANDBOX" "$VM_SCENARIOS" "${VM_FIXTURES:-}" "${VM_CHECKS:-}" "${VM_EXAMPLES:-}" "${tool_dirs[@]}"; do
  [ -d "$p" ] && ancestors[$p]=1
  while [ -n "$p" ] && [ "$p" != / ]; do
    p=${p%/*}
    [ -n "$p" ] && ancestors[$p]=1
  done
done
closed=()
while read -r perms dir; do
  [ $((0$perms & 1)) = 0 ] && closed+=("$dir")
done < <(stat -c '%a %n' "${!ancestors[@]}" 2>/dev/null)
if [ "${#closed[@]}" -gt 0 ]; then
  chmod o+x "${closed[@]}" && report "opened: ${closed[*]} (o+x, guest copy only)"
fi

scenario_env=(
  "PATH=$VM_PATH" "HOME=$home" "SANDBOX=$VM_SANDBOX"
  "SCENARIO_ROOT=$home/scenarios"
)
[ -n "${VM_FIXTURES:-}" ] && scenario_env+=("SCENARIO_FIXTURES=$VM_FIXTURES")
[ -n "${VM_EXPECT_ABI:-}" ] && scenario_env+=("SCENARIO_EXPECT_ABI=$VM_EXPECT_ABI")
[ -n "${VM_EXPECT_REASON:-}" ] && scenario_env+=("SCENARIO_EXPECT_REASON=$VM_EXPECT_REASON")
# The seeds (run-vm.sh made them readable): the scenarios copy what they need.
[ -n "${VM_CARGO_SEED:-}" ] && scenario_env+=("SCENARIO_CARGO_SEED=$VM_CARGO_SEED")
[ -n "${VM_GO_SEED:-}" ] && scenario_env+=("SCENARIO_GO_CACHE_SEED=$VM_GO_SEED")

as_user=()
if command -v setpriv >/dev/null; then
  as_user=(setpriv "--reuid=$uid" "--regid=$uid" --clear-groups)
  report "user: $user (uid $uid)"
elif command -v runuser >/dev/null; then
  as_user=(runuser -u "$user" --)
  report "user: $user (uid $uid)"
else
  report "user: root (the host's userland has neither setpriv nor runuser)"
fi
# What the scenarios and checks really run as: the same prefix, asked.
report "user-uid: $("${as_user[@]}" id -u)"

start=$(date +%s)
"${as_user[@]}" env -i "${scenario_env[@]}" bash "$VM_SCENARIOS" "$VM_MODE" 2>&1 |
  tee "$out/scenarios.log"
status=${PIPESTATUS[0]}
report "scenarios-exit: $status"
report "scenarios-seconds: $(($(date +%s) - start))"
[ "$status" = 0 ] || finish "$status"

# This kernel generation's own checks: tests/vm/checks/<case>/*.sh, each run
# by bash as the test user in a fresh directory of its own, printing
# `ok <name>: ...` or `FAIL <name>: ...` and exiting 0 only when it held.
# (doc/vm-tier.md says how to add one.)
checks=()
if [ -d "${VM_CHECKS:-}" ]; then
  for check in "$VM_CHECKS"/*.sh; do [ -f "$check" ] && checks+=("$check"); done
fi
[ "${#checks[@]}" -gt 0 ] || finish 0
# The checks run as on Ubuntu, whose default is Yama's ptrace_scope 1: a
# process may take another's descriptors only from its descendants
# (tests/vm/checks/yama.sh). Debian's kernels have Yama, at 0.
if [ -w /proc/sys/kernel/yama/ptrace_scope ]; then
  echo 1 >/proc/sys/kernel/yama/ptrace_scope
fi
report "checks-ptrace-scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo none)"
start=$(date +%s)
passed=0 failed=0
for check in "${checks[@]}"; do
  name=$(basename "$check" .sh)
  dir=$home/checks/$name
  mkdir -p "$dir" && chown "$uid:$uid" "$dir"
  check_status=0
  (cd "$dir" && "${as_user[@]}" env -i "${scenario_env[@]}" "CHECK_NAME=$name" "CHECK_DIR=$dir" \
    "CHECK_ABI=${probed_abi:-0}" "CHECK_EXAMPLES=${VM_EXAMPLES:-}" "CHECK_CASE=$VM_CASE" \
    bash "$check") >"$out/check.log" 2>&1 || check_status=$?
  if [ "$check_status" = 0 ] && grep -q "^ok $name: " "$out/check.log"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    grep -q "^FAIL $name: " "$out/check.log" ||
      printf 'FAIL %s: exited %s without an ok line\n' "$name" "$check_status" >>"$out/check.log"
  fi
  tee -a "$out/checks.log" <"$out/check.log"
done
printf 'checks: %d passed, %d failed\n' "$passed" "$failed" | tee -a "$out/checks.log"
report "checks-seconds: $(($(date +%s) - start))"
[ "$failed" = 0 ] || finish 1
finish 0
