# What every NixOS VM test in nixos-tests/ shares. A test file picks the
# kernel and the LSM list of its machine and says what the guest must show;
# this module boots it with a normal user and the Go and Rust toolchains
# (offline: the VM has no network), then checks, in order:
#
#   1. the guest runs the kernel and the LSMs the test asked for
#      (uname -r, /proc/cmdline, /sys/kernel/security/lsm);
#   2. `strument-sandbox probe` answers as that kernel must (the ABI its
#      version offers, or exit 3 naming the errno);
#   3. tests/scenarios/scenarios.sh, the scenarios every tier runs, passes
#      as the user: an `ok` line for each scenario its registry lists
#      (`scenarios.sh list MODE`, read in the guest; the package's check
#      phase has already held that list to the names tests/suite/support.rs
#      pins, suite::support::the_scenario_registry_lists_exactly_the_pinned_scenarios).
#
# Values reach the guest through scripts generated here and put on its PATH;
# testScript only names them, so no value is pasted into a Python string.
{ config, lib, strumentSandbox, ... }:

let
  cfg = config.scenario;
  inherit (lib) mkOption types;

  # The scenario script and the fixtures it builds, in one store path.
  scenarioSource = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [ ../tests/scenarios ../tests/fixtures ];
  };

  # The first mainline kernel of each Landlock ABI (the kernel's
  # Documentation/userspace-api/landlock.rst). Stable kernels get no new
  # ABI, so a kernel's version says which ABI it offers.
  abiSince = [
    { abi = 10; kernel = "7.2"; }
    { abi = 9; kernel = "7.1"; }
    { abi = 8; kernel = "7.0"; }
    { abi = 7; kernel = "6.15"; }
    { abi = 6; kernel = "6.12"; }
    { abi = 5; kernel = "6.10"; }
    { abi = 4; kernel = "6.7"; }
    { abi = 3; kernel = "6.2"; }
    { abi = 2; kernel = "5.19"; }
    { abi = 1; kernel = "5.13"; }
  ];
  newestKnown = lib.head abiSince;
  # The ABI of a kernel version; null when it predates Landlock. A series
  # past the table's newest may offer an ABI the table does not know: stop
  # rather than assert the wrong one.
  abiOfKernel = version:
    let
      series = lib.versions.majorMinor version;
      found = lib.findFirst (a: lib.versionAtLeast version a.kernel) null abiSince;
    in
    assert lib.assertMsg (!lib.versionOlder newestKnown.kernel series)
      "nix/scenario-test.nix: kernel ${version} is newer than ${newestKnown.kernel}, the last series in abiSince; add the ABIs since";
    if found == null then null else found.abi;
