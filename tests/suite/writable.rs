//! `default_writable` on real directory trees. Runs anywhere.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use strument_sandbox::{Policy, PolicyError, Root, default_writable};

use super::support::FakeHome;

/// The paths of `default_writable`'s roots, for comparisons.
fn paths(roots: &[Root]) -> Vec<PathBuf> {
    roots.iter().map(|r| r.path.clone()).collect()
}

/// A repository's git directory, as far as the layout check goes.
fn fake_git_dir(dir: &std::path::Path) {
    for sub in ["objects", "refs", "logs", "hooks"] {
        fs::create_dir_all(dir.join(sub)).expect("mkdir git dir");
    }
    fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
}

#[test]
fn a_worktree_grants_its_gitdir_and_the_parts_of_the_common_dir_it_writes() {
    let h = FakeHome::new();
    let common = h.home.join("repo/.git");
    fake_git_dir(&common);
    let gitdir = common.join("worktrees/wt");
    fs::create_dir_all(&gitdir).expect("mkdir gitdir");
    fs::write(gitdir.join("HEAD"), "ref: refs/heads/wt\n").expect("HEAD");
    fs::write(gitdir.join("commondir"), "../..\n").expect("commondir");
    // git's back-pointer: the worktree's `.git`, which the gitdir belongs to.
    let back = format!("{}\n", h.project.join(".git").display());
    fs::write(gitdir.join("gitdir"), back).expect("gitdir");
    fs::write(
        h.project.join(".git"),
        format!("gitdir: {}\n", gitdir.display()),
    )
    .expect(".git file");
    let roots = paths(&default_writable(&h.project, None, &[]).expect("valid worktree"));
    assert_eq!(roots[0], h.project);
    assert!(roots.contains(&gitdir), "{roots:?}");
    for part in ["objects", "refs", "logs"] {
        assert!(
            roots.contains(&gitdir.join("../..").join(part)),
            "{part}: {roots:?}"
        );
    }
    // Not the common dir whole: its hooks/ and config run in the main repository.
    assert!(!roots.contains(&gitdir.join("../..")), "{roots:?}");
    // No reftable store, none listed; with one (git 2.45's
    // `--ref-format=reftable`), it is granted too: ref deletions lock there.
    assert!(!roots.contains(&gitdir.join("../../reftable")), "{roots:?}");
    fs::create_dir(common.join("reftable")).expect("mkdir reftable");
    let with_reftable = paths(&default_writable(&h.project, None, &[]).expect("valid worktree"));
    assert!(
        with_reftable.contains(&gitdir.join("../../reftable")),
        "{with_reftable:?}"
    );
    // With their git origin, so the check that a part leads into a git
    // directory runs.
    let report = Policy {
        writable: default_writable(&h.project, None, &[]).expect("valid worktree"),
        ..Policy::default()
    }
    .check()
    .expect("check");
    assert!(
        report
            .granted
            .iter()
            .any(|g| g.path == gitdir.join("../../reftable")),
        "{report:?}"
    );
    // And the kernel-facing check resolves `..` to the common dir's parts.
    let report = Policy {
        writable: roots.iter().map(Root::from).collect(),
        ..Policy::default()
    }
    .check()
    .expect("check");
    assert!(
        report.skipped.iter().all(|s| !s.path.starts_with(&common)),
        "{:?}",
        report.skipped
    );
    let real: Vec<PathBuf> = report
        .granted
        .iter()
        .map(|g| g.path.canonicalize().expect("granted roots resolve"))
        .collect();
    assert!(real.contains(&common.join("objects")), "{real:?}");
    assert!(
        !real.iter().any(|r| common.join("hooks").starts_with(r)),
        "{real:?}"
    );
}

#[test]
fn a_submodule_gitdir_is_relative_to_the_git_file() {
    let h = FakeHome::new();
    let sub = h.project.join("vendor/lib");
    fs::create_dir_all(&sub).expect("mkdir submodule");
    fs::write(sub.join(".git"), "gitdir: ../../.git/modules/lib\r\n").expect(".git file");
    let roots = paths(&default_writable(&sub, None, &[]).expect("valid submodule"));
    assert!(
        roots.contains(&sub.join("../../.git/modules/lib")),
        "{roots:?}"
    );
}

#[test]
fn garbage_git_files_are_errors_naming_the_file() {
    let h = FakeHome::new();
    for contents in [
        &b""[..],
        b"\x7fELF\x02\x01\x01\0\0",
        b"gitdir:\n",
        b"gitdir: \n",
        b"ref: refs/heads/main\n",
    ] {
        fs::write(h.project.join(".git"), contents).expect(".git file");
        match default_writable(&h.project, None, &[]) {
            Err(e @ PolicyError::GitFile { .. }) => {
                assert!(e.to_string().contains(".git"), "{e}");
            }
            other => panic!("{contents:?}: expected a GitFile error, got {other:?}"),
        }
    }
}

#[test]
fn a_dangling_gitdir_is_listed_and_then_skipped() {
    let h = FakeHome::new();
    let gone = h.home.join("deleted-repo/.git/worktrees/x");
    fs::write(
        h.project.join(".git"),
        format!("gitdir: {}\n", gone.display()),
    )
    .expect(".git file");
    assert_listed_then_skipped(&h.project, &gone);
}

