#!/usr/bin/env bash
# The container tier: the shared scenarios inside a default rootful podman
# container, where namespace sandboxes (bubblewrap) cannot start and
# strument-sandbox, which needs no namespace, must still confine.
#
# Usage: tests/container/run-container.sh CASE
#
#   root         enabled scenarios as the container's root: podman's default
#                seccomp profile and capabilities, no_new_privs as podman
#                leaves it (unset)
#   user         the same as an ordinary user (--user UID:GID), whose home
#                is a bind mount at /home/strument, not under a temp dir
#   docker       that user under Docker's default seccomp profile
#                (docker-seccomp.json: moby/profiles seccomp v0.2.3's
#                default.json, as vendored by moby/moby at b985e23,
#                Apache-2.0, unchanged), which refuses new namespaces without
#                CAP_SYS_ADMIN where podman's lets an ordinary user create
#                one, and pidfd_getfd without CAP_SYS_PTRACE, which the
#                connect supervisor needs: no scenarios (mode `refused`),
#                `run` must refuse, saying why, and nothing runs
#   docker-ptrace the same profile with --cap-add SYS_PTRACE, which `run`'s
#                refusal above advises: every scenario passes (the profile
#                still refuses unshare, so each confined child hands its
#                connect listener over instead of leaving it in run's table)
#   no-landlock  disabled scenarios as that user, under podman's default
#                profile with the three Landlock syscalls taken out, so they
#                get the profile's default errno: `run` must refuse and
#                nothing runs
#
# The container is the one a new user would start on Debian 12 (DESIGN.md):
#   podman --runtime runc --cgroup-manager=cgroupfs run --rm --network=none \
#     --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 --rootfs /:O ...
# the host's root as an overlay (every write lands in podman's upper layer;
# the host's files are untouched), runc because crun refuses a hybrid cgroup
# layout, and ulimits because podman's default nofile is above some hosts'
# hard limit. Read-only bind mounts at /opt/strument bring in what the
# scenarios need wherever it lives on the host (a rustup toolchain under a
# private /root, say): the binary, tests/, the Rust sysroot and a cargo
# registry seed (the container has no network). The home is a fresh
# directory of the work dir, bind-mounted read-write.
#
# Environment:
#   SANDBOX           the strument-sandbox binary (default target/debug/strument-sandbox)
#   CONTAINER_WORK    the directory this run writes to (default: a new one
#                     under target/); removed on success unless CONTAINER_KEEP=1
#   CONTAINER_UID     uid:gid of the user cases (default 1500:1500)
#   CONTAINER_SECCOMP podman's default seccomp profile (default
#                     /usr/share/containers/seccomp.json), the no-landlock
#                     case's starting point
#
# Output: `container[CASE]: ...` lines (the podman command, the facts the
# container reported), the `fact:` lines of inside.sh, the scenarios' own
# lines. Exit status 0 when the container ran and every scenario passed.
set -euo pipefail

container_case=${1:-}
case $container_case in
  root) mode=enabled as_user='' profile='' ;;
  user) mode=enabled as_user=1 profile='' ;;
  docker) mode=refused as_user=1 profile=docker ;;
  docker-ptrace) mode=enabled as_user=1 profile=docker ;;
  no-landlock) mode=disabled as_user=1 profile=no-landlock ;;
  *)
    echo "usage: $0 root|user|docker|docker-ptrace|no-landlock" >&2
    exit 2
    ;;
esac

say() { printf 'container[%s]: %s\n' "$container_case" "$*"; }
die() {
  say "FAIL: $*"
  exit 1
}

# --- what the host must provide (missing means fail, never skip) -------------

command -v podman >/dev/null || die "podman not found: install it (Debian: apt-get install podman runc)"
command -v runc >/dev/null || die "runc not found: install it (Debian: apt-get install runc)"
[ "$(id -u)" = 0 ] || die "the tier runs rootful podman: run it as root (rootless podman needs subuids and a user namespace, which is another tier)"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)

