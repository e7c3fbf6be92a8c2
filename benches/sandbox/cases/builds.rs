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
use crate::registry::Registry;
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
     supervisor's work) and unpacks, but the download itself is mostly not measured. The \
     internet's latency swings a run by a factor of two, more than the few percent measured \
     here, so each is measured again from a registry on this machine: a static HTTP server \
     of the benchmark on 127.0.0.1 (outside the sandbox, reached through `--allow-connect`, \
     every connect mediated), filled once from the real registry (PEP 503 pages and the \
     wheels for pip; for npm the tarballs where a lock file made against npm's registry \
     points, `npm ci` with `--registry` and the cache emptied before each run), each run \
     downloading every package, which the benchmark checks by counting what was served.";

/// What one build measures: its label, the command, and how each run is
/// prepared.
struct Build<'a> {
    label: &'static str,
    what: &'static str,
    program: &'a Path,
    args: &'a [&'a str],
    /// `run`'s own flags, for both sandboxed variants.
    run_flags: &'a [String],
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
            run_flags: &[],
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
            run_flags: &[],
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
    let pins = &ARGS[ARGS.len() - 5..];
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
    let internet = warmed_then_measured(
        bench,
        config,
        "pip install from PyPI failed (is pypi.org reachable?)",
        &Build {
            label: "pip install",
            what: "`pip install` of 5 packages from PyPI",
            program: &python,
            args: ARGS,
            run_flags: &[],
            env: &env,
            clean: &clean,
            target: 1.03,
        },
    );
    // The same packages from a registry on this machine (PEP 503's simple
    // index), downloaded each run: pip's cache off.
    let root = dir.join("registry");
    fresh_dir(&root);
    let files = root.join("files");
    let downloaded = env(Command::new(&python))
        .args(["-m", "pip", "download", "-q", "--no-deps", "-d"])
        .arg(&files)
        .args(pins)
        .status();
    if !downloaded.is_ok_and(|s| s.success()) {
        fail("pip download from PyPI failed (is pypi.org reachable?)");
    }
    simple_index(&files, &root.join("simple"));
    let registry = Registry::serve(root);
    let index = registry.url("simple/");
    let mut here: Vec<&str> = vec![
        "-m",
        "pip",
        "install",
        "-q",
        "--no-compile",
        "--no-cache-dir",
        "--index-url",
        &index,
        "--target",
        "target",
    ];
    here.extend(pins);
    let build = Build {
        label: "pip install (registry here)",
        what: "`pip install` of the same 5 from a registry on 127.0.0.1",
        program: &python,
        args: &here,
        run_flags: &[],
        env: &env,
        clean: &clean,
        target: 1.03,
    };
    joined(internet, measured_here(bench, config, &registry, 5, build))
}

/// `simple/NAME/index.html` for each distribution in `files`, linking
/// `/files/FILE` (PEP 503; the name normalised as it asks).
fn simple_index(files: &Path, simple: &Path) {
    let entries =
        fs::read_dir(files).unwrap_or_else(|e| fail(&format!("{}: {e}", files.display())));
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let name = file
            .split('-')
            .next()
            .unwrap_or_default()
            .to_lowercase()
            .replace(['_', '.'], "-");
        let page = simple.join(&name);
        fs::create_dir_all(&page).unwrap_or_else(|e| fail(&format!("{}: {e}", page.display())));
        fs::write(
            page.join("index.html"),
            format!("<!DOCTYPE html>\n<a href=\"/files/{file}\">{file}</a>\n"),
        )
        .unwrap_or_else(|e| fail(&format!("{}: {e}", page.display())));
    }
}

/// One section of two measurements of the same work.
fn joined(mut first: Section, second: Section) -> Section {
    first.blocks.extend(second.blocks);
    first.targets.extend(second.targets);
    first
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
    let internet = warmed_then_measured(
        bench,
        config,
        "npm install from the registry failed (is registry.npmjs.org reachable?)",
        &Build {
            label: "npm install",
            what: "`npm install` of 3 packages from the registry",
            program: Path::new("npm"),
            args: ARGS,
            run_flags: &[],
            env: &env,
            clean: &clean,
            target: 1.02,
        },
    );
    joined(internet, npm_here(bench, config, &ARGS[ARGS.len() - 3..]))
}

