//! Roots with provenance, and the judgement of what a root resolves to.
//!
//! A root derived from the environment or from the project's own `.git` is
//! input that a stray variable or an earlier confined command can change.
//! None of them may resolve to the home directory, an ancestor of it, or an
//! ancestor of the project: that would widen the next sandbox to the very
//! files it exists to protect. Only a root the caller names may be that
//! wide, and then the report says so loudly.

use std::cell::OnceCell;
use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A writable root and where it came from.
///
/// [`default_writable`](crate::default_writable) returns these: the seed's
/// `[]string` became roots with provenance, because whether a root may be
/// as wide as the home directory depends on who named it. A path converts
/// into a root named by the caller ([`Origin::Extra`]), so
/// `Policy { writable: vec!["/srv/out".into()], ..Policy::default() }` means "named explicitly".
///
/// # Examples
///
/// ```
/// use strument_sandbox::{Origin, Root};
///
/// let named: Root = "/srv/out".into();
/// assert_eq!(named.origin, Origin::Extra);
/// let cache = Root::new("/home/me/.cache/go-build", Origin::Cache { variable: None });
/// assert!(!cache.origin.is_explicit());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Root {
    /// The path as given (not resolved: the kernel resolves it when the
    /// policy is applied, and the report says what it resolved to).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub path: PathBuf,
    /// Who named it.
    pub origin: Origin,
    /// The write rights it is granted, when it is a directory: every one
    /// unless the cache table narrows them.
    pub rights: Rights,
}

/// The write rights a directory root is granted.
///
/// Every root gets every write right of the kernel's ABI, so that renames
/// and hard links between roots work, except a cache that never legitimately
/// holds a symlink: there a symlink could only be a plant, left for the
/// user's own unconfined toolchain to follow (a symlink at
/// `~/.cache/go-build/trim.txt` makes the next `go build` overwrite its
/// target). Landlock checks `MAKE_SYM` when a symlink is created and when
/// one is renamed or linked into the root.
///
/// # Examples
///
/// ```
/// use strument_sandbox::{Origin, Rights, Root};
/// let cache = Root::new("/home/me/.cache/go-build", Origin::Cache { variable: None })
///     .with_rights(Rights::NoSymlinks);
/// assert_eq!(cache.rights.name(), "no-symlinks");
/// assert_eq!(Root::from("/srv/out").rights, Rights::All);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum Rights {
    /// Every write right the kernel's ABI handles.
    #[default]
    All,
    /// Every write right but `MAKE_SYM`: no symlink can be made in the root
    /// or moved into it.
    NoSymlinks,
}

impl Rights {
    /// A short, stable name for programs: `all` or `no-symlinks`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::Rights::All.name(), "all");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Rights::All => "all",
            Rights::NoSymlinks => "no-symlinks",
        }
    }
}

impl fmt::Display for Rights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rights::All => "every write right",
            Rights::NoSymlinks => "no symlinks may be made or moved in",
        })
    }
}

impl Root {
    /// A root at `path` that came from `origin`.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = strument_sandbox::Root::new("/tmp", strument_sandbox::Origin::Temp { variable: None });
    /// assert_eq!(r.path, std::path::Path::new("/tmp"));
    /// ```
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, origin: Origin) -> Root {
        Root {
            path: path.into(),
            origin,
            rights: Rights::All,
        }
    }

    /// This root, granted `rights` instead of every write right.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{Rights, Root};
    /// let r = Root::from("/srv/cache").with_rights(Rights::NoSymlinks);
    /// assert_eq!(r.rights, Rights::NoSymlinks);
    /// ```
    #[must_use]
    pub fn with_rights(mut self, rights: Rights) -> Root {
        self.rights = rights;
        self
    }
}

impl From<PathBuf> for Root {
    fn from(path: PathBuf) -> Root {
        Root::new(path, Origin::Extra)
    }
}

impl From<&PathBuf> for Root {
    fn from(path: &PathBuf) -> Root {
        Root::new(path.clone(), Origin::Extra)
    }
}

impl From<&Path> for Root {
    fn from(path: &Path) -> Root {
        Root::new(path, Origin::Extra)
    }
}

impl From<&str> for Root {
    fn from(path: &str) -> Root {
        Root::new(path, Origin::Extra)
    }
}

impl From<String> for Root {
    fn from(path: String) -> Root {
        Root::new(path, Origin::Extra)
    }
}

/// An environment variable a root was read from, and its value as read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Variable {
    /// The variable's name (`TMPDIR`, `XDG_CACHE_HOME`, `GOCACHE`, …).
    #[cfg_attr(feature = "serde", serde(rename = "variable"))]
    pub name: &'static str,
    /// Its value.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub value: PathBuf,
}

