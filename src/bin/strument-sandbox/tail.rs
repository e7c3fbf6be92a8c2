//! The command's standard error, passed on as it comes with its last part
//! kept, so that a failure can be explained from the paths it names
//! (`strument_sandbox::refusals`).
//!
//! Only when `run`'s own standard error is not a terminal (an agent, a
//! script, a CI log): there a pipe in between changes nothing the command
//! can see, while on a terminal it would turn off the colours and progress
//! bars tools draw when they see one. When standard output is the same file
//! as standard error (`2>&1`), both go into one pipe, so that their lines
//! keep their order.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use strument_sandbox::session::Waiter;
use strument_sandbox::spawn::{Spawn, Spawned};

use crate::forward::SignalForwarder;
use crate::sys;

/// How much of the end of the command's output is kept.
const KEPT: usize = 64 * 1024;

/// How long after the command ends the pipe may stay open (a process it
/// left running holds it) before the rest is handed to `cat`.
const LINGER: Duration = Duration::from_millis(200);

/// Whether `run` passes the command's standard error through a pipe.
pub(crate) fn wanted() -> bool {
    !io::stderr().is_terminal()
}

/// The CLI's waiter with the command's standard error passed on through a
/// pipe of our own and its last part kept. The command is started by
/// [`Spawn`] (`clone(CLONE_VM | CLONE_VFORK)`) with the pipe's write end as
/// its standard error (and output, when ours are one file); `run` reads the
/// other end on a thread.
pub(crate) struct Tailing<'a> {
    forwarder: &'a mut SignalForwarder,
    /// The pipe until the command has started: `(read, write)`.
    pending: Option<(OwnedFd, OwnedFd)>,
    /// Whether standard output goes into the pipe too.
    shared: bool,
    tail: Option<Tail>,
}

impl<'a> Tailing<'a> {
    /// Waits with `forwarder`, the command's output going through a pipe
    /// when one can be made (else it is inherited, and nothing kept).
    pub(crate) fn new(forwarder: &'a mut SignalForwarder) -> Self {
        Tailing {
            forwarder,
            pending: sys::pipe().ok(),
            shared: same_file(),
            tail: None,
        }
    }

    /// `spawn` with its standard error (and output, when ours are one file,
    /// so that their lines keep their order) into the pipe.
    pub(crate) fn redirect(&self, spawn: Spawn) -> Spawn {
        match &self.pending {
            Some((_, write)) if self.shared => spawn
                .stdout_to(write.as_raw_fd())
                .stderr_to(write.as_raw_fd()),
            Some((_, write)) => spawn.stderr_to(write.as_raw_fd()),
            None => spawn,
        }
    }

    /// Once the command runs: our write end closed (the command's copy
    /// closes with it) and the reader started.
    fn started(&mut self) {
        if let Some((read, write)) = self.pending.take() {
            drop(write);
            self.tail = Some(Tail::start(read));
        }
    }

    /// After the command ended: what it wrote last (see [`Tail::finish`]).
    pub(crate) fn finish(self) -> Vec<u8> {
        match self.tail {
            Some(tail) => tail.finish(self.forwarder),
            None => Vec::new(),
        }
    }
}

impl Waiter for Tailing<'_> {
    fn spawn(&mut self, cmd: &mut Command) -> io::Result<Child> {
        if let Some((_, write)) = &self.pending {
            if self.shared {
                cmd.stdout(Stdio::from(write.try_clone()?));
            }
            cmd.stderr(Stdio::from(write.try_clone()?));
        }
        let child = self.forwarder.spawn(cmd)?;
        // The command's copies of the write end must close with it.
        cmd.stdout(Stdio::inherit()).stderr(Stdio::inherit());
        self.started();
        Ok(child)
    }

    fn wait(&mut self, child: &mut Child) -> io::Result<ExitStatus> {
        self.forwarder.wait(child)
    }

    fn try_wait(&mut self, child: &mut Child) -> io::Result<Option<ExitStatus>> {
        self.forwarder.try_wait(child)
    }

    fn wait_spawned(&mut self, child: &mut Spawned) -> io::Result<ExitStatus> {
        self.started();
        self.forwarder.wait_spawned(child)
    }
}

/// Whether our standard output and error are one file (or one pipe).
fn same_file() -> bool {
    let id = |fd: std::os::fd::BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .and_then(|fd| File::from(fd).metadata())
            .map(|m| (m.dev(), m.ino()))
            .ok()
    };
    let out = id(io::stdout().as_fd());
    out.is_some() && out == id(io::stderr().as_fd())
}

#[derive(Default)]
struct Shared {
    kept: Mutex<Vec<u8>>,
    ended: Mutex<bool>,
    ended_signal: Condvar,
    stop: AtomicBool,
}

/// The reader of a command's output.
pub(crate) struct Tail {
    shared: Arc<Shared>,
    /// A second descriptor of the pipe, for `cat` to go on with.
    spare: Option<OwnedFd>,
}

impl Tail {
    /// Starts passing the command's piped output, read from `fd`, on to
    /// our standard error.
    fn start(fd: OwnedFd) -> Tail {
        let spare = fd.try_clone().ok();
        let shared = Arc::new(Shared::default());
        let reader = Arc::clone(&shared);
        std::thread::spawn(move || pass_on(File::from(fd), &reader));
        Tail { shared, spare }
    }

    /// After the command ended: what it wrote last. A pipe still open
    /// after [`LINGER`] (a process the command started holds it) is handed
    /// to `cat`, which passes the rest on for as long as that process
    /// writes, after `run` has exited.
    fn finish(mut self, forwarder: &mut SignalForwarder) -> Vec<u8> {
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

fn pass_on(mut from: File, shared: &Shared) {
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
