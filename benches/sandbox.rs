//! What the sandbox costs, measured side by side with running bare and with
//! bubblewrap, in one invocation:
//!
//! ```text
//! cargo bench --features cli --bench sandbox                          # full run, writes doc/performance.md
//! STRUMENT_BENCH_QUICK=1 cargo bench --features cli --bench sandbox   # CI: few runs, small workloads
//! cargo bench --features cli --bench sandbox -- startup apply         # only some cases
//! ```
//!
//! Cases: `startup`, `apply`, `files`, `cargo`, `go`. The variants of a case
//! are interleaved (A B C, B C A, C A B, …) so drift on a busy machine falls
//! on all of them alike. The benchmark asserts nothing about speed; it
//! fails only when it cannot measure (Landlock missing, bubblewrap or go
//! missing, a workload failing). `perf`, when it works, adds Landlock's share
//! of the CPU samples; `STRUMENT_BENCH_FILES_DIR` moves the file-heavy
//! workload's project off tmpfs.
//!
//! The binary doubles as its own workload: `sandbox worker apply|apply-raw|files …`
//! run in fresh child processes, because an apply cannot be undone and a
//! confined workload must not confine the harness.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write as _};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use strument_sandbox::{Policy, default_writable, probe};

/// The CLI under test, built by `cargo bench` in the bench (release) profile.
const BIN: &str = env!("CARGO_BIN_EXE_strument-sandbox");
const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const TARGET_TMPDIR: &str = env!("CARGO_TARGET_TMPDIR");
const COMMAND: &str = "cargo bench --features cli --bench sandbox";

// ---------------------------------------------------------------------------
// Counting allocator: the library's allocation count for one apply.

/// Forwards to the system allocator and counts what passes through.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

fn count(bytes: usize) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    ALLOCATED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

// SAFETY: every method forwards its arguments unchanged to `System`, which
// upholds the GlobalAlloc contract; counting touches only atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ---------------------------------------------------------------------------
// Configuration.

/// How much to measure: the full run, or the quick one CI runs to keep the
/// benchmark working.
struct Config {
    quick: bool,
    startup_runs: usize,
    apply_runs: usize,
    apply_roots: &'static [usize],
    files_runs: usize,
    files: usize,
    heavy_runs: usize,
}

impl Config {
    fn from_env() -> Config {
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
}

const CASES: [&str; 5] = ["startup", "apply", "files", "cargo", "go"];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        worker(&args[2..]);
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
        if !CASES.contains(s) {
            fail(&format!("unknown case {s:?}; cases: {}", CASES.join(", ")));
        }
    }
    let wanted = |case: &str| selected.is_empty() || selected.contains(&case);
    let config = Config::from_env();
    let load_at_start = load_average();
    let bench = Bench::setup(&config);

    let mut out = String::new();
    let mut targets = Vec::new();
    if wanted("startup") {
        bench.startup(&config, &mut out, &mut targets);
    }
    if wanted("apply") {
        bench.apply(&config, &mut out, &mut targets);
    }
    if wanted("files") {
        bench.files(&config, &mut out, &mut targets);
    }
    if wanted("cargo") {
        bench.cargo(&config, &mut out, &mut targets);
    }
    if wanted("go") {
        bench.go(&config, &mut out, &mut targets);
    }

    let doc = document(&config, &out, &targets, selected.is_empty(), &load_at_start);
    println!("{doc}");
    if config.quick || !selected.is_empty() {
        eprintln!("(quick or partial run: doc/performance.md left as it was)");
    } else {
        let path = Path::new(MANIFEST_DIR).join("doc/performance.md");
        fs::write(&path, &doc).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
        eprintln!("wrote {}", path.display());
    }
}

fn fail(message: &str) -> ! {
    eprintln!("sandbox benchmark: {message}");
    std::process::exit(1);
}

// ---------------------------------------------------------------------------
// Running and timing a child.

/// One measured run.
#[derive(Clone, Copy)]
struct Sample {
    time: Duration,
    /// The child's peak resident set, in KiB (`ru_maxrss` from `wait4`):
    /// the largest image it had across its `exec`s, see [`peak_rss`].
    max_rss_kib: u64,
    /// User plus system CPU time: the child's and its waited-for
    /// descendants' from `wait4`, or what a worker reports for its workload.
    cpu: Duration,
}

/// Spawns `cmd`, waits for it with `wait4` (for the rusage of this child
/// and its descendants alone) and returns the wall time and its standard
/// output. A failing command stops the benchmark with its standard error.
fn run(cmd: &mut Command, stderr_log: &Path) -> (Sample, String) {
    let log = fs::File::create(stderr_log)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", stderr_log.display())));
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(log);
    let start = Instant::now();
    // Reaped below by `wait4`, which std's `Child` does not know about.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| fail(&format!("cannot start {cmd:?}: {e}")));
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        let _ = pipe.read_to_string(&mut stdout);
    }
    let (status, usage) = wait4(child.id());
    let time = start.elapsed();
    if !status.success() {
        let stderr = fs::read_to_string(stderr_log).unwrap_or_default();
        fail(&format!("{cmd:?} failed ({status}):\n{stdout}{stderr}"));
    }
    let max_rss_kib = u64::try_from(usage.ru_maxrss).unwrap_or(0);
    let cpu = timeval(usage.ru_utime) + timeval(usage.ru_stime);
    (
        Sample {
            time,
            max_rss_kib,
            cpu,
        },
        stdout,
    )
}

fn timeval(t: libc::timeval) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u64::try_from(t.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

fn wait4(pid: u32) -> (ExitStatus, libc::rusage) {
    let pid = libc::pid_t::try_from(pid).expect("pid fits pid_t");
    let mut status = 0;
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types.
        let ret = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if ret == pid {
            return (ExitStatus::from_raw(status), usage);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            fail(&format!("wait4({pid}): {err}"));
        }
    }
}

