//! The host kernel capped at an older Landlock ABI: a debug build's
//! `STRUMENT_SANDBOX_TEST_ABI_CAP=N` makes the probe report min(kernel, N)
//! and everything follows from it (src/abi.rs), so ABI 1's cross-directory
//! rename denial and ABI 2's open truncate are exercised on every CI run,
//! not only in the VM tiers. Each test first asserts the cap is in effect,
//! so it cannot pass on the kernel's own ABI by accident. Needs a kernel with
//! Landlock at ABI 3 or later, and crates.io once (the cargo fixture's
//! dependency is fetched unconfined, then built `--offline`).

use std::ffi::OsStr;
use std::fs;
use std::process::{Command, Output};

use super::support::copy_fixture;
use super::support::{BIN, FakeHome, assert_exit, assert_success, output, require_tool, show};
use super::support::{Need, require, require_landlock};

const CAP: &str = "STRUMENT_SANDBOX_TEST_ABI_CAP";

/// `strument-sandbox run` in `h` with the ABI capped at `cap` (`None`: the
/// kernel's own), and `extra` variables on top of the fake home's.
#[track_caller]
fn run_capped(h: &FakeHome, cap: Option<u32>, extra: &[(&str, &str)], argv: &[&str]) -> Output {
    require_landlock();
    let mut cmd = Command::new(BIN);
    cmd.arg("run").arg("--project").arg(&h.project).arg("--");
    cmd.args(argv);
    h.env(&mut cmd);
    if let Some(cap) = cap {
        cmd.env(CAP, cap.to_string());
    }
    cmd.envs(extra.iter().copied());
    output(&mut cmd)
}

