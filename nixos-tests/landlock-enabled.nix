# The pinned nixpkgs' default kernel with NixOS's default LSM list, which
# puts landlock first: the sandbox confines real `go test` and `cargo build`.
# The probe must report exactly the ABI that kernel's version offers
# (nix/scenario-test.nix, abiSince): 6 for the 6.12 series that
# `linuxPackages` is on nixos-25.05.
_:

{
  name = "landlock-enabled";

  scenario.mode = "enabled";

  # Nothing to set on the machine: the default kernel and security.lsm are
  # what this test is about.
}
