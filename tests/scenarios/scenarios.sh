#!/usr/bin/env bash
# The integration scenarios of strument-sandbox, written once and run by every
# tier: the host tier (tests/suite/scenarios.rs), the portable VM tier inside
# each guest (tests/vm/run-vm.sh) and the NixOS VM tests (nixos-tests/).
#
# Usage: scenarios.sh enabled|disabled
#        scenarios.sh list enabled|disabled
#
#   enabled   the kernel has Landlock: real `go test` and `cargo build` pass
#             under the sandbox and their cache writes land; `rm -rf ~` and
#             writes outside the roots fail while writes inside succeed.
#   disabled  the kernel has no Landlock: `probe` says why, `run` refuses and
#             the command never runs, `policy` still reports.
#   list MODE prints the names of MODE's scenarios, one a line, in the order
#             the run goes (the arrays below, which the run itself iterates:
#             scenario NAME is the function scenario_NAME, - as _). Every
#             tier takes the names from here (tests/suite/support.rs,
#             nix/scenario-test.nix); tests/suite/support.rs pins them
#             (SCENARIOS), so a scenario removed here fails the suite.
#
# Environment:
#   SANDBOX               the strument-sandbox binary (default: on PATH)
#   SCENARIO_ROOT         directory in which each scenario gets a fresh fake
#                         home; must not be under a temp dir the sandbox grants
#   SCENARIO_FIXTURES     the fixtures directory (default: ../fixtures)
#   SCENARIO_CARGO_SEED   a CARGO_HOME whose registry index and cache already
#                         hold the fixture's dependency: build --offline
#   SCENARIO_CARGO_VENDOR a directory of vendored crates replacing crates-io:
#                         build --offline from it
#   (neither cargo variable: cargo downloads the dependency from crates.io)
#   SCENARIO_GO_CACHE_SEED a GOCACHE holding the standard library's build and
#                         vet results (go test of the fixture elsewhere): it is
#                         copied into ~/.cache/go-build first, so go test builds
#                         only the fixture's package; the scenario then asserts
#                         the cache gained files (slow guests: each of a fresh
#                         go test's ~50 tool processes costs seconds under TCG)
#   SCENARIO_EXPECT_ABI   the Landlock ABI the probe must report: N exactly,
#                         or N+ for at least N (enabled mode)
#   SCENARIO_EXPECT_REASON the reason the probe must give (probe --json
#                         "reason": not-built or disabled; disabled mode)
#
# The ABI comes from `$SANDBOX probe --json`. On ABI 1 the cargo-build
# scenario expects cargo to fail with "Invalid cross-device link": ABI 1
# refuses every rename across directories and rustc renames its outputs so,
# the documented cost of that ABI (doc/security.md).
#
# Output: one line per scenario, `ok <name>: <detail>` or `FAIL <name>: <detail>`
# followed by the scenario's captured output; the run stops at the first
# failure. The last line is always `N passed, M failed`. Exit status 0 only
# when every scenario passed.
#
# The fake homes' sentinels are tests/scenarios/sentinels.tsv, the same table
# the Rust tests' FakeHome plants; the shell pieces every tier shares
# (sentinels, the temp-root check, toolchain lookup) are tests/scenarios/lib.sh.
#
# Every command runs with a scrubbed environment (env -i): HOME is the fake
# home and no XDG_*, GO*, CARGO_* or RUSTUP_* variable leaks in from the
# caller, so the toolchains write where a fresh user's would.

# Messages name paths as ~/...; the sh -c scripts expand "$1" in the child.
# shellcheck disable=SC2088,SC2016

set -uo pipefail

# The registry: every scenario of each mode, in the order the run goes.
enabled_scenarios=(probe-supported go-test cargo-build rm-rf-home write-outside-denied)
disabled_scenarios=(probe-refuses run-refuses policy-reports)
# scenarios_of MODE: the names of MODE's scenarios, one a line.
scenarios_of() {
  case $1 in
    enabled) printf '%s\n' "${enabled_scenarios[@]}" ;;
    disabled) printf '%s\n' "${disabled_scenarios[@]}" ;;
  esac
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=tests/scenarios/lib.sh
. "$here/lib.sh"

usage() {
  echo "usage: $0 enabled|disabled" >&2
  echo "       $0 list enabled|disabled" >&2
  exit 2
}

