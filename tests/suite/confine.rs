//! What a policy confines: a command run, a prepared policy's children,
//! the process itself (every thread) and a library session's commands
//! write in the project and nowhere else, with real toolchains and the
//! filesystem checked afterwards, while the caller stays free. Only
//! [`missing_roots_are_skipped_and_reported`] needs no Landlock.

use std::fs;
use std::path::Path;
use std::process::Command;

use strument_sandbox::{ApplyError, Policy, SkipReason};

use super::support::in_a_single_threaded_fork;
use super::support::require_landlock;
use super::support::sessions_parent;
use super::support::test_name;
use super::support::{FakeHome, assert_success, in_child, output, require_tool, show};
use super::support::{applied_environment, project_only};

/// A policy granting `h`'s project and `root`.
fn project_and(h: &FakeHome, root: &Path) -> Policy {
    Policy {
        writable: vec![h.project.clone().into(), root.to_path_buf().into()],
        ..Policy::default()
    }
}

#[test]
fn missing_roots_are_skipped_and_reported() {
    let h = FakeHome::new();
    let missing = h.home.join("not-yet");
    let report = project_and(&h, &missing).check().expect("absolute paths");
    assert_eq!(report.granted_paths(), [h.project.as_path()]);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].path, missing);
    assert_eq!(report.skipped[0].reason, SkipReason::Missing);
}

/// A worker thread started before `apply`, which then writes `name` in the
/// project and outside it (in the home) when told to; returns whether each
/// write worked.
fn worker_writing(
    h: &FakeHome,
    name: &str,
) -> (
    std::sync::mpsc::Sender<()>,
    std::thread::JoinHandle<(bool, bool)>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (inside, outside) = (h.project.join(name), h.home.join(name));
    let worker = std::thread::spawn(move || {
        rx.recv().expect("the go-ahead");
        (
            fs::write(&inside, "x").is_ok(),
            fs::write(&outside, "x").is_ok(),
        )
    });
    (tx, worker)
}

/// `apply` with a second thread running, where the probe says TSYNC is
/// missing: refused, naming the threads, and every thread left unconfined.
fn assert_refused_and_every_thread_free() {
    let h = FakeHome::new();
    let (go, worker) = worker_writing(&h, "worker-free");
    let result = Policy {
        writable: vec![h.project.clone().into()],
        ..Policy::default()
    }
    .apply();
    match result {
        Err(ApplyError::Threads { threads, .. }) => assert!(threads >= 2, "{threads}"),
        other => panic!("expected a refusal naming the threads, got {other:?}"),
    }
    // Refused means unconfined: this thread and the worker can still write
    // anywhere.
    fs::write(h.home.join("still-free"), "x").expect("refusal left the process confined");
    go.send(()).expect("worker waiting");
    let (inside, outside) = worker.join().expect("worker thread");
    assert!(
        inside && outside && h.home.join("worker-free").is_file(),
        "the worker was confined: inside {inside}, outside {outside}"
    );
}

/// Builds `examples/NAME.rs` with this test's features and profile, and
/// returns the executable (beside the test binary's `deps/`).
fn build_example(name: &str) -> std::path::PathBuf {
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .args(["build", "--quiet", "--features", "cli", "--example", name])
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
    if !cfg!(debug_assertions) {
        cargo.arg("--release");
    }
    assert_success(&output(&mut cargo));
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    profile.join("examples").join(name)
}

/// Real rulesets on this kernel, the filesystem checked afterwards.
mod needs_landlock {
    use super::*;

