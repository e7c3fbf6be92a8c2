//! The policy: which roots writes may land under, and applying it.

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr};

use crate::abi::{self, Abi};
use crate::connect::{Rules, Supervisor};

use crate::error::{ApplyError, PolicyError};
use crate::git::{COMMON_DIR_PARTS, COMMON_DIR_REFTABLE, is_git_dir, points_back};
use crate::local_net::{LocalNet, LocalPort};
use crate::prepared::Prepared;
use crate::probe::{Availability, probe};
use crate::report::{Granted, Report, Skipped, Warning};
use crate::root::{Covers, Judge, Origin, Root, RootKind, SkipReason};
use crate::sockets;
use crate::sys;
use crate::terminal::TerminalFilter;
use crate::through::{self, Walk};

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
/// directory likewise ([`SkipReason::NotAGitDirectory`]), and one the
/// project's `.git` leads to that does not name the project back, another
/// working tree's ([`SkipReason::AnotherWorkingTree`]). A root the caller
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
    /// on every kernel by the connect supervisor, and from Landlock ABI 9
    /// (Linux 7.1) by the kernel too; sockets a confined command binds
    /// itself stay reachable whatever this says. Empty means none: see
    /// [`default_sockets`](crate::default_sockets) for the usual ones
    /// (the project, the state directory, ssh-agent, the name and log
    /// services).
    pub sockets: Vec<Root>,
    /// Ports of this machine's own addresses (loopback, every local
    /// interface) a confined command may connect to, beside those bound
    /// inside the sandbox; every other port there is refused, and other
    /// hosts are never mediated. Empty means none: see
    /// [`default_local_ports`](crate::local_net::default_local_ports) for
    /// the usual ones (the system resolver, a proxy from the environment).
    pub local_ports: Vec<LocalPort>,
}

/// A root opened with `O_PATH`, ready to become a rule.
struct OpenRoot {
    granted: Granted,
    fd: OwnedFd,
}

