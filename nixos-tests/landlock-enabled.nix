# The pinned nixpkgs' default kernel with NixOS's default LSM list, which
# puts landlock first: the sandbox confines real `go test` and `cargo build`.
_:

{
  name = "landlock-enabled";

  scenario.mode = "enabled";

  # Nothing to set on the machine: the default kernel and security.lsm are
  # what this test is about.
}