/// A variant of a case: a name and how to build its command afresh for each run.
struct Variant<'a> {
    name: String,
    command: Box<dyn Fn() -> Command + 'a>,
    /// The time the child reports on its standard output (a worker timing
    /// its own workload) instead of the wall time around it.
    self_timed: bool,
}

/// Runs every variant `runs` times, interleaved with the starting variant
/// rotating each round, after `warmup` unmeasured rounds. `before` runs
/// untimed before each run (cleaning a target directory, say).
fn measure(
    label: &str,
    variants: &[Variant<'_>],
    runs: usize,
    warmup: usize,
    before: &dyn Fn(),
    stderr_log: &Path,
) -> Vec<Vec<Sample>> {
    let n = variants.len();
    let mut samples = vec![Vec::with_capacity(runs); n];
    for round in 0..warmup + runs {
        eprint!(
            "\r{label}: {} {}/{runs}   ",
            if round < warmup { "warm-up" } else { "run" },
            round.saturating_sub(warmup) + usize::from(round >= warmup)
        );
        let _ = std::io::stderr().flush();
        for k in 0..n {
            let v = (round + k) % n;
            before();
            let (mut sample, stdout) = run(&mut (variants[v].command)(), stderr_log);
            if variants[v].self_timed {
                (sample.time, sample.cpu) = parse_worker_times(&stdout);
            }
            if round >= warmup {
                samples[v].push(sample);
            }
        }
    }
    eprintln!();
    samples
}

/// A worker's "wall-ns cpu-ns" line.
fn parse_worker_times(stdout: &str) -> (Duration, Duration) {
    let v: Vec<u64> = stdout
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match v[..] {
        [wall, cpu] => (Duration::from_nanos(wall), Duration::from_nanos(cpu)),
        _ => fail(&format!("worker printed no times: {stdout:?}")),
    }
}

// ---------------------------------------------------------------------------
// Statistics and formatting.

struct Stats {
    runs: usize,
    median: Duration,
    min: Duration,
    max: Duration,
}

fn stats(samples: &[Sample]) -> Stats {
    let mut t: Vec<Duration> = samples.iter().map(|s| s.time).collect();
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

fn median_cpu(samples: &[Sample]) -> Duration {
    let mut c: Vec<Duration> = samples.iter().map(|s| s.cpu).collect();
    c.sort_unstable();
    c[c.len() / 2]
}

/// The median over rounds of `variant[i] / bare[i]`: each run against the
/// bare run of the same round, which cancels drift slower than a round.
fn paired_ratio(variant: &[Sample], bare: &[Sample]) -> f64 {
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

/// Landlock's share of the CPU samples of one run of `cmd`, in percent:
/// `perf record` on the software clock with call graphs, then the samples
/// with a frame in the kernel's Landlock checks (`security/landlock/`).
/// `None` when perf is missing or not permitted.
fn landlock_share(cmd: &Command, perf_data: &Path, stderr_log: &Path) -> Option<f64> {
    let log = fs::File::create(stderr_log).ok()?;
    // No build-id collection or cache: it is slow and would write to ~/.debug.
    let mut perf = Command::new("perf");
    perf.args([
        "record",
        "-q",
        "--no-buildid",
        "--no-buildid-cache",
        "-e",
        "cpu-clock",
        "-F",
        "2000",
        "-g",
        "-o",
    ])
    .arg(perf_data)
    .arg("--")
    .arg(cmd.get_program())
    .args(cmd.get_args())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(log);
    if let Some(dir) = cmd.get_current_dir() {
        perf.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => perf.env(key, value),
            None => perf.env_remove(key),
        };
    }
    if !perf.status().ok()?.success() {
        return None;
    }
    let script = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(perf_data)
        .args(["-F", "ip,sym"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let _ = fs::remove_file(perf_data);
    let text = String::from_utf8_lossy(&script.stdout);
    // One sample per block of frame lines ("address symbol"); a sample is
    // Landlock's when any frame is: hooks tail-call their checks, so the
    // checks are named too.
    let landlock = |symbol: &str| {
        ["hook_", "landlock_", "current_check_"]
            .iter()
            .any(|prefix| symbol.starts_with(prefix))
            || symbol == "is_access_to_paths_allowed"
            || symbol == "collect_domain_accesses"
    };
    let (mut samples, mut in_landlock) = (0u64, 0u64);
    let mut current: Option<bool> = None;
    for line in text.lines().chain(std::iter::once("")) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some(_address), Some(symbol)) => {
                let hit = landlock(symbol);
                current = Some(current.unwrap_or(false) || hit);
            }
            _ => {
                if let Some(hit) = current.take() {
                    samples += 1;
                    in_landlock += u64::from(hit);
                }
            }
        }
    }
    (samples > 0).then(|| 100.0 * in_landlock as f64 / samples as f64)
}

fn share_text(share: Option<f64>) -> String {
    share.map_or_else(|| "perf not available".into(), |s| format!("{s:.1} %"))
}

/// The median peak RSS of three runs of the command, spawned with `fork`.
fn peak_rss(command: &dyn Fn() -> Command, stderr_log: &Path) -> u64 {
    let mut r: Vec<u64> = (0..3)
        .map(|_| {
            let mut cmd = command();
            // A `pre_exec` hook, even one doing nothing, makes std spawn with
            // `fork` rather than `vfork`: the child then starts its life with
            // a copy-on-write image of its own instead of the parent's.
            // SAFETY: the hook does nothing at all.
            unsafe {
                cmd.pre_exec(|| Ok(()));
            }
            run(&mut cmd, stderr_log).0.max_rss_kib
        })
        .collect();
    r.sort_unstable();
    r[1]
}

fn dur(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

fn signed_dur(d: f64) -> String {
    let sign = if d < 0.0 { "−" } else { "+" };
    format!("{sign}{}", dur(Duration::from_secs_f64(d.abs())))
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let rule: Vec<&str> = header
        .iter()
        .enumerate()
        .map(|(i, _)| if i == 0 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

/// A target of the issue, with what was measured and whether it holds.
struct Target {
    what: String,
    measured: String,
    met: bool,
}

fn target(targets: &mut Vec<Target>, what: &str, measured: String, met: bool) {
    targets.push(Target {
        what: what.to_string(),
        measured,
        met,
    });
}

// ---------------------------------------------------------------------------
// The benchmark proper.

const REAL_WORK: &str = "## 4. Real work\n\nWall time of the whole command. `cargo build`: a clean debug build \
             (target directory removed before each run) of `benches/fixtures/cargo-deps`, a binary \
             with five direct dependencies (11 crates compiled, two build scripts), `--offline` from the \
             registry cache. `go test`: `go test ./...` of `tests/fixtures/go-hello` with `GOCACHE` \
             a fresh empty directory each run, so the standard library is compiled every time.\n";

/// A project directory the sandboxed commands run in, with the bubblewrap
/// equivalent of its policy.
struct Project {
    dir: PathBuf,
    /// The roots the CLI's policy for `dir` grants, as bubblewrap binds: all
    /// but the device files and `/dev/pts`, which `--dev /dev` provides.
    bwrap_binds: Vec<PathBuf>,
    /// How many roots the CLI's policy for `dir` grants.
    granted: usize,
}

impl Project {
    fn new(dir: &Path, stderr_log: &Path) -> Project {
        fs::create_dir_all(dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
        let dir = dir.canonicalize().expect("canonical project");
        // The CLI creates missing toolchain caches on its first run; let it,
        // so the binds below list the same roots it then grants.
        run(
            Command::new(BIN)
                .args(["run", "--project"])
                .arg(&dir)
                .args(["--", "true"]),
            stderr_log,
        );
        let writable = default_writable(&dir, None, &[]).expect("default writable set");
        let report = Policy { writable }.check().expect("policy check");
        let bwrap_binds = report
            .granted
            .iter()
            .map(|g| g.path.clone())
            .filter(|p| !p.starts_with("/dev") || p.starts_with("/dev/shm"))
            .collect();
        Project {
            dir,
            bwrap_binds,
            granted: report.granted.len(),
        }
    }

    /// `strument-sandbox run --project P -- cmd…`
    fn sandboxed(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--project"])
            .arg(&self.dir)
            .arg("--")
            .arg(program)
            .args(args)
            .current_dir(&self.dir);
        cmd
    }

    /// `bwrap --ro-bind / / --dev /dev --bind R R … -- cmd…`: the same
    /// writable roots, as mounts.
    fn bwrap(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new("bwrap");
        cmd.args(["--ro-bind", "/", "/", "--dev", "/dev"]);
        for root in &self.bwrap_binds {
            cmd.arg("--bind").arg(root).arg(root);
        }
        cmd.arg("--").arg(program).args(args).current_dir(&self.dir);
        cmd
    }

    fn bare(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(&self.dir);
        cmd
    }
}

/// The scratch space and the tools, found once.
struct Bench {
    /// `target/tmp/bench-sandbox`: everything the benchmark writes, except
    /// the file-heavy workload's project.
    work: PathBuf,
    /// The project under `work` the sandboxed commands run in.
    project: Project,
    stderr_log: PathBuf,
    exe: PathBuf,
}

impl Bench {
    fn setup(config: &Config) -> Bench {
        let availability = probe();
        if let Some(why) = &availability.error {
            fail(&format!(
                "Landlock is unavailable, nothing to measure: {why}; {}",
                why.hint()
            ));
        }
        require_tool("bwrap", &["--version"], "bubblewrap");
        let work = Path::new(TARGET_TMPDIR).join("bench-sandbox");
        // Only ever removes what an earlier run of this benchmark made.
        if work.exists() {
            fs::remove_dir_all(&work).unwrap_or_else(|e| fail(&format!("{}: {e}", work.display())));
        }
        fs::create_dir_all(&work).unwrap_or_else(|e| fail(&format!("{}: {e}", work.display())));
        let stderr_log = work.join("stderr.log");
        let project = Project::new(&work.join("project"), &stderr_log);
        let exe = std::env::current_exe().expect("the benchmark's own path");
        eprintln!(
            "sandbox benchmark ({} mode): Landlock ABI {}, project {}",
            if config.quick { "quick" } else { "full" },
            availability.abi,
            project.dir.display()
        );
        Bench {
            work,
            project,
            stderr_log,
            exe,
        }
    }

    /// [`landlock_share`] of one more run of `variant`, after `before`.
    fn share(&self, variant: &Variant<'_>, before: &dyn Fn()) -> Option<f64> {
        before();
        landlock_share(
            &(variant.command)(),
            &self.work.join("perf.data"),
            &self.stderr_log,
        )
    }

    fn startup(&self, config: &Config, out: &mut String, targets: &mut Vec<Target>) {
        let t = Path::new("true");
        // Prepared once, in this (unconfined) process: `confine` then costs
        // each child only `fork` instead of `vfork`, `prctl` and
        // `landlock_restrict_self`.
        let writable =
            default_writable(&self.project.dir, None, &[]).expect("default writable set");
        let prepared = Policy { writable }
            .prepare()
            .unwrap_or_else(|e| fail(&format!("prepare: {e}")));
        let variants = [
            Variant {
                name: "`true`".into(),
                command: Box::new(|| self.project.bare(t, &[])),
                self_timed: false,
            },
            Variant {
                name: "`env true` (a wrapper that only execs)".into(),
                command: Box::new(|| self.project.bare(Path::new("env"), &["true"])),
                self_timed: false,
            },
            Variant {
                name: "`strument-sandbox run -- true`".into(),
                command: Box::new(|| self.project.sandboxed(t, &[])),
                self_timed: false,
            },
            Variant {
                name: "library: `Prepared::confine` on `true`".into(),
                command: Box::new(|| {
                    let mut cmd = self.project.bare(t, &[]);
                    prepared.confine(&mut cmd);
                    cmd
                }),
                self_timed: false,
            },
            Variant {
                name: format!("`bwrap` ({} binds) `true`", self.project.bwrap_binds.len()),
                command: Box::new(|| self.project.bwrap(t, &[])),
                self_timed: false,
            },
        ];
        let samples = measure(
            "start-up",
            &variants,
            config.startup_runs,
            config.startup_runs.div_ceil(10),
            &|| {},
            &self.stderr_log,
        );
        let s: Vec<Stats> = samples.iter().map(|x| stats(x)).collect();
        let rss: Vec<u64> = variants
            .iter()
            .map(|v| peak_rss(&v.command, &self.stderr_log))
            .collect();
        let _ = writeln!(
            out,
            "## 1. Start-up\n\nWall time from spawn to exit, as the parent sees it. Peak memory \
             is the child's `ru_maxrss` from `wait4`, the largest image it had across its \
             `exec`s, from separate runs spawned with `fork` (a `vfork` child's first `exec` \
             would record the benchmark's own size instead). The sandbox \
             runs the CLI's default policy for the project ({} roots granted). `env true` is the \
             floor for any tool that confines and then execs: one more `execve` and dynamic \
             link, nothing else. The library row is how Strument itself confines a child: the \
             ruleset prepared once in the parent, the child restricting itself between `fork` \
             and `exec`. bwrap gets the same writable roots as bind mounts over `--ro-bind / /`, \
             with `--dev /dev` standing for the device roots.\n",
            self.project.granted
        );
        let rows: Vec<Vec<String>> = variants
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let over = s[i].median.as_secs_f64() - s[0].median.as_secs_f64();
                vec![
                    v.name.clone(),
                    s[i].runs.to_string(),
                    dur(s[i].median),
                    dur(s[i].min),
                    dur(s[i].max),
                    if i == 0 {
                        "—".into()
                    } else {
                        signed_dur(over)
                    },
                    format!("{:.2}", ratio(s[i].median, s[0].median)),
                    format!("{} KiB", rss[i]),
                ]
            })
            .collect();
        table(
            out,
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
            &rows,
        );
        let secs = |i: usize| s[i].median.as_secs_f64();
        let over = secs(2) - secs(0);
        let exec_floor = secs(1) - secs(0);
        target(
            targets,
            "start-up: ≤ 1 ms median over bare `true`",
            format!(
                "{} over bare: the second exec alone (`env true`) costs {}, strument-sandbox's own \
                 work {}; the library's `confine` costs {}",
                signed_dur(over),
                signed_dur(exec_floor),
                signed_dur(over - exec_floor),
                signed_dur(secs(3) - secs(0)),
            ),
            over <= 1e-3,
        );
        target(
            targets,
            "start-up: less than bubblewrap's",
            format!(
                "{} vs bwrap {} over bare",
                signed_dur(over),
                signed_dur(secs(4) - secs(0))
            ),
            s[2].median < s[4].median,
        );
        let _ = writeln!(
            out,
            "Peak memory of the `run` process: {} KiB (bare `true`: {} KiB, bwrap: {} KiB).\n",
            rss[2], rss[0], rss[4]
        );
    }

    fn apply(&self, config: &Config, out: &mut String, targets: &mut Vec<Target>) {
        let max = *config.apply_roots.iter().max().expect("root counts");
        let roots = self.work.join("roots");
        for i in 0..max {
            let dir = roots.join(format!("r{i:04}"));
            fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
        }
        let roots_arg = roots.to_str().expect("UTF-8 scratch path").to_string();
        // For each root count, the library and the bare syscalls it cannot
        // avoid, interleaved like every other case.
        let jobs: Vec<(usize, &str)> = config
            .apply_roots
            .iter()
            .flat_map(|&n| [(n, "apply"), (n, "apply-raw")])
            .collect();
        let mut detail: Vec<Vec<WorkerApply>> = vec![Vec::new(); jobs.len()];
        let runs = config.apply_runs;
        let warmup = runs.div_ceil(10);
        let n = jobs.len();
        for round in 0..warmup + runs {
            eprint!("\rapply: round {}/{}   ", round + 1, warmup + runs);
            let _ = std::io::stderr().flush();
            for k in 0..n {
                let v = (round + k) % n;
                let (count, mode) = jobs[v];
                let mut cmd = Command::new(&self.exe);
                cmd.args(["worker", mode, &count.to_string(), &roots_arg]);
                let (_, stdout) = run(&mut cmd, &self.stderr_log);
                if round >= warmup {
                    detail[v].push(WorkerApply::parse(&stdout));
                }
            }
        }
        eprintln!();
        let _ = writeln!(
            out,
            "## 2. Apply alone, as the roots grow\n\n`Policy::apply` (probe, open every root \
             `O_PATH` and stat it, create the ruleset, one `landlock_add_rule` per root, count \
             the threads, `no_new_privs`, `landlock_restrict_self`), timed inside a fresh child \
             process per run (the benchmark binary re-executed: an apply cannot be undone). The \
             roots are distinct directories. *Raw syscalls* is the floor: the same kernel work \
             (`open`, `fstat`, `landlock_add_rule`, `close` per root, then `prctl` and \
             `landlock_restrict_self`) issued directly, with nothing else. Allocations are counted \
             by a counting global allocator around the one `apply` call.\n"
        );
        let stat_of = |d: &[WorkerApply], f: &dyn Fn(&WorkerApply) -> Duration| {
            let v: Vec<Sample> = d
                .iter()
                .map(|w| Sample {
                    time: f(w),
                    max_rss_kib: 0,
                    cpu: Duration::ZERO,
                })
                .collect();
            stats(&v)
        };
        let mut rows = Vec::new();
        let mut medians = Vec::new();
        let mut raw_medians = Vec::new();
        for (i, &count) in config.apply_roots.iter().enumerate() {
            let lib = &detail[2 * i];
            let raw = &detail[2 * i + 1];
            let s = stat_of(lib, &|w| w.prepare + w.restrict);
            let r = stat_of(lib, &|w| w.restrict);
            let floor = stat_of(raw, &|w| w.prepare + w.restrict);
            medians.push(s.median);
            raw_medians.push(floor.median);
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
                format!("{:.2}", ratio(s.median, medians[0])),
                dur(floor.median),
                format!("{:.2}", ratio(s.median, floor.median)),
                format!("{} ({} bytes)", lib[0].allocations, lib[0].bytes),
            ]);
        }
        table(
            out,
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
            &rows,
        );
        let at = |n: usize| {
            config
                .apply_roots
                .iter()
                .position(|&r| r == n)
                .map(|i| (medians[i], raw_medians[i]))
        };
        if let (Some((one, _)), Some((t256, raw256)), Some((t4096, _))) = (at(1), at(256), at(4096))
        {
            target(
                targets,
                "apply: under 1 ms for 256 roots",
                format!("{} (the raw syscalls alone: {})", dur(t256), dur(raw256)),
                t256 < Duration::from_millis(1),
            );
            // Linear: the cost of each added root does not grow with the
            // count. Compare the marginal cost per root from 256 to 4096
            // with that from 1 to 256; allow a factor 2 for noise and for
            // the kernel's O(log n) rule tree.
            let low = (t256.as_secs_f64() - one.as_secs_f64()) / 255.0;
            let high = (t4096.as_secs_f64() - t256.as_secs_f64()) / 3840.0;
            target(
                targets,
                "apply: linear in the number of roots",
                format!(
                    "{} per added root from 1 to 256, {} from 256 to 4096",
                    dur(Duration::from_secs_f64(low.max(0.0))),
                    dur(Duration::from_secs_f64(high.max(0.0)))
                ),
                high <= 2.0 * low.max(1e-9),
            );
        }
    }

    fn files(&self, config: &Config, out: &mut String, targets: &mut Vec<Target>) {
        // tmpfs unless told otherwise: see the note printed below.
        let parent = std::env::var_os("STRUMENT_BENCH_FILES_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                if Path::new("/dev/shm").is_dir() {
                    "/dev/shm".into()
                } else {
                    self.work.clone()
                }
            });
        let scratch = parent.join(format!("strument-bench-{}", std::process::id()));
        let project = Project::new(&scratch.join("project"), &self.stderr_log);
        let dir = project.dir.join("files");
        let dir_arg = dir.to_str().expect("UTF-8 scratch path").to_string();
        let count = config.files.to_string();
        let checked_ops = 3 * config.files + 220;
        let _ = writeln!(
            out,
            "## 3. File-heavy workload in the project\n\nA worker (this binary re-executed) makes \
             110 directories (10 × 10), then creates and writes 256 bytes to each of {} files, \
             renames each into another directory, unlinks each and removes the directories; it \
             times that itself (wall and CPU time), so process start-up is not counted. It works \
             with paths relative to its current directory, so the bare run walks no long paths \
             while Landlock still checks every ancestor up to the project root on each create, \
             rename, unlink, mkdir and rmdir ({checked_ops} checked operations): the deep case is \
             the worst case for the kernel's walk. Sandboxed: `strument-sandbox run` with the \
             project's default policy; bwrap: the same roots as bind mounts.\n\n\
             The project for this case lives in `{}` (tmpfs; `STRUMENT_BENCH_FILES_DIR` \
             overrides). On the ext4 of the machine this was written on, the inode allocator's \
             scan past recently deleted inodes (`recently_deleted()` in `fs/ext4/ialloc.c`, on a \
             file system without a journal) made one run of this workload take anything from \
             0.6 s to 6 s, bare and sandboxed alike, which drowns a 5 % difference; tmpfs leaves \
             the VFS and Landlock work only, so the sandbox's share is as large as it gets.\n",
            config.files,
            parent.display()
        );
        let mut rows = Vec::new();
        let mut shares = Vec::new();
        for depth in [3usize, 64] {
            let depth_s = depth.to_string();
            let args: [&str; 5] = ["worker", "files", &dir_arg, &count, &depth_s];
            let variants = [
                Variant {
                    name: "bare".into(),
                    command: Box::new(|| project.bare(&self.exe, &args)),
                    self_timed: true,
                },
                Variant {
                    name: "`strument-sandbox run`".into(),
                    command: Box::new(|| project.sandboxed(&self.exe, &args)),
                    self_timed: true,
                },
                Variant {
                    name: "`bwrap`".into(),
                    command: Box::new(|| project.bwrap(&self.exe, &args)),
                    self_timed: true,
                },
            ];
            let clean = || {
                if dir.exists() {
                    fs::remove_dir_all(&dir)
                        .unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
                }
                fs::create_dir(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
            };
            let label = format!("files at depth {depth}");
            let samples = measure(
                &label,
                &variants,
                config.files_runs,
                1,
                &clean,
                &self.stderr_log,
            );
            let s: Vec<Stats> = samples.iter().map(|x| stats(x)).collect();
            let cpu: Vec<Duration> = samples.iter().map(|x| median_cpu(x)).collect();
            let share = self.share(&variants[1], &clean);
            shares.push(format!("depth {depth}: {}", share_text(share)));
            for (i, v) in variants.iter().enumerate() {
                let extra =
                    (s[i].median.as_secs_f64() - s[0].median.as_secs_f64()) / checked_ops as f64;
                rows.push(vec![
                    format!("{} files, depth {depth}", config.files),
                    v.name.clone(),
                    s[i].runs.to_string(),
                    dur(s[i].median),
                    dur(s[i].min),
                    dur(s[i].max),
                    format!("{:.3}", ratio(s[i].median, s[0].median)),
                    format!("{:.3}", paired_ratio(&samples[i], &samples[0])),
                    dur(cpu[i]),
                    format!("{:.3}", ratio(cpu[i], cpu[0])),
                    if i == 0 {
                        "—".into()
                    } else {
                        signed_dur(extra)
                    },
                ]);
            }
            let r = ratio(s[1].median, s[0].median);
            target(
                targets,
                &format!("file-heavy workload, depth {depth}: ratio to bare ≤ 1.05"),
                format!(
                    "{r:.3} (paired {:.3}, CPU time {:.3}; bwrap {:.3}); Landlock's checks: {} of \
                     the sandboxed run's CPU samples",
                    paired_ratio(&samples[1], &samples[0]),
                    ratio(cpu[1], cpu[0]),
                    ratio(s[2].median, s[0].median),
                    share_text(share)
                ),
                r <= 1.05,
            );
        }
        table(
            out,
            &[
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
                "extra per checked op",
            ],
            &rows,
        );
        let _ = writeln!(
            out,
            "Landlock's share: the CPU samples with a frame in the kernel's Landlock checks \
             (`security/landlock/`), in one more sandboxed run under `perf record -e cpu-clock \
             -g`: {}.\n",
            shares.join("; ")
        );
        // Only what this run made: the per-process directory under `parent`.
        fs::remove_dir_all(&scratch)
            .unwrap_or_else(|e| fail(&format!("{}: {e}", scratch.display())));
    }

    fn cargo(&self, config: &Config, out: &mut String, targets: &mut Vec<Target>) {
        let fixture = Path::new(MANIFEST_DIR).join("benches/fixtures/cargo-deps");
        let crate_dir = self.project.dir.join("cargo-deps");
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
        let fetched = env(Command::new("cargo"))
            .args(["fetch", "--locked", "--offline", "-q"])
            .status()
            .is_ok_and(|s| s.success());
        if !fetched {
            let ok = env(Command::new("cargo"))
                .args(["fetch", "--locked", "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                fail("cargo fetch of benches/fixtures/cargo-deps failed");
            }
        }
        let clean = || {
            if target_dir.exists() {
                fs::remove_dir_all(&target_dir)
                    .unwrap_or_else(|e| fail(&format!("{}: {e}", target_dir.display())));
            }
        };
        self.real_work(
            config,
            out,
            targets,
            ("cargo build", "clean `cargo build` (11 crates)"),
            (
                Path::new("cargo"),
                &["build", "--offline", "--locked", "-q"],
            ),
            &env,
            &clean,
        );
    }

    fn go(&self, config: &Config, out: &mut String, targets: &mut Vec<Target>) {
        require_tool("go", &["version"], "golang-go");
        let fixture = Path::new(MANIFEST_DIR).join("tests/fixtures/go-hello");
        let module = self.project.dir.join("go-hello");
        copy_dir(&fixture, &module);
        let cache = self.project.dir.join("gocache");
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
        self.real_work(
            config,
            out,
            targets,
            ("go test", "cold-cache `go test`"),
            (Path::new("go"), &["test", "./..."]),
            &env,
            &clean,
        );
    }

    /// Measures `program args` bare and under `strument-sandbox run`, each
    /// run after `clean`, and writes its section of "real work".
    #[allow(clippy::too_many_arguments)]
    fn real_work(
        &self,
        config: &Config,
        out: &mut String,
        targets: &mut Vec<Target>,
        (label, what): (&str, &str),
        (program, args): (&Path, &[&str]),
        env: &dyn Fn(Command) -> Command,
        clean: &dyn Fn(),
    ) {
        let variants = [
            Variant {
                name: "bare".into(),
                command: Box::new(|| env(self.project.bare(program, args))),
                self_timed: false,
            },
            Variant {
                name: "`strument-sandbox run`".into(),
                command: Box::new(|| env(self.project.sandboxed(program, args))),
                self_timed: false,
            },
        ];
        let warmup = usize::from(!config.quick);
        let samples = measure(
            label,
            &variants,
            config.heavy_runs,
            warmup,
            clean,
            &self.stderr_log,
        );
        let heading = if out.contains("## 4.") { "" } else { REAL_WORK };
        self.heavy_section(out, targets, heading, what, &variants, &samples, clean);
    }

    #[allow(clippy::too_many_arguments)]
    fn heavy_section(
        &self,
        out: &mut String,
        targets: &mut Vec<Target>,
        heading: &str,
        what: &str,
        variants: &[Variant<'_>],
        samples: &[Vec<Sample>],
        before: &dyn Fn(),
    ) {
        let share = self.share(&variants[1], before);
        if !heading.is_empty() {
            let _ = writeln!(out, "{heading}");
        }
        let s: Vec<Stats> = samples.iter().map(|x| stats(x)).collect();
        let cpu: Vec<Duration> = samples.iter().map(|x| median_cpu(x)).collect();
        let rows: Vec<Vec<String>> = variants
            .iter()
            .enumerate()
            .map(|(i, v)| {
                vec![
                    what.to_string(),
                    v.name.clone(),
                    s[i].runs.to_string(),
                    dur(s[i].median),
                    dur(s[i].min),
                    dur(s[i].max),
                    format!("{:.3}", ratio(s[i].median, s[0].median)),
                    format!("{:.3}", paired_ratio(&samples[i], &samples[0])),
                    dur(cpu[i]),
                    format!("{:.3}", ratio(cpu[i], cpu[0])),
                ]
            })
            .collect();
        table(
            out,
            &[
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
            ],
            &rows,
        );
        let _ = writeln!(
            out,
            "Landlock's share: the CPU samples with a frame in the kernel's Landlock checks, in \
             one more sandboxed run under `perf record -e cpu-clock -g`: {}.\n",
            share_text(share)
        );
        let r = ratio(s[1].median, s[0].median);
        target(
            targets,
            &format!("{what}: ratio to bare ≤ 1.02"),
            format!(
                "{r:.3} (paired {:.3}, CPU time {:.3}); Landlock's checks: {} of the sandboxed \
                 run's CPU samples",
                paired_ratio(&samples[1], &samples[0]),
                ratio(cpu[1], cpu[0]),
                share_text(share)
            ),
            r <= 1.02,
        );
    }
}

fn require_tool(program: &str, args: &[&str], package: &str) {
    let found = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        fail(&format!(
            "`{program}` not found: install the package `{package}` (apt-get install {package})"
        ));
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| fail(&format!("{}: {e}", to.display())));
    let entries = fs::read_dir(from).unwrap_or_else(|e| fail(&format!("{}: {e}", from.display())));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| fail(&format!("{}: {e}", from.display())));
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_name() == "target" {
            continue;
        }
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap_or_else(|e| fail(&format!("{}: {e}", src.display())));
        }
    }
}

