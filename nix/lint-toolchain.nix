# What the Nix checks `clippy` and `rustfmt` share about their toolchain:
# .config/lint-toolchains.toml records the rustc of the pinned nixpkgs
# (`nix`) and of .ci/run (`ci`). `banner` is shell that prints both and
# stops the check when the pin's rustc is not the recorded one, so moving
# the pin cannot change the lints without that file (and doc/nix.md)
# changing too.
{ lib, rustc }:

let
  recorded = lib.importTOML ../.config/lint-toolchains.toml;
  here = lib.versions.majorMinor rustc.version;
in
{
  inherit here recorded;

  banner = tool: ''
    echo "${tool} here: $(${tool} --version) (pinned nixpkgs, rustc ${rustc.version}); .ci/run checks with rustc ${recorded.ci}"
    if [ ${lib.escapeShellArg here} != ${lib.escapeShellArg recorded.nix} ]; then
      echo "the pinned nixpkgs' rustc is ${here}, but .config/lint-toolchains.toml says nix = \"${recorded.nix}\": record the new version there and update doc/nix.md's notes on the two versions" >&2
      exit 1
    fi
  '';
}
