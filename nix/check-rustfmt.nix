# `cargo fmt --all --check` over the package's source. This rustfmt is the
# pinned nixpkgs' and older than CI's; the banner prints both versions
# (nix/lint-toolchain.nix). Edition 2024's style edition keeps stable
# formatting the same across rustfmt releases.
{ runCommand, callPackage, cargo, rustfmt, package }:

let
  toolchain = callPackage ./lint-toolchain.nix { };
in
runCommand "${package.pname}-rustfmt"
{
  nativeBuildInputs = [ cargo rustfmt ];
  inherit (package) src;
} ''
  export HOME="$TMPDIR"
  ${toolchain.banner "rustfmt"}
  cd "$src"
  cargo fmt --all --check
  touch "$out"
''
