//! What a policy grants on this machine: the report, its roots granted and
//! skipped, and the warnings.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::abi;
use crate::error::ExplainError;
use crate::explain::{self, Explanation};
use crate::local_net::LocalPort;
use crate::probe::Limitation;
use crate::root::{Covers, Origin};
use crate::services::Service;
use crate::sockets::{GrantedSocket, SkippedSocket};
#[cfg(doc)]
use crate::{Policy, Prepared};

/// What a root was found to be when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootKind {
    /// A directory: every write right, for everything beneath it.
    Directory,
    /// A regular file (a lock file, say): write and truncate only.
    File,
    /// A device node, fifo or socket (`/dev/null`, `/dev/tty`): write and
    /// truncate only, since directory rights on it are meaningless and the
    /// kernel refuses them.
    Special,
}

impl RootKind {
    /// A short, stable name for programs.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::RootKind::Directory.name(), "directory");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            RootKind::Directory => "directory",
            RootKind::File => "file",
            RootKind::Special => "special",
        }
    }
}

/// A root a rule was anchored to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    /// The root as given.
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
    /// The path it resolved to, when that differs from [`Granted::path`]
    /// (a symlink, `..`). Asked of the kernel for every root from input (the
    /// caller, a variable, a `.git` pointer) and for any root a warning is
    /// about; a fixed name (`/tmp`, `/dev/null`, `~/.cache/go-build`)
    /// otherwise leaves it `None`, saving a syscall a root at start-up.
    pub resolved: Option<PathBuf>,
    /// What it resolved to.
    pub kind: RootKind,
    /// Device and inode the rule is anchored to: the identity the kernel
    /// checks, whatever name the inode is later reached by.
    id: (u64, u64),
}

impl Granted {
    /// A root opened as `path`, found to be `kind`, anchored to the inode
    /// `id` (device and inode number).
    pub(crate) fn new(
        path: &Path,
        origin: &Origin,
        resolved: Option<PathBuf>,
        kind: RootKind,
        id: (u64, u64),
    ) -> Granted {
        Granted {
            path: path.to_path_buf(),
            origin: origin.clone(),
            resolved,
            kind,
            id,
        }
    }

    /// Device and inode the rule is anchored to.
    pub(crate) fn id(&self) -> (u64, u64) {
        self.id
    }
}

/// A root that grants nothing, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The root as given.
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
    /// Why no rule could be anchored to it.
    pub reason: SkipReason,
}

impl Skipped {
    /// A root that does not exist, or cannot be opened, from `origin`.
    pub(crate) fn new(path: &Path, origin: &Origin, reason: SkipReason) -> Skipped {
        Skipped {
            path: path.to_path_buf(),
            origin: origin.clone(),
            reason,
        }
    }
}

/// Why a root grants nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// The path (or a directory on the way) does not exist. Creating it
    /// later does not make it writable: rules anchor to inodes, and there
    /// was none.
    Missing,
    /// The path exists but could not be opened; `errno` says why
    /// (`EACCES` on a directory on the way, `ELOOP`, `ENAMETOOLONG`, …).
    CannotOpen {
        /// The errno of the `open(O_PATH)`.
        errno: i32,
    },
    /// The root came from the environment, the project's `.git` or a
    /// built-in list, and resolves to the home directory, an ancestor of
    /// it, or an ancestor of the project: granting it would widen the
    /// sandbox to what it protects. Only a root the caller names may be
    /// that wide.
    Widens {
        /// What it covers.
        covers: Covers,
        /// The path it resolved to.
        resolved: PathBuf,
    },
    /// A git root (from `.git` or a `commondir`) that does not lead to a
    /// git directory (`HEAD` and `objects/`, or `HEAD` and `commondir`).
    NotAGitDirectory {
        /// The path it resolved to.
        resolved: PathBuf,
    },
    /// A git directory the project's `.git` file or symlink leads to that
    /// does not name the project back: a linked worktree's gitdir whose
    /// `gitdir` file does not lead to the project's `.git`, or a repository
    /// whose `core.worktree` does not lead to the project. It is another
    /// working tree's, and granting it would make its `hooks/` and `config`
    /// writable. `--allow` (or [`Origin::Extra`]) grants it anyway.
    AnotherWorkingTree {
        /// The path it resolved to.
        resolved: PathBuf,
        /// The project whose `.git` led there.
        project: PathBuf,
    },
}

