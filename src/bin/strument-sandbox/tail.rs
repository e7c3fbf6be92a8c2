//! The command's standard error, passed on as it comes with its last part
//! kept, so that a failure can be explained from the paths it names
//! (`strument_sandbox::refusals`).
//!
//! Only when `run`'s own standard error is not a terminal (an agent, a
//! script, a CI log): there a pipe in between changes nothing the command
//! can see, while on a terminal it would turn off the colours and progress
//! bars tools draw when they see one.

use std::io::{self, IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use strument_sandbox::SignalForwarder;

/// How much of the end of the command's standard error is kept.
const KEPT: usize = 64 * 1024;

/// How long after the command ends its standard error may stay open (a
/// process it left running holds it) before the rest is handed to `cat`.
const LINGER: Duration = Duration::from_millis(200);

/// Whether `run` passes the command's standard error through a pipe.
pub(crate) fn wanted() -> bool {
    !io::stderr().is_terminal()
}

/// Makes `cmd`'s standard error a pipe; [`Tail::start`] reads it.
pub(crate) fn pipe(cmd: &mut Command) {
    cmd.stderr(Stdio::piped());
}

#[derive(Default)]
struct Shared {
    kept: Mutex<Vec<u8>>,
    ended: Mutex<bool>,
    ended_signal: Condvar,
    stop: AtomicBool,
}

/// The reader of a command's standard error.
pub(crate) struct Tail {
    shared: Arc<Shared>,
    /// A second descriptor of the pipe, for `cat` to go on with.
    spare: Option<std::os::fd::OwnedFd>,
}

impl Tail {
    /// Starts passing `child`'s piped standard error on to ours.
    pub(crate) fn start(child: &mut Child) -> Option<Tail> {
        let stderr: ChildStderr = child.stderr.take()?;
        let fd = std::os::fd::OwnedFd::from(stderr);
        let spare = fd.try_clone().ok();
        let shared = Arc::new(Shared::default());
        let reader = Arc::clone(&shared);
        std::thread::spawn(move || pass_on(std::fs::File::from(fd), &reader));
        Some(Tail { shared, spare })
    }

    /// After the command ended: what it wrote last. A pipe still open
    /// after [`LINGER`] (a process the command started holds it) is handed
    /// to `cat`, which passes the rest on for as long as that process
    /// writes, after `run` has exited.
    pub(crate) fn finish(mut self, forwarder: &SignalForwarder) -> Vec<u8> {
        let ended = self
            .shared
            .ended
            .lock()
            .map(|guard| {
                self.shared
                    .ended_signal
                    .wait_timeout_while(guard, LINGER, |ended| !*ended)
                    .map(|(g, _)| *g)
                    .unwrap_or(true)
            })
            .unwrap_or(true);
        if !ended {
            if let Some(spare) = self.spare.take() {
                self.shared.stop.store(true, Ordering::SeqCst);
                let mut cat = Command::new("cat");
                cat.stdin(Stdio::from(spare));
                if let Ok(err) = io::stderr().as_fd().try_clone_to_owned() {
                    cat.stdout(Stdio::from(err));
                }
                let _ = forwarder.spawn(&mut cat);
            }
        }
        self.shared
            .kept
            .lock()
            .map(|kept| kept.clone())
            .unwrap_or_default()
    }
}

fn pass_on(mut from: std::fs::File, shared: &Shared) {
    let mut buf = [0u8; 8192];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let _ = io::stderr().write_all(&buf[..n]);
        if let Ok(mut kept) = shared.kept.lock() {
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > KEPT {
                let cut = kept.len() - KEPT;
                kept.drain(..cut);
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            return; // `cat` goes on
        }
    }
    if let Ok(mut ended) = shared.ended.lock() {
        *ended = true;
        shared.ended_signal.notify_all();
    }
}
