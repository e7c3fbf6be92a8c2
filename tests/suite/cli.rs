//! The command line: flags, exit statuses, reports. Runs anywhere.

use std::ffi::OsStr;
use std::process::{Command, Stdio};

use super::support::{BIN, FakeHome, assert_exit, output, show};

fn cli(args: &[&str]) -> std::process::Output {
    output(Command::new(BIN).args(args))
}

#[test]
fn help_teaches_with_examples_and_exit_statuses() {
    let out = cli(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["probe", "policy", "run", "Examples:", "Exit status:", "127"] {
        assert!(text.contains(needle), "--help lacks {needle:?}\n{text}");
    }
    let out = cli(&["run", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--allow"));
}

#[test]
fn usage_errors_exit_2_and_name_the_problem() {
    for (args, needle) in [
        (&["run", "--allow"][..], "--allow"),
        (&["run", "--project"][..], "--project"),
        (&["run", "--frobnicate", "--", "true"][..], "--frobnicate"),
        (&["run", "true"][..], "CMD"),
        (&["run"][..], "CMD"),
        (&["policy", "--state"][..], "--state"),
        (&["bogus"][..], "bogus"),
    ] {
        let out = cli(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}\n{}",
            show(&out)
        );
    }
}

#[test]
fn probe_json_agrees_with_the_library() {
    let out = cli(&["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let a = strument_sandbox::probe();
    assert_eq!(v["abi"], a.abi);
    assert_eq!(v["supported"], a.supported());
    assert_eq!(out.status.code(), Some(if a.supported() { 0 } else { 3 }));
}

#[test]
fn policy_lists_granted_and_skipped_roots_with_reasons() {
    let h = FakeHome::new();
    let missing = h.home.join("missing-cache");
    let allow = [OsStr::new("--allow"), missing.as_os_str()];
    let out = output(h.policy_command(&allow).arg("--json"));
    assert!(out.status.success(), "{}", show(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let granted: Vec<&str> = v["granted"]
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|g| g["path"].as_str())
        .collect();
    assert!(granted.contains(&h.project.to_str().expect("utf-8")));
    assert!(
        granted.contains(&"/dev/null") && granted.contains(&"/tmp"),
        "{granted:?}"
    );
    assert!(
        !granted
            .iter()
            .any(|g| g.ends_with(".cargo/bin") || g.ends_with(".cargo")),
        "{granted:?}"
    );
    let skipped = v["skipped"].as_array().expect("array");
    let entry = skipped
        .iter()
        .find(|s| s["path"] == missing.to_str().expect("utf-8"))
        .expect("the missing --allow root is reported");
    assert_eq!(entry["reason"], "missing");

    let text = String::from_utf8_lossy(&output(&mut h.policy_command(&allow)).stdout).into_owned();
    assert!(
        text.contains("skipped") && text.contains("does not exist"),
        "{text}"
    );
}

#[test]
fn bad_paths_are_refused_with_the_path_named() {
    let h = FakeHome::new();
    let file = h.home.join(".bashrc");
    let mut cmd = Command::new(BIN);
    cmd.arg("policy").arg("--project").arg(&file);
    h.env(&mut cmd);
    let out = output(&mut cmd);
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(".bashrc") && err.contains("not a directory"),
        "{err}"
    );

    std::fs::write(h.project.join(".git"), "this is not a gitdir pointer\n").expect("garbage .git");
    // Refused before anything is confined: no Landlock needed.
    let out = output(&mut h.refused_run_command(&h.project, &[], &["touch", "ran"]));
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(".git"),
        "{}",
        show(&out)
    );
    assert!(
        !h.project.join("ran").exists(),
        "the command ran despite a policy error"
    );
}

#[test]
fn every_flag_without_its_value_and_every_unknown_flag_is_a_usage_error_and_nothing_runs() {
    let h = FakeHome::new();
    let marker = h.project.join("ran");
    let marker = marker.to_str().expect("utf-8");
    let touch = ["--", "touch", marker];
    // The cases `usage_errors_exit_2_and_name_the_problem` does not cover.
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            ["run", "--state"].iter().chain(&touch).copied().collect(),
            "--state",
        ),
        (
            ["run", "--project"].iter().chain(&touch).copied().collect(),
            "--project",
        ),
        (
            ["run", "--allow"].iter().chain(&touch).copied().collect(),
            "--allow",
        ),
        (vec!["run", "--explain-denials", "touch", marker], "CMD"),
        (
            vec!["run", "--verbose=yes", "--", "touch", marker],
            "--verbose",
        ),
        (vec!["policy", "--project"], "--project"),
        (vec!["policy", "--allow"], "--allow"),
        (vec!["policy", "--frobnicate"], "--frobnicate"),
        (vec!["explain", "--project"], "--project"),
        (vec!["explain", "--state"], "--state"),
        (vec!["explain", "--allow"], "--allow"),
        (vec!["explain", "--frobnicate", "/tmp"], "--frobnicate"),
        (vec!["explain"], "PATH"),
        (vec!["probe", "--frobnicate"], "--frobnicate"),
        (vec!["probe", "extra"], "extra"),
        (vec![], "Usage"),
    ];
    for (args, needle) in cases {
        let mut cmd = Command::new(BIN);
        cmd.args(&args);
        h.env(&mut cmd);
        let out = output(&mut cmd);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?} does not name {needle:?}\n{}",
            show(&out)
        );
        assert!(!h.project.join("ran").exists(), "{args:?} ran the command");
    }
}