    #[test]
    fn the_session_directory_goes_with_the_last_clone_of_the_prepared_policy() {
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let clone = prepared.clone();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo \"$TMUX_TMPDIR\""]);
        prepared.confine(&mut cmd);
        let out = output(&mut cmd);
        assert_success(&out);
        let dir = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        assert!(
            dir.parent() == Some(sessions_parent().as_path()) && dir.is_dir(),
            "{}",
            show(&out)
        );
        // Kept while a clone can still start commands there.
        drop(prepared);
        assert!(dir.is_dir(), "removed while a clone of the policy lives");
        // Gone with the last one: an agent preparing a policy per task leaves
        // no directory behind.
        drop(clone);
        assert!(
            !dir.exists(),
            "an empty session directory stayed: {}",
            dir.display()
        );
    }

    #[test]
    fn the_session_variables_reach_the_child_beside_its_own_and_never_over_them() {
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let applied = applied_environment(&prepared);
        assert!(
            applied.len() >= 2,
            "fewer than two session variables apply in this test's environment: \
             nothing to compare ({} apply)",
            applied.len()
        );
        let (first, second) = (applied[0], applied[1]);
        let line = |variable: &str, value: &std::ffi::OsStr| {
            format!("{variable}={}", value.to_string_lossy())
        };
        // `env` confined, after `configure`; its variables, one per line.
        let env_of = |configure: &dyn Fn(&mut Command)| -> Vec<String> {
            let mut cmd = Command::new("/usr/bin/env");
            cmd.current_dir(&h.project);
            configure(&mut cmd);
            prepared.confine(&mut cmd);
            let out = output(&mut cmd);
            assert_success(&out);
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        };
        let named = |lines: &[String], variable: &str| -> Vec<String> {
            let prefix = format!("{variable}=");
            lines
                .iter()
                .filter(|l| l.starts_with(&prefix))
                .cloned()
                .collect()
        };
        // Nothing of its own: this process's environment and every session
        // variable, which `confine` left off the `Command` itself.
        let mut plain_cmd = Command::new("true");
        prepared.confine(&mut plain_cmd);
        assert_eq!(plain_cmd.get_envs().count(), 0);
        let plain = env_of(&|_| {});
        for s in &applied {
            assert_eq!(named(&plain, s.variable), [line(s.variable, &s.value)]);
        }
        let path = std::env::var_os("PATH").expect("PATH");
        assert_eq!(named(&plain, "PATH"), [line("PATH", &path)]);
        // Its own value for one: kept, once; the others beside it.
        let own = env_of(&|cmd| {
            cmd.env(first.variable, "mine");
        });
        assert_eq!(
            named(&own, first.variable),
            [format!("{}=mine", first.variable)]
        );
        assert_eq!(
            named(&own, second.variable),
            [line(second.variable, &second.value)]
        );
        // Removed by the command: left out.
        let removed = env_of(&|cmd| {
            cmd.env_remove(first.variable);
        });
        assert_eq!(named(&removed, first.variable), Vec::<String>::new());
        assert_eq!(
            named(&removed, second.variable),
            [line(second.variable, &second.value)]
        );
        // A cleared environment: the command's own variables, if any, and
        // the session's, nothing of this process's.
        let names_of = |lines: &[String]| -> Vec<String> {
            let mut names: Vec<String> = lines
                .iter()
                .filter_map(|l| l.split('=').next())
                .map(str::to_owned)
                .collect();
            names.sort_unstable();
            names
        };
        let session: Vec<String> = applied.iter().map(|s| s.variable.to_owned()).collect();
        let cleared = env_of(&|cmd| {
            cmd.env_clear().env("ONLY", "this");
        });
        let mut expected = session.clone();
        expected.push("ONLY".to_owned());
        expected.sort_unstable();
        assert_eq!(names_of(&cleared), expected);
        let mut expected = session;
        expected.sort_unstable();
        let only_cleared = env_of(&|cmd| {
            cmd.env_clear();
        });
        assert_eq!(names_of(&only_cleared), expected);
    }

    #[test]
    fn landlock_is_available_on_this_kernel() {
        // The precondition every test below asserts too, alone: when this
        // fails, the others' failures say nothing more.
        require_landlock();
    }

    #[test]
    fn rename_between_project_directories_works() {
        let h = FakeHome::new();
        let out = h.sh("mkdir -p a/deep b && echo x > a/deep/f && mv a/deep/f b/f && mv b a/b2");
        assert_success(&out);
        assert!(h.project.join("a/b2/f").is_file() && !h.project.join("a/deep/f").exists());
    }

    #[test]
    fn git_commits_in_the_project_and_in_a_worktree_whose_repository_is_outside() {
        require_tool("git", "git");
        let h = FakeHome::new();
        let git = |dir: &Path, args: &[&str]| {
            let mut cmd = Command::new("git");
            h.env(&mut cmd);
            cmd.current_dir(dir).args(args);
            let out = output(&mut cmd);
            assert_success(&out);
            out
        };
        // A plain repository in the project.
        git(&h.project, &["init", "-q", "-b", "main"]);
        let out = h.sh("echo a > a && git add a && git commit -qm in-project");
        assert_success(&out);
        let log = git(&h.project, &["log", "--format=%s"]);
        assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "in-project");

        // A linked worktree as the project; the main repository lives outside.
        let main = h.home_dir("repos/main");
        git(&main, &["init", "-q", "-b", "main"]);
        fs::write(main.join("README"), "main\n").expect("readme");
        git(&main, &["add", "README"]);
        git(&main, &["commit", "-qm", "root"]);
        let wt = h.home.join("wt-project");
        git(
            &main,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "feature",
                wt.to_str().expect("utf-8"),
            ],
        );
        let script = "echo b > b && git add b && git commit -qm in-worktree && echo evil > ../repos/main/README";
        let out = output(&mut h.run_command(&wt, &[], &["sh", "-c", script]));
        assert!(
            !out.status.success(),
            "writing the main worktree's files succeeded\n{}",
            show(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("ermission denied"),
            "{}",
            show(&out)
        );
        let log = git(&main, &["log", "--format=%s", "feature"]);
        assert_eq!(
            String::from_utf8_lossy(&log.stdout).lines().next(),
            Some("in-worktree")
        );
        assert_eq!(
            fs::read_to_string(main.join("README")).expect("read"),
            "main\n"
        );
    }

    #[test]
    fn dev_null_multiprocessing_and_mktemp_keep_working() {
        let python = require_tool("python3", "python3");
        let h = FakeHome::new();
        let out = h.sh(
        "echo discard > /dev/null && \
         f=$(mktemp) && echo t > \"$f\" && rm \"$f\" && d=$(mktemp -d) && rmdir \"$d\" && echo mktemp-ok",
    );
        assert_success(&out);
        assert!(String::from_utf8_lossy(&out.stdout).contains("mktemp-ok"));
        let script = "import multiprocessing as mp\n\
                  if __name__ == '__main__':\n    \
                      lock = mp.Lock()\n    \
                      with mp.Pool(2) as p:\n        \
                          open('squares', 'w').write(repr(p.map(abs, [-1, -2, 3])))\n";
        let out = h.run(&[], &[python.to_str().expect("utf-8"), "-c", script]);
        assert_success(&out);
        assert_eq!(h.project_file("squares"), "[1, 2, 3]");
    }

    #[test]
    fn a_root_created_after_apply_stays_unwritable() {
        let h = FakeHome::new();
        require_landlock();
        let later = h.home.join("later");
        let prepared = project_and(&h, &later).prepare().expect("prepare");
        assert_eq!(prepared.report().skipped.len(), 1);
        fs::create_dir(&later).expect("create the root after the ruleset is built");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo no > \"$1\"/file; echo yes > project-file", "sh"])
            .arg(&later);
        cmd.current_dir(&h.project);
        prepared.confine(&mut cmd);
        let out = output(&mut cmd);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("ermission denied"),
            "{}",
            show(&out)
        );
        assert!(
            !later.join("file").exists(),
            "a root created after apply became writable"
        );
        assert!(
            h.project.join("project-file").is_file(),
            "the project was not writable"
        );
        // And the caller was not confined.
        fs::write(h.home.join("caller-still-free"), "x").expect("the parent stays unconfined");
    }

    /// `apply` starts the connect supervisor's helper without making it the
    /// caller's child: afterwards the caller has no child at all (no zombie of
    /// the intermediate, no helper a `wait` for any child would block on), no
    /// `SIGCHLD` came (blocked, it would be pending), and a caller that
    /// ignores `SIGCHLD` (whose children the kernel reaps itself) can apply
    /// too. Each case confines: the write in the project lands, the one
    /// outside it is refused and leaves nothing.
    #[test]
    fn apply_leaves_the_caller_no_child_and_no_sigchld() {
        let setup = std::env::var_os("AP_PROJECT").is_none().then(FakeHome::new);
        let out = crate::suite::roles::body_in_child(
            test_name!(apply_leaves_the_caller_no_child_and_no_sigchld),
            |cmd| {
                if let Some(h) = &setup {
                    cmd.env("AP_PROJECT", &h.project).env("AP_HOME", &h.home);
                }
            },
            || {
                require_landlock();
                let project =
                    std::path::PathBuf::from(std::env::var("AP_PROJECT").expect("AP_PROJECT"));
                let home = std::path::PathBuf::from(std::env::var("AP_HOME").expect("AP_HOME"));
                for (case, ignore) in [("blocked", false), ("ignored", true)] {
                    in_a_single_threaded_fork(|| {
                        // SAFETY: plain signal-mask and disposition calls in
                        // this single-threaded child.
                        unsafe {
                            if ignore {
                                libc::signal(libc::SIGCHLD, libc::SIG_IGN);
                            } else {
                                let mut set: libc::sigset_t = std::mem::zeroed();
                                libc::sigemptyset(&raw mut set);
                                libc::sigaddset(&raw mut set, libc::SIGCHLD);
                                libc::sigprocmask(
                                    libc::SIG_BLOCK,
                                    &raw const set,
                                    std::ptr::null_mut(),
                                );
                            }
                        }
                        Policy {
                            writable: vec![project.clone().into()],
                            ..Policy::default()
                        }
                        .apply()
                        .unwrap_or_else(|e| panic!("apply with SIGCHLD {case}: {e}"));
                        // SAFETY: as above; `pending` is written by the kernel.
                        let (pending, waited, errno) = unsafe {
                            let mut pending: libc::sigset_t = std::mem::zeroed();
                            libc::sigpending(&raw mut pending);
                            let waited = libc::waitpid(
                                -1,
                                std::ptr::null_mut(),
                                libc::WNOHANG | libc::__WALL,
                            );
                            let errno = std::io::Error::last_os_error().raw_os_error();
                            (
                                libc::sigismember(&raw const pending, libc::SIGCHLD),
                                waited,
                                errno,
                            )
                        };
                        assert_eq!(pending, 0, "SIGCHLD {case}: a SIGCHLD came from apply");
                        assert_eq!(
                            (waited, errno),
                            (-1, Some(libc::ECHILD)),
                            "SIGCHLD {case}: apply left the caller a child"
                        );
                        fs::write(project.join(case), "x").expect("write in the project");
                        let outside = home.join(case);
                        fs::write(&outside, "x").expect_err("wrote outside the project");
                        assert!(!outside.exists(), "{} exists", outside.display());
                    });
                }
            },
        );
        let (Some(out), Some(h)) = (out, setup) else {
            return;
        };
        assert_success(&out);
        for case in ["blocked", "ignored"] {
            assert!(h.project.join(case).is_file(), "{case}: {}", show(&out));
            assert!(!h.home.join(case).exists(), "{case}: {}", show(&out));
        }
    }

    /// On this kernel as it is: from ABI 8 (TSYNC) `apply` confines every
    /// thread, a worker started before it included (its write outside the
    /// project fails and leaves nothing, its write inside lands); below ABI 8
    /// it is refused and every thread stays free. The portable VM tier's 7.x
    /// guest runs the TSYNC side too (tests/vm/checks/sid/tsync-threads.sh).
    #[test]
    fn apply_in_a_multithreaded_process_confines_every_thread_or_is_refused() {
        in_child(
            test_name!(apply_in_a_multithreaded_process_confines_every_thread_or_is_refused),
            || {
                let a = require_landlock();
                if !a.all_threads() {
                    return assert_refused_and_every_thread_free();
                }
                let h = FakeHome::new();
                let (go, worker) = worker_writing(&h, "worker-write");
                let report = Policy {
                    writable: vec![h.project.clone().into()],
                    ..Policy::default()
                }
                .apply()
                .expect("ABI 8 confines every thread");
                assert!(report.landlock.all_threads());
                go.send(()).expect("worker waiting");
                let (inside, outside) = worker.join().expect("worker thread");
                assert!(
                    inside && h.project.join("worker-write").is_file(),
                    "the worker could not write in the project"
                );
                assert!(
                    !outside && !h.home.join("worker-write").exists(),
                    "a thread started before apply wrote outside the project"
                );
            },
        );
    }

    /// The refusal on every host: the ABI capped at 7 in the child (a debug
    /// build's `STRUMENT_SANDBOX_TEST_ABI_CAP`), whatever the kernel offers.
    #[test]
    fn apply_in_a_multithreaded_process_without_tsync_is_refused() {
        crate::suite::roles::body_in_child(
            test_name!(apply_in_a_multithreaded_process_without_tsync_is_refused),
            |cmd| {
                cmd.env("STRUMENT_SANDBOX_TEST_ABI_CAP", "7");
            },
            || {
                let a = require_landlock();
                assert!(
                    !a.all_threads(),
                    "STRUMENT_SANDBOX_TEST_ABI_CAP=7 did not cap the ABI below TSYNC (a debug build \
                 is needed): {a:?}"
                );
                assert_refused_and_every_thread_free();
            },
        );
    }

    /// examples/tokio_agent.rs: an agent on tokio opens one `Session` and
    /// confines 32 commands it runs at once through it. Each child's write in
    /// the project lands and its write outside is refused, while the agent,
    /// whose runtime threads were never confined, still writes outside.
    #[test]
    fn an_async_agent_confines_32_children_and_stays_unconfined() {
        async_agent(&[], "fifo");
    }

    /// The same agent starting its children with `Spawn` (no `fork`),
    /// waiting for each on a blocking thread, its output over a socket
    /// (which each child names: the path it came by).
    #[test]
    fn an_async_agent_spawning_its_32_children_confines_them_the_same() {
        async_agent(&["--spawn"], "socket");
    }

    /// Runs examples/tokio_agent.rs with `flags`; each child's standard
    /// output must be of the kind `output_kind` (`stat`'s `%F`).
    fn async_agent(flags: &[&str], output_kind: &str) {
        let home = FakeHome::new();
        let outside = home.home.join("outside");
        fs::create_dir(&outside).expect("mkdir outside");
        require_landlock();
        let example = build_example("tokio_agent");
        let mut cmd = Command::new(&example);
        home.env(&mut cmd);
        cmd.args(flags).arg(&home.project).arg(&outside).arg("32");
        let out = output(&mut cmd);
        assert_success(&out);
        // Each child's own report: its write outside failed (the shell's
        // status 2, or 1), read back from its standard output.
        let stdout = String::from_utf8_lossy(&out.stdout);
        for i in 0..32 {
            let line = stdout
                .lines()
                .find(|l| l.starts_with(&format!("child {i}: ")))
                .unwrap_or_else(|| panic!("no line for child {i}\n{}", show(&out)));
            assert!(
                line.contains("write outside exited 2,")
                    || line.contains("write outside exited 1,"),
                "{line}"
            );
            assert!(
                line.ends_with(&format!("its output a {output_kind}")),
                "{line}"
            );
        }
        for i in 0..32 {
            let inside = home.project.join(format!("child-{i}"));
            let written = fs::read_to_string(&inside)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", inside.display(), show(&out)));
            assert_eq!(written, format!("child {i}\n"));
            assert!(
                !outside.join(format!("child-{i}")).exists(),
                "child {i} wrote outside the project\n{}",
                show(&out)
            );
        }
        assert_eq!(
            fs::read_to_string(outside.join("agent")).expect("the agent's own write outside"),
            "written by the agent\n"
        );
        home.assert_sentinels_intact();
    }

    /// The library's entrance: a session over a project runs its command
    /// confined (a write in the project lands, one in the home is refused),
    /// reports the hook the command planted exactly once, and leaves the caller
    /// free to write where the command could not.
    #[test]
    fn a_session_confines_its_command_and_reports_a_planted_hook_once() {
        let h = FakeHome::new();
        fs::create_dir_all(h.project.join(".git/hooks")).expect("mkdir .git/hooks");
        let outside = h.home.join("outside");
        require_landlock();
        let session = strument_sandbox::Session::builder(&h.project)
            .create_caches(false)
            .open()
            .expect("Landlock is here");
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            r#"echo in > kept; echo hook > .git/hooks/pre-commit; echo out > "$0""#,
        ])
        .arg(&outside)
        .current_dir(&h.project);
        let finished = session.run(&mut cmd).expect("sh runs");
        assert!(!finished.status.success(), "the write outside was refused");
        assert_eq!(h.project_file("kept"), "in\n");
        assert!(!outside.exists(), "the command wrote in the home");
        let names: Vec<_> = finished.changes.iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, [Path::new(".git/hooks/pre-commit")]);
        assert!(session.changes().is_empty(), "reported twice");
        fs::write(&outside, "the caller\n").expect("the caller is not confined");
        h.assert_sentinels_intact();
    }
}