if [ "${1:-}" = list ]; then
  scenario_mode "${2:-}" || usage
  scenarios_of "$2"
  exit 0
fi

# fail NAME DETAIL [LOG]: report, show the captured output, stop the run.
fail() {
  not_ok "$1" "$2"
  if [ -n "${3:-}" ] && [ -s "$3" ]; then
    sed 's/^/    | /' "$3"
  fi
  summary
  exit 1
}

mode=${1:-}
scenario_mode "$mode" || usage
fixtures=${SCENARIO_FIXTURES:-$here/../fixtures}

# --- preconditions -----------------------------------------------------------

sandbox=$(resolve_sandbox) ||
  fail setup "SANDBOX=${SANDBOX:-strument-sandbox} is not an executable (build it: cargo build --features cli)"

[ -n "${SCENARIO_ROOT:-}" ] || fail setup "SCENARIO_ROOT is not set (a directory outside every temp dir)"
case $SCENARIO_ROOT in
  /*) ;;
  *) fail setup "SCENARIO_ROOT=$SCENARIO_ROOT is not absolute" ;;
esac
mkdir -p "$SCENARIO_ROOT" || fail setup "cannot create SCENARIO_ROOT=$SCENARIO_ROOT"
root=$(cd "$SCENARIO_ROOT" && pwd -P)

# The sandbox grants the temp dirs whole. A fake home under one of them would
# be writable through that grant, and the home scenarios would prove nothing.
granted=$(granted_temp_root "$sandbox" "$root") ||
  fail setup "$sandbox policy --project / did not say which temp roots it grants"
[ -z "$granted" ] ||
  fail setup "SCENARIO_ROOT=$SCENARIO_ROOT resolves to $root, under $granted, which the sandbox grants: a fake home there would be writable and prove nothing; use a directory outside every temp dir (e.g. under the build's target/, unless TMPDIR covers it)"

if [ ! -d "$fixtures/go-hello" ] || [ ! -d "$fixtures/cargo-hello" ]; then
  fail setup "fixtures not found in $fixtures (set SCENARIO_FIXTURES)"
fi

# The toolchains, resolved once with the caller's environment: afterwards
# HOME is the fake home, where rustup's proxies would find no toolchain.
path_dirs=()
if [ "$mode" = enabled ]; then
  for tool in go:golang-go cargo:cargo rustc:rustc; do
    missing=$(missing_tool "${tool%%:*}" "${tool#*:}") && fail setup "$missing"
  done
  go_bin=$(command -v go)
  { read -r rustc_bin && read -r cargo_bin; } < <(rust_toolchain)
  path_dirs+=("$(dirname "$rustc_bin")" "$(dirname "$cargo_bin")" "$(dirname "$go_bin")")
fi
clean_path=$PATH
if [ "${#path_dirs[@]}" -gt 0 ]; then clean_path=$(printf '%s:' "${path_dirs[@]}")$PATH; fi

user=$(id -un 2>/dev/null || echo scenario)
base_env=(
  "PATH=$clean_path" "LC_ALL=C" "USER=$user" "LOGNAME=$user" "SHELL=/bin/sh"
  "GOTOOLCHAIN=local" "GOPROXY=off" "GOFLAGS=-mod=mod" "GOSUMDB=off"
  "CARGO_TERM_COLOR=never" "CARGO_TERM_PROGRESS_WHEN=never"
)
[ "$mode" = enabled ] && base_env+=("RUSTC=$rustc_bin")
# Temp space and the network settings an online cargo build needs.
# STRUMENT_SANDBOX_TEST_ABI_CAP: a debug build's test-only cap on the ABI
# (src/abi.rs), so the host tier can run these scenarios as an older kernel.
for var in STRUMENT_SANDBOX_TEST_ABI_CAP TMPDIR http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY \
  SSL_CERT_FILE SSL_CERT_DIR CARGO_HTTP_CAINFO NIX_SSL_CERT_FILE; do
  [ -n "${!var:-}" ] && base_env+=("$var=${!var}")
done

# --- the fake home -----------------------------------------------------------

# new_home NAME: a fresh home for one scenario, laid out like the home of a
# user who has used cargo and go before (the cache directories exist: the
# sandbox grants existing roots and reports missing ones as skipped), with
# sentinels outside every granted root. Sets home, project, state, log.
new_home() {
  local dir=$root/$1
  rm -rf "$dir"
  home=$dir/home
  project=$home/project
  state=$home/.local/state/strument
  log=$dir/output.log
  mkdir -p "$project" "$state" "$home/.cargo/bin" \
    "$home/.cargo/registry" "$home/.cargo/git" "$home/.config/go" \
    "$home/.cache" "$home/go/pkg/mod" || fail "$1" "cannot create the fake home in $dir"
  plant_sentinels "$home" || fail "$1" "cannot write the sentinels (tests/scenarios/sentinels.tsv) in $home"
  : >"$log"
}

# sentinels_intact: empty output when every sentinel is still there, unchanged.
sentinels_intact() { broken_sentinels "$home"; }

# host CMD...: run CMD with the scrubbed environment, unconfined, in $PWD.
host() { env -i "${base_env[@]}" "HOME=$home" "$@"; }

# sandboxed CMD...: run CMD under `strument-sandbox run` for the current fake
# home, appending its output to the log; returns CMD's (or the sandbox's) status.
sandboxed() {
  { printf '$ strument-sandbox run --'; printf ' %q' "$@"; printf '\n'; } >>"$log"
  env -i "${base_env[@]}" "HOME=$home" \
    "$sandbox" run --project "$project" --state "$state" -- "$@" >>"$log" 2>&1
}

files_under() { find "$1" -type f 2>/dev/null | wc -l | tr -d ' '; }

# --- Landlock enabled --------------------------------------------------------

scenario_probe_supported() {
  new_home probe-supported
  local status=0
  "$sandbox" probe >"$log" 2>&1 || status=$?
  [ "$status" = 0 ] ||
    fail probe-supported "probe exited $status: this kernel offers no Landlock, run the disabled mode instead" "$log"
  local text_abi
  text_abi=$(sed -n 's/^abi: *\([0-9][0-9]*\).*/\1/p' "$log" | head -n1)
  [ -n "$text_abi" ] || fail probe-supported "probe exited 0 but printed no 'abi: N' line" "$log"
  [ "$text_abi" = "$abi" ] ||
    fail probe-supported "probe says abi $text_abi but probe --json says $abi" "$log"
  local expected=${SCENARIO_EXPECT_ABI:-}
  case $expected in
    '') ;;
    *+) [ "$abi" -ge "${expected%+}" ] ||
      fail probe-supported "landlock abi $abi, expected at least ${expected%+} (SCENARIO_EXPECT_ABI=$expected)" "$log" ;;
    *) [ "$abi" = "$expected" ] ||
      fail probe-supported "landlock abi $abi, expected $expected (SCENARIO_EXPECT_ABI)" "$log" ;;
  esac
  ok probe-supported "landlock abi $abi${expected:+ (expected $expected)} on kernel $(uname -r)"
}