fn capture(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The 1-, 5- and 15-minute load averages: how busy the machine was.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn document(
    config: &Config,
    body: &str,
    targets: &[Target],
    complete: bool,
    load_at_start: &str,
) -> String {
    let mut doc = String::new();
    let _ = writeln!(
        doc,
        "# Performance\n\n<!-- Generated by `{COMMAND}` (benches/sandbox.rs); do not edit by hand. -->\n\n\
         What the sandbox costs, against running bare and against bubblewrap, measured in one \
         invocation on one machine. Variants of a case run interleaved (A B C, B C A, …) so drift \
         falls on all of them alike; each table gives the median, min and max over its runs and \
         the ratio of medians to the bare run of the same invocation; the *paired ratio* is the \
         median over rounds of each run against the bare run of its own round, which cancels \
         drift slower than a round. The verdicts use the ratio of medians.\n"
    );
    if config.quick {
        doc.push_str("**Quick mode** (`STRUMENT_BENCH_QUICK=1`): few runs and small workloads; the numbers keep the benchmark working and mean little.\n\n");
    }
    if !complete {
        doc.push_str("**Partial run**: only some cases were selected.\n\n");
    }
    doc.push_str("## Targets\n\n");
    let rows: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            vec![
                t.what.clone(),
                t.measured.clone(),
                if t.met { "met" } else { "**missed**" }.to_string(),
            ]
        })
        .collect();
    table(&mut doc, &["target", "measured", "verdict"], &rows);
    doc.push_str(body);
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let memory = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let commit = capture("git", &["-C", MANIFEST_DIR, "rev-parse", "--short", "HEAD"]);
    let dirty = !capture(
        "git",
        &[
            "-C",
            MANIFEST_DIR,
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    )
    .is_empty();
    let _ = writeln!(
        doc,
        "## Machine and command\n\n\
         - command: `{}{COMMAND}`\n\
         - date: {}\n\
         - commit: {commit}{}\n\
         - CPUs: {cpus} × {cpu}; memory {memory}\n\
         - load average (1, 5, 15 min): {load_at_start} at the start, {} at the end\n\
         - kernel: Linux {kernel}, Landlock ABI {}\n\
         - {}; {}; {}",
        if config.quick {
            "STRUMENT_BENCH_QUICK=1 "
        } else {
            ""
        },
        capture("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        if dirty {
            " (with uncommitted changes)"
        } else {
            ""
        },
        load_average(),
        probe().abi,
        capture("bwrap", &["--version"]),
        capture("rustc", &["--version"]),
        capture("go", &["version"]),
    );
    doc
}

