//! A policy whose ruleset is built: enforcing it on the caller, on a
//! child, or on a child whose refusals are read back.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use crate::connect::{RefusedConnect, Supervisor};
use crate::denials::{self, Denied};
use crate::environment::{self, Setting};
use crate::error::{ApplyError, TraceError};
use crate::fds;
use crate::report::Report;
use crate::sys;
use crate::terminal::TerminalFilter;
use crate::wait::{PlainWait, Waiter};

/// A policy whose ruleset is built but not yet enforced.
///
/// Made by [`Policy::prepare`](crate::Policy::prepare). Every root is already open, so the report
/// is final: nothing created afterwards joins it.
#[derive(Debug, Clone)]
pub struct Prepared {
    report: Report,
    ruleset: Arc<OwnedFd>,
    /// The seccomp program against terminal injection, built here so that
    /// the child only installs it.
    filter: TerminalFilter,
    /// Descriptors above 2 the confined command keeps (besides a make
    /// jobserver's, found in its environment).
    keep_fds: Vec<RawFd>,
    /// The environment a confined command gets ([`crate::environment`])
    /// and its session directory, shared by the clones: worked out the
    /// first time a command needs it (a search of `PATH` for some tools),
    /// so never for [`Prepared::restrict_self`], which leaves the
    /// process's environment alone.
    environment: Arc<OnceLock<Environment>>,
    /// Decides every `connect` and `bind` of the children confined here.
    connect: Arc<Supervisor>,
}

/// The environment of one [`Prepared`] and its clones.
#[derive(Debug)]
struct Environment {
    settings: Vec<Setting>,
    /// The session directory the settings name, removed with the last
    /// clone if it was made and nothing was left in it.
    session_dir: SessionDir,
}

/// The session directory of one [`Prepared`] and its clones
/// (`/dev/shm/strument-sandbox-<uid>/<key>`, or in `/tmp`): made for the
/// first command that gets the environment, removed when the last clone goes if nothing was
/// left in it (a daemon's socket keeps it). A long-running agent that
/// prepares a policy per task leaves no directory behind.
#[derive(Debug)]
struct SessionDir {
    /// Where the environment points (`None`: nowhere, nothing to remove).
    dir: Option<std::path::PathBuf>,
    made: std::sync::atomic::AtomicBool,
}

