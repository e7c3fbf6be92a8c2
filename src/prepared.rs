//! A policy whose ruleset is built: enforcing it on the caller, on a
//! child, or on a child whose refusals are read back.

use std::io;
use std::os::fd::OwnedFd;
use std::process::Command;
use std::sync::Arc;

use crate::denials::{self, Denied};
use crate::error::{ApplyError, TraceError};
use crate::probe::Availability;
use crate::report::Report;
use crate::supervise::SignalForwarder;
use crate::sys;
use crate::terminal::TerminalFilter;

/// A policy whose ruleset is built but not yet enforced.
///
/// Made by [`Policy::prepare`](crate::Policy::prepare). Every root is already open, so the report
/// is final: nothing created afterwards joins it.
#[derive(Debug, Clone)]
pub struct Prepared {
    report: Report,
    availability: Availability,
    ruleset: Arc<OwnedFd>,
    /// The seccomp program against terminal injection, built here so that
    /// the child only installs it.
    filter: TerminalFilter,
}

impl Prepared {
    /// A ruleset built for `report`, on a kernel with `availability`.
    pub(crate) fn new(
        report: Report,
        availability: Availability,
        ruleset: Arc<OwnedFd>,
        filter: TerminalFilter,
    ) -> Prepared {
        Prepared {
            report,
            availability,
            ruleset,
            filter,
        }
    }

    /// What enforcing this ruleset grants.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let prepared = strument_sandbox::Policy { writable: vec!["/tmp".into()], ..Default::default() }.prepare()?;
    /// println!("{} roots granted", prepared.report().granted.len());
    /// # Ok::<(), strument_sandbox::ApplyError>(())
    /// ```
    #[must_use]
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// Enforces the ruleset on the calling process; see [`Policy::apply`](crate::Policy::apply)
    /// for what that confines.
    ///
    /// # Errors
    ///
    /// [`ApplyError::Threads`] when the process has other threads and the
    /// kernel predates ABI 8, [`ApplyError::CountThreads`] when
    /// `/proc/self/task` cannot be read to find out, and
    /// [`ApplyError::Restrict`] when the kernel refuses,
    /// [`ApplyError::TerminalFilter`] when the seccomp filter cannot be
    /// installed. Writes are unconfined after any error.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let prepared = strument_sandbox::Policy { writable: vec!["/tmp".into()], ..Default::default() }.prepare()?;
    /// let report = prepared.restrict_self()?;
    /// # Ok::<(), strument_sandbox::ApplyError>(())
    /// ```
    pub fn restrict_self(self) -> Result<Report, ApplyError> {
        let flags = if self.availability.all_threads() {
            sys::RESTRICT_SELF_TSYNC
        } else {
            let threads = count_threads().map_err(ApplyError::CountThreads)?;
            if threads != 1 {
                return Err(ApplyError::Threads {
                    threads,
                    abi: self.availability.abi,
                });
            }
            0
        };
        sys::restrict_self(&self.ruleset, flags, &self.filter).map_err(|e| match e {
            sys::RestrictError::Landlock(e) => ApplyError::Restrict(e),
            sys::RestrictError::Seccomp(e) => ApplyError::TerminalFilter(e),
        })?;
        Ok(self.report)
    }

    /// Makes `cmd` confine its own child process just before `exec`,
    /// leaving the caller unconfined. Between `fork` and `exec` the child
    /// performs only three async-signal-safe syscalls (`prctl`, `seccomp`
    /// with the terminal filter built here, and `landlock_restrict_self` on
    /// the descriptor opened here), so this is safe in a multi-threaded
    /// caller. If any fails the command does not run and spawning it
    /// returns the error.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// let prepared = strument_sandbox::Policy { writable: vec!["/tmp".into()], ..Default::default() }.prepare()?;
    /// let mut cmd = Command::new("rm");
    /// cmd.args(["-rf", "/home/me"]);
    /// prepared.confine(&mut cmd);
    /// assert!(!cmd.status()?.success());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn confine(&self, cmd: &mut Command) {
        sys::confine_before_exec(cmd, Arc::clone(&self.ruleset), self.filter.clone());
    }

    /// Runs `cmd` confined, as [`Prepared::confine`] does, traced, and
    /// returns its exit status with every write it was refused, each judged
    /// by [`Report::explain`]: the smallest root that would grant it, or
    /// that the sandbox was not what refused it.
    ///
    /// The caller stays unconfined and traces the command (`ptrace`, which
    /// needs no privilege for one's own child, on every kernel with
    /// Landlock). A seccomp filter stops only the system calls that write
    /// by path (`open` and `openat` with a write or create flag, `openat2`,
    /// `creat`, `mkdir`, `mknod`, `unlink`, `rmdir`, `rename`, `link`,
    /// `symlink`, `truncate` and their `*at` forms); each runs, and one that
    /// failed with `EACCES`, `EPERM` or `EXDEV` is judged. Every process and
    /// thread the command starts is traced too, and this returns when all
    /// have ended, not only the command. The command cannot itself trace
    /// (`strace`, `gdb`: a process has one tracer) and no debugger can
    /// attach to it.
    ///
    /// The command is spawned, traced and waited for on a thread of its
    /// own, which waits only for its own children: the caller's other
    /// children are left alone.
    ///
    /// # Errors
    ///
    /// Before anything runs: [`TraceError::Untraceable`] when this process
    /// is itself traced or `ptrace` is refused here,
    /// [`TraceError::Architecture`] on an architecture whose system calls
    /// are not known here. Then [`TraceError::Spawn`] when the command
    /// cannot start and [`TraceError::Wait`] when waiting for it fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::{Policy, RefusedBy};
    ///
    /// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
    /// let denied = prepared.status_with_denials(Command::new("make").arg("install"))?;
    /// for denial in &denied.denials {
    ///     eprintln!("{denial}");
    ///     if denial.refused_by == RefusedBy::Sandbox {
    ///         println!("would need: {:?}", denial.allow());
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status_with_denials(&self, cmd: &mut Command) -> Result<Denied, TraceError> {
        denials::status_with_denials(
            &self.availability,
            &self.report,
            &self.ruleset,
            &self.filter,
            cmd,
            None,
        )
    }

    /// [`Prepared::status_with_denials`], waiting for the command with
    /// `forwarder`: signals sent to the caller reach the command, and job
    /// control keeps working (see [`SignalForwarder`]). Install the
    /// forwarder before calling this.
    ///
    /// # Errors
    ///
    /// As [`Prepared::status_with_denials`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::{Policy, SignalForwarder};
    ///
    /// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
    /// let forwarder = SignalForwarder::install()?;
    /// let denied = prepared.status_with_denials_forwarding(&mut Command::new("make"), &forwarder)?;
    /// println!("{} refused", denied.denials.len());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status_with_denials_forwarding(
        &self,
        cmd: &mut Command,
        forwarder: &SignalForwarder,
    ) -> Result<Denied, TraceError> {
        denials::status_with_denials(
            &self.availability,
            &self.report,
            &self.ruleset,
            &self.filter,
            cmd,
            Some(forwarder),
        )
    }
}

/// Counts the threads of the calling process.
fn count_threads() -> io::Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc/self/task")? {
        entry?;
        n += 1;
    }
    Ok(n)
}