// ---------------------------------------------------------------------------
// Workers: the benchmark binary re-executed as a measured child.

#[derive(Clone, Copy)]
struct WorkerApply {
    prepare: Duration,
    restrict: Duration,
    allocations: u64,
    bytes: u64,
}

impl WorkerApply {
    fn parse(stdout: &str) -> WorkerApply {
        let v: Vec<u64> = stdout
            .split_whitespace()
            .map(|w| {
                w.parse()
                    .unwrap_or_else(|_| fail(&format!("bad worker output {stdout:?}")))
            })
            .collect();
        if v.len() != 5 {
            fail(&format!("bad worker output {stdout:?}"));
        }
        WorkerApply {
            prepare: Duration::from_nanos(v[1]),
            restrict: Duration::from_nanos(v[2]),
            allocations: v[3],
            bytes: v[4],
        }
    }
}

fn worker(args: &[String]) {
    match args {
        [mode, n, roots] if mode == "apply" => {
            worker_apply(n.parse().expect("root count"), Path::new(roots));
        }
        [mode, n, roots] if mode == "apply-raw" => {
            worker_apply_raw(n.parse().expect("root count"), Path::new(roots));
        }
        [mode, dir, count, depth] if mode == "files" => {
            let (wall, cpu) = worker_files(
                Path::new(dir),
                count.parse().expect("file count"),
                depth.parse().expect("depth"),
            );
            println!("{} {}", wall.as_nanos(), cpu.as_nanos());
        }
        _ => fail(&format!("unknown worker arguments {args:?}")),
    }
}

