# Linux 5.15, the series of Ubuntu 22.04's GA kernel: Landlock ABI 1, which
# lacks the refer right (ABI 2) and truncate (ABI 3). Without refer, no
# file can be renamed or linked across directories under the sandbox, so
# rustc's move of .rmeta/.rlib files fails with EXDEV and `cargo build`
# cannot pass there: the scenarios, told the ABI, expect exactly that
# failure; go test and every write scenario must pass as on newer kernels.
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
