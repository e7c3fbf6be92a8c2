//! Processes a test starts outside the sandbox (stand-in services, agents)
//! and what `run` says about the connections it refused them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{assert_success, output, require_tool};

/// `tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A process stopped when the test ends, passed or not.
pub struct Stopped(pub Child);

impl Stopped {
    /// Starts `cmd` with its standard output piped and waits for its first
    /// line (a port, `listening`): the process and that line, trimmed.
    /// `what` names it in a failure.
    pub fn started_with_line(cmd: &mut Command, what: &str) -> (Stopped, String) {
        let mut child = Stopped(
            cmd.stdout(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("start {what}: {e}")),
        );
        let mut line = String::new();
        let stdout = child.0.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("read {what}: {e}"));
        (child, line.trim().to_owned())
    }

    /// Starts `cmd`, a service that prints `listening` once it does.
    pub fn listening(cmd: &mut Command, what: &str) -> Stopped {
        let (child, line) = Stopped::started_with_line(cmd, what);
        assert_eq!(line, "listening", "{what}");
        child
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An ssh-agent outside the sandbox on `socket`, holding `key`.
pub fn ssh_agent(socket: &Path, key: &Path) -> Stopped {
    let child = Command::new(require_tool("ssh-agent", "openssh-client"))
        .arg("-D")
        .arg("-a")
        .arg(socket)
        .stdout(Stdio::null())
        .spawn()
        .map(Stopped)
        .expect("start ssh-agent");
    let started = Instant::now();
    while !socket.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "ssh-agent made no socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let add = output(
        Command::new(require_tool("ssh-add", "openssh-client"))
            .arg("-q")
            .arg(key)
            .env("SSH_AUTH_SOCK", socket),
    );
    assert_success(&add);
    child
}

/// Whether a line of `out`'s standard error holds each of `parts` (`run`
/// names each connection it refused on a line of its own).
pub fn said_on_a_line(out: &Output, parts: &[&str]) -> bool {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .any(|l| parts.iter().all(|part| l.contains(part)))
}

/// Asserts `out`'s command failed and `run` said it refused it a
/// connection, on a line that also holds each of `parts`.
#[track_caller]
pub fn assert_connection_refused(out: &Output, parts: &[&str]) {
    assert!(!out.status.success(), "{}", super::show(out));
    let line = [&["refused a connection to"], parts].concat();
    assert!(said_on_a_line(out, &line), "{}", super::show(out));
}

/// Asserts `run` refused `out`'s command no connection.
#[track_caller]
pub fn assert_no_connection_refused(out: &Output) {
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("refused a connection"),
        "{}",
        super::show(out)
    );
}
