//! The two parts this test binary plays for the route suite, re-executed
//! through [`Role`]: the confined attempt, and the unconfined process the
//! ptrace and `/proc/<pid>` routes aim at.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::THIS_TEST;
use super::route::{Places, Side, TargetProcess};
use super::syscalls::BUF;
use super::table::routes;
use crate::suite::roles::Role;

/// What the confined child prints before its result.
const RESULT: &str = "ROUTE-RESULT ";
/// What the target prints before its pid and buffer address.
const TARGET: &str = "ROUTE-TARGET ";

/// This test binary, to perform one side of route `row` over `places`.
pub(super) fn attempt_command(row: usize, side: Side, places: &Places) -> Command {
    Role::RouteAttempt.command(THIS_TEST, places.to_argument(row, side))
}

/// In the confined child: performs one attempt and prints its result.
pub(super) fn perform(argument: &OsStr) {
    let (row, side, places) = Places::from_argument(argument);
    let routes = routes();
    let trial = routes[row].trial(side, &places);
    match (trial.attempt)() {
        Ok(()) => println!("{RESULT}ok"),
        Err(errno) => println!("{RESULT}errno {errno}"),
    }
}

/// The result a child's stdout reports, if it reports one.
pub(super) fn result_of(stdout: &str) -> Option<Result<(), i32>> {
    stdout
        .lines()
        .find_map(|l| l.split_once(RESULT).map(|(_, r)| r))
        .map(|r| match r.strip_prefix("errno ") {
            Some(n) => Err(n.parse().expect("errno")),
            None => Ok(()),
        })
}

/// In the target: prints its pid and [`BUF`]'s address, then waits for
/// its stdin to close.
pub(super) fn be_target() {
    // Yama (ptrace_scope 1, most desktops) would refuse any tracer that is
    // not an ancestor on its own and hide whether Landlock refuses: allow
    // every tracer. Without Yama this fails with EINVAL, which is fine.
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
    println!("{TARGET}{} {}", std::process::id(), BUF.as_ptr() as usize);
    std::io::stdout().flush().expect("flush");
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
}

/// The running target, killed when dropped.
pub(super) struct RunningTarget {
    child: Child,
    pub(super) process: TargetProcess,
}

impl Drop for RunningTarget {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the target, unconfined, in `cwd`.
pub(super) fn start_target(cwd: &Path) -> RunningTarget {
    let mut cmd = Role::RouteTarget.command(THIS_TEST, "");
    cmd.current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start the unconfined target");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let (pid, buffer_address) = loop {
        let line = lines
            .next()
            .expect("the target printed its pid")
            .expect("read the target's stdout");
        // libtest prints the test's name first, on the same line.
        if let Some((_, rest)) = line.split_once(TARGET) {
            let mut it = rest.split(' ').map(|n| n.parse::<usize>().expect("number"));
            break (it.next().expect("pid"), it.next().expect("address"));
        }
    };
    RunningTarget {
        child,
        process: TargetProcess {
            pid: i32::try_from(pid).expect("pid fits"),
            buffer_address,
            cwd: cwd.to_path_buf(),
        },
    }
}
