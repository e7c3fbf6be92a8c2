#!/usr/bin/env bash
# Fetch the newest stock kernel of one Debian suite for the portable VM tier,
# by package name, from Debian's archive: never installed, only unpacked.
#
# Usage: tests/vm/fetch-kernel.sh SUITE        (bullseye, bookworm, trixie, sid, ...)
#
# Prints shell assignments for run-vm.sh:
#   KERNEL=<the vmlinuz>  MODULES=<its /lib/modules/VERSION>  VERSION=<uname -r>
#   PACKAGE=<the versioned package>  PACKAGE_VERSION=<its Debian version>
#
# How: an apt source list, state and cache of the tier's own (one per suite,
# never the host's), `apt-get update` when the lists are older than a day,
# `apt-get download` of the versioned image that linux-image-amd64 depends on
# (and, from forky/sid on, of the linux-binary-* and linux-modules-* packages
# it is split into), `dpkg-deb -x`, then only the kernel image and the module
# directories the guest loads from (fs/9p, fs/netfs, fs/fscache, fs/overlayfs,
# net/9p, net/unix for unix_diag, drivers/virtio; decompressed, with a
# modules.dep made by depmod)
# are kept, keyed by package and version. A later run with the
# same newest version reuses them without unpacking again.
#
# Environment:
#   VM_CACHE        where kernels and apt state go
#                   (default ${XDG_CACHE_HOME:-$HOME/.cache}/strument-sandbox/vm)
#   VM_MIRROR       the Debian archive (default http://deb.debian.org/debian,
#                   what Debian's own apt sources name)
#   VM_KEYRING      the archive keyring (default /usr/share/keyrings/debian-archive-keyring.gpg)
#   VM_APT_MAX_AGE  seconds before the package lists count as stale (default 86400)
#
# Exit status 0 with the assignments on stdout; otherwise a message on stderr
# naming the suite and package that could not be fetched.
set -euo pipefail

suite=${1:-}
[ -n "$suite" ] || {
  echo "usage: $0 SUITE (bullseye, bookworm, trixie, sid)" >&2
  exit 2
}

die() {
  printf 'fetch-kernel[%s]: %s\n' "$suite" "$*" >&2
  exit 1
}
note() { printf 'fetch-kernel[%s]: %s\n' "$suite" "$*" >&2; }

# depmod lives in /usr/sbin, often off an ordinary user's PATH.
PATH=$PATH:/usr/sbin:/sbin
for tool in apt-get apt-cache dpkg-deb flock xz depmod; do
  command -v "$tool" >/dev/null || die "$tool not found: install it (Debian: apt-get install apt dpkg util-linux xz-utils kmod)"
done
# shellcheck source=../lib/private-apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/private-apt.sh"
private_apt_settings "${VM_CACHE:-}" vm

kernels=$cache/kernels
mkdir -p "$kernels" || die "cannot create the cache in $cache (set VM_CACHE)"
# Only the Packages index of main: no translations, no DEP-11 metadata. One
# fetch per suite at a time (two guests of one suite may start together).
private_apt "$cache/apt/$suite" \
  "deb [arch=amd64 target=Packages signed-by=$keyring] $mirror $suite main" \
  APT::Architecture=amd64
acache() { apt-cache "${apt_opts[@]}" "$@"; }
# The newest version the archive serves: refresh lists older than max_age.
private_apt_update "$mirror $suite" "$max_age"

# linux-image-amd64 -> linux-image-VERSION-amd64 (the kernel it stands for).
package=$(acache depends linux-image-amd64 2>/dev/null |
  sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
[ -n "$package" ] ||
  die "the archive serves no versioned kernel behind linux-image-amd64 in $suite ($mirror)"
package_version=$(acache show --no-all-versions "$package" 2>/dev/null | sed -n 's/^Version: //p' | head -n1)
[ -n "$package_version" ] || die "the archive lists $package in $suite but no version for it"
# From forky/sid on the image is a metapackage over linux-binary-* and linux-modules-*.
depends=$(acache show --no-all-versions "$package" | sed -n 's/^Depends: //p' | tr ',' '\n')
packages=("$package")
while read -r dep _; do
  case $dep in linux-binary-[0-9]* | linux-modules-[0-9]*) packages+=("$dep") ;; esac
