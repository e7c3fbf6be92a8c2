# `cargo fmt --all --check` over the package's source.
{ runCommand, cargo, rustfmt, package }:

runCommand "${package.pname}-rustfmt"
{
  nativeBuildInputs = [ cargo rustfmt ];
  inherit (package) src;
} ''
  export HOME="$TMPDIR"
  cd "$src"
  cargo fmt --all --check
  touch "$out"
''