impl fmt::Display for Variable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${}={}", self.name, self.value.display())
    }
}

/// Where a root (a writable place, or a place unix sockets may be reached)
/// came from.
///
/// Roots the caller names ([`Project`](Origin::Project),
/// [`State`](Origin::State), [`Extra`](Origin::Extra)) are granted
/// whatever they resolve to, with a loud warning when that is the home
/// directory or above. Every other root is derived (from the environment,
/// the project's `.git`, or built in) and is skipped if it resolves there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum Origin {
    /// The project root, named by the caller.
    Project,
    /// The session's state directory, named by the caller.
    State,
    /// A git directory outside the project, read from a file the project
    /// holds (and so a file a confined command can rewrite).
    Git {
        /// The file or symlink that named it: `<project>/.git` or a
        /// worktree's `commondir`.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
        pointer: PathBuf,
    },
    /// Temporary space: `$TMPDIR`, or built in (`/tmp`, `/var/tmp`, `/dev/shm`).
    Temp {
        /// The variable it was read from, if any.
        #[cfg_attr(feature = "serde", serde(flatten))]
        variable: Option<Variable>,
    },
    /// A device file programs write (`/dev/null`, `/dev/pts`, …).
    Device,
    /// A toolchain cache, under the home directory by default or where a
    /// variable (`XDG_CACHE_HOME`, `GOCACHE`, `CARGO_HOME`, …) says.
    Cache {
        /// The variable it was read from, if any.
        #[cfg_attr(feature = "serde", serde(flatten))]
        variable: Option<Variable>,
    },
    /// Named by the caller: `--allow`, `--allow-socket`, the library's
    /// `extra`, or any path converted into a [`Root`].
    Extra,
    /// A socket: `$SSH_AUTH_SOCK`, so that `git` over ssh signs in through
    /// the agent.
    SshAgent,
    /// A socket: gpg-agent's (and keyboxd's), for signed commits and tags,
    /// and with them key deletion and import: never among the defaults.
    GpgAgent,
    /// A socket of a service that answers name and user lookups or takes
    /// log records (nscd, systemd-resolved, systemd-userdb, syslog,
    /// journald): it writes nothing for its caller but log records.
    Lookup,
}

impl Origin {
    /// Whether the caller named this root (project, state directory,
    /// extra), rather than the environment, the `.git` or a built-in list.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::Origin;
    /// assert!(Origin::Project.is_explicit());
    /// assert!(!Origin::Device.is_explicit());
    /// ```
    #[must_use]
    pub fn is_explicit(&self) -> bool {
        matches!(self, Origin::Project | Origin::State | Origin::Extra)
    }

    /// A short, stable name for programs: `project`, `state`, `git`,
    /// `temp`, `device`, `cache`, `extra`, `ssh-agent`, `gpg-agent` or
    /// `lookup`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::Origin::Extra.name(), "extra");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Origin::Project => "project",
            Origin::State => "state",
            Origin::Git { .. } => "git",
            Origin::Temp { .. } => "temp",
            Origin::Device => "device",
            Origin::Cache { .. } => "cache",
            Origin::Extra => "extra",
            Origin::SshAgent => "ssh-agent",
            Origin::GpgAgent => "gpg-agent",
            Origin::Lookup => "lookup",
        }
    }

    /// The variable the root was read from, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(strument_sandbox::Origin::Project.variable().is_none());
    /// ```
    #[must_use]
    pub fn variable(&self) -> Option<&Variable> {
        match self {
            Origin::Temp { variable } | Origin::Cache { variable } => variable.as_ref(),
            _ => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Project => f.write_str("the project"),
            Origin::State => f.write_str("the state directory"),
            Origin::Git { pointer } => write!(f, "git, named by {}", pointer.display()),
            Origin::Temp { variable: Some(v) } => write!(f, "temp, from {v}"),
            Origin::Temp { variable: None } => f.write_str("temp, built in"),
            Origin::Device => f.write_str("device"),
            Origin::Cache { variable: Some(v) } => write!(f, "cache, from {v}"),
            Origin::Cache { variable: None } => f.write_str("cache, under the home directory"),
            Origin::Extra => f.write_str("named by the caller"),
            Origin::SshAgent => {
                f.write_str("$SSH_AUTH_SOCK: git and ssh sign in through the agent")
            }
            Origin::GpgAgent => f.write_str(
                "gpg-agent: signed commits and tags; it also deletes and imports secret keys",
            ),
            Origin::Lookup => f.write_str(
                "name, user and log services: they answer lookups and take log records, \
                 writing nothing else for the caller",
            ),
        }
    }
}

/// What a root was found to be when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
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
    /// assert_eq!(strument_sandbox::root::RootKind::Directory.name(), "directory");
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

