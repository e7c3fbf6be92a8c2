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
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use strument_sandbox::session::{Serving, Waiter};
use strument_sandbox::spawn::{Spawn, Spawned};

use crate::forward::{Polled, SignalForwarder};
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
/// its standard error (and output, when ours are one file): one `poll` on
/// the pipe and a `signalfd` of the forwarded signals waits for both, so
/// no thread of `run` reads the pipe.
pub(crate) struct Tailing<'a> {
    forwarder: &'a mut SignalForwarder,
    /// The pipe until the command has started: `(read, write)`.
    pending: Option<(OwnedFd, OwnedFd)>,
    /// Whether standard output goes into the pipe too.
    shared: bool,
    /// The pipe's read end while the command (or what it left) holds the
    /// other.
    reading: Option<File>,
    /// The last [`KEPT`] bytes read.
    kept: Vec<u8>,
}

impl<'a> Tailing<'a> {
    /// Waits with `forwarder`, the command's output going through a pipe
    /// when one can be made (else it is inherited, and nothing kept).
    pub(crate) fn new(forwarder: &'a mut SignalForwarder) -> Self {
        Tailing {
            forwarder,
            pending: sys::pipe().ok(),
            shared: same_file(),
            reading: None,
            kept: Vec::new(),
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
    /// closes with it), the read end kept for reading.
    fn started(&mut self) {
        if let Some((read, write)) = self.pending.take() {
            drop(write);
            self.reading = Some(File::from(read));
        }
    }

    /// Passes on what the pipe holds now (one read); at its end, stops
    /// reading it.
    fn pass_on(&mut self) {
        Reading {
            from: &mut self.reading,
            kept: &mut self.kept,
        }
        .ready();
    }

    /// After the command ended: what it wrote last. A pipe still open
    /// after [`LINGER`] (a process the command started holds it) is handed
    /// to `cat`, which passes the rest on for as long as that process
    /// writes, after `run` has exited.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let deadline = Instant::now() + LINGER;
        while let Some(from) = &self.reading {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if let Ok(rest) = from.try_clone() {
                    let mut cat = Command::new("cat");
                    cat.stdin(Stdio::from(rest));
                    if let Ok(err) = io::stderr().as_fd().try_clone_to_owned() {
                        cat.stdout(Stdio::from(err));
                    }
                    let _ = self.forwarder.spawn(&mut cat);
                }
                break;
            }
            match sys::poll(&[(from.as_fd(), libc::POLLIN)], Some(left)) {
                Ok(revents) if revents.first().is_some_and(|r| *r != 0) => self.pass_on(),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        std::mem::take(&mut self.kept)
    }
}

impl Waiter for Tailing<'_> {
    fn spawn(&mut self, cmd: &mut Command) -> io::Result<Child> {
        // Not this waiter's path (see `redirect`): the command inherits.
        self.pending = None;
        self.forwarder.spawn(cmd)
    }

    fn wait(&mut self, child: &mut Child) -> io::Result<ExitStatus> {
        self.forwarder.wait(child)
    }

    fn try_wait(&mut self, child: &mut Child) -> io::Result<Option<ExitStatus>> {
        self.forwarder.try_wait(child)
    }

    fn wait_spawned(&mut self, child: &mut Spawned) -> io::Result<ExitStatus> {
        self.wait_passing_on(child, None)
    }

    fn wait_spawned_serving(
        &mut self,
        child: &mut Spawned,
        serving: &mut Serving<'_>,
    ) -> io::Result<ExitStatus> {
        self.wait_passing_on(child, Some(serving))
    }
}

impl Tailing<'_> {
    /// Once the command runs, waits for it, passing its output on (and
    /// keeping the supervisor's watch, given `serving`).
    fn wait_passing_on(
        &mut self,
        child: &mut Spawned,
        serving: Option<&Serving<'_>>,
    ) -> io::Result<ExitStatus> {
        self.started();
        let mut reading = Reading {
            from: &mut self.reading,
            kept: &mut self.kept,
        };
        self.forwarder.wait_polling(child, serving, &mut reading)
    }
}

/// The pipe being read, and what was kept of it.
struct Reading<'a> {
    from: &'a mut Option<File>,
    kept: &'a mut Vec<u8>,
}

impl Polled for Reading<'_> {
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.from.as_ref().map(AsFd::as_fd)
    }

    /// Passes on what the pipe holds now (one read); at its end, stops
    /// reading it.
    fn ready(&mut self) {
        let Some(from) = self.from.as_mut() else {
            return;
        };
        let mut buf = [0u8; 8192];
        match from.read(&mut buf) {
            Ok(0) => *self.from = None,
            Ok(n) => {
                let _ = io::stderr().write_all(&buf[..n]);
                self.kept.extend_from_slice(&buf[..n]);
                if self.kept.len() > KEPT {
                    let cut = self.kept.len() - KEPT;
                    self.kept.drain(..cut);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => *self.from = None,
        }
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
