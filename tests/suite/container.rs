//! The container tier (`tests/container/run-container.sh`): the shared
//! scenarios inside a default rootful podman container, where bubblewrap
//! cannot start and strument-sandbox, which needs no namespace, confines
//! all the same. Needs root, podman and runc (and go, cargo and crates.io
//! once, for the cargo scenario's seed); a missing one fails the test by
//! name. The container shares this kernel: the enabled cases need Landlock.
//! So every test sits in `needs_landlock::needs_podman`, but the one that
//! shows the tier failing without podman.

use std::path::Path;
use std::process::{Command, Output};

use super::support::{
    BIN, assert_scenarios_passed, output, require_tool, scenarios, scratch_base, show,
};
use super::support::{Need, after_prefix, require, require_landlock};

/// What bubblewrap does in a case's container.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bwrap {
    /// It cannot create its namespaces: exit 1 and bwrap's own message.
    CannotStart,
    /// It starts (podman's profile lets an ordinary user create a user
    /// namespace, where Docker's does not).
    Starts,
    /// It refuses to run with a capability it did not expect (an ordinary
    /// user given one with `--cap-add`): exit 1 and this message.
    RefusesCapabilities,
}

/// One case of run-container.sh and what its container must report.
struct Case {
    /// The argument of run-container.sh.
    name: &'static str,
    /// The scenarios' mode inside.
    mode: &'static str,
    /// The uid the container runs as.
    uid: u32,
    bwrap: Bwrap,
    /// The capabilities an ordinary user's process has (`--cap-add`).
    user_caps: u64,
}

#[track_caller]
fn run(case: &Case) -> Output {
    require(Need::Podman);
    require_tool("bash", "bash");
    require_tool("podman", "podman runc");
    require_tool("runc", "runc");
    if case.mode == "enabled" {
        require_tool("go", "golang-go");
        require_tool("cargo", "cargo");
    }
    let work = tempfile::Builder::new()
        .prefix(&format!("container-{}-", case.name))
        .tempdir_in(scratch_base())
        .expect("a work dir for the container");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/container/run-container.sh");
    let out = output(
        Command::new("bash")
            .arg(&script)
            .arg(case.name)
            .env("SANDBOX", BIN)
            .env("CONTAINER_WORK", work.path()),
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
    out
}

/// The value after `fact: <key>: ` in inside.sh's report.
fn fact<'a>(stdout: &'a str, key: &str) -> &'a str {
    after_prefix(stdout, &format!("fact: {key}: "))
}

/// Asserts inside.sh reported `key` as `expected`.
#[track_caller]
fn assert_fact(out: &Output, key: &str, expected: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(fact(&stdout, key), expected, "{}", show(out));
}

/// Asserts inside.sh's report of `key` says `part`.
#[track_caller]
fn assert_fact_says(out: &Output, key: &str, part: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(fact(&stdout, key).contains(part), "{}", show(out));
}

