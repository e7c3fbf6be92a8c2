//! The default list of writable roots for a session.

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::beneath;
use crate::error::PolicyError;
use crate::git::{GitLayout, read_layout};
use crate::policy::require_absolute;
use crate::root::{Judge, Origin, Rights, Root, Variable};

/// Device files ordinary programs write to. `/dev/pts` is a directory (the
/// terminals behind `/dev/ptmx`); the rest get file rights only.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Temporary space build tools assume exists. `/dev/shm` backs POSIX
/// semaphores and shared memory (Python's `multiprocessing`, for one).
const TEMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// The set of places a session legitimately writes to, each with where it
/// came from.
///
/// Everything else on the filesystem stays readable and executable and
/// cannot be written, so this list is the whole security decision. Each
/// group is here for a reason that can be checked:
///
/// - **the project**, because that is the work;
/// - **the state directory** (when given), because the session's
///   transcript, undo data and lock live there;
/// - **the git directory when it lives elsewhere**: `.git` as a file
///   (`gitdir: …`, relative to the file) in a linked worktree or a
///   submodule, or as a symlink; and of a worktree's common directory
///   (`commondir`) only the parts a worktree writes (`objects/`, `refs/`,
///   `logs/`, and `reftable/` when the repository has one), so the main
///   repository's `hooks/` and `config` stay read-only. A git directory
///   that does not name the project back (a worktree's `gitdir` file, a
///   submodule's `core.worktree`) is another working tree's: it is listed
///   for [`Policy`](crate::Policy) to skip, and its common directory is not;
/// - **the enclosing repository's git directory**, for a project with no
///   `.git` of its own inside another repository's working tree (a
///   monorepo's package): the nearest `.git` above the project, below the
///   home directory and on the same filesystem, with the same judgement as
///   a `.git` pointer (granted whole when it is a git directory whose
///   working tree holds the project, since `git commit` makes
///   `index.lock` directly in it; the tripwire watches its hooks and
///   config);
/// - **temporary space**: `$TMPDIR`, `/tmp`, `/var/tmp`, `/dev/shm`;
/// - **device files** programs write: `/dev/null`, `/dev/zero`,
///   `/dev/full`, `/dev/tty`, `/dev/ptmx`, `/dev/pts`;
/// - **toolchain caches**, because the first `go test` of a session writes
///   one: each directory in the XDG cache home (`~/.cache/go-build`,
///   `pip`, `uv`, …) but never the cache home itself, whose own files
///   shells source (powerlevel10k's instant prompt); `GOCACHE`,
///   `GOMODCACHE` or `$GOPATH/pkg/mod` and `pkg/sumdb`,
///   `$CARGO_HOME/registry`, `/git` and cargo's lock files, npm, Maven,
///   Gradle, bun, pnpm and yarn stores. Caches only: `~/.cargo/bin`,
///   `~/.cargo/config.toml`, `~/.config/go/env` and the like stay
///   read-only, because a writable bin or config directory would let one
///   command plant code that every later session runs;
/// - `extra`, as given.
///
/// The seed's `[]string` became [`Root`]s with an [`Origin`]: the `.git`
/// pointers are files a confined command can rewrite, and the variables
/// come from whatever environment started the process, so whether a root
/// may resolve to the home directory depends on who named it.
/// [`Policy`](crate::Policy) judges each root by what it resolves to and
/// skips a derived one that is the home directory, above it, or above the
/// project. A cache home (`XDG_CACHE_HOME`) or cargo home (`CARGO_HOME`)
/// that resolves there is listed itself, to be skipped, rather than what
/// would be under it.
///
/// Environment variables are honoured the way the toolchains read them; a
/// variable holding a relative path is ignored, as Go itself refuses one.
/// Symlinks are not resolved here: Landlock anchors each rule to the inode
/// a path resolves to when the policy is applied, so a project root that is
/// a symlink works, and a symlink *inside* the project pointing outward
/// stays unwritable. Duplicates are removed, first occurrence kept. Paths
/// that do not exist are kept: [`Policy`](crate::Policy) skips and reports
/// them.
///
/// # Errors
///
/// - [`PolicyError::EmptyPath`] / [`PolicyError::RelativePath`] for a
///   project root, state directory or `extra` entry that is not absolute;
/// - [`PolicyError::NotADirectory`] for a project root or state directory
///   that exists and is not a directory;
/// - [`PolicyError::GitFile`] for a `.git` file or `commondir` that does
///   not name a path; [`PolicyError::Io`] when one cannot be read.
///
/// # Examples
///
/// ```
/// use std::path::Path;
/// use strument_sandbox::{Origin, default_writable};
///
/// let project = tempfile::tempdir()?;
/// let roots = default_writable(project.path(), None, &["/opt/scratch".into()])?;
/// assert_eq!(roots[0].path, project.path());
/// assert_eq!(roots[0].origin, Origin::Project);
/// assert!(roots.iter().any(|r| r.path == Path::new("/tmp")));
/// assert!(roots.iter().all(|r| !r.path.ends_with(".cargo/bin")));
/// assert_eq!(roots.last().map(|r| &r.origin), Some(&Origin::Extra));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn default_writable(
    project_root: &Path,
    state_dir: Option<&Path>,
    extra: &[PathBuf],
) -> Result<Vec<Root>, PolicyError> {
    let env = |name: &str| std::env::var_os(name);
    writable_for(project_root, state_dir, extra, &env, dirs::home_dir())
}

/// What the default roots are made of that is read from the machine, read
/// once per session and passed on: the home directory, the judge of what
/// covers it (and the project), where the cache home is, and the cache list.
#[derive(Debug)]
pub(crate) struct Inputs {
    /// The home directory, when it is an absolute path.
    pub(crate) home: Option<PathBuf>,
    /// What a derived root must not cover: home, above it, above the project.
    pub(crate) judge: Judge,
    cache_home: Option<(PathBuf, Option<Variable>)>,
    caches: Vec<Root>,
}

/// A build tool's wrapper script in a project, and the tool it runs.
const WRAPPERS: [(&str, &str); 2] = [("gradlew", "gradle"), ("mvnw", "mvn")];

impl Inputs {
    /// Reads them from `env` and `home`, for `project` when there is one.
    pub(crate) fn read(
        env: &dyn Fn(&str) -> Option<OsString>,
        home: Option<PathBuf>,
        project: Option<&Path>,
    ) -> Inputs {
        let var = |name: &'static str| variable(env, name);
        let home = home.filter(|h| h.is_absolute());
        let judge = Judge::new(home.as_deref(), project);
        let cache_home = cache_home(&var, home.as_deref());
        let caches = caches(&var, home.as_deref(), &judge);
        Inputs {
            home,
            judge,
            cache_home,
            caches,
        }
    }

    /// Reads them from this process's environment and home directory.
    pub(crate) fn of_process(project: Option<&Path>) -> Inputs {
        Inputs::read(&|name| std::env::var_os(name), dirs::home_dir(), project)
    }
}

