# Linux 5.15, the series of Ubuntu 22.04's GA kernel: Landlock ABI 1, which
# lacks the refer right (ABI 2) and truncate (ABI 3). The scenarios must pass
# on the oldest ABI the library supports.
_:

{
  name = "landlock-abi1";

  scenario = {
    mode = "enabled";
    abi = 1;
  };

  nodes.machine = { pkgs, ... }: {
    boot.kernelPackages = pkgs.linuxPackages_5_15;
  };
}
