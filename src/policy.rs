//! The policy: which roots writes may land under, and applying it.

use std::collections::HashSet;
use std::fmt;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr};

use crate::abi::{self, Abi};

use crate::error::{ApplyError, PolicyError};
use crate::probe::{Availability, Limitation, probe};
use crate::root::{Covers, Judge, Origin, Root};
use crate::services::{Service, reachable_services};
use crate::sockets::{self, GrantedSocket, SkippedSocket, Socket};
use crate::sys;
use crate::terminal::TerminalFilter;
use crate::writable::{COMMON_DIR_PARTS, COMMON_DIR_REFTABLE, is_git_dir};

/// What the sandbox permits: a list of roots writes may land under, and
/// the unix sockets a confined command may connect to. Reads and execution
/// are never restricted.
///
/// Each root must be an absolute path. Symlinks in it are followed when the
/// policy is applied, exactly as the kernel follows them: the rule anchors
/// to the inode the path resolves to at that moment. A root that does not
/// exist is skipped, not an error (a project may not have a state directory
/// yet, most machines have no `~/.m2`), and the [`Report`] says so.
///
/// Each root is judged by what it resolves to. One the caller did not name
/// (its [`Origin`] is not [explicit](Origin::is_explicit)) that resolves to
/// the home directory, an ancestor of it, or an ancestor of the project is
/// skipped ([`SkipReason::Widens`]); a git root that does not lead to a git
/// directory likewise ([`SkipReason::NotAGitDirectory`]). A root the caller
/// named is granted whatever it resolves to, with a [`Warning`] when the
/// home directory becomes writable. A path converts into a caller-named
/// root, so `Policy { writable: vec!["/srv/out".into()], ..Policy::default() }` works.
///
/// # Examples
///
/// ```no_run
/// use strument_sandbox::{Policy, default_writable};
///
/// let writable = default_writable("/home/me/project".as_ref(), Some("/home/me/.local/state/strument".as_ref()), &[])?;
/// let report = Policy { writable, ..Policy::default() }.apply()?;
/// for skipped in &report.skipped {
///     eprintln!("not writable: {} ({})", skipped.path.display(), skipped.reason);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// The roots writes are permitted under, absolute, with where each
    /// came from.
    pub writable: Vec<Root>,
    /// Where a confined command may connect to pathname unix sockets: a
    /// socket file, or a directory for every socket beneath it. Enforced
    /// from Landlock ABI 9 (Linux 7.1); sockets a confined command creates
    /// itself stay reachable whatever this says. Empty means none: see
    /// [`default_sockets`](crate::default_sockets) for the usual ones
    /// (the project, the state directory, ssh-agent, gpg-agent).
    pub sockets: Vec<Socket>,
}

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
    pub(crate) id: (u64, u64),
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
}

impl SkipReason {
    /// A short, stable name for programs: `missing`, `cannot-open`,
    /// `widens` or `not-a-git-directory`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::SkipReason::Missing.kind(), "missing");
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            SkipReason::Missing => "missing",
            SkipReason::CannotOpen { .. } => "cannot-open",
            SkipReason::Widens { .. } => "widens",
            SkipReason::NotAGitDirectory { .. } => "not-a-git-directory",
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

/// A root opened with `O_PATH`, ready to become a rule.
struct OpenRoot {
    granted: Granted,
    fd: OwnedFd,
}

/// Everything a policy names, opened.
struct OpenPolicy {
    roots: Vec<OpenRoot>,
    sockets: Vec<OpenRoot>,
}

impl Policy {
    /// Opens every root and reports what applying the policy would grant,
    /// without touching the kernel's Landlock state. This is what the
    /// `strument-sandbox policy` command prints.
    ///
    /// # Errors
    ///
    /// [`PolicyError::EmptyPath`] or [`PolicyError::RelativePath`] for a
    /// root that is not an absolute path. A root that does not exist or
    /// cannot be opened is not an error: it is listed in
    /// [`Report::skipped`].
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{Policy, SkipReason};
    /// let report = Policy { writable: vec!["/no/such/dir".into()], ..Policy::default() }.check()?;
    /// assert_eq!(report.skipped[0].reason, SkipReason::Missing);
    /// assert!(Policy { writable: vec!["relative".into()], ..Policy::default() }.check().is_err());
    /// # Ok::<(), strument_sandbox::PolicyError>(())
    /// ```
    pub fn check(&self) -> Result<Report, PolicyError> {
        let availability = probe();
        let (report, _roots) = self.open_roots(&availability)?;
        Ok(report)
    }

