//! How much to measure: the full run, or the quick one CI runs to keep the
//! benchmark working.

pub struct Config {
    pub quick: bool,
    pub startup_runs: usize,
    pub apply_runs: usize,
    pub apply_roots: &'static [usize],
    pub files_runs: usize,
    pub files: usize,
    pub heavy_runs: usize,
}

impl Config {
    pub fn from_env() -> Config {
        let quick =
            std::env::var_os("STRUMENT_BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
        if quick {
            Config {
                quick,
                startup_runs: 5,
                apply_runs: 3,
                apply_roots: &[1, 16, 256, 4096],
                files_runs: 2,
                files: 1_000,
                heavy_runs: 1,
            }
        } else {
            Config {
                quick,
                startup_runs: 200,
                apply_runs: 50,
                apply_roots: &[1, 16, 256, 4096],
                files_runs: 15,
                files: 10_000,
                heavy_runs: 15,
            }
        }
    }

    /// Unmeasured rounds before `runs` measured ones: a tenth, at least one.
    pub fn warmup(runs: usize) -> usize {
        runs.div_ceil(10)
    }
}