sandbox=${SANDBOX:-$repo/target/debug/strument-sandbox}
[ -x "$sandbox" ] || die "SANDBOX=$sandbox is not an executable: build it (cargo build --features cli)"
sandbox=$(cd "$(dirname "$sandbox")" && pwd -P)/$(basename "$sandbox")

# The container shares the host's kernel: the scenarios expect the ABI the
# host's probe reports.
host_abi=$("$sandbox" probe --json 2>/dev/null | tr -d ' \n' | sed -n 's/.*"abi":\([0-9][0-9]*\).*/\1/p')
if [ "$mode" = enabled ] && { [ -z "$host_abi" ] || [ "$host_abi" = 0 ]; }; then
  die "$sandbox probe finds no Landlock on this host: the enabled cases need a kernel with Landlock"
fi

work=${CONTAINER_WORK:-}
if [ -z "$work" ]; then
  mkdir -p "$repo/target"
  work=$(mktemp -d "$repo/target/container.XXXXXX")
fi
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
cleanup() {
  local status=$?
  if [ "$status" = 0 ] && [ "${CONTAINER_KEEP:-}" != 1 ]; then
    rm -rf "$work"
  else
    say "kept $work"
  fi
}
trap cleanup EXIT

mounts=(
  -v "$sandbox:/opt/strument/bin/strument-sandbox:ro"
  -v "$repo/tests:/opt/strument/tests:ro"
)
env_args=(
  -e "SANDBOX=/opt/strument/bin/strument-sandbox"
  -e "SCENARIO_SCRIPT=/opt/strument/tests/scenarios/scenarios.sh"
  -e "SCENARIO_FIXTURES=/opt/strument/tests/fixtures"
  -e "SCENARIO_ROOT=/home/strument/scenarios"
  -e "HOME=/home/strument"
  -e "CONTAINER_MODE=$mode"
)
container_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

if [ "$mode" = enabled ]; then
  # The toolchains themselves (rustup's proxies resolved to the sysroot they
  # pick; go's root from its binary), mounted where any user can reach them.
  go_bin=$(command -v go) || die "go not found: install it (Debian: apt-get install golang-go)"
  command -v cargo >/dev/null || die "cargo not found: install a Rust toolchain (rustup, or Debian: apt-get install cargo)"
  command -v cc >/dev/null || die "cc not found (the Rust linker driver): install it (Debian: apt-get install gcc)"
  sysroot=$(rustc --print sysroot) || die "rustc --print sysroot failed: is a default toolchain set? (rustup default stable)"
  [ -x "$sysroot/bin/rustc" ] && [ -x "$sysroot/bin/cargo" ] ||
    die "$sysroot holds no bin/rustc and bin/cargo: install the toolchain with rustup or Debian's cargo"
  goroot=$(dirname "$(dirname "$(readlink -f "$go_bin")")")
  [ -x "$goroot/bin/go" ] || die "cannot find go's root from $go_bin (got $goroot)"
  # Go's root stays where it is (Debian's links into /usr/share/go-*): it
  # must be reachable by the container's user as it is on the host.
  mounts+=(-v "$sysroot:/opt/strument/rust:ro")
  container_path=/opt/strument/rust/bin:$goroot/bin:$container_path
  env_args+=(-e "SCENARIO_EXPECT_ABI=$host_abi")

  # Cargo in the container has no network: fetch the fixture's dependency here.
  seed=$work/cargo-seed
  if [ ! -d "$seed/registry/cache" ]; then
    CARGO_HOME=$seed "$sysroot/bin/cargo" fetch --locked --quiet \
      --manifest-path "$repo/tests/fixtures/cargo-hello/Cargo.toml" ||
      die "cargo fetch of the fixture's dependencies failed (network?)"
  fi
  chmod -R a+rX "$seed"
  mounts+=(-v "$seed:/opt/strument/cargo-seed:ro")
  env_args+=(-e "SCENARIO_CARGO_SEED=/opt/strument/cargo-seed")
