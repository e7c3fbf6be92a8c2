//! Real work: a clean `cargo build`, a cold-cache `go test`, and
//! installs of a few packages from PyPI and npm's registry, bare and under
//! `strument-sandbox run`.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::cases::{AGAINST_BARE, against_bare};
use crate::config::Config;
use crate::perf::share_text;
use crate::project::{Bench, copy_dir, fresh_dir, remove_dir, require_tool};
use crate::report::Section;
use crate::runner::{Variant, measure};
use crate::stats::{Stats, median_cpu, paired_ratio, ratio};
use crate::{MANIFEST_DIR, fail};

const TITLE: &str = "Real work";

const PROSE: &str = "Wall time of the whole command. `cargo build`: a clean debug build \
     (target directory removed before each run) of `benches/fixtures/cargo-deps`, a binary \
     with five direct dependencies (11 crates compiled, two build scripts), `--offline` from the \
     registry cache. `go test`: `go test ./...` of `tests/fixtures/go-hello` with `GOCACHE` \
     a fresh empty directory each run, so the standard library is compiled every time. \
     `pip install` and `npm install`: a few pinned packages from the registry into a directory \
     removed before each run, the tools' caches kept warm in the project (filled once before \
     measuring), so each run asks the registry (name resolution, HTTPS connects: the connect \
     supervisor's work) and unpacks, but the download itself is mostly not measured.";

/// What one build measures: its label, the command, and how each run is
/// prepared.
struct Build<'a> {
    label: &'static str,
    what: &'static str,
    program: &'a Path,
    args: &'static [&'static str],
    env: &'a dyn Fn(Command) -> Command,
    clean: &'a dyn Fn(),
    /// The ratio to bare `run` should stay within.
    target: f64,
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
    let clean = || remove_dir(&target_dir);
    measure_build(
        bench,
        config,
        &Build {
            label: "cargo build",
            what: "clean `cargo build` (11 crates)",
            program: Path::new("cargo"),
            args: &["build", "--offline", "--locked", "-q"],
            env: &env,
            clean: &clean,
            target: 1.02,
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
            .env("GOPROXY", "off")
            .env("GOTOOLCHAIN", "local")
            .current_dir(&module);
        cmd
    };
    let clean = || fresh_dir(&cache);
    measure_build(
        bench,
        config,
        &Build {
            label: "go test",
            what: "cold-cache `go test`",
            program: Path::new("go"),
            args: &["test", "-count=1", "./..."],
            env: &env,
            clean: &clean,
            target: 1.02,
        },
    )
}

/// `pip install` of five pinned packages from PyPI into a directory of
/// the project, with pip's cache in the project (issue: a `pip install` of
/// a few packages within 3 % of bare).
pub fn pip(bench: &Bench, config: &Config) -> Section {
    require_tool("python3", &["-m", "pip", "--version"], "python3-pip");
    let dir = bench.project.dir.join("pip-install");
    let target = dir.join("target");
    let cache = dir.join("cache");
    fs::create_dir_all(&cache).unwrap_or_else(|e| fail(&format!("{}: {e}", cache.display())));
    let env = |mut cmd: Command| {
        cmd.env("PIP_CACHE_DIR", &cache)
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .env_remove("PIP_FIND_LINKS")
            .env_remove("PIP_NO_INDEX")
            .current_dir(&dir);
        cmd
    };
    let clean = || remove_dir(&target);
    const ARGS: &[&str] = &[
        "-m",
        "pip",
        "install",
        "-q",
        "--no-compile",
        "--target",
        "target",
        "six==1.16.0",
        "idna==3.7",
        "certifi==2024.8.30",
        "packaging==24.1",
        "attrs==24.2.0",
    ];
    // A virtual environment's own python: a version manager's shim (pyenv)
    // would rehash its shims after an install, which the sandbox refuses.
    let venv = dir.join("venv");
    let made = Command::new("python3")
        .arg("-m")
        .arg("venv")
        .arg(&venv)
        .status();
    if !made.is_ok_and(|s| s.success()) {
        fail("python3 -m venv failed (Debian: apt-get install python3-venv)");
    }
    let python = venv.join("bin/python");
    // Fill the cache once, outside the measurement.
    let warmed = env(Command::new(&python)).args(ARGS).status();
    if !warmed.is_ok_and(|s| s.success()) {
        fail("pip install from PyPI failed (is pypi.org reachable?)");
    }
    measure_build(
        bench,
        config,
        &Build {
            label: "pip install",
            what: "`pip install` of 5 packages from PyPI",
            program: &python,
            args: ARGS,
            env: &env,
            clean: &clean,
            target: 1.03,
        },
    )
}

/// `npm install` of three pinned packages from npm's registry into a
/// project of its own, with npm's cache in the project (issue:
/// `npm install`-shaped work within 2 % of bare).
pub fn npm(bench: &Bench, config: &Config) -> Section {
    require_tool("npm", &["--version"], "npm");
    let dir = bench.project.dir.join("npm-install");
    let cache = dir.join("cache");
    fs::create_dir_all(&cache).unwrap_or_else(|e| fail(&format!("{}: {e}", cache.display())));
    fs::write(
        dir.join("package.json"),
        "{\"name\":\"bench\",\"version\":\"1.0.0\"}\n",
    )
    .unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
    let env = |mut cmd: Command| {
        cmd.env("npm_config_cache", &cache).current_dir(&dir);
        cmd
    };
    let clean = || {
        remove_dir(&dir.join("node_modules"));
        let lock = dir.join("package-lock.json");
        if lock.exists() {
            fs::remove_file(&lock).unwrap_or_else(|e| fail(&format!("{}: {e}", lock.display())));
        }
    };
    const ARGS: &[&str] = &[
        "install",
        "--no-save",
        "--silent",
        // No requests beyond the install's own.
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "is-number@7.0.0",
        "is-odd@3.0.1",
        "semver@7.6.3",
    ];
    clean();
    let warmed = env(Command::new("npm")).args(ARGS).status();
    if !warmed.is_ok_and(|s| s.success()) {
        fail("npm install from the registry failed (is registry.npmjs.org reachable?)");
    }
    measure_build(
        bench,
        config,
        &Build {
            label: "npm install",
            what: "`npm install` of 3 packages from the registry",
            program: Path::new("npm"),
            args: ARGS,
            env: &env,
            clean: &clean,
            target: 1.02,
        },
    )
}

/// Measures the build bare, under `strument-sandbox run`, and under `run
/// --explain-denials` (traced), each run after its `clean`.
fn measure_build(bench: &Bench, config: &Config, build: &Build<'_>) -> Section {
    let program = build.program;
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
        format!("{}: ratio to bare ≤ {:.2}", build.what, build.target),
        format!(
            "{r:.3} (paired {:.3}, CPU time {:.3}); Landlock's checks: {} of the sandboxed \
             run's CPU samples",
            paired_ratio(&run, &bare),
            ratio(median_cpu(&run), median_cpu(&bare)),
            share_text(share)
        ),
        r <= build.target,
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
