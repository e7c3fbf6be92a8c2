//! A policy whose ruleset is built: enforcing it on the caller, on a
//! child, or on a child whose refusals are read back.

use std::io;
use std::os::fd::OwnedFd;
use std::process::Command;
use std::sync::Arc;

use crate::connect::{RefusedConnect, Supervisor};
use crate::denials::{self, Audited};
use crate::error::{ApplyError, DenialLogError};
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
    /// Decides every `connect` and `bind` of the children confined here.
    connect: Arc<Supervisor>,
}

impl Prepared {
    /// A ruleset built for `report`, on a kernel with `availability`.
    pub(crate) fn new(
        report: Report,
        availability: Availability,
        ruleset: Arc<OwnedFd>,
        filter: TerminalFilter,
        connect: Supervisor,
    ) -> Prepared {
        Prepared {
            report,
            availability,
            ruleset,
            filter,
            connect: Arc::new(connect),
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
    /// installed, [`ApplyError::Supervisor`] when the connect supervisor's
    /// helper process cannot be started or its filter installed. Writes are
    /// unconfined after any error.
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
        // Connections are decided by a helper process forked now, while
        // this process is still unconfined.
        let helper = self
            .connect
            .start_helper()
            .map_err(ApplyError::Supervisor)?;
        sys::restrict_self(&self.ruleset, flags, &self.filter, Some(&helper)).map_err(
            |e| match e {
                sys::RestrictError::Landlock(e) => ApplyError::Restrict(e),
                sys::RestrictError::Seccomp(e) => ApplyError::TerminalFilter(e),
                sys::RestrictError::Supervisor(e) => ApplyError::Supervisor(e),
            },
        )?;
        Ok(self.report)
    }

    /// Makes `cmd` confine its own child process just before `exec`,
    /// leaving the caller unconfined. Between `fork` and `exec` the child
    /// performs only async-signal-safe syscalls (`prctl`, `seccomp` with
    /// the terminal filter and the connect supervisor's filter built here,
    /// `sendmsg` of the supervisor's listener to a thread of this process,
    /// and `landlock_restrict_self` on the descriptor opened here), so this
    /// is safe in a multi-threaded caller, and works for a
    /// `tokio::process::Command` through `as_std_mut`. If any fails the
    /// command does not run and spawning it returns the error.
    ///
    /// The command and everything it starts reach unix sockets only
    /// through the connect supervisor, a thread of this process:
    /// [`Prepared::refused_connects`] says what it refused.
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
        match self.connect.hook() {
            Ok(hook) => {
                sys::confine_before_exec(cmd, Arc::clone(&self.ruleset), self.filter.clone(), hook);
            }
            // Without the supervisor nothing may run: spawning fails.
            Err(e) => sys::fail_before_exec(cmd, e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }

    /// The connections the connect supervisor refused the command with pid
    /// `command` (and the processes it started), taken: a second call
    /// returns only newer ones. Complete once the command has been waited
    /// for: each refusal is recorded before the refused call returns.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// let prepared = strument_sandbox::Policy { writable: vec!["/tmp".into()], ..Default::default() }.prepare()?;
    /// let mut cmd = Command::new("tmux");
    /// cmd.arg("ls");
    /// prepared.confine(&mut cmd);
    /// let mut child = cmd.spawn()?;
    /// child.wait()?;
    /// for refused in prepared.refused_connects(child.id()) {
    ///     eprintln!("strument-sandbox: {refused}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn refused_connects(&self, command: u32) -> Vec<RefusedConnect> {
        self.connect.take_refused(command)
    }

    /// Runs `cmd` confined, as [`Prepared::confine`] does, with the kernel
    /// asked to log every access the command and its descendants are
    /// refused (`LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`: by default
    /// Landlock stops logging at `execve`), and returns its exit status
    /// with those refusals.
    ///
    /// The records are read from the audit subsystem's read-only
    /// multicast group while the command runs; they are tied to the
    /// command by the sandbox's domain record, which names the pid that
    /// created it. An audit daemon, if any, still gets its own copy.
    /// The caller stays unconfined.
    ///
    /// # Errors
    ///
    /// Before anything runs: [`DenialLogError::Abi`] before ABI 7,
    /// [`DenialLogError::Unreadable`] without `CAP_AUDIT_READ` or outside
    /// the initial namespaces, [`DenialLogError::AuditOff`] when auditing
    /// is off (checked when `CAP_AUDIT_CONTROL` allows asking). Then
    /// [`DenialLogError::Spawn`] when the command cannot start and
    /// [`DenialLogError::Wait`] when waiting for it fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::Policy;
    ///
    /// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
    /// let audited = prepared.status_with_denials(Command::new("make").arg("install"))?;
    /// for denial in &audited.denials {
    ///     eprintln!("refused {:?} on {:?}", denial.blockers, denial.path);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status_with_denials(&self, cmd: &mut Command) -> Result<Audited, DenialLogError> {
        denials::status_with_denials(
            &self.availability,
            &self.ruleset,
            &self.filter,
            self.connect.hook().map_err(DenialLogError::Spawn)?,
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
    /// let audited = prepared.status_with_denials_forwarding(&mut Command::new("make"), &forwarder)?;
    /// println!("{} refused", audited.denials.len());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status_with_denials_forwarding(
        &self,
        cmd: &mut Command,
        forwarder: &SignalForwarder,
    ) -> Result<Audited, DenialLogError> {
        denials::status_with_denials(
            &self.availability,
            &self.ruleset,
            &self.filter,
            self.connect.hook().map_err(DenialLogError::Spawn)?,
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
