//! Apply alone, as the roots grow: the library against the raw syscalls.

use std::fs;
use std::process::Command;
use std::time::Duration;

use crate::config::Config;
use crate::fail;
use crate::project::Bench;
use crate::report::Section;
use crate::runner::{Variant, measure_short};
use crate::stats::{Stats, dur, ratio};
use crate::workers::WorkerApply;

pub fn run(bench: &Bench, config: &Config) -> Section {
    let max = *config.apply_roots.iter().max().expect("root counts");
    let roots = bench.work.join("roots");
    for i in 0..max {
        let dir = roots.join(format!("r{i:04}"));
        fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
    }
    let roots_arg = roots.to_str().expect("UTF-8 scratch path").to_string();
    // For each root count, the library and the bare syscalls it cannot
    // avoid, interleaved like every other case.
    let worker = |mode: &'static str, count: usize| {
        let roots_arg = roots_arg.clone();
        move || {
            let mut cmd = Command::new(&bench.exe);
            cmd.args(["worker", mode, &count.to_string(), &roots_arg]);
            cmd
        }
    };
    let variants: Vec<Variant<'_>> = config
        .apply_roots
        .iter()
        .flat_map(|&n| {
            [
                Variant::new(format!("apply {n}"), "", worker("apply", n)),
                Variant::new(format!("apply-raw {n}"), "", worker("apply-raw", n)),
            ]
        })
        .collect();
    let measured = measure_short("apply", &variants, config.apply_runs, &bench.stderr_log);
    let detail = |key: String| -> Vec<WorkerApply> {
        measured.stdouts(&key).map(WorkerApply::parse).collect()
    };
    let stat_of = |d: &[WorkerApply], f: &dyn Fn(&WorkerApply) -> Duration| {
        Stats::of_times(d.iter().map(f).collect())
    };

    let mut section = Section::new("Apply alone, as the roots grow");
    section.prose(
        "`Policy::apply` (probe, open every root `O_PATH` and stat it (from the parent \
         directory it shares with the next root, opened once), create the ruleset, one \
         `landlock_add_rule` per root, close the roots, then *restrict*: count the threads, \
         start the connect supervisor's helper (one `fork` of the caller, made by a \
         `clone(CLONE_VM|CLONE_VFORK)` intermediate), `no_new_privs`, the supervisor's \
         seccomp filter and the hand-over of its listener to the helper, \
         `landlock_restrict_self`), timed inside a fresh child process per run (the benchmark \
         binary re-executed: an apply cannot be undone). The roots are distinct directories \
         of one parent directory. *Raw syscalls* is the floor: the same Landlock work (the \
         parent opened once, then per root `openat` of its name, `fstat` and \
         `landlock_add_rule`, one `close_range` for them all, then `prctl` and \
         `landlock_restrict_self`) issued directly, with nothing else: no helper, no seccomp \
         filter. Allocations are counted by a counting global allocator around the one \
         `apply` call.",
    );
    let mut rows = Vec::new();
    let mut medians = Vec::new();
    for &count in config.apply_roots {
        let lib = detail(format!("apply {count}"));
        let raw = detail(format!("apply-raw {count}"));
        let s = stat_of(&lib, &|w| w.prepare + w.restrict);
        let r = stat_of(&lib, &|w| w.restrict);
        let floor = stat_of(&raw, &|w| w.prepare + w.restrict);
        medians.push((count, s.median, floor.median));
        rows.push(vec![
            count.to_string(),
            s.runs.to_string(),
            dur(s.median),
            dur(s.min),
            dur(s.max),
            dur(r.median),
            dur(Duration::from_secs_f64(
                s.median.as_secs_f64() / count as f64,
            )),
            format!("{:.2}", ratio(s.median, medians[0].1)),
            dur(floor.median),
            format!("{:.2}", ratio(s.median, floor.median)),
            format!("{} ({} bytes)", lib[0].allocations, lib[0].bytes),
        ]);
    }
    section.table(
        &[
            "roots",
            "runs",
            "median",
            "min",
            "max",
            "of which restrict",
            "per root",
            "ratio to 1 root",
            "raw syscalls (median)",
            "ratio to raw",
            "allocations (bytes) in one apply",
        ],
        rows,
    );
    let at = |n: usize| {
        medians
            .iter()
            .find(|(count, _, _)| *count == n)
            .map(|&(_, lib, raw)| (lib, raw))
    };
    if let (Some((one, _)), Some((t256, raw256)), Some((t4096, _))) = (at(1), at(256), at(4096)) {
        section.target(
            "apply: under 1.2 ms for 256 roots",
            format!(
                "{} (the raw syscalls alone: {}, ratio {:.2})",
                dur(t256),
                dur(raw256),
                t256.as_secs_f64() / raw256.as_secs_f64()
            ),
            t256 < Duration::from_micros(1200),
        );
        // Linear: the cost of each added root does not grow with the
        // count. Compare the marginal cost per root from 256 to 4096
        // with that from 1 to 256; allow a factor 2 for noise and for
        // the kernel's O(log n) rule tree.
        let low = (t256.as_secs_f64() - one.as_secs_f64()) / 255.0;
        let high = (t4096.as_secs_f64() - t256.as_secs_f64()) / 3840.0;
        section.target(
            "apply: linear in the number of roots",
            format!(
                "{} per added root from 1 to 256, {} from 256 to 4096",
                dur(Duration::from_secs_f64(low.max(0.0))),
                dur(Duration::from_secs_f64(high.max(0.0)))
            ),
            high <= 2.0 * low.max(1e-9),
        );
    }
    section
}