/// An absolute path from the environment variable `name`.
fn variable(env: &dyn Fn(&str) -> Option<OsString>, name: &'static str) -> Option<Variable> {
    env(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|value| Variable { name, value })
}

/// Creates the toolchain caches of [`default_writable`] that do not exist
/// yet, and returns the paths it created.
///
/// A root must exist when the policy is applied to be writable at all, and
/// a cache appears the first time its toolchain runs: on a fresh machine
/// the first confined `go test` would be refused `~/.cache/go-build`. Call
/// this before [`default_writable`] and [`Policy::apply`](crate::Policy::apply)
/// to avoid that. What it makes:
///
/// - the XDG cache home (`~/.cache`) when missing;
/// - in it, the cache directory of each toolchain installed on this machine
///   (found on `PATH`): `go-build` for go, `pip` for pip, `uv`, `pypoetry`,
///   `yarn`, `pnpm`, `node-gyp` for npm, `deno`, `zig`, `sccache`,
///   `ccache`, `golangci-lint`, `gopls`, `bazel`, `nix`, `pre-commit`,
///   `typescript` for tsc, `ms-playwright`, `Cypress`; nothing for a
///   toolchain that is not there, since the cache home itself is not
///   writable (its own files are sourced by shells);
/// - `~/.npm` when npm is installed;
/// - the other caches whose parent directory exists but is not the home
///   directory (`~/.cargo/registry` when `~/.cargo` exists), and cargo's
///   empty lock files.
///
/// Nothing is made in a cache home that resolves to the home directory or
/// above (`XDG_CACHE_HOME=$HOME`): the policy skips it anyway. Failures are
/// not errors: the policy report lists what stays missing.
///
/// # Examples
///
/// ```no_run
/// let created = strument_sandbox::writable::create_missing_caches();
/// for path in &created {
///     eprintln!("created {}", path.display());
/// }
/// ```
#[must_use]
pub fn create_missing_caches() -> Vec<PathBuf> {
    let env = |name: &str| std::env::var_os(name);
    create_missing_caches_in(&env, &Inputs::of_process(None))
}

/// The cache directories toolchains make in the XDG cache home, each with
/// the command whose presence on `PATH` says the toolchain is installed, and
/// the rights it is granted (see [`Rights`]): without `MAKE_SYM` where the
/// toolchain never puts a symlink there, so none can be planted for its
/// next unconfined run to follow (measured: `find DIR -type l` after the
/// toolchain ran in a fresh home; or read in its source). `All` where it
/// does, or where nobody has looked yet: those are named in
/// `doc/security.md` as open routes. A directory in the cache home that no
/// row names gets every right.
pub(crate) const TOOLCHAIN_CACHES: [(&str, &str, Rights); 25] = [
    // Objects, test results and trim.txt: regular files only (measured,
    // go 1.19: go test and go build with a module dependency).
    ("go", "go-build", Rights::NoSymlinks),
    // http-v2 and wheels: regular files, written to a temporary name and
    // renamed (pip's adjacent_tmp_file and replace).
    ("pip", "pip", Rights::NoSymlinks),
    ("pip3", "pip", Rights::NoSymlinks),
    // uv links its cache entries to archive-v0 with symlinks.
    ("uv", "uv", Rights::All),
    // virtualenvs/ holds whole environments, bin/python a symlink.
    ("poetry", "pypoetry", Rights::All),
    ("yarn", "yarn", Rights::All),                   // not measured
    ("pnpm", "pnpm", Rights::All),                   // not measured
    ("npm", "node-gyp", Rights::All),                // not measured
    ("deno", "deno", Rights::All),                   // not measured
    ("zig", "zig", Rights::All),                     // not measured
    ("sccache", "sccache", Rights::All),             // not measured
    ("ccache", "ccache", Rights::All),               // not measured
    ("golangci-lint", "golangci-lint", Rights::All), // not measured
    ("gopls", "gopls", Rights::All),                 // not measured
    // The output base is a tree of symlinks (execroot, external/).
    ("bazel", "bazel", Rights::All),
    // Fetched flake inputs and git checkouts hold their symlinks.
    ("nix", "nix", Rights::All),
    // Hook environments are virtualenvs and node_modules, with symlinks.
    ("pre-commit", "pre-commit", Rights::All),
    // Automatic type acquisition runs npm install there: node_modules/.bin.
    ("tsc", "typescript", Rights::All),
    ("playwright", "ms-playwright", Rights::All), // browser builds; not measured
    ("cypress", "Cypress", Rights::All),          // not measured
    // corepack: the package managers it downloads, in
    // `$XDG_CACHE_HOME/node/corepack` (`COREPACK_HOME`; corepack's README).
    // None made by corepack itself, but the archives it unpacks may carry
    // symlinks (not checked for every package manager).
    ("corepack", "node", Rights::All),
    // puppeteer (19 and later): browsers in `~/.cache/puppeteer`
    // (`PUPPETEER_CACHE_DIR`; puppeteer's configuration guide). A library,
    // not a command: made where node is. Browser archives hold symlinks.
    ("node", "puppeteer", Rights::All),
    // pipx: `pipx run`'s cached environments in `~/.cache/pipx`
    // (`PIPX_CACHE_DIR`, pipx 1.3+ docs; older releases keep it in
    // PIPX_HOME). Each is a venv: `bin/python` is a symlink.
    ("pipx", "pipx", Rights::All),
    // bazelisk: the Bazel releases it downloads, `~/.cache/bazelisk`
    // (`BAZELISK_HOME`; bazelisk's README): plain binaries.
    ("bazelisk", "bazelisk", Rights::NoSymlinks),
    // (bun's store is `~/.bun/install/cache`, granted in `caches`.)
    // black, the Python formatter: `~/.cache/black/<version>` (black's
    // docs, "cache"): pickled file hashes.
    ("black", "black", Rights::NoSymlinks),
];

/// The rights of the cache-home directory `name`: its row's, or every one.
fn cache_home_rights(name: &OsStr) -> Rights {
    TOOLCHAIN_CACHES
        .iter()
        .find(|(_, sub, _)| name == *sub)
        .map_or(Rights::All, |(_, _, rights)| *rights)
}

/// A file directly in the cache home, so no confined command can touch it,
/// whose modification time says when the toolchains on `PATH` were last
/// looked up. Looking up 20 commands in a dozen `PATH` directories is
/// hundreds of failed `stat`s: most of `run`'s start-up, on every run, for
/// toolchains that are not installed.
pub(crate) const TOOLCHAINS_CHECKED: &str = ".strument-sandbox-toolchains-checked";

/// The stamp's format, its first line: changed whenever the sandbox starts
/// making something more for an installed toolchain (2: Gradle's, Maven's
/// and Go's roots; 3: cargo's) or the format changes (4: several `PATH`s),
/// so that a stamp an earlier version made is stale once, and what it did
/// not make is made.
const STAMP_VERSION: &[u8] = b"4\n";