/// Why a root grants nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "reason", rename_all = "kebab-case"))]
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
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
        resolved: PathBuf,
    },
    /// A git root (from `.git` or a `commondir`) that does not lead to a
    /// git directory (`HEAD` and `objects/`, or `HEAD` and `commondir`).
    NotAGitDirectory {
        /// The path it resolved to.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
        resolved: PathBuf,
    },
    /// The root came from the environment, the cache home or the project's
    /// `.git`, and resolves through a symlink that sits in a granted
    /// directory, where a confined command could have planted it, to a
    /// place outside every granted directory. (`TMPDIR=/tmp/nix-shell.X`
    /// replaced by a symlink to `~/.local/bin`.)
    ThroughWritable {
        /// The symlink on the way.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
        link: PathBuf,
        /// The path it resolved to.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
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
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
        resolved: PathBuf,
        /// The project whose `.git` led there.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
        project: PathBuf,
    },
}

impl SkipReason {
    /// A short, stable name for programs: `missing`, `cannot-open`,
    /// `widens`, `not-a-git-directory`, `through-writable` or
    /// `another-working-tree`.
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
            SkipReason::ThroughWritable { .. } => "through-writable",
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
            SkipReason::ThroughWritable { link, resolved } => write!(
                f,
                "resolves through {}, a symlink in a granted directory that a confined command \
                 could have planted, to {}, outside every granted directory",
                link.display(),
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

/// What a root resolves to that makes it too wide to be derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum Covers {
    /// The home directory itself.
    Home,
    /// A directory above the home directory (`/home`, `/`).
    AboveHome,
    /// A directory above the project (which may hold other projects).
    AboveProject,
}

impl Covers {
    /// A short, stable name for programs.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::root::Covers::AboveHome.name(), "above-home");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Covers::Home => "home",
            Covers::AboveHome => "above-home",
            Covers::AboveProject => "above-project",
        }
    }
}

impl fmt::Display for Covers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Covers::Home => "the home directory",
            Covers::AboveHome => "an ancestor of the home directory",
            Covers::AboveProject => "an ancestor of the project",
        })
    }
}

/// The identities (device, inode) a derived root must not resolve to,
/// computed once per policy: a handful of `stat`s, the project's only when
/// first needed.
#[derive(Debug, Default)]
pub(crate) struct Judge {
    pub(crate) home: Option<PathBuf>,
    /// The home directory, then each ancestor up to `/`: walked when first
    /// needed.
    home_chain: OnceCell<Vec<(u64, u64)>>,
    project: Option<PathBuf>,
    /// The project's strict ancestors up to `/`.
    above_project: OnceCell<Vec<(u64, u64)>>,
    /// Whether the project's linked-worktree gitdir names it back, as the
    /// git layout's reading found: the policy's check of that gitdir takes
    /// this answer instead of reading its `gitdir` file a second time.
    gitdir_asked: OnceCell<GitdirAsked>,
}

/// A linked worktree's gitdir, asked once whether its `gitdir` file names
/// the project's `.git` back (`git::points_back`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitdirAsked {
    /// The project's `.git` pointer that leads to it.
    pub(crate) dotgit: PathBuf,
    /// The gitdir's device and inode when it was asked: the answer holds
    /// for that directory only.
    pub(crate) id: (u64, u64),
    /// Whether it names the project back.
    pub(crate) points_back: bool,
}

impl Judge {
    /// The project it judges for, when one was given.
    pub(crate) fn project(&self) -> Option<&Path> {
        self.project.as_deref()
    }

    /// A judge of what covers `home`, and of what covers `project` too when
    /// one is given.
    pub(crate) fn new(home: Option<&Path>, project: Option<&Path>) -> Judge {
        let home = home.filter(|h| h.is_absolute());
        Judge {
            home: home.map(Path::to_path_buf),
            home_chain: OnceCell::new(),
            project: project.map(Path::to_path_buf),
            above_project: OnceCell::new(),
            gitdir_asked: OnceCell::new(),
        }
    }

    /// A judge of the same home directory (its ancestors walked once, here
    /// if not yet) for another project, or none.
    pub(crate) fn for_project(&self, project: Option<&Path>) -> Judge {
        let home_chain = self.home_chain();
        Judge {
            home: self.home.clone(),
            home_chain: OnceCell::from(home_chain.clone()),
            project: project.map(Path::to_path_buf),
            above_project: OnceCell::new(),
            gitdir_asked: self.gitdir_asked.clone(),
        }
    }

    /// Keeps what the git layout's reading found about the project's
    /// gitdir (the first answer given, if given twice).
    pub(crate) fn remember_gitdir(&self, asked: GitdirAsked) {
        let _ = self.gitdir_asked.set(asked);
    }