impl SkipReason {
    /// A short, stable name for programs: `missing`, `cannot-open`,
    /// `widens`, `not-a-git-directory` or `another-working-tree`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::SkipReason::Missing.name(), "missing");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            SkipReason::Missing => "missing",
            SkipReason::CannotOpen { .. } => "cannot-open",
            SkipReason::Widens { .. } => "widens",
            SkipReason::NotAGitDirectory { .. } => "not-a-git-directory",
            SkipReason::AnotherWorkingTree { .. } => "another-working-tree",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Missing => f.write_str("does not exist"),
            SkipReason::CannotOpen { errno } => {
                write!(f, "cannot open: {}", io::Error::from_raw_os_error(*errno))
            }
            SkipReason::Widens { covers, resolved } => write!(
                f,
                "resolves to {}, {covers}: only a root named by the caller may be that wide",
                resolved.display()
            ),
            SkipReason::NotAGitDirectory { resolved } => write!(
                f,
                "resolves to {}, which is not a git directory (no HEAD with objects/ or commondir)",
                resolved.display()
            ),
            SkipReason::AnotherWorkingTree { resolved, project } => write!(
                f,
                "resolves to {}, the git directory of another working tree (its gitdir or core.worktree does not name {}); --allow it to grant it anyway",
                resolved.display(),
                project.display()
            ),
        }
    }
}

/// Something about the policy a person should know, though it is not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A root resolves to `/`: every write anywhere is allowed, the sandbox
    /// confines nothing.
    FilesystemRoot {
        /// The root as given.
        path: PathBuf,
    },
    /// A test build's `STRUMENT_SANDBOX_TEST_ABI_CAP` lowered the ABI this
    /// policy is enforced at below what the kernel offers. Release builds
    /// never do this.
    TestAbiCap {
        /// The ABI the policy is enforced at.
        abi: u32,
    },
    /// The home directory is writable: a granted root is the home
    /// directory or an ancestor of it. Only a root the caller named, or a
    /// built-in temporary directory the home lives under (a container or CI
    /// runner with `HOME=/tmp/…`), can do that.
    HomeWritable {
        /// The home directory.
        home: PathBuf,
        /// The root that makes it writable, as given.
        root: PathBuf,
        /// Where that root came from.
        origin: Origin,
    },
    /// A root from the environment or the project's `.git` was skipped
    /// because it would widen the sandbox or does not lead where it should:
    /// worth saying even when the report is not printed.
    Skipped(Skipped),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::FilesystemRoot { path } => write!(
                f,
                "{} resolves to /: every path on the machine is writable and the sandbox confines nothing",
                path.display()
            ),
            Warning::TestAbiCap { abi } => write!(
                f,
                "this is a test build and {} caps Landlock at ABI {abi}: \
                 rights newer kernels handle are left open",
                abi::TEST_ABI_CAP_VAR
            ),
            Warning::HomeWritable { home, root, origin } => write!(
                f,
                "the home directory {} is writable: the root {} ({origin}) contains it",
                home.display(),
                root.display()
            ),
            Warning::Skipped(s) => write!(
                f,
                "not granted: {} ({}): {}",
                s.path.display(),
                s.origin,
                s.reason
            ),
        }
    }
}

