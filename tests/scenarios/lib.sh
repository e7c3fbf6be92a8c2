# shellcheck shell=bash
# The shell pieces the scenarios (tests/scenarios/scenarios.sh) and the
# portable VM tier's checks (tests/vm/checks/) share, sourced by both:
#
#   ok NAME DETAIL / not_ok NAME DETAIL / summary
#                             print an `ok NAME: DETAIL` or `FAIL NAME: DETAIL`
#                             result line and count it; `N passed, M failed`
#   scenario_mode ARG         is ARG a mode (enabled|disabled)?
#   resolve_sandbox           $SANDBOX (default: strument-sandbox on PATH) as
#                             an absolute path, or nothing
#   missing_tool TOOL PKG     a message naming the Debian package when TOOL is
#                             not on PATH, nothing when it is
#   rust_toolchain            the rustc and cargo of the toolchain itself
#                             (not rustup's proxies), one a line
#   granted_temp_root SANDBOX DIR
#                             the temp root the sandbox grants that DIR is
#                             under, nothing when none: the binary says which
#                             roots are temp (policy, origin `temp`), so the
#                             list is written once, in src/writable.rs
#   plant_sentinels HOME / broken_sentinels HOME
#                             the sentinels of tests/scenarios/sentinels.tsv
#                             (also read by the Rust FakeHome): write them,
#                             and list the ones gone or changed
#
# Sourcing it defines these and sets $scenarios_lib_dir and the tallies
# $passed and $failed (0).

scenarios_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

passed=0
failed=0

# ok NAME DETAIL: a passed result.
ok() {
  passed=$((passed + 1))
  printf 'ok %s: %s\n' "$1" "$2"
}

# not_ok NAME DETAIL: a failed result (the caller decides whether to go on).
not_ok() {
  failed=$((failed + 1))
  printf 'FAIL %s: %s\n' "$1" "$2"
}

# summary: the closing line of a run, which every tier looks for.
summary() { printf '%d passed, %d failed\n' "$passed" "$failed"; }

# scenario_mode ARG: status 0 when ARG is one of the scenarios' modes.
scenario_mode() {
  case ${1:-} in
    enabled | disabled) return 0 ;;
    *) return 1 ;;
  esac
}

# resolve_sandbox: prints $SANDBOX (default: strument-sandbox on PATH) as an
# absolute path; prints nothing and fails when it is not an executable.
resolve_sandbox() {
  local sandbox=${SANDBOX:-strument-sandbox}
  case $sandbox in
    */*) [ -x "$sandbox" ] || return 1
      printf '%s/%s\n' "$(cd "$(dirname "$sandbox")" && pwd -P)" "$(basename "$sandbox")" ;;
    *) command -v "$sandbox" ;;
  esac
}

# missing_tool TOOL PACKAGE: prints why TOOL cannot be used (naming the
# Debian package) and fails when TOOL is not on PATH; silent otherwise.
missing_tool() {
  command -v "$1" >/dev/null && return 1
  printf '%s not found on PATH: install it (Debian: apt-get install %s)\n' "$1" "$2"
}

# rust_toolchain: prints the rustc and the cargo to run, one a line. rustup's
# proxies pick a toolchain from RUSTUP_HOME (default ~/.rustup, which a fake
# home lacks): when rustc names a sysroot holding both, its binaries.
rust_toolchain() {
  local rustc cargo sysroot
  rustc=$(command -v rustc) && cargo=$(command -v cargo) || return 1
  sysroot=$(rustc --print sysroot 2>/dev/null) || sysroot=
  if [ -n "$sysroot" ] && [ -x "$sysroot/bin/rustc" ] && [ -x "$sysroot/bin/cargo" ]; then
    rustc=$sysroot/bin/rustc
    cargo=$sysroot/bin/cargo
  fi
  printf '%s\n%s\n' "$rustc" "$cargo"
}

# granted_temp_root SANDBOX DIR: prints the temporary root the sandbox would
# grant that the existing directory DIR lies under (as the sandbox names it),
# nothing when none; fails when DIR does not exist or the sandbox cannot say
# (a caller must not take that for "none"). The sandbox grants temp roots whole: a fake home under
# one would be writable through that grant and prove nothing. The roots come
# from `SANDBOX policy`, whose lines tag them `[temp, …]` (with TMPDIR as the
# environment has it; the project is / so that none of them is the project);
# each is compared as given and resolved.
granted_temp_root() {
  local sandbox=$1 dir policy temp form
  dir=$(cd "$2" 2>/dev/null && pwd -P) || return 1
  policy=$("$sandbox" policy --project / 2>/dev/null) || return 1
  while read -r temp; do
    for form in "$temp" "$(cd "$temp" 2>/dev/null && pwd -P)"; do
      if [ -z "$form" ] || [ "$form" = / ]; then continue; fi
      case $dir/ in
        "${form%/}"/*)
          printf '%s\n' "$temp"
          return 0
          ;;
      esac
    done
  done < <(sed -nE 's/^(granted|skipped) +[a-z]+ +(\/[^ ]*)  \[temp[],].*/\2/p' <<<"$policy")
}

# sentinel_rows: the rows of sentinels.tsv, comments and blank lines left out.
sentinel_rows() { grep -v -e '^#' -e '^$' "$scenarios_lib_dir/sentinels.tsv"; }

# sentinel_count: how many sentinels a fake home holds.
sentinel_count() { sentinel_rows | wc -l | tr -d ' '; }

# plant_sentinels HOME: writes every sentinel into HOME with its mode.
plant_sentinels() {
  local path mode text
  while IFS=$'\t' read -r path mode text; do
    mkdir -p "$(dirname "$1/$path")" &&
      printf '%b' "$text" >"$1/$path" &&
      chmod "$mode" "$1/$path" || return 1
  done < <(sentinel_rows)
}

# broken_sentinels HOME: prints `~/PATH is gone; ` or `~/PATH was modified; `
# for each sentinel that is not as plant_sentinels wrote it; nothing when
# every one is intact.
# shellcheck disable=SC2088 # messages name the paths as ~/...
broken_sentinels() {
  local path mode text
  while IFS=$'\t' read -r path mode text; do
    if [ ! -f "$1/$path" ]; then
      printf '~/%s is gone; ' "$path"
    elif ! cmp -s "$1/$path" <(printf '%b' "$text"); then
      printf '~/%s was modified; ' "$path"
    fi
  done < <(sentinel_rows)
}
