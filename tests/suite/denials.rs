//! `run --explain-denials` as an ORDINARY user on this kernel: the command
//! is traced by the unconfined `run`, and each refused write is reported
//! with what would allow it. Also what only an ordinary user meets without
//! the flag: an ssh-agent the command starts (a non-dumpable process). The
//! tests run as root here, so each drops to
//! `nobody` (uid 65534) with `setpriv` for the whole `run`, in a fake home
//! that user owns (not under a temporary root). Needs Landlock, util-linux
//! (`setpriv`, `unshare`), and crates.io once for the cargo fixture.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::support::{
    BIN, FakeHome, assert_exit, assert_success, output, require_tool, scratch_base, show,
};
use super::support::{Need, require, require_landlock};
use super::support::{Stopped, copy_fixture};

/// The ordinary user the tests run `run` as.
const USER: u32 = 65534;

const FLAG: &str = "--explain-denials";

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// A fake home handed to the ordinary user.
fn user_home() -> FakeHome {
    let h = FakeHome::new();
    give_to_user(&h.home);
    h
}

/// Makes `path` and everything under it the test user's.
fn give_to_user(path: &Path) {
    if euid() != 0 {
        return;
    }
    require_tool("chown", "coreutils");
    let id = format!("{USER}:{USER}");
    assert_success(&output(Command::new("chown").args(["-R", &id]).arg(path)));
}

/// `strument-sandbox run --project <project> <flags> -- <argv>` in `h`, as
/// the ordinary user, with `toolchain` (a directory the user cannot reach,
/// such as rustup's under /root) bind-mounted where it can, in a mount
/// namespace of the run's own, and first on PATH.
fn run_as_user(
    h: &FakeHome,
    flags: &[&str],
    argv: &[&str],
    toolchain: Option<&Path>,
    env: &[(&str, &str)],
) -> Output {
    let mut inner: Vec<String> = vec![BIN.into(), "run".into(), "--project".into()];
    inner.push(h.project.display().to_string());
    inner.extend(flags.iter().map(|f| (*f).to_owned()));
    inner.push("--".into());
    inner.extend(argv.iter().map(|a| (*a).to_owned()));
    // Kept alive until the command has run: the mount point.
    let mount_point = toolchain.map(|_| {
        tempfile::Builder::new()
            .prefix("toolchain-")
            .tempdir_in(scratch_base())
            .expect("a mount point for the toolchain")
    });
    let mut path = String::new();
    if let Some(dir) = &mount_point {
        fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod the mount point");
        path.push_str(&format!("{}/bin:", dir.path().display()));
    }
    path.push_str("/usr/local/bin:/usr/bin:/bin");
    let mut cmd = if euid() == 0 {
        require_tool("setpriv", "util-linux");
        require_tool("unshare", "util-linux");
        // As root: a private mount namespace for the bind mount, then every
        // id dropped to the user's, no supplementary groups, no capabilities.
        let script = r#"
            src=$1 dst=$2 id=$3; shift 3
            if [ -n "$src" ]; then mount --bind -o ro "$src" "$dst" || exit 99; fi
            exec setpriv --reuid="$id" --regid="$id" --clear-groups --inh-caps=-all -- "$@""#;
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
            "sh",
        ]);
        cmd.arg(toolchain.unwrap_or(Path::new("")));
        cmd.arg(mount_point.as_ref().map_or(Path::new(""), |d| d.path()));
        cmd.arg(USER.to_string());
        cmd
    } else {
        assert!(
            toolchain.is_none_or(|t| t.join("bin").is_dir()),
            "the toolchain is not readable by this user"
        );
        let mut cmd = Command::new("env");
        cmd.arg("--");
        cmd
    };
    cmd.args(&inner);
    h.env(&mut cmd);
    cmd.env("PATH", path).envs(env.iter().copied());
    let out = output(&mut cmd);
    drop(mount_point);
    out
}

/// The lines `run` printed about refused writes.
fn refused_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("strument-sandbox: refused "))
        .map(str::to_owned)
        .collect()
}

/// The JSON object that ends `run --json`'s standard error.
fn last_json(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}\n{}", show(out)))
}

#[track_caller]
fn assert_ran_as_the_user(h: &FakeHome) {
    let uid = fs::read_to_string(h.project.join("uid")).unwrap_or_default();
    assert_eq!(
        uid.trim(),
        USER.to_string(),
        "the command did not run as the ordinary user"
    );
}

/// Single-quoted for the shell.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

mod needs_landlock {
    use super::*;