/// `project`'s default set lists `missing`, a git directory that does not
/// exist, and checking it skips that root rather than failing.
#[track_caller]
fn assert_listed_then_skipped(project: &Path, missing: &Path) {
    let roots = default_writable(project, None, &[]).expect("a missing target is not malformed");
    assert!(paths(&roots).contains(&missing.to_path_buf()), "{roots:?}");
    let report = Policy {
        writable: roots,
        ..Policy::default()
    }
    .check()
    .expect("check");
    assert!(
        report.skipped.iter().any(|s| s.path == missing),
        "{:?}",
        report.skipped
    );
}

#[test]
fn bad_inputs_are_errors_not_wider_policies() {
    let h = FakeHome::new();
    assert!(matches!(
        default_writable("".as_ref(), None, &[]),
        Err(PolicyError::EmptyPath { .. })
    ));
    assert!(matches!(
        default_writable("project".as_ref(), None, &[]),
        Err(PolicyError::RelativePath { .. })
    ));
    assert!(matches!(
        default_writable(&h.project, Some("state".as_ref()), &[]),
        Err(PolicyError::RelativePath { .. })
    ));
    assert!(matches!(
        default_writable(&h.project, None, &[PathBuf::from("rel/extra")]),
        Err(PolicyError::RelativePath { .. })
    ));
    assert!(matches!(
        default_writable(&h.home.join(".bashrc"), None, &[]),
        Err(PolicyError::NotADirectory { .. })
    ));
}

#[test]
fn non_utf8_paths_work() {
    let h = FakeHome::new();
    let odd = h.home.join(OsStr::from_bytes(b"proj-\xff\xfe"));
    fs::create_dir(&odd).expect("mkdir non-UTF-8");
    let roots = default_writable(&odd, None, &[odd.join("sub")]).expect("non-UTF-8 is a path");
    assert_eq!(roots[0].path, odd);
    let report = Policy {
        writable: roots,
        ..Policy::default()
    }
    .check()
    .expect("check");
    assert_eq!(report.granted[0].path, odd);
}

#[test]
fn a_git_file_that_is_not_a_small_regular_file_is_an_error_not_a_hang() {
    use std::os::unix::net::UnixListener;
    let h = FakeHome::new();
    let dotgit = h.project.join(".git");
    let expect_git_file_error = |what: &str| match default_writable(&h.project, None, &[]) {
        Err(e @ PolicyError::GitFile { .. }) => {
            assert!(e.to_string().contains(".git"), "{what}: {e}")
        }
        other => panic!("{what}: expected a GitFile error, got {other:?}"),
    };
    // A fifo: reading it would wait forever for a writer.
    let c = std::ffi::CString::new(dotgit.as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    expect_git_file_error("fifo");
    fs::remove_file(&dotgit).expect("rm");
    drop(UnixListener::bind(&dotgit).expect("socket"));
    expect_git_file_error("socket");
    fs::remove_file(&dotgit).expect("rm");
    // Over 64 KiB: not what git writes (and /dev/zero would never end).
    fs::write(&dotgit, vec![b' '; 70_000]).expect("big .git");
    expect_git_file_error("huge");
    fs::write(&dotgit, b"gitdir: /a\0b\n").expect("NUL .git");
    expect_git_file_error("NUL");
}

#[test]
fn commondir_files_get_the_same_scrutiny_as_git_files() {
    let h = FakeHome::new();
    let gitdir = h.home.join("repo/.git/worktrees/wt");
    fs::create_dir_all(&gitdir).expect("mkdir gitdir");
    fake_git_dir(&h.home.join("repo/.git"));
    fs::write(gitdir.join("gitdir"), "../../../../project/.git\n").expect("gitdir");
    fs::write(
        h.project.join(".git"),
        "gitdir: ../repo/.git/worktrees/wt\n",
    )
    .expect(".git");
    let commondir = gitdir.join("commondir");
    for (contents, ok) in [
        (&b"../..\r\n"[..], true),
        (b"/elsewhere/common\n", true),
        (b"", false),
        (b"\n\n", false),
        (b"\x00\x01binary", false),
        (b"../..\n../x\n", false),
    ] {
        fs::write(&commondir, contents).expect("commondir");
        match default_writable(&h.project, None, &[]) {
            Ok(roots) => {
                let roots = paths(&roots);
                assert!(ok, "{contents:?} accepted: {roots:?}");
                // Relative to the gitdir (reached through the relative .git
                // pointer), absolute as written.
                let relative = h.project.join("../repo/.git/worktrees/wt");
                assert!(roots.contains(&relative), "{roots:?}");
                // The common dir's parts when it is a git directory, the
                // directory itself (to be skipped) when it is not.
                assert!(
                    roots.contains(&relative.join("../../objects"))
                        || roots.contains(&PathBuf::from("/elsewhere/common")),
                    "{contents:?}: {roots:?}"
                );
            }
            Err(e @ PolicyError::GitFile { .. }) => {
                assert!(!ok, "{contents:?} refused: {e}");
                assert!(e.to_string().contains("commondir"), "{e}");
            }
            Err(e) => panic!("{contents:?}: {e}"),
        }
    }
    // A relative gitdir that does not exist is listed and then skipped.
    fs::write(h.project.join(".git"), "gitdir: ../no-such-repo/.git\n").expect(".git");
    assert_listed_then_skipped(&h.project, &h.project.join("../no-such-repo/.git"));
}