    /// Confines the calling process, and everything it later spawns, to the
    /// policy.
    ///
    /// What it confines: every thread of the process when the kernel has
    /// ABI 8 (`LANDLOCK_RESTRICT_SELF_TSYNC`); otherwise the process must
    /// have exactly one thread, or nothing is confined and
    /// [`ApplyError::Threads`] is returned. It sets `no_new_privs`, survives
    /// `exec`, is inherited by every child, and cannot be undone: Landlock
    /// only ever adds restrictions, which is what makes it safe to apply in
    /// a process that goes on to run untrusted commands.
    ///
    /// Handled: the filesystem write rights of the probed ABI (write, remove,
    /// make of every file type, refer from ABI 2, truncate from ABI 3); every
    /// directory root gets all of them, so renames and hard links between
    /// roots work and a hard link from outside into a root is refused.
    ///
    /// Closed besides, so that no unconfined process writes for a confined
    /// one: keystrokes pushed into the terminal (`ioctl` `TIOCSTI` and
    /// `TIOCLINUX` fail with `EPERM`, a seccomp filter, every kernel);
    /// abstract unix sockets outside the sandbox (ABI 6); pathname unix
    /// sockets other than [`Policy::sockets`] and the command's own (ABI 9).
    /// Before ABI 9 the report lists the services still reachable.
    ///
    /// # Errors
    ///
    /// - [`ApplyError::Unavailable`] when [`probe`] finds no Landlock: this
    ///   never falls back to enforcing nothing.
    /// - [`ApplyError::Policy`] for a root that is not an absolute path.
    /// - [`ApplyError::Threads`] in a multi-threaded process before ABI 8.
    /// - [`ApplyError::Ruleset`], [`ApplyError::Restrict`] when the kernel
    ///   refuses a syscall.
    /// - [`ApplyError::TerminalFilter`] when the seccomp filter against
    ///   terminal injection cannot be installed: then Landlock is not
    ///   enforced either.
    ///
    /// In every error case writes are left unconfined. Only `no_new_privs`
    /// and, if Landlock itself failed last, the terminal filter remain.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use strument_sandbox::Policy;
    /// let report = Policy { writable: vec!["/home/me/project".into(), "/tmp".into()], ..Policy::default() }.apply()?;
    /// assert!(report.abi >= 1);
    /// // From here on, this process and its children can write only there.
    /// # Ok::<(), strument_sandbox::ApplyError>(())
    /// ```
    pub fn apply(&self) -> Result<Report, ApplyError> {
        self.prepare()?.restrict_self()
    }

