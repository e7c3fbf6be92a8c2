//! The agent's entrance: one session over a project, from the caches it
//! needs to what changed after each command it ran confined.
//!
//! A [`Session`] takes the project, the state directory and any extra roots
//! once, and does in the right order what every caller of the lower-level
//! types would otherwise repeat: it refuses the home directory as an
//! implicit project, creates the missing toolchain caches, builds the
//! default policy, prepares the ruleset (refusing unless Landlock is
//! there), and snapshots the files that run later. Then it confines each
//! command the caller starts, and reports what those commands changed.
//! The caller itself stays unconfined.
//!
//! Two places hold everything: what lives as long as the session (the
//! prepared ruleset, the tripwire, and whatever else serves every command,
//! such as a supervisor of its connections) is a field of [`Session`], made
//! in [`SessionBuilder::open`]; what each confined child is given (the
//! ruleset and the terminal filter, and beside them its environment and the
//! descriptors it keeps) is given in [`Session::confine`], which
//! [`Session::run`] goes through, and beside it in
//! [`Session::run_explaining_denials`], which confines with the audit log on.

use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::{Mutex, PoisonError};

use crate::connect::RefusedConnect;
use crate::denials::Denied;
use crate::error::{SessionError, TraceError};
use crate::git::GitLayout;
use crate::local_net::{LocalPort, default_local_ports};
use crate::policy::Policy;
use crate::prepared::Prepared;
use crate::report::Report;
use crate::root::{Origin, Root};
use crate::sockets::sockets_for;
use crate::spawn::Spawn;
use crate::tripwire::{Change, Snapshot};
use crate::writable::{Inputs, create_missing_caches_in, writable_from};

pub use crate::connect::Serving;
pub use crate::wait::{PlainWait, Waiter};

/// A project confined for an agent: the policy prepared once, every command
/// the agent runs confined to it, and the files that run later watched.
///
/// Made by [`SessionBuilder::open`]. A session is `Send` and `Sync`: share
/// it (in an `Arc`) between the tasks that start commands. It never
/// confines the process that holds it. Its session directory
/// (`/dev/shm/strument-sandbox-<uid>/<key>`, or in `/tmp`, where its
/// commands' tmux, sccache and Gradle find their daemons) goes with it when nothing was left there;
/// a daemon's socket keeps it.
///
/// # Examples
///
/// ```no_run
/// use std::process::Command;
/// use strument_sandbox::Session;
///
/// let session = Session::builder("/home/me/project")
///     .state_dir("/home/me/.local/state/strument")
///     .open()?; // refuses unless Landlock is there
/// for warning in &session.report().warnings {
///     eprintln!("warning: {warning}");
/// }
/// let finished = session.run(Command::new("go").args(["test", "./..."]))?;
/// for change in &finished.changes {
///     eprintln!("{change}"); // ".git/hooks/pre-commit was created: …"
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Session {
    /// The ruleset, built once; the report of what it grants.
    prepared: Prepared,
    /// The caches made before the policy was built.
    created: Vec<PathBuf>,
    /// The files that run later, as they were after the last report.
    tripwire: Mutex<Snapshot>,
}

/// What to confine a [`Session`] to: the project, the state directory and
/// the extra roots, named once. Made by [`Session::builder`] or
/// [`Session::in_current_directory`].
#[derive(Debug, Clone)]
#[must_use]
pub struct SessionBuilder {
    /// `None`: the current directory, which must not be the home directory
    /// or above it.
    project: Option<PathBuf>,
    state: Option<PathBuf>,
    extra: Vec<PathBuf>,
    sockets: Vec<PathBuf>,
    create_caches: bool,
    keep_fds: Vec<RawFd>,
    local_ports: Vec<LocalPort>,
}

/// How a command run by [`Session::run`] ended, and what it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// The files that run later, outside the sandbox, changed since the
    /// session's last report: by this command, or by another one running
    /// at the same time.
    pub changes: Vec<Change>,
    /// The sockets and local addresses the connect supervisor refused it
    /// (and the processes it started), one entry a target.
    pub refused: Vec<RefusedConnect>,
}

