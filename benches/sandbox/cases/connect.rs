//! The connect supervisor's cost: one connect (and a one-byte echo) to a
//! server the workload starts itself, mediated against plain, for a unix
//! socket in the project and a TCP socket on loopback.

use std::process::Command;

use crate::config::Config;
use crate::fail;
use crate::project::{Bench, Project};
use crate::report::Section;
use crate::runner::two_numbers;
use crate::stats::dur;

/// The workload's own numbers: median and 90th percentile of one connect
/// and echo, in nanoseconds.
fn parse(stdout: &str) -> (u64, u64) {
    two_numbers(stdout).unwrap_or_else(|| fail(&format!("bad connect worker output {stdout:?}")))
}

pub fn run(bench: &Bench, config: &Config) -> Section {
    let project = &bench.project;
    let prepared = Project::policy(&project.dir)
        .prepare()
        .unwrap_or_else(|e| fail(&format!("prepare: {e}")));
    let count = if config.quick { 500 } else { 10_000 };
    let rounds = if config.quick { 1 } else { 5 };
    let worker = |kind: &str| {
        let mut cmd = Command::new(std::env::current_exe().expect("own path"));
        cmd.args(["worker", "connect", kind, &count.to_string()])
            .arg(&project.dir)
            .current_dir(&project.dir);
        cmd
    };
    let mut rows = Vec::new();
    let mut met = true;
    let mut summary = Vec::new();
    for kind in ["unix", "tcp"] {
        let (mut plain, mut mediated) = (Vec::new(), Vec::new());
        // Interleaved, so drift on a busy machine falls on both alike.
        for _ in 0..rounds {
            for confined in [false, true] {
                let mut cmd = worker(kind);
                if confined {
                    prepared.confine(&mut cmd);
                }
                let out = cmd
                    .output()
                    .unwrap_or_else(|e| fail(&format!("worker: {e}")));
                if !out.status.success() {
                    fail(&format!(
                        "connect worker failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                let stdout = String::from_utf8_lossy(&out.stdout);
                // A confined worker runs under the connect supervisor's
                // filter (and the terminal's, one program); a plain one
                // under none: otherwise the rows would compare nothing.
                let plain_run = stdout.contains("filters=0");
                if confined == plain_run {
                    fail(&format!(
                        "connect worker {} but ran with {stdout:?}",
                        if confined { "confined" } else { "plain" }
                    ));
                }
                let m = parse(&stdout);
                if confined {
                    mediated.push(m);
                } else {
                    plain.push(m);
                }
            }
        }
        let median_of = |v: &mut Vec<(u64, u64)>| {
            v.sort_unstable();
            v[v.len() / 2]
        };
        let (p, m) = (median_of(&mut plain), median_of(&mut mediated));
        let added = m.0 as f64 - p.0 as f64;
        met &= added <= 30_000.0;
        summary.push(format!("{kind} +{:.1} µs", added / 1000.0));
        let ns = |n: u64| dur(std::time::Duration::from_nanos(n));
        rows.push(vec![
            kind.to_string(),
            "plain".into(),
            count.to_string(),
            ns(p.0),
            ns(p.1),
            "—".into(),
        ]);
        rows.push(vec![
            kind.to_string(),
            "mediated (`Prepared::confine`)".into(),
            count.to_string(),
            ns(m.0),
            ns(m.1),
            format!("{:+.1} µs", added / 1000.0),
        ]);
    }
    let mut section = Section::new("Connect");
    section.prose(format!(
        "One `connect` and a one-byte echo to a server the workload runs itself, {count} \
         times a run, the median of {rounds} runs' medians: plain, and under \
         `Prepared::confine`, where the connect supervisor (a thread of the benchmark) \
         reads the address, decides and performs the connect for the workload, and takes \
         the connection from the server's `accept` and hands it over (both sides of each \
         connection are mediated). The unix socket is bound in the project (the kernel performs the bind, Landlock deciding; \
         the supervisor asks the kernel what it bound, and the socket is then reachable as \
         bound inside); TCP goes to 127.0.0.1."
    ));
    section.table(
        &["socket", "variant", "connects", "median", "p90", "added"],
        rows,
    );
    section.target(
        "one mediated connect at most 30 µs over a plain one (median)",
        summary.join(", "),
        met,
    );
    section
}
