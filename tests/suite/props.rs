//! Bad input under property tests: `default_writable`, `Policy::check` and
//! `Report::explain` get arbitrary byte-string paths, relative and
//! absolute, `..` chains, paths past PATH_MAX, thousands of roots,
//! duplicates, nested roots, `/`, a file, a socket, a fifo, a dangling
//! symlink, symlink loops and a directory without search permission (as
//! root, permission checks are bypassed, so that directory behaves like
//! any other there). Each input gets a typed error or a report whose
//! granted set is a subset of what was asked, and nothing panics. None of
//! this needs Landlock, except the property in [`needs_landlock`] that the kernel
//! agrees with explain on generated paths.

use std::collections::HashSet;
use std::ffi::{CString, OsString};
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::Config;
use strument_sandbox::{
    ExplainError, Origin, Policy, PolicyError, Root, SkipReason, Warning, default_writable,
    explain::Verdict, root::RootKind,
};

/// A directory tree holding every awkward kind of root.
pub(super) struct Tree {
    _dir: tempfile::TempDir,
    pub(super) base: PathBuf,
}

impl Drop for Tree {
    fn drop(&mut self) {
        // Let the temporary directory be removed without root too.
        let _ = fs::set_permissions(
            self.base.join("nosearch"),
            fs::Permissions::from_mode(0o755),
        );
    }
}

pub(super) fn tree() -> Tree {
    let dir = tempfile::Builder::new()
        .prefix("props-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    for d in ["dir/sub/deep", "nosearch/inner", "wt", "gd"] {
        fs::create_dir_all(base.join(d)).expect("mkdir");
    }
    fs::write(base.join("file"), "x").expect("file");
    fs::write(base.join("dir/sub/file"), "x").expect("file");
    fs::write(base.join("wt/.git"), "gitdir: ../gd\n").expect(".git file");
    drop(UnixListener::bind(base.join("sock")).expect("socket"));
    let fifo = CString::new(base.join("fifo").as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    symlink(base.join("nonexistent"), base.join("dangling")).expect("symlink");
    symlink("loop", base.join("loop")).expect("symlink");
    symlink("loop_b", base.join("loop_a")).expect("symlink");
    symlink("loop_a", base.join("loop_b")).expect("symlink");
    symlink(base.join("dir"), base.join("link_dir")).expect("symlink");
    symlink("..", base.join("dir/link_up")).expect("symlink");
    symlink("/", base.join("link_root")).expect("symlink");
    fs::set_permissions(base.join("nosearch"), fs::Permissions::from_mode(0o000)).expect("chmod");
    Tree { _dir: dir, base }
}

/// One path component: a name in the tree, a trick, or arbitrary bytes.
fn component() -> impl Strategy<Value = OsString> {
    prop_oneof![
        6 => prop::sample::select(vec![
            "dir", "sub", "deep", "file", "sock", "fifo", "dangling", "loop", "loop_a", "nosearch",
            "inner", "link_dir", "link_up", "link_root", "wt", "gd", ".git", "missing",
        ])
        .prop_map(OsString::from),
        3 => prop::sample::select(vec!["..", "."]).prop_map(OsString::from),
        1 => prop::collection::vec(any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0), 1..300)
            .prop_map(OsString::from_vec),
    ]
}

/// An absolute path into the tree, sometimes padded past PATH_MAX.
fn tree_path(base: PathBuf) -> impl Strategy<Value = PathBuf> {
    (
        prop::collection::vec(component(), 0..8),
        prop_oneof![9 => Just(0usize), 1 => 1000..2100usize],
    )
        .prop_map(move |(parts, padding)| {
            let mut p = base.clone();
            for _ in 0..padding {
                p.push(".");
            }
            for part in parts {
                p.push(part);
            }
            p
        })
}

