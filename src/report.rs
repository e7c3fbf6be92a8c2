//! What a policy grants on this machine: the report, its roots granted and
//! skipped, and the warnings.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::abi;
use crate::local_net::LocalPort;
use crate::probe::Availability;
use crate::root::{Origin, Rights, RootKind, SkipReason};
#[cfg(doc)]
use crate::{Policy, Prepared};

/// A root a rule was anchored to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Granted {
    /// The root as given.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
    /// The path it resolved to, when that differs from [`Granted::path`]
    /// (a symlink, `..`). Asked of the kernel for every root from input (the
    /// caller, a variable, a `.git` pointer) and for any root a warning is
    /// about; a fixed name (`/tmp`, `/dev/null`, `~/.cache/go-build`)
    /// otherwise leaves it `None`, saving a syscall a root at start-up.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serialize::path_opt")
    )]
    pub resolved: Option<PathBuf>,
    /// What it resolved to.
    pub kind: RootKind,
    /// The write rights it is granted, when it is a directory.
    pub rights: Rights,
    /// Device and inode the rule is anchored to: the identity the kernel
    /// checks, whatever name the inode is later reached by.
    #[cfg_attr(feature = "serde", serde(skip))]
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
            rights: Rights::All,
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
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Skipped {
    /// The root as given.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
    /// Why no rule could be anchored to it.
    #[cfg_attr(feature = "serde", serde(flatten))]
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
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Report {
    /// What the probe of the kernel found, once for the whole report: its
    /// Landlock ABI (0 if none; only [`Policy::check`] can return a report
    /// without one), what that ABI cannot enforce
    /// ([`Availability::limitations`]), and whether every thread of a
    /// process is confined at once ([`Availability::all_threads`], TSYNC;
    /// otherwise [`Policy::apply`] ran in a process of one thread).
    pub landlock: Availability,
    /// Roots a rule is anchored to, in policy order.
    pub granted: Vec<Granted>,
    /// Roots that grant nothing, with the reason.
    pub skipped: Vec<Skipped>,
    /// Things worth saying loudly.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serialize::sentences")
    )]
    pub warnings: Vec<Warning>,
    /// Sockets a confined command may connect to, in policy order: the
    /// connect supervisor allows these on every kernel (and from ABI 9
    /// Landlock's `RESOLVE_UNIX` too).
    pub sockets: Vec<Granted>,
    /// Sockets that grant nothing, with the reason.
    pub skipped_sockets: Vec<Skipped>,
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
}
