# `nix develop`: the tools of every tier. The host tier needs cargo, nextest,
# go, git and python3; the portable VM tier qemu and a static busybox (the
# kernel it boots is a Debian image in /boot, which Nix does not provide);
# the Nix file checks nixpkgs-fmt and deadnix.
{ mkShell
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