scenario_go_test() {
  new_home go-test
  cp -R "$fixtures/go-hello" "$project/" || fail go-test "cannot copy the go fixture"
  chmod -R u+w "$project/go-hello" # fixtures may come read-only from the Nix store
  local seeded=0 how=""
  if [ -n "${SCENARIO_GO_CACHE_SEED:-}" ]; then
    [ -d "$SCENARIO_GO_CACHE_SEED" ] ||
      fail go-test "SCENARIO_GO_CACHE_SEED=$SCENARIO_GO_CACHE_SEED is not a directory"
    mkdir -p "$home/.cache/go-build"
    cp -R "$SCENARIO_GO_CACHE_SEED/." "$home/.cache/go-build/" ||
      fail go-test "cannot copy the go cache seed from $SCENARIO_GO_CACHE_SEED"
    seeded=$(files_under "$home/.cache/go-build")
    how=" (cache seeded with $seeded files)"
  fi
  local start=$SECONDS status=0
  (cd "$project/go-hello" && sandboxed go test -count=1 ./...) || status=$?
  [ "$status" = 0 ] || fail go-test "go test exited $status under the sandbox" "$log"
  grep -q '^ok.*example.com/hello' "$log" || fail go-test "go test printed no passing package" "$log"
  local cached broken
  cached=$(files_under "$home/.cache/go-build")
  [ "$cached" -gt "$seeded" ] ||
    fail go-test "go test passed but wrote nothing to ~/.cache/go-build$how" "$log"
  broken=$(sentinels_intact)
  [ -z "$broken" ] || fail go-test "go test changed files outside the roots: ${broken% }" "$log"
  ok go-test "go test passed, $((cached - seeded)) files written to ~/.cache/go-build$how ($((SECONDS - start)) s)"
}

