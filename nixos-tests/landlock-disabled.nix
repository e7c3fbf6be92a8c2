# Landlock built into the kernel but left out of the boot's LSM list: the
# kernel answers EOPNOTSUPP, the probe must say so and `run` must refuse.
{ lib, ... }:

{
  name = "landlock-disabled";

  scenario = {
    mode = "disabled";
    unavailableErrno = "EOPNOTSUPP";
  };

  nodes.machine = {
    # NixOS writes lsm= from security.lsm, whose default starts with
    # landlock; mkForce replaces that list instead of adding to it.
    security.lsm = lib.mkForce [ "yama" "bpf" ];
  };
}
