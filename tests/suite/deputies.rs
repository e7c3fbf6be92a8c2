//! No unconfined process acts for a confined command: the terminal
//! (TIOCSTI), abstract-socket deputies, local services. Needs Landlock
//! (excluded by the nix-build profile), python3 and bash; the tmux test
//! needs tmux.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use strument_sandbox::Policy;

use super::support::require_landlock;
use super::support::test_name;
use super::support::{BIN, FakeHome, assert_stdout, assert_success, output, require_tool, show};
use super::support::{Stopped, fixture, in_tmp};

fn python() -> PathBuf {
    require_tool("python3", "python3")
}

/// Types `steps` into an interactive bash on a pseudo-terminal (see
/// tests/fixtures/pty-shell.py) with the fake home's environment, and
/// returns the transcript; fails the test if an expected text never shows.
fn on_a_terminal(h: &FakeHome, steps: &Value) -> String {
    require_tool("bash", "bash");
    let mut cmd = Command::new(python());
    cmd.arg(fixture("pty-shell.py")).arg(steps.to_string());
    h.env(&mut cmd);
    cmd.env("PS1", "$ ").env("TERM", "dumb");
    let out = output(&mut cmd);
    let transcript = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the terminal session failed\n{}",
        show(&out)
    );
    transcript
}

/// A line to type: `command; echo <tag>-$((n))`, expecting `<tag>-n`. The
/// arithmetic keeps the echo of the typed line from matching too early.
fn step(command: &str, tag: &str) -> Value {
    serde_json::json!({
        "send": format!("{command}; echo {tag}-$((40+2))\n"),
        "expect": format!("{tag}-42"),
    })
}

/// Single-quoted for the shell.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

fn injector(marker: &Path) -> String {
    format!(
        "{} {} inject 'touch {}'",
        quoted(&python()),
        quoted(&fixture("deputy.py")),
        marker.display()
    )
}

/// The injector run confined (the line `confined` makes of a marker path)
/// types `touch MARKER` into the shell, which must never run it; the same
/// injector unconfined does get its line run, so the terminal really
/// allows TIOCSTI and the test can tell.
fn assert_injection_refused(h: &FakeHome, confined: impl Fn(&Path) -> String) {
    let confined_marker = h.home.join("typed-by-a-confined-command");
    let free_marker = h.home.join("typed-by-an-unconfined-command");
    let steps = serde_json::json!([
        step(&confined(&confined_marker), "confined"),
        // Whatever was injected sits in the input queue before this line.
        step("true", "after-confined"),
        step(&injector(&free_marker), "free"),
        step("true", "after-free"),
    ]);
    let transcript = on_a_terminal(h, &steps);
    assert!(
        transcript.contains("refused: errno 1"),
        "the confined injector was not refused with EPERM\n{transcript}"
    );
    assert!(
        !confined_marker.exists(),
        "a line typed by the confined command ran in the shell\n{transcript}"
    );
    assert!(
        free_marker.exists(),
        "the unconfined injector could not type into the shell either, so this proves \
         nothing (is TIOCSTI disabled, sysctl dev.tty.legacy_tiocsti=0?)\n{transcript}"
    );
    h.assert_sentinels_intact();
}

const INJECT_HELPER: &str = "STRUMENT_SANDBOX_TEST_INJECT";

/// A deputy outside the sandbox, listening on an abstract socket.
struct Deputy {
    _running: Stopped,
}

impl Deputy {
    fn start(name: &str) -> Deputy {
        Deputy {
            _running: Stopped::listening(
                Command::new(python())
                    .arg(fixture("deputy.py"))
                    .args(["serve", name]),
                "the deputy",
            ),
        }
    }
}

/// `run <flags> -- python3 deputy.py ask NAME PATH` in `h`'s project.
fn ask_command(h: &FakeHome, flags: &[&OsStr], name: &str, path: &Path) -> Command {
    let (py, fx) = (python(), fixture("deputy.py"));
    let argv = [
        py.to_str().expect("UTF-8 python path"),
        fx.to_str().expect("UTF-8 fixture path"),
        "ask",
        name,
        path.to_str().expect("UTF-8 path"),
    ];
    h.run_command(&h.project, flags, &argv)
}

