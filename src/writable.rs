//! The default list of writable roots for a session.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::PolicyError;
use crate::policy::require_absolute;

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

/// The set of places a session legitimately writes to.
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
///   submodule, and a worktree's `commondir`, where objects and refs are;
///   a `.git` symlink is listed as is and followed by the kernel;
/// - **temporary space**: `$TMPDIR`, `/tmp`, `/var/tmp`, `/dev/shm`;
/// - **device files** programs write: `/dev/null`, `/dev/zero`,
///   `/dev/full`, `/dev/tty`, `/dev/ptmx`, `/dev/pts`;
/// - **toolchain caches**, because the first `go test` of a session writes
///   one: the XDG cache home (`~/.cache`: go-build, pip, uv, yarn, …),
///   `GOCACHE`, `GOMODCACHE` or `$GOPATH/pkg/mod` and `pkg/sumdb`,
///   `$CARGO_HOME/registry`, `/git` and cargo's lock files, npm, Maven,
///   Gradle, bun, pnpm and yarn stores. Caches only: `~/.cargo/bin`,
///   `~/.cargo/config.toml`, `~/.config/go/env` and the like stay
///   read-only, because a writable bin or config directory would let one
///   command plant code that every later session runs;
/// - `extra`, as given.
///
/// Environment variables are honoured the way the toolchains read them; a
/// variable holding a relative path is ignored, as Go itself refuses one.
/// Symlinks are not resolved: Landlock anchors each rule to the inode a
/// path resolves to when the policy is applied, so a project root that is
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
///   not name a git directory; [`PolicyError::Io`] when one cannot be read.
///
/// # Examples
///
/// ```
/// use std::path::Path;
/// use strument_sandbox::default_writable;
///
/// let project = tempfile::tempdir()?;
/// let roots = default_writable(project.path(), None, &["/opt/scratch".into()])?;
/// assert_eq!(roots[0], project.path());
/// assert!(roots.iter().any(|r| r == Path::new("/tmp")));
/// assert!(roots.iter().all(|r| !r.ends_with(".cargo/bin")));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn default_writable(
    project_root: &Path,
    state_dir: Option<&Path>,
    extra: &[PathBuf],
) -> Result<Vec<PathBuf>, PolicyError> {
    let env = |name: &str| std::env::var_os(name);
    writable_for(project_root, state_dir, extra, &env, dirs::home_dir())
}

