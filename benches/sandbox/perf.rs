//! Landlock's share of a run's CPU samples, from `perf`.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

/// Landlock's share of the CPU samples of one run of `cmd`, in percent:
/// `perf record` on the software clock with call graphs, then the samples
/// with a frame in the kernel's Landlock checks (`security/landlock/`).
/// `None` when perf is missing or not permitted.
pub fn landlock_share(cmd: &Command, perf_data: &Path, stderr_log: &Path) -> Option<f64> {
    let log = fs::File::create(stderr_log).ok()?;
    // No build-id collection or cache: it is slow and would write to ~/.debug.
    let mut perf = Command::new("perf");
    perf.args([
        "record",
        "-q",
        "--no-buildid",
        "--no-buildid-cache",
        "-e",
        "cpu-clock",
        "-F",
        "2000",
        "-g",
        "-o",
    ])
    .arg(perf_data)
    .arg("--")
    .arg(cmd.get_program())
    .args(cmd.get_args())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(log);
    if let Some(dir) = cmd.get_current_dir() {
        perf.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => perf.env(key, value),
            None => perf.env_remove(key),
        };
    }
    if !perf.status().ok()?.success() {
        return None;
    }
    let script = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(perf_data)
        .args(["-F", "ip,sym"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let _ = fs::remove_file(perf_data);
    let text = String::from_utf8_lossy(&script.stdout);
    // One sample per block of frame lines ("address symbol"); a sample is
    // Landlock's when any frame is: hooks tail-call their checks, so the
    // checks are named too.
    let landlock = |symbol: &str| {
        ["hook_", "landlock_", "current_check_"]
            .iter()
            .any(|prefix| symbol.starts_with(prefix))
            || symbol == "is_access_to_paths_allowed"
            || symbol == "collect_domain_accesses"
    };
    let (mut samples, mut in_landlock) = (0u64, 0u64);
    let mut current: Option<bool> = None;
    for line in text.lines().chain(std::iter::once("")) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some(_address), Some(symbol)) => {
                let hit = landlock(symbol);
                current = Some(current.unwrap_or(false) || hit);
            }
            _ => {
                if let Some(hit) = current.take() {
                    samples += 1;
                    in_landlock += u64::from(hit);
                }
            }
        }
    }
    (samples > 0).then(|| 100.0 * in_landlock as f64 / samples as f64)
}

pub fn share_text(share: Option<f64>) -> String {
    share.map_or_else(|| "perf not available".into(), |s| format!("{s:.1} %"))
}
