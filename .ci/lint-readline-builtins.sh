#!/usr/bin/env bash
# Fails on any readline-only bash builtin used as a command in the shell
# every tier runs: compgen, complete, compopt and bind exist only in a bash
# built with readline. nixpkgs' pkgs.bash is built with --disable-readline
# (pkgs/shells/bash/5.nix), and the NixOS VM tests and `nix develop` run the
# scenarios with it, where each of these is "command not found".
#
# Usage: .ci/lint-readline-builtins.sh [PATH...]
#
# Each PATH is a file or a directory (searched for *.sh and *.nix files and
# for files whose first line is a sh or bash #!). Default: tests/scenarios,
# tests/vm, tests/lib, nix, nixos-tests and flake.nix: the scripts, and the shell text
# the Nix files generate (checked line by line, comments left out).
#
# "Used as a command": the name at the start of a line or after ; & | ( {
# ! ` $( or a quote, or after then, do, else, elif, if, while, until, time,
# command, builtin, exec, eval, env, xargs, sudo or nohup, with any
# assignments (FOO=1) between; and followed by a
# blank, the end of the line or ; & | ) `, but not by `=` (a Nix attribute
# or a shell assignment); a ( right after = opens an array, not a subshell. `command -v compgen` and `type compgen`, which only
# ask, are not uses; `s.bind(...)` and `$dest/complete` are not commands.
#
# Output: a `FILE:LINE: NAME ...` line for each use; exit status 1 when there
# is one, 0 (with a count of the files checked) when there is none.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
if [ $# = 0 ]; then
  cd "$root"
  set -- tests/scenarios tests/vm tests/lib nix nixos-tests flake.nix
fi

files=()
for path in "$@"; do
  if [ -d "$path" ]; then
    while IFS= read -r -d '' file; do
      case $file in
        *.sh | *.nix) files+=("$file") ;;
        *) case $(head -n1 "$file" 2>/dev/null) in
          '#!'*sh*) files+=("$file") ;;
        esac ;;
      esac
    done < <(find "$path" -type f -print0 | sort -z)
  elif [ -f "$path" ]; then
    files+=("$path")
  else
    echo "lint-readline-builtins: $path is neither a file nor a directory" >&2
    exit 2
  fi
done
[ "${#files[@]}" -gt 0 ] || {
  echo "lint-readline-builtins: no shell or Nix file under $*" >&2
  exit 2
}

status=0
awk '
  BEGIN {
    names = "(compgen|complete|compopt|bind)"
    # \002 marks the start of a line (mawk mishandles ^ in a group).
    before = "([\002;&|({!`\"'\'']|\\$\\(|(then|do|else|elif|if|while|until|time|command|builtin|exec|eval|env|xargs|sudo|nohup)[ \t])"
    # Assignments may come between: FOO=1 compgen, env FOO=1 compgen.
    assigns = "[ \t]*([A-Za-z_][A-Za-z0-9_]*=[^ \t()]*[ \t]+)*"
    use = before assigns "[ \t]*" names "([ \t;&|)`]|$)"
    found = 0
  }
  {
    line = $0
    # Comments: a # at the start or after a blank, to the end of the line.
    sub(/(^|[ \t])#.*/, "", line)
    line = "\002" line
    while (match(line, use)) {
      hit = substr(line, RSTART, RLENGTH)
      rest = substr(line, RSTART + RLENGTH)
      name = hit
      sub(/[ \t;&|)`]$/, "", name)
      sub(/.*[^a-z]/, "", name)
      tail = rest
      sub(/^[ \t]*/, "", tail)
      array = substr(hit, 1, 1) == "(" && RSTART > 1 && substr(line, RSTART - 1, 1) == "="
      if (substr(tail, 1, 1) != "=" && !array) {
        printf "%s:%d: %s is a readline-only builtin, absent from nixpkgs'\'' bash (--disable-readline): %s\n", FILENAME, FNR, name, $0
        found++
      }
      # Go on from the character after the name, which may begin the next
      # use (;compgen); \001 is no start of a line.
      line = "\001" substr(line, RSTART + RLENGTH - 1)
    }
  }
  END { exit found > 0 }
' "${files[@]}" || status=$?

case $status in
  0) echo "lint-readline-builtins: ${#files[@]} files, no compgen, complete, compopt or bind used as a command" ;;
  1) echo "lint-readline-builtins: use globs and arrays instead (a glob that matches nothing stays the pattern, which does not exist: x=(\"\$dir\"/*.crate); [ -e \"\${x[0]}\" ])" >&2 ;;
  *) echo "lint-readline-builtins: awk failed (status $status)" >&2 ;;
esac
exit "$status"
