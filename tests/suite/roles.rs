//! Re-executing this test binary to play a part: a test's body in a child
//! process (so an irreversible apply never confines the harness), one
//! confined write attempt, or an unconfined process for confined code to
//! aim at.
//!
//! One environment variable, [`ROLE`], says which part and with what
//! argument; [`Role::current`] is the one place it is read and
//! [`Role::command`] the one place the binary is re-executed. A test that
//! can be re-executed starts by matching on its role.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::{Command, Output};

use super::support::{output, show};

/// Set in a re-executed test binary: `<role>=<argument>`.
const ROLE: &str = "STRUMENT_TEST_ROLE";

/// A part this test binary plays when a test re-executes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A test's own body, run in a child process ([`body_in_child`]).
    Body,
    /// One attempt of a write route, in the sandbox (`routes`).
    RouteAttempt,
    /// The unconfined process the ptrace and `/proc/<pid>` routes aim at.
    RouteTarget,
    /// One write at a generated path, in the sandbox (`props::needs_landlock`).
    ProbeWrite,
}

impl Role {
    const ALL: [Role; 4] = [
        Role::Body,
        Role::RouteAttempt,
        Role::RouteTarget,
        Role::ProbeWrite,
    ];

    fn name(self) -> &'static str {
        match self {
            Role::Body => "body",
            Role::RouteAttempt => "route-attempt",
            Role::RouteTarget => "route-target",
            Role::ProbeWrite => "probe-write",
        }
    }

    /// The role this process was started to play and its argument; `None`
    /// in the test harness itself.
    pub fn current() -> Option<(Role, OsString)> {
        let value = std::env::var_os(ROLE)?;
        let bytes = value.as_bytes();
        let split = bytes.iter().position(|&b| b == b'=').unwrap_or(bytes.len());
        let (name, argument) = (&bytes[..split], bytes.get(split + 1..).unwrap_or_default());
        let role = Role::ALL
            .into_iter()
            .find(|role| role.name().as_bytes() == name)
            .unwrap_or_else(|| panic!("{ROLE}={value:?} names no role"));
        Some((role, OsString::from_vec(argument.to_vec())))
    }

    /// This test binary, filtered to `test` alone (its full path, from
    /// [`test_name!`](super::support::test_name), which cannot name a test
    /// that does not exist), to play this role with `argument`. The caller
    /// adds what the role needs (a sandbox, a filter, a directory, pipes)
    /// and runs it; a child that ran no test prints no result, which its
    /// caller reports as a failure.
    pub fn command(self, test: &str, argument: impl AsRef<OsStr>) -> Command {
        let exe = std::env::current_exe().expect("the test binary's own path");
        let mut value = OsString::from(self.name());
        value.push("=");
        value.push(argument);
        let mut cmd = Command::new(exe);
        cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(ROLE, value);
        cmd
    }
}

/// Runs the calling test's `body` in a child process (this test binary,
/// filtered to `test`, set up by `prepare`), so that an irreversible apply
/// never confines the test harness. Returns the child's output; the body's
/// own assertions decide the child's status. In the child, runs `body` and
/// returns `None`.
pub fn body_in_child(
    test: &str,
    prepare: impl FnOnce(&mut Command),
    body: impl FnOnce(),
) -> Option<Output> {
    if let Some((Role::Body, _)) = Role::current() {
        body();
        return None;
    }
    let mut cmd = Role::Body.command(test, "");
    prepare(&mut cmd);
    let out = output(&mut cmd);
    // Its status says whether it passed; the harness's own summary says the
    // filter found exactly this test (a filter matching nothing passes too).
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed;"),
        "the child run of {test} did not pass\n{}",
        show(&out)
    );
    Some(out)
}
