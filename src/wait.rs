//! How a confined command is started and waited for: the one thing a
//! terminal program does differently from an agent.

use std::collections::HashSet;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::connect::Serving;
use crate::sys;

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

    /// Waits for a child started by [`Spawn`](crate::spawn::Spawn) to end
    /// and reaps it.
    ///
    /// # Errors
    ///
    /// As [`Spawned::wait`].
    fn wait_spawned(&mut self, child: &mut Spawned) -> io::Result<ExitStatus> {
        child.wait()
    }

    /// [`Waiter::wait_spawned`], with the connect supervisor's watch over
    /// the command kept by this thread while it waits: poll
    /// [`Serving::fd`] with whatever else is waited on and call
    /// [`Serving::serve`] when it is readable, and no thread starts for a
    /// command that never connects ([`Session::run_spawn`](crate::Session::run_spawn)
    /// calls this). By default a thread of the supervisor's keeps the
    /// watch ([`Serving::in_background`]) and this is
    /// [`Waiter::wait_spawned`].
    ///
    /// # Errors
    ///
    /// As [`Waiter::wait_spawned`], or when the supervisor's thread cannot
    /// start.
    fn wait_spawned_serving(
        &mut self,
        child: &mut Spawned,
        serving: &mut Serving<'_>,
    ) -> io::Result<ExitStatus> {
        serving.in_background()?;
        self.wait_spawned(child)
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

/// A child started by [`Spawn::spawn`](crate::spawn::Spawn::spawn).
/// Dropping it neither waits for nor kills the child.
#[derive(Debug)]
pub struct Spawned {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
}

impl Spawned {
    pub(crate) fn started(pid: libc::pid_t) -> Spawned {
        Spawned { pid, status: None }
    }

    /// The child's process id.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let prepared = strument_sandbox::Policy::default().prepare()?;
    /// let child = strument_sandbox::spawn::Spawn::new("sleep").arg("1").spawn(&prepared)?;
    /// println!("started {}", child.id());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Waits for the child to end and reaps it; later calls return the
    /// same status.
    ///
    /// # Errors
    ///
    /// The error of `waitpid` (`ECHILD` when someone else reaped it).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let prepared = strument_sandbox::Policy::default().prepare()?;
    /// let status = strument_sandbox::spawn::Spawn::new("true").spawn(&prepared)?.wait()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let raw = sys::wait_pid(self.pid, true)?.ok_or_else(|| io::Error::other("no status"))?;
        let status = ExitStatus::from_raw(raw);
        self.status = Some(status);
        Ok(status)
    }

    /// The child's status if it has ended (reaping it), `None` if it runs.
    ///
    /// # Errors
    ///
    /// As [`Spawned::wait`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let prepared = strument_sandbox::Policy::default().prepare()?;
    /// let mut child = strument_sandbox::spawn::Spawn::new("sleep").arg("9").spawn(&prepared)?;
    /// assert!(child.try_wait()?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = sys::wait_pid(self.pid, false)?.map(ExitStatus::from_raw);
        }
        Ok(self.status)
    }
}

/// What a [`Waiter`] watching a traced command can see
/// ([`Waiter::watch`]): the tracer, another thread of this process,
/// updates it, and wakes the watching thread with `SIGCHLD` at each change
/// (the command stopped or ended, the trace done).
#[derive(Debug)]
pub struct Tracing {
    pub(crate) shared: TraceState,
    pub(crate) done: AtomicBool,
    pub(crate) stopped: AtomicBool,
    /// The thread to wake: the one that called
    /// [`Prepared::status_with_denials_waiting`](crate::Prepared::status_with_denials_waiting).
    pub(crate) watcher: libc::pid_t,
}

impl Tracing {
    /// Whether the trace is over: the command and every process it
    /// started have ended.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn look(tracing: &strument_sandbox::denials::Tracing) {
    /// while !tracing.done() { /* wait for SIGCHLD, pass signals on */ }
    /// # }
    /// ```
    #[must_use]
    pub fn done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    /// Whether the command itself has ended (processes it started may
    /// still run, and the tracer waits for them).
    ///
    /// # Examples
    ///
    /// ```
    /// # fn look(tracing: &strument_sandbox::denials::Tracing) {
    /// let to = if tracing.command_ended() { tracing.processes() } else { vec![] };
    /// # }
    /// ```
    #[must_use]
    pub fn command_ended(&self) -> bool {
        self.shared.root_ended.load(Ordering::SeqCst)
    }

    /// Whether the command stopped for job control (Ctrl-Z, `SIGSTOP`)
    /// since this was last asked: a waiter standing between a shell and the
    /// command stops itself too, so the shell sees the job stopped.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn look(tracing: &strument_sandbox::denials::Tracing) {
    /// if tracing.take_command_stopped() { /* stop this process too */ }
    /// # }
    /// ```
    #[must_use]
    pub fn take_command_stopped(&self) -> bool {
        self.stopped.swap(false, Ordering::SeqCst)
    }

    /// The traced processes and threads alive now (process and thread ids).
    ///
    /// # Examples
    ///
    /// ```
    /// # fn look(tracing: &strument_sandbox::denials::Tracing) {
    /// println!("{} still running", tracing.processes().len());
    /// # }
    /// ```
    #[must_use]
    pub fn processes(&self) -> Vec<u32> {
        self.shared
            .live
            .lock()
            .map(|l| l.iter().filter_map(|p| u32::try_from(*p).ok()).collect())
            .unwrap_or_default()
    }

    pub(crate) fn wake(&self) {
        // ESRCH only if that thread is gone, and then nobody is waiting.
        let _ = sys::signal_thread(self.watcher, libc::SIGCHLD);
    }
}

/// What the tracer shares with the thread forwarding signals.
#[derive(Debug, Default)]
pub(crate) struct TraceState {
    /// The command itself has ended; processes it started may live on.
    pub(crate) root_ended: AtomicBool,
    /// The traced processes and threads alive now.
    pub(crate) live: Mutex<HashSet<libc::pid_t>>,
}
