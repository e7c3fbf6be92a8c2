#!/usr/bin/env bash
# The shared scenarios under a bash built the way nixpkgs builds `pkgs.bash`:
# without readline, so without the programmable-completion builtins
# (compgen, complete, compopt) and bind. The NixOS VM tests and `nix develop`
# run tests/scenarios/scenarios.sh with such a bash; this runs it so on any
# Debian machine.
#
# Usage: tests/scenarios/readline-less-bash.sh path
#          builds the bash (or reuses the cached one) and prints its path
#        tests/scenarios/readline-less-bash.sh scenarios MODE
#          runs `scenarios.sh MODE` under it, with its directory first on
#          PATH (as pkgs.bash is in the guest); SANDBOX, SCENARIO_ROOT and
#          the other SCENARIO_* variables as scenarios.sh documents them
#
# How: Debian's bash source (`apt-get source`, with a deb-src source list,
# apt state and cache of this script's own, never the host's; the package
# lists are refreshed when older than a day), configured with the flags of
# nixpkgs' pkgs/shells/bash/5.nix for a native Linux build with
# `interactive = false`: `--without-bash-malloc --disable-readline`, and the
# defines it passes in NIX_CFLAGS_COMPILE (PATH defaults to /no-such-path
# when unset, as under Nix). Only the `bash` binary is made. It is kept by
# suite and source version, so a later run with the same version reuses it.
# Before it is used, `type` must fail for compgen, complete, compopt and
# bind in it (and succeed in the host's bash): the proof it is the right one.
#
# Environment:
#   BASH_SOURCE_SUITE  the Debian suite whose bash source is built (default
#                      trixie: bash 5.2, the series nixos-25.05's pkgs.bash is)
#   BASH_BUILD_CACHE   where the apt state and the builds go
#                      (default ${XDG_CACHE_HOME:-$HOME/.cache}/strument-sandbox/bash)
#   VM_MIRROR, VM_KEYRING, VM_APT_MAX_AGE
#                      the archive, its keyring and the lists' lifetime, as
#                      for tests/vm/fetch-kernel.sh
#
# Needs: apt-get, dpkg-source (dpkg-dev), a C compiler, make, bison (the
# Debian patches touch parse.y), debian-archive-keyring.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
suite=${BASH_SOURCE_SUITE:-trixie}

die() {
  printf 'readline-less-bash[%s]: %s\n' "$suite" "$*" >&2
  exit 1
}
note() { printf 'readline-less-bash[%s]: %s\n' "$suite" "$*" >&2; }
usage() {
  echo "usage: $0 path" >&2
  echo "       $0 scenarios enabled|disabled" >&2
  exit 2
}

case ${1:-} in
  path) [ $# = 1 ] || usage ;;
  scenarios) [ $# = 2 ] || usage ;;
  *) usage ;;
esac

# The builtins bash leaves out without readline (config-bot.h drops
# PROGRAMMABLE_COMPLETION without READLINE; bind needs READLINE itself).
readline_only=(compgen complete compopt bind)

for tool in apt-get dpkg-source cc make bison flock; do
  command -v "$tool" >/dev/null ||
    die "$tool not found: install it (Debian: apt-get install apt dpkg-dev build-essential bison util-linux)"
done
# shellcheck source=../lib/private-apt.sh
. "$here/../lib/private-apt.sh"
private_apt_settings "${BASH_BUILD_CACHE:-}" bash

builds=$cache/builds
mkdir -p "$builds" || die "cannot create the cache in $cache (set BASH_BUILD_CACHE)"
# Only the Sources index of main.
private_apt "$cache/apt/$suite" "deb-src [signed-by=$keyring] $mirror $suite main"
private_apt_update "$mirror $suite (deb-src)" "$max_age"

version=$(apt-cache "${apt_opts[@]}" showsrc --only-source bash 2>/dev/null |
  sed -n 's/^Version: //p' | sort -V | tail -n1)
[ -n "$version" ] || die "the archive lists no bash source in $suite ($mirror)"

dest=$builds/${suite}_$version
bash_bin=$dest/bin/bash
if [ ! -x "$bash_bin" ]; then
  note "building bash $version from Debian's source without readline into $dest"
  staging=$builds/.staging-${suite}_$version
  rm -rf "$staging" "$dest"
  mkdir -p "$staging"
  (cd "$staging" && apt-get -q "${apt_opts[@]}" source "bash=$version") >"$staging/source.log" 2>&1 ||
    die "apt-get source bash=$version failed: $(grep -E '^(W|E):|error' "$staging/source.log" | head -n3 | tr '\n' ' ')"
  src=
  for candidate in "$staging"/bash-*/; do
    [ -f "$candidate/configure" ] && src=${candidate%/} && break
  done
  [ -n "$src" ] || die "the bash source of $suite unpacked to no directory with a configure script (see $staging/source.log)"
  # nixpkgs' configureFlags for a native Linux non-interactive bash, and its
  # NIX_CFLAGS_COMPILE defines (pkgs/shells/bash/5.nix).
  defines=(
    '-DSYS_BASHRC=\"/etc/bashrc\"' '-DSYS_BASH_LOGOUT=\"/etc/bash_logout\"'
    '-DDEFAULT_PATH_VALUE=\"/no-such-path\"' '-DSTANDARD_UTILS_PATH=\"/no-such-path\"'
    -DNON_INTERACTIVE_LOGIN_SHELLS -DSSH_SOURCE_BASHRC
  )
  (cd "$src" &&
    ./configure --without-bash-malloc --disable-readline CPPFLAGS="${defines[*]}" &&
    make -j"$(nproc)" bash) >"$staging/build.log" 2>&1 ||
    die "building bash $version failed: $(tail -n5 "$staging/build.log" | tr '\n' ' ') (whole log: $staging/build.log)"
  mkdir -p "$staging/keep/bin"
  cp "$src/bash" "$staging/keep/bin/bash"
  grep -E '^ *\$ \./configure' "$src/config.log" | head -n1 >"$staging/keep/configured" || true
  mv "$staging/keep" "$dest"
  rm -rf "$staging"
  # Other versions of this suite's source are no longer the newest.
  for old in "$builds/${suite}_"*; do
    [ "$old" = "$dest" ] || rm -rf "$old"
  done
fi

# The proof: the builtins are gone here, and the same check finds them in
# the host's bash (so a check that could never succeed proves nothing).
for builtin in "${readline_only[@]}"; do
  if "$bash_bin" -c "type $builtin" >/dev/null 2>&1; then
    die "$bash_bin has the builtin $builtin: it was built with readline (rm -r $dest to rebuild)"
  fi
  # shellcheck disable=SC2016 # $1 expands in the child bash
  bash -c 'type "$1"' bash "$builtin" >/dev/null 2>&1 ||
    die "the host's bash ($(command -v bash)) lacks $builtin too, so its absence in $bash_bin proves nothing"
done
note "$("$bash_bin" -c 'echo "bash $BASH_VERSION"') at $bash_bin: no ${readline_only[*]}"

case $1 in
  path) printf '%s\n' "$bash_bin" ;;
  scenarios)
    PATH=$(dirname "$bash_bin"):$PATH
    export PATH
    exec "$bash_bin" "$here/scenarios.sh" "$2"
    ;;
esac
