# `cargo clippy --all-targets --features cli -- -D warnings`, as in .ci/run,
# over the package's own source and vendored dependencies, with the same
# clippy.toml. This clippy is the pinned nixpkgs' and older than CI's; the
# banner prints both versions (nix/lint-toolchain.nix).
{ lib, callPackage, package, clippy, rustc }:

let
  toolchain = callPackage ./lint-toolchain.nix { };
  # clippy.toml's check-incompatible-msrv-in-tests came in clippy 1.87, and
  # clippy rejects a configuration key it does not know.
  knowsMsrvInTests = lib.versionAtLeast rustc.version "1.87";
in
package.overrideAttrs (old: {
  pname = "${old.pname}-clippy";
  nativeBuildInputs = (old.nativeBuildInputs or [ ]) ++ [ clippy ];
  buildPhase = ''
    runHook preBuild
    ${toolchain.banner "cargo clippy"}
    ${lib.optionalString (!knowsMsrvInTests) ''
      # The same configuration less that key: here the tests are held to
      # rust-version only by being built with this rustc; .ci/run's clippy
      # holds them to 1.85 itself.
      mkdir -p "$TMPDIR/clippy-conf"
      grep -v '^check-incompatible-msrv-in-tests' clippy.toml >"$TMPDIR/clippy-conf/clippy.toml"
      export CLIPPY_CONF_DIR="$TMPDIR/clippy-conf"
      echo "clippy ${toolchain.here} predates check-incompatible-msrv-in-tests (1.87): left out of clippy.toml here"
    ''}
    cargo clippy --offline --all-targets --features cli -- -D warnings
    runHook postBuild
  '';
  doCheck = false;
  installPhase = ''
    runHook preInstall
    touch "$out"
    runHook postInstall
  '';
})