impl Session {
    /// A session over `project`, an absolute path named by the caller: it
    /// is granted whatever it resolves to, with a warning in the report
    /// when that makes the home directory writable.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project").open()?;
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    pub fn builder(project: impl Into<PathBuf>) -> SessionBuilder {
        SessionBuilder::new(Some(project.into()))
    }

    /// A session over the current directory, taken as the project without
    /// being named. [`SessionBuilder::open`] refuses it when it is the home
    /// directory, `/` or an ancestor of home: the whole home would be
    /// writable because of where a command happened to be started.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use strument_sandbox::{Session, SessionError};
    /// match Session::in_current_directory().open() {
    ///     Err(SessionError::HomeAsProject { dir, .. }) => eprintln!("cd into a project, not {}", dir.display()),
    ///     other => { other?; }
    /// }
    /// # Ok::<(), SessionError>(())
    /// ```
    pub fn in_current_directory() -> SessionBuilder {
        SessionBuilder::new(None)
    }

    /// What the session grants, decided when it was opened.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project").open()?;
    /// println!("writable: {:?}", session.report().granted_paths());
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    #[must_use]
    pub fn report(&self) -> &Report {
        self.prepared.report()
    }

    /// The toolchain caches the session created before building its
    /// policy (none with [`SessionBuilder::create_caches`]`(false)`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project").open()?;
    /// for path in session.created_caches() {
    ///     eprintln!("created {}", path.display());
    /// }
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    #[must_use]
    pub fn created_caches(&self) -> &[PathBuf] {
        &self.created
    }

