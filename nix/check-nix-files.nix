# The Nix files are formatted (nixpkgs-fmt) and have no dead code (deadnix):
# the same checks .ci/run makes with the crates.io builds of both tools.
{ lib, runCommand, nixpkgs-fmt, deadnix }:

let
  fs = lib.fileset;
  nixFiles = fs.toSource {
    root = ../.;
    fileset = fs.fileFilter (file: file.hasExt "nix") ../.;
  };
in
runCommand "nix-files" { nativeBuildInputs = [ nixpkgs-fmt deadnix ]; } ''
  cd ${nixFiles}
  nixpkgs-fmt --check .
  deadnix --fail .
  touch "$out"
''
