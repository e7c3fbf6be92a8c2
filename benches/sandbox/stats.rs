//! Statistics over samples, and how durations are written.

use std::time::Duration;

use crate::runner::Sample;

pub struct Stats {
    pub runs: usize,
    pub median: Duration,
    pub min: Duration,
    pub max: Duration,
}

impl Stats {
    /// Median, min and max wall time of `samples`.
    pub fn of(samples: &[Sample]) -> Stats {
        Stats::of_times(samples.iter().map(|s| s.time).collect())
    }

    pub fn of_times(mut t: Vec<Duration>) -> Stats {
        t.sort();
        let n = t.len();
        assert!(n > 0, "no samples");
        let median = if n % 2 == 1 {
            t[n / 2]
        } else {
            (t[n / 2 - 1] + t[n / 2]) / 2
        };
        Stats {
            runs: n,
            median,
            min: t[0],
            max: t[n - 1],
        }
    }
}

pub fn median_cpu(samples: &[Sample]) -> Duration {
    let mut c: Vec<Duration> = samples.iter().map(|s| s.cpu).collect();
    c.sort_unstable();
    c[c.len() / 2]
}

/// The median over rounds of `variant[i] / bare[i]`: each run against the
/// bare run of the same round, which cancels drift slower than a round.
pub fn paired_ratio(variant: &[Sample], bare: &[Sample]) -> f64 {
    let mut r: Vec<f64> = variant
        .iter()
        .zip(bare)
        .map(|(v, b)| ratio(v.time, b.time))
        .collect();
    r.sort_by(f64::total_cmp);
    let n = r.len();
    if n % 2 == 1 {
        r[n / 2]
    } else {
        (r[n / 2 - 1] + r[n / 2]) / 2.0
    }
}

pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

pub fn dur(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

pub fn signed_dur(d: f64) -> String {
    let sign = if d < 0.0 { "−" } else { "+" };
    format!("{sign}{}", dur(Duration::from_secs_f64(d.abs())))
}
