//! The shared scenarios (`tests/scenarios/scenarios.sh`) on the host's own
//! kernel: the same script the portable VM tier and the NixOS VM tests run
//! inside their guests. Needs a kernel with Landlock, `go`, `cargo`, and
//! crates.io (the cargo scenario downloads its dependency).

use std::process::{Command, Output};

use super::support::{
    BIN, assert_scenarios_passed, output, require_tool, scenario_script, scenarios, scratch_base,
    show,
};
use super::support::{Need, require, require_landlock};

/// Runs the script in `enabled` mode with a fresh scenario root named
/// `root` and `envs` on top, and prints its output.
#[track_caller]
fn run_enabled(root: &str, envs: &[(&str, &str)]) -> Output {
    require_landlock();
    // crates.io, for the cargo scenario's dependency.
    require(Need::Network);
    require_tool("bash", "bash");
    require_tool("go", "golang-go");
    require_tool("cargo", "cargo");
    // Not under a temp dir: those are granted roots (the script checks too).
    let out = output(
        Command::new("bash")
            .arg(scenario_script())
            .arg("enabled")
            .env("SANDBOX", BIN)
            .env("SCENARIO_ROOT", scratch_base().join(root))
            .env_remove("SCENARIO_CARGO_SEED")
            .env_remove("SCENARIO_CARGO_VENDOR")
            .envs(envs.iter().copied()),
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
    out
}

mod needs_landlock {
    use super::*;

    mod needs_network {
        use super::*;

        #[test]
        fn host_kernel_passes_every_scenario() {
            let out = run_enabled("scenarios", &[]);
            let enabled = scenarios("enabled");
            assert_scenarios_passed(&out, &enabled);
            // On the host nothing wraps the script: its summary closes the output.
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).lines().last(),
                Some(format!("{} passed, 0 failed", enabled.len()).as_str()),
                "{}",
                show(&out)
            );
        }

        /// The same script with this kernel capped at ABI 1 (a debug build's
        /// `STRUMENT_SANDBOX_TEST_ABI_CAP`): the probe scenario asserts ABI 1, and
        /// the cargo scenario expects rustc's cross-directory rename to fail, as on
        /// a real ABI 1 kernel (the NixOS tier's `landlock-abi1`).
        #[test]
        fn host_kernel_capped_at_abi_1_expects_the_cargo_build_to_fail() {
            let out = run_enabled(
                "scenarios-abi-1",
                &[
                    ("STRUMENT_SANDBOX_TEST_ABI_CAP", "1"),
                    ("SCENARIO_EXPECT_ABI", "1"),
                ],
            );
            assert_scenarios_passed(&out, &scenarios("enabled"));
            let stdout = String::from_utf8_lossy(&out.stdout);
            for (scenario, says) in [
                ("probe-supported", "landlock abi 1 (expected 1)"),
                ("cargo-build", "Invalid cross-device link"),
            ] {
                assert!(
                    stdout
                        .lines()
                        .any(|l| l.starts_with(&format!("ok {scenario}: ")) && l.contains(says)),
                    "scenario {scenario} does not say {says:?}\n{}",
                    show(&out)
                );
            }
        }
    }
}