    #[test]
    fn each_refused_write_is_named_with_the_allow_that_grants_it_for_an_ordinary_user() {
        require_landlock();
        let h = user_home();
        // A lived-in home: ~/.config exists, so `mkdir -p` is refused one level in.
        fs::create_dir_all(h.home.join(".config")).expect("mkdir ~/.config");
        give_to_user(&h.home);
        let script =
            "id -u > uid; touch ~/x; mkdir -p ~/.config/tool/sub; echo ok > inside; exit 3";
        let out = run_as_user(&h, &[FLAG], &["sh", "-c", script], None, &[]);
        assert_exit(&out, 3, "the command's own status passes through");
        assert_ran_as_the_user(&h);
        // Granted: the write inside the project landed.
        assert_eq!(
            fs::read_to_string(h.project.join("inside")).ok().as_deref(),
            Some("ok\n")
        );
        // Refused, and named with the smallest root that would grant each.
        let home = h.home.display();
        let lines = refused_lines(&out);
        let want = [
            format!(
                "refused creating {home}/x (touch: openat, EACCES): no root grants {home}, where \
             it would be created; to allow it: --allow {home}"
            ),
            format!(
                "refused creating the directory {home}/.config/tool (mkdir: mkdir \"tool\" in \
             {home}/.config, EACCES)"
            ),
            format!(
                "no root grants {home}/.config, where it would be created; to allow it: --allow \
             {home}/.config"
            ),
        ];
        for w in &want {
            assert!(
                lines.iter().any(|l| l.contains(w.as_str())),
                "missing {w:?}\n{}",
                show(&out)
            );
        }
        assert_eq!(lines.len(), 2, "one line per refused write\n{}", show(&out));
        assert!(!h.home.join("x").exists() && !h.home.join(".config/tool").exists());
        h.assert_sentinels_intact();

        // The same for programs: --json's last line lists them.
        let out = run_as_user(&h, &[FLAG, "--json"], &["sh", "-c", script], None, &[]);
        assert_exit(&out, 3, "the command's own status passes through");
        let v = last_json(&out);
        assert_eq!(v["exit"], 3);
        let denials = v["denials"].as_array().expect("a denials list");
        assert_eq!(denials.len(), 2, "{v}");
        assert_eq!(denials[0]["operation"], "create");
        assert_eq!(denials[0]["refused_by"], "sandbox");
        assert_eq!(denials[0]["errno"], libc::EACCES);
        assert_eq!(denials[0]["allow"][0], h.home.display().to_string());
        assert_eq!(denials[1]["operation"], "make-dir");
        assert_eq!(denials[1]["paths"][0]["given"], "tool");
        assert_eq!(
            denials[1]["paths"][0]["absolute"],
            h.home.join(".config/tool").display().to_string()
        );
    }

    #[test]
    fn renames_between_directories_in_the_project_report_nothing_and_one_out_of_it_is_named() {
        require_tool("perl", "perl-base");
        let h = user_home();
        let script = "id -u > uid; mkdir -p a b/c; echo x > a/f; echo y > a/g; \
                  mv a/f b/f; perl -e 'rename(\"a/g\", \"b/c/g\") or die \"$!\"'; \
                  ln b/f a/link; ln -s ../b/f a/sym; mv b/c a/c; rm -r b; exit 0";
        let out = run_as_user(&h, &[FLAG], &["sh", "-c", script], None, &[]);
        assert_success(&out);
        assert_ran_as_the_user(&h);
        assert!(refused_lines(&out).is_empty(), "{}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("the sandbox refused no write"),
            "{}",
            show(&out)
        );
        // Granted: every move landed.
        assert!(h.project.join("a/c/g").is_file() && h.project.join("a/link").is_file());
        assert!(!h.project.join("b").exists());

        // Refused: a rename out of the project (rename(2) itself, no copy).
        let script = format!(
            "perl -e 'rename(\"a/link\", \"{}/moved\") or die \"$!\"'",
            h.home.display()
        );
        let out = run_as_user(&h, &[FLAG], &["sh", "-c", &script], None, &[]);
        assert!(!out.status.success(), "{}", show(&out));
        let home = h.home.display();
        let want = format!(
            "{home}/moved: no root grants {home}, where it would be created; to allow it: --allow {home}"
        );
        let lines = refused_lines(&out);
        assert!(
            lines.iter().any(|l| l.starts_with(&format!(
                "strument-sandbox: refused moving {}/a/link to {home}/moved (perl: rename",
                h.project.display()
            )) && l.contains(&want)),
            "{}",
            show(&out)
        );
        assert!(h.project.join("a/link").is_file() && !h.home.join("moved").exists());
    }

