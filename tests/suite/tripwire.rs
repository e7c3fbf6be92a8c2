//! Files that run later, outside the sandbox: `run` reports each change to
//! them once, and the library reports the same; `run` waits for its
//! command, passing signals on and keeping job control. Needs Landlock
//! (`run` refuses without it), so the nix-build profile leaves it out.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use strument_sandbox::tripwire::Snapshot;

use super::support::require_landlock;
use super::support::{
    BIN, FakeHome, assert_exit, assert_stdout, assert_success, output, require_tool, show,
};

/// The files the tripwire watches, relative to the project, with the git
/// directories they need made beforehand.
const WATCHED: [&str; 9] = [
    ".git/hooks/pre-commit",
    ".git/config.worktree",
    ".git/info/attributes",
    ".git/modules/libs/tls/hooks/post-checkout",
    ".git/modules/libs/tls/config",
    ".git/worktrees/feature/config.worktree",
    ".envrc",
    ".vscode/tasks.json",
    ".vscode/settings.json",
];

/// A fake home whose project is a git repository (`git init`), with a
/// submodule's git directory and a linked worktree's.
fn repository() -> FakeHome {
    require_tool("git", "git");
    let h = FakeHome::new();
    let mut init = Command::new("git");
    h.env(&mut init);
    assert_success(&output(init.args(["init", "-q", "."])));
    let sub = h.project.join(".git/modules/libs/tls");
    fs::create_dir_all(sub.join("hooks")).expect("submodule git dir");
    fs::write(sub.join("HEAD"), "ref: refs/heads/main\n").expect("submodule HEAD");
    fs::create_dir_all(h.project.join(".git/worktrees/feature")).expect("worktree git dir");
    fs::create_dir_all(h.project.join(".vscode")).expect(".vscode");
    h
}

/// The lines `run` added to standard error about files that run later.
fn reported(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("strument-sandbox: ") && l.contains(" was "))
        .map(str::to_owned)
        .collect()
}

// --- Waiting for the command: signals and job control.

/// `run -- argv` from the project, started with the signals at their
/// default dispositions.
#[track_caller]
fn spawn_run(h: &FakeHome, argv: &[&str]) -> Child {
    require_landlock();
    let mut cmd = Command::new(BIN);
    cmd.arg("run")
        .arg("--project")
        .arg(&h.project)
        .arg("--")
        .args(argv);
    h.env(&mut cmd);
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    cmd.spawn().expect("spawn run")
}

/// The pid of `pid`'s only child, once it has one.
fn child_of(pid: u32) -> u32 {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = fs::read_to_string(&path).unwrap_or_default();
        if let Some(child) = children.split_whitespace().next() {
            return child.parse().expect("a pid");
        }
        assert!(Instant::now() < deadline, "{pid} started no command");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The state letter of `/proc/PID/stat` (`S`, `R`, `T` for stopped, …).
fn state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(") ")?.1;
    after.chars().next()
}