else
  # Landlock present on the host, refused by the container's profile: the
  # profile's default action decides the errno and so the probe's reason.
  env_args+=(-e "SCENARIO_EXPECT_REASON=not-built")
fi
env_args+=(-e "PATH=$container_path")

# A fresh home, owned by whoever runs in the container.
home=$work/home
rm -rf "$home"
mkdir -p "$home"
user_args=()
if [ -n "$as_user" ]; then
  uid_gid=${CONTAINER_UID:-1500:1500}
  chown "$uid_gid" "$home"
  user_args=(--user "$uid_gid")
fi
mounts+=(-v "$home:/home/strument")

security_args=()
if [ "$profile" = docker ]; then
  say "seccomp profile: Docker's default (tests/container/docker-seccomp.json)"
  security_args=(--security-opt "seccomp=$here/docker-seccomp.json")
  if [ "$container_case" = docker-ptrace ]; then
    say "capability added: SYS_PTRACE (the profile then allows pidfd_getfd)"
    security_args+=(--cap-add SYS_PTRACE)
  fi
elif [ "$profile" = no-landlock ]; then
  default_profile=${CONTAINER_SECCOMP:-/usr/share/containers/seccomp.json}
  [ -r "$default_profile" ] ||
    die "podman's default seccomp profile $default_profile is missing: install it (Debian: apt-get install golang-github-containers-common)"
  command -v python3 >/dev/null || die "python3 not found: install it (Debian: apt-get install python3)"
  derived=$work/seccomp-no-landlock.json
  # Every rule keeps its other syscalls; the three Landlock ones are left to
  # the default action, whose errno the profile names.
  errno=$(python3 - "$default_profile" "$derived" <<'PY'
import json, sys
landlock = {"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"}
profile = json.load(open(sys.argv[1]))
seen = set()
for rule in profile["syscalls"]:
    names = set(rule.get("names") or [])
    if rule.get("action") == "SCMP_ACT_ALLOW":
        seen |= names & landlock
    rule["names"] = [n for n in rule.get("names") or [] if n not in landlock]
if seen != landlock:
    sys.exit(f"{sys.argv[1]} does not allow {sorted(landlock - seen)}: this podman's own "
             "default already refuses Landlock")
profile["syscalls"] = [r for r in profile["syscalls"] if r["names"]]
json.dump(profile, open(sys.argv[2], "w"), indent=1)
print(profile.get("defaultErrnoRet", 1) if profile["defaultAction"] == "SCMP_ACT_ERRNO"
      else profile["defaultAction"])
PY
  ) || die "cannot derive a profile without Landlock from $default_profile"
  say "seccomp profile: $default_profile without landlock_create_ruleset, landlock_add_rule, landlock_restrict_self (default action: errno $errno)"
  [ "$errno" = 38 ] ||
    die "the profile's default errno is $errno, not ENOSYS (38): the probe's reason would not be not-built; update SCENARIO_EXPECT_REASON here"
  security_args=(--security-opt "seccomp=$derived")
fi

cmd=(podman --runtime runc --cgroup-manager=cgroupfs run --rm --network=none
  --ulimit nofile=20000:20000 --ulimit nproc=4096:4096
  "${user_args[@]}" "${security_args[@]}" "${mounts[@]}" "${env_args[@]}"
  --workdir /home/strument --rootfs /:O
  bash /opt/strument/tests/container/inside.sh)
say "podman $(podman --version | cut -d' ' -f3), $(runc --version | head -n1)"
say "running: podman --runtime runc --cgroup-manager=cgroupfs run --rm --network=none --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 ${user_args[*]} ${security_args[*]} --rootfs /:O bash inside.sh ($mode)"

start=$(date +%s)
status=0
"${cmd[@]}" </dev/null 2>&1 || status=$?
say "wall time: $(($(date +%s) - start)) s"
[ "$status" = 0 ] || die "the container exited $status"
say "PASS"