impl SessionDir {
    /// Notes the outcome of making the directory for a command.
    fn made(&self, result: &io::Result<()>) {
        if result.is_ok() {
            self.made.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Drop for SessionDir {
    fn drop(&mut self) {
        match &self.dir {
            Some(dir) if self.made.load(std::sync::atomic::Ordering::Relaxed) => {
                environment::remove_session_dir(dir);
            }
            _ => {}
        }
    }
}

impl Prepared {
    /// A ruleset built for `report`, on the kernel its probe describes.
    pub(crate) fn new(
        report: Report,
        ruleset: Arc<OwnedFd>,
        filter: TerminalFilter,
        connect: Supervisor,
    ) -> Prepared {
        Prepared {
            report,
            ruleset,
            filter,
            keep_fds: Vec::new(),
            environment: Arc::new(OnceLock::new()),
            connect: Arc::new(connect),
        }
    }

    /// [`Prepared::environment`] and its session directory, worked out now
    /// the first time.
    fn env(&self) -> &Environment {
        self.environment.get_or_init(|| {
            let settings = environment::settings(&self.report);
            Environment {
                session_dir: SessionDir {
                    dir: environment::session_dir_of(&settings),
                    made: std::sync::atomic::AtomicBool::new(false),
                },
                settings,
            }
        })
    }

    /// The ruleset descriptor and the terminal filter a child installs,
    /// and the descriptors it keeps, for [`Spawn`](crate::spawn::Spawn).
    pub(crate) fn child_parts(&self) -> (RawFd, &[crate::terminal::SockFilter], &[RawFd]) {
        use std::os::fd::AsRawFd;
        (
            self.ruleset.as_raw_fd(),
            self.filter.instructions(),
            &self.keep_fds,
        )
    }

    /// The connect supervisor, for a child started by
    /// [`Spawn`](crate::spawn::Spawn): its program, and the listener to serve.
    pub(crate) fn supervisor(&self) -> &crate::connect::Supervisor {
        &self.connect
    }

    /// The variables a command started by [`Spawn`](crate::spawn::Spawn)
    /// gets beside its own (see [`Prepared::environment`]), where `chosen`
    /// says which it sets itself; the session directory made.
    pub(crate) fn environment_to_set(
        &self,
        chosen: &dyn Fn(&str) -> bool,
    ) -> Vec<(&'static str, &OsString)> {
        // Without the session directory the tools keep their defaults,
        // which the rest of the sandbox still confines (as in `confine`).
        let env = self.env();
        let (set, made) = environment::to_set(&env.settings, chosen);
        env.session_dir.made(&made);
        set
    }

    /// Keeps the descriptors `fds` open in every command this confines.
    ///
    /// A confined command inherits only standard input, output and error,
    /// and the descriptors of a make jobserver named in its `MAKEFLAGS`
    /// (`--jobserver-auth=R,W`): every other descriptor the caller holds
    /// is marked close-on-exec in the child (`close_range`), because one
    /// opened for writing before the sandbox was applied writes wherever
    /// it points, whatever the policy says. Name here the ones the command
    /// must have (a pipe it reports on, say).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// let prepared = strument_sandbox::Policy { writable: vec!["/tmp".into()], ..Default::default() }
    ///     .prepare()?
    ///     .keep_fds([3]);
    /// let mut cmd = Command::new("sh");
    /// cmd.args(["-c", "echo done >&3"]);
    /// prepared.confine(&mut cmd);
    /// # Ok::<(), strument_sandbox::ApplyError>(())
    /// ```
    #[must_use]
    pub fn keep_fds(mut self, fds: impl IntoIterator<Item = RawFd>) -> Prepared {
        self.keep_fds.extend(fds);
        self
    }

    /// The variables [`Prepared::confine`] and
    /// [`Prepared::status_with_denials`] give a command, where neither
    /// this process's environment nor the command itself sets them:
    /// daemon identities of the session's own (tmux, Gradle, sccache) and
    /// installs by copy (uv, pnpm). See [`crate::environment`].
    /// [`Prepared::restrict_self`] leaves the process's environment alone:
    /// set them yourself before starting commands.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let prepared = strument_sandbox::Policy { writable: vec!["/tmp".into()], ..Default::default() }.prepare()?;
    /// for s in prepared.environment().iter().filter(|s| s.applied()) {
    ///     println!("{}={:?}  ({})", s.variable, s.value, s.why);
    /// }
    /// # Ok::<(), strument_sandbox::ApplyError>(())
    /// ```
    #[must_use]
    pub fn environment(&self) -> &[Setting] {
        &self.env().settings
    }

    /// Sets [`Prepared::environment`] on `cmd`, making the session
    /// directory it names; on failure those variables are left out and the
    /// error returned. The directory goes with the last clone of this
    /// `Prepared` when nothing was left in it.
    ///
    /// # Errors
    ///
    /// The OS error of making the session directory.
    pub fn set_environment(&self, cmd: &mut Command) -> io::Result<()> {
        let env = self.env();
        let made = environment::apply(&env.settings, cmd);
        env.session_dir.made(&made);
        made
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
        let flags = if self.report.landlock.all_threads() {
            sys::RESTRICT_SELF_TSYNC
        } else {
            let threads = count_threads().map_err(ApplyError::CountThreads)?;
            if threads != 1 {
                return Err(ApplyError::Threads {
                    threads,
                    abi: self.report.landlock.abi,
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
    /// `landlock_restrict_self` on the descriptor opened here, then
    /// `close_range` marking every descriptor above 2 close-on-exec but
    /// those kept, see [`Prepared::keep_fds`]), so this is safe in a
    /// multi-threaded caller, and works for a `tokio::process::Command`
    /// through `as_std_mut`. If any fails the command does not run and
    /// spawning it returns the error. The command also gets
    /// [`Prepared::environment`]: a command that changes no variable of
    /// its own has them added by its child to the environment it inherits,
    /// not set on `cmd` (`get_envs` does not show them), because a variable
    /// set on a `Command` makes std copy the whole environment before each
    /// `fork`; one that changes any gets them set on `cmd`, as
    /// [`Prepared::set_environment`] does.
    ///
    /// The command and everything it starts reach unix sockets only
    /// through the connect supervisor, a thread of this process, and a unix
    /// server it starts answers only them and this process:
    /// [`Prepared::refused_connects`] says what it refused. Under Yama's
    /// `ptrace_scope` 1 (Ubuntu's default) the supervisor can serve only
    /// descendants of this process: one the command leaves running, once
    /// adopted by init, gets `EPERM` for its connects, unless this process
    /// is a child subreaper (`PR_SET_CHILD_SUBREAPER`) that reaps what it
    /// adopts, as `strument-sandbox run` is (doc/security.md).
    ///
    /// A hook makes std `fork` instead of `posix_spawn`, and `fork` copies
    /// the page tables of all the memory this process has touched: about
    /// 0.1 ms for a small caller, milliseconds for an agent holding a few
    /// hundred megabytes (doc/performance.md). A caller that starts many
    /// commands from a large process should start them with
    /// [`Spawn`](crate::spawn::Spawn), which does not copy it.
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
        // A command that changes no variable is `exec`ed with this
        // process's environment as it is: the child adds the session's to
        // it, where setting them on `cmd` would make std copy every
        // variable before each `fork`. One that changes any has its copy
        // made anyway, and std installs it after the hooks: set on `cmd`.
        // Without the session directory the tools keep their defaults,
        // which the rest of the sandbox still confines.
        let environment = if inherits_environment(cmd) {
            // The command names no variable of its own.
            self.environment_to_set(&|_| false)
                .into_iter()
                .filter_map(|(name, value)| crate::spawn::env_entry(OsStr::new(name), value).ok())
                .collect()
        } else {
            let _ = self.set_environment(cmd);
            Vec::new()
        };
        match self.connect.hook() {
            Ok(hook) => {
                sys::confine_before_exec(
                    cmd,
                    Arc::clone(&self.ruleset),
                    self.filter.clone(),
                    hook,
                    environment,
                );
                // A separate step, after confining: see Prepared::keep_fds.
                fds::keep_only(cmd, &self.keep_fds);
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
    /// use strument_sandbox::{Policy, denials::RefusedBy};
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
        self.status_with_denials_waiting(cmd, &mut PlainWait)
    }

    /// [`Prepared::status_with_denials`], with `waiter` preparing the
    /// command for its start ([`Waiter::prepare_spawn`]) and passing signals
    /// on while another thread traces it ([`Waiter::watch`]): the CLI's
    /// forwards them and keeps the terminal's job control.
    ///
    /// # Errors
    ///
    /// As [`Prepared::status_with_denials`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::{Policy, session::PlainWait};
    ///
    /// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
    /// let denied = prepared.status_with_denials_waiting(&mut Command::new("make"), &mut PlainWait)?;
    /// println!("{} refused", denied.denials.len());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status_with_denials_waiting(
        &self,
        cmd: &mut Command,
        waiter: &mut dyn Waiter,
    ) -> Result<Denied, TraceError> {
        let _ = self.set_environment(cmd);
        fds::keep_only(cmd, &self.keep_fds);
        denials::status_with_denials(
            &self.report,
            &self.ruleset,
            &self.filter,
            self.connect.hook().map_err(TraceError::Spawn)?,
            cmd,
            waiter,
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

/// Whether std will `exec` `cmd` with this process's environment as it is
/// (`environ`, which a hook may then add to): the command sets, removes
/// and clears no variable. `get_envs` does not show a cleared environment;
/// std's alternate `Debug` form does, with an `env` field present exactly
/// when the environment changed. A form without its `args` field is not
/// the one known here, and counts as changed: the variables then go on
/// the `Command`, which costs a copy and never loses them.
fn inherits_environment(cmd: &Command) -> bool {
    if cmd.get_envs().next().is_some() {
        return false;
    }
    let shown = format!("{cmd:#?}");
    shown.contains("\n    args: ") && !shown.contains("\n    env: ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_command_that_changes_no_variable_inherits_the_environment_as_it_is() {
        let plain = || {
            let mut cmd = Command::new("env");
            // An argument that looks like the field is shown escaped.
            cmd.arg("\n    env: x").current_dir("/");
            cmd
        };
        assert!(inherits_environment(&plain()));
        assert!(!inherits_environment(plain().env("A", "b")));
        assert!(!inherits_environment(plain().env_remove("A")));
        // `get_envs` shows nothing here; std still installs an empty copy.
        let mut cleared = plain();
        cleared.env_clear();
        assert_eq!(cleared.get_envs().count(), 0);
        assert!(!inherits_environment(&cleared));
    }
}