    /// Probes, opens every root and builds the kernel ruleset, without
    /// enforcing it. The result can confine the calling process
    /// ([`Prepared::restrict_self`]) or only a child command
    /// ([`Prepared::confine`]), which is the way for a caller that already
    /// runs threads on a kernel before ABI 8.
    ///
    /// # Errors
    ///
    /// As [`Policy::apply`], except [`ApplyError::Threads`], which only
    /// [`Prepared::restrict_self`] can return.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::Policy;
    ///
    /// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
    /// let mut cmd = Command::new("make");
    /// prepared.confine(&mut cmd);
    /// let status = cmd.status()?; // `make` is confined, this process is not
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prepare(&self) -> Result<Prepared, ApplyError> {
        let availability = probe();
        if let Some(why) = availability.error.clone() {
            return Err(ApplyError::Unavailable(why));
        }
        let filter = TerminalFilter::new().ok_or_else(|| {
            ApplyError::TerminalFilter(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "no filter for this architecture ({})",
                    std::env::consts::ARCH
                ),
            ))
        })?;
        let (report, open) = self.open_roots(&availability)?;
        let abi = Abi(availability.abi);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(abi.write_access() | abi.socket_access());
        if !abi.scopes().is_empty() {
            ruleset = ruleset.and_then(|r| r.scope(abi.scopes()));
        }
        let ruleset = ruleset
            .and_then(Ruleset::create)
            .map_err(ApplyError::Ruleset)?;
        let fd: Option<OwnedFd> = ruleset.into();
        let fd =
            fd.ok_or_else(|| ApplyError::Restrict(io::Error::other("no ruleset descriptor")))?;
        // The rules go in directly rather than through the landlock crate's
        // add_rule, which stats every descriptor again to tell files from
        // directories: open_roots already knows (a fifth of apply's syscalls).
        let root_rules = open.roots.iter().map(|root| {
            let access = match root.granted.kind {
                RootKind::Directory => abi.write_access(),
                RootKind::File | RootKind::Special => abi.file_access(),
            };
            (root, access)
        });
        // Before ABI 9 there is no socket right: the sockets are reported only.
        let socket_rules = open
            .sockets
            .iter()
            .filter(|_| !abi.socket_access().is_empty())
            .map(|socket| (socket, abi.socket_access()));
        for (root, access) in root_rules.chain(socket_rules) {
            sys::add_path_beneath_rule(&fd, &root.fd, access.bits()).map_err(|source| {
                ApplyError::AddRule {
                    path: root.granted.path.clone(),
                    source,
                }
            })?;
        }
        Ok(Prepared {
            report,
            availability,
            ruleset: Arc::new(fd),
            filter,
        })
    }

    /// Validates and opens every root and socket, in order, dropping exact
    /// duplicates.
    fn open_roots(&self, availability: &Availability) -> Result<(Report, OpenPolicy), PolicyError> {
        let mut report = Report {
            abi: availability.abi,
            granted: Vec::new(),
            skipped: Vec::new(),
            warnings: Vec::new(),
            limitations: availability.limitations(),
            all_threads: availability.all_threads(),
            sockets: Vec::new(),
            skipped_sockets: Vec::new(),
            reachable_services: Vec::new(),
        };
        if availability.supported() && abi::test_cap().is_some() {
            report.warnings.push(Warning::TestAbiCap {
                abi: availability.abi,
            });
        }
        let filesystem_root = std::fs::metadata("/").ok().map(|m| (m.dev(), m.ino()));
        // The project's ancestors: when the project comes first, as
        // default_writable puts it, compared by name with what the project
        // and each root resolved to (no syscall); otherwise by identity.
        let later_project = self
            .writable
            .iter()
            .skip(1)
            .find(|r| r.origin == Origin::Project)
            .map(|r| r.path.as_path());
        let judge = Judge::new(dirs::home_dir().as_deref(), later_project);
        let mut project: Option<PathBuf> = None;
        let mut roots: Vec<OpenRoot> = Vec::new();
        // A set, not a scan of the earlier entries: the scan made 4096 roots
        // cost over half a second (`cargo bench --bench sandbox -- apply`).
        let mut seen: HashSet<&Path> = HashSet::with_capacity(self.writable.len());
        for (i, Root { path, origin }) in self.writable.iter().enumerate() {
            require_absolute(path, "writable root")?;
            if !seen.insert(path.as_path()) {
                continue;
            }
            let mut root = match open_root(path, origin, names_by_input(origin)) {
                Ok(root) => root,
                Err(reason) => {
                    report.skipped.push(Skipped::new(path, origin, reason));
                    continue;
                }
            };
            // Asked of the kernel once: open_root already did for an input.
            let resolved = |root: &OpenRoot| {
                root.granted
                    .resolved
                    .clone()
                    .or_else(|| {
                        (!names_by_input(origin))
                            .then(|| read_resolved(&root.fd, path))
                            .flatten()
                    })
                    .unwrap_or_else(|| path.clone())
            };
            if i == 0 && *origin == Origin::Project {
                project = Some(resolved(&root));
            }
            let covers = judge.covers(root.granted.id).or_else(|| {
                // A fixed name under the home directory is above the
                // project only when the project is inside a cache.
                if !names_by_input(origin) {
                    return None;
                }
                let real = resolved(&root);
                let above = project
                    .as_ref()
                    .is_some_and(|p| p.starts_with(&real) && *p != real);
                above.then_some(Covers::AboveProject)
            });
            // Built-in roots are fixed paths no input can change: a home
            // under /tmp is reported, not a reason to lose /tmp.
            let judged = !origin.is_explicit()
                && !matches!(origin, Origin::Temp { variable: None } | Origin::Device);
            let refused = match covers {
                Some(covers) if judged => Some(SkipReason::Widens {
                    covers,
                    resolved: resolved(&root),
                }),
                _ if matches!(origin, Origin::Git { .. }) && !leads_to_git(&root, origin) => {
                    Some(SkipReason::NotAGitDirectory {
                        resolved: resolved(&root),
                    })
                }
                _ => None,
            };
            if let Some(reason) = refused {
                let skipped = Skipped::new(path, origin, reason);
                report.warnings.push(Warning::Skipped(skipped.clone()));
                report.skipped.push(skipped);
                continue;
            }
            if Some(root.granted.id) == filesystem_root {
                report
                    .warnings
                    .push(Warning::FilesystemRoot { path: path.clone() });
            } else if let (Some(Covers::Home | Covers::AboveHome), Some(home)) =
                (covers, &judge.home)
            {
                if root.granted.resolved.is_none() {
                    root.granted.resolved = read_resolved(&root.fd, path);
                }
                report.warnings.push(Warning::HomeWritable {
                    home: home.clone(),
                    root: path.clone(),
                    origin: origin.clone(),
                });
            }
            report.granted.push(root.granted.clone());
            roots.push(root);
        }
        let sockets = open_sockets(&self.sockets, &mut report)?;
        if availability.supported() && !availability.has(abi::Feature::ResolveUnix) {
            report.reachable_services = reachable_services();
        }
        Ok((report, OpenPolicy { roots, sockets }))
    }
}

