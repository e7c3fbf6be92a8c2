//! Error types, one per stage, each with a `hint()` where a person can do
//! something about it.

use std::io;
use std::path::PathBuf;

/// A writable root, or an input to [`default_writable`](crate::default_writable),
/// that cannot be turned into a rule. The sandbox is never widened to make
/// up for it: the caller gets this error instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// An empty path: it would resolve to the current directory.
    #[error("{what}: the path is empty")]
    EmptyPath {
        /// Which input was empty (`writable root`, `project root`, …).
        what: &'static str,
    },
    /// A relative path: it would be resolved against whatever the current
    /// directory happens to be.
    #[error("{what} {path:?}: not an absolute path")]
    RelativePath {
        /// Which input it was.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
    },
    /// A path holding a NUL byte, which no system call accepts.
    #[error("{what} {path:?}: contains a NUL byte")]
    NulByte {
        /// Which input it was.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
    },
    /// A file where a directory is required (the project root, the state
    /// directory).
    #[error("{what} {path:?}: not a directory")]
    NotADirectory {
        /// Which input it was.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
    },
    /// A `.git` file (worktree, submodule) or a worktree's `commondir`
    /// that does not say where the git directory is.
    #[error("{path:?}: {reason}")]
    GitFile {
        /// The file that could not be understood.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A file that had to be read could not be.
    #[error("{path:?}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl PolicyError {
    /// What a person can do about it.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::PolicyError;
    /// let e = PolicyError::EmptyPath { what: "writable root" };
    /// assert!(e.hint().contains("absolute"));
    /// ```
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            PolicyError::EmptyPath { .. } | PolicyError::RelativePath { .. } => {
                "name it as an absolute path (the CLI takes a relative one against the current \
                 directory)"
            }
            PolicyError::NulByte { .. } => "remove the NUL byte: no system call takes such a path",
            PolicyError::NotADirectory { .. } => "name a directory, or create it first",
            PolicyError::GitFile { .. } => {
                "fix or remove the file: git writes one line, `gitdir: PATH` in a `.git` file or \
                 a path in `commondir`"
            }
            PolicyError::Io { .. } => "make the file readable by this user, or remove it",
        }
    }
}

/// Why [`Policy::apply`](crate::Policy::apply) (or `prepare`) did not
/// confine anything. The process is exactly as it was before the call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The kernel offers no Landlock: refusing is the point, since a sandbox
    /// believed present and absent is worse than none.
    #[error("refusing to run unconfined: {0}; hint: {hint}", hint = .0.hint())]
    Unavailable(ProbeError),
    /// A writable root is not usable input.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// Other threads exist and the kernel cannot confine them (no
    /// `LANDLOCK_RESTRICT_SELF_TSYNC` before ABI 8): only the calling
    /// thread would be confined, so nothing is.
    #[error(
        "refusing to confine 1 of {threads} threads: Landlock ABI {abi} confines only the \
         calling thread (ABI {} adds TSYNC); apply before starting threads, or confine a \
         child command with Prepared::confine",
        crate::abi::Feature::Tsync.since_abi()
    )]
    Threads {
        /// How many threads the process has.
        threads: usize,
        /// The kernel's ABI.
        abi: u32,
    },
    /// `/proc/self/task` could not be read to count threads.
    #[error("cannot count this process's threads in /proc/self/task: {0}")]
    CountThreads(#[source] io::Error),
    /// The kernel refused to create the ruleset.
    #[error("cannot create the Landlock ruleset: {0}")]
    Ruleset(#[source] landlock::RulesetError),
    /// The kernel refused the rule for a root.
    #[error("cannot add the Landlock rule for {path:?}: {source}")]
    AddRule {
        /// The root.
        path: PathBuf,
        /// The OS error of `landlock_add_rule`.
        #[source]
        source: io::Error,
    },
    /// `prctl(PR_SET_NO_NEW_PRIVS)` or `landlock_restrict_self` failed.
    #[error("cannot enforce the Landlock ruleset: {0}")]
    Restrict(#[source] io::Error),
    /// The seccomp filter that stops a confined command from typing into
    /// the terminal (`TIOCSTI`, `TIOCLINUX`) could not be built or
    /// installed. Without it an unconfined shell could run what the
    /// command types, so Landlock is not enforced either.
    #[error(
        "refusing to run: cannot install the seccomp filter against terminal injection \
         (ioctl TIOCSTI, TIOCLINUX): {0}; the kernel needs CONFIG_SECCOMP_FILTER"
    )]
    TerminalFilter(#[source] io::Error),
    /// The connect supervisor could not be started, or a child could not
    /// hand it its seccomp listener: without it a confined command could
    /// reach any unix socket, so nothing runs.
    #[error(
        "refusing to run: cannot start the connect supervisor (seccomp user notification, \
         pidfd_getfd): {0}"
    )]
    Supervisor(#[source] io::Error),
}

