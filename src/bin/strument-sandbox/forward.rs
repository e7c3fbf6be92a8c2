//! Waiting for a command the way a shell's job would: signals meant for
//! the waiting process reach the command, and a stopped command stops the
//! waiting process too.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use strument_sandbox::denials::Tracing;
use strument_sandbox::session::{Serving, Waiter};
use strument_sandbox::spawn::Spawned;

use crate::sys::{self, ChildState, SignalAction, SignalInfo, SignalSet};

/// The signals a waiting process passes on to its command.
const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// `si_code` of a signal the kernel itself sent: the terminal's Ctrl-C,
/// Ctrl-\ and hangup, sent to the whole foreground process group.
const SI_KERNEL: libc::c_int = 0x80;

/// Passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to a child command while
/// waiting for it, and keeps the terminal's job control working, as a
/// process standing between a shell and its command must.
///
/// Made with [`SignalForwarder::install`] *before* the child is spawned: it
/// blocks those signals (and SIGCHLD, SIGCONT) in the calling thread, so
/// none is lost or kills the caller in between. Spawn the command with
/// [`Waiter::spawn`], which gives it the mask the caller had
/// before. Dropping the forwarder restores the thread's mask.
///
/// While [`Waiter::wait`] waits:
///
/// - a forwarded signal *sent* to the caller (`kill`, `timeout`, a
///   supervisor) is sent on to the command; one the terminal generated
///   (Ctrl-C, Ctrl-\, hangup) is not, since the terminal already sent it to
///   the whole foreground process group, the command included, and a second
///   copy would make a program that counts interrupts quit harder than asked.
///   A signal sent to the whole process group (`kill -INT -PGID`, a shell's
///   `kill %1`) also reaches the command directly, and is forwarded as well;
/// - Ctrl-Z stops the command and the caller alike (the caller keeps the
///   default action of SIGTSTP); when the command alone is stopped
///   (`kill -STOP`), the caller stops itself so the shell sees the job
///   stopped; SIGCONT is passed on, so `fg` and `bg` resume the command.
///
/// Only the calling thread's mask is changed: in a program with other
/// threads, block these signals in all of them, or one of them takes the
/// signal and it is not forwarded.
#[derive(Debug)]
pub(crate) struct SignalForwarder {
    blocked: SignalSet,
    previous: SignalSet,
    /// SIGCHLD's disposition before: ignored, the kernel would reap the
    /// command itself and its status would be lost (a caller that ignores
    /// SIGCHLD passes that on through `exec`).
    previous_sigchld: SignalAction,
}

impl std::fmt::Debug for SignalSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignalSet")
    }
}

impl SignalForwarder {
    /// Blocks the forwarded signals, SIGCHLD and SIGCONT in the calling
    /// thread, until the forwarder is dropped.
    ///
    /// # Errors
    ///
    /// The error of `pthread_sigmask`, which fails only for an invalid
    /// argument.
    pub(crate) fn install() -> io::Result<SignalForwarder> {
        let mut signals = FORWARDED.to_vec();
        signals.extend([libc::SIGCHLD, libc::SIGCONT]);
        let blocked = SignalSet::of(&signals);
        let previous_sigchld = sys::default_disposition(libc::SIGCHLD)?;
        let previous = match sys::block_signals(&blocked) {
            Ok(previous) => previous,
            Err(e) => {
                sys::restore_disposition(libc::SIGCHLD, &previous_sigchld);
                return Err(e);
            }
        };
        Ok(SignalForwarder {
            blocked,
            previous,
            previous_sigchld,
        })
    }

    /// One look at `child`: reaped when it has ended; stopped with it when
    /// it alone was stopped; otherwise one signal taken (waiting at most
    /// `timeout`, forever with `None`) and passed on.
    fn poll(&self, child: u32, timeout: Option<Duration>) -> io::Result<Option<ExitStatus>> {
        self.step(child, Some(timeout))
    }

