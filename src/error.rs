//! Error types, one per stage.

use std::io;
use std::path::PathBuf;

use crate::probe::ProbeError;

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
        crate::Feature::Tsync.since_abi()
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
}