/// A path into the tree that starts, more often than chance would, in or
/// near a granted subtree.
pub(super) fn near_roots(base: PathBuf) -> impl Strategy<Value = PathBuf> {
    (
        prop::sample::select(vec![
            "",
            "dir",
            "dir/sub",
            "dir/sub/deep",
            "link_dir/sub",
            "dir/link_up/dir/sub",
        ]),
        prop::collection::vec(component(), 0..5),
    )
        .prop_map(move |(start, parts)| {
            let mut p = base.join(start);
            for part in parts {
                p.push(part);
            }
            p
        })
}

/// Any byte string, as a path: empty, relative, absolute, with NULs.
fn any_path() -> impl Strategy<Value = PathBuf> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64)
            .prop_map(|b| PathBuf::from(OsString::from_vec(b))),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|mut b| {
            b.insert(0, b'/');
            PathBuf::from(OsString::from_vec(b))
        }),
        prop::sample::select(vec![
            "/",
            "//",
            "/..",
            "/../..",
            "/tmp/../tmp",
            "/proc/self/cwd",
            ""
        ])
        .prop_map(PathBuf::from),
    ]
}

pub(super) fn config(cases: u32) -> Config {
    Config {
        cases,
        // No proptest-regressions/ files in the source tree.
        failure_persistence: None,
        ..Config::default()
    }
}

fn errno_of(path: &Path) -> Option<i32> {
    fs::metadata(path)
        .err()
        .map(|e| e.raw_os_error().unwrap_or(0))
}

/// The check every report must pass: what is granted was asked for, each
/// asked root is granted or skipped exactly once, and kinds and reasons
/// say what the filesystem says.
fn assert_report_is_within(
    asked: &[PathBuf],
    report: &strument_sandbox::Report,
) -> Result<(), TestCaseError> {
    let unique: HashSet<&Path> = asked.iter().map(PathBuf::as_path).collect();
    let granted: Vec<&Path> = report.granted.iter().map(|g| g.path.as_path()).collect();
    let skipped: Vec<&Path> = report.skipped.iter().map(|s| s.path.as_path()).collect();
    for g in &granted {
        prop_assert!(unique.contains(g), "granted {g:?}, which was not asked");
    }
    let listed: HashSet<&Path> = granted.iter().chain(&skipped).copied().collect();
    prop_assert_eq!(
        listed.len(),
        granted.len() + skipped.len(),
        "a root is listed twice"
    );
    prop_assert_eq!(&listed, &unique, "granted ∪ skipped is not what was asked");
    let slash = fs::metadata("/").map(|m| (m.dev(), m.ino())).ok();
    let mut saw_slash = false;
    for g in &report.granted {
        let meta = fs::metadata(&g.path);
        prop_assert!(meta.is_ok(), "granted {:?} does not resolve", g.path);
        let meta = meta.expect("checked");
        let ft = meta.file_type();
        let want = if ft.is_dir() {
            RootKind::Directory
        } else if ft.is_socket() || ft.is_fifo() || ft.is_char_device() || ft.is_block_device() {
            RootKind::Special
        } else {
            RootKind::File
        };
        prop_assert_eq!(g.kind, want, "{:?}", g.path);
        saw_slash |= Some((meta.dev(), meta.ino())) == slash;
    }
    let warned = report
        .warnings
        .iter()
        .any(|w| matches!(w, Warning::FilesystemRoot { .. }));
    prop_assert_eq!(
        warned,
        saw_slash,
        "the `/` warning does not match the roots"
    );
    for s in &report.skipped {
        let errno = errno_of(&s.path);
        match s.reason {
            SkipReason::Missing => prop_assert_eq!(errno, Some(libc::ENOENT), "{:?}", s.path),
            SkipReason::CannotOpen { errno: e } => {
                prop_assert!(
                    errno == Some(e),
                    "{:?}: skipped with {e}, stat says {errno:?}",
                    s.path
                );
            }
            _ => prop_assert!(false, "unknown skip reason {:?}", s.reason),
        }
    }
    Ok(())
}

