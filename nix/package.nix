# The library's CLI, built and tested the way a release is: `nix build`.
{ lib
, rustPlatform
, go
, git
}:

let
  manifest = (lib.importTOML ../Cargo.toml).package;
  fs = lib.fileset;
in
rustPlatform.buildRustPackage {
  pname = manifest.name;
  inherit (manifest) version;

  # Everything but the Nix files, so editing a NixOS test does not rebuild
  # (and re-test) the package.
  src = fs.toSource {
    root = ../.;
    fileset = fs.difference ../. (fs.unions [
      ../flake.nix
      ../flake.lock
      ../nix
      ../nixos-tests
      (fs.maybeMissing ../target)
      (fs.maybeMissing ../result)
    ]);
  };

  cargoLock.lockFile = ../Cargo.lock;

  # The binary is behind a feature so that library consumers never build
  # clap; the check phase uses the same features (cargoCheckFeatures
  # defaults to buildFeatures), which the integration tests need.
  buildFeatures = [ "cli" ];

  # nextest runs every test in its own process: Policy::apply cannot be
  # undone, so tests that apply a ruleset must not share one.
  useNextest = true;
  # cargoNextestHook appends cargoTestFlags to `cargo nextest run`. The
  # nix-build profile (.config/nextest.toml) leaves out every test nested
  # in a needs_landlock, needs_network, needs_qemu or needs_podman module:
  # what the build sandbox lacks (doc/nix.md says where each runs). Under Nix only the scenarios among them run, in the NixOS VM tests
  # (nixos-tests/); the rest run only in a plain `cargo nextest run`.
  cargoTestFlags = [ "--profile" "nix-build" ];

  nativeCheckInputs = [ go git ];

  # The build sandbox sets TMPDIR to the build directory, which also holds
  # the source, so every fake home under target/ would sit inside a temp dir
  # the sandbox grants. A temp dir beside the source keeps them apart.
  preCheck = ''
    export TMPDIR="$NIX_BUILD_TOP/tmp"
    mkdir -p "$TMPDIR"
  '';

  meta = {
    inherit (manifest) description;
    homepage = manifest.repository;
    license = with lib.licenses; [ mit asl20 ];
    mainProgram = "strument-sandbox";
    platforms = lib.platforms.linux;
  };
}
