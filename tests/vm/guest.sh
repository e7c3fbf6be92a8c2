#!/bin/bash
# Runs inside the portable VM tier's guest, as root, chrooted in the overlay
# over the host's root (see init.sh); run-vm.sh copies it into the result share.
#
# Checks that the kernel booted with the LSM list the host asked for, records
# the kernel and what `strument-sandbox probe` sees, then runs the shared
# scenarios as an ordinary user. Results go to /run/vm-out for the host:
#   report         key: value facts (kernel, lsm, probe, user)
#   scenarios.log  the scenarios' own output
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
for p in "$VM_SANDBOX" "$VM_SCENARIOS" "${VM_FIXTURES:-}" "${tool_dirs[@]}"; do
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
if [ -n "${VM_CARGO_SEED:-}" ]; then
  # The seed sits in the host's private temp dir; hand the user a copy.
  cp -R "$VM_CARGO_SEED" /var/lib/vm-cargo-seed && chmod -R a+rX /var/lib/vm-cargo-seed
  scenario_env+=("SCENARIO_CARGO_SEED=/var/lib/vm-cargo-seed")
fi

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

start=$(date +%s)
"${as_user[@]}" env -i "${scenario_env[@]}" bash "$VM_SCENARIOS" "$VM_MODE" 2>&1 |
  tee "$out/scenarios.log"
status=${PIPESTATUS[0]}
report "scenarios-exit: $status"
report "scenarios-seconds: $(($(date +%s) - start))"
finish "$status"