impl ApplyError {
    /// What a person can do about it.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{ApplyError, ProbeError};
    /// let e = ApplyError::Unavailable(ProbeError::DisabledAtBoot);
    /// assert_eq!(e.hint(), ProbeError::DisabledAtBoot.hint());
    /// ```
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            ApplyError::Unavailable(e) => e.hint(),
            ApplyError::Policy(e) => e.hint(),
            ApplyError::Threads { .. } => {
                "apply before starting threads, or confine a child command with \
                 Prepared::confine"
            }
            ApplyError::CountThreads(_) => "mount /proc, so that /proc/self/task can be read",
            ApplyError::Ruleset(_) | ApplyError::AddRule { .. } | ApplyError::Restrict(_) => {
                "the kernel refused: its error says why; if it persists, report the kernel \
                 version and the policy to the strument-sandbox authors"
            }
            ApplyError::TerminalFilter(_) => {
                "use a kernel built with CONFIG_SECCOMP_FILTER=y, and let the container \
                 runtime allow seccomp"
            }
            ApplyError::Supervisor(_) => {
                "let the container runtime allow seccomp(SECCOMP_SET_MODE_FILTER) with \
                 SECCOMP_FILTER_FLAG_NEW_LISTENER, pidfd_open, pidfd_getfd and \
                 process_vm_readv (Docker's default profile allows pidfd_getfd and \
                 process_vm_readv only with --cap-add SYS_PTRACE); check the thread and \
                 descriptor limits"
            }
        }
    }
}

/// Why a [`Session`](crate::Session) did not open. Nothing was confined;
/// caches may have been created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The current directory, taken as the project without being named, is
    /// the home directory, `/` or an ancestor of home: the whole home would
    /// be writable. Naming it as the project explicitly is allowed, with a
    /// warning in the report.
    #[error(
        "refusing to run: the current directory {} is {covers}, and as the project it would \
         be writable whole; nothing ran",
        dir.display()
    )]
    HomeAsProject {
        /// The current directory.
        dir: PathBuf,
        /// What it covers.
        covers: crate::root::Covers,
    },
    /// The current directory cannot be read (it was removed, say).
    #[error("current directory: {0}")]
    CurrentDirectory(#[source] io::Error),
    /// The project, state directory, an extra root or the `.git` is not
    /// usable input.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The ruleset could not be prepared: no Landlock, or the kernel refused.
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl SessionError {
    /// What a person can do about it.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{ApplyError, ProbeError, SessionError};
    /// let e = SessionError::Apply(ApplyError::Unavailable(ProbeError::NotBuilt));
    /// assert_eq!(e.hint(), ProbeError::NotBuilt.hint());
    /// ```
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            SessionError::HomeAsProject { .. } => {
                "start in the project's directory, or name the project explicitly"
            }
            SessionError::CurrentDirectory(_) => "start in a directory that exists",
            SessionError::Policy(e) => e.hint(),
            SessionError::Apply(e) => e.hint(),
        }
    }
}

/// Why the kernel offers no Landlock.
///
/// Each variant is a different fix, which [`ProbeError::hint`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "reason", rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum ProbeError {
    /// The kernel was built without `CONFIG_SECURITY_LANDLOCK` (or predates
    /// Linux 5.13): the syscall answered `ENOSYS`.
    #[error("Landlock is not built into this kernel (ENOSYS)")]
    NotBuilt,
    /// Landlock is built in but was not enabled at boot: the syscall
    /// answered `EOPNOTSUPP`.
    #[error("Landlock is built into this kernel but disabled at boot (EOPNOTSUPP)")]
    #[cfg_attr(feature = "serde", serde(rename = "disabled"))]
    DisabledAtBoot,
    /// Something between the process and the kernel refused the syscall,
    /// typically a seccomp filter of a container runtime.
    #[error("the Landlock syscall was refused with errno {errno} ({name})", name = errno_name(*.errno))]
    Blocked {
        /// The errno the syscall failed with.
        errno: i32,
    },
    /// The kernel answered with a version number that makes no sense.
    #[error("the kernel reported an invalid Landlock ABI version {version}")]
    InvalidVersion {
        /// The value the kernel returned.
        version: i64,
    },
}