/// One apply of `n` directory roots, in this fresh single-threaded process.
/// Prints: total ns, prepare ns, restrict ns, allocations, bytes.
fn worker_apply(n: usize, roots: &Path) {
    let writable: Vec<PathBuf> = (0..n).map(|i| roots.join(format!("r{i:04}"))).collect();
    let policy = Policy { writable };
    let (a0, b0) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        ALLOCATED_BYTES.load(Ordering::Relaxed),
    );
    let start = Instant::now();
    let prepared = policy
        .prepare()
        .unwrap_or_else(|e| fail(&format!("prepare: {e}")));
    let mid = Instant::now();
    let report = prepared
        .restrict_self()
        .unwrap_or_else(|e| fail(&format!("restrict: {e}")));
    let end = Instant::now();
    let (a1, b1) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        ALLOCATED_BYTES.load(Ordering::Relaxed),
    );
    if report.granted.len() != n {
        fail(&format!("{} of {n} roots granted", report.granted.len()));
    }
    println!(
        "{} {} {} {} {}",
        (end - start).as_nanos(),
        (mid - start).as_nanos(),
        (end - mid).as_nanos(),
        a1 - a0,
        b1 - b0
    );
}

/// The floor under [`worker_apply`]: the syscalls an apply of `n` roots
/// cannot avoid, issued directly. Prints the same five numbers (no
/// allocations are counted).
fn worker_apply_raw(n: usize, roots: &Path) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    // From <linux/landlock.h>.
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const RULE_PATH_BENEATH: libc::c_int = 1;
    // WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_{CHAR,DIR,REG,SOCK,FIFO,BLOCK,SYM}, REFER, TRUNCATE.
    let v1: u64 = (1 << 1) | (0b1_1111_1111 << 4);
    let abi = probe().abi;
    let handled: u64 = match abi {
        1 => v1,
        2 => v1 | 1 << 13,
        _ => v1 | 1 << 13 | 1 << 14,
    };
    let paths: Vec<CString> = (0..n)
        .map(|i| {
            CString::new(roots.join(format!("r{i:04}")).as_os_str().as_bytes()).expect("no NUL")
        })
        .collect();
    let check = |ret: libc::c_long, what: &str| {
        if ret < 0 {
            fail(&format!("{what}: {}", std::io::Error::last_os_error()));
        }
        ret
    };
    let start = Instant::now();
    // SAFETY: plain syscalls on live, correctly sized locals; every
    // descriptor opened here is closed here.
    unsafe {
        check(
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32,
            ),
            "probe",
        );
        let ruleset = check(
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &handled as *const u64,
                std::mem::size_of::<u64>(),
                0u32,
            ),
            "create ruleset",
        ) as libc::c_int;
        for path in &paths {
            let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            check(fd.into(), "open");
            let mut st: libc::stat = std::mem::zeroed();
            check(libc::fstat(fd, &mut st).into(), "fstat");
            let attr = PathBeneathAttr {
                allowed_access: handled,
                parent_fd: fd,
            };
            check(
                libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset,
                    RULE_PATH_BENEATH,
                    &attr as *const PathBeneathAttr,
                    0u32,
                ),
                "add rule",
            );
            libc::close(fd);
        }
        let mid = Instant::now();
        check(
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into(),
            "prctl",
        );
        check(
            libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32),
            "restrict",
        );
        libc::close(ruleset);
        let end = Instant::now();
        println!(
            "{} {} {} 0 0",
            (end - start).as_nanos(),
            (mid - start).as_nanos(),
            (end - mid).as_nanos()
        );
    }
}

