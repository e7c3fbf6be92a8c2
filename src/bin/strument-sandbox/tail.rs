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
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use strument_sandbox::session::Waiter;

use crate::forward::SignalForwarder;

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
/// pipe (when [`wanted`]) and its last part kept.
pub(crate) struct Tailing<'a> {
    forwarder: &'a mut SignalForwarder,
    pending: Option<Pending>,
    tail: Option<Tail>,
}

impl<'a> Tailing<'a> {
    /// Waits with `forwarder`; with `cmd`, pipes its standard error first.
    pub(crate) fn new(forwarder: &'a mut SignalForwarder, cmd: Option<&mut Command>) -> Self {
        let pending = cmd.map(|cmd| pipe(cmd, forwarder));
        Tailing {
            forwarder,
            pending,
            tail: None,
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
        let mut child = self.forwarder.spawn(cmd)?;
        if let Some(pending) = self.pending.take() {
            // The command holds the shared pipe's write end, which must
            // close with the child for the reader to see the end.
            cmd.stdout(Stdio::inherit()).stderr(Stdio::inherit());
            self.tail = Tail::start(pending, &mut child);
        }
        Ok(child)
    }

    fn wait(&mut self, child: &mut Child) -> io::Result<ExitStatus> {
        self.forwarder.wait(child)
    }

    fn try_wait(&mut self, child: &mut Child) -> io::Result<Option<ExitStatus>> {
        self.forwarder.try_wait(child)
    }
}

/// Where the command's output will come from, set up before it is spawned.
enum Pending {
    /// Its own standard error, piped: read from the child.
    Stderr,
    /// Standard output and error into one pipe, whose other end a `cat` of
    /// our own relays to us (std makes a pipe only for a child): its read end.
    Shared { from: OwnedFd, relay: Child },
}

/// Makes `cmd`'s standard error a pipe, shared with its standard output when
/// ours are the same file.
fn pipe(cmd: &mut Command, forwarder: &mut SignalForwarder) -> Pending {
    if same_file() {
        let mut relay = Command::new("cat");
        relay.stdin(Stdio::piped()).stdout(Stdio::piped());
        if let Ok(mut relay) = forwarder.spawn(&mut relay) {
            if let (Some(to), Some(from)) = (relay.stdin.take(), relay.stdout.take()) {
                let to = OwnedFd::from(to);
                if let Ok(copy) = to.try_clone() {
                    cmd.stdout(Stdio::from(copy)).stderr(Stdio::from(to));
                    return Pending::Shared {
                        from: OwnedFd::from(from),
                        relay,
                    };
                }
            }
            let _ = relay.kill();
            let _ = relay.wait();
        }
    }
    cmd.stderr(Stdio::piped());
    Pending::Stderr
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
    relay: Option<Child>,
}

impl Tail {
    /// Starts passing the command's piped output on to our standard error.
    /// `cmd` must be dropped by now: it holds the pipe's write end.
    fn start(pending: Pending, child: &mut Child) -> Option<Tail> {
        let (fd, relay) = match pending {
            Pending::Stderr => (OwnedFd::from(child.stderr.take()?), None),
            Pending::Shared { from, relay } => (from, Some(relay)),
        };
        let spare = fd.try_clone().ok();
        let shared = Arc::new(Shared::default());
        let reader = Arc::clone(&shared);
        std::thread::spawn(move || pass_on(File::from(fd), &reader));
        Some(Tail {
            shared,
            spare,
            relay,
        })
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
        if ended {
            if let Some(mut relay) = self.relay.take() {
                let _ = relay.wait();
            }
        } else if let Some(spare) = self.spare.take() {
            self.shared.stop.store(true, Ordering::SeqCst);
            let mut cat = Command::new("cat");
            cat.stdin(Stdio::from(spare));
            if let Ok(err) = io::stderr().as_fd().try_clone_to_owned() {
                cat.stdout(Stdio::from(err));
            }
            let _ = forwarder.spawn(&mut cat);
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