    /// Waits until `child` ends, as [`Waiter::wait_spawned`] does, on one
    /// `poll` of a `signalfd` of the forwarded signals, the connect
    /// supervisor's watch over the command (served here, so no thread
    /// starts for a command that never connects) and `extra`'s descriptor
    /// (a pipe the caller passes on). Without a `signalfd`, polls every
    /// 10 ms.
    ///
    /// # Errors
    ///
    /// As [`SignalForwarder::step`].
    pub(crate) fn wait_polling(
        &self,
        child: &mut Spawned,
        serving: Option<&Serving<'_>>,
        extra: &mut dyn Polled,
    ) -> io::Result<ExitStatus> {
        let signals = sys::signalfd(&self.blocked).ok();
        let timeout = signals.is_none().then_some(Duration::from_millis(10));
        let ready = libc::POLLIN | libc::POLLHUP | libc::POLLERR;
        let mut signal_ready = signals.is_none();
        loop {
            // A signal is taken only once the signalfd says one is
            // pending, so none is taken before the poll that waits for it.
            let take = signal_ready.then_some(Some(Duration::ZERO));
            if let Some(status) = self.step(child.id(), take)? {
                return Ok(status);
            }
            let (watch, other) = (serving.and_then(Serving::fd), extra.fd());
            let fds: Vec<(BorrowedFd<'_>, libc::c_short)> =
                [signals.as_ref().map(AsFd::as_fd), watch, other]
                    .into_iter()
                    .flatten()
                    .map(|fd| (fd, libc::POLLIN))
                    .collect();
            let revents = sys::poll(&fds, timeout)?;
            let mut at = revents.iter().map(|r| r & ready != 0);
            signal_ready = signals.is_none() || at.next().unwrap_or(false);
            let (watch_ready, other_ready) = (
                watch.is_some() && at.next().unwrap_or(false),
                other.is_some() && at.next().unwrap_or(false),
            );
            if let Some(serving) = serving.filter(|_| watch_ready) {
                serving.serve();
            }
            if other_ready {
                extra.ready();
            }
        }
    }

    /// One step of waiting for `child`: reaps it if it ended (with the
    /// signals still pending), or follows its stop; then, with
    /// `take: Some(timeout)`, takes one signal, waiting at most `timeout`,
    /// and forwards it. `take: None` takes none: for a caller that waits
    /// on a `signalfd` of [`SignalForwarder::blocked`] itself and takes one
    /// only when it is readable, so that none is taken before its wait.
    pub(crate) fn step(
        &self,
        child: u32,
        take: Option<Option<Duration>>,
    ) -> io::Result<Option<ExitStatus>> {
        let pid = libc::pid_t::try_from(child).map_err(io::Error::other)?;
        match sys::wait_child(pid)? {
            ChildState::Ended(raw) => {
                // Signals still pending were meant for the command,
                // which has ended: they must not kill the caller once
                // its mask is restored.
                while sys::wait_signal(&self.blocked, Some(Duration::ZERO))?.is_some() {}
                return Ok(Some(ExitStatus::from_raw(raw)));
            }
            ChildState::Stopped(_) => {
                // The command alone was stopped: on a terminal, stop with
                // it, so the shell shows the job stopped; SIGCONT, from
                // `fg` or `bg`, resumes this process and is passed on
                // below. Off a terminal nobody would resume this process,
                // so it waits on; SIGTSTP, not SIGSTOP, so that the kernel
                // drops it in an orphaned process group.
                if sys::foreground_of_a_terminal() {
                    if let Ok(me) = libc::pid_t::try_from(std::process::id()) {
                        let _ = sys::kill(me, libc::SIGTSTP);
                    }
                }
            }
            ChildState::Running => {}
        }
        // What the command left behind and `run` adopted, once it ends.
        sys::reap_orphans(pid);
        if let Some(timeout) = take {
            if let Some(info) = sys::wait_signal(&self.blocked, timeout)? {
                forward(pid, info);
            }
        }
        Ok(None)
    }
}

/// Spawning gives the command the signal mask the caller had before
/// [`SignalForwarder::install`] (a blocked mask would otherwise be
/// inherited, and the command could not be interrupted); waiting forwards
/// signals as described on [`SignalForwarder`] and discards those still
/// pending when the command has ended, which were meant for it.
impl Waiter for SignalForwarder {
    fn spawn(&mut self, cmd: &mut Command) -> io::Result<Child> {
        self.prepare_spawn(cmd);
        cmd.spawn()
    }

    fn prepare_spawn(&mut self, cmd: &mut Command) {
        sys::set_signal_mask_before_exec(cmd, self.previous);
    }