pub(crate) fn require_absolute(path: &Path, what: &'static str) -> Result<(), PolicyError> {
    if path.as_os_str().is_empty() {
        Err(PolicyError::EmptyPath { what })
    } else if !path.is_absolute() {
        Err(PolicyError::RelativePath {
            what,
            path: path.to_path_buf(),
        })
    } else if path.as_os_str().as_encoded_bytes().contains(&0) {
        // No syscall can take it; skipping it as unopenable would hide a
        // caller's bug behind an EIO.
        Err(PolicyError::NulByte {
            what,
            path: path.to_path_buf(),
        })
    } else {
        Ok(())
    }
}

/// Opens each socket path, reporting it granted or skipped.
fn open_sockets(list: &[Socket], report: &mut Report) -> Result<Vec<OpenRoot>, PolicyError> {
    let mut open = Vec::new();
    let mut seen: HashSet<&Path> = HashSet::with_capacity(list.len());
    for socket in list {
        require_absolute(&socket.path, "socket")?;
        if !seen.insert(socket.path.as_path()) {
            continue;
        }
        let judged = open_root(&socket.path, &Origin::Extra, false).and_then(|root| {
            let is_socket = root.granted.kind == RootKind::Special
                && std::fs::metadata(&socket.path).is_ok_and(|m| m.file_type().is_socket());
            sockets::judge(socket, root.granted.kind, is_socket).map(|()| root)
        });
        match judged {
            Ok(root) => {
                report.sockets.push(GrantedSocket {
                    path: socket.path.clone(),
                    reason: socket.reason,
                    kind: root.granted.kind,
                });
                open.push(root);
            }
            Err(skip) => report.skipped_sockets.push(SkippedSocket {
                path: socket.path.clone(),
                reason: socket.reason,
                skip,
            }),
        }
    }
    Ok(open)
}

