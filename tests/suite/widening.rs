//! No confined command and no environment can widen the next sandbox: every
//! root is judged by what it resolves to. These read `policy --json` with a
//! fake home (no Landlock needed); the confined runs are in
//! `widening::needs_landlock`.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::support::{BIN, FakeHome, assert_success, output, require_tool, show};

/// `strument-sandbox policy --json` for the fake home's project, with
/// `vars` added to the fake home's environment.
fn policy(h: &FakeHome, flags: &[&str], vars: &[(&str, OsString)]) -> Value {
    let mut cmd = Command::new(BIN);
    cmd.arg("policy").arg("--json").args(flags);
    h.env(&mut cmd);
    if !flags.contains(&"--project") {
        cmd.arg("--project").arg(&h.project);
    }
    for (name, value) in vars {
        cmd.env(name, value);
    }
    let out = output(&mut cmd);
    assert!(out.status.success(), "policy failed\n{}", show(&out));
    serde_json::from_slice(&out.stdout).expect("policy --json prints JSON")
}

/// The identity of `dir` and of every directory above it.
pub(super) fn self_and_above(dir: &Path) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut path = dir.to_path_buf();
    while let Ok(meta) = fs::metadata(&path) {
        let id = (meta.dev(), meta.ino());
        if out.last() == Some(&id) {
            break;
        }
        out.push(id);
        path.push("..");
    }
    out
}