    /// The kept answer for the gitdir `dotgit` leads to, when it is still
    /// the directory `id` that was asked.
    pub(crate) fn gitdir_points_back(&self, dotgit: &Path, id: (u64, u64)) -> Option<bool> {
        self.gitdir_asked
            .get()
            .filter(|asked| asked.dotgit == dotgit && asked.id == id)
            .map(|asked| asked.points_back)
    }

    /// The home directory, then each ancestor up to `/`.
    fn home_chain(&self) -> &Vec<(u64, u64)> {
        self.home_chain
            .get_or_init(|| self.home.as_deref().map(chain).unwrap_or_default())
    }

    /// What `id` covers that a derived root must not, if anything.
    pub(crate) fn covers(&self, id: (u64, u64)) -> Option<Covers> {
        if let Some(c) = self.covers_home(id) {
            return Some(c);
        }
        let project = self.project.as_deref()?;
        let above = self
            .above_project
            .get_or_init(|| chain(project).into_iter().skip(1).collect());
        above.contains(&id).then_some(Covers::AboveProject)
    }

    /// Whether `path` resolves to the home directory or above it. The
    /// project's own ancestors are not walked: no directory is above
    /// itself, so for the project they cannot answer, and the walk costs a
    /// `stat` a level (left for a root a variable names, which needs it).
    pub(crate) fn covers_home_path(&self, path: &Path) -> Option<Covers> {
        let meta = std::fs::metadata(path).ok()?;
        self.covers_home((meta.dev(), meta.ino()))
    }

    /// As [`Judge::covers`], but the project's ancestors only for a
    /// directory a variable named: one under the home directory by default
    /// (`~/.cache`, `~/.cargo`) can be above the project only when the
    /// project is inside a cache, and walking up from the project costs a
    /// `stat` a level on every start-up.
    pub(crate) fn covers_as(&self, id: (u64, u64), from_variable: bool) -> Option<Covers> {
        match self.covers_home(id) {
            Some(c) => Some(c),
            None if from_variable => self.covers(id),
            None => None,
        }
    }

    /// [`Judge::covers_as`] for a path. A default path under the home
    /// directory (`~/.cache`, `~/.cargo`) that is not a symlink is a
    /// directory inside home, never home or above it: one `lstat` answers.
    pub(crate) fn covers_path_as(&self, path: &Path, from_variable: bool) -> Option<Covers> {
        if !from_variable {
            let link = std::fs::symlink_metadata(path).ok()?;
            if !link.file_type().is_symlink() {
                return None;
            }
        }
        let meta = std::fs::metadata(path).ok()?;
        self.covers_as((meta.dev(), meta.ino()), from_variable)
    }

    /// Whether `id` is the home directory or above it.
    fn covers_home(&self, id: (u64, u64)) -> Option<Covers> {
        let home_chain = self.home_chain();
        if home_chain.first() == Some(&id) {
            Some(Covers::Home)
        } else if home_chain.iter().skip(1).any(|a| *a == id) {
            Some(Covers::AboveHome)
        } else if home_chain.is_empty() && is_filesystem_root(id) {
            // No usable home (HOME unset, relative or missing): whatever
            // the home is, `/` is above it.
            Some(Covers::AboveHome)
        } else {
            None
        }
    }
}

/// Whether `id` is the filesystem root's.
fn is_filesystem_root(id: (u64, u64)) -> bool {
    std::fs::metadata("/").is_ok_and(|m| (m.dev(), m.ino()) == id)
}

/// The identity of `start` and of each directory above it, up to `/`,
/// walked with `..` so the kernel resolves symlinks physically.
fn chain(start: &Path) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut path = start.to_path_buf();
    // Far deeper than any real path; bounds a pathological one.
    while out.len() < 4096 {
        let Ok(meta) = std::fs::metadata(&path) else {
            break;
        };
        let id = (meta.dev(), meta.ino());
        if out.last() == Some(&id) {
            break; // `/..` is `/`
        }
        out.push(id);
        path.push("..");
    }
    out
}

/// Whether `dir` is the home directory or an ancestor of it (`/home`, `/`),
/// compared by identity: a project there would make the whole home
/// writable. The CLI's `run` refuses to take such a current directory as
/// the project without an explicit `--project`.
///
/// # Examples
///
/// ```
/// use strument_sandbox::{root::Covers, root::covers_home};
/// if let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) {
///     if home.is_dir() {
///         assert_eq!(covers_home(&home), Some(Covers::Home));
///         assert_eq!(covers_home(&home.join("no-such-project")), None);
///     }
/// }
/// ```
#[must_use]
pub fn covers_home(dir: &Path) -> Option<Covers> {
    Judge::new(dirs::home_dir().as_deref(), None).covers_home_path(dir)
}
