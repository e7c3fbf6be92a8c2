#!/usr/bin/env bash
# The portable VM tier: boot a stock Debian kernel under qemu and run the
# shared scenarios, and that kernel generation's own checks, inside it.
#
# Usage: tests/vm/run-vm.sh CASE
#
# The matrix: each case boots the newest kernel of a Debian suite, fetched by
# package name from Debian's archive (tests/vm/fetch-kernel.sh, cached):
#   bullseye          Linux 5.10, built without Landlock: refused, reason ENOSYS
#   bookworm          Linux 6.1, Landlock ABI 2 (no truncate right)
#   bookworm-lsm-off  Linux 6.1 booted with lsm= without landlock: refused, EOPNOTSUPP
#   trixie            Linux 6.12, ABI 6
#   sid               the newest Linux (7.2 today, ABI 10): TSYNC
# Any other kernel, e.g. the host's own (VM_KERNEL, default the newest
# /boot/vmlinuz-* with modules):
#   enabled           the kernel's default LSM list (Landlock on)
#   disabled          lsm= without landlock on the kernel command line
#
# The guest gets the host's root read-only over virtio-9p with a tmpfs overlay
# on top, so it runs the host's real go, cargo, rustc and cc, and the host's
# strument-sandbox binary, while every write stays in guest memory. Results
# come back through a second 9p share: a temp dir, removed on exit. Nothing
# else is written on the host, besides the kernel cache.
#
# Environment:
#   SANDBOX         the strument-sandbox binary (default target/debug/strument-sandbox)
#   VM_EXAMPLES     the example binaries the checks run (default: examples/ beside SANDBOX)
#   VM_KERNEL       kernel image for the enabled/disabled cases
#   VM_MODULES      its modules directory (default /lib/modules/<version>)
#   VM_CACHE        the kernel cache of fetch-kernel.sh
#   VM_EXPECT_ABI   the ABI the probe must report (default: from the kernel's version)
#   VM_TIMEOUT      seconds one boot may take before it counts as hung (default 600)
#   VM_MEMORY       guest memory in MiB (default 2048)
#   VM_DISABLED_LSM the lsm= list for the disabled boots (default lockdown,yama,apparmor)
#   VM_APPEND       extra kernel command line options
#   VM_CPU          qemu -cpu model (default: qemu's)
#   VM_TRACE=1      trace guest.sh (set -x, stamped with the guest's uptime) on the console
#   VM_KEEP=1       keep the temp dir (console log, results) and print its path
#
# Exit status: 0 when the guest booted as asked and every scenario and check passed.
set -euo pipefail

vm_case=${1:-}
# suite: where the kernel comes from (none: VM_KERNEL); mode: the scenarios'
# mode; lsm_off: boot with lsm= without landlock; expect_reason: the probe's
# reason when Landlock is unavailable (probe --json "reason").
suite='' lsm_off='' expect_reason=''
case $vm_case in
  bullseye) suite=bullseye mode=disabled expect_reason=not-built ;;
  bookworm) suite=bookworm mode=enabled ;;
  bookworm-lsm-off) suite=bookworm mode=disabled lsm_off=1 expect_reason=disabled ;;
  trixie) suite=trixie mode=enabled ;;
  sid) suite=sid mode=enabled ;;
  enabled) mode=enabled ;;
  disabled) mode=disabled lsm_off=1 expect_reason=disabled ;;
  *)
    echo "usage: $0 bullseye|bookworm|bookworm-lsm-off|trixie|sid|enabled|disabled" >&2
    exit 2
    ;;
esac