/// `npm ci` of `specs` (NAME@VERSION) from a registry on this machine: a
/// lock file made once against npm's registry, its tarballs fetched once
/// and served where its `resolved` URLs point (npm puts the registry given
/// in place of registry.npmjs.org), npm's cache emptied before each run so
/// that every tarball is downloaded.
fn npm_here(bench: &Bench, config: &Config, specs: &[&str]) -> Section {
    let dir = bench.project.dir.join("npm-here");
    fresh_dir(&dir);
    let cache = dir.join("cache");
    let dependencies: Vec<String> = specs
        .iter()
        .filter_map(|spec| spec.rsplit_once('@'))
        .map(|(name, version)| format!("\"{name}\":\"{version}\""))
        .collect();
    fs::write(
        dir.join("package.json"),
        format!(
            "{{\"name\":\"bench\",\"version\":\"1.0.0\",\"dependencies\":{{{}}}}}\n",
            dependencies.join(",")
        ),
    )
    .unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
    let npm = |cache: &Path| {
        let mut cmd = Command::new("npm");
        cmd.env("npm_config_cache", cache)
            .args([
                "--no-audit",
                "--no-fund",
                "--no-update-notifier",
                "--silent",
            ])
            .current_dir(&dir);
        cmd
    };
    let warm = bench.project.dir.join("npm-install/cache");
    let locked = npm(&warm)
        .args([
            "install",
            "--package-lock-only",
            // A user's npmrc may leave the URLs out (this machine's does).
            "--omit-lockfile-registry-resolved=false",
        ])
        .status();
    if !locked.is_ok_and(|s| s.success()) {
        fail("npm install --package-lock-only failed (is registry.npmjs.org reachable?)");
    }
    let lock = fs::read_to_string(dir.join("package-lock.json"))
        .unwrap_or_else(|e| fail(&format!("package-lock.json: {e}")));
    let root = dir.join("registry");
    for path in lock
        .split("\"resolved\": \"https://registry.npmjs.org/")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
    {
        // NAME/-/BASENAME-VERSION.tgz
        let Some((name, file)) = path.split_once("/-/") else {
            fail(&format!("unexpected tarball URL {path}"));
        };
        let base = name.rsplit('/').next().unwrap_or(name);
        let version = file
            .strip_prefix(&format!("{base}-"))
            .and_then(|v| v.strip_suffix(".tgz"))
            .unwrap_or_else(|| fail(&format!("unexpected tarball name {file}")));
        let at = root.join(name).join("-");
        let packed = dir.join("packed");
        fresh_dir(&packed);
        let ok = npm(&warm)
            .args(["pack", &format!("{name}@{version}"), "--pack-destination"])
            .arg(&packed)
            // It prints the tarball's name, where this prints the document.
            .stdout(std::process::Stdio::null())
            .status();
        let made = fs::read_dir(&packed)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok);
        match (ok, made) {
            (Ok(s), Some(made)) if s.success() => {
                fs::create_dir_all(&at).unwrap_or_else(|e| fail(&format!("{}: {e}", at.display())));
                fs::rename(made.path(), at.join(file))
                    .unwrap_or_else(|e| fail(&format!("{}: {e}", at.display())));
            }
            _ => fail(&format!("npm pack {name}@{version} failed")),
        }
    }
    let registry = Registry::serve(root);
    let url = registry.url("");
    let args = [
        "ci",
        "--registry",
        &url,
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "--silent",
    ];
    let env = |mut cmd: Command| {
        cmd.env("npm_config_cache", &cache).current_dir(&dir);
        cmd
    };
    let clean = || {
        remove_dir(&dir.join("node_modules"));
        remove_dir(&cache);
    };
    let build = Build {
        label: "npm ci (registry here)",
        what: "`npm ci` of the same 3 (4 packages) from a registry on 127.0.0.1",
        program: Path::new("npm"),
        args: &args,
        run_flags: &[],
        env: &env,
        clean: &clean,
        target: 1.02,
    };
    measured_here(bench, config, &registry, 4, build)
}

/// Measures a build that installs `files` files from `registry`, which
/// the sandboxed variants may reach, and stops unless every measured run
/// downloaded them.
fn measured_here(
    bench: &Bench,
    config: &Config,
    registry: &Registry,
    files: usize,
    build: Build<'_>,
) -> Section {
    let flags = registry.allow_connect();
    let build = Build {
        run_flags: &flags,
        ..build
    };
    let section = measure_build(bench, config, &build);
    // Three variants, each run downloading every file.
    registry.served_at_least(3 * config.heavy_runs * files, build.label);
    section
}

/// Runs the build once, bare and unmeasured, to fill the tool's cache
/// (stopping with `failure` when it fails), then measures it.
fn warmed_then_measured(
    bench: &Bench,
    config: &Config,
    failure: &str,
    build: &Build<'_>,
) -> Section {
    let warmed = (build.env)(Command::new(build.program))
        .args(build.args)
        .status();
    if !warmed.is_ok_and(|s| s.success()) {
        fail(failure);
    }
    measure_build(bench, config, build)
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
            (build.env)(
                bench
                    .project
                    .sandboxed_with(build.run_flags, program, build.args),
            )
        }),
        Variant::new("explain", "`run --explain-denials`", || {
            let flags = [build.run_flags, &["--explain-denials".into()]].concat();
            (build.env)(bench.project.sandboxed_with(&flags, program, build.args))
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