fn explain(h: &FakeHome, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("explain")
        .arg("--project")
        .arg(&h.project)
        .args(args);
    h.env(&mut cmd);
    output(&mut cmd)
}

#[test]
fn explain_says_which_root_grants_a_write_or_what_to_allow() {
    let h = FakeHome::new();
    let later = h.home.join("later");
    let inside = h.project.join("src/main.rs");
    let bashrc = h.home.join(".bashrc");
    let out = explain(&h, &[inside.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "writable, granted by {} (directory)",
            h.project.display()
        )),
        "{text}"
    );

    let out = explain(
        &h,
        &[
            "--allow".as_ref(),
            later.as_os_str(),
            inside.as_os_str(),
            bashrc.as_os_str(),
            later.join("x").as_os_str(),
        ],
    );
    assert_exit(&out, 1, "one path is not writable");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("to allow it: --allow {}", bashrc.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "the policy lists {}, but it grants nothing",
            later.display()
        )),
        "{text}"
    );

    // --json, and a relative path taken against the current directory.
    let out = explain(
        &h,
        &[
            "--json".as_ref(),
            "../.bashrc".as_ref(),
            "new-file".as_ref(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let paths = v["paths"].as_array().expect("array");
    assert_eq!(paths[0]["writable"], false);
    assert_eq!(paths[0]["checked"], bashrc.to_str().expect("utf-8"));
    assert_eq!(paths[0]["denied"]["allow"], bashrc.to_str().expect("utf-8"));
    assert_eq!(paths[1]["writable"], true);
    assert_eq!(paths[1]["exists"], false);
    assert_eq!(
        paths[1]["granted_by"]["path"],
        h.project.to_str().expect("utf-8")
    );
}

#[test]
fn explain_refuses_a_path_that_cannot_resolve_with_4_and_the_path_named() {
    let h = FakeHome::new();
    let looped = h.project.join("loop");
    std::os::unix::fs::symlink("loop", &looped).expect("symlink loop");
    let out = explain(&h, &[looped.as_os_str()]);
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("loop") && err.contains("cannot resolve"),
        "{err}"
    );
}

#[test]
fn a_closed_standard_output_ends_quietly_instead_of_panicking() {
    for args in [&["policy"][..], &["probe"][..], &["probe", "--json"][..]] {
        let out = output(Command::new(BIN).args(args).stdout(a_pipe_nobody_reads()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}\n{}", show(&out));
        assert_eq!(out.status.code(), Some(141), "{args:?}\n{}", show(&out));
    }
}

/// The write end of a pipe whose read end is closed, so that every write to
/// it fails with EPIPE. `std::io::pipe` would say this directly but needs
/// Rust 1.87, above the crate's `rust-version`: instead a child that exits
/// at once holds the only read end (std's pipes are close-on-exec), and
/// once it is reaped the write end is left with no reader.
fn a_pipe_nobody_reads() -> Stdio {
    let mut reader = Command::new("true")
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn `true` to hold the read end of a pipe");
    let writer = reader.stdin.take().expect("the child's piped stdin");
    let status = reader.wait().expect("reap `true`");
    assert!(status.success(), "`true` exited {status}");
    Stdio::from(writer)
}

/// A relative `SSH_AUTH_SOCK` names nothing a rule could anchor to: it is
/// left out of the socket list, as a relative cache variable is, instead of
/// failing the whole policy; an absolute one is listed.
#[test]
fn a_relative_ssh_auth_sock_is_ignored_and_an_absolute_one_listed() {
    let h = FakeHome::new();
    let sockets = |value: &str| {
        let mut cmd = h.policy_command(&["--json"]);
        cmd.env("SSH_AUTH_SOCK", value);
        let out = output(&mut cmd);
        assert!(
            out.status.success(),
            "SSH_AUTH_SOCK={value}\n{}",
            show(&out)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let mut paths: Vec<String> = Vec::new();
        for key in ["sockets", "skipped_sockets"] {
            for s in v[key].as_array().expect("a socket list") {
                paths.push(s["path"].as_str().expect("a path").to_string());
            }
        }
        paths
    };
    assert!(
        !sockets("agent.sock")
            .iter()
            .any(|p| p.ends_with("agent.sock"))
    );
    let absolute = h.home.join("agent.sock");
    let absolute = absolute.to_str().expect("UTF-8");
    assert!(sockets(absolute).iter().any(|p| p == absolute));
}

/// `run` applies before it execs, so these CLI behaviours need Landlock.
mod needs_landlock {
    use super::*;

    #[test]
    fn run_reports_a_missing_command_with_127_and_passes_statuses_through() {
        let h = FakeHome::new();
        let out = h.run(&[], &["no-such-command-anywhere"]);
        assert_eq!(out.status.code(), Some(127), "{}", show(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-command-anywhere"));
        let out = h.sh("exit 7");
        assert_eq!(out.status.code(), Some(7), "{}", show(&out));
        let out = h.run(&[], &[h.home.join(".bashrc").to_str().expect("utf-8")]);
        assert_exit(&out, 126, "a non-executable file");
    }

    #[test]
    fn run_adopts_what_the_command_leaves_running_and_reaps_it_when_it_ends() {
        // Under Yama's ptrace_scope 1 (Ubuntu's default) the connect
        // supervisor may take sockets only from its descendants, so a
        // process the command leaves must stay one: tests/vm/checks/yama.sh
        // proves its connects in a guest with Yama; this, the adoption and
        // the reaping, on any kernel.
        let h = FakeHome::new();
        let script = r#"
            ( sh -c 'sleep 0.3; echo "$$ $(cut -d" " -f4 /proc/$$/stat)" > orphan.txt' & )
            i=0
            while [ ! -s orphan.txt ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
            sleep 0.5
            read -r pid parent < orphan.txt
            if [ -e "/proc/$pid" ]; then echo "left: $(cut -d' ' -f3 "/proc/$pid/stat")"; else echo reaped; fi
            echo "parent: $parent"
        "#;
        // Traced too: there the tracer, a thread of `run`, reaps them.
        for flags in [&[][..], &["--explain-denials".as_ref()][..]] {
            let _ = std::fs::remove_file(h.project.join("orphan.txt"));
            let mut cmd = h.run_command(&h.project, flags, &["sh", "-c", script]);
            let child = cmd
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run");
            let run = child.id();
            let out = child.wait_with_output().expect("wait");
            assert!(out.status.success(), "{flags:?}: {}", show(&out));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains(&format!("parent: {run}\n")),
                "{flags:?}: the process the command left was not adopted by run (pid {run})\n{}",
                show(&out)
            );
            assert!(
                stdout.contains("reaped\n"),
                "{flags:?}: the adopted process was not reaped once it ended\n{}",
                show(&out)
            );
        }
    }

    #[test]
    fn a_filesystem_root_is_warned_about_loudly_even_without_verbose() {
        let h = FakeHome::new();
        let out = h.run(&["--allow".as_ref(), "/".as_ref()], &["true"]);
        assert!(out.status.success(), "{}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("confines nothing"),
            "{}",
            show(&out)
        );
        // The granted/denied pair: without `/`, the same run prints nothing but
        // the services a command can reach on this machine (ABI < 9), if any.
        let out = h.run(&[], &["true"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success()
                && stderr
                    .lines()
                    .all(|l| l.starts_with("strument-sandbox: reachable: ")),
            "{}",
            show(&out)
        );
    }
}