/// What a policy grants on this machine, decided when its roots are opened.
///
/// Returned by [`Policy::check`], [`Policy::apply`] and
/// [`Prepared::report`]. Membership does not change after apply: a
/// directory created later is not writable, because there was nothing to
/// anchor a rule to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The kernel's Landlock ABI (0 if none; only [`Policy::check`] can
    /// return a report without one).
    pub abi: u32,
    /// Roots a rule is anchored to, in policy order.
    pub granted: Vec<Granted>,
    /// Roots that grant nothing, with the reason.
    pub skipped: Vec<Skipped>,
    /// Things worth saying loudly.
    pub warnings: Vec<Warning>,
    /// What this kernel's Landlock cannot enforce or allow.
    pub limitations: Vec<Limitation>,
    /// Whether every thread of the process is confined (TSYNC, ABI 8);
    /// otherwise the process had exactly one thread.
    pub all_threads: bool,
    /// Sockets a confined command may connect to, in policy order. Before
    /// ABI 9 every socket is reachable and these are listed for the record.
    pub sockets: Vec<GrantedSocket>,
    /// Sockets that grant nothing, with the reason.
    pub skipped_sockets: Vec<SkippedSocket>,
    /// Before ABI 9 only: the local services this user (and so a confined
    /// command) can reach over unix sockets, each of which can write for
    /// it. Empty from ABI 9, where the kernel closes the route.
    pub reachable_services: Vec<Service>,
    /// Ports of this machine's own addresses a confined command may
    /// connect to besides those bound inside the sandbox, in policy order.
    pub local_ports: Vec<LocalPort>,
}

impl Report {
    /// The paths of the granted roots, the seed API's `Granted()`.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::Policy;
    /// let report = Policy { writable: vec!["/tmp".into(), "/no/such/dir".into()], ..Policy::default() }.check()?;
    /// assert_eq!(report.granted_paths(), [std::path::Path::new("/tmp")]);
    /// # Ok::<(), strument_sandbox::PolicyError>(())
    /// ```
    #[must_use]
    pub fn granted_paths(&self) -> Vec<&Path> {
        self.granted.iter().map(|g| g.path.as_path()).collect()
    }

    /// Answers whether a write to `path` lands under this policy, and by
    /// which root, or, when no root grants it, the smallest root that
    /// would (`--allow`).
    ///
    /// The answer follows what the kernel does at the moment of the write,
    /// not string prefixes: `path` is resolved now, symlinks followed
    /// (also a dangling one at the end, which `open(O_CREAT)` follows to
    /// create its target) and `..` taken on the resolved directory; when
    /// it does not exist, its nearest existing directory is what the
    /// kernel checks, because that is where the first missing piece would
    /// be created. The resolved inode and its ancestors are then compared,
    /// by device and inode number, with the roots opened when this report
    /// was made: the same membership the kernel decided at apply. A file
    /// root (a lock file, `/dev/null`) grants writes to that very inode
    /// only, never to its siblings.
    ///
    /// What it does not model: rename and link between two places need
    /// both to be writable, so ask for both; a hard link made inside a
    /// root *before* the policy was applied is writable through that name
    /// even if the inode is also reachable from outside (Landlock checks
    /// names, not inodes); file metadata (`chmod`, `chown`, timestamps,
    /// extended attributes) is not confined at all. Magic links in `/proc`
    /// are followed by their text, so an anonymous target (`pipe:[…]`)
    /// is explained as a missing name.
    ///
    /// # Errors
    ///
    /// [`ExplainError::EmptyPath`] and [`ExplainError::RelativePath`] for
    /// a path that is not absolute; [`ExplainError::Resolve`] when the
    /// path cannot be resolved (`ELOOP`, `ENOTDIR`, `ENAMETOOLONG`,
    /// `EACCES`), which a write would fail with too.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{Policy, Verdict};
    ///
    /// let project = tempfile::tempdir()?;
    /// let report = Policy { writable: vec![project.path().to_path_buf().into()], ..Policy::default() }.check()?;
    ///
    /// let inside = report.explain(&project.path().join("src/../new.rs"))?;
    /// assert!(inside.is_granted());
    ///
    /// let outside = report.explain("/etc/passwd".as_ref())?;
    /// match outside.verdict {
    ///     Verdict::Denied { allow, .. } => assert_eq!(allow, std::path::Path::new("/etc/passwd")),
    ///     Verdict::Granted(root) => panic!("granted by {}", root.path.display()),
    ///     _ => unreachable!(),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn explain(&self, path: &Path) -> Result<Explanation, ExplainError> {
        explain::explain(self, path)
    }
}