    /// The prepared policy underneath, for what the session does not
    /// offer itself ([`Prepared::status_with_denials`]).
    #[must_use]
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// Makes `cmd` confine its own child just before `exec`, leaving the
    /// caller unconfined (see [`Prepared::confine`]): for a caller that
    /// spawns and waits itself, such as an async runtime
    /// (`tokio::process::Command::as_std_mut`). Call
    /// [`Session::changes`] when its commands have ended.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// let session = strument_sandbox::Session::builder("/home/me/project").open()?;
    /// let mut cmd = Command::new("make");
    /// session.confine(&mut cmd);
    /// let status = cmd.status()?;
    /// let changes = session.changes();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn confine(&self, cmd: &mut Command) {
        // Everything a confined child gets is given here, and only here:
        // the ruleset and the terminal filter now; the environment the
        // session gives its commands, the descriptors kept past `exec` and
        // the connect supervisor's end belong beside them.
        self.prepared.confine(cmd);
    }

    /// Runs `cmd` confined, waits for it, and reports what it changed
    /// among the files that run later.
    ///
    /// # Errors
    ///
    /// The error of spawning `cmd` (`NotFound` for a missing program) or of
    /// waiting for it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// let session = strument_sandbox::Session::builder("/home/me/project").open()?;
    /// let finished = session.run(&mut Command::new("cargo").arg("build"))?;
    /// println!("{}, {} changes", finished.status, finished.changes.len());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run(&self, cmd: &mut Command) -> io::Result<Finished> {
        self.run_waiting(cmd, &mut PlainWait)
    }

    /// [`Session::run`], with the command started and reaped by `waiter`:
    /// the CLI's forwards signals and keeps the terminal's job control.
    ///
    /// # Errors
    ///
    /// As [`Session::run`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::{Session, session::PlainWait};
    /// let session = Session::builder("/home/me/project").open()?;
    /// let finished = session.run_waiting(&mut Command::new("make"), &mut PlainWait)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_waiting(&self, cmd: &mut Command, waiter: &mut dyn Waiter) -> io::Result<Finished> {
        self.confine(cmd);
        let mut child = waiter.spawn(cmd)?;
        let status = waiter.wait(&mut child)?;
        Ok(Finished {
            status,
            changes: self.changes(),
            refused: self.prepared.refused_connects(child.id()),
        })
    }

    /// Starts `spawn` confined without `std::process::Command` (see
    /// [`Spawn`]: no copy of the caller's memory, the fastest start), waits
    /// for it with `waiter`, and reports what it changed, as
    /// [`Session::run_waiting`] does.
    ///
    /// # Errors
    ///
    /// As [`Spawn::spawn`] and [`Waiter::wait_spawned`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use strument_sandbox::{Session, session::PlainWait, spawn::Spawn};
    ///
    /// let session = Session::builder("/home/me/project").open()?;
    /// let finished = session.run_spawn(&Spawn::new("cargo").arg("build"), &mut PlainWait)?;
    /// for change in &finished.changes {
    ///     eprintln!("{change}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_spawn(&self, spawn: &Spawn, waiter: &mut dyn Waiter) -> io::Result<Finished> {
        // Where the environment table, the kept descriptors and the connect
        // supervisor's end join the child, as in `confine`.
        // The waiting thread keeps the supervisor's watch over the command
        // until its first call, if the waiter polls it: no thread starts
        // for a command that never connects.
        let mut serving = Serving::new(self.prepared.supervisor())?;
        let mut child = spawn.spawn_served(&self.prepared, true)?;
        let waited = waiter.wait_spawned_serving(&mut child, &mut serving);
        // What the command left running, not connected yet, is served on
        // by a thread; without one its calls fail (`ENOSYS`) once this
        // process ends.
        let handed = serving.finish();
        let status = waited?;
        handed?;
        Ok(Finished {
            status,
            changes: self.changes(),
            refused: self.prepared.refused_connects(child.id()),
        })
    }

    /// [`Session::run_waiting`], with the command traced and each write the
    /// kernel refused it judged (see [`Prepared::status_with_denials`]: no
    /// privilege needed, every Landlock ABI).
    ///
    /// # Errors
    ///
    /// As [`Prepared::status_with_denials`]: before anything runs when the
    /// command cannot be traced here, then when it cannot be started or
    /// waited for.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::{Session, session::PlainWait};
    /// let session = Session::builder("/home/me/project").open()?;
    /// let (finished, denied) =
    ///     session.run_explaining_denials(&mut Command::new("make"), &mut PlainWait)?;
    /// for denial in &denied.denials {
    ///     eprintln!("{denial}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_explaining_denials(
        &self,
        cmd: &mut Command,
        waiter: &mut dyn Waiter,
    ) -> Result<(Finished, Denied), TraceError> {
        let denied = self.prepared.status_with_denials_waiting(cmd, waiter)?;
        let finished = Finished {
            status: denied.status,
            changes: self.changes(),
            refused: self.prepared.refused_connects(denied.command),
        };
        Ok((finished, denied))
    }

    /// The changes to files that run later, outside the sandbox (git hooks,
    /// `.git/config`, `.envrc`, editor tasks), since the session opened or
    /// since the last report ([`Session::run`] reports too). Call it when
    /// commands started after [`Session::confine`] have ended, and once
    /// more when the session ends.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project").open()?;
    /// for change in session.changes() {
    ///     eprintln!("{change}");
    /// }
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    #[must_use]
    pub fn changes(&self) -> Vec<Change> {
        // A panic elsewhere while the lock was held leaves a snapshot that
        // is still whole: keep using it.
        let mut last = self.tripwire.lock().unwrap_or_else(PoisonError::into_inner);
        let now = last.again();
        let changes = last.compare(&now);
        *last = now;
        changes
    }
}

impl SessionBuilder {
    fn new(project: Option<PathBuf>) -> SessionBuilder {
        SessionBuilder {
            project,
            state: None,
            extra: Vec::new(),
            sockets: Vec::new(),
            create_caches: true,
            keep_fds: Vec::new(),
            local_ports: Vec::new(),
        }
    }