/// Creates the toolchain caches of [`default_writable`] that do not exist
/// yet but whose parent directory does, and returns the paths it created.
///
/// A root must exist when the policy is applied to be writable at all, and
/// a cache appears the first time its toolchain runs: on a fresh machine
/// the first confined `go test` would be refused `~/.cache/go-build`. Call
/// this before [`Policy::apply`](crate::Policy::apply) to avoid that. Only
/// directories whose parent exists are made (`~/.cache`, and
/// `~/.cargo/registry` when `~/.cargo` exists), plus cargo's empty lock
/// files, and nothing else directly in the home directory, so a machine
/// without a toolchain gains nothing of it (npm makes `~/.npm` itself). Failures
/// are not errors: the policy report lists what stays missing.
///
/// # Examples
///
/// ```no_run
/// let created = strument_sandbox::create_missing_caches();
/// for path in &created {
///     eprintln!("created {}", path.display());
/// }
/// ```
#[must_use]
pub fn create_missing_caches() -> Vec<PathBuf> {
    let env = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let home = dirs::home_dir().filter(|h| h.is_absolute());
    let mut created = Vec::new();
    let caches = caches(&env, home.as_deref());
    // The XDG cache home is the first entry; it is the only one that may be
    // made directly in the home directory (no `~/.npm` on a machine without npm).
    for (i, path) in caches.iter().enumerate() {
        let parent = path.parent();
        let wanted = parent.is_some_and(Path::is_dir) && (i == 0 || parent != home.as_deref());
        if !wanted || std::fs::symlink_metadata(path).is_ok() {
            continue;
        }
        let made = if is_lock_file(path) {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map(drop)
        } else {
            std::fs::create_dir(path)
        };
        if made.is_ok() {
            created.push(path.clone());
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
) -> Result<Vec<PathBuf>, PolicyError> {
    require_directory(project_root, "project root")?;
    let mut roots = vec![project_root.to_path_buf()];
    if let Some(state) = state_dir {
        require_directory(state, "state directory")?;
        roots.push(state.to_path_buf());
    }
    roots.extend(git_dirs(project_root)?);

    let var = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
    roots.extend(var("TMPDIR"));
    roots.extend(TEMP.iter().map(PathBuf::from));
    roots.extend(DEVICES.iter().map(PathBuf::from));
    roots.extend(caches(&var, home.filter(|h| h.is_absolute()).as_deref()));

    for path in extra {
        require_absolute(path, "extra writable root")?;
        roots.push(path.clone());
    }
    let mut seen = std::collections::HashSet::with_capacity(roots.len());
    roots.retain(|root| seen.insert(root.clone()));
    Ok(roots)
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

/// Toolchain caches under `home`, with each toolchain's environment
/// override taking precedence.
fn caches(var: &dyn Fn(&str) -> Option<PathBuf>, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let under_home = |rel: &str| home.map(|h| h.join(rel));
    let or_home = |name: &str, rel: &str| var(name).or_else(|| under_home(rel));

    // XDG cache home: go-build, pip, uv, yarn classic, pre-commit, zig, nix…
    out.extend(or_home("XDG_CACHE_HOME", ".cache"));

    // Go. GOCACHE=off disables the cache; a relative value is rejected by go.
    out.extend(var("GOCACHE"));
    let gopath = env_first_path(var("GOPATH")).or_else(|| under_home("go"));
    out.extend(var("GOMODCACHE").or_else(|| gopath.as_ref().map(|g| g.join("pkg/mod"))));
    out.extend(gopath.map(|g| g.join("pkg/sumdb")));

    // Cargo: downloaded sources and cargo's lock files, never bin/ or config.
    if let Some(cargo) = or_home("CARGO_HOME", ".cargo") {
        out.push(cargo.join("registry"));
        out.push(cargo.join("git"));
        out.extend(CARGO_LOCK_FILES.iter().map(|lock| cargo.join(lock)));
    }

    // JavaScript package managers' stores.
    out.extend(var("npm_config_cache").or_else(|| under_home(".npm")));
    out.extend(
        var("BUN_INSTALL_CACHE_DIR")
            .or_else(|| or_home("BUN_INSTALL", ".bun").map(|b| b.join("install/cache"))),
    );
    out.extend(
        var("npm_config_store_dir")
            .or_else(|| or_home("XDG_DATA_HOME", ".local/share").map(|d| d.join("pnpm/store"))),
    );
    out.extend(var("YARN_CACHE_FOLDER"));
    out.extend(under_home(".yarn/berry/cache"));

    // JVM: Maven's local repository, Gradle's caches (not init.d or
    // gradle.properties, which run code).
    out.extend(under_home(".m2/repository"));
    if let Some(gradle) = or_home("GRADLE_USER_HOME", ".gradle") {
        for rel in ["caches", "wrapper/dists", "daemon", "native"] {
            out.push(gradle.join(rel));
        }
    }

    // Caches moved out of the XDG cache home by their own variables.
    for name in ["PIP_CACHE_DIR", "UV_CACHE_DIR", "CCACHE_DIR", "SCCACHE_DIR"] {
        out.extend(var(name));
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

/// The git directories a project needs when they live outside it.
fn git_dirs(project_root: &Path) -> Result<Vec<PathBuf>, PolicyError> {
    let dotgit = project_root.join(".git");
    let meta = match std::fs::symlink_metadata(&dotgit) {
        Ok(meta) => meta,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            return Ok(Vec::new());
        }
        Err(source) => {
            return Err(PolicyError::Io {
                path: dotgit,
                source,
            });
        }
    };
    if meta.file_type().is_symlink() {
        // Listed as is: the kernel follows it when the rule is anchored.
        return Ok(vec![dotgit]);
    }
    if meta.is_dir() {
        return Ok(Vec::new()); // inside the project already
    }
    if !meta.is_file() {
        // A fifo, socket or device: opening or reading it could block.
        return Err(PolicyError::GitFile {
            path: dotgit,
            reason: "not a regular file".into(),
        });
    }
    let bytes = read_pointer_file(&dotgit)
        .map_err(|source| PolicyError::Io {
            path: dotgit.clone(),
            source,
        })?
        .map_err(|reason| PolicyError::GitFile {
            path: dotgit.clone(),
            reason,
        })?;
    let gitdir = project_root.join(parse_git_pointer(&bytes, "gitdir: ").map_err(|reason| {
        PolicyError::GitFile {
            path: dotgit.clone(),
            reason,
        }
    })?);
    let mut out = vec![gitdir.clone()];
    let commondir_file = gitdir.join("commondir");
    match read_pointer_file(&commondir_file) {
        Ok(Err(reason)) => {
            return Err(PolicyError::GitFile {
                path: commondir_file,
                reason,
            });
        }
        Ok(Ok(bytes)) => {
            let common = parse_git_pointer(&bytes, "").map_err(|reason| PolicyError::GitFile {
                path: commondir_file.clone(),
                reason,
            })?;
            out.push(gitdir.join(common));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // ENOTDIR: the gitdir is missing or a file; Policy reports it.
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {}
        Err(source) => {
            return Err(PolicyError::Io {
                path: commondir_file,
                source,
            });
        }
    }
    Ok(out)
}

/// The most a pointer file may hold: git writes one short line.
const MAX_POINTER_FILE: u64 = 64 * 1024;

/// Reads a pointer file git wrote (`.git`, `commondir`), refusing, with
/// the reason, anything that is not a small regular file: reading a fifo
/// would wait forever for a writer, and `/dev/zero` would never end.
pub(crate) fn read_pointer_file(path: &Path) -> io::Result<Result<Vec<u8>, String>> {
    // O_NONBLOCK: opening a fifo must not wait for a writer either.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(Err("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_POINTER_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_POINTER_FILE {
        return Ok(Err(format!(
            "over {MAX_POINTER_FILE} bytes: not a pointer file git wrote"
        )));
    }
    Ok(Ok(bytes))
}

/// Parses the one-line pointer files git writes: `.git` files
/// (`gitdir: <path>`) and `commondir` (`<path>`). The path may be relative,
/// to the directory holding the file; joining keeps an absolute one as is.
pub(crate) fn parse_git_pointer(bytes: &[u8], prefix: &str) -> Result<PathBuf, String> {
    // git strips trailing whitespace, including a CRLF written on Windows.
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let line = &bytes[..end];
    let Some(path) = line.strip_prefix(prefix.as_bytes()) else {
        return Err(format!("expected a line `{prefix}<path>`"));
    };
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path.iter().any(|b| *b == b'\n' || *b == b'\r' || *b == 0) {
        return Err("expected a single line holding a path".into());
    }
    Ok(PathBuf::from(OsStr::from_bytes(path)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn roots_with(vars: &[(&str, &str)], home: &str, project: &Path) -> Vec<PathBuf> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        let env = move |name: &str| map.get(name).cloned();
        writable_for(project, None, &[], &env, Some(home.into())).expect("valid input")
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
            "/xc",
            "/scratch",
        ] {
            assert!(
                roots.contains(&PathBuf::from(want)),
                "{want} missing from {roots:?}"
            );
        }
        for never in [
            "/home/u/.cache",
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
        for want in [
            "/home/u/.cache",
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

    #[test]
    fn git_pointer_parsing() {
        assert_eq!(
            parse_git_pointer(b"gitdir: /a/b\n", "gitdir: "),
            Ok("/a/b".into())
        );
        assert_eq!(
            parse_git_pointer(b"gitdir: ../x\r\n", "gitdir: "),
            Ok("../x".into())
        );
        assert_eq!(parse_git_pointer(b"../..\n", ""), Ok("../..".into()));
        assert!(parse_git_pointer(b"", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"gitdir: \n", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"\x7fELF\x00\x01", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"gitdir: /a\n/b", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"", "").is_err());
        // Non-UTF-8 paths are paths.
        assert_eq!(
            parse_git_pointer(b"gitdir: /a/\xff", "gitdir: "),
            Ok(PathBuf::from(OsStr::from_bytes(b"/a/\xff")))
        );
    }
}
