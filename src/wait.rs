//! How a confined command is started and waited for: the one thing a
//! terminal program does differently from an agent.

use std::io;
use std::process::{Child, Command, ExitStatus};

use crate::denials::Tracing;

/// Starts a confined command and waits for it.
///
/// [`Session::run`](crate::Session::run) waits plainly ([`PlainWait`]). A
/// program standing between a shell and its command (the CLI's `run`)
/// passes its own, which forwards signals and keeps the terminal's job
/// control working; that changes the calling thread's signal mask, so it
/// stays out of the library an agent links.
///
/// # Examples
///
/// ```no_run
/// use std::io;
/// use std::process::{Child, Command, ExitStatus};
/// use strument_sandbox::{Session, session::Waiter};
///
/// /// Logs each command it starts.
/// struct Logged;
/// impl Waiter for Logged {
///     fn spawn(&mut self, cmd: &mut Command) -> io::Result<Child> {
///         eprintln!("starting {:?}", cmd.get_program());
///         cmd.spawn()
///     }
/// }
///
/// let session = Session::builder("/home/me/project").open()?;
/// let finished = session.run_waiting(&mut Command::new("make"), &mut Logged)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Waiter {
    /// Starts `cmd`, already confined.
    ///
    /// # Errors
    ///
    /// As [`Command::spawn`].
    fn spawn(&mut self, cmd: &mut Command) -> io::Result<Child> {
        cmd.spawn()
    }

    /// Waits for `child` to end and reaps it.
    ///
    /// # Errors
    ///
    /// As [`Child::wait`].
    fn wait(&mut self, child: &mut Child) -> io::Result<ExitStatus> {
        child.wait()
    }

    /// Reaps `child` if it has ended; returns at once otherwise (the caller
    /// polls, doing other work in between).
    ///
    /// # Errors
    ///
    /// As [`Child::try_wait`].
    fn try_wait(&mut self, child: &mut Child) -> io::Result<Option<ExitStatus>> {
        child.try_wait()
    }

    /// Makes `cmd` ready to be spawned by another thread, as
    /// [`Waiter::spawn`] would spawn it: a traced command
    /// ([`Prepared::status_with_denials_waiting`](crate::Prepared::status_with_denials_waiting))
    /// is spawned by its tracer. Nothing by default.
    fn prepare_spawn(&mut self, cmd: &mut Command) {
        let _ = cmd;
    }

    /// While another thread of this process traces the command `pid`, does
    /// what [`Waiter::wait`] does besides reaping (pass signals on, follow
    /// the command's stops), until [`Tracing::done`]. The tracer wakes the
    /// calling thread with `SIGCHLD` at each change. Returns at once by
    /// default: nothing to pass on.
    ///
    /// # Errors
    ///
    /// When waiting for signals fails; the trace goes on regardless.
    fn watch(&mut self, pid: u32, tracing: &Tracing) -> io::Result<()> {
        let _ = (pid, tracing);
        Ok(())
    }
}

/// [`Command::spawn`] and [`Child::wait`], nothing more.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainWait;

impl Waiter for PlainWait {}
