//! The measured cases; each returns its section of the document.

pub mod apply;
pub mod builds;
pub mod connect;
pub mod files;
pub mod startup;
pub mod tripwire;

use crate::runner::Sample;
use crate::stats::{Stats, dur, median_cpu, paired_ratio, ratio};

/// The columns of a workload measured against its bare run.
pub const AGAINST_BARE: [&str; 10] = [
    "workload",
    "variant",
    "runs",
    "median",
    "min",
    "max",
    "ratio to bare",
    "paired ratio",
    "CPU (median)",
    "CPU ratio",
];

/// A row of [`AGAINST_BARE`] for one variant's samples.
pub fn against_bare(
    workload: &str,
    variant: &str,
    samples: &[Sample],
    bare: &[Sample],
) -> Vec<String> {
    let s = Stats::of(samples);
    vec![
        workload.to_string(),
        variant.to_string(),
        s.runs.to_string(),
        dur(s.median),
        dur(s.min),
        dur(s.max),
        format!("{:.3}", ratio(s.median, Stats::of(bare).median)),
        format!("{:.3}", paired_ratio(samples, bare)),
        dur(median_cpu(samples)),
        format!("{:.3}", ratio(median_cpu(samples), median_cpu(bare))),
    ]
}