/// `strument-sandbox <args>` with the ABI capped at `cap`.
fn cli_capped(cap: u32, args: &[&OsStr]) -> String {
    let out = output(Command::new(BIN).args(args).env(CAP, cap.to_string()));
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts the cap is in effect: the probe reports exactly `cap`, below
/// what the kernel itself offers.
#[track_caller]
fn assert_capped_at(cap: u32) {
    let own = require_landlock().abi;
    assert!(
        own > cap,
        "this kernel's own Landlock ABI is {own}: capping at {cap} would test nothing"
    );
    let json = cli_capped(cap, &["probe".as_ref(), "--json".as_ref()]);
    assert!(
        json.contains(&format!("\"abi\":{cap},")),
        "{CAP}={cap} is not in effect (a release build ignores it): {json}"
    );
}

mod needs_landlock {
    use super::*;

    #[test]
    fn abi_1_refuses_a_rename_into_another_directory_even_inside_a_root() {
        require_tool("perl", "perl-base");
        assert_capped_at(1);
        let text = cli_capped(1, &["probe".as_ref()]);
        assert!(
            text.contains("cargo build") && text.contains("5.19"),
            "probe on ABI 1 does not say what it costs and what lifts it:\n{text}"
        );
        let h = FakeHome::new();
        for dir in ["a", "b"] {
            fs::create_dir_all(h.project.join(dir)).expect("mkdir");
        }
        fs::write(h.project.join("a/moved"), "x").expect("write a/moved");
        fs::write(h.project.join("a/renamed"), "y").expect("write a/renamed");
        // rename(2) itself: mv would fall back to copy and delete.
        let rename = ["perl", "-e", "rename($ARGV[0], $ARGV[1]) or die \"$!\\n\""];

        let out = run_capped(
            &h,
            Some(1),
            &[],
            &[&rename[..], &["a/moved", "b/moved"]].concat(),
        );
        assert!(!out.status.success(), "{}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Invalid cross-device link"),
            "{}",
            show(&out)
        );
        assert!(h.project.join("a/moved").is_file() && !h.project.join("b/moved").exists());

        // Granted: within one directory on ABI 1, and across directories on the
        // kernel's own ABI (REFER).
        let out = run_capped(
            &h,
            Some(1),
            &[],
            &[&rename[..], &["a/renamed", "a/done"]].concat(),
        );
        assert_success(&out);
        assert!(h.project.join("a/done").is_file() && !h.project.join("a/renamed").exists());
        let out = run_capped(
            &h,
            None,
            &[],
            &[&rename[..], &["a/moved", "b/moved"]].concat(),
        );
        assert_success(&out);
        assert!(h.project.join("b/moved").is_file() && !h.project.join("a/moved").exists());
        h.assert_sentinels_intact();
    }

    #[test]
    fn abi_2_cannot_refuse_truncate_outside_the_roots_and_says_so() {
        require_tool("perl", "perl-base");
        assert_capped_at(2);
        let json = cli_capped(2, &["probe".as_ref(), "--json".as_ref()]);
        assert!(json.contains("\"truncate-unrestricted\""), "{json}");
        let h = FakeHome::new();
        let policy = cli_capped(
            2,
            &[
                "policy".as_ref(),
                "--project".as_ref(),
                h.project.as_os_str(),
            ],
        );
        assert!(
            policy.contains("limitation: ") && policy.contains("truncate"),
            "policy on ABI 2 does not report the truncate limitation:\n{policy}"
        );
        let outside = h.home.join("Documents/thesis.txt");
        let outside_str = outside.to_str().expect("utf-8 path");
        let before = fs::read_to_string(&outside).expect("sentinel");
        let write = ["sh", "-c", "echo pwned > \"$1\"", "sh", outside_str];
        // truncate(2) by path: truncate(1) opens the file for writing first,
        // which WRITE_FILE refuses on every ABI.
        let truncate = ["perl", "-e", "truncate($ARGV[0], 0) or die \"$!\\n\""];

        // Writing is refused on ABI 2 ...
        let out = run_capped(&h, Some(2), &[], &write);
        assert!(!out.status.success(), "{}", show(&out));
        assert_eq!(fs::read_to_string(&outside).expect("sentinel"), before);
        // ... and so is truncate on the kernel's own ABI (3 or later) ...
        let out = run_capped(&h, None, &[], &[&truncate[..], &[outside_str]].concat());
        assert!(!out.status.success(), "{}", show(&out));
        assert_eq!(fs::read_to_string(&outside).expect("sentinel"), before);
        // ... while inside the project it works, capped or not ...
        fs::write(h.project.join("inside"), "data").expect("write inside");
        let out = run_capped(&h, Some(2), &[], &[&truncate[..], &["inside"]].concat());
        assert_success(&out);
        assert_eq!(fs::read(h.project.join("inside")).expect("inside").len(), 0);
        // ... and on ABI 2 truncate outside is not refused: the reported limitation.
        let out = run_capped(&h, Some(2), &[], &[&truncate[..], &[outside_str]].concat());
        assert_success(&out);
        assert_eq!(fs::read(&outside).expect("sentinel").len(), 0);
    }

    mod needs_network {
        use super::*;

        /// What the shared scenarios capped at ABI 1 (suite::scenarios) do not
        /// show: the failure holds with cargo's pipelining on and off, and the same
        /// build in the same home passes on the kernel's own ABI. (That go test
        /// passes on ABI 1 and writes its cache is the go-test scenario's claim
        /// there.)
        #[test]
        fn abi_1_fails_cargo_build_with_exdev_with_and_without_pipelining() {
            require(Need::Network);
            require_tool("cargo", "cargo");
            assert_capped_at(1);
            let h = FakeHome::new();
            let crate_dir = h.project.join("cargo-hello");
            copy_fixture("cargo-hello", &crate_dir);
            let crate_path = crate_dir.to_str().expect("utf-8 path");
            // The dependency, fetched unconfined into the fake home's CARGO_HOME.
            let mut fetch = Command::new("cargo");
            h.env(&mut fetch);
            fetch.args(["fetch", "--locked", "--manifest-path"]);
            fetch.arg(crate_dir.join("Cargo.toml"));
            assert_success(&output(&mut fetch));

            let build = [
                "cargo",
                "build",
                "--offline",
                "--locked",
                "--manifest-path",
                &format!("{crate_path}/Cargo.toml"),
            ];
            for pipelining in ["true", "false"] {
                let out = run_capped(
                    &h,
                    Some(1),
                    &[("CARGO_BUILD_PIPELINING", pipelining)],
                    &build,
                );
                assert_exit(
                    &out,
                    101,
                    &format!("cargo build on ABI 1 (pipelining {pipelining})"),
                );
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(
                    stderr.contains("Invalid cross-device link"),
                    "cargo build on ABI 1 failed for another reason (pipelining {pipelining})\n{}",
                    show(&out)
                );
                assert!(!crate_dir.join("target/debug/cargo-hello").exists());
            }

            // Granted: the same build passes on the kernel's own ABI ...
            let out = run_capped(&h, None, &[], &build);
            assert_success(&out);
            assert!(crate_dir.join("target/debug/cargo-hello").is_file());
            h.assert_sentinels_intact();
        }
    }
}
