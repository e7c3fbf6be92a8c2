# shellcheck shell=bash
# An apt of the test tiers' own: a source list, package state and cache in a
# directory of the caller's, never the host's, so fetching a Debian kernel
# (tests/vm/fetch-kernel.sh) or a source package (tests/scenarios/
# readline-less-bash.sh) neither needs nor touches the machine's apt set-up.
# Sourced by both; they define `die` and `note` (their own message prefix).
#
#   private_apt_settings CACHE SUBDIR
#       sets $mirror, $keyring (dying unless it is readable), $max_age
#       (VM_MIRROR, VM_KEYRING, VM_APT_MAX_AGE, or Debian's defaults) and
#       $cache: CACHE, or ${XDG_CACHE_HOME:-$HOME/.cache}/strument-sandbox/SUBDIR
#       when CACHE is empty.
#   private_apt DIR LINE [OPTION...]
#       writes LINE (one sources.list line) to DIR/sources.list and sets the
#       array $apt_opts: the options that point apt-get and apt-cache at DIR,
#       plus each OPTION given (`-o` is added). Takes DIR/lock for the rest
#       of the caller's life (one fetch per DIR at a time).
#   private_apt_update WHAT MAX_AGE
#       `apt-get update` when the lists are older than MAX_AGE seconds; on a
#       failure the older lists are used with a note, and with none the
#       caller dies naming WHAT (e.g. "http://deb.debian.org/debian trixie").

private_apt_settings() {
  mirror=${VM_MIRROR:-http://deb.debian.org/debian}
  keyring=${VM_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
  [ -r "$keyring" ] || die "the archive keyring $keyring is missing: apt-get install debian-archive-keyring (or set VM_KEYRING)"
  [ -n "${1:-}${XDG_CACHE_HOME:-}${HOME:-}" ] ||
    die "neither HOME nor XDG_CACHE_HOME is set: set one (the lists and kernels are cached beneath it)"
  cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/strument-sandbox/$2}
  max_age=${VM_APT_MAX_AGE:-86400}
}

private_apt() {
  apt_dir=$1
  local line=$2 option
  shift 2
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" ||
    die "cannot create apt's state in $apt_dir"
  exec 9>"$apt_dir/lock"
  flock 9
  printf '%s\n' "$line" >"$apt_dir/sources.list"
  : >>"$apt_dir/status"
  apt_opts=(
    -o "Dir::Etc::SourceList=$apt_dir/sources.list"
    -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::State::status=$apt_dir/status"
    -o "Dir::Cache=$apt_dir"
    -o "Dir::Cache::archives=$apt_dir/archives"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
    -o Acquire::Languages=none
    # The lists and downloads are this user's files; apt's _apt user may not reach them.
    -o APT::Sandbox::User="$(id -un)"
  )
  for option in "$@"; do
    apt_opts+=(-o "$option")
  done
}

private_apt_update() {
  local what=$1 max_age=$2 stamp=$apt_dir/updated now
  now=$(date +%s)
  if [ -f "$stamp" ] && [ $((now - $(stat -c %Y "$stamp"))) -lt "$max_age" ]; then
    return 0
  fi
  if apt-get -qq "${apt_opts[@]}" update >"$apt_dir/update.log" 2>&1 &&
    ! grep -qE '^(W|E):' "$apt_dir/update.log"; then
    touch "$stamp"
  elif [ -f "$stamp" ]; then
    note "apt-get update failed, using the lists of $(date -ud "@$(stat -c %Y "$stamp")" +%FT%TZ): $(grep -E '^(W|E):' "$apt_dir/update.log" | head -n2 | tr '\n' ' ')"
  else
    die "apt-get update of $what failed: $(grep -E '^(W|E):' "$apt_dir/update.log" | head -n3 | tr '\n' ' ')"
  fi
}