say() { printf 'vm[%s]: %s\n' "$vm_case" "$*"; }
# Everything goes to stdout, so the report reads in order wherever it is captured.
die() {
  say "FAIL: $*"
  exit 1
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
timeout_s=${VM_TIMEOUT:-600}
memory=${VM_MEMORY:-2048}

# --- what the host must provide (missing means fail, never skip) -------------

command -v qemu-system-x86_64 >/dev/null ||
  die "qemu-system-x86_64 not found: install it (Debian: apt-get install qemu-system-x86)"
command -v timeout >/dev/null || die "timeout not found: install coreutils"

busybox=${VM_BUSYBOX:-}
if [ -z "$busybox" ]; then
  for candidate in /bin/busybox /usr/bin/busybox /usr/lib/busybox/busybox; do
    [ -x "$candidate" ] && busybox=$candidate && break
  done
fi
[ -n "$busybox" ] || die "busybox not found: install it (Debian: apt-get install busybox-static)"
# The initramfs has no libraries: the busybox in it must be static.
if ldd "$busybox" >/dev/null 2>&1; then
  die "$busybox is dynamically linked: install the static build (Debian: apt-get install busybox-static)"
fi

if [ -n "$suite" ]; then
  # The case's kernel, by package name from Debian's archive (cached).
  # (Its messages go to stdout with the rest of the report.)
  { fetched=$(bash "$here/fetch-kernel.sh" "$suite" 2>&3) || die "no $suite kernel (see fetch-kernel's message above)"; } 3>&1
  eval "$fetched" # KERNEL= MODULES= VERSION= PACKAGE= PACKAGE_VERSION=, quoted with %q
  # shellcheck disable=SC2153 # assigned by the eval above
  kernel=$KERNEL moddir=$MODULES version=$VERSION
  say "kernel package: $PACKAGE $PACKAGE_VERSION ($suite)"
else
  kernel=${VM_KERNEL:-}
  if [ -z "$kernel" ]; then
    for candidate in $(printf '%s\n' /boot/vmlinuz-* | sort -rV); do
      [ -d "/lib/modules/${candidate#/boot/vmlinuz-}" ] && kernel=$candidate && break
    done
  fi
  [ -n "$kernel" ] ||
    die "no kernel image with modules in /boot: install one (Debian: apt-get install linux-image-amd64), or run a case of the matrix (bookworm, ...)"
  version=${VM_KERNEL_VERSION:-${kernel##*/vmlinuz-}}
  moddir=${VM_MODULES:-/lib/modules/$version}
fi
[ -r "$kernel" ] || die "$kernel is not readable by $(id -un)"
[ -f "$moddir/modules.dep" ] ||
  die "$moddir/modules.dep not found for $kernel: reinstall its package (Debian: apt-get install --reinstall linux-image-amd64)"

# The ABI the guest must report, from the kernel's version (Landlock's ABI
# history); a kernel newer than this table must report at least the last.
# VM_EXPECT_ABI overrides it (N, or N+ for at least N), for a kernel with
# backported Landlock features.
expect_abi=${VM_EXPECT_ABI:-}
if [ "$mode" = enabled ] && [ -z "$expect_abi" ]; then
  IFS=. read -r major minor _ <<<"$version"
  v=$((major * 1000 + ${minor%%[!0-9]*}))
  if ((v < 5013)); then die "Linux $version predates Landlock (5.13): run it as a disabled case"
  elif ((v < 5019)); then expect_abi=1
  elif ((v < 6002)); then expect_abi=2
  elif ((v < 6007)); then expect_abi=3
  elif ((v < 6010)); then expect_abi=4
  elif ((v < 6012)); then expect_abi=5
  elif ((v < 6015)); then expect_abi=6
  elif ((v < 7000)); then expect_abi=7
  elif ((v < 7001)); then expect_abi=8
  elif ((v < 7002)); then expect_abi=9
  elif ((v == 7002)); then expect_abi=10
  else expect_abi=10+
  fi
fi

sandbox=${SANDBOX:-$repo/target/debug/strument-sandbox}
[ -x "$sandbox" ] || die "SANDBOX=$sandbox is not an executable: build it (cargo build --features cli)"
sandbox=$(cd "$(dirname "$sandbox")" && pwd -P)/$(basename "$sandbox")
examples=${VM_EXAMPLES:-$(dirname "$sandbox")/examples}
scenarios=$repo/tests/scenarios/scenarios.sh
fixtures=$repo/tests/fixtures

# The guest's PATH: the host's real toolchain directories first. rustup's
# proxies (~/.cargo/bin) are resolved to the toolchain they pick (its sysroot),
# so the guest needs neither rustup nor the host user's RUSTUP_HOME.
tool_dirs=()
if [ "$mode" = enabled ]; then
  go_bin=$(command -v go) || die "go not found: install it (Debian: apt-get install golang-go)"
  cargo_bin=$(command -v cargo) || die "cargo not found: install a Rust toolchain (rustup, or Debian: apt-get install cargo)"
  rustc_bin=$(command -v rustc) || die "rustc not found: install a Rust toolchain (rustup, or Debian: apt-get install rustc)"
  command -v cc >/dev/null || die "cc not found (the Rust linker driver): install it (Debian: apt-get install gcc)"
  sysroot=$(rustc --print sysroot) || die "rustc --print sysroot failed: is a default toolchain set? (rustup default stable)"
  if [ -x "$sysroot/bin/rustc" ] && [ -x "$sysroot/bin/cargo" ]; then
    rustc_bin=$sysroot/bin/rustc
    cargo_bin=$sysroot/bin/cargo
  fi
  tool_dirs=("$(dirname "$rustc_bin")" "$(dirname "$cargo_bin")" "$(dirname "$(readlink -f "$go_bin")")")
fi
guest_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ "${#tool_dirs[@]}" -gt 0 ]; then guest_path=$(printf '%s:' "${tool_dirs[@]}")$guest_path; fi

# --- the temp dir: everything this run writes --------------------------------

tmp=$(mktemp -d "${TMPDIR:-/tmp}/strument-vm.XXXXXX")
cleanup() {
  if [ "${VM_KEEP:-}" = 1 ]; then
    say "kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
out=$tmp/out
mkdir -p "$out" "$tmp/initramfs/modules"

# Cargo in the guest has no network: fetch the fixture's dependency here.
if [ "$mode" = enabled ]; then
  CARGO_HOME=$out/cargo-seed "$cargo_bin" fetch --locked --quiet \
    --manifest-path "$fixtures/cargo-hello/Cargo.toml" ||
    die "cargo fetch of the fixture's dependencies failed (network?)"
  # A fresh go test runs ~50 tool processes to build the standard library the
  # fixture imports, each costing seconds under TCG: build them here, with
  # the scenarios' environment and the same go, into a GOCACHE the guest's
  # go test starts from. It still compiles, vets and links the fixture's own
  # package (at another path) into the cache under the test user's home.
  mkdir -p "$tmp/go-seed-src"
  cp -R "$fixtures/go-hello" "$tmp/go-seed-src/"
  chmod -R u+w "$tmp/go-seed-src"
  (cd "$tmp/go-seed-src/go-hello" && env -i "PATH=$guest_path" "HOME=$tmp" LC_ALL=C \
    GOCACHE="$out/go-seed" GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off \
    "$go_bin" test -count=1 ./... >"$tmp/go-seed.log" 2>&1) ||
    die "go test of the fixture on the host (the guest's go cache seed) failed: $(tail -n3 "$tmp/go-seed.log")"
  # The guest's test user reads the seeds straight from the result share.
  chmod 0755 "$out" && chmod -R a+rX "$out/cargo-seed" "$out/go-seed"
fi

# --- the initramfs: static busybox, the 9p/virtio/overlay modules, /init ------

# Load order from modules.dep, dependencies first. Modules built into the
# kernel need nothing; compressed modules are unpacked for busybox insmod.
declare -A loaded=()
order=()
load() {
  local name=$1 line path deps dep i
  [ -n "${loaded[$name]:-}" ] && return 0
  loaded[$name]=1
  line=$(grep -E "(^|/)${name}\.ko(\.(xz|zst|gz))?:" "$moddir/modules.dep" | head -n1) || line=
  if [ -z "$line" ]; then
    grep -qE "(^|/)${name}\.ko$" "$moddir/modules.builtin" 2>/dev/null && return 0
    # Newer packages ship no modules.builtin: a module without a file is built in
    # (if not, the guest fails to mount the host root and says so).
    [ -f "$moddir/modules.builtin" ] || return 0
    die "kernel module $name not found in $moddir (needed for 9p/overlay)"
  fi
  path=${line%%:*}
  read -r -a deps <<<"${line#*:}"
  # modprobe inserts the listed dependencies last to first.
  for ((i = ${#deps[@]} - 1; i >= 0; i--)); do
    dep=${deps[i]##*/}
    load "${dep%%.ko*}"
  done
  case $path in
    *.ko) cp "$moddir/$path" "$tmp/initramfs/modules/$name.ko" ;;
    *.ko.xz) xz -dc "$moddir/$path" >"$tmp/initramfs/modules/$name.ko" ;;
    *.ko.zst) zstd -qdc "$moddir/$path" >"$tmp/initramfs/modules/$name.ko" ;;
    *.ko.gz) gzip -dc "$moddir/$path" >"$tmp/initramfs/modules/$name.ko" ;;
  esac || die "cannot unpack $moddir/$path"
  order+=("$name")
}
for module in virtio_pci 9pnet_virtio 9p overlay; do load "$module"; done
# unix_diag, where it is a module: the connect supervisor asks the kernel
# through it what a confined command's own sockets bound (a real system
# loads it on demand; this initramfs has no modprobe).
if grep -qE '(^|/)unix_diag\.ko' "$moddir/modules.dep"; then load unix_diag; fi
printf '%s\n' "${order[@]}" >"$tmp/initramfs/modules/order"

mkdir -p "$tmp/initramfs/bin" "$tmp/initramfs/dev" "$tmp/initramfs/proc" "$tmp/initramfs/sys"
cp "$busybox" "$tmp/initramfs/bin/busybox"
cp "$here/init.sh" "$tmp/initramfs/init"
chmod 0755 "$tmp/initramfs/init" "$tmp/initramfs/bin/busybox"
(cd "$tmp/initramfs" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc 2>/dev/null) >"$tmp/initramfs.cpio" ||
  die "cannot build the initramfs"

# --- what the guest runs -----------------------------------------------------

cp "$here/guest.sh" "$out/guest.sh"
{
  printf 'VM_MODE=%q\n' "$mode"
  printf 'VM_CASE=%q\n' "$vm_case"
  printf 'VM_LSM_OFF=%q\n' "$lsm_off"
  printf 'VM_EXPECT_ABI=%q\n' "$expect_abi"
  printf 'VM_EXPECT_REASON=%q\n' "$expect_reason"
  printf 'VM_CHECKS=%q\n' "$here/checks/$vm_case"
  printf 'VM_EXAMPLES=%q\n' "$examples"
  printf 'VM_SANDBOX=%q\n' "$sandbox"
  printf 'VM_SCENARIOS=%q\n' "$scenarios"
  printf 'VM_FIXTURES=%q\n' "$fixtures"
  printf 'VM_PATH=%q\n' "$guest_path"
  [ "$mode" = enabled ] && printf 'VM_CARGO_SEED=%q\nVM_GO_SEED=%q\n' /run/vm-out/cargo-seed /run/vm-out/go-seed
  [ "${VM_TRACE:-}" = 1 ] && printf 'VM_TRACE=1\n'
} >"$out/vm.env"

append="console=ttyS0 panic=-1 loglevel=4${VM_APPEND:+ $VM_APPEND}"
if [ -n "$lsm_off" ]; then
  lsm=${VM_DISABLED_LSM:-lockdown,yama,apparmor}
  case ",$lsm," in *,landlock,*) die "VM_DISABLED_LSM=$lsm contains landlock" ;; esac
  append="$append lsm=$lsm"
fi

say "booting $kernel ($version) under qemu TCG, cmdline: $append"
start=$(date +%s.%N)
qemu_status=0
qemu_pid=
# timeout(1) runs in a process group of its own, out of reach of a Ctrl-C or a
# test runner's kill: pass those on, so no guest outlives this script.
interrupted() {
  [ -n "$qemu_pid" ] && kill "$qemu_pid" 2>/dev/null
  say "interrupted: guest stopped"
  exit 130
}
trap interrupted INT TERM
# KVM guests hang at boot on the project's machines: TCG is slower but sure.
# One host thread per guest (thread=single): with a thread per vCPU, a 7.x
# kernel's live patching of its own code (text_poke, int3) races TCG's
# translation cache and the guest can oops at boot ("Oops: int3").
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
  -accel tcg,thread=single -m "$memory" -smp 2 ${VM_CPU:+-cpu "$VM_CPU"} \
  -display none -monitor none -serial "file:$tmp/console.log" \
  -no-reboot -nic none \
  -kernel "$kernel" -initrd "$tmp/initramfs.cpio" -append "$append" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$out,mount_tag=vmout,security_model=none,multidevs=remap" \
  </dev/null >"$tmp/qemu.log" 2>&1 &
qemu_pid=$!
wait "$qemu_pid" || qemu_status=$?
qemu_pid=
wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

show_console() {
  say "last console lines:"
  tail -n "${1:-40}" "$tmp/console.log" 2>/dev/null | sed 's/^/    | /'
  [ -s "$tmp/qemu.log" ] && sed 's/^/    qemu| /' "$tmp/qemu.log"
  return 0
}

if [ "$qemu_status" = 124 ] || [ "$qemu_status" = 137 ]; then
  show_console 60
  die "the guest did not power off within $timeout_s s (hung? raise VM_TIMEOUT if the machine is just slow)"
fi
if [ "$qemu_status" != 0 ]; then
  show_console
  die "qemu exited $qemu_status after $wall s"
fi
if [ ! -f "$out/status" ]; then
  show_console
  die "the guest powered off after $wall s without a result (see the console above)"
fi

# The facts the guest recorded, then the scenarios' own lines.
kernel_seen=$(sed -n 's/^kernel: //p' "$out/report")
lsm_seen=$(sed -n 's/^lsm: //p' "$out/report")
abi=$(sed -n 's/^probe: abi: *//p' "$out/report")
reason=$(sed -n 's/^probe: reason: *//p' "$out/report")
user_seen=$(sed -n 's/^user: //p' "$out/report")
uid_seen=$(sed -n 's/^user-uid: //p' "$out/report")
say "kernel: $kernel_seen"
say "lsm: $lsm_seen"
probe_exit=$(sed -n 's/^probe-exit: //p' "$out/report")
[ -n "$probe_exit" ] && say "probe: exit $probe_exit${abi:+, abi $abi}${reason:+, reason: $reason}"
[ -n "$user_seen" ] && say "scenarios ran as: $user_seen"
[ -n "$uid_seen" ] && say "scenarios uid: $uid_seen"
grep '^opened: ' "$out/report" | sed "s/^/vm[$vm_case]: /" || true
grep '^FAIL ' "$out/report" | sed "s/^/vm[$vm_case]: /" || true
[ -f "$out/scenarios.log" ] && cat "$out/scenarios.log"
[ -f "$out/checks.log" ] && cat "$out/checks.log"
scenario_s=$(sed -n 's/^scenarios-seconds: //p' "$out/report")
checks_s=$(sed -n 's/^checks-seconds: //p' "$out/report")
say "wall time: $wall s (boot to power-off${scenario_s:+; scenarios $scenario_s s}${checks_s:+; checks $checks_s s})"

status=$(cat "$out/status")
if [ "$status" != 0 ]; then
  [ -f "$out/scenarios.log" ] || show_console
  die "the guest reported failure (status $status)"
fi
say "PASS"