    #[test]
    fn the_file_system_s_own_refusals_are_named_as_its_not_the_sandbox_s() {
        let h = user_home();
        let script = "id -u > uid; mkdir locked; chmod 555 locked; touch locked/x; touch /etc/x; \
                  touch ~/y; touch granted; exit 0";
        let out = run_as_user(&h, &[FLAG], &["sh", "-c", script], None, &[]);
        assert_success(&out);
        assert_ran_as_the_user(&h);
        let lines = refused_lines(&out);
        let project = h.project.display();
        let home = h.home.display();
        let fs = "the file system itself refuses it (owner and mode, a read-only mount, an \
              immutable file), confined or not";
        for want in [
            // The sandbox's own refusal comes first: what an --allow changes.
            format!("refused creating {home}/y (touch: openat, EACCES): no root grants {home}"),
            format!(
                "refused creating {project}/locked/x (touch: openat \"locked/x\" in {project}/locked, \
             EACCES): not the sandbox ({project} grants it): {fs}"
            ),
            format!(
                "refused creating /etc/x (touch: openat, EACCES): not the sandbox (outside the roots \
             too): {fs}"
            ),
        ] {
            assert!(
                lines.iter().any(|l| l.contains(&want)),
                "missing {want:?}\n{}",
                show(&out)
            );
        }
        assert!(lines[0].contains(&format!("{home}/y")), "{}", show(&out));
        // Removing a file outside: the directory it is in is what to allow.
        let out = run_as_user(
            &h,
            &[FLAG],
            &["rm", "-f", "--", &format!("{home}/Documents/thesis.txt")],
            None,
            &[],
        );
        assert!(!out.status.success(), "{}", show(&out));
        let want = format!(
            "refused removing {home}/Documents/thesis.txt (rm: unlinkat, EACCES): no root grants \
         {home}/Documents, the directory it is in; to allow it: --allow {home}/Documents"
        );
        assert!(
            refused_lines(&out).iter().any(|l| l.contains(&want)),
            "missing {want:?}\n{}",
            show(&out)
        );
        h.assert_sentinels_intact();
        // Granted: the write beside them landed.
        assert!(h.project.join("granted").is_file());
    }

    #[test]
    fn a_write_to_a_place_refused_on_purpose_says_why_instead_of_an_allow() {
        let h = user_home();
        let tool = h.home.join(".cargo/bin/tool");
        let script = format!(
            "id -u > uid; echo evil >> '{}'; echo granted > granted",
            tool.display()
        );
        let out = run_as_user(&h, &[FLAG, "--json"], &["sh", "-c", &script], None, &[]);
        assert_success(&out);
        assert_ran_as_the_user(&h);
        let v = last_json(&out);
        let denials = v["denials"].as_array().expect("a denials list");
        assert_eq!(denials.len(), 1, "{v}");
        let line = denials[0]["line"].as_str().unwrap_or_default();
        assert!(
        line.starts_with(&format!("refused writing {} (sh: openat, EACCES): refused on purpose: {} is where `cargo install` puts programs", tool.display(), h.home.join(".cargo/bin").display())),
        "{line}"
    );
        assert!(!line.contains("--allow"), "{line}");
        assert_eq!(denials[0]["allow"], serde_json::json!([]), "{v}");
        assert_eq!(denials[0]["refused_by"], "sandbox");
        // Granted: the write beside it landed; the refused one did not.
        assert!(h.project.join("granted").is_file());
        h.assert_sentinels_intact();
    }

    #[test]
    fn a_process_the_command_leaves_running_is_waited_for_and_its_refusals_named() {
        let h = user_home();
        let out = run_as_user(
            &h,
            &[FLAG],
            &[
                "sh",
                "-c",
                "(sleep 0.5; touch ~/late; touch later) & id -u > uid; exit 4",
            ],
            None,
            &[],
        );
        assert_exit(
            &out,
            4,
            "the command's own status, not its background child's",
        );
        assert_ran_as_the_user(&h);
        assert!(
            h.project.join("later").is_file(),
            "the background child was cut short"
        );
        let home = h.home.display();
        assert!(
            refused_lines(&out).iter().any(|l| l.contains(&format!(
                "refused creating {home}/late (touch: openat, EACCES)"
            ))),
            "{}",
            show(&out)
        );
    }

