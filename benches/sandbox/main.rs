//! What the sandbox costs, measured side by side with running bare and with
//! bubblewrap, in one invocation:
//!
//! ```text
//! cargo bench --features cli --bench sandbox                          # full run, writes doc/performance.md
//! STRUMENT_BENCH_QUICK=1 cargo bench --features cli --bench sandbox   # CI: few runs, small workloads
//! cargo bench --features cli --bench sandbox -- startup apply         # only some cases
//! ```
//!
//! Cases: `startup`, `connect`, `apply`, `files`, `cargo`, `go`, `pip`, `npm`, `tripwire`. The variants of a case
//! are interleaved (A B C, B C A, C A B, …) so drift on a busy machine falls
//! on all of them alike. The benchmark asserts nothing about speed; it
//! fails only when it cannot measure (Landlock missing, bubblewrap or go
//! missing, a workload failing) or what it measures is not confined: each
//! project is first checked, on disk, to refuse a write outside it and land
//! one inside under `run`, `Prepared::confine` and bwrap. `perf`, when it works, adds Landlock's share
//! of the CPU samples; `STRUMENT_BENCH_FILES_DIR` moves the file-heavy
//! workload's project off tmpfs.
//!
//! The binary doubles as its own workload: `sandbox worker apply|apply-raw|files …`
//! run in fresh child processes, because an apply cannot be undone and a
//! confined workload must not confine the harness.
//!
//! Layout: `runner` spawns, times and interleaves; `stats` summarises;
//! `perf` finds Landlock's share of the CPU; each module of `cases` measures
//! one case and returns its section of the document (`report`), which
//! numbers the sections and renders `doc/performance.md`; `workers` are the
//! re-executed children.

mod alloc;
mod cases;
mod config;
mod perf;
mod project;
mod registry;
mod report;
mod runner;
mod stats;
mod workers;

use std::fs;
use std::path::Path;

use config::Config;
use project::Bench;
use report::{Document, Section};

/// The CLI under test, built by `cargo bench` in the bench (release) profile.
const BIN: &str = env!("CARGO_BIN_EXE_strument-sandbox");
const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const TARGET_TMPDIR: &str = env!("CARGO_TARGET_TMPDIR");
const COMMAND: &str = "cargo bench --features cli --bench sandbox";

/// A case: measures, and returns its section of the document.
type Case = fn(&Bench, &Config) -> Section;

/// Every case, by the name that selects it on the command line, in the
/// order the document presents them.
const CASES: [(&str, Case); 9] = [
    ("startup", cases::startup::run),
    ("connect", cases::connect::run),
    ("apply", cases::apply::run),
    ("files", cases::files::run),
    ("cargo", cases::builds::cargo),
    ("go", cases::builds::go),
    ("pip", cases::builds::pip),
    ("npm", cases::builds::npm),
    ("tripwire", cases::tripwire::run),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        workers::worker(&args[2..]);
        return;
    }
    // `cargo test --benches` runs this binary without `--bench`: measuring
    // then would only make the test run slow.
    if !args.iter().any(|a| a == "--bench") {
        println!("sandbox benchmark: run it with `{COMMAND}`");
        return;
    }
    let selected: Vec<&str> = args[1..]
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    for s in &selected {
        if !CASES.iter().any(|(name, _)| name == s) {
            let names: Vec<&str> = CASES.iter().map(|(name, _)| *name).collect();
            fail(&format!("unknown case {s:?}; cases: {}", names.join(", ")));
        }
    }
    let config = Config::from_env();
    let load_at_start = report::load_average();
    let bench = Bench::setup(&config);

    let mut document = Document::default();
    for (name, case) in CASES {
        if selected.is_empty() || selected.contains(&name) {
            document.push(case(&bench, &config));
        }
    }
    let doc = document.render(&config, selected.is_empty(), &load_at_start, bench.abi);
    println!("{doc}");
    if config.quick || !selected.is_empty() {
        eprintln!("(quick or partial run: doc/performance.md left as it was)");
    } else {
        let path = Path::new(MANIFEST_DIR).join("doc/performance.md");
        fs::write(&path, &doc).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
        eprintln!("wrote {}", path.display());
    }
}

/// Stops the benchmark: it cannot measure.
fn fail(message: &str) -> ! {
    eprintln!("sandbox benchmark: {message}");
    std::process::exit(1);
}
