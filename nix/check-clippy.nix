# `cargo clippy --all-targets --features cli -- -D warnings`, as in .ci/run,
# over the package's own source and vendored dependencies.
{ package, clippy }:

package.overrideAttrs (old: {
  pname = "${old.pname}-clippy";
  nativeBuildInputs = (old.nativeBuildInputs or [ ]) ++ [ clippy ];
  buildPhase = ''
    runHook preBuild
    cargo clippy --offline --all-targets --features cli -- -D warnings
    runHook postBuild
  '';
  doCheck = false;
  installPhase = ''
    runHook preInstall
    touch "$out"
    runHook postInstall
  '';
})