    /// The session's state directory (transcript, undo data, lock), an
    /// absolute path: writable, and a place the commands may connect to
    /// unix sockets.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project")
    ///     .state_dir("/home/me/.local/state/strument")
    ///     .open()?;
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> SessionBuilder {
        self.state = Some(dir.into());
        self
    }

    /// One more writable root, an absolute path named by the caller.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project").allow("/srv/out").open()?;
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    pub fn allow(mut self, root: impl Into<PathBuf>) -> SessionBuilder {
        self.extra.push(root.into());
        self
    }

    /// One more unix socket (or directory of them) the commands may connect
    /// to, besides the project's, the state directory's, ssh-agent's and
    /// gpg-agent's. Enforced from Landlock ABI 9.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project")
    ///     .allow_socket("/run/postgresql")
    ///     .open()?;
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    pub fn allow_socket(mut self, path: impl Into<PathBuf>) -> SessionBuilder {
        self.sockets.push(path.into());
        self
    }

    /// Whether [`SessionBuilder::open`] creates the missing toolchain
    /// caches first (it does unless told otherwise; see
    /// [`writable::create_missing_caches`](crate::writable::create_missing_caches)).
    /// A cache missing when the session opens stays unwritable for it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project").create_caches(false).open()?;
    /// assert!(session.created_caches().is_empty());
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    pub fn create_caches(mut self, create: bool) -> SessionBuilder {
        self.create_caches = create;
        self
    }

