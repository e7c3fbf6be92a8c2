//! The connect supervisor: services outside the sandbox cannot be reached
//! over unix sockets on this kernel, whatever its Landlock ABI, while the
//! sockets a developer needs (ssh-agent, sockets the command binds itself)
//! keep working. Needs Landlock, python3; tmux, ssh-agent, git and gpg for
//! their tests.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::{self, Stopped, assert_no_connection_refused, require_landlock};
use super::support::{FakeHome, assert_success, output, require_tool, show};
use super::support::{assert_connection_refused, in_a_single_threaded_fork, test_name};

fn python() -> PathBuf {
    require_tool("python3", "python3")
}

/// What `sockets.py own` prints when every exchange with the command's own
/// sockets worked.
const OWN_OK: &str =
    "own absolute ok\nown relative ok\nown abstract ok\nown thread ok\nown datagram ok\n";

fn fixture() -> String {
    support::fixture("sockets.py")
        .to_str()
        .expect("UTF-8 fixture path")
        .to_owned()
}

fn py() -> String {
    python().to_str().expect("UTF-8 python path").to_owned()
}

/// A stand-in service outside the sandbox: writes `served` to whatever
/// path a client sends, and logs every connection it accepts.
struct Service {
    _running: Stopped,
}

impl Service {
    fn start(addr: &str, log: &Path) -> Service {
        Service {
            _running: Stopped::listening(
                Command::new(python())
                    .args([fixture().as_str(), "serve", addr])
                    .arg(log),
                "the service",
            ),
        }
    }
}

