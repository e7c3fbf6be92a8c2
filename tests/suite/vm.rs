//! The portable VM tier (`tests/vm/run-vm.sh`): Debian's stock kernels of
//! every Landlock generation, fetched by package name from Debian's archive
//! and booted under qemu (TCG), each running the shared scenarios of its case
//! against the host's own toolchains and this build's binary, then that
//! generation's own checks (`tests/vm/checks/<case>/`). Needs
//! qemu-system-x86, busybox-static, apt, dpkg, kmod, xz-utils, go, cargo and
//! the network to deb.debian.org the first time (kernels are cached); a
//! missing one fails the test by name. See doc/vm-tier.md.

use std::path::Path;
use std::process::{Command, Output};

use serial_test::serial;

use super::support::{
    BIN, assert_scenarios_passed, output, require_tool, scenarios, scratch_base, show,
};
use super::support::{Need, after_prefix, require};

/// One case of the matrix: what its guest must report.
struct Case {
    /// The argument of run-vm.sh.
    name: &'static str,
    /// The start of the guest's `uname -r`.
    kernel: &'static str,
    /// `Some(n)`: Landlock enabled, the probe reports ABI `n` (at least
    /// `n` when `newest`); `None`: Landlock unavailable.
    abi: Option<u32>,
    /// For the newest kernel of sid, which rolls: the ABI is a minimum.
    newest: bool,
    /// The probe's errno name when Landlock is unavailable.
    reason: Option<&'static str>,
    /// The checks of `tests/vm/checks/<name>/` that must report ok: listed
    /// here so that a check cannot vanish unnoticed.
    checks: &'static [&'static str],
    /// Results inside a check that runs several (printed indented, e.g. by
    /// `sid/deputies.sh`) that must report ok: the ones proving the case's
    /// point, which another ABI would turn into different lines.
    check_results: &'static [&'static str],
}

impl Case {
    /// A kernel with Landlock at exactly `abi`, and its checks.
    fn with_abi(
        name: &'static str,
        kernel: &'static str,
        abi: u32,
        checks: &'static [&'static str],
    ) -> Case {
        Case {
            name,
            kernel,
            abi: Some(abi),
            newest: false,
            reason: None,
            checks,
            check_results: &[],
        }
    }

    /// A kernel whose probe refuses with `errno`.
    fn without_landlock(name: &'static str, kernel: &'static str, errno: &'static str) -> Case {
        Case {
            name,
            kernel,
            abi: None,
            newest: false,
            reason: Some(errno),
            checks: &[],
            check_results: &[],
        }
    }
}

#[track_caller]
fn boot(case: &Case) -> Output {
    require(Need::Qemu);
    require_tool("bash", "bash");
    require_tool("qemu-system-x86_64", "qemu-system-x86");
    if case.abi.is_some() {
        require_tool("go", "golang-go");
        require_tool("cargo", "cargo");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm/run-vm.sh");
    // The checks run the examples built beside the binary (nextest and
    // cargo test build them).
    let examples = Path::new(BIN).with_file_name("examples");
    let out = output(
        Command::new("bash")
            .arg(&script)
            .arg(case.name)
            .env("SANDBOX", BIN)
            .env("VM_EXAMPLES", examples),
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
    out
}

/// The value after `vm[<case>]: <key>: ` in run-vm.sh's report.
fn fact<'a>(stdout: &'a str, case: &str, key: &str) -> &'a str {
    after_prefix(stdout, &format!("vm[{case}]: {key}: "))
}