/// How many `PATH`s the stamp remembers: an agent's, a shell's, `cargo
/// run`'s (rustup puts its toolchain first) and an editor's each get their
/// own look-up once, not one each time the sandbox is started from another.
const STAMP_PATHS: usize = 4;

/// A stamp larger than this is not read (and is rewritten): four long
/// `PATH`s fit many times over.
const STAMP_MAX: u64 = 64 * 1024;

/// A time of the kernel's coarse clock, as file times give it.
type FileTime = (i64, i64);

/// What the stamp says: the `PATH`s whose toolchains were looked up, each
/// with the time of its look-up, the newest first.
///
/// On disk: [`STAMP_VERSION`], then one entry per `PATH`, each ended by a
/// NUL (which no `PATH` holds): `seconds nanoseconds PATH`, where the
/// newest entry, written with the file, says `0 0` and its time is the
/// file's modification time; the others keep the time they had.
#[derive(Debug, Default)]
struct Stamp {
    entries: Vec<(FileTime, Vec<u8>)>,
}

impl Stamp {
    /// The stamp in `file` (opened once: its time from the descriptor,
    /// then what it holds); empty when it cannot be read or parsed.
    fn read(checked: &Path) -> Stamp {
        let Ok(mut file) = std::fs::File::open(checked) else {
            return Stamp::default();
        };
        let Ok(meta) = file.metadata() else {
            return Stamp::default();
        };
        if meta.len() > STAMP_MAX {
            return Stamp::default();
        }
        // Exactly the length the metadata gave: `read_to_end` would ask
        // for the metadata again.
        let mut held = vec![0; usize::try_from(meta.len()).unwrap_or(0)];
        if std::io::Read::read_exact(&mut file, &mut held).is_err() {
            return Stamp::default();
        }
        Stamp::parse(&held, (meta.mtime(), meta.mtime_nsec())).unwrap_or_default()
    }

    /// The entries of a stamp's bytes, `written` being its file's time.
    fn parse(held: &[u8], written: FileTime) -> Option<Stamp> {
        let body = held.strip_prefix(STAMP_VERSION)?;
        let mut entries = Vec::new();
        for entry in body.split(|b| *b == 0) {
            if entry.is_empty() {
                continue;
            }
            let mut fields = entry.splitn(3, |b| *b == b' ');
            let number = |field: Option<&[u8]>| -> Option<i64> {
                std::str::from_utf8(field?).ok()?.parse().ok()
            };
            let (secs, nsecs) = (number(fields.next())?, number(fields.next())?);
            let path = fields.next()?.to_vec();
            let time = if entries.is_empty() && (secs, nsecs) == (0, 0) {
                written
            } else {
                (secs, nsecs)
            };
            entries.push((time, path));
        }
        Some(Stamp { entries })
    }

    /// When the toolchains were last looked up with `path_var`, if ever.
    fn looked_up(&self, path_var: &OsStr) -> Option<FileTime> {
        self.entries
            .iter()
            .find(|(_, held)| held.as_slice() == path_var.as_bytes())
            .map(|(time, _)| *time)
    }

    /// The bytes of the stamp written now for a look-up with `path_var`:
    /// it first (its time the file's), then the other `PATH`s this one
    /// held that are still worth keeping: not looked up before the cache
    /// home last changed, since those are stale already.
    fn written_for(&self, path_var: &OsStr, cache_home_changed: Option<FileTime>) -> Vec<u8> {
        let mut out = STAMP_VERSION.to_vec();
        out.extend_from_slice(b"0 0 ");
        out.extend_from_slice(path_var.as_bytes());
        out.push(0);
        let kept = self
            .entries
            .iter()
            .filter(|(time, held)| {
                held.as_slice() != path_var.as_bytes()
                    && cache_home_changed.is_none_or(|changed| changed < *time)
            })
            .take(STAMP_PATHS - 1);
        for ((secs, nsecs), held) in kept {
            let entry = [format!("{secs} {nsecs} ").as_bytes(), held, &[0]].concat();
            if (out.len() + entry.len()) as u64 > STAMP_MAX {
                break;
            }
            out.extend_from_slice(&entry);
        }
        out
    }
}

/// The change time of a file, from its metadata.
fn ctime(m: &std::fs::Metadata) -> FileTime {
    (m.ctime(), m.ctime_nsec())
}

/// Whether the toolchains were looked up with `path_var` after anything
/// could have changed the answer: after the cache home last changed (a
/// cache directory made or removed) and after every `PATH` directory last
/// changed (a command installed). Change times, not modification times: an
/// archive or a package manager can set a directory's modification time
/// back, never its change time. A change in the same clock tick as the
/// look-up counts as later: the kernel stamps both from its coarse clock (a
/// tick of up to 10 ms), so a cache directory removed just after a run can
/// carry the very time the run gave its stamp.
///
/// The stamp holds the `PATH` of each look-up: a toolchain found only
/// through a `PATH` entry added since (a new shell, `nix develop`) needs its
/// cache made, however old that entry's directory is.
fn looked_up_since(
    stamp: &Stamp,
    cache_home: Option<&std::fs::Metadata>,
    path_var: &OsStr,
) -> bool {
    let Some(cache_home) = cache_home else {
        return false; // made just now
    };
    let Some(looked_up) = stamp.looked_up(path_var) else {
        return false;
    };
    if ctime(cache_home) >= looked_up {
        return false;
    }
    crate::environment::path_dirs(path_var)
        .iter()
        .all(|dir| std::fs::metadata(dir).map_or(true, |m| ctime(&m) < looked_up))
}