fn wait_for_state(pid: u32, want: impl Fn(Option<char>) -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !want(state(pid)) {
        assert!(
            Instant::now() < deadline,
            "{pid} never {what}: {:?}",
            state(pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill(signal: &str, pid: u32) {
    let kill = require_tool("kill", "procps");
    let out = output(Command::new(kill).args([&format!("-{signal}"), &pid.to_string()]));
    assert_success(&out);
}

/// Runs `run -- python3 -c COUNTER` on a new terminal, waits for the
/// counter to say it is ready, then does `act` (write Ctrl-C to the
/// terminal, or `kill -INT` run), and returns run's exit status, which is
/// the number of SIGINTs the command received.
fn sigints_received(h: &FakeHome, act: &str) -> i64 {
    let python = require_tool("python3", "python3");
    const COUNTER: &str = "import signal, sys, time\n\
        n = 0\n\
        def count(*_):\n    global n\n    n += 1\n\
        signal.signal(signal.SIGINT, count)\n\
        print('ready', flush=True)\n\
        deadline = time.time() + 10\n\
        while n == 0 and time.time() < deadline:\n    time.sleep(0.01)\n\
        time.sleep(0.5)  # time for a second copy to arrive\n\
        sys.exit(n)\n";
    const DRIVER: &str = "import os, pty, signal, sys, time\n\
        bin, project, counter, act = sys.argv[1:5]\n\
        pid, fd = pty.fork()\n\
        if pid == 0:\n    os.execv(bin, [bin, 'run', '--project', project, '--', sys.executable, '-c', counter])\n\
        out = b''\n\
        deadline = time.time() + 20\n\
        while b'ready' not in out and time.time() < deadline:\n    out += os.read(fd, 1024)\n\
        if act == 'ctrl-c':\n    os.write(fd, b'\\x03')\n\
        else:\n    os.kill(pid, signal.SIGINT)\n\
        try:\n    while True:\n        chunk = os.read(fd, 1024)\n        if not chunk: break\n        out += chunk\n\
        except OSError:\n    pass\n\
        _, status = os.waitpid(pid, 0)\n\
        sys.stderr.write(out.decode(errors='replace'))\n\
        print(os.waitstatus_to_exitcode(status))\n";
    let mut cmd = Command::new(python);
    cmd.args(["-c", DRIVER, BIN])
        .arg(&h.project)
        .args([COUNTER, act]);
    let out = output(&mut cmd);
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("an exit status\n{}", show(&out)))
}

mod needs_landlock {
    use super::*;

    #[test]
    fn run_reports_each_change_to_a_file_that_runs_later_exactly_once() {
        let h = repository();
        // In order, each step leaves the file ready for the next one.
        let steps: [(&str, &str, &str); 5] = [
            (
                "printf '#!/bin/sh\\nrm -rf ~\\n' > \"$F\"",
                "created",
                "was created: ",
            ),
            ("echo more >> \"$F\"", "modified", "was modified: "),
            (
                "chmod +x \"$F\"",
                "made-executable",
                "was made executable: ",
            ),
            (
                "rm \"$F\" && ln -s /bin/true \"$F\"",
                "replaced-by-symlink",
                "was replaced by a symlink to /bin/true: ",
            ),
            ("rm \"$F\"", "deleted", "was deleted: "),
        ];
        for rel in WATCHED {
            let file = h.project.join(rel);
            for (script, kind, words) in steps {
                let before = Snapshot::of_project(&h.project);
                require_landlock();
                let mut cmd = Command::new(BIN);
                cmd.arg("run").arg("--project").arg(&h.project);
                cmd.args(["--", "sh", "-c", script]);
                h.env(&mut cmd);
                cmd.env("F", &file);
                let out = output(&mut cmd);
                assert_success(&out);
                // What the command did landed: the tripwire reports, it does not refuse.
                match kind {
                    "deleted" => assert!(fs::symlink_metadata(&file).is_err(), "{rel} still there"),
                    "replaced-by-symlink" => assert!(file.is_symlink(), "{rel} is no symlink"),
                    _ => assert!(file.is_file(), "{rel} was not written"),
                }
                let lines = reported(&out);
                assert_eq!(lines.len(), 1, "{rel} {kind}: one line\n{}", show(&out));
                assert!(
                    lines[0].starts_with(&format!("strument-sandbox: {rel} {words}")),
                    "{rel} {kind}: {}",
                    lines[0]
                );
                // The library, compared over the same command, says the same.
                let changes = before.changes();
                assert_eq!(changes.len(), 1, "{rel} {kind}: {changes:?}");
                assert_eq!(changes[0].kind.name(), kind);
                assert_eq!(changes[0].name, Path::new(rel));
                assert_eq!(
                    format!("strument-sandbox: {}", changes[0]),
                    lines[0],
                    "the library's line is the CLI's"
                );
            }
        }
        h.assert_sentinels_intact();
    }

    #[test]
    fn the_issue_s_hook_and_config_change_are_reported_as_json_too() {
        let h = repository();
        let script = "printf '#!/bin/sh\\nrm -rf ~\\n' > .git/hooks/pre-commit && \
                  chmod +x .git/hooks/pre-commit && git config core.fsmonitor ./evil && exit 7";
        let out = h.run(&[OsStr::new("--json")], &["sh", "-c", script]);
        assert_exit(&out, 7, "the command's status");
        assert!(h.project.join(".git/hooks/pre-commit").is_file());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let json: Value = stderr
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| panic!("no JSON line\n{}", show(&out)));
        assert_eq!(json["exit"], 7);
        assert_eq!(json["signal"], Value::Null);
        let kinds: Vec<(&str, &str)> = json["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().expect("name"),
                    c["kind"].as_str().expect("kind"),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (".git/config", "modified"),
                (".git/hooks/pre-commit", "created")
            ]
        );
        assert!(
            json["changes"][1]["why"]
                .as_str()
                .is_some_and(|w| w.contains("at your next commit"))
        );
        // With --json, no text lines besides it.
        assert!(reported(&out).is_empty(), "{}", show(&out));
    }

    #[test]
    fn a_command_that_changes_none_of_them_prints_nothing_extra() {
        let h = repository();
        fs::write(h.project.join(".git/hooks/pre-commit"), "#!/bin/sh\n").expect("hook");
        // Git at work in its own directory (index, objects, refs) is not a change.
        let out = h.sh(
            "echo 'fn main() {}' > main.rs && git add main.rs && git commit -qm one --no-verify \
         && git status --short > /dev/null && echo done",
        );
        assert_success(&out);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
        assert!(out.stderr.is_empty(), "stderr not empty\n{}", show(&out));
        // And the commit landed.
        let mut log = Command::new("git");
        h.env(&mut log);
        let log = output(log.args(["log", "--oneline"]));
        assert!(String::from_utf8_lossy(&log.stdout).contains("one"));
    }

    #[test]
    fn a_worktree_reports_its_repository_s_hooks() {
        let h = repository();
        let git = |args: &[&str]| {
            let mut cmd = Command::new("git");
            h.env(&mut cmd);
            assert_success(&output(cmd.args(args)));
        };
        git(&["commit", "-q", "--allow-empty", "-m", "root"]);
        let worktree = h.home.join("feature-tree");
        git(&[
            "worktree",
            "add",
            "-q",
            worktree.to_str().expect("UTF-8"),
            "-b",
            "feat",
        ]);
        let plant = |allow: &[&Path]| {
            let flags: Vec<&OsStr> = allow
                .iter()
                .flat_map(|path| [OsStr::new("--allow"), path.as_os_str()])
                .collect();
            let script = "echo x > \"$(git rev-parse --git-common-dir)/hooks/pre-push\"";
            output(&mut h.run_command(&worktree, &flags, &["sh", "-c", script]))
        };
        let hook = h.project.join(".git/hooks/pre-push");
        // By default a worktree is granted only the parts of the common git
        // directory it writes (objects, refs, logs): the hook is refused.
        let out = plant(&[]);
        assert!(!out.status.success(), "{}", show(&out));
        assert!(!hook.exists(), "{}", show(&out));
        assert_eq!(reported(&out), Vec::<String>::new(), "{}", show(&out));
        // Granted whole by the caller, the hook lands, and is reported.
        let out = plant(&[&h.project.join(".git")]);
        assert_success(&out);
        assert!(hook.is_file());
        let lines = reported(&out);
        assert_eq!(
            lines,
            [format!(
                "strument-sandbox: {} was created: git runs it outside the sandbox at your next push",
                hook.display()
            )],
            "{}",
            show(&out)
        );
    }

    // --- Waiting for the command: signals and job control.

    #[test]
    fn each_forwarded_signal_kills_the_command_and_run_exits_128_plus_n() {
        let h = FakeHome::new();
        for (signal, n) in [("INT", 2), ("TERM", 15), ("HUP", 1), ("QUIT", 3)] {
            let run = spawn_run(&h, &["sleep", "60"]);
            let sleep = child_of(run.id());
            kill(signal, run.id());
            let out = run.wait_with_output().expect("wait for run");
            assert_exit(&out, 128 + n, &format!("SIG{signal}: run exits 128+{n}"));
            assert_eq!(state(sleep), None, "SIG{signal}: the command is gone");
        }
        // The granted half: a command that is not signalled ends on its own, 0.
        let out = spawn_run(&h, &["sleep", "0.1"])
            .wait_with_output()
            .expect("wait");
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }

    /// Off a terminal (an agent, a pipeline), a command stopped on its own
    /// does not stop `run`: nothing would ever resume it. `run` waits on, and
    /// once the command is resumed it ends with the command's status. (On a
    /// terminal `run` stops with its job: the Ctrl-Z test below.)
    #[test]
    fn a_command_stopped_alone_off_a_terminal_leaves_run_waiting_and_resumed_it_ends() {
        let h = FakeHome::new();
        let run = spawn_run(&h, &["sh", "-c", "sleep 1; exit 4"]);
        let sh = child_of(run.id());
        kill("STOP", sh);
        wait_for_state(sh, |s| s == Some('T'), "stopped");
        std::thread::sleep(Duration::from_millis(300));
        assert_ne!(
            state(run.id()),
            Some('T'),
            "run stopped with nobody to resume it"
        );
        kill("CONT", sh);
        let out = run.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    }

    /// A caller that ignores SIGCHLD passes that on through `exec`; `run` still
    /// learns the command's status instead of waiting forever for a child the
    /// kernel reaped by itself.
    #[test]
    fn run_started_with_sigchld_ignored_still_reports_the_command_status() {
        let h = FakeHome::new();
        let python = require_tool("python3", "python3");
        // python3 ignores SIGCHLD, then becomes `run` (the disposition survives
        // exec); this test, its parent, waits for it as usual.
        const IGNORING: &str = "import os, signal, sys\n\
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n\
        os.execv(sys.argv[1], sys.argv[1:])\n";
        let mut cmd = Command::new(python);
        cmd.args(["-c", IGNORING, BIN, "run", "--project"])
            .arg(&h.project)
            .args(["--", "sh", "-c", "exit 7"]);
        h.env(&mut cmd);
        let out = output(&mut cmd);
        assert_exit(&out, 7, "the command's own status, through run");
    }

    /// End to end only: a second copy sent right after the terminal's would
    /// merge with it while pending (standard signals do not queue), so the
    /// decision not to send one is tested in `supervise::tests`.
    #[test]
    fn ctrl_c_on_a_terminal_reaches_the_command_once() {
        let h = FakeHome::new();
        assert_eq!(
            sigints_received(&h, "ctrl-c"),
            1,
            "the terminal's copy, not a second"
        );
        assert_eq!(
            sigints_received(&h, "kill"),
            1,
            "a SIGINT sent to run is passed on"
        );
    }

    #[test]
    fn ctrl_c_on_a_terminal_ends_a_command_with_130() {
        let python = require_tool("python3", "python3");
        let h = FakeHome::new();
        const DRIVER: &str = "import os, pty, sys, time\n\
        bin, project = sys.argv[1:3]\n\
        pid, fd = pty.fork()\n\
        if pid == 0:\n    os.execv(bin, [bin, 'run', '--project', project, '--', 'sh', '-c', 'echo ready; exec sleep 60'])\n\
        out = b''\n\
        while b'ready' not in out:\n    out += os.read(fd, 1024)\n\
        time.sleep(0.2)\n\
        os.write(fd, b'\\x03')\n\
        _, status = os.waitpid(pid, 0)\n\
        print(os.waitstatus_to_exitcode(status))\n";
        let mut cmd = Command::new(python);
        cmd.args(["-c", DRIVER, BIN]).arg(&h.project);
        assert_stdout(&output(&mut cmd), "130");
    }

    #[test]
    fn ctrl_z_in_an_interactive_shell_stops_the_job_and_fg_resumes_it() {
        let python = require_tool("python3", "python3");
        require_tool("bash", "bash");
        let h = FakeHome::new();
        const DRIVER: &str = "import os, pty, sys, time\n\
        bin, project = sys.argv[1:3]\n\
        pid, fd = pty.fork()\n\
        if pid == 0:\n    os.environ['PS1'] = '$ '\n    os.execvp('bash', ['bash', '--norc', '--noprofile', '-i'])\n\
        out = b''\n\
        def expect(what, seconds=20):\n    global out\n    deadline = time.time() + seconds\n    \
        while what not in out:\n        \
        if time.time() > deadline: sys.exit('no %r in %r' % (what, out))\n        \
        out += os.read(fd, 4096)\n\
        expect(b'$ ')\n\
        cmd = \"%s run --project %s -- sh -c 'echo re''ady; sleep 1; echo wo''ke'\\n\" % (bin, project)\n\
        os.write(fd, cmd.encode())\n\
        expect(b'ready')\n\
        os.write(fd, b'\\x1a')\n\
        expect(b'Stopped')\n\
        time.sleep(1.5)  # stopped: `sleep 1` must not finish and print meanwhile\n\
        import select\n\
        while select.select([fd], [], [], 0.2)[0]:\n    out += os.read(fd, 4096)\n\
        if b'woke' in out: sys.exit('the command ran on while stopped: %r' % out)\n\
        os.write(fd, b'fg\\n')\n\
        expect(b'woke')\n\
        os.write(fd, b'echo status=$?\\n')\n\
        expect(b'status=0')\n\
        os.write(fd, b'exit\\n')\n\
        os.waitpid(pid, 0)\n\
        print(out.decode(errors='replace'))\n";
        let mut cmd = Command::new(python);
        cmd.args(["-c", DRIVER, BIN]).arg(&h.project);
        let out = output(&mut cmd);
        assert_success(&out);
        // The driver failed unless the shell printed `Stopped`, the command
        // stayed silent while stopped, and after `fg` it finished with status 0.
        assert!(String::from_utf8_lossy(&out.stdout).contains("status=0"));
    }
}