/// Whether a git root leads to a git directory: the gitdir a `.git` names,
/// or one of the parts of a common dir (whose parent then is one).
fn leads_to_git(root: &OpenRoot, origin: &Origin) -> bool {
    let Origin::Git { pointer } = origin else {
        return true;
    };
    // What the path resolved to when it was opened: the rule anchors there.
    let dir = root.granted.resolved.as_ref().unwrap_or(&root.granted.path);
    if root.granted.kind != RootKind::Directory {
        return false;
    }
    if is_git_dir(dir) {
        return true;
    }
    // The part must resolve to a directory of that very name: `objects`
    // planted as a symlink to another repository's `hooks/` must not pass.
    let name = root.granted.path.file_name();
    let part = name.is_some_and(|name| {
        name == COMMON_DIR_REFTABLE || COMMON_DIR_PARTS.iter().any(|p| name == *p)
    });
    part && dir.file_name() == name && pointer.ends_with("commondir") && is_git_dir(&dir.join(".."))
}

/// Opens `path`; `resolve` asks the kernel what it resolved to.
fn open_root(path: &Path, origin: &Origin, resolve: bool) -> Result<OpenRoot, SkipReason> {
    let cannot_open = |e: io::Error| match e.raw_os_error() {
        Some(libc::ENOENT) => SkipReason::Missing,
        errno => SkipReason::CannotOpen {
            errno: errno.unwrap_or(libc::EIO),
        },
    };
    // O_PATH: no read permission needed, and opening a fifo or a device
    // does not block or trigger the driver.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .map_err(cannot_open)?;
    let meta = file.metadata().map_err(cannot_open)?;
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        RootKind::Directory
    } else if ft.is_file() {
        RootKind::File
    } else if ft.is_char_device() || ft.is_block_device() || ft.is_fifo() || ft.is_socket() {
        RootKind::Special
    } else {
        RootKind::File
    };
    let fd = OwnedFd::from(file);
    let resolved = if resolve {
        read_resolved(&fd, path)
    } else {
        None
    };
    Ok(OpenRoot {
        granted: Granted {
            path: path.to_path_buf(),
            origin: origin.clone(),
            resolved,
            kind,
            id: (meta.dev(), meta.ino()),
        },
        fd,
    })
}

/// Whether a root's path comes from input (the caller, a variable, a `.git`
/// pointer), as opposed to a fixed name (`/tmp`, `/dev/null`, `~/.cache/…`).
/// What an input resolves to is always reported; a fixed name's only when
/// it is refused or warned about, which saves a syscall a root at start-up.
fn names_by_input(origin: &Origin) -> bool {
    !matches!(
        origin,
        Origin::Device | Origin::Temp { variable: None } | Origin::Cache { variable: None }
    )
}

/// What the kernel resolved a root's path to, when that differs from it.
fn read_resolved(fd: &OwnedFd, path: &Path) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()
        .filter(|r| r != path)
}

/// A policy whose ruleset is built but not yet enforced.
///
/// Made by [`Policy::prepare`]. Every root is already open, so the report
/// is final: nothing created afterwards joins it.
#[derive(Debug, Clone)]
pub struct Prepared {
    report: Report,
    pub(crate) availability: Availability,
    pub(crate) ruleset: Arc<OwnedFd>,
    /// The seccomp program against terminal injection, built here so that
    /// the child only installs it.
    pub(crate) filter: TerminalFilter,
}

impl Prepared {
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

    /// Enforces the ruleset on the calling process; see [`Policy::apply`]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_roots_are_errors_not_skips() {
        let empty = Policy {
            writable: vec![PathBuf::new().into()],
            ..Policy::default()
        };
        assert!(matches!(empty.check(), Err(PolicyError::EmptyPath { .. })));
        let relative = Policy {
            writable: vec!["src".into()],
            ..Policy::default()
        };
        assert!(matches!(
            relative.check(),
            Err(PolicyError::RelativePath { .. })
        ));
    }

    #[test]
    fn duplicates_are_granted_once_and_root_is_loud() {
        let report = Policy {
            writable: vec!["/".into(), "/".into(), "/dev/null".into()],
            ..Policy::default()
        }
        .check()
        .expect("absolute paths");
        assert_eq!(report.granted.len(), 2);
        assert_eq!(report.granted[1].kind, RootKind::Special);
        assert_eq!(report.warnings.len(), 1);
    }
}