#[test]
fn check_of_arbitrary_byte_paths_is_a_typed_error_or_within_what_was_asked() {
    proptest!(config(256), |(asked in prop::collection::vec(any_path(), 0..24))| {
        match (Policy { writable: asked.iter().map(Root::from).collect(), ..Policy::default() }).check() {
            Ok(report) => {
                prop_assert!(asked.iter().all(|p| p.is_absolute()), "accepted a relative root");
                assert_report_is_within(&asked, &report)?;
            }
            Err(PolicyError::EmptyPath { .. }) => {
                prop_assert!(asked.iter().any(|p| p.as_os_str().is_empty()));
            }
            Err(PolicyError::RelativePath { path, .. }) => {
                prop_assert!(!path.is_absolute() && asked.contains(&path));
            }
            Err(PolicyError::NulByte { path, .. }) => {
                prop_assert!(path.as_os_str().as_bytes().contains(&0) && asked.contains(&path));
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    });
}

#[test]
fn check_of_awkward_roots_matches_the_filesystem() {
    let t = tree();
    proptest!(config(192), |(asked in prop::collection::vec(tree_path(t.base.clone()), 1..16))| {
        let report = (Policy { writable: asked.iter().map(Root::from).collect(), ..Policy::default() }).check();
        prop_assert!(report.is_ok(), "absolute roots are never an error: {report:?}");
        assert_report_is_within(&asked, &report.expect("checked"))?;
    });
}

#[test]
fn thousands_of_duplicate_and_nested_roots_stay_within_what_was_asked() {
    let t = tree();
    proptest!(config(4), |(asked in prop::collection::vec(tree_path(t.base.clone()), 1000..4000))| {
        let report = (Policy { writable: asked.iter().map(Root::from).collect(), ..Policy::default() }).check().expect("absolute roots");
        assert_report_is_within(&asked, &report)?;
    });
}

#[test]
fn default_writable_adds_only_its_documented_groups() {
    let t = tree();
    let empty = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let baseline: HashSet<PathBuf> = default_writable(empty.path(), None, &[])
        .expect("a plain directory")
        .into_iter()
        .skip(1)
        .map(|r| r.path)
        .collect();
    let inputs = prop_oneof![any_path(), tree_path(t.base.clone())];
    let state = prop::option::of(prop_oneof![any_path(), tree_path(t.base.clone())]);
    let extra = prop::collection::vec(prop_oneof![any_path(), tree_path(t.base.clone())], 0..6);
    proptest!(config(256), |(project in inputs, state in state, extra in extra)| {
        match default_writable(&project, state.as_deref(), &extra) {
            Ok(roots) => {
                let from_git: Vec<PathBuf> = roots
                    .iter()
                    .filter(|r| matches!(r.origin, Origin::Git { .. }))
                    .map(|r| r.path.clone())
                    .collect();
                let roots: Vec<PathBuf> = roots.into_iter().map(|r| r.path).collect();
                prop_assert_eq!(&roots[0], &project);
                if let Some(state) = &state {
                    prop_assert!(roots.contains(state));
                }
                for e in &extra {
                    prop_assert!(roots.contains(e));
                }
                let unique: HashSet<&PathBuf> = roots.iter().collect();
                prop_assert_eq!(unique.len(), roots.len(), "duplicates");
                for r in &roots {
                    prop_assert!(r.is_absolute(), "{r:?}");
                    let input = r == &project || state.as_ref() == Some(r) || extra.contains(r);
                    // A worktree's gitdir and common dir, named by its `.git` file,
                    // or the git directory of the repository the project sits in
                    // (a monorepo's package: the nearest `.git` above it).
                    let git_dir = from_git.contains(r)
                        && project.ancestors().any(|a| fs::symlink_metadata(a.join(".git")).is_ok());
                    prop_assert!(input || git_dir || baseline.contains(r), "unasked root {r:?}");
                }
            }
            Err(PolicyError::EmptyPath { .. } | PolicyError::RelativePath { .. }) => {
                let all: Vec<&PathBuf> = std::iter::once(&project).chain(state.iter()).chain(&extra).collect();
                prop_assert!(all.iter().any(|p| !p.is_absolute()));
            }
            Err(PolicyError::NotADirectory { path, .. }) => {
                prop_assert!(fs::metadata(&path).is_ok_and(|m| !m.is_dir()));
            }
            Err(PolicyError::NulByte { path, .. }) => {
                prop_assert!(path.as_os_str().as_bytes().contains(&0));
            }
            Err(PolicyError::GitFile { path, .. } | PolicyError::Io { path, .. }) => {
                prop_assert!(path.starts_with(&project), "{path:?}");
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    });
}

#[test]
fn explain_never_panics_and_its_verdict_matches_the_granted_roots() {
    let t = tree();
    let roots = [
        t.base.join("dir/sub"),
        t.base.join("file"),
        t.base.join("fifo"),
        t.base.join("link_dir/sub/deep"),
        t.base.join("missing"),
    ];
    let report = Policy {
        writable: roots.iter().map(Root::from).collect(),
        ..Policy::default()
    }
    .check()
    .expect("check");
    let real: Vec<(PathBuf, RootKind)> = report
        .granted
        .iter()
        .map(|g| {
            (
                g.path.canonicalize().expect("granted roots resolve"),
                g.kind,
            )
        })
        .collect();
    let paths = prop_oneof![
        tree_path(t.base.clone()),
        near_roots(t.base.clone()),
        any_path()
    ];
    proptest!(config(512), |(path in paths.clone())| {
        match report.explain(&path) {
            Ok(e) => {
                // The kernel's answer, by names: with no bind mounts in the
                // tree, inode ancestry and path ancestry are the same thing.
                let covered = real.iter().any(|(root, kind)| match kind {
                    RootKind::Directory => e.checked.starts_with(root),
                    _ => e.exists && &e.checked == root,
                });
                prop_assert_eq!(e.is_granted(), covered, "{:?} checked as {:?}", path, e.checked);
                match &e.verdict {
                    Verdict::Granted(g) => prop_assert!(report.granted.contains(g)),
                    Verdict::Denied { allow, .. } => prop_assert_eq!(allow, &e.checked),
                }
                if e.exists {
                    prop_assert!(fs::metadata(&e.checked).is_ok());
                } else {
                    prop_assert!(fs::metadata(&e.checked).is_ok_and(|m| m.is_dir()));
                }
            }
            Err(ExplainError::EmptyPath) => prop_assert!(path.as_os_str().is_empty()),
            Err(ExplainError::RelativePath { .. }) => prop_assert!(!path.is_absolute()),
            Err(ExplainError::Resolve { source, .. }) => {
                // The kernel would fail the write the same way before Landlock.
                let errno = source.raw_os_error();
                let nul = path.as_os_str().as_bytes().contains(&0);
                prop_assert!(
                    nul || matches!(errno, Some(libc::ELOOP | libc::ENOTDIR | libc::ENAMETOOLONG | libc::EACCES)),
                    "{path:?}: {source}"
                );
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    });
}

/// The kernel agrees with explain on generated paths: each path explain
/// judges is written by a confined child.
mod needs_landlock {
    use std::ffi::{CString, OsStr, OsString};
    use std::fs;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;
    use std::sync::atomic::{AtomicU32, Ordering};

    use proptest::prelude::*;
    use strument_sandbox::Policy;

    use super::{config, near_roots, tree};
    use crate::suite::roles::Role;
    use crate::suite::support::{require_landlock, test_name};

    const THIS_TEST: &str = test_name!(the_kernel_lands_exactly_the_writes_explain_grants);
    /// What the confined child prints before its errno.
    const RESULT: &str = "PROBE-RESULT ";

    /// In the confined child: one write, its errno printed. `argument` is
    /// `a` (append to an existing file) or `c` (create), then the path.
    fn probe_write(argument: &OsStr) {
        let bytes = argument.as_bytes();
        let (how, path) = bytes.split_at(1);
        let path = CString::new(path).expect("no NUL");
        let flags = match how {
            b"a" => libc::O_WRONLY | libc::O_APPEND,
            _ => libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        };
        // SAFETY: a valid C string and integer flags.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                flags | libc::O_CLOEXEC | libc::O_NONBLOCK,
                0o600,
            )
        };
        let errno = if fd < 0 {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        } else {
            0
        };
        println!("{RESULT}{errno}");
    }

    #[test]
    fn the_kernel_lands_exactly_the_writes_explain_grants() {
        match Role::current() {
            Some((Role::ProbeWrite, argument)) => return probe_write(&argument),
            Some((other, _)) => panic!("{THIS_TEST} does not play {other:?}"),
            None => {}
        }
        require_landlock();
        let t = tree();
        let prepared = Policy {
            writable: vec![
                t.base.join("dir/sub").into(),
                t.base.join("file").into(),
                t.base.join("link_dir/sub/deep").into(),
            ],
            ..Policy::default()
        }
        .prepare()
        .expect("prepare: this property needs Landlock");
        let report = prepared.report().clone();
        let n = AtomicU32::new(0);
        // How many probes the kernel refused: the property says nothing
        // unless it saw both verdicts.
        let refusals = AtomicU32::new(0);
        proptest!(config(64), |(path in near_roots(t.base.clone()))| {
            let Ok(e) = report.explain(&path) else { return Ok(()) };
            // Probe only inside the tree: a write explain got wrong must not
            // land anywhere else.
            if !e.checked.starts_with(&t.base) {
                return Ok(());
            }
            let meta = fs::metadata(&e.checked).expect("checked exists");
            // Opening a socket fails before Landlock is asked; a fifo opens
            // non-blocking, so Landlock answers first.
            if meta.file_type().is_socket() {
                return Ok(());
            }
            let n = n.fetch_add(1, Ordering::Relaxed);
            let (how, target) = if e.exists && !meta.is_dir() {
                ("a", path.clone())
            } else if e.exists {
                ("c", path.join(format!("probe-{n}")))
            } else {
                ("c", e.checked.join(format!("probe-{n}")))
            };
            let mut argument = OsString::from(how);
            argument.push(target.as_os_str());
            let mut cmd = Role::ProbeWrite.command(THIS_TEST, &argument);
            prepared.confine(&mut cmd);
            let out = cmd.output().expect("run the probe");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let errno: i32 = stdout
                .lines()
                .find_map(|l| l.split_once(RESULT).map(|(_, r)| r.trim().parse().expect("errno")))
                .expect("the probe printed its result");
            let _ = fs::remove_file(&target);
            let refused = errno == libc::EACCES;
            if refused {
                refusals.fetch_add(1, Ordering::Relaxed);
            }
            prop_assert_eq!(
                !refused,
                e.is_granted(),
                "{:?} (written as {:?}): explain says {:?}, the kernel answered errno {}",
                path, target, e.verdict, errno
            );
        });
        let probed = n.load(Ordering::Relaxed);
        assert!(
            probed >= 16,
            "only {probed} of the generated paths were probed on the kernel"
        );
        let refused = refusals.load(Ordering::Relaxed);
        assert!(
            refused >= 4 && probed - refused >= 4,
            "of {probed} probes the kernel refused {refused} and let {} land: too few of one \
             verdict to compare explain with the kernel on both",
            probed - refused
        );
    }
}

/// For arbitrary `.git` contents (a file, a symlink, garbage) and arbitrary
/// values of the variables that name caches and temporary space, the roots
/// `policy` grants never include the home directory or an ancestor of it:
/// only the caller may name one, and here the caller names only the project.
#[test]
fn no_git_pointer_or_variable_makes_home_or_above_granted() {
    use super::support::FakeHome;
    use super::widening::{granted_home_or_above, plant_symlink_to_home};

    let h = FakeHome::new();
    let (_planted_dir, planted) = plant_symlink_to_home(&h, "to-home");
    let home = h.home.clone();
    let project = h.project.clone();
    let targets = prop_oneof![
        prop::sample::select(vec![
            home.clone(),
            home.join(".."),
            home.join("../.."),
            home.join(".cache/.."),
            home.join("./."),
            home.join("Documents"),
            home.join(".cache"),
            project.clone(),
            project.join(".."),
            planted.clone(),
            planted.join("project/.."),
            PathBuf::from("/"),
            PathBuf::from("//"),
            PathBuf::from("/proc/self/cwd/.."),
            PathBuf::from("relative/path"),
        ]),
        any_path(),
    ];
    let dotgit = prop_oneof![
        Just(None),
        prop::collection::vec(any::<u8>(), 0..80).prop_map(|b| Some((false, b))),
        targets.clone().prop_map(|t| {
            let mut b = b"gitdir: ".to_vec();
            b.extend_from_slice(t.as_os_str().as_bytes());
            Some((false, b))
        }),
        targets
            .clone()
            .prop_map(|t| Some((true, t.as_os_str().as_bytes().to_vec()))),
    ];
    let names = prop::sample::select(vec![
        "TMPDIR",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "GOCACHE",
        "GOPATH",
        "GOMODCACHE",
        "CARGO_HOME",
        "npm_config_cache",
        "npm_config_store_dir",
        "BUN_INSTALL",
        "BUN_INSTALL_CACHE_DIR",
        "YARN_CACHE_FOLDER",
        "GRADLE_USER_HOME",
        "PIP_CACHE_DIR",
        "UV_CACHE_DIR",
        "CCACHE_DIR",
        "SCCACHE_DIR",
    ]);
    let vars = prop::collection::vec((names, targets), 0..5);
    let git = h.project.join(".git");
    let reports = std::cell::Cell::new(0u32);
    proptest!(config(48), |(dotgit in dotgit, vars in vars)| {
        let _ = fs::remove_file(&git);
        // An empty or NUL-holding symlink target cannot be made at all.
        let made = match &dotgit {
            None => true,
            Some((false, bytes)) => fs::write(&git, bytes).is_ok(),
            Some((true, target)) => symlink(OsString::from_vec(target.clone()), &git).is_ok(),
        };
        if !made {
            return Ok(());
        }
        let vars: Vec<(&str, OsString)> = vars
            .iter()
            .filter(|(_, v)| !v.as_os_str().as_bytes().contains(&0))
            .map(|(n, v)| (*n, v.clone().into_os_string()))
            .collect();
        let Some(report) = policy_or_refusal(&h, &vars) else {
            return Ok(()); // a .git git cannot read: an error, nothing granted
        };
        reports.set(reports.get() + 1);
        let wide = granted_home_or_above(&report, &home);
        prop_assert!(wide.is_empty(), "granted {wide:?} for .git {dotgit:?} and {vars:?}");
    });
    // Not vacuous: most cases produced a report to look at.
    assert!(
        reports.get() >= 16,
        "only {} of 48 cases gave a report",
        reports.get()
    );

    /// `policy` is allowed to refuse a `.git` it cannot read (exit 4).
    fn policy_or_refusal(h: &FakeHome, vars: &[(&str, OsString)]) -> Option<serde_json::Value> {
        let mut cmd = h.policy_command(&["--json"]);
        for (name, value) in vars {
            cmd.env(name, value);
        }
        let out = super::support::output(&mut cmd);
        match out.status.code() {
            Some(0) => Some(serde_json::from_slice(&out.stdout).expect("JSON")),
            Some(4) => None,
            _ => panic!("policy failed\n{}", super::support::show(&out)),
        }
    }
}
