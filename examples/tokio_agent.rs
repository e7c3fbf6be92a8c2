//! An async agent that confines the commands it runs, not itself.
//!
//! A coding agent built on tokio already runs threads when it decides to
//! run a command, and it must go on writing its own files (a transcript,
//! its state) wherever it likes. So it opens one [`Session`] over the
//! project and confines each child through it: `Session::confine` on
//! `tokio::process::Command::as_std_mut` arranges for the child alone to
//! restrict itself between `fork` and `exec`, so the runtime's threads
//! are never touched.
//!
//! With `--spawn` it starts each child with the library's
//! [`Spawn`] instead, and waits for it on a blocking thread: no `fork`, so
//! no copy of the agent's page tables, which is what a `tokio::process`
//! child costs an agent holding a few hundred megabytes (milliseconds a
//! command; doc/performance.md measures both). The child is confined the
//! same way; its output comes back over a socket pair.
//!
//! This program starts `CHILDREN` commands at once (32 by default); each
//! writes one file in `PROJECT` and tries one in `OUTSIDE`. Then the agent
//! itself writes `OUTSIDE/agent`, and prints one line a child and one for
//! itself:
//!
//! ```text
//! cargo run --example tokio_agent -- [--spawn] PROJECT OUTSIDE [CHILDREN]
//! ```
//!
//! Exit status: 0 when the session opened and every child ran (whatever
//! the writes did: the caller checks the files), 3 when the session did
//! not open (no Landlock), 2 on bad arguments, 1 when a child could not be
//! started. The suite runs it (`suite::confine`) and checks the files.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus};
use std::sync::Arc;

use strument_sandbox::Session;
use strument_sandbox::spawn::Spawn;
use tokio::process::Command;

/// The child's script: its greeting into the project, then into
/// `OUTSIDE` (refused), and on standard output the status of that write and
/// what its standard output is (a pipe from tokio, a socket from `--spawn`).
const SCRIPT: &str =
    r#"echo "$0" > "$1"; echo "$0" > "$2" 2>/dev/null; echo "$? $(stat -L -c %F /proc/$$/fd/1)""#;

#[tokio::main]
async fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let spawn = args.first().is_some_and(|a| a == "--spawn");
    if spawn {
        args.remove(0);
    }
    let (project, outside, children) = match args.as_slice() {
        [project, outside] => (PathBuf::from(project), PathBuf::from(outside), 32),
        [project, outside, n] => match n.parse::<usize>() {
            Ok(n) => (PathBuf::from(project), PathBuf::from(outside), n),
            Err(_) => return usage(),
        },
        _ => return usage(),
    };
    // Caches are left alone: this agent runs only `sh`.
    let session = match Session::builder(&project).create_caches(false).open() {
        Ok(session) => Arc::new(session),
        Err(e) => {
            eprintln!("tokio_agent: {e}; {}", e.hint());
            return ExitCode::from(3);
        }
    };

    let mut tasks = Vec::with_capacity(children);
    for i in 0..children {
        let session = Arc::clone(&session);
        let (inside, outside) = (
            project.join(format!("child-{i}")),
            outside.join(format!("child-{i}")),
        );
        tasks.push(tokio::spawn(async move {
            let (status, stdout) = if spawn {
                spawned(&session, i, &inside, &outside).await?
            } else {
                let mut cmd = Command::new("sh");
                cmd.arg("-c")
                    .arg(SCRIPT)
                    .arg(format!("child {i}"))
                    .arg(&inside)
                    .arg(&outside);
                session.confine(cmd.as_std_mut());
                let out = cmd.output().await?;
                (
                    out.status,
                    String::from_utf8_lossy(&out.stdout).into_owned(),
                )
            };
            let (outside_status, stdout_kind) =
                stdout.trim().split_once(' ').unwrap_or((stdout.trim(), "?"));
            Ok::<String, std::io::Error>(format!(
                "child {i}: {status}, write outside exited {outside_status}, its output a {stdout_kind}"
            ))
        }));
    }
    let mut failed = false;
    for task in tasks {
        match task.await {
            Ok(Ok(line)) => println!("{line}"),
            Ok(Err(e)) => {
                eprintln!("tokio_agent: cannot run a child: {e}");
                failed = true;
            }
            Err(e) => {
                eprintln!("tokio_agent: a task failed: {e}");
                failed = true;
            }
        }
    }
    // The agent itself is not confined: it writes where its children cannot.
    match std::fs::write(outside.join("agent"), "written by the agent\n") {
        Ok(()) => println!("agent: wrote {}", outside.join("agent").display()),
        Err(e) => println!("agent: refused {}: {e}", outside.join("agent").display()),
    }
    for change in session.changes() {
        println!("changed: {change}");
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The same child started with [`Spawn`]: its standard output is one end of
/// a socket pair, read, like the wait, on a blocking thread.
async fn spawned(
    session: &Session,
    i: usize,
    inside: &Path,
    outside: &Path,
) -> std::io::Result<(ExitStatus, String)> {
    let (mut ours, theirs) = UnixStream::pair()?;
    let mut child = Spawn::new("sh")
        .args(["-c", SCRIPT])
        .arg(format!("child {i}"))
        .arg(inside)
        .arg(outside)
        .stdout_to(theirs.as_raw_fd())
        .spawn(session.prepared())?;
    // The child has its own copy: with ours closed, reading ends with it.
    drop(theirs);
    tokio::task::spawn_blocking(move || {
        let mut stdout = String::new();
        ours.read_to_string(&mut stdout)?;
        Ok((child.wait()?, stdout))
    })
    .await?
}

fn usage() -> ExitCode {
    eprintln!("usage: tokio_agent [--spawn] PROJECT OUTSIDE [CHILDREN]");
    ExitCode::from(2)
}
