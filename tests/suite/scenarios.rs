//! The shared scenarios (`tests/scenarios/scenarios.sh`) on the host's own
//! kernel: the same script the portable VM tier and the NixOS VM tests run
//! inside their guests. Needs a kernel with Landlock, `go`, `cargo`, and
//! crates.io (the cargo scenario downloads its dependency).

use std::path::Path;
use std::process::Command;

use super::support::{BIN, output, require_tool, scratch_base, show};

/// Every scenario the enabled mode runs; each must report `ok <name>:`.
const ENABLED: [&str; 5] = [
    "probe-supported",
    "go-test",
    "cargo-build",
    "rm-rf-home",
    "write-outside-denied",
];

#[test]
fn host_kernel_passes_every_scenario() {
    require_tool("bash", "bash");
    require_tool("go", "golang-go");
    require_tool("cargo", "cargo");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/scenarios.sh");
    // Not under a temp dir: those are granted roots (the script checks too).
    let root = scratch_base().join("scenarios");
    let out = output(
        Command::new("bash")
            .arg(&script)
            .arg("enabled")
            .env("SANDBOX", BIN)
            .env("SCENARIO_ROOT", &root)
            .env_remove("SCENARIO_CARGO_SEED")
            .env_remove("SCENARIO_CARGO_VENDOR"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(out.status.success(), "a scenario failed\n{}", show(&out));
    for name in ENABLED {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("ok {name}: "))),
            "scenario {name} did not report ok\n{}",
            show(&out)
        );
    }
    assert_eq!(
        stdout.lines().last(),
        Some(format!("{} passed, 0 failed", ENABLED.len()).as_str()),
        "{}",
        show(&out)
    );
}
