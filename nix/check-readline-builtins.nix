# No readline-only bash builtin (compgen, complete, compopt, bind) in the
# shell the tiers run: the lint .ci/run makes (.ci/lint-readline-builtins.sh),
# here on the shell scripts and the Nix files, run by nixpkgs' bash, which
# lacks those builtins. The package's own copy of the lint (suite::readline)
# cannot see the Nix files: nix/package.nix leaves them out of its source.
{ lib, runCommand }:

let
  fs = lib.fileset;
  shellAndNix = fs.fileFilter
    (file: file.type == "regular" && (file.hasExt "sh" || file.hasExt "nix"));
  source = fs.toSource {
    root = ../.;
    fileset = fs.unions [
      ../.ci/lint-readline-builtins.sh
      (shellAndNix ../tests/scenarios)
      (shellAndNix ../tests/vm)
      (shellAndNix ../tests/lib)
      (shellAndNix ../nix)
      (shellAndNix ../nixos-tests)
      ../flake.nix
    ];
  };
in
runCommand "readline-builtins" { } ''
  cd ${source}
  bash .ci/lint-readline-builtins.sh
  touch "$out"
''