/// [`create_missing_caches`] with the environment given and the home
/// directory and cache list already read.
pub(crate) fn create_missing_caches_in(
    env: &dyn Fn(&str) -> Option<OsString>,
    inputs: &Inputs,
) -> Vec<PathBuf> {
    let var = |name: &'static str| variable(env, name);
    let (home, judge) = (&inputs.home, &inputs.judge);
    let path_var = env("PATH").unwrap_or_default();
    // Searched only when the stamp is stale or a store is missing, each
    // tool once (four of Gradle's stores ask for `gradle`, five of cargo's
    // for `cargo`: a dozen `stat`s a search).
    let path_dirs = std::cell::OnceCell::new();
    let searched: RefCell<Vec<(&str, bool)>> = RefCell::default();
    let on_path = |tool: &'static str| {
        if let Some((_, found)) = searched.borrow().iter().find(|(t, _)| *t == tool) {
            return *found;
        }
        let found = path_dirs
            .get_or_init(|| crate::environment::path_dirs(&path_var))
            .iter()
            .any(|dir| dir.join(tool).is_file());
        searched.borrow_mut().push((tool, found));
        found
    };
    let mut created = Vec::new();
    // The caches' parents repeat (`~/.cargo` for five roots, `~/.gradle`
    // for three): each is asked once, and asked again once anything is made.
    let dirs: RefCell<Vec<(PathBuf, bool)>> = RefCell::default();
    let is_dir = |path: &Path| {
        if let Some((_, known)) = dirs.borrow().iter().find(|(p, _)| p == path) {
            return *known;
        }
        let answer = path.is_dir();
        dirs.borrow_mut().push((path.to_path_buf(), answer));
        answer
    };
    // Beneath the home directory (or `/`), through no symlink: an earlier
    // confined command may have left one where a cache is made.
    let anchor = home.clone();
    let mut make = |path: &Path| {
        let made = if is_lock_file(path) {
            beneath::make_file(path, anchor.as_deref())
        } else {
            beneath::make_dir(path, anchor.as_deref())
        };
        if made.is_ok_and(|made| made) {
            dirs.borrow_mut().clear();
            created.push(path.to_path_buf());
        }
    };
    let missing = |path: &Path| std::fs::symlink_metadata(path).is_err();

    let mut stamp = None;
    if let Some((dir, variable)) = inputs.cache_home.clone() {
        // One lstat says whether it is there and a directory; only a
        // variable's value or a symlink needs judging.
        let link = std::fs::symlink_metadata(&dir).ok();
        let symlink = link.as_ref().is_some_and(|l| l.file_type().is_symlink());
        let meta = if symlink {
            std::fs::metadata(&dir).ok()
        } else {
            link
        };
        if meta.is_none() && dir.parent().is_some_and(Path::is_dir) {
            make(&dir);
        }
        let wide = (symlink || variable.is_some())
            && meta.as_ref().is_some_and(|m| {
                judge
                    .covers_as((m.dev(), m.ino()), variable.is_some())
                    .is_some()
            });
        let usable = match &meta {
            Some(m) => m.is_dir() && !wide,
            None => dir.is_dir(), // made just now
        };
        let checked = dir.join(TOOLCHAINS_CHECKED);
        let held = if usable {
            Stamp::read(&checked)
        } else {
            Stamp::default()
        };
        if usable && !looked_up_since(&held, meta.as_ref(), &path_var) {
            for (tool, sub, _) in TOOLCHAIN_CACHES {
                let path = dir.join(sub);
                if missing(&path) && on_path(tool) {
                    make(&path);
                }
            }
            stamp = Some((checked, held));
        }
    }
    if let Some(npm) = var("npm_config_cache")
        .map(|v| v.value)
        .or_else(|| home.as_ref().map(|h| h.join(".npm")))
    {
        if stamp.is_some() && missing(&npm) && npm.parent().is_some_and(is_dir) && on_path("npm") {
            make(&npm);
        }
    }
    // pnpm's store, where pnpm would make it: the confined command is
    // told its path (crate::environment), so that pnpm does not look for
    // one it can link into and fall back to the project's mount root.
    // Stores under the home directory whose parents a fresh home lacks:
    // made with the levels above them (the directories the tool itself
    // would make) when the tool is installed. pnpm's, whose path the
    // confined command is told (crate::environment) so that pnpm does not
    // fall back to a store in the project, also where corepack is, since
    // `corepack pnpm` runs a pnpm on no PATH; bun's, which a bun installed
    // by its script (`~/.bun/bin`) has not made yet.
    let bun_cache = match var("BUN_INSTALL_CACHE_DIR") {
        Some(v) => Some(v.value),
        None => var("BUN_INSTALL")
            .map(|v| v.value)
            .or_else(|| home.as_ref().map(|h| h.join(".bun")))
            .map(|b| b.join("install/cache")),
    };
    // Gradle's and Maven's, which a build makes with their parents on its
    // first run (`Failed to create parent directory ~/.gradle`, measured with
    // Gradle 4.4.1 in a fresh home, when only the roots below are granted).
    let gradle_home = var("GRADLE_USER_HOME")
        .map(|v| v.value)
        .or_else(|| home.as_ref().map(|h| h.join(".gradle")));
    let gradle = |rel: &str| gradle_home.as_ref().map(|g| g.join(rel));
    // And Go's module cache and checksum database, which the first build
    // with a module dependency makes with `~/go` (measured with go 1.19:
    // `could not create module cache: mkdir ~/go: permission denied`).
    let gopath = var("GOPATH")
        .and_then(|v| env_first_path(Some(v.value)))
        .or_else(|| home.as_ref().map(|h| h.join("go")));
    let gomodcache = var("GOMODCACHE")
        .map(|v| v.value)
        .or_else(|| gopath.as_ref().map(|g| g.join("pkg/mod")));
    let gosumdb = gopath.map(|g| g.join("pkg/sumdb"));
    // And cargo's registry, git checkouts and lock files, where no cargo
    // home exists yet (Debian's cargo, or rustup with its cargo home
    // elsewhere): `failed to create directory ~/.cargo/registry/cache/…`.
    // Never for a cargo home that is the home directory or above it, which
    // the policy skips.
    let cargo_home = var("CARGO_HOME")
        .map(|v| v.value)
        .or_else(|| home.as_ref().map(|h| h.join(".cargo")))
        .filter(|c| home.as_ref().is_none_or(|h| !h.starts_with(c)));
    let cargo = |rel: &str| cargo_home.as_ref().map(|c| c.join(rel));
    let mut stores: Vec<(Option<PathBuf>, &[&str])> = vec![
        (
            crate::environment::pnpm_store(env, home.as_deref()),
            &["pnpm", "corepack"],
        ),
        (bun_cache, &["bun"]),
        (gradle("caches"), &["gradle"]),
        (gradle("wrapper/dists"), &["gradle"]),
        (gradle("daemon"), &["gradle"]),
        (gradle("native"), &["gradle"]),
        (home.as_ref().map(|h| h.join(".m2/repository")), &["mvn"]),
        (gomodcache, &["go"]),
        (gosumdb, &["go"]),
        (cargo("registry"), &["cargo"]),
        (cargo("git"), &["cargo"]),
    ];
    stores.extend(
        CARGO_LOCK_FILES
            .iter()
            .map(|lock| (cargo(lock), &["cargo"][..])),
    );
    // The build tools the project runs through a wrapper script of its own,
    // with no command on PATH: looked for once, at the first store.
    let wrapped = std::cell::OnceCell::new();
    let wrapped = || -> &Vec<&str> {
        wrapped.get_or_init(|| {
            let project = inputs.judge.project();
            WRAPPERS
                .iter()
                .filter(|(script, _)| project.is_some_and(|p| p.join(script).is_file()))
                .map(|(_, tool)| *tool)
                .collect()
        })
    };
    for (store, tools) in stores {
        let (Some(store), Some(home)) = (store, home.as_deref()) else {
            continue;
        };
        // A tool on PATH is looked for only with the stamp stale; a
        // project's wrapper script every time (a `stat` each, made above),
        // as the stamp says nothing of the project.
        let wrapper = tools.iter().any(|t| wrapped().contains(t));
        let installed = wrapper || (stamp.is_some() && tools.iter().any(|t| on_path(t)));
        if !installed || !store.starts_with(home) || !missing(&store) {
            continue;
        }
        let mut levels: Vec<&Path> = store
            .ancestors()
            .take_while(|a| *a != home && missing(a))
            .collect();
        levels.reverse();
        for level in levels {
            make(level);
        }
    }
    if let Some((checked, held)) = stamp {
        // After the directories are made, its time the kernel's, from the
        // same clock as the change times it is compared with (a time from
        // `SystemTime::now` can be later than a change made after it).
        let cache_home_changed = checked
            .parent()
            .and_then(|dir| std::fs::metadata(dir).ok())
            .map(|m| ctime(&m));
        let bytes = held.written_for(&path_var, cache_home_changed);
        let _ = checked
            .parent()
            .zip(checked.file_name())
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))
            .and_then(|(dir, name)| {
                beneath::open_dir(dir, home.as_deref())?.write_file(name, 0o666)
            })
            .and_then(|mut f| {
                f.set_len(0)?;
                std::io::Write::write_all(&mut f, &bytes)
            });
    }
    // The root itself first: it is there on almost every run, one `lstat`
    // each, its parent asked only for one that is missing.
    for root in &inputs.caches {
        let parent = root.path.parent();
        if parent != home.as_deref() && missing(&root.path) && parent.is_some_and(is_dir) {
            make(&root.path);
        }
    }
    created
}