scenario_cargo_build() {
  new_home cargo-build
  cp -R "$fixtures/cargo-hello" "$project/" || fail cargo-build "cannot copy the cargo fixture"
  chmod -R u+w "$project/cargo-hello"
  rm -rf "$project/cargo-hello/target"
  local registry=$home/.cargo/registry flags=() how
  if [ -n "${SCENARIO_CARGO_VENDOR:-}" ]; then
    how="vendored sources"
    flags=(--offline)
    # Configuration, not cache: the sandbox keeps it read-only.
    cat >"$home/.cargo/config.toml" <<EOF
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "$SCENARIO_CARGO_VENDOR"
EOF
  elif [ -n "${SCENARIO_CARGO_SEED:-}" ]; then
    how="offline, registry seeded"
    flags=(--offline)
    # Index and downloaded .crate files only: extracting the sources into
    # registry/src is left to the sandboxed build.
    [ -d "$SCENARIO_CARGO_SEED/registry/cache" ] ||
      fail cargo-build "SCENARIO_CARGO_SEED=$SCENARIO_CARGO_SEED has no registry/cache (fill it with cargo fetch)"
    cp -R "$SCENARIO_CARGO_SEED/registry/index" "$SCENARIO_CARGO_SEED/registry/cache" "$registry/" ||
      fail cargo-build "cannot copy the registry seed from $SCENARIO_CARGO_SEED"
  else
    how="online"
  fi
  local start=$SECONDS status=0
  (cd "$project/cargo-hello" && sandboxed cargo build "${flags[@]}") || status=$?
  if [ "$abi" = 1 ]; then
    # ABI 1 refuses renames across directories (EXDEV) even inside one root,
    # and rustc moves its .rmeta/.rlib so: the build must fail, saying why.
    [ "$status" = 101 ] ||
      fail cargo-build "cargo build ($how) exited $status on Landlock ABI 1, expected 101 (Invalid cross-device link)" "$log"
    grep -q 'Invalid cross-device link' "$log" ||
      fail cargo-build "cargo build failed on ABI 1 but not with \"Invalid cross-device link\"" "$log"
    # The granted half: the build did write its target dir before the rename.
    [ -d "$project/cargo-hello/target/debug" ] ||
      fail cargo-build "cargo build on ABI 1 wrote no target dir" "$log"
    ok cargo-build "cargo build ($how) failed with \"Invalid cross-device link\" (exit 101), as documented for Landlock ABI 1 (rustc renames across directories; Linux 5.19 lifts it)"
    return
  fi
  [ "$status" = 0 ] || fail cargo-build "cargo build ($how) exited $status under the sandbox" "$log"

  local bin=$project/cargo-hello/target/debug/cargo-hello out
  [ -x "$bin" ] || fail cargo-build "cargo build passed but $bin was not written" "$log"
  out=$("$bin" 2>&1)
  [ "$out" = "hello, 42" ] || fail cargo-build "the built binary printed '$out', not 'hello, 42'" "$log"

  local detail
  if [ -n "${SCENARIO_CARGO_VENDOR:-}" ]; then
    detail="built from vendored sources, target dir written"
  else
    # The dependency's sources are extracted by the build itself, in both
    # the online and the seeded variant. A glob that matches nothing stays
    # the pattern itself, which does not exist. (Not compgen: nixpkgs' bash
    # is built without readline and so without compgen.)
    local extracted=("$registry"/src/*/itoa-*/src/lib.rs) crates=("$registry"/cache/*/itoa-*.crate)
    [ -e "${extracted[0]}" ] ||
      fail cargo-build "cargo build passed but the dependency was not extracted to ~/.cargo/registry/src" "$log"
    if [ "$how" = online ]; then
      # Seeded, the .crate came with the seed: only online did the build write it.
      [ -e "${crates[0]}" ] ||
        fail cargo-build "no itoa .crate in ~/.cargo/registry/cache" "$log"
      [ -n "$(ls -A "$registry/index" 2>/dev/null)" ] ||
        fail cargo-build "online build wrote no registry index" "$log"
      detail="downloaded index and crate, extracted to ~/.cargo/registry/src, target dir written"
    else
      detail="extracted to ~/.cargo/registry/src, target dir written"
    fi
  fi
  local broken
  broken=$(sentinels_intact)
  [ -z "$broken" ] || fail cargo-build "cargo build changed files outside the roots: ${broken% }" "$log"
  ok cargo-build "cargo build passed ($how): $detail ($((SECONDS - start)) s)"
}

scenario_rm_rf_home() {
  new_home rm-rf-home
  mkdir -p "$project/src"
  printf 'work\n' >"$project/README"
  printf 'fn main() {}\n' >"$project/src/main.rs"
  mkdir -p "$home/.cache/go-build"
  printf 'cached\n' >"$home/.cache/go-build/entry"
  local status=0
  sandboxed rm -rf "$home" || status=$?
  [ -d "$home" ] || fail rm-rf-home "the home itself is gone" "$log"
  local broken
  broken=$(sentinels_intact)
  [ -z "$broken" ] || fail rm-rf-home "outside the roots: ${broken% }" "$log"
  [ "$status" != 0 ] || fail rm-rf-home "rm -rf ~ exited 0: it removed everything it tried to" "$log"
  # The granted side: the project and the caches are writable, so rm empties them.
  [ -z "$(ls -A "$project" 2>/dev/null)" ] ||
    fail rm-rf-home "the project (a granted root) was not emptied: $(find "$project" -mindepth 1 -maxdepth 1 -printf '%f ')" "$log"
  [ ! -e "$home/.cache/go-build/entry" ] || fail rm-rf-home "~/.cache/go-build/entry (a granted cache) survived" "$log"
  ok rm-rf-home "rm exited $status; $(sentinel_count) sentinels outside the roots intact, project and ~/.cache emptied"
}

scenario_write_outside_denied() {
  new_home write-outside-denied
  printf 'kept\n' >"$project/existing.txt"
  ln -s "$home/Documents/thesis.txt" "$project/thesis-link"
  ln -s "$project/existing.txt" "$project/inside-link"
  local name=write-outside-denied

  # refused_with ERROR WHAT CMD...: CMD, sandboxed, must exit non-zero having
  # printed ERROR exactly once itself (EACCES, or EXDEV for the hard link): a
  # refusal, not some other failure. Only the attempt's own lines count, not
  # the command line the log records before them (its paths name this
  # scenario).
  refused_with() {
    local error=$1 what=$2 before status=0 count
    shift 2
    before=$(wc -l <"$log")
    sandboxed "$@" || status=$?
    [ "$status" != 0 ] || fail $name "$what exited 0" "$log"
    count=$(tail -n +"$((before + 2))" "$log" | grep -cF -- "$error")
    [ "$count" = 1 ] ||
      fail $name "$what exited $status printing \"$error\" $count times, expected once" "$log"
  }

  # Denied: each attempt must fail AND leave the filesystem as it was.
  refused_with 'Permission denied' "appending to ~/.bashrc" \
    sh -c 'echo pwned >>"$1"' sh "$home/.bashrc"
  refused_with 'Permission denied' "creating ~/new-file" \
    sh -c 'echo pwned >"$1"' sh "$home/new-file"
  [ ! -e "$home/new-file" ] || fail $name "~/new-file was created" "$log"
  refused_with 'Permission denied' "writing through project/thesis-link (-> ~/Documents/thesis.txt)" \
    sh -c 'echo pwned >"$1"' sh "$project/thesis-link"
  refused_with 'Invalid cross-device link' "hard-linking ~/Documents/thesis.txt into the project" \
    ln "$home/Documents/thesis.txt" "$project/hard-link"
  [ ! -e "$project/hard-link" ] || fail $name "a hard link to ~/Documents/thesis.txt appeared in the project" "$log"
  refused_with 'Permission denied' "mkdir ~/newdir" mkdir "$home/newdir"
  [ ! -e "$home/newdir" ] || fail $name "~/newdir was created" "$log"
  local broken
  broken=$(sentinels_intact)
  [ -z "$broken" ] || fail $name "${broken% }" "$log"

  # Granted: the same kinds of writes inside the project succeed.
  sandboxed sh -c 'echo created >"$1"' sh "$project/new-file" ||
    fail $name "creating project/new-file failed" "$log"
  [ "$(cat "$project/new-file" 2>/dev/null)" = created ] || fail $name "project/new-file does not hold what was written" "$log"
  sandboxed mkdir "$project/newdir" || fail $name "mkdir project/newdir failed" "$log"
  [ -d "$project/newdir" ] || fail $name "project/newdir was not created" "$log"
  sandboxed sh -c 'echo appended >>"$1"' sh "$project/existing.txt" ||
    fail $name "appending to project/existing.txt failed" "$log"
  sandboxed sh -c 'echo via-link >>"$1"' sh "$project/inside-link" ||
    fail $name "writing through project/inside-link (-> project/existing.txt) failed" "$log"
  [ "$(cat "$project/existing.txt")" = "$(printf 'kept\nappended\nvia-link')" ] ||
    fail $name "project/existing.txt does not hold what was written" "$log"
  sandboxed ln "$project/new-file" "$project/new-file-link" ||
    fail $name "hard-linking inside the project failed" "$log"
  [ "$project/new-file" -ef "$project/new-file-link" ] || fail $name "the hard link inside the project is missing" "$log"

  ok $name "denied and unchanged: ~/.bashrc append, new file in ~, write via symlink out, hard link in, mkdir in ~; granted: the same inside the project"
}

# --- Landlock disabled -------------------------------------------------------

scenario_probe_refuses() {
  new_home probe-refuses
  local status=0
  "$sandbox" probe >"$log" 2>&1 || status=$?
  [ "$status" = 3 ] || fail probe-refuses "probe exited $status, expected 3 (Landlock unavailable)" "$log"
  local reason
  reason=$(sed -n 's/^reason: *//p' "$log" | head -n1)
  case $reason in
    *disabled* | *"not built"*) ;;
    *) fail probe-refuses "probe names no reason (disabled at boot / not built), got '$reason'" "$log" ;;
  esac
  local json
  status=0
  json=$("$sandbox" probe --json 2>>"$log") || status=$?
  printf '%s\n' "$json" >>"$log"
  [ "$status" = 3 ] || fail probe-refuses "probe --json exited $status, expected 3" "$log"
  # grep reads it all: `grep -q` leaving early could fail the pipeline
  # (pipefail) through the writer's SIGPIPE.
  printf '%s' "$json" | tr -d ' \n' | grep '"supported":false' >/dev/null ||
    fail probe-refuses "probe --json does not say \"supported\": false" "$log"
  if [ -n "${SCENARIO_EXPECT_REASON:-}" ]; then
    printf '%s' "$json" | tr -d ' \n' | grep "\"reason\":\"$SCENARIO_EXPECT_REASON\"" >/dev/null ||
      fail probe-refuses "probe --json does not give the reason \"$SCENARIO_EXPECT_REASON\" (SCENARIO_EXPECT_REASON)" "$log"
  fi
  ok probe-refuses "probe exited 3, reason: $reason"
}