in
{
  options.scenario = {
    mode = mkOption {
      type = types.enum [ "enabled" "disabled" ];
      description = ''
        The half of tests/scenarios/scenarios.sh to run: `enabled` for a
        kernel that enforces Landlock, `disabled` for one that cannot.
      '';
    };

    abi = mkOption {
      type = types.nullOr types.ints.positive;
      default = null;
      description = ''
        The Landlock ABI the probe must report. Null (the default) means the
        ABI the machine's kernel version offers (abiSince above); a test that
        sets it says so in its own file, and it must agree with that table.
        Only for mode `enabled`. The scenarios get it as SCENARIO_EXPECT_ABI.
      '';
    };

    unavailableErrno = mkOption {
      type = types.nullOr (types.enum [ "ENOSYS" "EOPNOTSUPP" ]);
      default = null;
      description = ''
        What the kernel answers landlock_create_ruleset with, which the
        probe must name: ENOSYS when Landlock is not built in, EOPNOTSUPP
        when it is built in but left out of the boot's LSM list. Required
        for mode `disabled`.
      '';
    };

    lsmMissingFromKernel = mkOption {
      type = types.listOf types.str;
      default = [ ];
      description = ''
        LSMs that security.lsm asks for but this kernel does not have: the
        kernel skips them, so they are expected to be absent from
        /sys/kernel/security/lsm.
      '';
    };
  };

  config = {
    # In here `config` is the machine's NixOS configuration; `cfg` stays the
    # test's `scenario` settings.
    nodes.machine = { config, pkgs, ... }:
      let
        toolchains = [ pkgs.go pkgs.cargo pkgs.rustc pkgs.gcc pkgs.git pkgs.python3 ];
        # The scenarios run under nixpkgs' bash without readline, not
        # bashInteractive: it is the bash Nix runs scripts with (stdenv's
        # shell, and runtimeShell, writeShellApplication's #!, on this pin),
        # so it is the one the shared scripts must survive, and it has no
        # compgen, complete, compopt or bind (pkgs/shells/bash/5.nix
        # configures it with --disable-readline). On nixos-25.05 that is
        # pkgs.bash; newer nixpkgs make pkgs.bash interactive and call this
        # one bashNonInteractive. run-scenarios checks it lacks compgen.
        scenarioBash = pkgs.bashNonInteractive or pkgs.bash;
        shellTools = [ scenarioBash pkgs.coreutils pkgs.findutils pkgs.gnugrep pkgs.gnused ];

        # The fixture crate's one crates.io dependency as a fetched registry
        # (index entry and .crate, built from its Cargo.lock): the guest's
        # `cargo build --offline` extracts it into ~/.cargo/registry under
        # the sandbox, the cache write the scenario checks.
        cargoSeed = pkgs.callPackage ./cargo-registry-seed.nix { }
          ../tests/fixtures/cargo-hello;

        kernelVersion = config.boot.kernelPackages.kernel.version;
        kernelAbi = abiOfKernel kernelVersion;
        # What the probe must report in mode enabled.
        wantAbi = if cfg.abi != null then cfg.abi else kernelAbi;

        requestedLsm = config.security.lsm;
        expectedLsm = lib.subtractLists cfg.lsmMissingFromKernel requestedLsm;

        check-boot = pkgs.writeShellApplication {
          name = "check-boot";
          runtimeInputs = shellTools;
          text = ''
            want_kernel=${lib.escapeShellArg config.boot.kernelPackages.kernel.modDirVersion}
            requested=${lib.escapeShellArg (lib.concatStringsSep "," requestedLsm)}
            expected=${lib.escapeShellArg (lib.concatStringsSep "," expectedLsm)}
            missing=${lib.escapeShellArg (lib.concatStringsSep "," cfg.lsmMissingFromKernel)}
            active=$(cat /sys/kernel/security/lsm)
            echo "kernel: $(uname -r)"
            echo "command line: $(cat /proc/cmdline)"
            echo "active LSMs: $active"

            if [ "$(uname -r)" != "$want_kernel" ]; then
              echo "FAIL: the guest runs kernel $(uname -r), the test asked for $want_kernel"
              exit 1
            fi
            if ! tr ' ' '\n' </proc/cmdline | grep -qxF "lsm=$requested"; then
              echo "FAIL: the kernel command line does not carry lsm=$requested (security.lsm)"
              exit 1
            fi
            # capability always comes first and the integrity LSMs (integrity,
            # ima, evm) always last, whatever lsm= says: compare the rest.
            chosen=$(tr ',' '\n' <<<"$active" | { grep -vxE 'capability|integrity|ima|evm' || true; } | paste -sd, -)
            if [ "$chosen" != "$expected" ]; then
              echo "FAIL: the kernel runs the LSMs '$chosen', the boot asked for '$requested' and this kernel lacks '$missing', so '$expected' was expected"
              exit 1
            fi
            echo "ok: kernel $want_kernel, LSMs $chosen as asked"
          '';
        };

        # What `strument-sandbox probe` must answer in this mode: its exit
        # status, why, and the mode's own checks of what it printed.
        probeWants =
          if cfg.mode == "enabled" then {
            status = "0";
            because = "a kernel that enforces Landlock";
            check = ''
              want_abi=${lib.escapeShellArg (toString wantAbi)}
              abi=$(sed -n 's/^abi: *\([0-9][0-9]*\).*/\1/p' <<<"$out" | head -n1)
              if [ -z "$abi" ] || [ "$abi" -lt 1 ]; then
                echo "FAIL: probe exited 0 but reported no Landlock ABI"
                exit 1
              fi
              if [ "$abi" != "$want_abi" ]; then
                echo "FAIL: probe reported Landlock ABI $abi, kernel $(uname -r) offers ABI $want_abi"
                exit 1
              fi
              echo "ok: Landlock ABI $abi on kernel $(uname -r)"
            '';
          } else {
            status = "3";
            because = "Landlock unavailable";
            check = ''
              errno=${lib.escapeShellArg cfg.unavailableErrno}
              if ! grep -qF "$errno" <<<"$out"; then
                echo "FAIL: probe does not name $errno, the kernel's answer"
                exit 1
              fi
              echo "ok: probe exited 3 and named $errno on kernel $(uname -r)"
            '';
          };

        check-probe = pkgs.writeShellApplication {
          name = "check-probe";
          runtimeInputs = [ strumentSandbox ] ++ shellTools;
          text = ''
            status=0
            out=$(strument-sandbox probe 2>&1) || status=$?
            printf '%s\n' "$out"
            if [ "$status" != ${probeWants.status} ]; then
              echo "FAIL: probe exited $status, expected ${probeWants.status} (${probeWants.because})"
              exit 1
            fi
            ${probeWants.check}
          '';
        };

        run-scenarios = pkgs.writeShellApplication {
          name = "run-scenarios";
          runtimeInputs = toolchains ++ shellTools;
          text = ''
            # The caller's own directory: a fake home must not sit under a
            # temp dir the sandbox grants (/tmp, /var/tmp, /dev/shm).
            root=$HOME/scenarios
            rm -rf "$root"
            mkdir -p "$root"
            # Store paths are read-only; the builds write inside the fixtures.
            cp -R ${scenarioSource}/tests/fixtures "$root/fixtures"
            chmod -R u+w "$root/fixtures"
            # The registry seed too: scenarios.sh copies it into each fake
            # home, and cargo (running as this user) writes beside it.
            cp -R ${cargoSeed} "$root/cargo-seed"
            chmod -R u+w "$root/cargo-seed"
            export SANDBOX=${lib.getExe strumentSandbox}
            export SCENARIO_ROOT="$root/homes"
            export SCENARIO_FIXTURES="$root/fixtures"
            export SCENARIO_CARGO_SEED="$root/cargo-seed"
            ${lib.optionalString (cfg.mode == "enabled") ''
              # The probe scenario asserts exactly this ABI; on ABI 1 the
              # cargo scenario expects rustc's cross-directory rename to fail.
              export SCENARIO_EXPECT_ABI=${lib.escapeShellArg (toString wantAbi)}
            ''}
            # The proof this is the bash the scenarios must survive.
            if ${lib.getExe scenarioBash} -c 'type compgen' >/dev/null 2>&1; then
              echo "FAIL: ${lib.getExe scenarioBash} has compgen: the scenarios are meant to run under nixpkgs' bash without readline"
              exit 1
            fi
            exec ${lib.getExe scenarioBash} ${scenarioSource}/tests/scenarios/scenarios.sh ${lib.escapeShellArg cfg.mode}
          '';
        };

        # The scenarios' own registry: the names the run must report ok.
        list-scenarios = pkgs.writeShellApplication {
          name = "list-scenarios";
          runtimeInputs = shellTools;
          text = ''
            exec ${lib.getExe scenarioBash} ${scenarioSource}/tests/scenarios/scenarios.sh list ${lib.escapeShellArg cfg.mode}
          '';
        };
      in
      {
        assertions = [
          {
            assertion = (cfg.mode == "disabled") == (cfg.unavailableErrno != null);
            message = "scenario.unavailableErrno is required for mode disabled and meaningless for mode enabled";
          }
          {
            assertion = cfg.mode == "enabled" || cfg.abi == null;
            message = "scenario.abi only applies to mode enabled";
          }
          {
            assertion = cfg.mode != "enabled" || (kernelAbi != null && wantAbi == kernelAbi);
            message = "mode enabled on kernel ${kernelVersion}: it offers Landlock ABI ${toString kernelAbi}, scenario.abi says ${toString cfg.abi}";
          }
        ];

        users.users.alice = {
          isNormalUser = true;
          description = "An ordinary user, who runs the scenarios";
        };

        environment.systemPackages = toolchains ++ [
          strumentSandbox
          check-boot
          check-probe
          run-scenarios
          list-scenarios
        ];

        # go test and cargo build run in the guest; the default 1 GiB of
        # memory and disk is tight for both.
        virtualisation = {
          memorySize = 3072;
          cores = 2;
          diskSize = 4096;
        };
      };

    testScript = ''
      machine.wait_for_unit("multi-user.target")

      with subtest("the guest runs the kernel and LSMs the test asked for"):
          status, out = machine.execute("check-boot 2>&1")
          print(out)
          assert status == 0, f"check-boot exited {status}:\n{out}"

      with subtest("strument-sandbox probe answers as this kernel must"):
          status, out = machine.execute("su - alice -c check-probe 2>&1")
          print(out)
          assert status == 0, f"check-probe exited {status}:\n{out}"

      with subtest("the shared scenarios pass as an ordinary user"):
          names = machine.succeed("list-scenarios").split()
          assert names, "scenarios.sh list named no scenario"
          status, out = machine.execute("su - alice -c run-scenarios 2>&1", timeout=1800)
          print(out)
          lines = out.strip().splitlines()
          summary = lines[-1] if lines else ""
          assert status == 0, f"the scenarios exited {status}:\n{out}"
          for name in names:
              assert any(line.startswith(f"ok {name}: ") for line in lines), (
                  f"scenario {name} (scenarios.sh list) did not report ok:\n{out}"
              )
          assert summary == f"{len(names)} passed, 0 failed", (
              f"the scenarios ended with {summary!r}, not '{len(names)} passed, 0 failed':\n{out}"
          )
    '';
  };
}
