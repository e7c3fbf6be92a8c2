# A CARGO_HOME whose ~/.cargo/registry holds what `cargo fetch` leaves there
# for a crate's crates.io dependencies: the sparse index's cached entry and
# the downloaded .crate of each. Built from Cargo.lock alone, offline, so
# that `cargo build --offline` in a NixOS VM (no network) still extracts the
# sources into ~/.cargo/registry/src itself, as on every other tier.
# tests/vm/run-vm.sh makes the same seed with `cargo fetch` on the host;
# tests/scenarios/scenarios.sh takes it as SCENARIO_CARGO_SEED.
#
# The .crate files are fetched like nixpkgs' importCargoLock fetches them
# (pkgs/build-support/rust/import-cargo-lock.nix): fetchurl from crates.io's
# download API with Cargo.lock's checksum, the sha256 of the .crate.
{ lib, runCommand, fetchurl, cargo, rustc }:

# A directory holding Cargo.toml, Cargo.lock and src/ of the crate to seed
# for; the build checks the result with `cargo fetch --offline --locked`.
crate:

let
  lock = lib.importTOML (crate + "/Cargo.lock");
  cratesIo = "registry+https://github.com/rust-lang/crates.io-index";
  packages = lib.filter (pkg: (pkg.source or null) == cratesIo) lock.package;

  # Where cargo keeps crates.io's sparse index and downloads: the suffix is
  # a hash of the source id, stable since cargo 1.85 (before it was
  # 6f17d22bba15001f). The check below fails if this cargo disagrees.
  registryDir = "index.crates.io-1949cf8c6b5b557f";

  # The index's file layout: 1/a, 2/ab, 3/a/abc, ab/cd/abcd...
  indexPath = name:
    let
      n = lib.toLower name;
      len = lib.stringLength n;
    in
    if len == 1 then "1/${n}"
    else if len == 2 then "2/${n}"
    else if len == 3 then "3/${lib.substring 0 1 n}/${n}"
    else "${lib.substring 0 2 n}/${lib.substring 2 2 n}/${n}";

  # The one index line cargo needs to resolve the locked version. A crate
  # with dependencies of its own would need them listed here too, which
  # Cargo.lock alone cannot say (it has no version requirements).
  entry = pkg:
    assert lib.assertMsg ((pkg.dependencies or [ ]) == [ ])
      "cargo-registry-seed: ${pkg.name} ${pkg.version} has dependencies; only leaf crates can be seeded from Cargo.lock";
    builtins.toJSON {
      inherit (pkg) name;
      vers = pkg.version;
      deps = [ ];
      cksum = pkg.checksum;
      features = { };
      yanked = false;
    };

  crateFile = pkg: fetchurl {
    name = "crate-${pkg.name}-${pkg.version}.tar.gz";
    url = "https://crates.io/api/v1/crates/${pkg.name}/${pkg.version}/download";
    sha256 = pkg.checksum;
  };

  # Each package: its index cache file and its .crate, as shell lines.
  # The cache file is cargo's format: version byte 3, index format 2 as a
  # little-endian u32, the index's revision (offline, any string), then
  # one NUL-terminated version and JSON line per release.
  seedLines = lib.concatMapStrings
    (pkg: ''
      f=$index/.cache/${indexPath pkg.name}
      mkdir -p "$(dirname "$f")"
      printf '\003\002\000\000\000%s\000%s\000%s\000' seeded-from-Cargo.lock \
        ${lib.escapeShellArg pkg.version} ${lib.escapeShellArg (entry pkg)} >"$f"
      cp ${crateFile pkg} "$cache/${pkg.name}-${pkg.version}.crate"
    '')
    packages;
in
assert lib.assertMsg (lib.versionAtLeast cargo.version "1.85")
  "cargo-registry-seed: cargo ${cargo.version} names the registry directory differently (1.85 or later needed)";
runCommand "cargo-registry-seed" { nativeBuildInputs = [ cargo rustc ]; } ''
  index=$out/registry/index/${registryDir}
  cache=$out/registry/cache/${registryDir}
  mkdir -p "$index" "$cache"
  # crates.io's own config.json; cargo reads it even when nothing is downloaded.
  printf '%s' '{"dl":"https://static.crates.io/crates","api":"https://crates.io"}' >"$index/config.json"
  ${seedLines}

  # The proof: this cargo, offline, takes every locked crate from the seed.
  export HOME=$TMPDIR/home CARGO_HOME=$TMPDIR/cargo-home
  mkdir -p "$HOME" "$CARGO_HOME"
  cp -R "$out/registry" "$CARGO_HOME/"
  chmod -R u+w "$CARGO_HOME"
  cp -R ${crate} "$TMPDIR/crate"
  chmod -R u+w "$TMPDIR/crate"
  if ! (cd "$TMPDIR/crate" && cargo fetch --offline --locked); then
    echo "cargo ${cargo.version} does not accept the registry seed in $out (layout: registry/index/${registryDir})" >&2
    exit 1
  fi
  ${lib.concatMapStrings (pkg: ''
    test -f "$CARGO_HOME/registry/src/${registryDir}/${pkg.name}-${pkg.version}/Cargo.toml" || {
      echo "cargo fetch --offline passed but did not extract ${pkg.name} ${pkg.version} from the seed" >&2
      exit 1
    }
  '') packages}
''
