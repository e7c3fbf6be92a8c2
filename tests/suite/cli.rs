//! The command line: flags, exit statuses, reports. Runs anywhere.

use std::process::Command;

use super::support::{BIN, FakeHome, output, show};

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
    let mut cmd = Command::new(BIN);
    cmd.arg("policy")
        .arg("--project")
        .arg(&h.project)
        .arg("--allow")
        .arg(&missing)
        .arg("--json");
    h.env(&mut cmd);
    let out = output(&mut cmd);
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

    let mut cmd = Command::new(BIN);
    cmd.arg("policy")
        .arg("--project")
        .arg(&h.project)
        .arg("--allow")
        .arg(&missing);
    h.env(&mut cmd);
    let text = String::from_utf8_lossy(&output(&mut cmd).stdout).into_owned();
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
    let out = h.run(&[], &["touch", "ran"]);
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
fn run_reports_a_missing_command_with_127_and_passes_statuses_through() {
    let h = FakeHome::new();
    let out = h.run(&[], &["no-such-command-anywhere"]);
    assert_eq!(out.status.code(), Some(127), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-command-anywhere"));
    let out = h.sh("exit 7");
    assert_eq!(out.status.code(), Some(7), "{}", show(&out));
    let out = h.run(&[], &[h.home.join(".bashrc").to_str().expect("utf-8")]);
    assert_eq!(
        out.status.code(),
        Some(126),
        "a non-executable file\n{}",
        show(&out)
    );
}
