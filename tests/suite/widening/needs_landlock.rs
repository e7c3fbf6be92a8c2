//! A confined command cannot widen the next sandbox, the home directory is
//! never taken as an implicit project, the cache home's own files stay
//! read-only, and a linked worktree's main repository keeps its hooks and
//! config. Each refused write stands next to a granted one, and the
//! filesystem is checked afterwards. Needs Landlock.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use super::super::support::{BIN, FakeHome, assert_success, output, require_tool, show};
use super::{granted_resolved, real_repositories};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_confined_command_cannot_make_the_next_sandbox_grant_home() {
    let h = FakeHome::new();
    let home = h.home.display().to_string();
    let plants = [
        format!("rm -rf .git && printf 'gitdir: {home}\\n' > .git"),
        format!("rm -rf .git && ln -s '{home}' .git"),
        "rm -rf .git && printf 'gitdir: /\\n' > .git".to_owned(),
        format!("rm -rf .git && printf 'gitdir: {home}/.cache/..\\n' > .git"),
    ];
    for plant in &plants {
        // Inside the sandbox: the project is writable, so this lands.
        assert_success(&h.sh(plant));
        let marker = h.home.join("anything");
        let out = h.sh(&format!(
            "echo x > '{}'; echo granted > '{}'",
            marker.display(),
            h.project.join("granted").display()
        ));
        assert!(
            !marker.exists(),
            "{plant}: home became writable\n{}",
            show(&out)
        );
        assert_eq!(
            fs::read_to_string(h.project.join("granted"))
                .ok()
                .as_deref(),
            Some("granted\n"),
            "{plant}: the project stopped being writable\n{}",
            show(&out)
        );
        // Gone before the next plant, whose run must write its own.
        fs::remove_file(h.project.join("granted")).expect("rm granted");
        // And the report said why, without -v.
        let err = stderr(&out);
        assert!(
            err.contains("warning: not granted") && err.contains("(git, named by"),
            "{plant}: no warning about the .git pointer\n{}",
            show(&out)
        );
        h.assert_sentinels_intact();
    }
}

#[test]
fn a_variable_naming_home_does_not_make_it_writable() {
    let h = FakeHome::new();
    for name in ["TMPDIR", "XDG_CACHE_HOME", "GOCACHE", "CARGO_HOME"] {
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--project"]).arg(&h.project).args([
            "--",
            "sh",
            "-c",
            "echo x > \"$HOME/anything\"; echo ok > granted",
        ]);
        h.env(&mut cmd);
        cmd.env(name, &h.home);
        let out = output(&mut cmd);
        assert!(
            !h.home.join("anything").exists(),
            "{name}=$HOME: home became writable\n{}",
            show(&out)
        );
        assert!(h.project.join("granted").is_file(), "{}", show(&out));
        assert!(
            stderr(&out).contains(&format!("${name}=")),
            "{name}: the warning does not name the variable\n{}",
            show(&out)
        );
        fs::remove_file(h.project.join("granted")).expect("rm");
    }
}

#[test]
fn run_in_home_without_project_refuses_and_runs_nothing() {
    let h = FakeHome::new();
    let marker = h.home.join("marker");
    for cwd in [h.home.clone(), "/".into(), h.home.join("..")] {
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--", "sh", "-c"])
            .arg(format!("touch '{}'", marker.display()));
        h.env(&mut cmd);
        cmd.current_dir(&cwd);
        let out = output(&mut cmd);
        assert_eq!(out.status.code(), Some(4), "{cwd:?}\n{}", show(&out));
        assert!(!marker.exists(), "{cwd:?}: the command ran\n{}", show(&out));
        assert!(stderr(&out).contains("--project"), "{}", show(&out));
    }
    // Named explicitly, it runs, loudly.
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--project"])
        .arg(&h.home)
        .args(["--", "sh", "-c"])
        .arg(format!("touch '{}'", marker.display()));
    h.env(&mut cmd);
    cmd.current_dir(&h.home);
    let out = output(&mut cmd);
    assert_success(&out);
    assert!(marker.exists(), "--project ~ did not run\n{}", show(&out));
    assert!(
        stderr(&out).contains(&format!(
            "the home directory {} is writable",
            h.home.display()
        )),
        "no loud warning\n{}",
        show(&out)
    );
    // And from the project itself, without --project, it runs quietly.
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--", "sh", "-c", "touch in-project"]);
    h.env(&mut cmd);
    let out = output(&mut cmd);
    assert_success(&out);
    assert!(h.project.join("in-project").is_file());
}