/// `sockets.py ask ADDR PATH`, unconfined.
fn ask_unconfined(addr: &str, path: &Path) -> String {
    let out = output(
        Command::new(python())
            .args([fixture().as_str(), "ask", addr])
            .arg(path),
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn confined(h: &FakeHome, argv: &[&str]) -> std::process::Output {
    h.run(&[], argv)
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A tmux server of the user's, outside the sandbox, killed on drop.
struct Tmux {
    tmpdir: PathBuf,
}

impl Tmux {
    fn command(&self) -> Command {
        let mut cmd = Command::new(require_tool("tmux", "tmux"));
        cmd.env("TMUX_TMPDIR", &self.tmpdir).args(["-L", "sv"]);
        cmd
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

/// An ssh-agent outside the sandbox with one key, killed on drop.
struct SshAgent {
    _child: Stopped,
    socket: PathBuf,
    public_key: PathBuf,
}

impl SshAgent {
    fn start(h: &FakeHome) -> SshAgent {
        let dir = h.home_dir(".ssh");
        let key = dir.join("id_ed25519");
        let out = output(
            Command::new(require_tool("ssh-keygen", "openssh-client"))
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
                .arg(&key),
        );
        assert_success(&out);
        let socket = h.home.join("agent.sock");
        SshAgent {
            _child: support::ssh_agent(&socket, &key),
            socket,
            public_key: key.with_extension("pub"),
        }
    }
}

/// Starts `python3 -c SCRIPT DIR` under `run` in `h`'s project, its output
/// piped, and waits until it has written `DIR/ready`: the process, and what
/// it wrote there.
fn confined_python_until_ready(h: &FakeHome, script: &str, dir: &Path) -> (Stopped, String) {
    let mut cmd = h.run_command(
        &h.project,
        &[],
        &[&py(), "-c", script, dir.to_str().expect("UTF-8 path")],
    );
    let session = piped(&mut cmd);
    let ready = dir.join("ready");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ready.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (session, fs::read_to_string(&ready).unwrap_or_default())
}

/// `cmd` started with its standard output and error piped, killed if
/// dropped while it runs.
fn piped(cmd: &mut Command) -> Stopped {
    Stopped(
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the confined command"),
    )
}

/// What the confined command `session` printed on its standard output and
/// error, once it ends or, killed, once `within` has passed.
fn said_within(mut session: Stopped, within: std::time::Duration) -> (String, String) {
    let deadline = std::time::Instant::now() + within;
    while session.0.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Still running: killed, so that its output ends.
    let _ = session.0.kill();
    outputs(&mut session)
}

/// Everything `session` writes on its standard output and error (piped),
/// once it has closed both; then it is waited for.
fn outputs(session: &mut Stopped) -> (String, String) {
    use std::io::Read;
    let mut said = String::new();
    if let Some(mut out) = session.0.stdout.take() {
        let _ = out.read_to_string(&mut said);
    }
    let mut err = String::new();
    if let Some(mut out) = session.0.stderr.take() {
        let _ = out.read_to_string(&mut err);
    }
    let _ = session.0.wait();
    (said, err)
}

/// A Python server under `run`, waiting in `accept` on a unix socket in a
/// directory of `/tmp` (`s`), then running `rest`: the process, the
/// server's pid, and the directory, removed on drop.
fn python_waiting_in_accept(h: &FakeHome, rest: &str) -> (Stopped, i32, tempfile::TempDir) {
    let dir = support::in_tmp("strument-accept-signal-");
    let server = format!(
        "import os, socket, sys\n\
         d = sys.argv[1]\n\
         s = socket.socket(socket.AF_UNIX)\n\
         s.bind(os.path.join(d, 'srv.sock'))\n\
         s.listen(1)\n\
         open(os.path.join(d, 'ready.tmp'), 'w').write(str(os.getpid()))\n\
         os.rename(os.path.join(d, 'ready.tmp'), os.path.join(d, 'ready'))\n\
         {rest}"
    );
    let (session, said) = confined_python_until_ready(h, &server, dir.path());
    let pid: i32 = said.parse().expect("the server's pid");
    // Well inside its wait in the supervisor.
    std::thread::sleep(std::time::Duration::from_millis(300));
    (session, pid, dir)
}

mod needs_landlock {
    use super::*;

    /// A fake home and a policy granting its project alone.
    fn project_only() -> (FakeHome, strument_sandbox::Prepared) {
        require_landlock();
        let h = FakeHome::new();
        let prepared = strument_sandbox::Policy {
            writable: vec![h.project.clone().into()],
            ..strument_sandbox::Policy::default()
        }
        .prepare()
        .expect("prepare");
        (h, prepared)
    }

    #[test]
    fn services_outside_on_a_path_or_an_abstract_name_write_nothing_for_a_confined_command() {
        let h = FakeHome::new();
        let pathname = h.home.join("service.sock");
        let path_addr = pathname.to_str().expect("UTF-8").to_owned();
        let abstract_addr = format!("@strument-supervisor-test-{}", std::process::id());
        for (addr, refused_errno) in [(&path_addr, libc::EACCES), (&abstract_addr, libc::EPERM)] {
            let log = h.home.join("accepted.log");
            let _ = fs::remove_file(&log);
            let _service = Service::start(addr, &log);
            // Granted half: the service writes outside the roots for whoever asks unconfined.
            let free = h.home.join("written-for-an-unconfined-client");
            assert_eq!(ask_unconfined(addr, &free), "ok");
            assert!(free.exists());
            fs::remove_file(&free).expect("remove");
            fs::remove_file(&log).expect("remove log");
            // Refused: the same request from inside the sandbox.
            let target = h.home.join("written-for-a-confined-client");
            let target_str = target.to_str().expect("UTF-8");
            let out = confined(&h, &[&py(), &fixture(), "ask", addr, target_str]);
            assert_success(&out);
            assert_eq!(
                stdout(&out).trim(),
                format!("refused: errno {refused_errno}"),
                "{}",
                show(&out)
            );
            assert!(!target.exists(), "the service wrote for a confined command");
            assert!(!log.exists(), "the service accepted a confined connection");
            // One line after the command names the socket, and for a path the
            // option that would allow it.
            let err = stderr(&out);
            let shown = addr.trim_start_matches('@');
            assert!(
                err.lines()
                    .any(|l| l.contains("refused a connection to") && l.contains(shown)),
                "{}",
                show(&out)
            );
            if addr.starts_with('/') {
                assert!(err.contains(&format!("--allow-socket {addr}")), "{err}");
            }
        }
        h.assert_sentinels_intact();
    }

    #[test]
    fn below_abi_6_the_supervisor_alone_refuses_an_abstract_service_outside() {
        let h = FakeHome::new();
        let addr = format!("@strument-supervisor-capped-{}", std::process::id());
        let log = h.home.join("accepted.log");
        let _service = Service::start(&addr, &log);
        let target = h.project.join("reachable-below-abi-6");
        let mut cmd = h.run_command(
            &h.project,
            &[],
            &[
                &py(),
                &fixture(),
                "ask",
                &addr,
                target.to_str().expect("UTF-8"),
            ],
        );
        cmd.env("STRUMENT_SANDBOX_TEST_ABI_CAP", "5");
        let out = output(&mut cmd);
        assert_success(&out);
        assert_eq!(
            stdout(&out).trim(),
            format!("refused: errno {}", libc::EPERM)
        );
        assert!(!target.exists() && !log.exists(), "{}", show(&out));
        // Granted half, same cap: a service the command starts itself answers.
        let inner = format!("{addr}-inside");
        let script = format!(
            "{py} {fx} serve {inner} >/dev/null & sleep 1; {py} {fx} ask {inner} {t}; kill $!",
            py = py(),
            fx = fixture(),
            t = target.display()
        );
        let mut cmd = h.run_command(&h.project, &[], &["sh", "-c", &script]);
        cmd.env("STRUMENT_SANDBOX_TEST_ABI_CAP", "5");
        let out = output(&mut cmd);
        assert_eq!(stdout(&out).trim(), "ok", "{}", show(&out));
        assert_eq!(fs::read_to_string(&target).expect("served"), "served\n");
    }

    #[test]
    fn sockets_the_command_binds_in_tmp_the_project_and_an_abstract_name_work() {
        let h = FakeHome::new();
        let project = h.project.to_str().expect("UTF-8").to_owned();
        for dir in ["/tmp", project.as_str()] {
            let out = confined(&h, &[&py(), &fixture(), "own", dir]);
            assert_success(&out);
            assert_eq!(stdout(&out), OWN_OK, "{}", show(&out));
        }
        // The socket files were made where the command asked.
        let made = fs::read_dir(&h.project)
            .expect("list")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("own-"))
            .count();
        assert_eq!(made, 1);
        // Refused half: binding outside every root fails as Landlock would.
        let script = format!(
            "import socket; s = socket.socket(socket.AF_UNIX)\ntry:\n    s.bind('{}')\n    print('bound')\nexcept OSError as e:\n    print(e.errno)",
            h.home.join("outside.sock").display()
        );
        let out = confined(&h, &[&py(), "-c", &script]);
        assert_eq!(
            stdout(&out).trim(),
            libc::EACCES.to_string(),
            "{}",
            show(&out)
        );
        assert!(!h.home.join("outside.sock").exists());
    }

    /// A service the user started in the project before the run, the
    /// project named through a symlink: the supervisor compares what the
    /// kernel resolves the address to with the project as the kernel names
    /// it, so the service is reached; one outside is not.
    #[test]
    fn a_service_in_a_project_named_through_a_symlink_is_reached_and_one_outside_is_not() {
        let h = FakeHome::new();
        let link = h.home.join("project-link");
        std::os::unix::fs::symlink(&h.project, &link).expect("symlink");
        let inside = h.project.join("dev-server.sock");
        let outside = h.home.join("outside-server.sock");
        for (addr, reached) in [(&inside, true), (&outside, false)] {
            let addr = addr.to_str().expect("UTF-8");
            let log = h.home.join("accepted.log");
            let _ = fs::remove_file(&log);
            let _service = Service::start(addr, &log);
            // Older than the session: a socket that appears beneath the
            // project during it counts only if bound inside (the rules'
            // margin is 50 ms).
            std::thread::sleep(std::time::Duration::from_millis(150));
            let written = h.project.join("written-for-the-command");
            let _ = fs::remove_file(&written);
            let out = output(&mut h.run_command(
                &link,
                &[],
                &[
                    &py(),
                    &fixture(),
                    "ask",
                    addr,
                    written.to_str().expect("UTF-8"),
                ],
            ));
            assert_success(&out);
            if reached {
                assert_eq!(stdout(&out).trim(), "ok", "{}", show(&out));
                assert!(written.exists(), "{}", show(&out));
            } else {
                assert_eq!(
                    stdout(&out).trim(),
                    format!("refused: errno {}", libc::EACCES),
                    "{}",
                    show(&out)
                );
                assert!(!log.exists(), "the outside service was reached");
            }
        }
    }

    #[test]
    fn a_second_thread_swapping_the_address_never_reaches_the_refused_socket() {
        let h = FakeHome::new();
        let outside = h.home.join("race-outside.sock");
        let log = h.home.join("accepted.log");
        let addr = outside.to_str().expect("UTF-8").to_owned();
        let _service = Service::start(&addr, &log);
        // Granted half: the service does accept an unconfined client.
        assert_eq!(ask_unconfined(&addr, &h.home.join("free")), "ok");
        fs::remove_file(&log).expect("remove log");
        let out = confined(&h, &[&py(), &fixture(), "race", &addr, "5000"]);
        assert_success(&out);
        let counts = stdout(&out);
        let count = |key: &str| -> u32 {
            counts
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        // Both addresses were really tried: the allowed one connected, the
        // refused one was refused, and none of them reached the service.
        assert!(count("connected") > 0, "{}", show(&out));
        assert!(count("EACCES") > 0, "{}", show(&out));
        assert!(
            !log.exists(),
            "a swapped address reached the service outside: {}",
            fs::read_to_string(&log).unwrap_or_default().lines().count()
        );
    }

    #[test]
    fn io_uring_and_a_listener_of_the_command_s_own_cannot_route_around() {
        let h = FakeHome::new();
        let out = confined(&h, &[&py(), &fixture(), "escapes"]);
        assert_success(&out);
        // A plain filter of its own still installs (the granted half); one
        // with a listener would shadow the supervisor's and is refused.
        assert_eq!(
            stdout(&out),
            "io_uring_setup EPERM\nown listener EBUSY\nown filter ok\n",
            "{}",
            show(&out)
        );
    }

    #[test]
    fn a_tmux_server_outside_cannot_be_driven_from_inside() {
        let h = FakeHome::new();
        let tmux = Tmux {
            tmpdir: h.home.join("tmux-tmp"),
        };
        fs::create_dir_all(&tmux.tmpdir).expect("mkdir");
        let out =
            output(
                tmux.command()
                    .env("HOME", &h.home)
                    .args(["new-session", "-d", "sleep 300"]),
            );
        assert_success(&out);
        // Granted half: unconfined, the server runs what it is asked to.
        let free = h.home.join("run-by-tmux-unconfined");
        let out = output(
            tmux.command()
                .arg("run-shell")
                .arg(format!("touch {}", free.display())),
        );
        assert_success(&out);
        assert!(free.exists(), "{}", show(&out));
        let pwned = h.home.join("pwned");
        let typed = h.home.join("typed");
        let script = format!(
            "tmux -L sv run-shell 'touch {p}'; tmux -L sv send-keys 'touch {t}' Enter; sleep 0.5",
            p = pwned.display(),
            t = typed.display()
        );
        let mut cmd = h.run_command(&h.project, &[], &["sh", "-c", &script]);
        cmd.env("TMUX_TMPDIR", &tmux.tmpdir);
        let out = output(&mut cmd);
        assert!(!pwned.exists(), "tmux run-shell ran for a confined command");
        assert!(
            !typed.exists(),
            "tmux send-keys typed for a confined command"
        );
        let err = stderr(&out);
        let line = err
            .lines()
            .find(|l| l.contains("refused a connection to tmux at"))
            .unwrap_or_else(|| panic!("no refusal line\n{}", show(&out)));
        assert!(
            line.contains("--allow-socket") && line.contains("2 times"),
            "{line}"
        );
        assert!(!err.contains("reachable:"), "{err}");
        h.assert_sentinels_intact();
    }

    #[test]
    fn ssh_agent_named_by_ssh_auth_sock_lists_keys_and_signs_a_commit() {
        let h = FakeHome::new();
        let agent = SshAgent::start(&h);
        require_tool("git", "git");
        // Granted: the agent $SSH_AUTH_SOCK names.
        let mut cmd = h.run_command(&h.project, &[], &["ssh-add", "-l"]);
        cmd.env("SSH_AUTH_SOCK", &agent.socket);
        let out = output(&mut cmd);
        assert_success(&out);
        assert!(stdout(&out).contains("ED25519"), "{}", show(&out));
        let script = format!(
            "git init -q . && git config gpg.format ssh && git config user.signingkey {key} && \
         git commit -q -S --allow-empty -m signed && git cat-file commit HEAD",
            key = agent.public_key.display()
        );
        let mut cmd = h.run_command(&h.project, &[], &["sh", "-c", &script]);
        cmd.env("SSH_AUTH_SOCK", &agent.socket);
        let out = output(&mut cmd);
        assert_success(&out);
        assert!(
            stdout(&out).contains("-----BEGIN SSH SIGNATURE-----"),
            "{}",
            show(&out)
        );
        // Refused: the same agent, when the policy did not name it.
        let script = format!("SSH_AUTH_SOCK={} ssh-add -l", agent.socket.display());
        let mut cmd = h.run_command(&h.project, &[], &["sh", "-c", &script]);
        cmd.env_remove("SSH_AUTH_SOCK");
        let out = output(&mut cmd);
        assert_connection_refused(&out, &[]);
    }

    #[test]
    fn gpg_agent_deletes_no_secret_key_for_a_confined_command() {
        let h = FakeHome::new();
        let gpg = require_tool("gpg", "gnupg");
        let connect = require_tool("gpg-connect-agent", "gnupg");
        let gnupghome = h.home_dir(".gnupg");
        fs::set_permissions(
            &gnupghome,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod");
        let with_home = |cmd: &mut Command| {
            cmd.env("GNUPGHOME", &gnupghome).env("HOME", &h.home);
        };
        let mut generate = Command::new(&gpg);
        with_home(&mut generate);
        generate.args([
            "--batch",
            "--passphrase",
            "",
            "--quick-gen-key",
            "test@example.com",
            "ed25519",
            "sign",
            "never",
        ]);
        assert_success(&output(&mut generate));
        let mut list = Command::new(&gpg);
        with_home(&mut list);
        list.args(["--with-colons", "--with-keygrip", "-K"]);
        let listing = stdout(&output(&mut list));
        let grip = listing
            .lines()
            .find_map(|l| l.strip_prefix("grp:"))
            .map(|l| l.trim_matches(':').to_owned())
            .expect("a keygrip");
        let key_file = gnupghome.join(format!("private-keys-v1.d/{grip}.key"));
        assert!(key_file.exists());
        let delete = format!("DELETE_KEY --force {grip}");
        // Refused: a confined command asks the agent to delete the key.
        let mut cmd = h.run_command(
            &h.project,
            &[],
            &[connect.to_str().expect("UTF-8"), &delete, "/bye"],
        );
        cmd.env("GNUPGHOME", &gnupghome);
        let out = output(&mut cmd);
        assert!(
            key_file.exists(),
            "gpg-agent deleted a key for a confined command\n{}",
            show(&out)
        );
        assert!(stderr(&out).contains("gpg-agent at"), "{}", show(&out));
        // Granted half: unconfined, the same request does delete it.
        let mut cmd = Command::new(&connect);
        with_home(&mut cmd);
        cmd.args([delete.as_str(), "/bye"]);
        let out = output(&mut cmd);
        assert!(!key_file.exists(), "{}", show(&out));
        let mut kill = Command::new(require_tool("gpgconf", "gnupg"));
        with_home(&mut kill);
        let _ = output(kill.args(["--kill", "gpg-agent"]));
    }

    #[test]
    fn after_policy_apply_a_helper_decides_for_the_process_and_its_children() {
        // The body runs again in a child process (apply cannot be undone): the
        // fake home and the service are made once, by the parent.
        let setup = std::env::var_os("SV_OUTSIDE").is_none().then(|| {
            let h = FakeHome::new();
            let outside = h.home.join("apply-outside.sock");
            let log = h.home.join("accepted.log");
            let service = Service::start(outside.to_str().expect("UTF-8"), &log);
            (h, outside, log, service)
        });
        let out = crate::suite::roles::body_in_child(
            test_name!(after_policy_apply_a_helper_decides_for_the_process_and_its_children),
            |cmd| {
                if let Some((h, outside, _, _)) = &setup {
                    cmd.env("SV_OUTSIDE", outside).env("SV_PROJECT", &h.project);
                }
            },
            || {
                in_a_single_threaded_fork(|| {
                    use std::os::unix::net::{UnixListener, UnixStream};
                    let outside = std::env::var("SV_OUTSIDE").expect("SV_OUTSIDE");
                    let project = PathBuf::from(std::env::var("SV_PROJECT").expect("SV_PROJECT"));
                    require_landlock();
                    strument_sandbox::Policy {
                        writable: vec![project.clone().into()],
                        ..strument_sandbox::Policy::default()
                    }
                    .apply()
                    .expect("apply");
                    // This process: the service outside is refused...
                    let err = UnixStream::connect(&outside).expect_err("connected outside");
                    assert_eq!(err.raw_os_error(), Some(libc::EACCES));
                    // ...a socket it binds in the project is reachable.
                    let own = project.join("own.sock");
                    let listener = UnixListener::bind(&own).expect("bind in the project");
                    UnixStream::connect(&own).expect("connect to its own socket");
                    drop(listener);
                    // Its children: the same, decided by the same helper.
                    let out = Command::new(python())
                        .args([fixture().as_str(), "ask", &outside])
                        .arg(project.join("asked"))
                        .output()
                        .expect("run python");
                    assert_eq!(
                        String::from_utf8_lossy(&out.stdout).trim(),
                        format!("refused: errno {}", libc::EACCES)
                    );
                    let out = Command::new(python())
                        .args([fixture().as_str(), "own"])
                        .arg(&project)
                        .output()
                        .expect("run python");
                    assert!(
                        String::from_utf8_lossy(&out.stdout).contains("own abstract ok"),
                        "{}",
                        show(&out)
                    );
                })
            },
        );
        let (Some(out), Some((h, outside, log, _service))) = (out, setup) else {
            return;
        };
        assert_success(&out);
        assert!(!log.exists(), "the service accepted a confined connection");
        assert!(h.project.join("own.sock").exists(), "{}", show(&out));
        // Granted half: the service accepts this unconfined process.
        let addr = outside.to_str().expect("UTF-8");
        assert_eq!(ask_unconfined(addr, &h.home.join("free")), "ok");
    }

    #[test]
    fn name_and_user_lookups_keep_working_under_the_supervisor() {
        let h = FakeHome::new();
        let getent = require_tool("getent", "libc-bin");
        let getent = getent.to_str().expect("UTF-8");
        // Whatever of nscd, systemd-resolved and systemd-userdb this machine
        // runs is named by default; absent or refused, glibc falls back to the
        // files. Either way the answers are the ones an unconfined lookup gives.
        for query in [
            ["passwd", "root"],
            ["group", "root"],
            ["hosts", "localhost"],
        ] {
            let free = output(Command::new(getent).args(query));
            assert_success(&free);
            let out = confined(&h, &[getent, query[0], query[1]]);
            assert_success(&out);
            assert_eq!(stdout(&out), stdout(&free), "{}", show(&out));
            assert_no_connection_refused(&out);
        }
    }

    #[test]
    fn a_connect_that_waits_stalls_no_other_confined_command() {
        let (h, prepared) = project_only();
        // A: fills a socket's backlog (non-blocking connects answer EAGAIN),
        // then connects blocking: the supervisor's call waits for a slot.
        let stuck = format!(
            "import socket\np = '{}'\ns = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(0)\nkeep = []\n\
         while True:\n    c = socket.socket(socket.AF_UNIX); c.setblocking(False)\n    \
         try:\n        c.connect(p); keep.append(c)\n    except BlockingIOError:\n        break\n\
         print('full', flush=True)\nsocket.socket(socket.AF_UNIX).connect(p)\nprint('never', flush=True)",
            h.project.join("full.sock").display()
        );
        let mut a = Command::new(python());
        a.args(["-c", &stuck]);
        prepared.confine(&mut a);
        let (a, line) = Stopped::started_with_line(&mut a, "A");
        assert_eq!(line, "full");
        // B, another command of the same supervisor, binds and connects freely.
        let mut b = Command::new(python());
        b.args([fixture().as_str(), "own"]).arg(&h.project);
        prepared.confine(&mut b);
        let out = b.output().expect("run B");
        drop(a);
        assert!(stdout(&out).contains("own abstract ok"), "{}", show(&out));
    }

    /// A thread's blocked signals, from `/proc/self/task/TID/status`;
    /// `None` once it has ended (a command's serving thread ends soon
    /// after the command).
    fn blocked(task: &Path) -> Option<u64> {
        let status = fs::read_to_string(task.join("status")).ok()?;
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("SigBlk:"))
            .expect("SigBlk");
        Some(u64::from_str_radix(line.trim(), 16).expect("hex mask"))
    }

    /// The supervisor's threads take no signal sent to the whole process:
    /// the terminal's Ctrl-Z or Ctrl-C is the caller's to handle (`run`
    /// follows the command's stop; a stop acted on by default in one of
    /// these threads would stop it behind its back), while the caller's
    /// own threads keep their masks.
    #[test]
    fn the_supervisor_s_threads_take_no_signal_meant_for_the_process() {
        let (h, prepared) = project_only();
        let mut cmd = Command::new(python());
        cmd.args([fixture().as_str(), "own"]).arg(&h.project);
        prepared.confine(&mut cmd);
        let out = cmd.output().expect("run");
        assert!(stdout(&out).contains("own absolute ok"), "{}", show(&out));
        let bit = |signal: i32| 1u64 << (signal - 1);
        let job_control = [
            libc::SIGTSTP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGCONT,
            libc::SIGCHLD,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ];
        let mut ours = 0;
        for task in fs::read_dir("/proc/self/task").expect("/proc").flatten() {
            let name = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let Some(mask) = blocked(&task.path()) else {
                continue;
            };
            if name.starts_with("strument-connec") {
                ours += 1;
                for signal in job_control {
                    assert_ne!(mask & bit(signal), 0, "{name} takes signal {signal}");
                }
            } else if task.file_name() == std::ffi::OsStr::new(&libc_gettid().to_string()) {
                // This thread, which confined and spawned: its mask as it was.
                assert_eq!(mask & bit(libc::SIGTSTP), 0, "the caller's mask changed");
            }
        }
        assert!(ours > 0, "no thread of the supervisor found");
    }

    fn libc_gettid() -> i32 {
        // SAFETY: gettid takes no arguments.
        unsafe { libc::gettid() }
    }

    /// The children of this process stopped by a signal.
    fn stopped_children() -> Vec<i32> {
        let mut stopped = Vec::new();
        for task in fs::read_dir("/proc/self/task").expect("/proc").flatten() {
            let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for pid in children.split_whitespace().filter_map(|p| p.parse().ok()) {
                let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
                if state == Some(Some('T')) {
                    stopped.push(pid);
                }
            }
        }
        stopped
    }

    /// A forked child stopped (job control can) once it has sent its
    /// listener, before it `exec`s: another command of the same supervisor
    /// starts and connects meanwhile; resumed, the first runs and is served
    /// too.
    #[test]
    fn a_child_stopped_while_handing_its_listener_over_stalls_no_other_command() {
        let (h, prepared) = project_only();
        let prepared = std::sync::Arc::new(prepared);
        let own = |name: &str| {
            let mut cmd = Command::new(python());
            cmd.args([fixture().as_str(), "own"])
                .arg(h.project.join(name))
                .stdout(std::process::Stdio::piped());
            fs::create_dir(h.project.join(name)).expect("mkdir");
            cmd
        };
        let mut a = own("a");
        // Test builds only: the child stops itself between the two steps.
        a.env("STRUMENT_SANDBOX_TEST_STOP_AFTER_SENDING", "1");
        prepared.confine(&mut a);
        // std's spawn returns only once the child has exec'd.
        let (spawned_tx, spawned) = std::sync::mpsc::channel();
        std::thread::spawn(move || drop(spawned_tx.send(a.spawn())));
        let mut stopped = Vec::new();
        for _ in 0..1000 {
            stopped = stopped_children();
            if !stopped.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let [a_pid] = stopped[..] else {
            panic!("expected one stopped child, found {stopped:?}");
        };
        let resume = || {
            // SAFETY: kill takes integers only.
            unsafe { libc::kill(a_pid, libc::SIGCONT) };
        };
        // B starts, binds and connects while A stays stopped.
        let mut b = own("b");
        prepared.confine(&mut b);
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || drop(done_tx.send(b.output())));
        let b = done.recv_timeout(std::time::Duration::from_secs(30));
        let Ok(b) = b else {
            resume();
            panic!("the second command did not end while the first was stopped");
        };
        let b = b.expect("run B");
        assert!(stdout(&b).contains("own absolute ok"), "{}", show(&b));
        assert!(stopped_children().contains(&a_pid), "A ran on meanwhile");
        // Resumed, A runs and its connects are served.
        resume();
        let a = spawned
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("A resumed and exec'd")
            .expect("spawn A");
        let a = a.wait_with_output().expect("wait A");
        assert!(stdout(&a).contains("own absolute ok"), "{}", show(&a));
        assert!(stdout(&a).contains("own abstract ok"), "{}", show(&a));
    }

    /// The connect supervisor's listeners in this process's table.
    fn listeners_held() -> usize {
        fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .filter_map(Result::ok)
            .filter(|fd| {
                fs::read_link(fd.path())
                    .is_ok_and(|link| link.to_string_lossy() == "anon_inode:seccomp notify")
            })
            .count()
    }

    /// Polls `done` for up to ten seconds.
    fn within_ten_seconds(done: impl FnMut() -> bool) -> bool {
        within(1000, done)
    }

    fn within_a_minute(done: impl FnMut() -> bool) -> bool {
        within(6000, done)
    }

    /// Whether `done` holds within `ticks` of 10 ms.
    fn within(ticks: u32, mut done: impl FnMut() -> bool) -> bool {
        for _ in 0..ticks {
            if done() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        done()
    }

    /// A confined child hands its listener over without waking the
    /// supervisor: it waits in a mailbox, out of this process's table,
    /// until its command's first call or end. More commands at once than
    /// the mailbox holds: the later ones are handed over to the
    /// supervisor's thread instead, which takes them at once. A command
    /// whose listener waited in the mailbox and one started after it
    /// filled are both served, and every listener is closed once its
    /// command has ended.
    #[test]
    fn quiet_commands_wait_in_the_mailbox_beyond_it_are_taken_and_all_are_closed_at_their_end() {
        let (h, prepared) = project_only();
        // Waits for a line, then exchanges with sockets of its own.
        let own = |dir: &str| {
            let dir = h.project.join(dir);
            fs::create_dir(&dir).expect("mkdir");
            let mut cmd = Command::new(python());
            cmd.args([
                "-c",
                "import os, runpy, sys\nsys.stdin.readline()\nsys.argv = sys.argv[1:]\n\
                 sys.path.insert(0, os.path.dirname(sys.argv[0]))\n\
                 runpy.run_path(sys.argv[0], run_name='__main__')",
                fixture().as_str(),
                "own",
            ])
            .arg(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
            prepared.confine(&mut cmd);
            cmd.spawn().expect("spawn the sockets fixture")
        };
        // First: its listener goes into the empty mailbox.
        let first = own("first");
        const QUIET: usize = 400;
        let mut quiet = Vec::new();
        for _ in 0..QUIET {
            let mut cmd = Command::new("sleep");
            cmd.arg("120");
            prepared.confine(&mut cmd);
            quiet.push(cmd.spawn().expect("spawn sleep"));
        }
        let last = own("last");
        // None has called or ended: those in the table came past a full
        // mailbox; the others are still in it.
        let overflowed = within_ten_seconds(|| listeners_held() > 0);
        let held = listeners_held();
        // Each now makes its first calls, with at most a minute for both.
        let (said_tx, said) = std::sync::mpsc::channel();
        for mut child in [first, last] {
            let said_tx = said_tx.clone();
            std::thread::spawn(move || {
                let _ = std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), b"go\n");
                drop(said_tx.send(child.wait_with_output()));
            });
        }
        let outputs: Vec<_> = (0..2)
            .map(|_| said.recv_timeout(std::time::Duration::from_secs(60)))
            .collect();
        for child in &mut quiet {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(overflowed, "no listener came past the mailbox");
        assert!(
            held < QUIET,
            "all {QUIET} listeners were taken while none had called: none waited in the mailbox"
        );
        for out in outputs {
            // A command left waiting is killed with the test's process.
            let out = out
                .expect("a command's first call was not served within a minute")
                .expect("wait for the sockets fixture");
            assert_eq!(stdout(&out), OWN_OK, "{}", show(&out));
        }
        assert!(
            within_ten_seconds(|| listeners_held() == 0),
            "{} listeners still held after every command ended",
            listeners_held()
        );
    }

    /// After a wake that brought nothing but ends, the supervisor's thread
    /// leaves its watch unarmed for a while (`connect::COOL_DOWN`): a first
    /// call made in that time, or after it, is still served. Each round, a
    /// command that ends without calling, then at once one that calls; none
    /// of them is waited for longer than a minute.
    #[test]
    fn a_first_call_made_just_after_other_commands_ended_is_served() {
        let (h, prepared) = project_only();
        for round in 0..10 {
            let mut quiet = Command::new("true");
            prepared.confine(&mut quiet);
            assert_success(&output(&mut quiet));
            let dir = h.project.join(format!("round-{round}"));
            fs::create_dir(&dir).expect("mkdir");
            let mut cmd = Command::new(python());
            cmd.arg(fixture()).arg("own").arg(&dir);
            cmd.stdout(std::process::Stdio::piped());
            prepared.confine(&mut cmd);
            let mut child = cmd.spawn().expect("spawn the sockets fixture");
            // Its few lines fit the pipe: it ends without being read.
            let served = within_a_minute(|| matches!(child.try_wait(), Ok(Some(_))));
            if !served {
                let _ = child.kill();
            }
            let out = child
                .wait_with_output()
                .expect("wait for the sockets fixture");
            assert!(
                served,
                "round {round}: the command's first call was not served within a minute"
            );
            assert_eq!(stdout(&out), OWN_OK, "round {round}: {}", show(&out));
        }
    }

    /// The Python interpreter itself (isolated, `-I`), not what PATH names:
    /// pyenv's `python3` is a bash script, and bash looks the user up (a
    /// connect to nscd's socket, so a serving thread) where SHELL is unset.
    fn interpreter() -> String {
        let out =
            output(Command::new(python()).args(["-I", "-c", "import sys; print(sys.executable)"]));
        assert_success(&out);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// A script that prints `run`'s threads (its parent's: the command is
    /// `run`'s child), connects to a socket of its own in `project`, and
    /// prints them again.
    fn threads_before_and_after_a_connect(project: &Path) -> String {
        format!(
            "import os, socket\n\
             def threads():\n    \
                 task = '/proc/%d/task' % os.getppid()\n    \
                 return sorted(open('%s/%s/comm' % (task, t)).read().strip() for t in os.listdir(task))\n\
             print('before', threads(), flush=True)\n\
             p = '{}'\n\
             s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)\n\
             c = socket.socket(socket.AF_UNIX); c.connect(p)\n\
             print('connected; after', threads(), flush=True)\n",
            project.join("own.sock").display()
        )
    }

    /// `run` waits for its command and keeps the supervisor's watch over it
    /// in the same `poll`: no thread of the supervisor's while the command
    /// has not connected; its first call gets a thread of its own, which
    /// performs it. Off a terminal (standard error passed through a pipe)
    /// and on one (signals passed on, no pipe).
    #[test]
    fn run_starts_no_supervisor_thread_for_a_command_until_it_connects() {
        let h = FakeHome::new();
        let script = threads_before_and_after_a_connect(&h.project);
        let out = h.run(&[], &[&interpreter(), "-I", "-c", &script]);
        assert_success(&out);
        let printed = String::from_utf8_lossy(&out.stdout);
        let name = "strument-sandbox".chars().take(15).collect::<String>();
        let command = printed.lines().next().unwrap_or_default();
        assert_eq!(command, format!("before ['{name}']"), "{}", show(&out));
        let after = printed.lines().nth(1).unwrap_or_default();
        assert!(
            after.starts_with("connected; after [") && after.contains("'strument-connec'"),
            "no serving thread after the connect: {}",
            show(&out)
        );
        // On a terminal: the same, through the other waiter.
        fs::remove_file(h.project.join("own.sock")).expect("remove the socket");
        let line = format!(
            "{} run --project {} -- {} -I -c \"$(cat {})\"; echo run-ended $?\n",
            support::BIN,
            h.project.display(),
            interpreter(),
            {
                let file = h.home.join("threads.py");
                fs::write(&file, &script).expect("write the script");
                file.display().to_string()
            }
        );
        let steps = serde_json::json!([
            {"send": line, "expect": "run-ended"},
            {"send": "exit\n"},
        ]);
        let mut cmd = Command::new(python());
        cmd.arg(support::fixture("pty-shell.py"))
            .arg(steps.to_string());
        h.env(&mut cmd);
        cmd.env("PS1", "$ ").env("TERM", "dumb");
        let out = output(&mut cmd);
        let transcript = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the terminal session failed\n{}",
            show(&out)
        );
        assert!(
            transcript.contains(&format!("before ['{name}']"))
                && transcript.contains("connected; after [")
                && transcript.contains("run-ended 0"),
            "on a terminal: {transcript}"
        );
    }

    /// A process the command leaves running, which connects only after the
    /// command has ended, is served by the supervisor's thread while `run`
    /// still passes its output on (it holds `run`'s pipe), not left to
    /// wait on a watch nobody keeps.
    #[test]
    fn a_process_left_running_that_connects_later_is_served() {
        let h = FakeHome::new();
        let late = format!(
            "import socket, sys, time\ntime.sleep(0.05)\np = '{}'\n\
             s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)\n\
             c = socket.socket(socket.AF_UNIX); c.connect(p)\n\
             print('late connect ok', file=sys.stderr, flush=True)\n",
            h.project.join("late.sock").display()
        );
        let file = h.home.join("late.py");
        fs::write(&file, late).expect("write the script");
        let line = format!("'{}' -I '{}' & echo started", interpreter(), file.display());
        let out = h.run(&[], &["sh", "-c", &line]);
        assert_success(&out);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("late connect ok"),
            "{}",
            show(&out)
        );
    }

    #[test]
    fn a_command_gets_a_serving_thread_only_once_it_connects() {
        let (h, prepared) = project_only();
        // The names of this process's threads, for the count and the message.
        let threads = || -> Vec<String> {
            fs::read_dir("/proc/self/task")
                .expect("/proc")
                .filter_map(Result::ok)
                .map(|t| {
                    let comm = fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                    format!("{}:{}", t.file_name().to_string_lossy(), comm.trim_end())
                })
                .collect()
        };
        // The first child starts the supervisor's thread.
        let mut first = Command::new("true");
        prepared.confine(&mut first);
        assert!(first.status().expect("run true").success());
        let before = threads();
        // Says `ready`, waits for a line, then binds a socket in the project
        // and connects to it.
        let script = format!(
            "import socket, sys\nprint('ready', flush=True)\nsys.stdin.readline()\n\
             p = '{}'\ns = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)\n\
             c = socket.socket(socket.AF_UNIX); c.connect(p)\nprint('connected', flush=True)\n\
             sys.stdin.readline()",
            h.project.join("own.sock").display()
        );
        // The interpreter itself, isolated, not what PATH names: a command
        // that looks the user up starts with a connect to nscd's socket (a
        // notified call, so a thread) before `ready`. pyenv's `python3` is a
        // bash script, and bash looks the user up where SHELL is unset;
        // Python does where HOME is unset (its user site, which -I leaves
        // out). With either variable unset this test failed as on CI.
        let interpreter =
            output(Command::new(python()).args(["-I", "-c", "import sys; print(sys.executable)"]));
        assert_success(&interpreter);
        let interpreter = String::from_utf8_lossy(&interpreter.stdout)
            .trim()
            .to_owned();
        let mut cmd = Command::new(&interpreter);
        cmd.args(["-I", "-c", &script])
            .env("HOME", &h.home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        prepared.confine(&mut cmd);
        let mut child = cmd.spawn().expect("spawn python");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(
            child.stdout.take().expect("stdout"),
        ));
        let mut next = || lines.next().and_then(Result::ok).unwrap_or_default();
        assert_eq!(next(), "ready");
        // Running, not connected yet: watched by the supervisor's thread,
        // no thread of its own.
        let now = threads();
        assert_eq!(
            now.len(),
            before.len(),
            "a thread for a command that has not connected: {now:?}, before {before:?}"
        );
        std::io::Write::write_all(&mut stdin, b"go\n").expect("write");
        // Its first call gave it a thread, and was served.
        assert_eq!(next(), "connected");
        let now = threads();
        assert_eq!(
            now.len(),
            before.len() + 1,
            "no thread serving the command that connected: {now:?}, before {before:?}"
        );
        // The watch's thread wakes without preempting (SCHED_BATCH, 3); the
        // thread serving the command has the ordinary policy (0) back.
        let policy = |thread: &String| -> Option<u32> {
            let tid = thread.split(':').next()?;
            let stat = fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
            // Field 41; the 39th after the name's closing parenthesis.
            stat.rsplit(')')
                .next()?
                .split_whitespace()
                .nth(38)?
                .parse()
                .ok()
        };
        let named = |thread: &&String| thread.ends_with(":strument-connec");
        let watching: Vec<_> = before.iter().filter(named).collect();
        let serving: Vec<_> = now
            .iter()
            .filter(|t| !before.contains(t))
            .filter(named)
            .collect();
        assert_eq!(watching.len(), 1, "the watch's thread: {before:?}");
        assert_eq!(serving.len(), 1, "the serving thread: {now:?}");
        assert_eq!(
            policy(watching[0]),
            Some(3),
            "the watch's thread: {before:?}"
        );
        assert_eq!(policy(serving[0]), Some(0), "the serving thread: {now:?}");
        drop(stdin);
        assert!(child.wait().expect("wait").success());
        // Its socket is in the project: the bind was the kernel's, granted.
        assert!(h.project.join("own.sock").exists());
    }

    #[test]
    fn where_a_container_refuses_unshare_run_hands_the_listener_over_and_still_decides() {
        // Docker's default seccomp profile refuses unshare without
        // CAP_SYS_ADMIN: a child of `run` cannot leave the descriptor table
        // it starts in, so it is started again and sends its listener over.
        let h = FakeHome::new();
        let outside = h.home.join("service.sock");
        let addr = outside.to_str().expect("UTF-8").to_owned();
        let log = h.home.join("accepted.log");
        let _service = Service::start(&addr, &log);
        let target = h.home.join("written-for-a-confined-client");
        let script = format!(
            "{py} {fx} own {project} && {py} {fx} ask {addr} {target}",
            py = py(),
            fx = fixture(),
            project = h.project.display(),
            target = target.display(),
        );
        let mut cmd = h.run_command(&h.project, &[], &["sh", "-c", &script]);
        support::without_syscalls(&mut cmd, &[libc::SYS_unshare], libc::EPERM);
        let out = output(&mut cmd);
        assert_success(&out);
        // Granted: the command's own sockets, bound and connected.
        assert!(stdout(&out).contains("own abstract ok"), "{}", show(&out));
        // Refused: the service outside, which wrote nothing.
        assert!(
            stdout(&out).contains(&format!("refused: errno {}", libc::EACCES)),
            "{}",
            show(&out)
        );
        assert!(!target.exists(), "the service wrote for a confined command");
        assert!(!log.exists(), "the service accepted a confined connection");
    }

    /// The reverse direction: a server the command starts answers the
    /// sandbox's own clients and, over TCP, clients outside (a browser on a
    /// development server), but no unix client outside, which it could
    /// tell what to run (tmux's client runs its server's commands). The
    /// refused client is named after the command.
    #[test]
    fn a_server_inside_answers_the_sandbox_and_tcp_outside_but_no_unix_client_outside() {
        let h = FakeHome::new();
        let dir = support::in_tmp("strument-inbound-");
        let sock = dir.path().join("srv.sock");
        let done = dir.path().join("done");
        let server = "import os, socket, sys, threading, time\n\
            d = sys.argv[1]\n\
            u = socket.socket(socket.AF_UNIX)\n\
            u.bind(os.path.join(d, 'srv.sock'))\n\
            u.listen(8)\n\
            t = socket.socket()\n\
            t.bind(('127.0.0.1', 0))\n\
            t.listen(8)\n\
            def serve(s, label):\n\
            \x20   while True:\n\
            \x20       c, peer = s.accept()\n\
            \x20       c.sendall(('%s %r' % (label, peer)).encode())\n\
            \x20       c.close()\n\
            for s, label in ((u, 'unix'), (t, 'tcp')):\n\
            \x20   threading.Thread(target=serve, args=(s, label), daemon=True).start()\n\
            c = socket.socket(socket.AF_UNIX)\n\
            c.connect(os.path.join(d, 'srv.sock'))\n\
            inside = c.recv(100).decode()\n\
            open(os.path.join(d, 'ready.tmp'), 'w').write('%d\\n%s\\n' % (t.getsockname()[1], inside))\n\
            os.rename(os.path.join(d, 'ready.tmp'), os.path.join(d, 'ready'))\n\
            while not os.path.exists(os.path.join(d, 'done')):\n\
            \x20   time.sleep(0.05)\n";
        let (session, said) = confined_python_until_ready(&h, server, dir.path());
        let mut lines = said.lines();
        let port: u16 = lines.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let inside = lines.next().unwrap_or_default().to_owned();
        // Outside: the unix client gets nothing, the TCP client its answer.
        let unix_outside = {
            use std::io::Read;
            let mut answer = String::new();
            match std::os::unix::net::UnixStream::connect(&sock) {
                Ok(mut c) => {
                    let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                    let _ = c.read_to_string(&mut answer);
                    answer
                }
                Err(e) => format!("connect: {e}"),
            }
        };
        let tcp_outside = {
            use std::io::Read;
            let mut answer = String::new();
            if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let _ = c.read_to_string(&mut answer);
            }
            answer
        };
        fs::write(&done, "").expect("end the server");
        let mut session = session;
        let mut err = String::new();
        if let Some(mut e) = session.0.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        let status = session.0.wait().expect("wait for run");
        assert!(status.success(), "run failed: {status}\n{err}");
        assert!(
            inside.starts_with("unix"),
            "the command's own client got no answer ({inside:?})\n{err}"
        );
        assert_eq!(
            unix_outside, "",
            "a unix client outside the sandbox was answered by a server inside\n{err}"
        );
        assert!(
            tcp_outside.starts_with("tcp ('127.0.0.1', "),
            "a TCP client outside got no answer from the development server inside \
             ({tcp_outside:?})\n{err}"
        );
        let refused = format!(
            "refused pid {}, outside the sandbox, a connection to a server a confined command \
             started at {}",
            std::process::id(),
            sock.display()
        );
        assert!(err.contains(&refused), "no line {refused:?}\n{err}");
    }

    /// A server waiting in `accept`, which the supervisor performs, still
    /// stops on Ctrl-C: a handled signal ends the wait (`EINTR`, which
    /// Python answers by running its handler), as the kernel's own accept
    /// would.
    #[test]
    fn a_server_waiting_in_accept_still_takes_ctrl_c() {
        let h = FakeHome::new();
        let (session, pid, _dir) = python_waiting_in_accept(
            &h,
            "try:\n\
             \x20   s.accept()\n\
             \x20   print('accepted')\n\
             except KeyboardInterrupt:\n\
             \x20   print('interrupted')\n",
        );
        let sent = std::time::Instant::now();
        // SAFETY: kill takes integers; `pid` is the confined server's.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let mut session = session;
        let deadline = sent + std::time::Duration::from_secs(5);
        while session.0.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // Still waiting: killed, so the test ends (and fails below).
        // SAFETY: kill takes integers; `pid` is the confined server's.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut said = String::new();
        if let Some(mut out) = session.0.stdout.take() {
            use std::io::Read;
            let _ = out.read_to_string(&mut said);
        }
        let _ = session.0.wait();
        assert_eq!(
            said.trim(),
            "interrupted",
            "the server did not take SIGINT in accept"
        );
        assert!(
            sent.elapsed() < std::time::Duration::from_secs(3),
            "SIGINT took {:?} to end the wait",
            sent.elapsed()
        );
    }

    /// Ctrl-Z too: a stop signal ends the supervisor's wait (`EINTR`), so
    /// the server waiting in `accept` stops, as it would bare.
    #[test]
    fn a_server_waiting_in_accept_still_stops_on_ctrl_z() {
        let h = FakeHome::new();
        let (session, pid, _dir) = python_waiting_in_accept(
            &h,
            "while True:\n\
             \x20   try:\n\
             \x20       s.accept()\n\
             \x20   except InterruptedError:\n\
             \x20       pass\n",
        );
        // SAFETY: kill takes integers; `pid` is the confined server's.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTSTP) }, 0);
        let state = || {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim().chars().next()))
                .flatten()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while state() != Some('T') && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let stopped = state();
        // SAFETY: as above; it ends the server whatever its state.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut session = session;
        let _ = session.0.wait();
        assert_eq!(
            stopped,
            Some('T'),
            "SIGTSTP did not stop the server in accept"
        );
    }

    /// A handled signal interrupts a mediated `accept` as it would the
    /// kernel's: a handler with `SA_RESTART` lets the accept go on (the
    /// kernel restarts it) and the connection that comes later is taken;
    /// one without ends it with `EINTR`. The program calls the C library's
    /// `accept` itself: Python's own would take `EINTR` again (PEP 475).
    #[test]
    fn a_signal_restarts_a_mediated_accept_or_interrupts_it_as_its_handler_asks() {
        let h = FakeHome::new();
        for (restart, expected) in [(true, "accepted"), (false, "EINTR")] {
            let (session, _pid, _dir) = python_waiting_in_accept(
                &h,
                &format!(
                    "import ctypes, errno, signal, time\n\
                     libc = ctypes.CDLL(None, use_errno=True)\n\
                     signal.signal(signal.SIGUSR1, lambda *a: None)\n\
                     signal.siginterrupt(signal.SIGUSR1, {})\n\
                     me = os.getpid()\n\
                     if os.fork() == 0:\n\
                     \x20   time.sleep(0.5)\n\
                     \x20   os.kill(me, signal.SIGUSR1)\n\
                     \x20   time.sleep(1.0)\n\
                     \x20   c = socket.socket(socket.AF_UNIX)\n\
                     \x20   c.connect(os.path.join(d, 'srv.sock'))\n\
                     \x20   os._exit(0)\n\
                     r = libc.accept(s.fileno(), None, None)\n\
                     print('accepted' if r >= 0 else errno.errorcode.get(ctypes.get_errno()), flush=True)\n\
                     os.wait()\n",
                    if restart { "False" } else { "True" }
                ),
            );
            let (said, err) = said_within(session, std::time::Duration::from_secs(10));
            assert_eq!(
                said.trim(),
                expected,
                "with SA_RESTART {restart}: the accept answered {said:?}\n{err}"
            );
        }
    }

    /// A blocking `connect` to a host that never answers, which the
    /// supervisor performs on a thread of its own, takes signals as the
    /// kernel's connect does, not only once the kernel gives up two
    /// minutes later: a handler with `SA_RESTART` does not end it (the
    /// kernel restarts it, and it waits on for the same handshake), one
    /// without ends it with `EINTR` at once. The host is 10.99.0.2 in a
    /// network namespace of the test's own whose only route sends it to
    /// the loopback device, where nothing answers it.
    #[test]
    fn a_blocking_connect_to_a_host_that_never_answers_takes_signals_as_the_kernels_does() {
        let h = FakeHome::new();
        require_landlock();
        require_tool("ip", "iproute2");
        let unshare = require_tool("unshare", "util-linux");
        let script = "import ctypes, errno, os, signal, socket, struct, time\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             signal.signal(signal.SIGUSR1, lambda *a: None)\n\
             signal.siginterrupt(signal.SIGUSR1, False)\n\
             signal.signal(signal.SIGUSR2, lambda *a: None)\n\
             signal.siginterrupt(signal.SIGUSR2, True)\n\
             s = socket.socket()\n\
             a = struct.pack('=H', socket.AF_INET) + struct.pack('!H', 80) + socket.inet_aton('10.99.0.2') + bytes(8)\n\
             me = os.getpid()\n\
             if os.fork() == 0:\n\
             \x20   time.sleep(0.5)\n\
             \x20   os.kill(me, signal.SIGUSR1)\n\
             \x20   time.sleep(1.5)\n\
             \x20   os.kill(me, signal.SIGUSR2)\n\
             \x20   os._exit(0)\n\
             t = time.monotonic()\n\
             r = libc.connect(s.fileno(), a, len(a))\n\
             e = errno.errorcode.get(ctypes.get_errno())\n\
             print(r, e, round(time.monotonic() - t, 1), flush=True)\n\
             os.wait()\n";
        let mut cmd = Command::new(unshare);
        cmd.args([
            "-n",
            "sh",
            "-c",
            "ip link set lo up && ip route add 10.99.0.0/24 dev lo && exec \"$@\"",
            "sh",
            support::BIN,
            "run",
            "--project",
        ])
        .arg(&h.project)
        .args(["--", &py(), "-c", script]);
        h.env(&mut cmd);
        cmd.current_dir(&h.project);
        let (said, err) = said_within(piped(&mut cmd), std::time::Duration::from_secs(15));
        let fields: Vec<&str> = said.split_whitespace().collect();
        let waited: f64 = fields
            .get(2)
            .and_then(|t| t.parse().ok())
            .unwrap_or(f64::MAX);
        assert_eq!(
            fields.get(..2),
            Some(&["-1", "EINTR"][..]),
            "the connect answered {said:?}\n{err}"
        );
        // SIGUSR1 came at 0.5 s and did not end it; SIGUSR2 at 2 s did,
        // within the supervisor's quarter of a second.
        assert!(
            (1.9..3.0).contains(&waited),
            "the connect ended after {waited} s, not at the second signal: {said:?}\n{err}"
        );
    }

    /// The connection a confined server's mediated `accept` takes reaches
    /// it as on Linux 5.13, where `SECCOMP_ADDFD_FLAG_SEND` (5.14) is
    /// missing and the descriptor is installed in the server first, then
    /// the call answered with its number: no guest of the VM tier runs a
    /// kernel of Landlock without it, so a test build's switch takes that
    /// path here. The granted half of the same exchange, with the flag, is
    /// `sockets_the_command_binds_in_tmp_the_project_and_an_abstract_name_work`.
    #[test]
    fn an_accepted_connection_is_handed_over_as_a_kernel_without_addfd_send_must() {
        let h = FakeHome::new();
        let project = h.project.to_str().expect("UTF-8").to_owned();
        let switch = "STRUMENT_SANDBOX_TEST_WITHOUT_ADDFD_SEND";
        support::require_test_switch(switch);
        let mut cmd = h.run_command(&h.project, &[], &[&py(), &fixture(), "own", &project]);
        cmd.env(switch, "1");
        let (said, err) = said_within(piped(&mut cmd), std::time::Duration::from_secs(20));
        assert_eq!(said, OWN_OK, "{err}");
    }

    /// A blocking `sendmsg` that must wait (every `sendmsg` is performed
    /// by the supervisor) ends as the kernel's own does, not only once its
    /// peer reads: a signal without `SA_RESTART` ends it with `EINTR`, or
    /// with the count sent when part went out; with `SA_RESTART` it goes on
    /// until the peer drains it; `SO_SNDTIMEO` gives `EAGAIN`, or the
    /// count. Each mode runs bare first: the kernel's answer, and when,
    /// is what the confined run must say, within the supervisor's quarter
    /// of a second. Before, the confined program waited in the send until
    /// its peer read, deaf to Ctrl-C and to `SIGTERM` too, once a handled
    /// signal was pending.
    #[test]
    fn a_blocking_send_takes_signals_and_its_send_timeout_as_the_kernels_does() {
        let h = FakeHome::new();
        let script = support::fixture("sending.py");
        let script = script.to_str().expect("UTF-8 fixture path");
        for (mode, expected) in [
            ("signal", "-1 EINTR 0.5"),
            ("restart", "sent 1.5"),
            ("timeout", "-1 EAGAIN 0.3"),
            ("timeout-partial", "partial 0.3"),
            ("signal-partial", "partial 0.5"),
        ] {
            let bare = Command::new(py())
                .args([script, mode])
                .output()
                .expect("run python3");
            assert_eq!(
                stdout(&bare).trim(),
                expected,
                "bare, the kernel's own send ({mode}): {}",
                stderr(&bare)
            );
            let mut cmd = h.run_command(&h.project, &[], &[&py(), script, mode]);
            let (said, err) = said_within(piped(&mut cmd), std::time::Duration::from_secs(10));
            let (result, at) = said.trim().rsplit_once(' ').unwrap_or_default();
            let (wanted, when) = expected.rsplit_once(' ').expect("result and time");
            let (at, when): (f64, f64) = (
                at.parse().unwrap_or(f64::MAX),
                when.parse().expect("a time"),
            );
            assert!(
                result == wanted && (when..when + 0.35).contains(&at),
                "confined ({mode}): {said:?}, the kernel's {expected:?}\n{err}"
            );
        }
    }

    /// A connect that waits for a server on this machine, whose queue of
    /// connections is full, waits alone, as the kernel's would: the
    /// command's other connects go on meanwhile, so the server's own
    /// thread reaches its `accept` and the waiting one completes. Were the
    /// supervisor to wait in it, every call of the command would wait
    /// behind it, that `accept` included: for a unix socket, for ever.
    #[test]
    fn a_connect_waiting_for_a_full_queue_does_not_hold_the_commands_other_calls() {
        let h = FakeHome::new();
        let script = "import os, socket, sys, threading, time\n\
             d, family = sys.argv[1], sys.argv[2]\n\
             def server(name):\n\
             \x20   if family == 'unix':\n\
             \x20       s = socket.socket(socket.AF_UNIX)\n\
             \x20       s.bind(os.path.join(d, name))\n\
             \x20   else:\n\
             \x20       s = socket.socket()\n\
             \x20       s.bind(('127.0.0.1', 0))\n\
             \x20   s.listen(0)\n\
             \x20   return s, s.getsockname()\n\
             def client(addr):\n\
             \x20   c = socket.socket(socket.AF_UNIX if family == 'unix' else socket.AF_INET)\n\
             \x20   c.connect(addr)\n\
             \x20   return c\n\
             full, full_addr = server('full.sock')\n\
             other, other_addr = server('other.sock')\n\
             first = client(full_addr)\n\
             done = []\n\
             t = threading.Thread(target=lambda: done.append(client(full_addr)), daemon=True)\n\
             t.start()\n\
             time.sleep(0.5)\n\
             start = time.monotonic()\n\
             client(other_addr)\n\
             took = time.monotonic() - start\n\
             full.accept()\n\
             t.join(8)\n\
             print('other', 'at once' if took < 0.3 else 'after %.1f s' % took, 'waiting one', 'done' if done else 'still waiting', flush=True)\n";
        for family in ["unix", "tcp"] {
            let dir = tempfile::tempdir_in(&h.project).expect("a directory in the project");
            let mut cmd = h.run_command(
                &h.project,
                &[],
                &[
                    &py(),
                    "-c",
                    script,
                    dir.path().to_str().expect("UTF-8"),
                    family,
                ],
            );
            let (said, err) = said_within(piped(&mut cmd), std::time::Duration::from_secs(15));
            assert_eq!(
                said.trim(),
                "other at once waiting one done",
                "{family}: {said:?}\n{err}"
            );
        }
    }

    /// A server polling edge-triggered (as tokio does) hears of a
    /// connection once: one from inside queued behind a refused one from
    /// outside is handed over by the same `accept`, not left waiting for
    /// an event that never comes.
    #[test]
    fn an_edge_triggered_server_gets_the_inside_connection_behind_a_refused_one() {
        let h = FakeHome::new();
        let dir = support::in_tmp("strument-accept-edge-");
        let server = "import os, select, socket, sys, threading, time\n\
            d = sys.argv[1]\n\
            path = os.path.join(d, 'srv.sock')\n\
            s = socket.socket(socket.AF_UNIX)\n\
            s.bind(path)\n\
            s.listen(8)\n\
            s.setblocking(False)\n\
            ep = select.epoll()\n\
            ep.register(s.fileno(), select.EPOLLIN | select.EPOLLET)\n\
            open(os.path.join(d, 'ready.tmp'), 'w').write('ready')\n\
            os.rename(os.path.join(d, 'ready.tmp'), os.path.join(d, 'ready'))\n\
            while not os.path.exists(os.path.join(d, 'outside')):\n\
            \x20   time.sleep(0.02)\n\
            c = socket.socket(socket.AF_UNIX)\n\
            c.connect(path)\n\
            got = []\n\
            end = time.time() + 3\n\
            while not got and time.time() < end:\n\
            \x20   for _ in ep.poll(0.2):\n\
            \x20       while True:\n\
            \x20           try:\n\
            \x20               got.append(s.accept()[0])\n\
            \x20           except BlockingIOError:\n\
            \x20               break\n\
            print('accepted %d' % len(got))\n";
        let (session, said) = confined_python_until_ready(&h, server, dir.path());
        assert_eq!(said, "ready");
        // From outside, first in the queue; kept open until the server is done.
        let outside = std::os::unix::net::UnixStream::connect(dir.path().join("srv.sock"));
        fs::write(dir.path().join("outside"), "").expect("tell the server");
        let mut session = session;
        let (printed, err) = outputs(&mut session);
        drop(outside);
        assert_eq!(
            printed.trim(),
            "accepted 1",
            "the connection from inside was not handed over with the event\n{err}"
        );
        assert!(
            err.contains("outside the sandbox, a connection to a server"),
            "the connection from outside was not the one refused\n{err}"
        );
    }
}
