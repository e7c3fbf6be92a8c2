//! Waiting for a command the way a shell's job would: signals meant for
//! the waiting process reach the command, and a stopped command stops the
//! waiting process too.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use crate::sys::{self, ChildState, SignalAction, SignalInfo, SignalSet};

/// The signals a waiting process passes on to its command.
pub(crate) const FORWARDED: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

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
/// [`SignalForwarder::spawn`], which gives it the mask the caller had
/// before. Dropping the forwarder restores the thread's mask.
///
/// While [`SignalForwarder::wait`] waits:
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
///
/// # Examples
///
/// ```no_run
/// use std::process::Command;
/// use strument_sandbox::{Policy, SignalForwarder};
///
/// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
/// let forwarder = SignalForwarder::install()?; // before spawning
/// let mut cmd = Command::new("go");
/// cmd.args(["test", "./..."]);
/// prepared.confine(&mut cmd);
/// let status = forwarder.wait(forwarder.spawn(&mut cmd)?)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SignalForwarder {
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
    ///
    /// # Examples
    ///
    /// ```
    /// let forwarder = strument_sandbox::SignalForwarder::install()?;
    /// drop(forwarder); // the mask is as it was
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn install() -> io::Result<SignalForwarder> {
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

    /// Spawns `cmd` with the signal mask the caller had before
    /// [`SignalForwarder::install`] (a blocked mask would otherwise be
    /// inherited, and the command could not be interrupted).
    ///
    /// # Errors
    ///
    /// As [`Command::spawn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::process::Command;
    /// let forwarder = strument_sandbox::SignalForwarder::install()?;
    /// let child = forwarder.spawn(Command::new("sh").args(["-c", "kill -TERM $$"]))?;
    /// let status = forwarder.wait(child)?;
    /// # use std::os::unix::process::ExitStatusExt;
    /// assert_eq!(status.signal(), Some(libc::SIGTERM));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn(&self, cmd: &mut Command) -> io::Result<Child> {
        self.unblock_in(cmd);
        cmd.spawn()
    }

    /// Makes `cmd`'s child start with the caller's original signal mask.
    pub(crate) fn unblock_in(&self, cmd: &mut Command) {
        sys::set_signal_mask_before_exec(cmd, self.previous);
    }

    /// Waits for `child` to end, forwarding signals as described on
    /// [`SignalForwarder`], and reaps it. Signals still pending when it
    /// has ended were meant for it and are discarded.
    ///
    /// # Errors
    ///
    /// The error of `waitpid` (`ECHILD` when the child was already waited
    /// for) or of waiting for a signal.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::process::Command;
    /// let forwarder = strument_sandbox::SignalForwarder::install()?;
    /// let status = forwarder.wait(forwarder.spawn(Command::new("sh").args(["-c", "exit 3"]))?)?;
    /// assert_eq!(status.code(), Some(3));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wait(&self, child: Child) -> io::Result<ExitStatus> {
        self.wait_ticking(&child, None)
    }

    /// [`SignalForwarder::wait`], calling `tick` between checks; `tick`
    /// itself must block briefly,
    /// or this spins.
    pub(crate) fn wait_ticking(
        &self,
        child: &Child,
        mut tick: Option<&mut dyn FnMut()>,
    ) -> io::Result<ExitStatus> {
        let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
        loop {
            match sys::wait_child(pid)? {
                ChildState::Ended(raw) => {
                    // Signals still pending were meant for the command,
                    // which has ended: they must not kill the caller once
                    // its mask is restored.
                    while sys::wait_signal(&self.blocked, Some(Duration::ZERO))?.is_some() {}
                    return Ok(ExitStatus::from_raw(raw));
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
            let timeout = match tick.as_mut() {
                Some(tick) => {
                    tick();
                    Some(Duration::ZERO)
                }
                None => None,
            };
            if let Some(info) = sys::wait_signal(&self.blocked, timeout)? {
                forward(pid, info);
            }
        }
    }
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
pub(crate) fn forward(pid: libc::pid_t, info: SignalInfo) {
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