#[test]
fn the_cache_home_own_files_are_refused_and_its_directories_granted() {
    let h = FakeHome::new();
    let cache = h.home.join(".cache");
    let p10k = cache.join("p10k-instant-prompt-me.zsh");
    fs::create_dir_all(cache.join("go-build")).expect("mkdir");
    fs::write(&p10k, "# instant prompt\n").expect("p10k");
    let out = h.sh(&format!(
        "echo 'rm -rf ~' >> '{p}'; echo x > '{c}/new-top-level'; mkdir '{c}/new-dir'; \
         echo cached > '{c}/go-build/entry'",
        p = p10k.display(),
        c = cache.display()
    ));
    assert_eq!(
        fs::read_to_string(&p10k).expect("p10k"),
        "# instant prompt\n",
        "the p10k file was changed\n{}",
        show(&out)
    );
    assert!(!cache.join("new-top-level").exists(), "{}", show(&out));
    assert!(!cache.join("new-dir").exists(), "{}", show(&out));
    assert_eq!(
        fs::read_to_string(cache.join("go-build/entry"))
            .ok()
            .as_deref(),
        Some("cached\n"),
        "a cache directory was not writable\n{}",
        show(&out)
    );
}

#[test]
fn a_fresh_home_gets_the_caches_of_installed_toolchains_only() {
    let h = FakeHome::new();
    let go = require_tool("go", "golang-go");
    assert!(go.is_file());
    let out = h.run(&[OsStr::new("-v")], &["true"]);
    assert_success(&out);
    let cache = h.home.join(".cache");
    assert!(cache.join("go-build").is_dir(), "{}", show(&out));
    // Removed later, it is made again: the cache home changed since the
    // toolchains were last looked up.
    fs::remove_dir(cache.join("go-build")).expect("rm go-build");
    let again = h.run(&[], &["true"]);
    assert_success(&again);
    assert!(cache.join("go-build").is_dir(), "{}", show(&again));
    // Nothing for a toolchain this machine does not have.
    for (tool, dir) in [("zig", "zig"), ("deno", "deno"), ("bazel", "bazel")] {
        let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .any(|d| d.join(tool).is_file());
        assert_eq!(cache.join(dir).is_dir(), on_path, "{dir}\n{}", show(&out));
    }
}

fn git(dir: &Path, h: &FakeHome, args: &[&str]) {
    let mut cmd = Command::new("git");
    h.env(&mut cmd);
    cmd.current_dir(dir).args(args);
    assert_success(&output(&mut cmd));
}