/// `CAP_SYS_ADMIN`'s bit in `/proc/self/status`'s capability masks.
const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_SYS_PTRACE`'s bit.
const CAP_SYS_PTRACE: u32 = 19;

#[track_caller]
fn assert_case(case: &Case) -> Output {
    let out = run(case);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_scenarios_passed(&out, &scenarios(case.mode));
    assert!(
        stdout.contains(&format!("container[{}]: PASS", case.name)),
        "{}",
        show(&out)
    );

    // The container as podman made it: its user, a seccomp filter,
    // no_new_privs left unset, its default capabilities (none for a user,
    // never CAP_SYS_ADMIN).
    let uid = fact(&stdout, "uid");
    assert!(
        uid.starts_with(&format!("{} ", case.uid)),
        "the container ran as uid {uid:?}, expected {}\n{}",
        case.uid,
        show(&out)
    );
    assert!(
        fact(&stdout, "seccomp").starts_with("2 "),
        "no seccomp filter in the container\n{}",
        show(&out)
    );
    assert_fact(&out, "no_new_privs", "0");
    let caps = u64::from_str_radix(fact(&stdout, "cap_eff"), 16)
        .unwrap_or_else(|e| panic!("cap_eff is not a hex mask: {e}\n{}", show(&out)));
    assert_eq!(caps & (1 << CAP_SYS_ADMIN), 0, "{}", show(&out));
    if case.uid == 0 {
        assert_ne!(
            caps,
            0,
            "root keeps podman's default capabilities\n{}",
            show(&out)
        );
    } else {
        assert_eq!(
            caps,
            case.user_caps,
            "a user has none but those added\n{}",
            show(&out)
        );
    }

    let bwrap = fact(&stdout, "bwrap");
    match case.bwrap {
        Bwrap::CannotStart => assert!(
            bwrap.starts_with("exit 1: bwrap: ") && bwrap.contains("new namespace"),
            "bubblewrap did not fail to create its namespace: {bwrap:?} (`fact: bwrap: not installed`: apt-get install bubblewrap)\n{}",
            show(&out)
        ),
        Bwrap::RefusesCapabilities => assert!(
            bwrap.starts_with("exit 1: bwrap: Unexpected capabilities"),
            "bubblewrap did not refuse the added capability: {bwrap:?}\n{}",
            show(&out)
        ),
        Bwrap::Starts => assert_eq!(
            bwrap,
            "exit 0",
            "podman's default profile used to let an ordinary user's bubblewrap start (README, \
             \"In containers and on locked-down machines\", says so): update it if that changed\n{}",
            show(&out)
        ),
    }
    out
}

/// The enabled cases: the container's probe reports this kernel's ABI.
#[track_caller]
fn assert_enabled(case: &Case) {
    // The enabled cases need this kernel's Landlock.
    require_landlock();
    assert_probe_as_host(&assert_case(case));
}

/// The container's probe found Landlock at this kernel's ABI.
#[track_caller]
fn assert_probe_as_host(out: &Output) {
    let host = strument_sandbox::probe();
    assert_fact(out, "probe-exit", "0");
    assert_fact(out, "probe: abi", &host.abi.to_string());
}

/// The container shares this kernel: its Landlock, then podman's.
mod needs_landlock {
    use super::*;

    /// Rootful podman containers (root, podman, runc).
    mod needs_podman {
        use super::*;

        #[test]
        fn as_root_every_scenario_passes_where_bubblewrap_cannot_start() {
            assert_enabled(&Case {
                name: "root",
                mode: "enabled",
                uid: 0,
                bwrap: Bwrap::CannotStart,
                user_caps: 0,
            });
        }

        #[test]
        fn as_an_ordinary_user_every_scenario_passes() {
            assert_enabled(&Case {
                name: "user",
                mode: "enabled",
                uid: 1500,
                bwrap: Bwrap::Starts,
                user_caps: 0,
            });
        }

        /// Docker's default profile with `CAP_SYS_PTRACE` added, which
        /// `run`'s refusal below advises: every scenario passes, though the
        /// profile still refuses `unshare` (without `CAP_SYS_ADMIN`).
        #[test]
        fn under_dockers_profile_with_sys_ptrace_every_scenario_passes() {
            assert_enabled(&Case {
                name: "docker-ptrace",
                mode: "enabled",
                uid: 1500,
                bwrap: Bwrap::RefusesCapabilities,
                user_caps: 1 << CAP_SYS_PTRACE,
            });
        }

        /// Docker's default profile refuses `pidfd_getfd` without
        /// `CAP_SYS_PTRACE`, so the connect supervisor could fetch no socket:
        /// `run` refuses, naming the call and the capability, and its command
        /// never runs (bubblewrap cannot start there either).
        #[test]
        fn under_dockers_profile_run_refuses_naming_pidfd_getfd() {
            require_landlock();
            let out = run(&Case {
                name: "docker",
                mode: "refused",
                uid: 1500,
                bwrap: Bwrap::CannotStart,
                user_caps: 0,
            });
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains("container[docker]: PASS"), "{}", show(&out));
            assert_probe_as_host(&out);
            let said = fact(&stdout, "run");
            assert!(
                said.starts_with("exit 4: ")
                    && said.contains("pidfd_getfd")
                    && said.contains("SYS_PTRACE"),
                "run did not refuse naming pidfd_getfd and CAP_SYS_PTRACE: {said:?}\n{}",
                show(&out)
            );
            assert_fact(&out, "ran", "no");
            assert_fact_says(&out, "bwrap", "new namespace");
        }

        /// The kernel has Landlock (the host's probe, beside the container's), the
        /// container's profile takes it away: `run` refuses and nothing runs.
        #[test]
        fn a_profile_without_landlock_makes_run_refuse() {
            // Without this kernel's Landlock, the container's refusal would prove
            // nothing.
            require_landlock();
            let out = assert_case(&Case {
                name: "no-landlock",
                mode: "disabled",
                uid: 1500,
                bwrap: Bwrap::Starts,
                user_caps: 0,
            });
            assert_fact(&out, "probe-exit", "3");
            // The profile's default errno is ENOSYS: the same answer as a kernel
            // built without Landlock, and the probe cannot tell the two apart.
            assert_fact(
                &out,
                "probe: reason",
                "Landlock is not built into this kernel (ENOSYS)",
            );
            assert_fact(&out, "probe: errno", "38");
            // So the hint names the container's profile beside the kernel.
            assert_fact_says(&out, "probe: hint", "a seccomp profile older than Landlock");
        }
    }
}

/// Without podman the tier fails, naming the packages: it never passes by
/// running nothing. (The granted half: every test in `needs_podman`.)
/// Needs only bash: runs in every profile.
#[test]
fn a_host_without_podman_fails_naming_the_packages() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/container/run-container.sh");
    let bash = require_tool("bash", "bash");
    let empty = tempfile::Builder::new()
        .prefix("no-podman-")
        .tempdir_in(scratch_base())
        .expect("an empty PATH directory");
    let out = output(
        Command::new(bash)
            .arg(&script)
            .arg("root")
            .env("PATH", empty.path()),
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "container[root]: FAIL: podman not found: install it (Debian: apt-get install podman runc)",
        "{}",
        show(&out)
    );
}