    /// `run --explain-denials`: another thread traces the command and
    /// reaps it; this one passes signals on as [`Waiter::wait`] does, and
    /// once the command has ended, to the processes it left running, which
    /// the tracer still waits for. Ctrl-Z is blocked here meanwhile: the
    /// command takes it, and this process stops once the command has
    /// stopped, so that no stop is left half-delivered to a tracee (a
    /// stopped tracer would hold one until `fg`, and the command would stop
    /// again after it). Child stops raise no SIGCHLD meanwhile: a traced
    /// command stops twice for every traced call.
    fn watch(&mut self, pid: u32, tracing: &Tracing) -> io::Result<()> {
        let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
        let quiet = sys::no_child_stop_signals()?;
        let unblocked = sys::block_signals(&SignalSet::of(&[libc::SIGTSTP]));
        let mut signals = FORWARDED.to_vec();
        signals.extend([libc::SIGCHLD, libc::SIGCONT, libc::SIGTSTP]);
        let set = SignalSet::of(&signals);
        let result = (|| {
            while !tracing.done() {
                if tracing.take_command_stopped() && sys::foreground_of_a_terminal() {
                    sys::stop_self()?;
                }
                let Some(info) = sys::wait_signal(&set, None)? else {
                    continue;
                };
                if info.signal == libc::SIGCHLD {
                    continue;
                }
                if !tracing.command_ended() {
                    forward(pid, info);
                } else if FORWARDED.contains(&info.signal) {
                    for left in tracing.processes() {
                        if let Ok(left) = libc::pid_t::try_from(left) {
                            let _ = sys::kill(left, info.signal);
                        }
                    }
                }
            }
            // Pending ones were meant for the command, which has ended.
            while sys::wait_signal(&set, Some(Duration::ZERO))?.is_some() {}
            Ok(())
        })();
        if let Ok(previous) = unblocked {
            let _ = sys::set_signal_mask(&previous);
        }
        sys::restore_disposition(libc::SIGCHLD, &quiet);
        result
    }

    fn wait(&mut self, child: &mut Child) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.poll(child.id(), None)? {
                return Ok(status);
            }
        }
    }

    fn wait_spawned(&mut self, child: &mut Spawned) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.poll(child.id(), None)? {
                return Ok(status);
            }
        }
    }

    fn try_wait(&mut self, child: &mut Child) -> io::Result<Option<ExitStatus>> {
        self.poll(child.id(), Some(Duration::ZERO))
    }

    fn wait_spawned_serving(
        &mut self,
        child: &mut Spawned,
        serving: &mut Serving<'_>,
    ) -> io::Result<ExitStatus> {
        self.wait_polling(child, Some(serving), &mut ())
    }
}

/// A descriptor [`SignalForwarder::wait_polling`] polls besides its own.
pub(crate) trait Polled {
    /// The descriptor, while there is one to poll.
    fn fd(&self) -> Option<BorrowedFd<'_>>;
    /// Called when it is readable (or hung up).
    fn ready(&mut self);
}

/// Nothing more to poll.
impl Polled for () {
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn ready(&mut self) {}
}

impl Drop for SignalForwarder {
    fn drop(&mut self) {
        // A signal arriving after `wait` returned is delivered now, with
        // the caller's own disposition.
        let _ = sys::set_signal_mask(&self.previous);
        sys::restore_disposition(libc::SIGCHLD, &self.previous_sigchld);
    }
}

/// Passes a signal the waiting process took on to the command `pid`.
fn forward(pid: libc::pid_t, info: SignalInfo) {
    if should_forward(pid, info) {
        // ESRCH: it ended meanwhile, and the next waitpid reaps it.
        let _ = sys::kill(pid, info.signal);
    }
}

/// Whether a signal the waiting process took is sent on to the command `pid`.
fn should_forward(pid: libc::pid_t, info: SignalInfo) -> bool {
    match info.signal {
        libc::SIGCHLD => false,
        // The command signalling its own parent is not asking for an echo.
        _ if info.pid == pid => false,
        libc::SIGCONT => true,
        // The terminal sent it to the whole foreground group: the command
        // has its own copy.
        _ => info.code != SI_KERNEL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(signal: libc::c_int, code: libc::c_int, pid: libc::pid_t) -> SignalInfo {
        SignalInfo { signal, code, pid }
    }

    #[test]
    fn the_terminal_s_copy_is_not_sent_twice() {
        const CHILD: libc::pid_t = 4242;
        const SI_USER: libc::c_int = 0;
        for signal in FORWARDED {
            // Ctrl-C, Ctrl-\, hangup: the command got the same copy.
            assert!(!should_forward(CHILD, info(signal, SI_KERNEL, 0)));
            // kill(1), timeout(1), a supervisor: only this process got it.
            assert!(should_forward(CHILD, info(signal, SI_USER, 77)));
            // The command signalling its parent.
            assert!(!should_forward(CHILD, info(signal, SI_USER, CHILD)));
        }
        assert!(should_forward(CHILD, info(libc::SIGCONT, SI_KERNEL, 0)));
        assert!(should_forward(CHILD, info(libc::SIGCONT, SI_USER, 77)));
        assert!(!should_forward(CHILD, info(libc::SIGCHLD, 1, CHILD)));
    }
}
