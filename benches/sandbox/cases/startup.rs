//! Start-up: spawn to exit of `true`, bare, wrapped and confined.

use std::path::Path;

use crate::config::Config;
use crate::fail;
use crate::project::{Bench, Project};
use crate::report::Section;
use crate::runner::{Variant, measure_short, peak_rss};
use crate::stats::{Stats, dur, ratio, signed_dur};

pub fn run(bench: &Bench, config: &Config) -> Section {
    let project = &bench.project;
    let t = Path::new("true");
    // Prepared once, in this (unconfined) process: `confine` then costs
    // each child only `fork` instead of `vfork`, `prctl` and
    // `landlock_restrict_self`.
    let prepared = Project::policy(&project.dir)
        .prepare()
        .unwrap_or_else(|e| fail(&format!("prepare: {e}")));
    let variants = [
        Variant::new("bare", "`true`", || project.bare(t, &[])),
        Variant::new("env", "`env true` (a wrapper that only execs)", || {
            project.bare(Path::new("env"), &["true"])
        }),
        Variant::new("run", "`strument-sandbox run -- true`", || {
            project.sandboxed(t, &[])
        }),
        Variant::new("confine", "library: `Prepared::confine` on `true`", || {
            let mut cmd = project.bare(t, &[]);
            prepared.confine(&mut cmd);
            cmd
        }),
        Variant::new(
            "bwrap",
            format!("`bwrap` ({} binds) `true`", project.bwrap_binds.len()),
            || project.bwrap(t, &[]),
        ),
    ];
    let measured = measure_short(
        "start-up",
        &variants,
        config.startup_runs,
        &bench.stderr_log,
    );
    let stats = |key: &str| Stats::of(&measured.samples(key));
    let rss = |key: &str| peak_rss(&measured.variant(key).command, &bench.stderr_log);
    let bare = stats("bare").median;

    let mut section = Section::new("Start-up");
    section.prose(format!(
        "Wall time from spawn to exit, as the parent sees it. Peak memory \
         is the child's `ru_maxrss` from `wait4`, the largest image it had across its \
         `exec`s, from separate runs spawned with `fork` (a `vfork` child's first `exec` \
         would record the benchmark's own size instead). The sandbox \
         runs the CLI's default policy for the project ({} roots granted). `env true` is the \
         floor for any tool that confines and then execs: one more `execve` and dynamic \
         link, nothing else. The library row is how Strument itself confines a child: the \
         ruleset prepared once in the parent, the child restricting itself between `fork` \
         and `exec`. bwrap gets the same writable roots as bind mounts over `--ro-bind / /`, \
         with `--dev /dev` standing for the device roots.",
        project.granted
    ));
    let mut peak = std::collections::HashMap::new();
    let rows = variants
        .iter()
        .map(|v| {
            let s = stats(&v.key);
            let kib = rss(&v.key);
            peak.insert(v.key.as_str(), kib);
            vec![
                v.name.clone(),
                s.runs.to_string(),
                dur(s.median),
                dur(s.min),
                dur(s.max),
                if v.key == "bare" {
                    "—".into()
                } else {
                    signed_dur(s.median.as_secs_f64() - bare.as_secs_f64())
                },
                format!("{:.2}", ratio(s.median, bare)),
                format!("{kib} KiB"),
            ]
        })
        .collect();
    section.table(
        &[
            "command",
            "runs",
            "median",
            "min",
            "max",
            "median − bare",
            "ratio to bare",
            "peak RSS",
        ],
        rows,
    );
    let over_bare = |key: &str| stats(key).median.as_secs_f64() - bare.as_secs_f64();
    let over = over_bare("run");
    let exec_floor = over_bare("env");
    section.target(
        "start-up: ≤ 1 ms median over bare `true`",
        format!(
            "{} over bare: the second exec alone (`env true`) costs {}, strument-sandbox's own \
             work {}; the library's `confine` costs {}",
            signed_dur(over),
            signed_dur(exec_floor),
            signed_dur(over - exec_floor),
            signed_dur(over_bare("confine")),
        ),
        over <= 1e-3,
    );
    section.target(
        "start-up: less than bubblewrap's",
        format!(
            "{} vs bwrap {} over bare",
            signed_dur(over),
            signed_dur(over_bare("bwrap"))
        ),
        stats("run").median < stats("bwrap").median,
    );
    section.prose(format!(
        "Peak memory of the `run` process: {} KiB (bare `true`: {} KiB, bwrap: {} KiB).",
        peak["run"], peak["bare"], peak["bwrap"]
    ));
    section
}
