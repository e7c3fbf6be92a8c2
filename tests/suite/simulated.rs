//! Kernels without Landlock, simulated with a seccomp filter that answers
//! the Landlock syscalls the way such a kernel does. Runs on any kernel;
//! the granted half of the refusals, in `needs_landlock`, needs Landlock.

use std::process::Command;

use strument_sandbox::{ApplyError, Policy, ProbeError, probe};

use super::roles::body_in_child;
use super::support::{BIN, FakeHome, output, show, test_name, without_landlock};

const UNAVAILABLE: i32 = 3;

fn probe_under(errno: i32) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["probe", "--json"]);
    without_landlock(&mut cmd, errno);
    output(&mut cmd)
}

fn assert_probe_reports(errno: i32, reason: &str) {
    let out = probe_under(errno);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{}", show(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("probe --json is JSON");
    assert_eq!(v["supported"], false);
    assert_eq!(v["abi"], 0);
    assert_eq!(v["reason"], reason, "{v}");
    assert_eq!(v["errno"], errno);
    assert!(v["hint"].as_str().is_some_and(|h| !h.is_empty()));
}

#[test]
fn probe_reports_a_kernel_without_landlock_built_in() {
    assert_probe_reports(libc::ENOSYS, "not-built");
}

#[test]
fn probe_reports_landlock_disabled_at_boot() {
    assert_probe_reports(libc::EOPNOTSUPP, "disabled");
    let mut cmd = Command::new(BIN);
    cmd.arg("probe");
    without_landlock(&mut cmd, libc::EOPNOTSUPP);
    let text = String::from_utf8_lossy(&output(&mut cmd).stdout).into_owned();
    assert!(
        text.contains("disabled at boot") && text.contains("lsm="),
        "{text}"
    );
}

#[test]
fn probe_reports_a_seccomp_filter_in_the_way() {
    assert_probe_reports(libc::EPERM, "blocked");
}

fn assert_run_refuses(errno: i32) {
    let h = FakeHome::new();
    let marker = h.project.join("ran");
    let touch = ["touch", marker.to_str().expect("utf-8")];
    let mut cmd = h.refused_run_command(&h.project, &[], &touch);
    without_landlock(&mut cmd, errno);
    let out = output(&mut cmd);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refusing to run unconfined"),
        "{}",
        show(&out)
    );
    assert!(
        !marker.exists(),
        "the command ran although Landlock is unavailable"
    );
    // The granted half, the same command running without the filter, needs
    // a Landlock kernel: needs_landlock::the_command_refused_without_landlock_runs_with_it.
}

#[test]
fn run_refuses_on_a_kernel_without_landlock_and_nothing_runs() {
    assert_run_refuses(libc::ENOSYS);
}

#[test]
fn run_refuses_with_landlock_disabled_at_boot_and_nothing_runs() {
    assert_run_refuses(libc::EOPNOTSUPP);
}

#[test]
fn policy_still_reports_without_landlock() {
    let h = FakeHome::new();
    let mut cmd = h.policy_command(&["--json"]);
    without_landlock(&mut cmd, libc::EOPNOTSUPP);
    let out = output(&mut cmd);
    assert!(out.status.success(), "{}", show(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["landlock"]["reason"], "disabled");
    assert_eq!(v["granted"][0]["path"], h.project.to_str().expect("utf-8"));
}

/// The library, not just the CLI, refuses: run this test's body under the
/// filter by re-executing the test binary with it installed.
#[test]
fn apply_refuses_rather_than_enforcing_nothing() {
    body_in_child(
        test_name!(apply_refuses_rather_than_enforcing_nothing),
        |cmd| without_landlock(cmd, libc::ENOSYS),
        || {
            assert_eq!(probe().error, Some(ProbeError::NotBuilt));
            let h = FakeHome::new();
            match (Policy {
                writable: vec![h.project.clone().into()],
                ..Policy::default()
            })
            .apply()
            {
                Err(ApplyError::Unavailable(ProbeError::NotBuilt)) => {}
                other => panic!("expected a refusal, got {other:?}"),
            }
            // Unconfined, as before the call: a write outside the policy's
            // root and every temp root (the fake home is under neither).
            let outside = h.home.join("apply-refused");
            std::fs::write(&outside, "x").expect("the refusal left the process confined");
            assert!(outside.is_file());
        },
    );
}

/// The granted halves of the refusals above, on this kernel's Landlock.
mod needs_landlock {
    use super::*;

    /// The granted half of the refusals above: the very command they
    /// refuse under the seccomp filter runs, and leaves its marker, without it.
    #[test]
    fn the_command_refused_without_landlock_runs_with_it() {
        let h = FakeHome::new();
        let marker = h.project.join("ran");
        let out = h.run(&[], &["touch", marker.to_str().expect("utf-8")]);
        assert!(out.status.success() && marker.exists(), "{}", show(&out));
    }
}