/// Everything a policy names, opened.
struct OpenPolicy {
    /// One descriptor for each root of the report's `granted`, in its order.
    roots: Vec<OwnedFd>,
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
        self.check_judged(None)
    }

    /// [`Policy::check`] with the judge that built the policy, whose
    /// answers (the home directory's identity, a worktree's `gitdir`
    /// pointing back) are not read again.
    pub(crate) fn check_judged(&self, judge: Option<&Judge>) -> Result<Report, PolicyError> {
        let availability = probe();
        let (report, _roots) = self.open_roots(&availability, judge)?;
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
    /// `TIOCLINUX` fail with `EPERM`, a seccomp filter, every kernel); unix
    /// sockets, pathname and abstract, other than [`Policy::sockets`] and
    /// those bound inside the sandbox, on every kernel: a helper process,
    /// forked before the process restricts itself, decides each `connect`,
    /// `bind` and addressed `sendto` of this process and its children and
    /// performs the allowed ones (the connect supervisor, see
    /// `doc/security.md`); from ABI 6 and 9 the kernel guards the same
    /// sockets for what the supervisor does not see (a datagram sent with
    /// `sendmsg`). The helper ends when the last confined process does.
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
    /// - [`ApplyError::Supervisor`] when the connect supervisor's helper
    ///   cannot be started or its filter installed: then Landlock is not
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
    /// assert!(report.granted.len() <= 2);
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
        self.prepare_judged(None)
    }

    /// [`Policy::prepare`], judging roots with `judge` when the caller
    /// already made one (a session reads the home directory once).
    pub(crate) fn prepare_judged(&self, judge: Option<&Judge>) -> Result<Prepared, ApplyError> {
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
        let (report, open) = self.open_roots(&availability, judge)?;
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
        let root_rules = report.granted.iter().zip(&open.roots).map(|(granted, fd)| {
            let access = match granted.kind {
                RootKind::Directory => abi.directory_access(granted.rights),
                RootKind::File | RootKind::Special => abi.file_access(),
            };
            (granted, fd, access)
        });
        // Before ABI 9 there is no socket right: the sockets are reported only.
        let socket_rules = open
            .sockets
            .iter()
            .filter(|_| !abi.socket_access().is_empty())
            .map(|socket| (&socket.granted, &socket.fd, abi.socket_access()));
        for (granted, root, access) in root_rules.chain(socket_rules) {
            sys::add_path_beneath_rule(&fd, root, access.bits()).map_err(|source| {
                ApplyError::AddRule {
                    path: granted.path.clone(),
                    source,
                }
            })?;
        }
        let mut rules = connect_rules(&open);
        sys::close_all(open.roots);
        rules.net = Arc::new(LocalNet::new(self.local_ports.clone()));
        let supervisor = Supervisor::new(rules).map_err(ApplyError::Supervisor)?;
        Ok(Prepared::new(report, Arc::new(fd), filter, supervisor))
    }

    /// Validates and opens every root and socket, in order, dropping exact
    /// duplicates.
    fn open_roots(
        &self,
        availability: &Availability,
        judge: Option<&Judge>,
    ) -> Result<(Report, OpenPolicy), PolicyError> {
        let mut report = Report {
            landlock: availability.clone(),
            granted: Vec::new(),
            skipped: Vec::new(),
            warnings: Vec::new(),
            sockets: Vec::new(),
            skipped_sockets: Vec::new(),
            local_ports: self.local_ports.clone(),
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
        let judge = match judge {
            Some(judge) => judge.for_project(later_project),
            None => Judge::new(dirs::home_dir().as_deref(), later_project),
        };
        let mut project: Option<PathBuf> = None;
        let mut roots: Vec<OwnedFd> = Vec::with_capacity(self.writable.len());
        report.granted.reserve(self.writable.len());
        // A set, not a scan of the earlier entries: the scan made 4096 roots
        // cost over half a second (`cargo bench --bench sandbox -- apply`).
        let mut seen: HashSet<&Path, PathHash> =
            HashSet::with_capacity_and_hasher(self.writable.len(), PathHash::default());
        // Derived roots that met a symlink, by index in `roots`: judged once
        // every root is open, against the granted ones.
        let mut through: Vec<(usize, Walk, Option<PathBuf>)> = Vec::new();
        let mut parents = Parents::default();
        for (
            i,
            Root {
                path,
                origin,
                rights,
            },
        ) in self.writable.iter().enumerate()
        {
            require_absolute(path, "writable root")?;
            if !seen.insert(path.as_path()) {
                continue;
            }
            // Built-in roots are fixed paths no input can change: a home
            // under /tmp is reported, not a reason to lose /tmp.
            let judged = !origin.is_explicit()
                && !matches!(origin, Origin::Temp { variable: None } | Origin::Device);
            // A derived root is opened through no symlink first, so that one
            // met on the way is seen, and judged below (see `through`).
            let resolve = names_by_input(origin) || judged;
            let parent = resolve.then(|| parents.of(&self.writable, i)).flatten();
            let mut root = match open_root(path, origin, resolve, parent) {
                Ok(root) => root,
                Err(reason) => {
                    report.skipped.push(Skipped::new(path, origin, reason));
                    continue;
                }
            };
            if root.granted.kind == RootKind::Directory {
                root.granted.rights = *rights;
            }
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
            let covers = judge.covers(root.granted.id()).or_else(|| {
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
                _ => another_working_tree(&root, origin, &judge).map(|project| {
                    SkipReason::AnotherWorkingTree {
                        resolved: resolved(&root),
                        project,
                    }
                }),
            };
            if let Some(reason) = refused {
                let skipped = Skipped::new(path, origin, reason);
                report.warnings.push(Warning::Skipped(skipped.clone()));
                report.skipped.push(skipped);
                continue;
            }
            if Some(root.granted.id()) == filesystem_root {
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
            if judged && root.granted.resolved.is_some() {
                match judge_walk(path, origin, &root) {
                    Ok(Some((walk, trusted))) => through.push((roots.len(), walk, trusted)),
                    Ok(None) => {}
                    Err(reason) => {
                        let skipped = Skipped::new(path, origin, reason);
                        report.warnings.push(Warning::Skipped(skipped.clone()));
                        report.skipped.push(skipped);
                        continue;
                    }
                }
            }
            report.granted.push(root.granted);
            roots.push(root.fd);
        }
        skip_planted_on_the_way(&mut report, &mut roots, &through);
        let sockets = open_sockets(&self.sockets, &mut report)?;
        Ok((report, OpenPolicy { roots, sockets }))
    }
}

/// FNV-1a for sets of paths built from the caller's own list and the
/// environment: they need no defence against chosen collisions, and
/// SipHash over every component of every path is a visible share of
/// opening 256 roots (and of `default_writable`).
pub(crate) type PathHash = std::hash::BuildHasherDefault<Fnv>;

/// The FNV-1a hasher (64 bits).
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The walk of a derived root that met a symlink on the way, with the
/// symlink judged elsewhere (a `.git` pointer, which must name the project
/// back); `None` when it met none (only `..` or doubled slashes). A walk
/// that fails, or ends elsewhere than the descriptor opened (the path
/// changed between the two), skips the root.
fn judge_walk(
    path: &Path,
    origin: &Origin,
    root: &OpenRoot,
) -> Result<Option<(Walk, Option<PathBuf>)>, SkipReason> {
    let failed = |e: io::Error| SkipReason::CannotOpen {
        errno: e.raw_os_error().unwrap_or(libc::EIO),
    };
    let walk = through::walk(path).map_err(failed)?;
    if walk.links.is_empty() {
        return Ok(None);
    }
    let meta = std::fs::metadata(&walk.resolved).map_err(failed)?;
    if (meta.dev(), meta.ino()) != root.granted.id() {
        return Err(SkipReason::CannotOpen {
            errno: libc::ESTALE,
        });
    }
    let trusted = match origin {
        Origin::Git { pointer } if pointer == path => pointer
            .parent()
            .and_then(|p| through::walk(p).ok())
            .map(|p| p.resolved.join(".git")),
        _ => None,
    };
    Ok(Some((walk, trusted)))
}

/// Skips each derived root in `through` that resolves through a symlink a
/// confined command could have planted (one in a granted directory) to a
/// place outside every granted directory.
fn skip_planted_on_the_way(
    report: &mut Report,
    roots: &mut Vec<OwnedFd>,
    through: &[(usize, Walk, Option<PathBuf>)],
) {
    if through.is_empty() {
        return;
    }
    let pending: HashSet<usize> = through.iter().map(|(i, _, _)| *i).collect();
    // What each other granted directory resolves to: asked of the kernel
    // only now, when some root met a symlink.
    let granted: Vec<PathBuf> = report
        .granted
        .iter()
        .zip(roots.iter())
        .enumerate()
        .filter(|(i, (g, _))| !pending.contains(i) && g.kind == RootKind::Directory)
        .map(|(_, (g, fd))| {
            g.resolved
                .clone()
                .or_else(|| read_resolved(fd, &g.path))
                .unwrap_or_else(|| g.path.clone())
        })
        .collect();
    let granted: Vec<&Path> = granted.iter().map(PathBuf::as_path).collect();
    // From the last, so the earlier indices stay valid.
    for (i, walk, trusted) in through.iter().rev() {
        let Some(link) = through::planted_on_the_way(walk, &granted, trusted.as_deref()) else {
            continue;
        };
        roots.remove(*i);
        let root = report.granted.remove(*i);
        let skipped = Skipped::new(
            &root.path,
            &root.origin,
            SkipReason::ThroughWritable {
                link: link.to_path_buf(),
                resolved: walk.resolved.clone(),
            },
        );
        report.warnings.push(Warning::Skipped(skipped.clone()));
        report.skipped.push(skipped);
    }
}

/// The connect supervisor's rules: the socket directories and files, and
/// the directories sockets may be made in, named as the kernel names the
/// inodes opened for the rules.
fn connect_rules(open: &OpenPolicy) -> Rules {
    // What `open_sockets` found the kernel resolves each to: the path itself
    // unless a symlink or a `..` was on the way (then asked of /proc).
    let named = |socket: &OpenRoot| {
        socket
            .granted
            .resolved
            .clone()
            .unwrap_or_else(|| socket.granted.path.clone())
    };
    let mut rules = Rules {
        // A socket that appears or moves beneath the project from now on
        // counts only if bound inside; the margin covers the coarse clock
        // the kernel stamps inodes with.
        since: std::time::SystemTime::now().checked_sub(std::time::Duration::from_millis(50)),
        ..Rules::default()
    };
    for socket in &open.sockets {
        match socket.granted.kind {
            RootKind::Directory => rules.socket_dirs.push(named(socket)),
            RootKind::Special | RootKind::File => {
                rules.socket_files.insert(socket.granted.id());
            }
        }
    }
    rules
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
fn open_sockets(list: &[Root], report: &mut Report) -> Result<Vec<OpenRoot>, PolicyError> {
    let mut open = Vec::new();
    let mut seen: HashSet<&Path> = HashSet::with_capacity(list.len());
    for socket in list {
        require_absolute(&socket.path, "socket")?;
        if !seen.insert(socket.path.as_path()) {
            continue;
        }
        // Through no symlink first, as an input root is: the name the
        // kernel gives the inode is then the path itself when none was met,
        // and /proc is asked only when one was (see `connect_rules`).
        let judged = open_root(&socket.path, &socket.origin, true, None).and_then(|root| {
            let is_socket = root.granted.kind == RootKind::Special
                && std::fs::metadata(&socket.path).is_ok_and(|m| m.file_type().is_socket());
            sockets::judge(&socket.origin, root.granted.kind, is_socket).map(|()| root)
        });
        match judged {
            Ok(root) => {
                report.sockets.push(root.granted.clone());
                open.push(root);
            }
            Err(reason) => {
                report
                    .skipped_sockets
                    .push(Skipped::new(&socket.path, &socket.origin, reason))
            }
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
    // A `commondir` leads only to parts of a common directory, never to a
    // whole one: hooks/ and config stay out of a linked worktree's grant.
    let via_commondir = pointer.file_name() == Some("commondir".as_ref());
    if !via_commondir && is_git_dir(dir) {
        return true;
    }
    // The part must resolve to a directory of that very name: `objects`
    // planted as a symlink to another repository's `hooks/` must not pass.
    let name = root.granted.path.file_name();
    let part = name.is_some_and(|name| {
        name == COMMON_DIR_REFTABLE || COMMON_DIR_PARTS.iter().any(|p| name == *p)
    });
    // And the common directory must be the one git put this worktree's
    // gitdir in (`<common>/worktrees/<id>`): a `commondir` rewritten by a
    // confined command to name another repository leads nowhere.
    let gitdir = pointer.parent().unwrap_or(pointer);
    part && dir.file_name() == name
        && via_commondir
        && is_git_dir(&dir.join(".."))
        && same_directory(&dir.join(".."), &gitdir.join("../.."))
}

/// Whether two paths resolve to the same directory (device and inode).
fn same_directory(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.is_dir() && (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// The project, when a git directory its `.git` pointer leads to belongs
/// to another working tree (see [`points_back`]). A common dir's parts
/// are listed only for a gitdir that passed, so they are not asked again;
/// nor is the gitdir the git layout's reading already asked, while it is
/// the same directory (the judge keeps that answer).
fn another_working_tree(root: &OpenRoot, origin: &Origin, judge: &Judge) -> Option<PathBuf> {
    let Origin::Git { pointer } = origin else {
        return None;
    };
    if pointer.file_name() != Some(".git".as_ref()) {
        return None;
    }
    let dir = root.granted.resolved.as_ref().unwrap_or(&root.granted.path);
    let names_back = judge
        .gitdir_points_back(pointer, root.granted.id())
        .unwrap_or_else(|| points_back(dir, pointer));
    (!names_back).then(|| pointer.parent().unwrap_or(pointer).to_path_buf())
}

/// Opens `path`; `resolve` asks the kernel what it resolved to.
fn open_root(
    path: &Path,
    origin: &Origin,
    resolve: bool,
    parent: Option<BorrowedFd<'_>>,
) -> Result<OpenRoot, SkipReason> {
    let cannot_open = |e: io::Error| match e.raw_os_error() {
        Some(libc::ENOENT) => SkipReason::Missing,
        errno => SkipReason::CannotOpen {
            errno: errno.unwrap_or(libc::EIO),
        },
    };
    // What a root from input resolved to is reported when it differs from
    // the path as given. A path with no `.`, `..` or doubled slash that the
    // kernel opens through no symlink at all resolves to itself, so asking
    // /proc for the name (a few microseconds a root) is needed only when a
    // symlink was met: 256 roots cost twice as much to apply before.
    let (file, resolved_is_path) = match resolve.then(|| open_without_symlinks(path, parent)) {
        Some(Ok(fd)) => (std::fs::File::from(fd), is_plain(path)),
        Some(Err(e)) if is_final(&e) => {
            return Err(cannot_open(e));
        }
        _ => (open_path(path).map_err(cannot_open)?, !resolve),
    };
    let (mode, dev, ino) = sys::fstat_id(file.as_fd()).map_err(cannot_open)?;
    let kind = match mode & libc::S_IFMT {
        libc::S_IFDIR => RootKind::Directory,
        libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO | libc::S_IFSOCK => RootKind::Special,
        _ => RootKind::File,
    };
    let fd = OwnedFd::from(file);
    let resolved = if resolved_is_path {
        None
    } else {
        read_resolved(&fd, path)
    };
    Ok(OpenRoot {
        granted: Granted::new(path, origin, resolved, kind, (dev, ino)),
        fd,
    })
}

/// Opens `path` with `O_PATH`: no read permission needed, and opening a
/// fifo or a device does not block or trigger the driver.
fn open_path(path: &Path) -> io::Result<std::fs::File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
}

/// [`open_path`], through no symlink (see [`sys::open_path_without_symlinks`]).
/// With `parent`, the directory `path`'s parent names, opened through no
/// symlink by [`Parents`]: only the last name is walked, from there.
fn open_without_symlinks(path: &Path, parent: Option<BorrowedFd<'_>>) -> io::Result<OwnedFd> {
    let whole = path.as_os_str().as_encoded_bytes();
    let (parent, bytes) = match parent.zip(whole.iter().rposition(|b| *b == b'/')) {
        Some((parent, slash)) => (Some(parent), &whole[slash + 1..]),
        None => (None, whole),
    };
    // On the stack when it fits, as std does for its own path calls: one
    // allocation less a root.
    let mut buf = [0u8; 512];
    if let Some(with_nul) = buf.get_mut(..=bytes.len()) {
        with_nul[..bytes.len()].copy_from_slice(bytes);
        let c = std::ffi::CStr::from_bytes_with_nul(with_nul)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        return sys::open_path_without_symlinks_at(parent, c);
    }
    let c =
        std::ffi::CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    sys::open_path_without_symlinks_at(parent, &c)
}

/// The directory that consecutive roots share as parent (`/w/crates/a`,
/// `/w/crates/b`, …), opened once through no symlink, so that each of them
/// is opened from it, the kernel walking one name instead of the whole
/// path (a quarter of the cost of opening 256 roots). What each root
/// resolves to is unchanged: the parent met no symlink, nor does the name
/// walked from it; an error the parent meets (`ELOOP`, `ENOENT`) leaves
/// its roots to be opened by their whole path, which meets it again.
#[derive(Default)]
struct Parents<'a> {
    open: Option<(&'a Path, OwnedFd)>,
}

impl<'a> Parents<'a> {
    /// The open parent of `roots[i]`, opened now when the next root shares
    /// it; `None` when the root is opened by its whole path.
    fn of(&mut self, roots: &'a [Root], i: usize) -> Option<BorrowedFd<'_>> {
        // A plain path's parent is what comes before its last slash (no
        // walk of its components: this runs twice a root).
        let plain_parent = |root: Option<&'a Root>| -> Option<&'a Path> {
            let path = &root?.path;
            if !is_plain(path) {
                return None;
            }
            let bytes = path.as_os_str().as_encoded_bytes();
            match bytes.iter().rposition(|b| *b == b'/')? {
                0 if bytes.len() > 1 => Some(Path::new("/")),
                0 => None,
                slash => Some(Path::new(std::ffi::OsStr::from_bytes(&bytes[..slash]))),
            }
        };
        let parent = plain_parent(roots.get(i))?;
        if self.open.as_ref().is_none_or(|(open, _)| *open != parent) {
            self.open = None;
            if plain_parent(roots.get(i + 1)) != Some(parent) {
                return None;
            }
            let fd = open_without_symlinks(parent, None).ok()?;
            self.open = Some((parent, fd));
        }
        self.open.as_ref().map(|(_, fd)| fd.as_fd())
    }
}

/// Whether an error of [`open_without_symlinks`] is what the plain open
/// would answer too; anything else (no `openat2`, a filter refusing it)
/// means asking again the plain way.
fn is_final(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::EACCES | libc::ENAMETOOLONG)
    )
}

/// Whether `path` names its target without detours: absolute, and no
/// empty, `.` or `..` component and no trailing slash.
fn is_plain(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    bytes == b"/"
        || (bytes.first() == Some(&b'/')
            && bytes[1..]
                .split(|b| *b == b'/')
                .all(|name| !name.is_empty() && name != b"." && name != b".."))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_reports_what_it_resolved_to_only_when_that_differs() {
        let (_dir, base) = crate::testing::tree(&["real"]);
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).expect("symlink");
        let report =
            crate::testing::report_writable(["real", "link", "real/../real"].map(|r| base.join(r)));
        let resolved: Vec<Option<PathBuf>> =
            report.granted.iter().map(|g| g.resolved.clone()).collect();
        assert_eq!(
            resolved,
            [None, Some(base.join("real")), Some(base.join("real"))]
        );
        assert!(is_plain(Path::new("/")) && is_plain(Path::new("/a/b")));
        for detour in ["/a/./b", "/a/../b", "/a//b", "/a/b/", "a/b"] {
            assert!(!is_plain(Path::new(detour)), "{detour}");
        }
    }

    #[test]
    fn roots_opened_from_their_shared_parent_are_judged_as_when_opened_alone() {
        // Consecutive roots with one parent are opened from it (`Parents`):
        // a real parent, a parent reached through a symlink, a leaf that is
        // a symlink and one that is missing each report what a root alone
        // reports.
        let (_dir, base) = crate::testing::tree(&["real/a", "real/b"]);
        std::os::unix::fs::symlink(base.join("real"), base.join("via")).expect("symlink");
        std::os::unix::fs::symlink(base.join("real/a"), base.join("real/to-a")).expect("symlink");
        let paths = [
            "real/a",
            "real/b",
            "real/to-a",
            "real/gone",
            "via/a",
            "via/b",
        ]
        .map(|r| base.join(r));
        let together = crate::testing::report_writable(paths.clone());
        let mut granted = 0;
        for path in &paths {
            let alone = crate::testing::report_writable([path.clone()]);
            let with_others = |r: &Report| {
                let g = r.granted.iter().find(|g| g.path == *path);
                let s = r.skipped.iter().find(|s| s.path == *path);
                (
                    g.map(|g| (g.resolved.clone(), g.id(), g.kind)),
                    s.map(|s| s.reason.clone()),
                )
            };
            assert_eq!(
                with_others(&together),
                with_others(&alone),
                "{}",
                path.display()
            );
            granted += usize::from(with_others(&alone).0.is_some());
        }
        // Granted: everything but the missing leaf; via/… and real/to-a
        // resolve into real/.
        assert_eq!(granted, 5);
        let resolved: Vec<_> = together
            .granted
            .iter()
            .map(|g| g.resolved.clone())
            .collect();
        assert_eq!(
            resolved,
            [
                None,
                None,
                Some(base.join("real/a")),
                Some(base.join("real/a")),
                Some(base.join("real/b"))
            ]
        );
    }

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
        let report = crate::testing::report_writable(["/", "/", "/dev/null"]);
        assert_eq!(report.granted.len(), 2);
        assert_eq!(report.granted[1].kind, RootKind::Special);
        assert_eq!(report.warnings.len(), 1);
    }
}
