# Every check of the flake, generated from files: the package itself, one
# check per nix/check-NAME.nix (named NAME) and one NixOS VM test per
# nixos-tests/NAME.nix (named NAME). Nothing here is a hand-written alias, so
# a new file is checked as soon as it exists and a renamed one cannot be
# left behind.
{ lib, pkgs, package }:

let
  # NAME -> path for each regular file DIR/PREFIX NAME .nix.
  nixFiles = dir: prefix:
    lib.mapAttrs'
      (file: _: lib.nameValuePair
        (lib.removePrefix prefix (lib.removeSuffix ".nix" file))
        (dir + "/${file}"))
      (lib.filterAttrs
        (file: type: type == "regular"
          && lib.hasPrefix prefix file
          && lib.hasSuffix ".nix" file)
        (builtins.readDir dir));

  callCheck = lib.callPackageWith (pkgs // { inherit package; });

  buildChecks = lib.mapAttrs (_: file: callCheck file { }) (nixFiles ./. "check-");

  # The test file sets `name` too: the option only merges equal strings, so
  # a file whose test name differs from its stem fails to evaluate.
  vmTests = lib.mapAttrs
    (name: file: pkgs.testers.runNixOSTest {
      imports = [ ./scenario-test.nix file ];
      inherit name;
      _module.args.strumentSandbox = package;
    })
    (nixFiles ../nixos-tests "");

  groups = [
    { ${package.pname} = package; }
    buildChecks
    vmTests
  ];
  names = lib.concatMap lib.attrNames groups;
in
assert lib.assertMsg (lib.allUnique names)
  "two checks share a name (${lib.concatStringsSep ", " names}): rename a file in nix/ or nixos-tests/";
lib.mergeAttrsList groups
