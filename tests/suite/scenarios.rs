//! The shared scenarios (`tests/scenarios/scenarios.sh`) on the host's own
//! kernel: the same script the portable VM tier and the NixOS VM tests run
//! inside their guests. Needs a kernel with Landlock, `go`, `cargo`, and
//! crates.io (the cargo scenario downloads its dependency).

use std::path::Path;
use std::process::Command;

use super::support::{
    BIN, ENABLED_SCENARIOS, assert_scenarios_passed, output, require_tool, scratch_base, show,
};

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
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert_scenarios_passed(&out, &ENABLED_SCENARIOS);
    // On the host nothing wraps the script: its summary closes the output.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().last(),
        Some(format!("{} passed, 0 failed", ENABLED_SCENARIOS.len()).as_str()),
        "{}",
        show(&out)
    );
}