/// Cargo's lock files, which are files rather than directories.
const CARGO_LOCK_FILES: [&str; 3] = [".package-cache", ".package-cache-mutate", ".global-cache"];

fn is_lock_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| CARGO_LOCK_FILES.iter().any(|lock| name == *lock))
}

/// [`default_writable`] with the environment and home directory given,
/// so that tests need not mutate the process environment.
pub(crate) fn writable_for(
    project_root: &Path,
    state_dir: Option<&Path>,
    extra: &[PathBuf],
    env: &dyn Fn(&str) -> Option<OsString>,
    home: Option<PathBuf>,
) -> Result<Vec<Root>, PolicyError> {
    let inputs = Inputs::read(env, home, Some(project_root));
    writable_from(project_root, state_dir, extra, env, &inputs).map(|(roots, _git)| roots)
}

/// [`default_writable`] from inputs already read, with the project's git
/// layout it read, for the tripwire to watch the same directories.
pub(crate) fn writable_from(
    project_root: &Path,
    state_dir: Option<&Path>,
    extra: &[PathBuf],
    env: &dyn Fn(&str) -> Option<OsString>,
    inputs: &Inputs,
) -> Result<(Vec<Root>, GitLayout), PolicyError> {
    require_directory(project_root, "project root")?;
    let mut roots = vec![Root::new(project_root, Origin::Project)];
    if let Some(state) = state_dir {
        require_directory(state, "state directory")?;
        roots.push(Root::new(state, Origin::State));
    }
    let git = read_layout(project_root)?;
    if let Some(asked) = &git.gitdir_asked {
        inputs.judge.remember_gitdir(asked.clone());
    }
    roots.extend(git.roots.iter().cloned());

    let var = |name: &'static str| variable(env, name);
    roots.extend(
        var("TMPDIR").map(|v| Root::new(v.value.clone(), Origin::Temp { variable: Some(v) })),
    );
    roots.extend(
        TEMP.iter()
            .map(|t| Root::new(*t, Origin::Temp { variable: None })),
    );
    roots.extend(DEVICES.iter().map(|d| Root::new(*d, Origin::Device)));
    if let Some((dir, variable)) = inputs.cache_home.clone() {
        roots.extend(cache_home_subdirs(
            &dir,
            &Origin::Cache { variable },
            &inputs.judge,
        ));
    }
    roots.extend(inputs.caches.iter().cloned());

    for path in extra {
        require_absolute(path, "extra writable root")?;
        roots.push(Root::new(path.clone(), Origin::Extra));
    }
    Ok((dedup(roots), git))
}

/// Drops repeated paths, keeping the first position and the most
/// trustworthy origin: the caller's naming, then a fixed name, then one
/// from input. `--allow /tmp` stays the caller's, and `TMPDIR=/tmp` with a
/// home under /tmp does not cost the built-in /tmp when the variable's root
/// is skipped.
fn dedup(roots: Vec<Root>) -> Vec<Root> {
    let rank = |o: &Origin| {
        if o.is_explicit() {
            0
        } else if o.variable().is_none() && !matches!(o, Origin::Git { .. }) {
            1
        } else {
            2
        }
    };
    let mut at: std::collections::HashMap<PathBuf, usize, crate::policy::PathHash> =
        std::collections::HashMap::with_capacity_and_hasher(roots.len(), Default::default());
    let mut out: Vec<Root> = Vec::with_capacity(roots.len());
    for root in roots {
        match at.get(&root.path) {
            Some(&i) => {
                if rank(&root.origin) < rank(&out[i].origin) {
                    out[i].origin = root.origin;
                    out[i].rights = root.rights;
                }
            }
            None => {
                at.insert(root.path.clone(), out.len());
                out.push(root);
            }
        }
    }
    out
}

