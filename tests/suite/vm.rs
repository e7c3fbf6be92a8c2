//! The portable VM tier (`tests/vm/run-vm.sh`): Debian's stock kernel booted
//! under qemu (TCG), once with Landlock and once with it turned off by
//! `lsm=`, running the shared scenarios inside against the host's own
//! toolchains and this build's binary. Needs qemu-system-x86, busybox-static,
//! linux-image-amd64, go and cargo; a missing one fails the test by name.
//! Each boot takes minutes: see doc/vm-tier.md.

use std::path::Path;
use std::process::{Command, Output};

use serial_test::serial;

use super::support::{
    BIN, DISABLED_SCENARIOS, ENABLED_SCENARIOS, assert_scenarios_passed, output, require_tool, show,
};

fn boot(mode: &str) -> Output {
    require_tool("bash", "bash");
    require_tool("qemu-system-x86_64", "qemu-system-x86");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm/run-vm.sh");
    let out = output(
        Command::new("bash")
            .arg(&script)
            .arg(mode)
            .env("SANDBOX", BIN),
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
    out
}

#[track_caller]
fn assert_passed(out: &Output, mode: &str, scenarios: &[&str]) {
    assert_scenarios_passed(out, scenarios);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("vm[{mode}]: PASS")),
        "{}",
        show(out)
    );
}

// One guest at a time under `cargo test` too (nextest: the `vm` test group):
// two TCG guests on two cores would each run twice as long.
#[test]
#[serial(vm)]
fn landlock_enabled_kernel_passes_every_scenario() {
    require_tool("go", "golang-go");
    require_tool("cargo", "cargo");
    let out = boot("enabled");
    assert_passed(&out, "enabled", &ENABLED_SCENARIOS);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lsm = stdout
        .lines()
        .find_map(|l| l.strip_prefix("vm[enabled]: lsm: "))
        .unwrap_or_default();
    assert!(
        lsm.split(',').any(|m| m == "landlock"),
        "the guest's LSM list lacks landlock: {lsm:?}\n{}",
        show(&out)
    );
}

#[test]
#[serial(vm)]
fn landlock_disabled_kernel_is_refused() {
    let out = boot("disabled");
    assert_passed(&out, "disabled", &DISABLED_SCENARIOS);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lsm = stdout
        .lines()
        .find_map(|l| l.strip_prefix("vm[disabled]: lsm: "))
        .unwrap_or_default();
    assert!(
        !lsm.is_empty() && !lsm.split(',').any(|m| m == "landlock"),
        "the guest's LSM list should be non-empty and without landlock: {lsm:?}\n{}",
        show(&out)
    );
    assert!(
        stdout.contains("reason: ") && stdout.contains("EOPNOTSUPP"),
        "probe in the guest did not report Landlock disabled at boot (EOPNOTSUPP)\n{}",
        show(&out)
    );
}
