# Linux 5.10, older than Landlock (merged in 5.13): the syscall does not
# exist, the kernel answers ENOSYS, and `run` must refuse.
_:

{
  name = "landlock-absent";

  scenario = {
    mode = "disabled";
    unavailableErrno = "ENOSYS";
    # security.lsm still asks for landlock; a kernel without it skips the
    # name silently.
    lsmMissingFromKernel = [ "landlock" ];
  };

  nodes.machine = { pkgs, ... }: {
    boot.kernelPackages = pkgs.linuxPackages_5_10;
  };
}