/// The granted entries of a report that resolve to the home directory or
/// above it, as (path, origin kind).
pub(super) fn granted_home_or_above(report: &Value, home: &Path) -> Vec<(String, String)> {
    let forbidden = self_and_above(home);
    report["granted"]
        .as_array()
        .expect("granted is a list")
        .iter()
        .filter(|g| {
            // What the policy's own process resolved it to (`/proc/self/cwd`
            // means something else here).
            let path = g["resolved"].as_str().or(g["path"].as_str()).expect("path");
            fs::metadata(path).is_ok_and(|m| forbidden.contains(&(m.dev(), m.ino())))
        })
        .map(|g| {
            (
                g["path"].as_str().unwrap_or_default().to_owned(),
                g["origin"]["kind"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The skipped entry for `path`, if any.
fn skipped<'a>(report: &'a Value, path: &Path) -> Option<&'a Value> {
    report["skipped"]
        .as_array()
        .expect("skipped is a list")
        .iter()
        .find(|s| s["path"].as_str() == Some(&path.to_string_lossy()))
}

fn granted_paths(report: &Value) -> Vec<PathBuf> {
    report["granted"]
        .as_array()
        .expect("granted is a list")
        .iter()
        .map(|g| PathBuf::from(g["path"].as_str().expect("path")))
        .collect()
}

fn warnings(report: &Value) -> String {
    report["warnings"]
        .as_array()
        .expect("warnings is a list")
        .iter()
        .map(|w| w.as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts the report grants the project and nothing at or above home,
/// and skips `path` as widening, from `origin`.
#[track_caller]
fn assert_skipped_as_widening(report: &Value, h: &FakeHome, path: &Path, origin: &str) {
    assert_eq!(
        granted_home_or_above(report, &h.home),
        [],
        "home or above granted: {report:#}"
    );
    // The granted side: the project still is.
    assert!(granted_paths(report).contains(&h.project), "{report:#}");
    let s = skipped(report, path).unwrap_or_else(|| panic!("{path:?} not skipped: {report:#}"));
    assert_eq!(s["reason"], "widens", "{s:#}");
    assert_eq!(s["origin"]["kind"], origin, "{s:#}");
    assert!(
        warnings(report).contains(&*path.to_string_lossy()),
        "no warning names {path:?}: {report:#}"
    );
}

#[test]
fn a_git_file_naming_home_or_root_is_skipped_and_said_why() {
    let h = FakeHome::new();
    let dotgit = h.project.join(".git");
    for target in [h.home.clone(), PathBuf::from("/"), h.home.join(".")] {
        fs::write(&dotgit, format!("gitdir: {}\n", target.display())).expect(".git");
        let report = policy(&h, &[], &[]);
        assert_skipped_as_widening(&report, &h, &target, "git");
        let s = skipped(&report, &target).expect("skipped");
        assert_eq!(
            s["origin"]["pointer"].as_str(),
            Some(&*dotgit.to_string_lossy()),
            "{s:#}"
        );
    }
}

#[test]
fn a_git_symlink_to_home_is_skipped_and_one_to_a_git_dir_granted() {
    let h = FakeHome::new();
    let dotgit = h.project.join(".git");
    symlink(&h.home, &dotgit).expect("ln -s ~ .git");
    let report = policy(&h, &[], &[]);
    assert_skipped_as_widening(&report, &h, &dotgit, "git");
    // A symlink to a real git directory elsewhere whose core.worktree
    // names the project back is granted, and says what it resolved to.
    let real = h.home.join("elsewhere/project.git");
    fake_git_dir(&real);
    fs::remove_file(&dotgit).expect("rm .git");
    symlink(&real, &dotgit).expect("ln -s real .git");
    // Without core.worktree it is another working tree's (a
    // `--separate-git-dir` clone's too): skipped.
    let report = policy(&h, &[], &[]);
    let s = skipped(&report, &dotgit).unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(s["reason"], "another-working-tree", "{s:#}");
    fs::write(
        real.join("config"),
        format!("[core]\n\tworktree = {}\n", h.project.display()),
    )
    .expect("config");
    let report = policy(&h, &[], &[]);
    let g = report["granted"]
        .as_array()
        .expect("granted")
        .iter()
        .find(|g| g["path"].as_str() == Some(&*dotgit.to_string_lossy()))
        .unwrap_or_else(|| panic!("{dotgit:?} not granted: {report:#}"));
    assert_eq!(g["resolved"].as_str(), Some(&*real.to_string_lossy()));
    assert_eq!(g["origin"]["kind"], "git");
}

/// Makes the worktree gitdir `gitdir` name `project`'s `.git` back, as
/// `git worktree add` does (an absolute path in its `gitdir` file).
pub(super) fn point_back(gitdir: &Path, project: &Path) {
    let back = format!("{}\n", project.join(".git").display());
    fs::write(gitdir.join("gitdir"), back).expect("gitdir back-pointer");
}

/// A repository's git directory, as far as the layout check goes.
pub(super) fn fake_git_dir(dir: &Path) {
    for sub in ["objects", "refs", "logs", "hooks"] {
        fs::create_dir_all(dir.join(sub)).expect("mkdir git dir");
    }
    fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    fs::write(dir.join("config"), "[core]\n").expect("config");
}

#[test]
fn a_commondir_naming_home_is_skipped_and_a_non_git_gitdir_too() {
    let h = FakeHome::new();
    let gitdir = h.home.join("repo/.git/worktrees/wt");
    fake_git_dir(&h.home.join("repo/.git"));
    fs::create_dir_all(&gitdir).expect("mkdir gitdir");
    fs::write(gitdir.join("HEAD"), "ref: refs/heads/wt\n").expect("HEAD");
    fs::write(
        h.project.join(".git"),
        format!("gitdir: {}\n", gitdir.display()),
    )
    .expect(".git");
    fs::write(gitdir.join("commondir"), format!("{}\n", h.home.display())).expect("commondir");
    point_back(&gitdir, &h.project);
    let report = policy(&h, &[], &[]);
    assert_skipped_as_widening(&report, &h, &h.home, "git");
    // The worktree's own gitdir is still granted.
    assert!(granted_paths(&report).contains(&gitdir), "{report:#}");

    // A gitdir that is no git directory (here ~/Documents) is skipped too.
    let documents = h.home.join("Documents");
    fs::write(
        h.project.join(".git"),
        format!("gitdir: {}\n", documents.display()),
    )
    .expect(".git");
    let report = policy(&h, &[], &[]);
    let s = skipped(&report, &documents).unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(s["reason"], "not-a-git-directory", "{s:#}");
    assert!(!granted_paths(&report).contains(&documents));
}

/// Every variable that names a cache or temporary root.
const VARIABLES: [&str; 13] = [
    "TMPDIR",
    "XDG_CACHE_HOME",
    "GOCACHE",
    "GOMODCACHE",
    "CARGO_HOME",
    "npm_config_cache",
    "BUN_INSTALL_CACHE_DIR",
    "npm_config_store_dir",
    "YARN_CACHE_FOLDER",
    "PIP_CACHE_DIR",
    "UV_CACHE_DIR",
    "CCACHE_DIR",
    "SCCACHE_DIR",
];

/// A symlink to `h`'s home named `name`, planted in a fresh directory in
/// temporary space (a writable root: where a confined command could plant
/// one); the directory goes with the returned guard.
pub(super) fn plant_symlink_to_home(h: &FakeHome, name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a directory in temporary space");
    let planted = dir.path().join(name);
    symlink(&h.home, &planted).expect("plant a symlink to home");
    (dir, planted)
}

#[test]
fn a_variable_naming_home_root_dotdot_or_a_planted_symlink_is_skipped() {
    let h = FakeHome::new();
    // A symlink planted inside a writable root (temporary space), then
    // named by a variable.
    let (_planted_dir, planted) = plant_symlink_to_home(&h, "cache");
    let values = [
        h.home.clone(),
        PathBuf::from("/"),
        h.home.join(".cache/.."),
        planted.clone(),
    ];
    for name in VARIABLES {
        for value in &values {
            let report = policy(&h, &[], &[(name, value.clone().into_os_string())]);
            let kind = if name == "TMPDIR" { "temp" } else { "cache" };
            assert_skipped_as_widening(&report, &h, value, kind);
            let s = skipped(&report, value).expect("skipped");
            assert_eq!(s["origin"]["variable"], name, "{s:#}");
            assert_eq!(
                s["origin"]["value"].as_str(),
                Some(&*value.to_string_lossy()),
                "{s:#}"
            );
        }
        // The granted side: the same variable naming a directory of its own.
        let own = h.home.join(format!("own-{name}"));
        for sub in ["registry", "go-build"] {
            fs::create_dir_all(own.join(sub)).expect("mkdir");
        }
        let report = policy(&h, &[], &[(name, own.clone().into_os_string())]);
        let granted = granted_paths(&report);
        assert!(
            granted.iter().any(|g| g.starts_with(&own)),
            "{name}={own:?} granted nothing: {report:#}"
        );
        assert_eq!(granted_home_or_above(&report, &h.home), []);
    }
}

#[test]
fn the_cache_home_is_granted_by_its_directories_never_whole() {
    let h = FakeHome::new();
    let cache = h.home.join(".cache");
    fs::create_dir_all(cache.join("go-build")).expect("mkdir go-build");
    fs::write(cache.join("p10k-instant-prompt-me.zsh"), "# p10k\n").expect("p10k");
    let report = policy(&h, &[], &[]);
    let granted = granted_paths(&report);
    assert!(granted.contains(&cache.join("go-build")), "{report:#}");
    assert!(!granted.contains(&cache), "{report:#}");
    assert!(
        !granted
            .iter()
            .any(|g| cache.join("p10k-instant-prompt-me.zsh").starts_with(g)),
        "{report:#}"
    );
    // XDG_CACHE_HOME elsewhere: its directories, not it.
    let xdg = h.home.join("xdg-cache");
    fs::create_dir_all(xdg.join("pip")).expect("mkdir");
    let report = policy(&h, &[], &[("XDG_CACHE_HOME", xdg.clone().into_os_string())]);
    let granted = granted_paths(&report);
    assert!(granted.contains(&xdg.join("pip")), "{report:#}");
    assert!(!granted.contains(&xdg), "{report:#}");
}

#[test]
fn a_home_inside_a_granted_root_is_a_loud_warning_naming_it() {
    // A home under /tmp, as in containers and CI runners: report only, no
    // write is tried here.
    let temp = ["/tmp", "/var/tmp", "/dev/shm"]
        .into_iter()
        .find(|t| Path::new(t).is_dir())
        .expect("one of /tmp, /var/tmp, /dev/shm exists");
    let under_tmp = tempfile::Builder::new()
        .prefix("home-in-tmp-")
        .tempdir_in(temp)
        .expect("a home under temporary space");
    let home = under_tmp.path().canonicalize().expect("canonical");
    fs::create_dir_all(home.join("project")).expect("mkdir");
    let mut cmd = Command::new(BIN);
    cmd.args(["policy", "--json", "--project"])
        .arg(home.join("project"))
        .env_clear()
        .env("HOME", &home);
    let out = output(&mut cmd);
    assert!(out.status.success(), "{}", show(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let w = warnings(&report);
    assert!(
        w.contains(&format!(
            "the home directory {} is writable",
            home.display()
        )) && w.contains(&format!("root {temp} ")),
        "{report:#}"
    );
    // The text report, too.
    let mut cmd = Command::new(BIN);
    cmd.args(["policy", "--project"])
        .arg(home.join("project"))
        .env_clear()
        .env("HOME", &home);
    let text = String::from_utf8_lossy(&output(&mut cmd).stdout).into_owned();
    assert!(text.contains("warning: the home directory"), "{text}");
    // And explain, whose every answer it changes.
    let mut cmd = Command::new(BIN);
    cmd.args(["explain", "--project"])
        .arg(home.join("project"))
        .arg(home.join(".bashrc"))
        .env_clear()
        .env("HOME", &home);
    let out = output(&mut cmd);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains(": writable, granted by"), "{text}");
    assert!(text.contains("warning: the home directory"), "{text}");
}

#[test]
fn home_named_explicitly_is_granted_with_a_loud_warning() {
    let h = FakeHome::new();
    let home = h.home.to_string_lossy().into_owned();
    let report = policy(&h, &["--allow", &home], &[]);
    assert_eq!(
        granted_home_or_above(&report, &h.home),
        [(home.clone(), "extra".to_owned())],
        "{report:#}"
    );
    assert!(
        warnings(&report).contains(&format!("the home directory {home} is writable")),
        "{report:#}"
    );
    // The refused side: without --allow, nothing at or above home.
    let report = policy(&h, &[], &[]);
    assert_eq!(granted_home_or_above(&report, &h.home), []);
    assert!(!warnings(&report).contains("is writable"), "{report:#}");
}

#[test]
fn a_common_dir_part_planted_as_a_symlink_to_another_repositorys_hooks_is_skipped() {
    let h = FakeHome::new();
    let other = h.home.join("other/.git");
    fake_git_dir(&other);
    // A fake common dir whose `objects` leads to the other repository's hooks.
    let common = h.home.join("fake-common");
    fs::create_dir_all(common.join("refs")).expect("mkdir refs");
    fs::create_dir_all(common.join("logs")).expect("mkdir logs");
    fs::write(common.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    symlink(other.join("hooks"), common.join("objects")).expect("plant objects");
    // Where git puts a linked worktree's own gitdir: <common>/worktrees/<id>.
    let gitdir = common.join("worktrees/wt");
    fs::create_dir_all(&gitdir).expect("mkdir");
    fs::write(gitdir.join("HEAD"), "ref: refs/heads/wt\n").expect("HEAD");
    fs::write(gitdir.join("commondir"), format!("{}\n", common.display())).expect("commondir");
    point_back(&gitdir, &h.project);
    fs::write(
        h.project.join(".git"),
        format!("gitdir: {}\n", gitdir.display()),
    )
    .expect(".git");
    let report = policy(&h, &[], &[]);
    let s = skipped(&report, &common.join("objects")).unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(s["reason"], "not-a-git-directory", "{s:#}");
    let granted = granted_paths(&report);
    // The granted side: the real parts are.
    assert!(granted.contains(&common.join("refs")), "{report:#}");
    assert!(granted.contains(&gitdir), "{report:#}");
    assert!(
        !report["granted"]
            .as_array()
            .expect("granted")
            .iter()
            .any(|g| g["resolved"].as_str() == Some(&*other.join("hooks").to_string_lossy())),
        "{report:#}"
    );
    // A `commondir` rewritten (by a confined command: the worktree's gitdir
    // is writable) to name another repository leads to none of its parts:
    // git keeps a worktree's gitdir inside its common directory.
    for part in ["refs", "logs"] {
        fs::create_dir_all(other.join(part)).expect("mkdir");
    }
    fs::write(gitdir.join("commondir"), format!("{}\n", other.display())).expect("commondir");
    let report = policy(&h, &[], &[]);
    let granted = granted_paths(&report);
    for part in ["objects", "refs", "logs"] {
        assert!(!granted.contains(&other.join(part)), "{part}: {report:#}");
        let s = skipped(&report, &other.join(part)).unwrap_or_else(|| panic!("{report:#}"));
        assert_eq!(s["reason"], "not-a-git-directory", "{s:#}");
    }
    assert!(!granted.contains(&other), "{report:#}");
    assert!(granted.contains(&gitdir), "{report:#}");
}

#[test]
fn a_cache_home_that_is_a_symlink_to_home_is_skipped_not_enumerated() {
    let h = FakeHome::new();
    let cache = h.home.join(".cache");
    fs::remove_dir_all(&cache).expect("rm ~/.cache");
    symlink(&h.home, &cache).expect("ln -s ~ ~/.cache");
    let report = policy(&h, &[], &[]);
    // Not ~/Documents, ~/.ssh, … as "cache directories", and not home.
    let granted = granted_paths(&report);
    assert!(!granted.iter().any(|g| g.starts_with(&cache)), "{report:#}");
    assert_eq!(granted_home_or_above(&report, &h.home), []);
    let s = skipped(&report, &cache).unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(s["reason"], "widens", "{s:#}");
    // The granted side: the project.
    assert!(granted.contains(&h.project), "{report:#}");
}

/// With no usable home directory (HOME relative, as a broken environment
/// may set it), there is no home to compare with, but `/` is above any
/// home: a variable naming it is still skipped, while one naming a
/// directory of its own is granted.
#[test]
fn without_a_usable_home_a_variable_naming_root_is_still_skipped() {
    let h = FakeHome::new();
    let report = policy(
        &h,
        &[],
        &[
            ("HOME", OsString::from("relative-home")),
            ("TMPDIR", OsString::from("/")),
        ],
    );
    let s = skipped(&report, Path::new("/")).expect("/ is skipped");
    assert_eq!(s["reason"], "widens", "{s:#}");
    assert!(
        !granted_paths(&report).contains(&PathBuf::from("/")),
        "{report:#}"
    );
    let own = h.home.join("own-tmp");
    fs::create_dir_all(&own).expect("mkdir");
    let report = policy(
        &h,
        &[],
        &[
            ("HOME", OsString::from("relative-home")),
            ("TMPDIR", own.clone().into_os_string()),
        ],
    );
    assert!(granted_paths(&report).contains(&own), "{report:#}");
}

/// `git <args>` in `dir`, with `h`'s environment; it must succeed.
pub(super) fn git(dir: &Path, h: &FakeHome, args: &[&str]) {
    let mut cmd = Command::new("git");
    h.env(&mut cmd);
    cmd.current_dir(dir).args(args);
    assert_success(&output(&mut cmd));
}

/// Real repositories git made in a fake home.
pub(super) struct Repositories {
    /// A repository with one commit; the project is its linked worktree.
    pub(super) main: PathBuf,
    /// A repository with `main` added as its submodule `sub`.
    pub(super) superproject: PathBuf,
    /// That submodule's working tree, whose `.git` file names
    /// `<superproject>/.git/modules/sub`.
    pub(super) sub: PathBuf,
}

/// Makes `main` (one commit), the project as its linked worktree (`git
/// worktree add`), a second worktree `other-wt`, and `superproject` with
/// `main` added as its submodule `sub` (`git submodule add`).
pub(super) fn real_repositories(h: &FakeHome) -> Repositories {
    require_tool("git", "git");
    let main = h.home.join("main");
    fs::create_dir_all(&main).expect("mkdir main");
    git(&main, h, &["init", "-q", "-b", "main"]);
    fs::write(main.join("a"), "a\n").expect("a");
    git(&main, h, &["add", "a"]);
    git(&main, h, &["commit", "-qm", "a"]);
    fs::create_dir_all(main.join(".git/hooks")).expect("mkdir hooks");
    fs::remove_dir(&h.project).expect("rm the empty project");
    let project = h.project.to_string_lossy();
    git(
        &main,
        h,
        &["worktree", "add", "-q", &project, "-b", "feature"],
    );
    let other = h.home.join("other-wt");
    let other = other.to_string_lossy();
    git(&main, h, &["worktree", "add", "-q", &other, "-b", "other"]);
    let superproject = h.home.join("super");
    fs::create_dir_all(&superproject).expect("mkdir super");
    git(&superproject, h, &["init", "-q", "-b", "main"]);
    let url = main.to_string_lossy();
    git(
        &superproject,
        h,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &url,
            "sub",
        ],
    );
    git(&superproject, h, &["commit", "-qm", "sub"]);
    let sub = superproject.join("sub");
    Repositories {
        main,
        superproject,
        sub,
    }
}

/// What each granted root of a report resolves to.
pub(super) fn granted_resolved(report: &Value) -> Vec<PathBuf> {
    report["granted"]
        .as_array()
        .expect("granted is a list")
        .iter()
        .map(|g| {
            let path = g["resolved"].as_str().or(g["path"].as_str()).expect("path");
            fs::canonicalize(path).unwrap_or_else(|_| path.into())
        })
        .collect()
}

#[test]
fn a_git_pointer_at_another_working_trees_git_dir_is_skipped_and_real_ones_granted() {
    let h = FakeHome::new();
    let r = real_repositories(&h);
    let main_git = r.main.join(".git");
    let modules_sub = r.superproject.join(".git/modules/sub");
    // The granted halves: a real linked worktree gets its own gitdir and
    // the parts of the common dir, not the common dir whole.
    let report = policy(&h, &[], &[]);
    let granted = granted_resolved(&report);
    assert!(
        granted.contains(&main_git.join("worktrees/project")),
        "{report:#}"
    );
    assert!(granted.contains(&main_git.join("objects")), "{report:#}");
    assert!(!granted.contains(&main_git), "{report:#}");
    assert!(
        !report["skipped"]
            .as_array()
            .expect("skipped is a list")
            .iter()
            .any(|s| s["origin"]["kind"] == "git"),
        "{report:#}"
    );
    // A real submodule gets its git directory, which names it back by
    // core.worktree.
    let sub = r.sub.to_string_lossy();
    let report = policy(&h, &["--project", &sub], &[]);
    assert!(
        granted_resolved(&report).contains(&modules_sub),
        "{report:#}"
    );

    // The reviewer's attack, and the same with every other git directory:
    // a `.git` file naming one that belongs to another working tree.
    let dotgit = h.project.join(".git");
    fs::rename(&dotgit, h.project.join(".git.old")).expect("mv .git .git.old");
    for target in [
        main_git.clone(),
        main_git.join("worktrees/other-wt"),
        modules_sub.clone(),
        r.superproject.join(".git"),
    ] {
        fs::write(&dotgit, format!("gitdir: {}\n", target.display())).expect(".git");
        let report = policy(&h, &[], &[]);
        let s = skipped(&report, &target).unwrap_or_else(|| panic!("{target:?}: {report:#}"));
        assert_eq!(s["reason"], "another-working-tree", "{s:#}");
        assert_eq!(s["origin"]["kind"], "git", "{s:#}");
        // Nothing of it, nor of its common dir, is granted.
        let granted = granted_resolved(&report);
        for inside in [
            target.join("hooks"),
            target.join("config"),
            main_git.join("objects"),
        ] {
            assert!(
                !granted.iter().any(|g| inside.starts_with(g)),
                "{inside:?} writable: {report:#}"
            );
        }
        let w = warnings(&report);
        assert!(
            w.contains(&*target.to_string_lossy()) && w.contains("another working tree"),
            "{report:#}"
        );
        // The granted side: the project still is.
        assert!(granted_paths(&report).contains(&h.project), "{report:#}");
    }
    // The same through a `.git` symlink.
    fs::remove_file(&dotgit).expect("rm .git");
    symlink(&main_git, &dotgit).expect("ln -s main/.git .git");
    let report = policy(&h, &[], &[]);
    let s = skipped(&report, &dotgit).unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(s["reason"], "another-working-tree", "{s:#}");
    assert!(!granted_resolved(&report).contains(&main_git), "{report:#}");
    // Named explicitly, it is granted: the caller decides.
    let allow = main_git.to_string_lossy();
    let report = policy(&h, &["--allow", &allow], &[]);
    assert!(granted_resolved(&report).contains(&main_git), "{report:#}");
}

/// The confined runs: what a command inside, or the environment, cannot widen.
mod needs_landlock;