    #[test]
    fn an_ssh_agent_started_inside_serves_the_command_of_an_ordinary_user() {
        // ssh-agent makes itself non-dumpable, which closes its sockets to
        // an ordinary user's supervisor: its bind went unrecorded and
        // `ssh-add` was refused the agent the command had just started. The
        // filter now lets `PR_SET_DUMPABLE` 0 succeed unperformed.
        require_tool("ssh-agent", "openssh-client");
        let python = require_tool("python3", "python3");
        let h = user_home();
        // Outside, a socket nothing names, open to anyone: only the
        // supervisor can refuse it.
        let outside = h.home.join("outside.sock");
        let serve = "import os, socket, sys\n\
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777)\n\
            s.listen(8); print('listening', flush=True)\n\
            while True: s.accept()[0].close()";
        let _server = Stopped::listening(
            Command::new(&python).args(["-c", serve]).arg(&outside),
            "the stand-in outside",
        );
        let script = format!(
            r#"id -u > uid
            eval "$(ssh-agent -s)" >/dev/null || exit 9
            ssh-keygen -q -t ed25519 -N '' -f key || exit 8
            ssh-add -q key 2>/dev/null; echo "add $?" > agent
            ssh-add -l > listed 2>&1; echo "list $?" >> agent
            kill "$SSH_AGENT_PID"
            python3 -c '
import ctypes, socket, sys
libc = ctypes.CDLL(None)
print(libc.prctl(4, 0, 0, 0, 0), libc.prctl(3, 0, 0, 0, 0))
try:
    socket.socket(socket.AF_UNIX).connect(sys.argv[1]); print("connected")
except OSError as e:
    print("errno", e.errno)' {} > dumpable"#,
            quoted(&outside)
        );
        let out = run_as_user(&h, &[], &["sh", "-c", &script], None, &[]);
        assert_success(&out);
        assert_ran_as_the_user(&h);
        let read = |name: &str| fs::read_to_string(h.project.join(name)).unwrap_or_default();
        // Granted: the agent takes the key and lists it.
        assert_eq!(read("agent"), "add 0\nlist 0\n", "{}", show(&out));
        assert!(read("listed").contains("(ED25519)"), "{}", read("listed"));
        // PR_SET_DUMPABLE 0 succeeded and the process stayed dumpable; a
        // connect of it to the socket outside is still the supervisor's,
        // and refused (EACCES), not failed unmediated (EPERM) or let pass.
        assert_eq!(read("dumpable"), "0 1\nerrno 13\n", "{}", show(&out));
    }

    #[test]
    fn a_debugger_inside_cannot_attach_and_says_so_while_it_can_without_the_flag() {
        require_tool("strace", "strace");
        let h = user_home();
        let argv = ["strace", "-o", "/dev/null", "sh", "-c", "id -u > uid"];
        let out = run_as_user(&h, &[FLAG], &argv, None, &[]);
        assert!(!out.status.success(), "{}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
            "{}",
            show(&out)
        );
        assert!(!h.project.join("uid").exists());
        let out = run_as_user(&h, &[], &argv, None, &[]);
        assert_success(&out);
        assert_ran_as_the_user(&h);
    }

