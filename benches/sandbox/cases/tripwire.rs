//! Tripwire: what `Snapshot` costs `run` before and after each command, on
//! this repository and on one with a thousand files under `.git`.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use strument_sandbox::tripwire::Snapshot;

use crate::config::Config;
use crate::project::Bench;
use crate::report::Section;
use crate::stats::{Stats, dur};
use crate::{MANIFEST_DIR, fail};

/// Files made under the synthetic repository's `.git` (objects).
const GIT_FILES: usize = 1000;
/// Hooks made in it, beside git's samples.
const HOOKS: usize = 30;

pub fn run(bench: &Bench, config: &Config) -> Section {
    let synthetic = bench.work.join("tripwire-repo");
    make_repository(&synthetic);
    let projects = [
        ("this repository".to_string(), Path::new(MANIFEST_DIR)),
        (
            format!("`git init` + {GIT_FILES} files under `.git` + {HOOKS} hooks"),
            synthetic.as_path(),
        ),
    ];
    let runs = config.startup_runs * 5;
    let mut section = Section::new("Tripwire");
    section.prose(format!(
        "`run` takes a `Snapshot` of the files that run later (git hooks, config, `info/`, \
         `.envrc`, editor tasks) before the command and compares after it \
         (`Snapshot::changes`: a second snapshot and the comparison). Metadata only \
         (`lstat`, `readlink`, the listings of `hooks/` and `info/`); nothing under \
         `.git/objects` or `.git/refs` is visited, so the files there cost nothing. \
         Median of {runs} runs each, in this process.\n"
    ));
    let mut rows = Vec::new();
    let mut worst = Duration::ZERO;
    for (name, root) in &projects {
        let snapshot = Snapshot::of_project(root);
        let watched = snapshot.watched().count();
        let take = median(runs, || drop(Snapshot::of_project(root)));
        let compare = median(runs, || drop(snapshot.changes()));
        worst = worst.max(take).max(compare);
        rows.push(vec![
            name.clone(),
            watched.to_string(),
            dur(take),
            dur(compare),
        ]);
    }
    section.table(
        &[
            "project",
            "paths watched",
            "snapshot",
            "compare (`changes`)",
        ],
        rows,
    );
    section.target(
        "tripwire: snapshot and compare each well under 1 ms",
        format!("slowest median {}", dur(worst)),
        worst < Duration::from_micros(500),
    );
    section
}

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let times = (0..runs.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    Stats::of_times(times).median
}

/// `git init`, then a thousand files under `.git` and thirty hooks.
fn make_repository(dir: &Path) {
    let io = |e: std::io::Error| fail(&format!("{}: {e}", dir.display()));
    fs::create_dir_all(dir).unwrap_or_else(io);
    let status = Command::new("git")
        .args(["init", "-q"])
        .arg(dir)
        .status()
        .unwrap_or_else(|e| fail(&format!("git: {e}; install the package `git`")));
    if !status.success() {
        fail(&format!("git init {}: {status}", dir.display()));
    }
    let git = dir.join(".git");
    for i in 0..GIT_FILES {
        let sub = git.join(format!("objects/{:02x}", i % 256));
        fs::create_dir_all(&sub).unwrap_or_else(io);
        fs::write(sub.join(format!("{i:038x}")), "blob").unwrap_or_else(io);
    }
    for i in 0..HOOKS {
        fs::write(git.join(format!("hooks/hook-{i}")), "#!/bin/sh\n").unwrap_or_else(io);
    }
}