fn ask(h: &FakeHome, flags: &[&OsStr], name: &str, path: &Path) -> String {
    let out = output(&mut ask_command(h, flags, name, path));
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

mod needs_landlock {
    use super::*;

    #[test]
    fn a_command_under_run_cannot_type_into_the_shell_that_started_it() {
        let h = FakeHome::new();
        let run = format!(
            "{} run --project {} --",
            quoted(Path::new(BIN)),
            quoted(&h.project)
        );
        assert_injection_refused(&h, |marker| format!("{run} {}", injector(marker)));
    }

    #[test]
    fn a_command_under_prepared_confine_cannot_type_into_the_shell() {
        // In the shell on the terminal, this same test runs again as the
        // helper: it confines the injector with Prepared::confine and waits.
        if let Some(marker) = std::env::var_os(INJECT_HELPER) {
            let project = std::env::var_os("STRUMENT_SANDBOX_TEST_PROJECT").expect("project");
            require_landlock();
            let prepared = Policy {
                writable: vec![PathBuf::from(project).into()],
                ..Policy::default()
            }
            .prepare()
            .expect("prepare");
            let mut cmd = Command::new(python());
            cmd.arg(fixture("deputy.py"))
                .arg("inject")
                .arg(format!("touch {}", Path::new(&marker).display()));
            prepared.confine(&mut cmd);
            let status = cmd.status().expect("spawn the confined injector");
            assert!(status.success());
            return;
        }
        let h = FakeHome::new();
        let exe = std::env::current_exe().expect("this test binary");
        assert_injection_refused(&h, |marker| {
            format!(
                "{INJECT_HELPER}={} STRUMENT_SANDBOX_TEST_PROJECT={} {} {} \
                 --exact --nocapture --test-threads=1 --quiet",
                quoted(marker),
                quoted(&h.project),
                quoted(&exe),
                test_name!(a_command_under_prepared_confine_cannot_type_into_the_shell),
            )
        });
    }

    /// The reverse of the route above: a tmux server the command starts
    /// where the user's tmux looks for its server (by default
    /// `/tmp/tmux-UID`, inside a granted root; the command only has to set
    /// `TMUX_TMPDIR` back), with a hook that makes every client that
    /// attaches exec a command of the server's choosing (`detach-client
    /// -E`). The user's next unconfined `tmux attach` would run it,
    /// unconfined; the supervisor performs the server's `accept` and
    /// closes a connection from outside, so the client runs nothing, and
    /// `run` names it. The granted half: a confined client reaches the
    /// same server.
    #[test]
    fn a_tmux_server_planted_where_the_users_tmux_looks_cannot_make_the_users_client_run_anything()
    {
        require_tool("tmux", "tmux");
        let h = FakeHome::new();
        let label = format!("strument-planted-{}", std::process::id());
        // The user's tmux directory as tmux's default is: temporary space.
        let dir = in_tmp("strument-tmux-user-");
        let escaped = h.home.join("written-by-the-users-tmux-client");
        let (ready, done) = (h.project.join("planted"), h.project.join("attached"));
        let listed = h.project.join("listed");
        let plant = format!(
            "export TMUX_TMPDIR={d}; tmux -L {label} -f /dev/null new-session -d -s planted \
             'sleep 120' && tmux -L {label} set-hook -g client-attached \
             'detach-client -E \"touch {m}\"' && tmux -L {label} ls > {l}; touch {r}; i=0; \
             while [ ! -e {a} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
            d = quoted(dir.path()),
            m = escaped.display(),
            l = quoted(&listed),
            r = quoted(&ready),
            a = quoted(&done),
        );
        // The session lives on while the user attaches.
        let session = Stopped(
            h.run_command(&h.project, &[], &["sh", "-c", &plant])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the confined command"),
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !ready.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // The user's `tmux attach`, on a terminal, unconfined.
        let attach = "import os, pty, select, sys, time\n\
                      pid, fd = pty.fork()\n\
                      if pid == 0:\n    os.execvp('tmux', ['tmux', '-L', sys.argv[1], 'attach'])\n\
                      end = time.time() + 5\n\
                      while time.time() < end:\n\
                      \x20   if select.select([fd], [], [], 0.2)[0]:\n\
                      \x20       try:\n            os.read(fd, 4096)\n\
                      \x20       except OSError:\n            break\n\
                      os.waitpid(pid, 0)\n";
        let mut cmd = Command::new(python());
        cmd.args(["-c", attach, &label]);
        h.env(&mut cmd);
        cmd.env("TMUX_TMPDIR", dir.path()).env("TERM", "xterm");
        let _ = output(&mut cmd);
        let written = escaped.exists();
        // The server goes before anything is asserted: asked from inside
        // the session, the only place it answers.
        let _ = h
            .run_command(&h.project, &[], &["tmux", "-L", &label, "kill-server"])
            .env("TMUX_TMPDIR", dir.path())
            .output();
        fs::write(&done, "").expect("end the confined command");
        let mut session = session;
        let mut err = String::new();
        if let Some(mut e) = session.0.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        let _ = session.0.wait();
        let _ = Command::new("tmux")
            .env("TMUX_TMPDIR", dir.path())
            .args(["-L", &label, "kill-server"])
            .output();
        assert!(
            fs::read_to_string(&listed).is_ok_and(|l| l.starts_with("planted:")),
            "a confined tmux client did not reach the confined server\n{err}"
        );
        assert!(
            !written,
            "the user's unconfined tmux client ran the planted server's command\n{err}"
        );
        assert!(
            err.contains("outside the sandbox, a connection to tmux a confined command started at"),
            "run did not name the refused client\n{err}"
        );
        h.assert_sentinels_intact();
    }

    /// A terminal of the user's other than the command's own (another
    /// window's shell) sits in `/dev/pts`, which is granted so that a
    /// command can make terminals of its own (tmux, `script`, `ssh -t`).
    /// What the command writes there is shown, escape sequences included:
    /// the route doc/security.md names as open. What it would type there
    /// with TIOCSTI is refused, as on its own terminal.
    #[test]
    fn another_terminal_of_the_user_shows_what_a_command_writes_but_takes_no_keystrokes() {
        let h = FakeHome::new();
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes two descriptors; the name, termios and
        // window size are NULL.
        let ret = unsafe {
            libc::openpty(
                &raw mut master,
                &raw mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(ret, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both are descriptors openpty just made, owned here.
        let (master, slave) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::os::fd::OwnedFd::from_raw_fd(master),
                std::os::fd::OwnedFd::from_raw_fd(slave),
            )
        };
        let name = std::fs::read_link(format!("/proc/self/fd/{}", raw(&slave)))
            .expect("the terminal's name");
        // Raw, so that a byte typed into it could be read at once.
        // SAFETY: termios is plain data, filled by tcgetattr first.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(raw(&slave), &raw mut t), 0);
            libc::cfmakeraw(&raw mut t);
            assert_eq!(libc::tcsetattr(raw(&slave), libc::TCSANOW, &raw const t), 0);
        }
        let script = "import fcntl, os, sys, termios\n\
                      fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NOCTTY)\n\
                      os.write(fd, b'written-by-a-confined-command')\n\
                      try:\n    fcntl.ioctl(fd, termios.TIOCSTI, b'x')\n    print('typed')\n\
                      except OSError as e:\n    print('refused: errno', e.errno)\n";
        let py = python();
        let out = h.run(
            &[],
            &[
                py.to_str().expect("UTF-8 python path"),
                "-c",
                script,
                name.to_str().expect("UTF-8 terminal name"),
            ],
        );
        assert_success(&out);
        assert_stdout(&out, "refused: errno 1");
        let shown = read_now(&master);
        assert!(
            shown.contains("written-by-a-confined-command"),
            "the other terminal did not show what the command wrote ({shown:?}): \
             if /dev/pts is no longer granted, doc/security.md's row is out of date"
        );
        assert_eq!(
            read_now(&slave),
            "",
            "a keystroke reached the other terminal's input"
        );
        h.assert_sentinels_intact();
    }

    fn raw(fd: &std::os::fd::OwnedFd) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(fd)
    }

    /// What can be read from `fd` without waiting.
    fn read_now(fd: &std::os::fd::OwnedFd) -> String {
        let mut buf = [0u8; 4096];
        // SAFETY: fcntl takes integers; `buf` is writable for its length.
        let n = unsafe {
            let flags = libc::fcntl(raw(fd), libc::F_GETFL);
            libc::fcntl(raw(fd), libc::F_SETFL, flags | libc::O_NONBLOCK);
            libc::read(raw(fd), buf.as_mut_ptr().cast(), buf.len())
        };
        match usize::try_from(n) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(_) => {
                let e = std::io::Error::last_os_error();
                assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "read: {e}");
                String::new()
            }
        }
    }

    #[test]
    fn ctrl_c_still_interrupts_a_confined_command_started_from_the_shell() {
        let h = FakeHome::new();
        let started = std::time::Instant::now();
        let steps = serde_json::json!([
            {
                "send": format!("{} run --project {} -- sleep 30\n", quoted(Path::new(BIN)), quoted(&h.project)),
                "expect": null,
            },
            { "send": "\u{3}", "pause": 1.5, "expect": null },
            { "send": "echo status-$((40+2))=$?\n", "expect": "status-42=" },
        ]);
        let transcript = on_a_terminal(&h, &steps);
        assert!(
            transcript.contains("status-42=130"),
            "the confined sleep did not die of SIGINT (128 + 2)\n{transcript}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(25),
            "Ctrl-C did not interrupt the 30 s sleep"
        );
    }

    #[test]
    fn a_deputy_outside_on_an_abstract_socket_is_refused_and_one_inside_works() {
        let h = FakeHome::new();
        let name = format!("strument-sandbox-test-deputy-{}", std::process::id());
        let _deputy = Deputy::start(&name);
        // Granted half: the deputy does write outside the roots for whoever
        // asks unconfined.
        let free = h.home.join("written-for-an-unconfined-client");
        let out = output(
            Command::new(python())
                .arg(fixture("deputy.py"))
                .args(["ask", &name])
                .arg(&free),
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "ok",
            "{}",
            show(&out)
        );
        assert!(free.exists());
        // Refused: the same request from inside the sandbox (scope, ABI 6).
        let outside = h.home.join("written-for-a-confined-client");
        let answer = ask(&h, &[], &name, &outside);
        assert_eq!(answer, format!("refused: errno {}", libc::EPERM));
        assert!(!outside.exists(), "the deputy wrote for a confined command");
        // Granted: a deputy started inside the same sandbox is reachable.
        let inside = h.project.join("written-by-a-deputy-inside");
        let inner = format!("{name}-inside");
        let script = format!(
            "{py} {fx} serve {inner} >/dev/null & {py} {fx} ask {inner} {path}; kill $!",
            py = quoted(&python()),
            fx = quoted(&fixture("deputy.py")),
            path = quoted(&inside)
        );
        assert_stdout(&h.sh(&script), "ok");
        assert_eq!(
            fs::read_to_string(&inside).expect("the inside deputy wrote"),
            "deputy was here\n"
        );
        h.assert_sentinels_intact();
    }

    // Below ABI 6 and for pathname services (tmux, the session bus) on every
    // kernel, the connect supervisor refuses: tests/suite/supervisor.rs.

    #[test]
    fn a_later_run_can_stop_a_server_an_earlier_run_started() {
        // The signal scope is deliberately not asked for (doc/security.md):
        // each run is its own Landlock domain, and with the scope a second
        // command could not stop a server the first one started.
        let h = FakeHome::new();
        let pidfile = h.project.join("server.pid");
        let out = h.sh(&format!(
            "sleep 60 >/dev/null 2>&1 & echo $! > {}",
            quoted(&pidfile)
        ));
        assert_success(&out);
        let pid = fs::read_to_string(&pidfile).expect("pid file");
        let pid = pid.trim();
        let out = h.run(&[], &["kill", pid]);
        assert_success(&out);
        // Gone (or a zombie reparented to init, reaped shortly).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while Path::new(&format!("/proc/{pid}/cmdline")).exists()
            && fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            fs::read(format!("/proc/{pid}/cmdline")).map_or(true, |c| c.is_empty()),
            "the server started by the first run is still running"
        );
    }

    #[test]
    fn with_the_signal_scope_a_later_command_could_not_stop_that_server() {
        // The evidence for leaving the signal scope out: a domain that asks for
        // it cannot signal a process started outside it, which is what a
        // server started by an earlier command is (each run its own domain).
        crate::suite::support::in_child(
            test_name!(with_the_signal_scope_a_later_command_could_not_stop_that_server),
            || {
                use landlock::{ABI, AccessFs, Ruleset, RulesetAttr, Scope};
                require_landlock();
                // Started before the domain exists: outside it. It ends by itself
                // (this domain may not even kill it), and this process exits first.
                #[allow(clippy::zombie_processes)]
                let server = Command::new("sleep")
                    .arg("10")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start a stand-in server");
                Ruleset::default()
                    .handle_access(AccessFs::from_write(ABI::V3))
                    .and_then(|r| r.scope(Scope::Signal))
                    .and_then(Ruleset::create)
                    .and_then(|r| r.restrict_self())
                    .expect("a domain with the signal scope (ABI 6)");
                let out = output(Command::new("kill").arg(server.id().to_string()));
                assert!(!out.status.success(), "kill got through the signal scope");
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("not permitted"),
                    "{}",
                    show(&out)
                );
            },
        );
        // Granted half: the same kill, without the scope, stops such a server.
        let mut server = Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("start a stand-in server");
        let out = output(Command::new("kill").arg(server.id().to_string()));
        assert_success(&out);
        let status = server.wait().expect("reap the server");
        assert!(!status.success(), "the server was stopped by the kill");
    }
}
