#!/usr/bin/env bash
# `run --explain-denials` for an ordinary user on ABI 2, which has no audit
# records: the command is traced by the unconfined `run`, and every refused
# write is named with the --allow that would grant it. A command renaming
# files between directories of the project reports nothing; a cargo build
# with a dependency passes and reports only cargo's last-use journal in
# ~/.cargo, which the sandbox refuses on purpose (it sits beside ~/.cargo/bin).
# shellcheck source=tests/vm/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

sandbox=$(resolve_sandbox) || fail "SANDBOX=${SANDBOX:-} is not an executable"
[ "$(id -u)" != 0 ] || fail "this check must run as an ordinary user, not root"
for tool in cargo:cargo rustc:rustc; do
  missing=$(missing_tool "${tool%%:*}" "${tool#*:}") && fail "$missing"
done
[ -d "${SCENARIO_CARGO_SEED:-}/registry/cache" ] ||
  fail "SCENARIO_CARGO_SEED=${SCENARIO_CARGO_SEED:-} has no registry/cache (run-vm.sh fills it with cargo fetch)"

home=$CHECK_DIR/home
project=$home/project
mkdir -p "$project" "$home/.config" "$home/.cargo/registry" "$home/.cache"
run() {
  (cd "$project" && env -i "PATH=$PATH" "HOME=$home" LC_ALL=C CARGO_TERM_COLOR=never \
    "$sandbox" run --project "$project" --explain-denials -- "$@") 2>&1
}

# Refused: each write outside named with the root that would grant it.
status=0
out=$(run sh -c 'touch ~/x; mkdir -p ~/.config/tool/sub; echo ok > inside; exit 3') || status=$?
[ "$status" = 3 ] || fail "the command's status 3 did not pass through (exit $status)" "$out"
[ "$(cat "$project/inside" 2>/dev/null)" = ok ] || fail "the write inside the project did not land" "$out"
[ ! -e "$home/x" ] && [ ! -e "$home/.config/tool" ] || fail "a write outside the roots landed" "$out"
grep -qF "refused creating $home/x (touch: openat, EACCES): no root grants $home, where it would be created; to allow it: --allow $home" <<<"$out" ||
  fail "~/x is not named with --allow $home" "$out"
grep -qF "refused creating the directory $home/.config/tool (mkdir: mkdir \"tool\" in $home/.config, EACCES): no root grants $home/.config, where it would be created; to allow it: --allow $home/.config" <<<"$out" ||
  fail "~/.config/tool is not named with --allow $home/.config" "$out"
[ "$(grep -c '^strument-sandbox: refused ' <<<"$out")" = 2 ] || fail "not one line per refused write" "$out"

# Granted: moves and links between directories of the project.
out=$(run sh -c 'mkdir -p a b/c; echo x > a/f; echo y > a/g; mv a/f b/f; mv a/g b/c/g; ln b/f a/link; mv b/c a/c; rm -r b') ||
  fail "renaming between directories of the project failed" "$out"
[ -f "$project/a/c/g" ] && [ -f "$project/a/link" ] && [ ! -e "$project/b" ] || fail "a move did not land" "$out"
! grep -q '^strument-sandbox: refused ' <<<"$out" && grep -qx 'strument-sandbox: the sandbox refused no write' <<<"$out" ||
  fail "renames inside the project were reported" "$out"

# Granted: a cargo build with a dependency, offline from the seeded registry.
cp -R "${SCENARIO_FIXTURES:?}/cargo-hello" "$project/" && chmod -R u+w "$project/cargo-hello" &&
  rm -rf "$project/cargo-hello/target" || fail "cannot copy the cargo fixture"
cp -R "$SCENARIO_CARGO_SEED/registry/index" "$SCENARIO_CARGO_SEED/registry/cache" "$home/.cargo/registry/" ||
  fail "cannot copy the registry seed"
start=$SECONDS
out=$(run sh -c 'cd cargo-hello && exec cargo build --offline') || fail "cargo build failed under --explain-denials" "$out"
[ -x "$project/cargo-hello/target/debug/cargo-hello" ] || fail "cargo build wrote no binary" "$out"
# The one write refused: cargo's last-use tracker's journal in CARGO_HOME,
# beside ~/.cargo/bin, which no root may grant (doc/explain.md).
journal="strument-sandbox: refused creating $home/.cargo/.global-cache-journal (cargo: openat, EACCES): no root grants $home/.cargo, where it would be created"
refused=$(grep '^strument-sandbox: refused ' <<<"$out")
[ -n "$refused" ] && ! grep -vF "$journal" <<<"$refused" >/dev/null ||
  fail "cargo build reported refused writes other than its tracker's journal" "$out"
printf 'ok %s: ABI %s, as %s: ~/x and ~/.config/tool named with their --allow, status 3 passed through, the write inside landed; renames in the project reported nothing; a cargo build with a dependency (%s s) passed, reporting only its tracker journal in ~/.cargo\n' \
  "$name" "$CHECK_ABI" "$(id -un 2>/dev/null || id -u)" "$((SECONDS - start))"