fn require_directory(path: &Path, what: &'static str) -> Result<(), PolicyError> {
    require_absolute(path, what)?;
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_dir() => Err(PolicyError::NotADirectory {
            what,
            path: path.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// Where the XDG cache home is, and which variable said so.
fn cache_home(
    var: &dyn Fn(&'static str) -> Option<Variable>,
    home: Option<&Path>,
) -> Option<(PathBuf, Option<Variable>)> {
    match var("XDG_CACHE_HOME") {
        Some(v) => Some((v.value.clone(), Some(v))),
        None => home.map(|h| (h.join(".cache"), None)),
    }
}

/// The XDG cache home's subdirectories: every directory in it now (a
/// symlink too, when it leads to a directory), never the cache home itself,
/// whose own files are sourced by shells (powerlevel10k's instant prompt).
/// A cache home that resolves to the home directory or above is listed
/// itself, so that [`Policy`](crate::Policy) skips it and says why, rather
/// than enumerated: its "subdirectories" would be `~/.ssh` and `~/src`.
fn cache_home_subdirs(dir: &Path, origin: &Origin, judge: &Judge) -> Vec<Root> {
    if judge
        .covers_path_as(dir, origin.variable().is_some())
        .is_some()
    {
        return vec![Root::new(dir, origin.clone())];
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        // Missing (or unreadable): nothing to grant. Not the cache home
        // itself, which create_missing_caches may make before apply.
        return Vec::new();
    };
    let mut subdirs: Vec<Root> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_type().is_ok_and(|t| {
                t.is_dir()
                    || (t.is_symlink() && std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
            })
        })
        .map(|e| Root::new(e.path(), origin.clone()).with_rights(cache_home_rights(&e.file_name())))
        .collect();
    // read_dir's order is the filesystem's: sort, so reports are stable.
    subdirs.sort_by(|a, b| a.path.cmp(&b.path));
    subdirs
}

/// Toolchain caches other than the XDG cache home's directories, under
/// `home`, with each toolchain's environment override taking precedence.
fn caches(
    var: &dyn Fn(&'static str) -> Option<Variable>,
    home: Option<&Path>,
    judge: &Judge,
) -> Vec<Root> {
    let mut out = Vec::new();
    let under_home = |rel: &str| home.map(|h| h.join(rel));
    let by_default = Origin::Cache { variable: None };
    let cache = |v: Option<Variable>| Origin::Cache { variable: v };
    // A directory from a variable, else under the home directory.
    let or_home = |name: &'static str, rel: &str| match var(name) {
        Some(v) => Some((v.value.clone(), cache(Some(v)))),
        None => under_home(rel).map(|p| (p, by_default.clone())),
    };

    // Rights per cache, as in TOOLCHAIN_CACHES: without MAKE_SYM where
    // the toolchain never puts a symlink there (measured with
    // `find DIR -type l` after it ran in a fresh home, or read in its
    // source); every right where it does or nobody has looked.
    let no_symlinks = |root: Root| root.with_rights(Rights::NoSymlinks);

    // Go. GOCACHE=off disables the cache; a relative value is rejected by go.
    // Build cache: regular files only (measured, as go-build above).
    out.extend(var("GOCACHE").map(|v| no_symlinks(Root::new(v.value.clone(), cache(Some(v))))));
    let gopath = match var("GOPATH") {
        Some(v) => env_first_path(Some(v.value.clone())).map(|g| (g, cache(Some(v)))),
        None => under_home("go").map(|g| (g, by_default.clone())),
    };
    // Module cache and checksum database: module zips hold no symlinks
    // (golang.org/x/mod/zip refuses them) and go extracts into a temporary
    // directory beside the target (measured: none after go get and go test).
    match var("GOMODCACHE") {
        Some(v) => out.push(no_symlinks(Root::new(v.value.clone(), cache(Some(v))))),
        None => out.extend(
            gopath
                .clone()
                .map(|(g, o)| no_symlinks(Root::new(g.join("pkg/mod"), o))),
        ),
    }
    out.extend(gopath.map(|(g, o)| no_symlinks(Root::new(g.join("pkg/sumdb"), o))));

    // Cargo: downloaded sources and cargo's lock files, never bin/ or config.
    // CARGO_HOME=$HOME would make them `~/registry` and `~/git`, where many
    // people keep their own repositories: such a cargo home is listed
    // itself, and skipped, instead.
    if let Some((cargo, origin)) = or_home("CARGO_HOME", ".cargo") {
        if judge
            .covers_path_as(&cargo, origin.variable().is_some())
            .is_some()
        {
            out.push(Root::new(cargo, origin));
        } else {
            // index/, cache/ (.crate files) and src/: cargo package stores a
            // symlink's target as a file, so a published crate holds none
            // (measured: none after cargo build with a dependency).
            out.push(no_symlinks(Root::new(
                cargo.join("registry"),
                origin.clone(),
            )));
            // git/checkouts/ are working trees of git dependencies, which
            // keep the repository's symlinks: every right (an open route,
            // doc/security.md).
            out.push(Root::new(cargo.join("git"), origin.clone()));
            out.extend(
                CARGO_LOCK_FILES
                    .iter()
                    .map(|lock| Root::new(cargo.join(lock), origin.clone())),
            );
        }
    }

    // JavaScript package managers' stores. npm's _cacache/ holds regular
    // files only; _npx/ holds the packages npx installs, node_modules/.bin
    // symlinks included (measured: npm install, npm run, npx), so it is a
    // root of its own with every right (an open route, doc/security.md).
    if let Some((npm, origin)) = or_home("npm_config_cache", ".npm") {
        out.push(Root::new(npm.join("_npx"), origin.clone()));
        out.push(no_symlinks(Root::new(npm, origin)));
    }
    out.extend(match var("BUN_INSTALL_CACHE_DIR") {
        Some(v) => Some(Root::new(v.value.clone(), cache(Some(v)))),
        None => or_home("BUN_INSTALL", ".bun").map(|(b, o)| Root::new(b.join("install/cache"), o)),
    });
    // pnpm: `$PNPM_HOME/store` or the XDG data home's `pnpm/store`
    // (environment::pnpm_store), never PNPM_HOME itself: `pnpm setup` puts
    // it on PATH as the directory of global commands.
    out.extend(match (var("npm_config_store_dir"), var("PNPM_HOME")) {
        (Some(v), _) => Some(Root::new(v.value.clone(), cache(Some(v)))),
        (None, Some(v)) => Some(Root::new(v.value.join("store"), cache(Some(v)))),
        (None, None) => or_home("XDG_DATA_HOME", ".local/share")
            .map(|(d, o)| Root::new(d.join("pnpm/store"), o)),
    });
    out.extend(var("YARN_CACHE_FOLDER").map(|v| Root::new(v.value.clone(), cache(Some(v)))));
    out.extend(under_home(".yarn/berry/cache").map(|p| Root::new(p, by_default.clone())));

    // JVM: Maven's local repository, Gradle's caches (not init.d or
    // gradle.properties, which run code). Not measured: every right.
    out.extend(under_home(".m2/repository").map(|p| Root::new(p, by_default.clone())));
    if let Some((gradle, origin)) = or_home("GRADLE_USER_HOME", ".gradle") {
        for rel in ["caches", "wrapper/dists", "daemon", "native"] {
            out.push(Root::new(gradle.join(rel), origin.clone()));
        }
    }

    // Caches moved out of the XDG cache home by their own variables (each
    // as its tool documents it: the TOOLCHAIN_CACHES notes), with the
    // rights of their row there.
    for (name, sub) in [
        ("PIP_CACHE_DIR", "pip"),
        ("UV_CACHE_DIR", "uv"),
        ("CCACHE_DIR", "ccache"),
        ("SCCACHE_DIR", "sccache"),
        ("DENO_DIR", "deno"),
        ("COREPACK_HOME", "node"),
        ("PLAYWRIGHT_BROWSERS_PATH", "ms-playwright"),
        ("PUPPETEER_CACHE_DIR", "puppeteer"),
        ("PIPX_CACHE_DIR", "pipx"),
        ("BAZELISK_HOME", "bazelisk"),
        ("ZIG_GLOBAL_CACHE_DIR", "zig"),
        ("PRE_COMMIT_HOME", "pre-commit"),
        ("POETRY_CACHE_DIR", "pypoetry"),
    ] {
        out.extend(var(name).map(|v| {
            Root::new(v.value.clone(), cache(Some(v))).with_rights(cache_home_rights(sub.as_ref()))
        }));
    }
    out
}

/// The first entry of a `:`-separated list such as `GOPATH`, if absolute.
fn env_first_path(list: Option<PathBuf>) -> Option<PathBuf> {
    let list = list?;
    let first = list.as_os_str().as_bytes().split(|b| *b == b':').next()?;
    let first = PathBuf::from(OsStr::from_bytes(first));
    first.is_absolute().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::os::unix::ffi::OsStringExt;

    fn roots_with(vars: &[(&str, &str)], home: &str, project: &Path) -> Vec<PathBuf> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        let env = move |name: &str| map.get(name).cloned();
        writable_for(project, None, &[], &env, Some(home.into()))
            .expect("valid input")
            .into_iter()
            .map(|r| r.path)
            .collect()
    }

    #[test]
    fn environment_overrides_are_honoured() {
        let project = tempfile::tempdir().expect("tempdir");
        let roots = roots_with(
            &[
                ("GOCACHE", "/c/go"),
                ("GOPATH", "/gp:/other"),
                ("CARGO_HOME", "/ch"),
                ("XDG_CACHE_HOME", "/xc"),
                ("TMPDIR", "/scratch"),
                ("GOMODCACHE", "relative/ignored"),
            ],
            "/home/u",
            project.path(),
        );
        for want in [
            "/c/go",
            "/gp/pkg/mod",
            "/gp/pkg/sumdb",
            "/ch/registry",
            "/ch/git",
            "/ch/.package-cache",
            "/scratch",
        ] {
            assert!(
                roots.contains(&PathBuf::from(want)),
                "{want} missing from {roots:?}"
            );
        }
        // The cache home is granted by the directories in it, never whole.
        for never in [
            "/home/u/.cache",
            "/xc",
            "/home/u/.cargo/registry",
            "/ch/bin",
            "/ch",
        ] {
            assert!(
                !roots.contains(&PathBuf::from(never)),
                "{never} in {roots:?}"
            );
        }
        assert!(roots.iter().all(|r| r.is_absolute()));
    }

    #[test]
    fn defaults_are_caches_not_bin_or_config() {
        let project = tempfile::tempdir().expect("tempdir");
        let roots = roots_with(&[], "/home/u", project.path());
        assert!(!roots.contains(&PathBuf::from("/home/u/.cache")));
        for want in [
            "/home/u/go/pkg/mod",
            "/home/u/.cargo/registry",
            "/dev/shm",
            "/dev/null",
        ] {
            assert!(roots.contains(&PathBuf::from(want)), "{want} missing");
        }
        for r in &roots {
            let s = r.to_string_lossy();
            assert!(
                !s.ends_with("/bin") && !s.contains("/.config") && !s.ends_with(".cargo"),
                "{s} is not a cache"
            );
        }
        let mut dedup = roots.clone();
        dedup.dedup();
        assert_eq!(dedup.len(), roots.len());
    }

    /// A home with an empty cache home, and a `PATH` of one directory
    /// holding (empty) commands named `tools`.
    fn home_with_tools(tools: &[&str]) -> (tempfile::TempDir, tempfile::TempDir, OsString) {
        let home = tempfile::tempdir().expect("tempdir");
        let bin = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(home.path().join(".cache")).expect("mkdir");
        for tool in tools {
            std::fs::write(bin.path().join(tool), "").expect("tool");
        }
        let path = bin.path().into();
        (home, bin, path)
    }

    #[test]
    fn stores_are_made_with_their_parents_only_for_installed_tools() {
        let (home, _bin, path) = home_with_tools(&["bun"]);
        let env = move |name: &str| (name == "PATH").then(|| path.clone());
        let made =
            create_missing_caches_in(&env, &Inputs::read(&env, Some(home.path().into()), None));
        let bun = home.path().join(".bun/install/cache");
        assert!(bun.is_dir(), "{made:?}");
        assert!(made.contains(&bun));
        // No pnpm and no corepack on PATH: no pnpm store.
        assert!(!home.path().join(".local").exists(), "{made:?}");
        // No gradle, no mvn, no go, no cargo: no ~/.gradle, ~/.m2, ~/go or
        // ~/.cargo.
        assert!(!home.path().join(".gradle").exists(), "{made:?}");
        assert!(!home.path().join(".m2").exists(), "{made:?}");
        assert!(!home.path().join("go").exists(), "{made:?}");
        assert!(!home.path().join(".cargo").exists(), "{made:?}");
    }

    #[test]
    fn gradle_s_maven_s_go_s_and_cargo_s_roots_are_made_where_they_are_installed() {
        let (home, _bin, path) = home_with_tools(&["gradle", "mvn", "go", "cargo"]);
        // A stamp an earlier version made (the PATH alone), newer than the
        // cache home and every PATH directory: stale all the same, since
        // that version made none of these.
        std::fs::write(
            home.path().join(".cache").join(TOOLCHAINS_CHECKED),
            path.as_encoded_bytes(),
        )
        .expect("old stamp");
        let env = move |name: &str| (name == "PATH").then(|| path.clone());
        let inputs = Inputs::read(&env, Some(home.path().into()), None);
        let made = create_missing_caches_in(&env, &inputs);
        // Each root the policy grants (writable_from), made with ~/.gradle.
        for rel in [
            ".gradle/caches",
            ".gradle/wrapper/dists",
            ".gradle/daemon",
            ".gradle/native",
            ".m2/repository",
            "go/pkg/mod",
            "go/pkg/sumdb",
            ".cargo/registry",
            ".cargo/git",
        ] {
            let dir = home.path().join(rel);
            assert!(dir.is_dir(), "{rel}: {made:?}");
            assert!(made.contains(&dir), "{rel}: {made:?}");
        }
        // ~/.gradle itself is made, not granted: its init.d and
        // gradle.properties run code.
        let project = tempfile::tempdir().expect("tempdir");
        let roots = roots_with(&[], &home.path().to_string_lossy(), project.path());
        assert!(!roots.contains(&home.path().join(".gradle")), "{roots:?}");
        assert!(
            roots.contains(&home.path().join(".gradle/caches")),
            "{roots:?}"
        );
        // cargo's lock files are files.
        assert!(
            home.path().join(".cargo/.package-cache").is_file(),
            "{made:?}"
        );
        // Nor ~/go, whose bin/ `go install` writes, nor ~/.cargo, whose
        // bin/ `cargo install` writes.
        assert!(!roots.contains(&home.path().join(".cargo")), "{roots:?}");
        assert!(!roots.contains(&home.path().join("go")), "{roots:?}");
        assert!(roots.contains(&home.path().join("go/pkg/mod")), "{roots:?}");
    }

    #[test]
    fn a_project_s_gradle_and_maven_wrappers_get_their_roots_made_whatever_the_stamp() {
        let (home, _bin, path) = home_with_tools(&[]);
        let project = tempfile::tempdir().expect("tempdir");
        let env = move |name: &str| (name == "PATH").then(|| path.clone());
        // A first run stamps the toolchains: nothing for Gradle or Maven yet.
        let plain = Inputs::read(&env, Some(home.path().into()), Some(project.path()));
        create_missing_caches_in(&env, &plain);
        assert!(!home.path().join(".gradle").exists());
        assert!(!home.path().join(".m2").exists());
        // Then the project gets its wrappers: made, the stamp fresh or not.
        std::fs::write(project.path().join("gradlew"), "").expect("gradlew");
        std::fs::write(project.path().join("mvnw"), "").expect("mvnw");
        let wrapped = Inputs::read(&env, Some(home.path().into()), Some(project.path()));
        let made = create_missing_caches_in(&env, &wrapped);
        for rel in [".gradle/caches", ".gradle/wrapper/dists", ".m2/repository"] {
            assert!(home.path().join(rel).is_dir(), "{rel}: {made:?}");
        }
    }

    /// The `PATH`s a stamp holds, newest first.
    fn stamped_paths(home: &Path) -> Vec<OsString> {
        Stamp::read(&home.join(".cache").join(TOOLCHAINS_CHECKED))
            .entries
            .into_iter()
            .map(|(_, path)| OsString::from_vec(path))
            .collect()
    }

    /// Past the kernel's coarse clock tick (up to 10 ms), so that a change
    /// made now is later than a stamp written before.
    fn next_tick() {
        std::thread::sleep(std::time::Duration::from_millis(25));
    }

    /// [`create_missing_caches_in`] for `home` with `path` as `PATH`.
    fn make_caches_with(home: &Path, path: &OsStr) -> Vec<PathBuf> {
        let path = path.to_os_string();
        let env = move |name: &str| (name == "PATH").then(|| path.clone());
        create_missing_caches_in(&env, &Inputs::read(&env, Some(home.into()), None))
    }

    /// A home whose stamp holds two `PATH`s, both looked up since the cache
    /// home last changed: `b`, then `a` (with go, whose cache the first run
    /// made: the cache home then newer than its own stamp, which one more
    /// look-up settles).
    fn home_stamped_with_two_paths() -> (
        tempfile::TempDir,
        [tempfile::TempDir; 2],
        OsString,
        OsString,
    ) {
        let (home, bin, a) = home_with_tools(&["go"]);
        let other = tempfile::tempdir().expect("tempdir");
        let b: OsString = other.path().into();
        for path in [&a, &a, &b] {
            make_caches_with(home.path(), path);
            next_tick();
        }
        (home, [bin, other], a, b)
    }

    #[test]
    fn the_stamp_keeps_each_path_s_look_up_so_alternating_paths_look_up_once_each() {
        let (home, _bins, a, b) = home_stamped_with_two_paths();
        let run = |path: &OsString| make_caches_with(home.path(), path);
        assert_eq!(stamped_paths(home.path()), [b.clone(), a.clone()]);
        // Each PATH's look-up is still good: nothing is looked up again, so
        // the stamp is not rewritten (the newest stays first).
        let stamp = home.path().join(".cache").join(TOOLCHAINS_CHECKED);
        let written = std::fs::metadata(&stamp)
            .expect("stamp")
            .modified()
            .expect("mtime");
        run(&a);
        run(&b);
        assert_eq!(stamped_paths(home.path()), [b.clone(), a.clone()]);
        let again = std::fs::metadata(&stamp)
            .expect("stamp")
            .modified()
            .expect("mtime");
        assert_eq!(written, again, "the stamp was rewritten");
        // A command installed in a's directory since its look-up: a is
        // looked up again (and goes first), b is kept.
        std::fs::write(Path::new(&a).join("cargo"), "").expect("cargo");
        run(&a);
        assert_eq!(stamped_paths(home.path()), [a.clone(), b.clone()]);
        assert!(home.path().join(".cargo/registry").is_dir());
    }

    #[test]
    fn a_cache_removed_after_a_path_s_look_up_is_made_again_with_that_path() {
        let (home, _bins, a, b) = home_stamped_with_two_paths();
        let run = |path: &OsString| make_caches_with(home.path(), path);
        // The cache home changes after both look-ups: each is stale.
        let go_build = home.path().join(".cache/go-build");
        std::fs::remove_dir(&go_build).expect("rmdir");
        run(&b);
        assert!(!go_build.exists(), "made for a PATH without go");
        // a's entry was dropped with b's look-up (older than the change).
        assert_eq!(stamped_paths(home.path()), std::slice::from_ref(&b));
        run(&a);
        assert!(go_build.is_dir(), "not made again for the PATH with go");
    }

    #[test]
    fn the_stamp_keeps_at_most_four_paths_and_reads_nothing_from_a_damaged_one() {
        let stamp = Stamp {
            entries: (0..6)
                .map(|i| ((i64::from(100 - i), 7), format!("/p{i}").into_bytes()))
                .collect(),
        };
        let written = stamp.written_for(OsStr::new("/new"), Some((1, 0)));
        let back = Stamp::parse(&written, (500, 1)).expect("parsed");
        let paths: Vec<&[u8]> = back.entries.iter().map(|(_, p)| p.as_slice()).collect();
        assert_eq!(paths, [&b"/new"[..], b"/p0", b"/p1", b"/p2"]);
        // The newest takes the file's time, the others keep theirs.
        assert_eq!(back.entries[0].0, (500, 1));
        assert_eq!(back.entries[1].0, (100, 7));
        assert_eq!(back.looked_up(OsStr::new("/p2")), Some((98, 7)));
        assert_eq!(back.looked_up(OsStr::new("/p3")), None);
        // Entries looked up before the cache home changed are left out.
        let fresh = stamp.written_for(OsStr::new("/new"), Some((99, 10)));
        let fresh = Stamp::parse(&fresh, (500, 1)).expect("parsed");
        assert_eq!(fresh.entries.len(), 2, "{fresh:?}");
        // An earlier version's stamp, a bad number, a missing field: nothing.
        for bad in [&b"3\n/usr/bin"[..], b"4\nx 0 /usr/bin\0", b"4\n12\0", b""] {
            assert!(
                Stamp::parse(bad, (1, 1)).is_none_or(|s| s.entries.is_empty()),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_cargo_home_that_is_the_home_directory_gets_nothing_made() {
        let (home, _bin, path) = home_with_tools(&["cargo"]);
        let cargo_home: OsString = home.path().into();
        let env = move |name: &str| match name {
            "PATH" => Some(path.clone()),
            "CARGO_HOME" => Some(cargo_home.clone()),
            _ => None,
        };
        let made =
            create_missing_caches_in(&env, &Inputs::read(&env, Some(home.path().into()), None));
        for name in ["registry", "git", ".package-cache", ".cargo"] {
            assert!(!home.path().join(name).exists(), "{name}: {made:?}");
        }
    }

    #[test]
    fn a_repeated_path_keeps_the_most_trustworthy_origin() {
        let project = tempfile::tempdir().expect("tempdir");
        let map: HashMap<String, OsString> = [("TMPDIR", "/tmp"), ("GOCACHE", "/opt/c")]
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        let env = move |name: &str| map.get(name).cloned();
        let roots = writable_for(
            project.path(),
            None,
            &[PathBuf::from("/opt/c")],
            &env,
            Some("/home/u".into()),
        )
        .expect("valid input");
        let origin = |p: &str| {
            let found: Vec<&Root> = roots.iter().filter(|r| r.path == Path::new(p)).collect();
            assert_eq!(found.len(), 1, "{p}: {roots:?}");
            found[0].origin.clone()
        };
        assert_eq!(origin("/tmp"), Origin::Temp { variable: None });
        assert_eq!(origin("/opt/c"), Origin::Extra);
    }
}