impl ProbeError {
    /// A short, stable name for programs: `not-built`, `disabled`,
    /// `blocked` or `invalid-version`.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::ProbeError;
    /// assert_eq!(ProbeError::DisabledAtBoot.name(), "disabled");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            ProbeError::NotBuilt => "not-built",
            ProbeError::DisabledAtBoot => "disabled",
            ProbeError::Blocked { .. } => "blocked",
            ProbeError::InvalidVersion { .. } => "invalid-version",
        }
    }

    /// The errno the probe saw, when it saw one.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::ProbeError;
    /// assert_eq!(ProbeError::NotBuilt.errno(), Some(libc::ENOSYS));
    /// ```
    #[must_use]
    pub fn errno(&self) -> Option<i32> {
        match self {
            ProbeError::NotBuilt => Some(libc::ENOSYS),
            ProbeError::DisabledAtBoot => Some(libc::EOPNOTSUPP),
            ProbeError::Blocked { errno } => Some(*errno),
            ProbeError::InvalidVersion { .. } => None,
        }
    }

    /// What a person can do about it.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::ProbeError;
    /// assert!(ProbeError::DisabledAtBoot.hint().contains("lsm="));
    /// ```
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            ProbeError::NotBuilt => {
                "use a kernel built with CONFIG_SECURITY_LANDLOCK=y (Linux 5.13 or later); \
                 most distribution kernels have it, many VM kernels do not; inside a \
                 container, a seccomp profile older than Landlock answers ENOSYS too \
                 (Docker before 20.10.18, containers/common's before 0.49): if `probe` on \
                 the host finds Landlock, allow landlock_create_ruleset, landlock_add_rule \
                 and landlock_restrict_self in the container's profile"
            }
            ProbeError::DisabledAtBoot => {
                "add landlock to the kernel's lsm= boot parameter (or to CONFIG_LSM); \
                 on NixOS: security.lsm = [ \"landlock\" ] or boot.kernelParams"
            }
            ProbeError::Blocked { .. } => {
                "a seccomp filter (container runtime, systemd SystemCallFilter=, another \
                 sandbox) denies the Landlock syscalls; allow landlock_create_ruleset, \
                 landlock_add_rule and landlock_restrict_self"
            }
            ProbeError::InvalidVersion { .. } => {
                "report this kernel to the strument-sandbox authors"
            }
        }
    }
}

/// A path [`Report::explain`](crate::Report::explain) cannot answer for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExplainError {
    /// An empty path.
    #[error("the path to explain is empty")]
    EmptyPath,
    /// A relative path: the kernel would resolve it against the current
    /// directory of whichever process writes, which explain cannot know.
    #[error("{path:?}: not an absolute path")]
    RelativePath {
        /// The path as given.
        path: PathBuf,
    },
    /// Resolving the path failed as a write would: a symlink loop
    /// (`ELOOP`), a file where a directory is needed (`ENOTDIR`), a name
    /// that is too long (`ENAMETOOLONG`), a directory without search
    /// permission (`EACCES`). The write fails before Landlock is asked.
    #[error("{path:?}: cannot resolve {at:?}: {source}")]
    Resolve {
        /// The path as given.
        path: PathBuf,
        /// The prefix, as resolved so far, at which resolution failed.
        at: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl ExplainError {
    /// What a person can do about it.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::ExplainError;
    /// assert!(ExplainError::EmptyPath.hint().contains("absolute"));
    /// ```
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            ExplainError::EmptyPath | ExplainError::RelativePath { .. } => {
                "name an absolute path (the CLI takes a relative one against the current \
                 directory)"
            }
            ExplainError::Resolve { .. } => {
                "a write there fails before Landlock is asked: fix the path where it stops \
                 resolving (a symlink loop, a file where a directory is needed, a directory \
                 without search permission)"
            }
        }
    }
}

/// Why a command could not be run with its refused writes traced
/// ([`Prepared::status_with_denials`](crate::Prepared::status_with_denials)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// This architecture's system-call numbers are not known here, so no
    /// filter can pick out the writes. Nothing ran.
    #[error(
        "this architecture's system calls are not known here (x86-64, aarch64 and riscv64 are)"
    )]
    Architecture,
    /// The command cannot be traced: this process is itself being traced
    /// (a process has one tracer), or `ptrace` is refused (Yama's
    /// `ptrace_scope` 2 or 3, a container's seccomp profile). Nothing ran.
    #[error("the command cannot be traced: {0}")]
    Untraceable(String),
    /// The command could not be started.
    #[error("{0}")]
    Spawn(#[source] io::Error),
    /// Waiting for the command, or tracing it, failed.
    #[error("waiting for the command: {0}")]
    Wait(#[source] io::Error),
}

impl TraceError {
    /// What to do instead, for a person.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::TraceError;
    /// assert!(TraceError::Architecture.hint().contains("explain"));
    /// ```
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            TraceError::Architecture | TraceError::Untraceable(_) => {
                "run without --explain-denials, and ask in advance instead: \
                 `strument-sandbox explain PATH`"
            }
            TraceError::Spawn(_) | TraceError::Wait(_) => {
                "check the command's name and permissions"
            }
        }
    }
}

/// The symbolic name of the errnos a seccomp filter typically answers with.
fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EFAULT => "EFAULT",
        _ => "unexpected",
    }
}
