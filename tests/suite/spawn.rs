//! `Spawn`: a child started with `clone(CLONE_VM | CLONE_VFORK)` is confined
//! exactly as one started through `Prepared::confine`, starts in a clean
//! signal state, and the caller stays unconfined.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;

use strument_sandbox::spawn::Spawn;

use super::support::FakeHome;
use super::support::{applied_environment, project_only};

/// `tests/fixtures/sockets.py`: a stand-in service and its client.
fn sockets_py() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sockets.py")
}

mod needs_landlock {
    use super::*;

    #[test]
    fn a_spawned_child_writes_only_under_granted_roots() {
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let outside = h.home.join("outside.txt");
        let status = Spawn::new("sh")
            .args(["-c", "echo in > inside.txt; echo out > \"$1\"", "sh"])
            .arg(&outside)
            .current_dir(&h.project)
            .spawn(&prepared)
            .expect("spawn")
            .wait()
            .expect("wait");
        assert!(!status.success(), "the write outside was not refused");
        assert_eq!(h.project_file("inside.txt"), "in\n");
        assert!(!outside.exists(), "a write outside every root landed");
        // The caller itself was not confined.
        fs::write(&outside, "caller").expect("the caller stays unconfined");
    }

    #[test]
    fn input_and_output_go_through_the_descriptors_given() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        let errors = fs::File::create(h.project.join("errors.txt")).expect("create");
        let mut child = Spawn::new("sh")
            .args([
                "-c",
                "tr a-z A-Z; echo done >&2; echo caller > \"$1\"",
                "sh",
            ])
            .arg(h.home.join("outside.txt"))
            .stdin_from(theirs.as_raw_fd())
            .stdout_to(theirs.as_raw_fd())
            .stderr_to(errors.as_raw_fd())
            .spawn(&prepared)
            .expect("spawn");
        drop((theirs, errors));
        ours.write_all(b"confined\n").expect("write");
        ours.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let mut upper = String::new();
        ours.read_to_string(&mut upper).expect("read");
        let status = child.wait().expect("wait");
        assert_eq!(upper, "CONFINED\n");
        // Standard error went to the file: the line written, and the
        // shell's own complaint that the write outside was refused.
        let errors = h.project_file("errors.txt");
        assert!(errors.starts_with("done\n"), "{errors}");
        assert!(errors.contains("outside.txt"), "{errors}");
        // Still confined: the write outside the project was refused.
        assert!(!status.success(), "{status:?}");
        assert!(!h.home.join("outside.txt").exists());
    }

    #[test]
    fn a_missing_program_is_not_found_and_nothing_runs() {
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let err = Spawn::new("strument-no-such-program")
            .spawn(&prepared)
            .expect_err("nothing to run");
        assert_eq!(err.kind(), ErrorKind::NotFound);
        // The granted half: a program found in PATH runs.
        let status = Spawn::new("true")
            .spawn(&prepared)
            .expect("true is in PATH")
            .wait()
            .expect("wait");
        assert!(status.success());
        // A file that cannot be executed is refused as such.
        let data = h.project.join("data.txt");
        fs::write(&data, "not a program").expect("write");
        let err = Spawn::new(&data)
            .spawn(&prepared)
            .expect_err("not executable");
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    }

    #[test]
    fn a_spawned_child_starts_with_default_signals_and_an_empty_mask() {
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        // The Rust runtime ignores SIGPIPE in this process; the command must
        // not inherit that, nor a blocked mask.
        let status = Spawn::new("sh")
        .args([
            "-c",
            "grep -E '^Sig(Blk|Ign)' /proc/self/status > signals.txt; kill -PIPE $$; echo survived > after.txt",
        ])
        .current_dir(&h.project)
        .spawn(&prepared)
        .expect("spawn")
        .wait()
        .expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}");
        assert!(!h.project.join("after.txt").exists());
        let signals = h.project_file("signals.txt");
        assert!(
            signals.contains("SigBlk:\t0000000000000000"),
            "blocked signals inherited: {signals}"
        );
        let ignored = signals
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:\t"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .expect("SigIgn line");
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE ignored");
    }

    #[test]
    fn environment_directory_and_a_script_without_shebang_are_passed_on() {
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let script = h.project.join("no-shebang");
        fs::write(&script, "echo \"$GREETING $1\" > greeting.txt\n").expect("write script");
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
        let status = Spawn::new("no-shebang")
            .arg("world")
            .env([
                ("GREETING", "hello"),
                ("PATH", h.project.to_str().expect("utf-8")),
            ])
            .current_dir(&h.project)
            .spawn(&prepared)
            .expect("spawn")
            .wait()
            .expect("wait");
        assert!(status.success(), "{status:?}");
        assert_eq!(h.project_file("greeting.txt"), "hello world\n");
    }

    #[test]
    fn a_caller_with_other_threads_spawns_confined_children() {
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // Allocating while the children start: the child shares this memory.
                    n = n.wrapping_add(vec![1u8; 4096].len() as u64);
                }
                n
            })
        };
        for i in 0..20 {
            let name = format!("child-{i}");
            let status = Spawn::new("sh")
                .args(["-c", "echo ok > \"$1\"; echo no > \"$2\"", "sh", &name])
                .arg(h.home.join(&name))
                .current_dir(&h.project)
                .spawn(&prepared)
                .expect("spawn")
                .wait()
                .expect("wait");
            assert!(!status.success());
            assert!(h.project.join(&name).is_file(), "{name} did not run");
            assert!(!h.home.join(&name).exists(), "{name} wrote outside");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.join().expect("the other thread ran on");
    }

    #[test]
    fn a_spawned_child_gets_the_same_environment_as_a_confined_command() {
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let applied: Vec<_> = applied_environment(&prepared)
            .iter()
            .map(|s| format!("{}={}", s.variable, s.value.to_string_lossy()))
            .collect();
        assert!(
            !applied.is_empty(),
            "no session variable applies in this test's environment: nothing to compare"
        );
        let mut cmd = std::process::Command::new("env");
        cmd.current_dir(&h.project);
        prepared.confine(&mut cmd);
        let by_command = cmd.output().expect("env through Command");
        let mut spawned = Spawn::new("sh")
            .args(["-c", "env > spawned-env.txt"])
            .current_dir(&h.project)
            .spawn(&prepared)
            .expect("spawn");
        assert!(spawned.wait().expect("wait").success());
        let lines = |text: &str| {
            let mut l: Vec<String> = text
                .lines()
                // The shell's own (its working directory, the last argument),
                // and names it drops (`CARGO_BIN_EXE_strument-sandbox`).
                .filter(|l| {
                    !l.starts_with("PWD=") && !l.starts_with("_=") && !l.starts_with("OLDPWD=")
                })
                .filter(|l| !l.split('=').next().is_some_and(|name| name.contains('-')))
                .map(str::to_owned)
                .collect();
            l.sort();
            l
        };
        let by_command = lines(&String::from_utf8_lossy(&by_command.stdout));
        let by_spawn = lines(&h.project_file("spawned-env.txt"));
        for setting in &applied {
            assert!(
                by_spawn.contains(setting),
                "{setting} missing from Spawn's child"
            );
        }
        assert_eq!(by_spawn, by_command);
    }

    #[test]
    fn a_spawned_child_goes_through_the_connect_supervisor() {
        use std::io::{BufRead, BufReader};
        let python = crate::suite::support::require_tool("python3", "python3");
        let h = FakeHome::new();
        let prepared = project_only(&h).prepare().expect("prepare");
        let addr = h.home.join("service.sock");
        let log = h.home.join("accepted.log");
        let mut service = std::process::Command::new(&python)
            .arg(sockets_py())
            .arg("serve")
            .arg(&addr)
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the service");
        let mut line = String::new();
        BufReader::new(service.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read the service");
        assert_eq!(line.trim(), "listening");
        // Granted half: the service writes outside the roots for an unconfined client.
        let free = h.home.join("written-for-an-unconfined-client");
        let asked = std::process::Command::new(&python)
            .arg(sockets_py())
            .arg("ask")
            .arg(&addr)
            .arg(&free)
            .output()
            .expect("ask unconfined");
        assert!(asked.status.success() && free.exists(), "{asked:?}");
        fs::remove_file(&log).expect("remove the log");
        // Refused: the same request from a child started by Spawn.
        let target = h.home.join("written-for-a-spawned-client");
        let status = Spawn::new(&python)
            .arg(sockets_py())
            .arg("ask")
            .arg(&addr)
            .arg(&target)
            .current_dir(&h.project)
            .spawn(&prepared)
            .expect("spawn")
            .wait()
            .expect("wait");
        let _ = service.kill();
        let _ = service.wait();
        assert!(status.success(), "{status:?}");
        assert!(!target.exists(), "the service wrote for a spawned command");
        assert!(
            !log.exists(),
            "the service accepted a spawned command's connection"
        );
    }
}