    #[test]
    fn run_without_the_flag_changes_nothing_in_status_or_output() {
        let h = FakeHome::new();
        let out = h.sh("echo out; echo err >&2; { echo evil > ~/.bashrc; } 2>/dev/null; exit 7");
        assert_eq!(out.status.code(), Some(7), "{}", show(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
        h.assert_sentinels_intact();
        // With the flag, the command's output is untouched and one line follows.
        let out = h.run(&[OsStr::new(FLAG)], &["sh", "-c", "echo out; echo err >&2"]);
        assert_success(&out);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "err\nstrument-sandbox: the sandbox refused no write\n"
        );
    }

    #[test]
    fn ctrl_z_fg_and_ctrl_c_still_work_on_a_traced_command() {
        require_tool("bash", "bash");
        let python = require_tool("python3", "python3");
        let h = FakeHome::new();
        let run = format!(
            "{} run --project {} {FLAG} --",
            quoted(Path::new(BIN)),
            quoted(&h.project)
        );
        let steps = serde_json::json!([
            {
                "send": format!("{run} sh -c 'sleep 2; touch ~/y; echo resumed-$((1+1))'\n"),
                "expect": null,
            },
            { "send": "\u{1a}", "pause": 1.0, "expect": "Stopped" },
            // Typed once `run` has said what it refused: typed earlier, the
            // terminal echoes it into the middle of that line.
            { "send": "fg\n", "pause": 0.5, "expect": "to allow it" },
            { "send": "echo status-$((40+2))=$?\n", "expect": "status-42=" },
            { "send": format!("{run} sleep 30\n"), "expect": null },
            { "send": "\u{3}", "pause": 1.5, "expect": null },
            { "send": "echo status-$((40+3))=$?\n", "expect": "status-43=" },
        ]);
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pty-shell.py");
        let mut cmd = Command::new(python);
        cmd.arg(fixture).arg(steps.to_string());
        h.env(&mut cmd);
        cmd.env("PS1", "$ ").env("TERM", "dumb");
        let out = output(&mut cmd);
        let transcript = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", show(&out));
        // Stopped and resumed: the command finished its work after `fg`, and
        // its refusal after the stop was still seen.
        assert!(transcript.contains("resumed-2"), "{transcript}");
        assert!(transcript.contains("status-42=0"), "{transcript}");
        assert!(
            transcript.contains(&format!(
                "refused creating {}/y (touch: openat, EACCES)",
                h.home.display()
            )),
            "{transcript}"
        );
        // Interrupted: the traced sleep died of the terminal's SIGINT.
        assert!(transcript.contains("status-43=130"), "{transcript}");
        h.assert_sentinels_intact();
    }

    mod needs_network {
        use super::*;

        #[test]
        fn a_cargo_build_reports_only_its_tracker_journal_and_on_abi_1_its_moves_are_named() {
            require(Need::Network);
            require_tool("cargo", "cargo");
            assert!(
                require_landlock().abi > 1,
                "needs Landlock above ABI 1, to cap it at 1"
            );
            let h = FakeHome::new();
            let crate_dir = h.project.join("cargo-hello");
            copy_fixture("cargo-hello", &crate_dir);
            // The dependency, fetched unconfined (and as root) into the fake home's
            // CARGO_HOME, then the home handed to the user.
            let mut fetch = Command::new("cargo");
            h.env(&mut fetch);
            fetch.args(["fetch", "--locked", "--manifest-path"]);
            fetch.arg(crate_dir.join("Cargo.toml"));
            assert_success(&output(&mut fetch));
            // As on a machine where cargo first runs under the sandbox: `run`
            // creates the tracker's database empty, and cargo fills it in.
            fs::remove_file(h.home.join(".cargo/.global-cache"))
                .expect("cargo fetch made .global-cache");
            give_to_user(&h.home);
            let sysroot = output(Command::new("rustc").args(["--print", "sysroot"]));
            assert_success(&sysroot);
            let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
            let manifest = crate_dir.join("Cargo.toml");
            let manifest = manifest.to_str().expect("a UTF-8 path");
            let build = [
                "sh",
                "-c",
                "id -u > uid; exec cargo build --offline --locked --manifest-path \"$0\"",
                manifest,
            ];
            let cap = "STRUMENT_SANDBOX_TEST_ABI_CAP";

            let journal = h.home.join(".cargo/.global-cache-journal");
            let journal_line = format!(
                "strument-sandbox: refused creating {} (cargo: openat, EACCES): no root grants {}, where \
         it would be created",
                journal.display(),
                h.home.join(".cargo").display()
            );

            // Refused on ABI 1: rustc moves its outputs between directories, and
            // each move is named as the sandbox's, not the file system's.
            let out = run_as_user(&h, &[FLAG], &build, Some(&sysroot), &[(cap, "1")]);
            assert_exit(&out, 101, "cargo build on ABI 1");
            assert_ran_as_the_user(&h);
            let moves: Vec<String> = refused_lines(&out)
                .into_iter()
                .filter(|l| !l.starts_with(&journal_line))
                .collect();
            assert!(
                !moves.is_empty()
                    && moves.iter().all(|l| l.contains("refused moving ")
                        && l.contains(", EXDEV): both ends are writable (granted by ")
                        && l.contains("Landlock ABI 1 refuses every move to another directory")),
                "{}",
                show(&out)
            );

            // Granted on this kernel's own ABI: the build passes, and the one write
            // refused is cargo's last-use tracker's journal beside ~/.cargo/bin,
            // which no root may grant (doc/explain.md); every other write landed.
            fs::remove_dir_all(crate_dir.join("target")).expect("a clean build");
            let out = run_as_user(&h, &[FLAG], &build, Some(&sysroot), &[]);
            assert_success(&out);
            let lines = refused_lines(&out);
            let want = &journal_line;
            assert!(
                !lines.is_empty() && lines.iter().all(|l| l.starts_with(want.as_str())),
                "{}",
                show(&out)
            );
            assert!(crate_dir.join("target/debug/cargo-hello").is_file());
            h.assert_sentinels_intact();
        }
    }
}
