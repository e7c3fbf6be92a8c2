{
  description = "Confine what a coding agent and every command it runs may write, with Linux Landlock";

  # The lock pins a nixos-25.05 revision; doc/nix.md says where it came from.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.05";

  outputs = { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;
      # Landlock is a Linux interface: there is nothing to build elsewhere.
      forAllSystems = f:
        lib.genAttrs [ "x86_64-linux" "aarch64-linux" ]
          (system: f nixpkgs.legacyPackages.${system});
      packageFor = pkgs: self.packages.${pkgs.stdenv.hostPlatform.system}.default;
    in
    {
      packages = forAllSystems (pkgs: {
        default = pkgs.callPackage ./nix/package.nix { };
      });

      # Generated from the package, nix/check-*.nix and nixos-tests/*.nix.
      checks = forAllSystems (pkgs: import ./nix/checks.nix {
        inherit lib pkgs;
        package = packageFor pkgs;
      });

      devShells = forAllSystems (pkgs: {
        default = pkgs.callPackage ./nix/dev-shell.nix { };
      });

      apps = forAllSystems (pkgs: {
        default = {
          type = "app";
          program = lib.getExe (packageFor pkgs);
          meta.description = "Probe the kernel's Landlock, show a project's policy, run a command confined";
        };
      });

      formatter = forAllSystems (pkgs: pkgs.nixpkgs-fmt);
    };
}