#[test]
fn a_linked_worktree_works_and_its_main_repository_keeps_hooks_and_config() {
    require_tool("git", "git");
    let h = FakeHome::new();
    let remote = h.home.join("remote");
    let main = h.home.join("main");
    fs::create_dir_all(&remote).expect("mkdir");
    git(&remote, &h, &["init", "-q", "-b", "main"]);
    fs::write(remote.join("a"), "a\n").expect("a");
    git(&remote, &h, &["add", "a"]);
    git(&remote, &h, &["commit", "-qm", "a"]);
    git(&remote, &h, &["branch", "other"]);
    fs::write(remote.join("b"), "b\n").expect("b");
    git(&remote, &h, &["add", "b"]);
    git(&remote, &h, &["commit", "-qm", "b"]);
    git(&h.home, &h, &["clone", "-q", "remote", "main"]);
    fs::remove_dir(&h.project).expect("rm the empty project");
    git(
        &main,
        &h,
        &[
            "worktree",
            "add",
            "-q",
            &h.project.to_string_lossy(),
            "-b",
            "feature",
        ],
    );
    let config_before = fs::read(main.join(".git/config")).expect("config");

    let out = h.sh("set -e; echo c > c; git add c; git commit -qm c; \
         git fetch -q ../remote other:refs/remotes/up/other; \
         echo d >> c; git stash -q; git stash pop -q; git commit -qam d; \
         git rebase -q up/other; git branch topic; echo ALL-OK");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ALL-OK"),
        "git in the linked worktree failed\n{}",
        show(&out)
    );
    // The commits landed in the common object store, the refs in its refs/.
    assert!(
        main.join(".git/refs/heads/topic").is_file(),
        "{}",
        show(&out)
    );
    assert!(
        main.join(".git/refs/remotes/up/other").is_file(),
        "{}",
        show(&out)
    );

    // The main repository's hooks and config stay read-only.
    let out = h.sh(&format!(
        "echo 'rm -rf ~' > '{g}/hooks/pre-commit'; echo '[core] hooksPath = /x' >> '{g}/config'; \
         echo granted > '{g}/refs/heads/granted-probe'",
        g = main.join(".git").display()
    ));
    assert!(
        !main.join(".git/hooks/pre-commit").exists(),
        "{}",
        show(&out)
    );
    assert_eq!(
        fs::read(main.join(".git/config")).expect("config"),
        config_before
    );
    assert!(
        main.join(".git/refs/heads/granted-probe").is_file(),
        "{}",
        show(&out)
    );
    fs::remove_file(main.join(".git/refs/heads/granted-probe")).expect("rm");

    // Measured: deleting a ref locks `packed-refs` in the common dir itself,
    // which only the whole common dir could grant. It is refused, and says so.
    let out = h.sh("git branch -q -D topic");
    assert!(!out.status.success(), "{}", show(&out));
    assert!(stderr(&out).contains("packed-refs.lock"), "{}", show(&out));
    assert!(main.join(".git/refs/heads/topic").is_file());
}

#[test]
fn a_worktree_repointing_its_git_file_at_the_main_repository_gets_no_hooks() {
    let h = FakeHome::new();
    let r = real_repositories(&h);
    let main_git = r.main.join(".git");
    let hook = main_git.join("hooks/post-checkout");
    // The granted halves: `git commit` works confined in the real linked
    // worktree and in the real submodule.
    let commit = "set -e; echo c > c; git add c; git commit -qm c; echo COMMITTED";
    let out = h.sh(commit);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("COMMITTED"),
        "commit in the linked worktree\n{}",
        show(&out)
    );
    let out = output(&mut h.run_command(&r.sub, &[], &["sh", "-c", commit]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("COMMITTED"),
        "commit in the submodule\n{}",
        show(&out)
    );

    // The attack, from inside the sandbox, where the project is writable.
    assert_success(&h.sh(&format!(
        "mv .git .git.old && echo 'gitdir: {}' > .git",
        main_git.display()
    )));
    // The next sandbox grants nothing of the main repository's git dir.
    let out = h.sh(&format!(
        "echo 'touch ~/pwned' > '{}'; echo granted > granted",
        hook.display()
    ));
    assert!(!hook.exists(), "the hook was planted\n{}", show(&out));
    assert!(h.project.join("granted").is_file(), "{}", show(&out));
    assert!(
        stderr(&out).contains("another working tree"),
        "no warning says why\n{}",
        show(&out)
    );
    let report = output(h.policy_command(&["--json"]).current_dir(&h.project));
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).expect("JSON");
    assert!(
        !granted_resolved(&report)
            .iter()
            .any(|g| hook.starts_with(g)),
        "{report:#}"
    );
    h.assert_sentinels_intact();
}
