# `nix develop`: the tools of every tier. The host tier needs cargo, nextest,
# go, git and python3; the portable VM tier qemu and a static busybox (the
# kernel it boots is a Debian image in /boot, which Nix does not provide);
# the Nix file checks nixpkgs-fmt and deadnix.
#
# bash: nixpkgs' bash without readline, listed so that it comes first on
# PATH for `nix develop --command …` (suite::scenarios runs `bash`): the
# scenarios then run under the same bash as in the NixOS VM tests, which
# has no compgen, complete, compopt or bind. Not bashInteractive: that would
# hide a readline-only builtin here that fails there. At the interactive
# prompt nothing is lost: `nix develop` starts the flake's nixpkgs'
# bashInteractive for it, and current Nix also puts that first on the
# prompt's PATH (src/nix/develop.cc). nixos-25.05 calls this bash `bash`;
# newer nixpkgs make `bash` interactive and call it `bashNonInteractive`.
{ mkShell
, bash
, bashNonInteractive ? null
, pkgsStatic
, cargo
, rustc
, cargo-nextest
, clippy
, rustfmt
, go
, git
, python3
, qemu
, nixpkgs-fmt
, deadnix
}:

mkShell {
  packages = [
    (if bashNonInteractive != null then bashNonInteractive else bash)
    cargo
    rustc
    cargo-nextest
    clippy
    rustfmt
    go
    git
    python3
    qemu
    nixpkgs-fmt
    deadnix
  ];

  # tests/vm/run-vm.sh takes VM_BUSYBOX before looking in Debian's places.
  VM_BUSYBOX = "${pkgsStatic.busybox}/bin/busybox";
}