#[track_caller]
fn assert_case(case: &Case) {
    let out = boot(case);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mode = if case.abi.is_some() {
        "enabled"
    } else {
        "disabled"
    };
    assert_scenarios_passed(&out, &scenarios(mode));
    assert!(
        stdout.contains(&format!("vm[{}]: PASS", case.name)),
        "{}",
        show(&out)
    );

    // The scenarios and checks ran as the ordinary user the guest added, as
    // `id -u` under the same prefix says (root would bypass the permission
    // checks a user's toolchains and homes meet).
    let user = fact(&stdout, case.name, "scenarios ran as");
    let uid = fact(&stdout, case.name, "scenarios uid");
    assert!(
        uid.parse::<u32>().is_ok_and(|uid| uid != 0) && user == format!("sandbox-test (uid {uid})"),
        "the guest did not run the scenarios as an ordinary user: {user:?}, id -u {uid:?}\n{}",
        show(&out)
    );

    let kernel = fact(&stdout, case.name, "kernel");
    assert!(
        kernel.starts_with(case.kernel),
        "booted kernel {kernel:?}, expected {}*\n{}",
        case.kernel,
        show(&out)
    );
    let lsm = fact(&stdout, case.name, "lsm");
    let has_landlock = lsm.split(',').any(|m| m == "landlock");
    assert!(
        !lsm.is_empty() && has_landlock == case.abi.is_some(),
        "the guest's LSM list {lsm:?} does not match the case\n{}",
        show(&out)
    );
    let probe = fact(&stdout, case.name, "probe");
    match (case.abi, case.reason) {
        (Some(want), _) => {
            let abi: u32 = probe
                .strip_prefix("exit 0, abi ")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no ABI in the probe line {probe:?}\n{}", show(&out)));
            let fits = if case.newest {
                abi >= want
            } else {
                abi == want
            };
            assert!(
                fits,
                "the guest reported ABI {abi}, expected {want}\n{}",
                show(&out)
            );
        }
        (None, Some(errno)) => assert!(
            probe.starts_with("exit 3") && probe.contains(errno),
            "the guest's probe did not refuse with {errno}: {probe:?}\n{}",
            show(&out)
        ),
        (None, None) => unreachable!("a case without Landlock names its reason"),
    }

    for check in case.checks {
        let ok = format!("ok {check}: ");
        assert!(
            stdout.lines().any(|l| l.starts_with(&ok)),
            "check {check} did not report ok\n{}",
            show(&out)
        );
    }
    for result in case.check_results {
        let ok = format!("ok {result}: ");
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(&ok)),
            "no `{ok}` line among the checks' results\n{}",
            show(&out)
        );
    }
    if !case.checks.is_empty() {
        let summary = format!("checks: {} passed, 0 failed", case.checks.len());
        assert!(
            stdout.lines().any(|l| l == summary),
            "no `{summary}` line (a check was added to tests/vm/checks/{}/ but not to its case here?)\n{}",
            case.name,
            show(&out)
        );
    }
}

/// The fetch of a kernel from Debian's archive, without booting it.
mod needs_network {
    use super::*;

    /// A suite the archive does not serve fails the fetch, naming the suite,
    /// rather than booting some other kernel.
    #[test]
    fn a_kernel_the_archive_does_not_serve_fails_naming_the_suite() {
        require(Need::Network);
        require_tool("apt-get", "apt");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm/fetch-kernel.sh");
        let cache = tempfile::Builder::new()
            .prefix("vm-cache-")
            .tempdir_in(scratch_base())
            .expect("a scratch kernel cache");
        let out = output(
            Command::new("bash")
                .arg(&script)
                .arg("no-such-suite")
                .env("VM_CACHE", cache.path()),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && out.stdout.is_empty(),
            "{}",
            show(&out)
        );
        assert!(
            stderr.contains("fetch-kernel[no-such-suite]: apt-get update of ")
                && stderr.contains("no-such-suite failed"),
            "{}",
            show(&out)
        );
        // The granted half: the same script serves a real suite (what every
        // boot below does, from the shared cache).
        let out = output(Command::new("bash").arg(&script).arg("bookworm"));
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("KERNEL="),
            "{}",
            show(&out)
        );
    }
}

/// Each boots a guest. Under plain `cargo test`, one guest at a time
/// (nextest: the `vm` test group).
mod needs_qemu {
    use super::*;

    #[test]
    #[serial(vm)]
    fn bullseye_5_10_has_no_landlock_and_is_refused() {
        assert_case(&Case::without_landlock("bullseye", "5.10.", "ENOSYS"));
    }

    #[test]
    #[serial(vm)]
    fn bookworm_6_1_abi_2_passes_every_scenario_and_reports_truncate() {
        assert_case(&Case {
            check_results: &[
                "tmux-run-shell-refused",
                "tmux-send-keys-refused",
                "no-route-around",
                "datagram-refused",
                "orphan-granted",
                "orphan-granted-traced",
                "orphan-refused",
            ],
            ..Case::with_abi(
                "bookworm",
                "6.1.",
                2,
                &[
                    "deputies",
                    "explain-denials",
                    "local_net",
                    "truncate",
                    "yama",
                ],
            )
        });
    }

    #[test]
    #[serial(vm)]
    fn bookworm_6_1_with_landlock_off_at_boot_is_refused() {
        assert_case(&Case::without_landlock(
            "bookworm-lsm-off",
            "6.1.",
            "EOPNOTSUPP",
        ));
    }

    #[test]
    #[serial(vm)]
    fn trixie_6_12_abi_6_passes_every_scenario() {
        assert_case(&Case {
            check_results: &[
                "tmux-run-shell-refused",
                "tmux-send-keys-refused",
                "no-route-around",
                "orphan-granted",
                "orphan-granted-traced",
                "orphan-refused",
            ],
            ..Case::with_abi(
                "trixie",
                "6.12.",
                6,
                &["deputies", "local_net", "truncate", "yama"],
            )
        });
    }

    #[test]
    #[serial(vm)]
    fn sid_newest_kernel_confines_every_thread_and_closes_socket_routes() {
        assert_case(&Case {
            newest: true,
            check_results: &[
                "tmux-run-shell-refused",
                "tmux-send-keys-refused",
                "no-route-around",
            ],
            ..Case::with_abi("sid", "7.", 10, &["deputies", "tsync-threads"])
        });
    }
}