scenario_run_refuses() {
  new_home run-refuses
  local status=0 marker=$project/marker
  sandboxed sh -c 'touch "$1"' sh "$marker" || status=$?
  [ "$status" = 3 ] || fail run-refuses "run exited $status, expected 3 (refused)" "$log"
  [ ! -e "$marker" ] || fail run-refuses "the command ran unconfined: $marker exists" "$log"
  # run's own words, not the command line the log starts with.
  tail -n +2 "$log" | grep 'refusing to run unconfined: .*[Ll]andlock' >/dev/null ||
    fail run-refuses "the refusal does not say it refuses to run unconfined, naming Landlock" "$log"
  ok run-refuses "run exited 3 and the command never ran (no marker)"
}

scenario_policy_reports() {
  new_home policy-reports
  local status=0
  env -i "${base_env[@]}" "HOME=$home" \
    "$sandbox" policy --project "$project" --state "$state" >"$log" 2>&1 || status=$?
  [ "$status" = 0 ] || fail policy-reports "policy exited $status" "$log"
  grep -qF "$project" "$log" || fail policy-reports "policy does not list the project $project" "$log"
  grep -qF "$state" "$log" || fail policy-reports "policy does not list the state dir $state" "$log"
  ok policy-reports "policy lists the project and state dir"
}

if [ "$mode" = enabled ]; then
  # The ABI every scenario goes by, as the library probes it.
  abi=$("$sandbox" probe --json 2>/dev/null | tr -d ' \n' | sed -n 's/.*"abi":\([0-9][0-9]*\).*/\1/p')
  [ -n "$abi" ] || fail setup "$sandbox probe --json printed no \"abi\""
fi
mapfile -t scenarios < <(scenarios_of "$mode")
for scenario in "${scenarios[@]}"; do
  "scenario_${scenario//-/_}"
done
summary