done <<<"$depends"

# The suffix names the set of modules kept: a cache made before unix_diag
# (which the connect supervisor asks what a command's own sockets bound)
# was kept is made again.
key=${package}_${package_version}_unix-diag
dest=$kernels/$key
if [ ! -f "$dest/complete" ]; then
  note "unpacking ${packages[*]} ($package_version) into $dest"
  staging=$kernels/.staging-$key
  rm -rf "$staging" "$dest"
  mkdir -p "$staging/debs" "$staging/root"
  (cd "$staging/debs" && apt-get -qq "${apt_opts[@]}" download "${packages[@]}") >"$staging/download.log" 2>&1 ||
    die "the archive did not serve ${packages[*]} for $suite: $(grep -E '^(W|E):' "$staging/download.log" | head -n3 | tr '\n' ' ')"
  for deb in "$staging"/debs/*.deb; do
    dpkg-deb -x "$deb" "$staging/root" || die "dpkg-deb -x $deb failed"
  done
  image=
  for candidate in "$staging"/root/boot/vmlinuz-* "$staging"/root/usr/lib/modules/*/vmlinuz "$staging"/root/lib/modules/*/vmlinuz; do
    [ -f "$candidate" ] && image=$candidate && break
  done
  [ -n "$image" ] || die "${packages[*]} ($suite) hold no kernel image (boot/vmlinuz-* or lib/modules/*/vmlinuz)"
  case $image in
    */boot/vmlinuz-*) version=${image##*/vmlinuz-} ;;
    *) version=$(basename "$(dirname "$image")") ;;
  esac
  moddir=
  for candidate in "$staging/root/lib/modules/$version" "$staging/root/usr/lib/modules/$version"; do
    [ -d "$candidate/kernel" ] && moddir=$candidate && break
  done
  [ -n "$moddir" ] || die "${packages[*]} ($suite) hold no modules for $version"
  keep=$staging/keep/lib/modules/$version
  mkdir -p "$keep"
  mv "$image" "$staging/keep/vmlinuz"
  for file in modules.builtin modules.builtin.modinfo modules.order; do
    [ -f "$moddir/$file" ] && cp "$moddir/$file" "$keep/"
  done
  for sub in fs/9p fs/netfs fs/fscache fs/overlayfs net/9p net/unix drivers/virtio; do
    if [ -d "$moddir/kernel/$sub" ]; then
      mkdir -p "$keep/kernel/$sub"
      cp -R "$moddir/kernel/$sub/." "$keep/kernel/$sub/"
    fi
  done
  # busybox insmod cannot read compressed modules: unpack them once, here.
  find "$keep/kernel" -name '*.ko.xz' -exec xz -d {} + ||
    die "cannot decompress the modules of $package (apt-get install xz-utils)"
  find "$keep/kernel" -name '*.ko.zst' -exec zstd -q --rm -d {} + ||
    die "cannot decompress the modules of $package (apt-get install zstd)"
  # The packages leave modules.dep to depmod at install time: make it here.
  depmod -b "$staging/keep" "$version" 2>"$staging/depmod.log" ||
    die "depmod of $package failed: $(head -n3 "$staging/depmod.log")"
  printf '%s\n' "$version" >"$staging/keep/version"
  printf '%s %s %s\n' "$suite" "$package" "$package_version" >"$staging/keep/complete"
  mv "$staging/keep" "$dest"
  rm -rf "$staging"
  # Older versions of this suite's kernel are no longer the newest: drop them.
  for old in "$kernels/${package%%-[0-9]*}"*; do
    if [ "$old" != "$dest" ] && [ -f "$old/complete" ]; then
      read -r old_suite _ <"$old/complete"
      if [ "$old_suite" = "$suite" ]; then rm -rf "$old"; fi
    fi
  done
fi

version=$(cat "$dest/version")
printf 'KERNEL=%q\nMODULES=%q\nVERSION=%q\nPACKAGE=%q\nPACKAGE_VERSION=%q\n' \
  "$dest/vmlinuz" "$dest/lib/modules/$version" "$version" "$package" "$package_version"