/// The file-heavy workload under `dir` (which is one level below the
/// project root and empty), with the files' directories `depth` levels
/// below the project root. Returns the wall and CPU time of the workload alone.
fn worker_files(dir: &Path, count: usize, depth: usize) -> (Duration, Duration) {
    const FAN: usize = 10;
    let mut base = dir.to_path_buf();
    for _ in 0..depth.saturating_sub(3) {
        base.push("d");
    }
    fs::create_dir_all(&base).unwrap_or_else(|e| fail(&format!("{}: {e}", base.display())));
    std::env::set_current_dir(&base).unwrap_or_else(|e| fail(&format!("{}: {e}", base.display())));
    let tops: Vec<String> = (0..FAN).map(|a| format!("a{a}")).collect();
    let leaves: Vec<String> = (0..FAN * FAN)
        .map(|i| format!("a{}/b{}", i / FAN, i % FAN))
        .collect();
    let files: Vec<(String, String)> = (0..count)
        .map(|i| {
            let leaf = i % leaves.len();
            // Into the next leaf: a rename across directories (Landlock's REFER check).
            let next = (leaf + 1) % leaves.len();
            (
                format!("{}/f{i}", leaves[leaf]),
                format!("{}/g{i}", leaves[next]),
            )
        })
        .collect();
    let data = [b'x'; 256];
    let io = |what: &str, p: &str, e: std::io::Error| -> ! { fail(&format!("{what} {p}: {e}")) };

    let cpu_start = cpu_time();
    let start = Instant::now();
    for d in tops.iter().chain(&leaves) {
        fs::create_dir(d).unwrap_or_else(|e| io("mkdir", d, e));
    }
    for (f, _) in &files {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(f)
            .unwrap_or_else(|e| io("create", f, e));
        file.write_all(&data).unwrap_or_else(|e| io("write", f, e));
    }
    for (f, g) in &files {
        fs::rename(f, g).unwrap_or_else(|e| io("rename", f, e));
    }
    for (_, g) in &files {
        fs::remove_file(g).unwrap_or_else(|e| io("unlink", g, e));
    }
    for d in leaves.iter().chain(&tops) {
        fs::remove_dir(d).unwrap_or_else(|e| io("rmdir", d, e));
    }
    (start.elapsed(), cpu_time() - cpu_start)
}

/// This process's user plus system CPU time so far.
fn cpu_time() -> Duration {
    // SAFETY: rusage is plain data; getrusage fills the live local.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    timeval(usage.ru_utime) + timeval(usage.ru_stime)
}
