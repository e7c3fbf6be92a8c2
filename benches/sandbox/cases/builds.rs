//! Real work: a clean `cargo build` and a cold-cache `go test`, bare and
//! under `strument-sandbox run`.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::cases::{AGAINST_BARE, against_bare};
use crate::config::Config;
use crate::perf::share_text;
use crate::project::{Bench, copy_dir, require_tool};
use crate::report::Section;
use crate::runner::{Variant, measure};
use crate::stats::{Stats, median_cpu, paired_ratio, ratio};
use crate::{MANIFEST_DIR, fail};

const TITLE: &str = "Real work";

const PROSE: &str = "Wall time of the whole command. `cargo build`: a clean debug build \
     (target directory removed before each run) of `benches/fixtures/cargo-deps`, a binary \
     with five direct dependencies (11 crates compiled, two build scripts), `--offline` from the \
     registry cache. `go test`: `go test ./...` of `tests/fixtures/go-hello` with `GOCACHE` \
     a fresh empty directory each run, so the standard library is compiled every time.";

/// What one build measures: its label, the command, and how each run is
/// prepared.
struct Build<'a> {
    label: &'static str,
    what: &'static str,
    program: &'static str,
    args: &'static [&'static str],
    env: &'a dyn Fn(Command) -> Command,
    clean: &'a dyn Fn(),
}

pub fn cargo(bench: &Bench, config: &Config) -> Section {
    let fixture = Path::new(MANIFEST_DIR).join("benches/fixtures/cargo-deps");
    let crate_dir = bench.project.dir.join("cargo-deps");
    copy_dir(&fixture, &crate_dir);
    let target_dir = crate_dir.join("target");
    let env = |mut cmd: Command| {
        cmd.env("CARGO_TARGET_DIR", &target_dir)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_RUSTFLAGS")
            .current_dir(&crate_dir);
        cmd
    };
    // Fetch once, outside the measurement: the network is not measured,
    // and every measured build is `--offline`.
    let fetch = |offline: bool| {
        let mut cmd = env(Command::new("cargo"));
        cmd.args(["fetch", "--locked", "-q"]);
        if offline {
            cmd.arg("--offline");
        }
        cmd.status().is_ok_and(|s| s.success())
    };
    if !fetch(true) && !fetch(false) {
        fail("cargo fetch of benches/fixtures/cargo-deps failed");
    }
    let clean = || {
        if target_dir.exists() {
            fs::remove_dir_all(&target_dir)
                .unwrap_or_else(|e| fail(&format!("{}: {e}", target_dir.display())));
        }
    };
    measure_build(
        bench,
        config,
        &Build {
            label: "cargo build",
            what: "clean `cargo build` (11 crates)",
            program: "cargo",
            args: &["build", "--offline", "--locked", "-q"],
            env: &env,
            clean: &clean,
        },
    )
}

pub fn go(bench: &Bench, config: &Config) -> Section {
    require_tool("go", &["version"], "golang-go");
    let fixture = Path::new(MANIFEST_DIR).join("tests/fixtures/go-hello");
    let module = bench.project.dir.join("go-hello");
    copy_dir(&fixture, &module);
    let cache = bench.project.dir.join("gocache");
    let env = |mut cmd: Command| {
        cmd.env("GOCACHE", &cache)
            .env("GOFLAGS", "-count=1")
            .env("GOPROXY", "off")
            .env("GOTOOLCHAIN", "local")
            .current_dir(&module);
        cmd
    };
    let clean = || {
        if cache.exists() {
            fs::remove_dir_all(&cache)
                .unwrap_or_else(|e| fail(&format!("{}: {e}", cache.display())));
        }
        fs::create_dir(&cache).unwrap_or_else(|e| fail(&format!("{}: {e}", cache.display())));
    };
    measure_build(
        bench,
        config,
        &Build {
            label: "go test",
            what: "cold-cache `go test`",
            program: "go",
            args: &["test", "./..."],
            env: &env,
            clean: &clean,
        },
    )
}

/// Measures the build bare, under `strument-sandbox run`, and under `run
/// --explain-denials` (traced), each run after its `clean`.
fn measure_build(bench: &Bench, config: &Config, build: &Build<'_>) -> Section {
    let program = Path::new(build.program);
    let variants = [
        Variant::new("bare", "bare", || {
            (build.env)(bench.project.bare(program, build.args))
        }),
        Variant::new("run", "`strument-sandbox run`", || {
            (build.env)(bench.project.sandboxed(program, build.args))
        }),
        Variant::new("explain", "`run --explain-denials`", || {
            (build.env)(bench.project.sandboxed_explaining(program, build.args))
        }),
    ];
    let measured = measure(
        build.label,
        &variants,
        (config.heavy_runs, usize::from(!config.quick)),
        build.clean,
        &bench.stderr_log,
    );
    let share = bench.share(measured.variant("run"), build.clean);
    let bare = measured.samples("bare");
    let run = measured.samples("run");
    let explain = measured.samples("explain");
    let mut section = Section::new(TITLE);
    section.intro = Some(PROSE);
    let rows = variants
        .iter()
        .map(|v| against_bare(build.what, &v.name, &measured.samples(&v.key), &bare))
        .collect();
    section.table(&AGAINST_BARE, rows);
    section.prose(format!(
        "Landlock's share: the CPU samples with a frame in the kernel's Landlock checks, in \
         one more sandboxed run under `perf record -e cpu-clock -g`: {}.",
        share_text(share)
    ));
    let r = ratio(Stats::of(&run).median, Stats::of(&bare).median);
    section.target(
        format!("{}: ratio to bare ≤ 1.02", build.what),
        format!(
            "{r:.3} (paired {:.3}, CPU time {:.3}); Landlock's checks: {} of the sandboxed \
             run's CPU samples",
            paired_ratio(&run, &bare),
            ratio(median_cpu(&run), median_cpu(&bare)),
            share_text(share)
        ),
        r <= 1.02,
    );
    let r = ratio(Stats::of(&explain).median, Stats::of(&bare).median);
    section.target(
        format!(
            "{} with `--explain-denials` (traced): ratio to bare ≤ 1.10",
            build.what
        ),
        format!(
            "{r:.3} (paired {:.3}, CPU time {:.3})",
            paired_ratio(&explain, &bare),
            ratio(median_cpu(&explain), median_cpu(&bare)),
        ),
        r <= 1.10,
    );
    section
}