    /// One more port of this machine's own addresses the commands may
    /// connect to (`--allow-connect`), besides the resolver's, a local
    /// proxy's and those bound inside the sandbox: a dev database, a server
    /// on purpose. Every other port on loopback and the local interfaces is
    /// refused.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use strument_sandbox::local_net::{LocalPort, PortReason};
    /// let db = LocalPort::new("127.0.0.1:5432".parse()?, PortReason::Caller);
    /// let session = strument_sandbox::Session::builder("/home/me/project").allow_connect(db).open()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn allow_connect(mut self, port: LocalPort) -> SessionBuilder {
        self.local_ports.push(port);
        self
    }

    /// Descriptors above 2 the confined commands keep (see
    /// [`Prepared::keep_fds`]); every other one is closed at their `exec`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let session = strument_sandbox::Session::builder("/home/me/project").keep_fds([3]).open()?;
    /// # Ok::<(), strument_sandbox::SessionError>(())
    /// ```
    pub fn keep_fds(mut self, fds: impl IntoIterator<Item = RawFd>) -> SessionBuilder {
        self.keep_fds.extend(fds);
        self
    }

    /// The policy the session would apply, built now and touching nothing:
    /// no cache is created, the kernel is not asked. What `strument-sandbox
    /// policy` and `explain` check.
    ///
    /// # Errors
    ///
    /// As [`SessionBuilder::open`], but never [`SessionError::Apply`] (nor
    /// the refusal of the home directory as an implicit project: a policy
    /// shown is not a policy applied).
    ///
    /// # Examples
    ///
    /// ```
    /// let project = tempfile::tempdir()?;
    /// let policy = strument_sandbox::Session::builder(project.path()).policy()?;
    /// assert_eq!(policy.writable[0].path, project.path());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn policy(&self) -> Result<Policy, SessionError> {
        let project = match &self.project {
            Some(project) => project.clone(),
            None => std::env::current_dir().map_err(SessionError::CurrentDirectory)?,
        };
        let inputs = Inputs::of_process(Some(&project));
        Ok(self.policy_from(&project, &inputs)?.0)
    }

    /// What the session would grant, built and checked now and touching
    /// nothing: the policy's [`Policy::check`], with the inputs read once
    /// for both (what `strument-sandbox policy` shows).
    ///
    /// # Errors
    ///
    /// As [`SessionBuilder::policy`], and [`SessionError::Policy`] when a
    /// root is refused as [`Policy::check`] refuses it.
    ///
    /// # Examples
    ///
    /// ```
    /// let project = tempfile::tempdir()?;
    /// let report = strument_sandbox::Session::builder(project.path()).check()?;
    /// assert!(report.granted.iter().any(|g| g.path == project.path()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check(&self) -> Result<Report, SessionError> {
        let project = match &self.project {
            Some(project) => project.clone(),
            None => std::env::current_dir().map_err(SessionError::CurrentDirectory)?,
        };
        let inputs = Inputs::of_process(Some(&project));
        let (policy, _) = self.policy_from(&project, &inputs)?;
        Ok(policy.check_judged(Some(&inputs.judge))?)
    }

    /// The default policy for `project` from inputs read once, with the git
    /// layout it read.
    fn policy_from(
        &self,
        project: &Path,
        inputs: &Inputs,
    ) -> Result<(Policy, GitLayout), SessionError> {
        let env = |name: &str| std::env::var_os(name);
        let (writable, git) =
            writable_from(project, self.state.as_deref(), &self.extra, &env, inputs)?;
        let mut sockets = sockets_for(project, self.state.as_deref());
        sockets.extend(
            self.sockets
                .iter()
                .map(|path| Root::new(path.clone(), Origin::Extra)),
        );
        let mut local_ports = default_local_ports();
        local_ports.extend(self.local_ports.iter().cloned());
        Ok((
            Policy {
                writable,
                sockets,
                local_ports,
            },
            git,
        ))
    }

    /// Opens the session: refuses the home directory (or above it) as an
    /// implicit project, creates the missing toolchain caches, builds the
    /// default policy, prepares its ruleset and takes the tripwire's first
    /// snapshot. Nothing is confined yet, and the caller never is.
    ///
    /// # Errors
    ///
    /// - [`SessionError::HomeAsProject`] for [`Session::in_current_directory`]
    ///   started in the home directory, `/` or an ancestor of home;
    /// - [`SessionError::CurrentDirectory`] when it cannot be read;
    /// - [`SessionError::Policy`] for a path that is not absolute, or a
    ///   project or `.git` that cannot be read;
    /// - [`SessionError::Apply`] when the kernel has no Landlock
    ///   ([`ApplyError::Unavailable`](crate::ApplyError::Unavailable)) or
    ///   refuses the ruleset.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use strument_sandbox::{ApplyError, Session, SessionError};
    /// match Session::builder("/home/me/project").open() {
    ///     Ok(session) => println!("{} roots writable", session.report().granted.len()),
    ///     Err(SessionError::Apply(ApplyError::Unavailable(why))) => eprintln!("no sandbox: {why}"),
    ///     Err(e) => eprintln!("{e}; {}", e.hint()),
    /// }
    /// ```
    pub fn open(self) -> Result<Session, SessionError> {
        // Each input is read once here and passed on: the current directory,
        // the home directory (and what covers it), the cache list, the git
        // layout, and the probe (in prepare, kept in the report).
        let (project, implicit) = match &self.project {
            Some(project) => (project.clone(), false),
            None => (
                std::env::current_dir().map_err(SessionError::CurrentDirectory)?,
                true,
            ),
        };
        let inputs = Inputs::of_process(Some(&project));
        if implicit {
            if let Some(covers) = inputs.judge.covers_home_path(&project) {
                return Err(SessionError::HomeAsProject {
                    dir: project,
                    covers,
                });
            }
        }
        // Before the policy is built: the cache home is granted by the
        // directories in it, so the ones made here must exist by then.
        let created = if self.create_caches {
            create_missing_caches_in(&|name| std::env::var_os(name), &inputs)
        } else {
            Vec::new()
        };
        let (policy, git) = self.policy_from(&project, &inputs)?;
        let prepared = policy
            .prepare_judged(Some(&inputs.judge))?
            .keep_fds(self.keep_fds.iter().copied());
        let tripwire = Mutex::new(Snapshot::take_with(&prepared, Some(git.watched)));
        Ok(Session {
            prepared,
            created,
            tripwire,
        })
    }
}
