//! Start-up: spawn to exit of `true`, bare, wrapped and confined, and what
//! `run`'s own work is made of, phase by phase.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use strument_sandbox::spawn::Spawn;
use strument_sandbox::tripwire::Snapshot;
use strument_sandbox::{Prepared, Session, default_writable, services, writable};

use crate::config::Config;
use crate::project::{Bench, Project};
use crate::report::Section;
use crate::runner::{Variant, measure_short, peak_rss};
use crate::stats::{Stats, dur, ratio, signed_dur};
use crate::{BIN, MANIFEST_DIR, TARGET_TMPDIR, fail};

/// `STRUMENT_BENCH_BEFORE`: another build of the CLI (an earlier commit's),
/// measured in the same rounds as this one, so before and after sit side
/// by side in one invocation.
const BEFORE: &str = "STRUMENT_BENCH_BEFORE";

pub fn run(bench: &Bench, config: &Config) -> Section {
    let project = &bench.project;
    let t = Path::new("true");
    // Prepared once, in this (unconfined) process: `confine` then costs
    // each child only `fork` instead of `vfork`, `prctl` and
    // `landlock_restrict_self`.
    let prepared = Project::policy(&project.dir)
        .prepare()
        .unwrap_or_else(|e| fail(&format!("prepare: {e}")));
    // Every CLI binary measured as a copy (see `installed_copy`).
    let before = std::env::var_os(BEFORE).map(PathBuf::from);
    let before_copy = before.as_deref().map(|b| installed_copy(b, "before"));
    let installed = installed_copy(&static_cli(), "static");
    let dynamic = installed_copy(Path::new(BIN), "dynamic");
    let dir = project.dir.as_path();
    let mut variants = vec![
        Variant::new("bare", "`true`", || project.bare(t, &[])),
        Variant::new("env", "`env true` (a wrapper that only execs)", || {
            project.bare(Path::new("env"), &["true"])
        }),
        Variant::new("run", "`strument-sandbox run -- true`", || {
            run_true(&dynamic, dir)
        }),
        Variant::new(
            "run-static",
            "`strument-sandbox run -- true`, the static build (`cargo cli`, as the README installs it)",
            || run_true(&installed, dir),
        ),
    ];
    // The same three with this process pinned to its CPU, so that `run`
    // and its child share one: without the wake-ups across CPUs and the
    // migration at `exec` that a second process brings (`env true` has
    // none of them), which cost more on a virtual machine, whose idle
    // CPUs are halted.
    variants.extend([
        Variant::new("bare-pinned", "`true`, pinned to one CPU", || {
            project.bare(t, &[])
        })
        .pinned(),
        Variant::new("env-pinned", "`env true`, pinned to one CPU", || {
            project.bare(Path::new("env"), &["true"])
        })
        .pinned(),
        Variant::new(
            "run-static-pinned",
            "`strument-sandbox run -- true`, the static build, pinned to one CPU",
            || run_true(&installed, dir),
        )
        .pinned(),
    ]);
    if let (Some(before), Some(copy)) = (&before, &before_copy) {
        variants.push(Variant::new(
            "before",
            format!(
                "`strument-sandbox run -- true`, before (`{}`)",
                before
                    .file_name()
                    .unwrap_or(before.as_os_str())
                    .to_string_lossy()
            ),
            move || run_true(copy, dir),
        ));
    }
    variants.extend([
        Variant::new(
            "version",
            "`strument-sandbox --version` (the binary's own start: exec, dynamic link, runtime, argument parsing)",
            || {
                let mut cmd = Command::new(&dynamic);
                cmd.arg("--version").current_dir(&project.dir);
                cmd
            },
        ),
        Variant::new(
            "version-static",
            "`strument-sandbox --version`, the static build",
            || {
                let mut cmd = Command::new(&installed);
                cmd.arg("--version").current_dir(&project.dir);
                cmd
            },
        ),
        Variant::new(
            "fork",
            "`true` with an empty `pre_exec` hook (std then `fork`s: the floor of any hook)",
            || empty_hook(project.bare(t, &[])),
        ),
        Variant::new("confine", "library: `Prepared::confine` on `true` (`fork`)", || {
            confined(project.bare(t, &[]), &prepared)
        }),
        Variant::new(
            "spawn",
            "library: `Spawn::spawn` on `true` (`clone` with `CLONE_VM` and `CLONE_VFORK`)",
            || {
                let mut cmd = project.bare(t, &[]);
                prepared.confine(&mut cmd);
                cmd
            },
        )
        .spawned(|| {
            Spawn::new("true")
                .current_dir(&project.dir)
                .spawn(&prepared)
        }),
        Variant::new(
            "spawn-bare",
            "library: `Spawn` on `true`, unconfined (the same path without confining)",
            || project.bare(t, &[]),
        )
        .spawned(|| Spawn::new("true").current_dir(&project.dir).spawn_unconfined()),
        Variant::new(
            "bwrap",
            format!("`bwrap` ({} binds) `true`", project.bwrap_binds.len()),
            || project.bwrap(t, &[]),
        ),
    ]);
    let measured = measure_short(
        "start-up",
        &variants,
        config.startup_runs,
        &bench.stderr_log,
    );
    let stats = |key: &str| Stats::of(&measured.samples(key));
    let rss = |key: &str| peak_rss(&measured.variant(key).command, &bench.stderr_log);
    let bare = stats("bare").median;

    let mut section = Section::new("Start-up");
    section.prose(format!(
        "Wall time from spawn to exit, as the parent sees it. Peak memory \
         is the child's `ru_maxrss` from `wait4`, the largest image it had across its \
         `exec`s, from separate runs spawned with `fork` (a `vfork` child's first `exec` \
         would record the benchmark's own size instead). The sandbox \
         runs the CLI's default policy for the project ({} roots granted). `env true` is the \
         floor for any tool that confines and then execs: one more `execve` and dynamic \
         link, nothing else. The library rows are how Strument itself confines a child: the \
         ruleset prepared once in the parent, the child restricting itself before `exec`, \
         either in a `std::process::Command` hook (which makes std `fork`) or through \
         `Spawn`, which builds everything first and starts the child with \
         `clone(CLONE_VM | CLONE_VFORK)` as `posix_spawn` does; the `Spawn` rows inherit \
         standard output instead of a pipe. bwrap gets the same writable roots as bind \
         mounts over `--ro-bind / /`, with `--dev /dev` standing for the device roots. \
         The pinned rows run with the benchmark pinned to the CPU it is on, which the \
         command and everything it starts inherit: `run` and its child then share one CPU, \
         so the second process costs no wake-up of another CPU and no move to it at \
         `exec` (on a virtual machine an idle CPU is halted, and waking it costs tens of \
         microseconds); the difference between `run`'s own work pinned and not is that \
         scheduling, not work `run` does. \
         Each build of the CLI runs from a fresh copy of its file, as `cargo install` \
         leaves one: a binary as the linker wrote it started 3-4 % slower on the machine \
         this was written on than a byte-identical copy.",
        project.granted
    ));
    let mut peak = std::collections::HashMap::new();
    let rows = variants
        .iter()
        .map(|v| {
            let kib = rss(&v.key);
            peak.insert(v.key.as_str(), kib);
            let mut row = against_bare(&v.name, &stats(&v.key), v.key == "bare", bare);
            row.push(format!("{kib} KiB"));
            row
        })
        .collect();
    let mut header = AGAINST_BARE.to_vec();
    header.push("peak RSS");
    section.table(&header, rows);
    let over_bare = |key: &str| stats(key).median.as_secs_f64() - bare.as_secs_f64();
    let over = over_bare("run");
    let exec_floor = over_bare("env");
    let own = over - exec_floor;
    let over_static = over_bare("run-static");
    let own_static = over_static - exec_floor;
    let before_note = match &before {
        Some(_) => format!(
            "; before: {} over bare, own work {}",
            signed_dur(over_bare("before")),
            signed_dur(over_bare("before") - exec_floor)
        ),
        None => String::new(),
    };
    section.target(
        "start-up: `run`'s own work (over `env true`) ≤ 0.4 ms",
        format!(
            "the static build (`cargo cli`) {} over bare: the second exec alone (`env true`) \
             costs {}, strument-sandbox's own work {}; the dynamically linked build (`cargo \
             build`) {} over bare, own work {}{before_note}; pinned to one CPU, the static \
             build's own work is {} (over `env true` pinned: the rest is the second process's \
             wake-ups across CPUs)",
            signed_dur(over_static),
            signed_dur(exec_floor),
            signed_dur(own_static),
            signed_dur(over),
            signed_dur(own),
            signed_dur(
                stats("run-static-pinned").median.as_secs_f64()
                    - stats("env-pinned").median.as_secs_f64()
            ),
        ),
        own_static <= 0.4e-3,
    );
    let confine = over_bare("confine");
    let fork = over_bare("fork");
    let spawn = over_bare("spawn");
    let large = large_caller(bench, config, &prepared);
    let busy = busy_caller(bench, config, &prepared);
    section.target(
        "start-up: `Prepared::confine` ≤ +0.1 ms over bare",
        format!(
            "{}, of which std's `fork` for any `pre_exec` hook {} and the confining {}; \
             from a caller holding {LARGE_MIB} MiB, {} (the `fork` alone {}); from a caller \
             with {BUSY_THREADS} threads waking each millisecond, {} (the `fork` alone {})",
            signed_dur(confine),
            signed_dur(fork),
            signed_dur(confine - fork),
            signed_dur(large.over("confine")),
            signed_dur(large.over("fork")),
            signed_dur(busy.over("confine")),
            signed_dur(busy.over("fork")),
        ),
        confine <= 0.1e-3,
    );
    section.target(
        "start-up: `Spawn::spawn` ≤ +0.1 ms over bare",
        format!(
            "{} (unconfined by the same path {}); from a caller holding {LARGE_MIB} MiB, {}",
            signed_dur(spawn),
            signed_dur(over_bare("spawn-bare")),
            signed_dur(large.over("spawn")),
        ),
        spawn <= 0.1e-3,
    );
    section.target(
        "start-up: less than bubblewrap's",
        format!(
            "{} vs bwrap {} over bare",
            signed_dur(over),
            signed_dur(over_bare("bwrap"))
        ),
        stats("run").median < stats("bwrap").median,
    );
    section.prose(format!(
        "Peak memory of the `run` process: {} KiB (bare `true`: {} KiB, bwrap: {} KiB).",
        peak["run"], peak["bare"], peak["bwrap"]
    ));
    section.prose(
        "What `Prepared::confine` adds to the empty hook is work for each child: the session's \
         variables, added by the child to the environment it inherits (set on the `Command`, \
         they would make std copy the whole environment before it `fork`s, one variable \
         costing as much as five), the supervisor's filter installed with a listener (a program the kernel does not walk \
         for each call number at install, which saves some 20 µs there and costs each call of \
         the command about 20 ns: see `connect::filter`), and the hand-over of that listener, \
         which wakes nobody: the child arms the supervisor's watch for it and leaves it in a \
         mailbox (`sys::hand_over_listener`). When the child ends, the kernel wakes the \
         supervisor's thread, which takes the listener from the mailbox and closes it; the \
         thread runs `SCHED_BATCH`, so it waits for the exiting command instead of preempting \
         it, but once it has run on a CPU, the caller's next `fork` interrupts that CPU to \
         flush its TLB (on a virtual machine this wakes a halted CPU): a caller whose own \
         threads run on other CPUs, as a tokio agent's do, pays that on every `fork` already. \
         So after a wake that brought nothing but ends, the thread leaves its watch unarmed \
         for 20 ms (`connect::COOL_DOWN`; a first call made then waits for the rest of it): \
         a caller that starts one command after another wakes it about once for every \
         20 ms of them, not once for each. \
         The thread also makes a single-threaded caller a multi-threaded one, around whose \
         every `fork` glibc takes and releases its locks (the allocator's, stdio's), writing \
         pages the `fork` has just made copy-on-write: from then on every `fork` row, hook or \
         not, costs more, as it does in any \
         caller that has started a thread. `Spawn` starts the child with `CLONE_VM`, \
         without `fork`'s copying, and with `CLONE_FILES`, so the listener lands in the \
         caller's own table and needs no hand-over.",
    );
    large.describe(&mut section);
    busy.describe(&mut section);
    phases(&mut section, bench, config);
    section
}

/// A table row's first cells: the name, then the runs, median, min and max
/// of `s`.
fn cells(name: &str, s: &Stats) -> Vec<String> {
    vec![
        name.to_string(),
        s.runs.to_string(),
        dur(s.median),
        dur(s.min),
        dur(s.max),
    ]
}

/// The columns of [`against_bare`].
const AGAINST_BARE: [&str; 7] = [
    "command",
    "runs",
    "median",
    "min",
    "max",
    "median − bare",
    "ratio to bare",
];

/// A start-up row: [`cells`], then the median's difference to and ratio
/// of `bare`'s (a dash for the bare row itself).
fn against_bare(name: &str, s: &Stats, is_bare: bool, bare: Duration) -> Vec<String> {
    let mut row = cells(name, s);
    row.push(if is_bare {
        "—".into()
    } else {
        signed_dur(s.median.as_secs_f64() - bare.as_secs_f64())
    });
    row.push(format!("{:.2}", ratio(s.median, bare)));
    row
}

/// `cmd` with a `pre_exec` hook that does nothing: std then `fork`s.
fn empty_hook(mut cmd: Command) -> Command {
    // SAFETY: the hook does nothing, so it is async-signal-safe.
    unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, || Ok(())) };
    cmd
}

/// `cmd` confined by `prepared`.
fn confined(mut cmd: Command, prepared: &Prepared) -> Command {
    prepared.confine(&mut cmd);
    cmd
}

/// The heap the benchmark holds for [`large_caller`], in MiB: an agent
/// with a long conversation and its tools' output in memory.
const LARGE_MIB: usize = 256;

/// The library's two ways to start a confined child, from a caller that
/// has touched [`LARGE_MIB`] of heap: `fork` copies the page tables of all
/// of it, `clone(CLONE_VM)` none. Measured in two sets, each with its own
/// bare row: the `fork` rows' copying evicts the caches and slows whatever
/// runs next in the same round.
struct Large {
    /// Bare `true` and `Spawn`.
    shared: Vec<(String, Stats)>,
    /// Bare `true`, the empty hook and `confine`.
    forked: Vec<(String, Stats)>,
}

/// The bare row's key in each set.
const BARE: &str = "bare";

impl Large {
    /// The set `key` was measured in.
    fn set(&self, key: &str) -> &[(String, Stats)] {
        if key == "spawn" {
            &self.shared
        } else {
            &self.forked
        }
    }

    fn stats<'s>(set: &'s [(String, Stats)], key: &str) -> &'s Stats {
        set.iter()
            .find(|(k, _)| k == key)
            .map(|(_, s)| s)
            .unwrap_or_else(|| fail(&format!("no variant {key:?}")))
    }

    /// The median of `key` over bare `true` of its own set.
    fn over(&self, key: &str) -> f64 {
        let set = self.set(key);
        Large::stats(set, key).median.as_secs_f64() - Large::stats(set, BARE).median.as_secs_f64()
    }

    fn describe(&self, section: &mut Section) {
        section.prose(format!(
            "The same library rows from a caller holding {LARGE_MIB} MiB of heap it has \
             written (every page), as a long-running agent does: `fork` copies the page \
             tables of all of it, so every `pre_exec` hook, and `Prepared::confine` with it, \
             costs in proportion to the caller's memory; `Spawn` shares the memory until \
             `exec` and costs the same whatever the caller's size. Bare `true` is started \
             by std with `posix_spawn`, which shares it too. The `Spawn` row is measured \
             apart from the `fork` rows, each set with its bare row: a `fork` of this size \
             evicts the caches, and whatever runs after it in the same round pays for that."
        ));
        let rows = [
            (&self.shared, BARE, "`true`, measured with the `Spawn` row"),
            (&self.shared, "spawn", "library: `Spawn::spawn` on `true`"),
            (&self.forked, BARE, "`true`, measured with the `fork` rows"),
            (
                &self.forked,
                "fork",
                "`true` with an empty `pre_exec` hook (`fork`)",
            ),
            (
                &self.forked,
                "confine",
                "library: `Prepared::confine` on `true` (`fork`)",
            ),
        ]
        .into_iter()
        .map(|(set, key, name)| {
            let bare = Large::stats(set, BARE).median;
            against_bare(name, Large::stats(set, key), key == BARE, bare)
        })
        .collect();
        let mut header = AGAINST_BARE.to_vec();
        header[0] = "command, from a large caller";
        section.table(&header, rows);
    }
}

/// Measures bare `true` with `Spawn`, then bare `true` with an empty hook
/// and `confine`, while this process holds [`LARGE_MIB`] of written heap,
/// freed afterwards.
fn large_caller(bench: &Bench, config: &Config, prepared: &Prepared) -> Large {
    let project = &bench.project;
    let t = Path::new("true");
    let mut heap = vec![0u8; LARGE_MIB << 20];
    for page in heap.chunks_mut(4096) {
        page[0] = 1;
    }
    let bare = || Variant::new(BARE, "`true`", || project.bare(t, &[]));
    let shared = [
        bare(),
        Variant::new("spawn", "`Spawn::spawn`", || project.bare(t, &[]))
            .spawned(|| Spawn::new("true").current_dir(&project.dir).spawn(prepared)),
    ];
    let forked = forked(project, prepared);
    let measure = |label: &str, variants: &[Variant<'_>]| {
        let measured = measure_short(
            &format!("start-up from a caller holding {LARGE_MIB} MiB, {label}"),
            variants,
            config.startup_runs / 2,
            &bench.stderr_log,
        );
        variants
            .iter()
            .map(|v| (v.key.clone(), Stats::of(&measured.samples(&v.key))))
            .collect()
    };
    let large = Large {
        shared: measure("Spawn", &shared),
        forked: measure("fork", &forked),
    };
    std::hint::black_box(&heap);
    drop(heap);
    large
}

/// Bare `true`, the empty hook and `confine`: the rows that tell what a
/// caller's `fork` costs from what confining adds.
fn forked<'a>(project: &'a Project, prepared: &'a Prepared) -> [Variant<'a>; 3] {
    let t = Path::new("true");
    [
        Variant::new(BARE, "`true`", move || project.bare(t, &[])),
        Variant::new("fork", "`true` with an empty `pre_exec` hook", move || {
            empty_hook(project.bare(t, &[]))
        }),
        Variant::new("confine", "`Prepared::confine`", move || {
            confined(project.bare(t, &[]), prepared)
        }),
    ]
}

/// How many threads of the busy caller wake each millisecond.
const BUSY_THREADS: usize = 2;

/// Bare `true`, the empty hook and `confine` from a caller whose other
/// threads wake each millisecond, as an async runtime's workers and timers
/// do (Strument is a tokio program): a thread that has run on another CPU
/// makes each `fork` interrupt that CPU to flush its TLB, which a
/// single-threaded caller pays only once the supervisor's thread has run.
struct Busy(Vec<(String, Stats)>);

impl Busy {
    /// The median of `key` over bare `true`.
    fn over(&self, key: &str) -> f64 {
        Large::stats(&self.0, key).median.as_secs_f64()
            - Large::stats(&self.0, BARE).median.as_secs_f64()
    }

    fn describe(&self, section: &mut Section) {
        section.prose(format!(
            "The `fork` rows again from a caller with {BUSY_THREADS} more threads, each \
             sleeping a millisecond at a time, as an async runtime's workers and timers wake: \
             the shape of Strument, a tokio program. Once a thread of a process has run on a \
             CPU, each `fork` of the process interrupts that CPU to flush its TLB (on a virtual \
             machine, waking it if it is halted), so the empty hook costs more here, and the \
             connect supervisor's thread adds less to it than to a single-threaded caller."
        ));
        let bare = Large::stats(&self.0, BARE).median;
        let rows = [
            (BARE, "`true`"),
            ("fork", "`true` with an empty `pre_exec` hook (`fork`)"),
            ("confine", "library: `Prepared::confine` on `true` (`fork`)"),
        ]
        .into_iter()
        .map(|(key, name)| against_bare(name, Large::stats(&self.0, key), key == BARE, bare))
        .collect();
        let mut header = AGAINST_BARE.to_vec();
        header[0] = "command, from a busy caller";
        section.table(&header, rows);
    }
}

/// Measures bare `true`, the empty hook and `confine` while
/// [`BUSY_THREADS`] threads of this process wake each millisecond.
fn busy_caller(bench: &Bench, config: &Config, prepared: &Prepared) -> Busy {
    let project = &bench.project;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads: Vec<_> = (0..BUSY_THREADS)
        .map(|_| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    let variants = forked(project, prepared);
    let measured = measure_short(
        "start-up from a busy caller",
        &variants,
        config.startup_runs / 2,
        &bench.stderr_log,
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for thread in threads {
        let _ = thread.join();
    }
    Busy(
        variants
            .iter()
            .map(|v| (v.key.clone(), Stats::of(&measured.samples(&v.key))))
            .collect(),
    )
}

/// The CLI as the README installs it (`cargo cli`: static glibc), built
/// once into the benchmark's own target directory.
fn static_cli() -> PathBuf {
    let dir = Path::new(TARGET_TMPDIR).join("static-cli");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .current_dir(MANIFEST_DIR)
        .args(["cli", "--quiet", "--target-dir"])
        .arg(&dir)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        fail(
            "cannot build the static CLI (`cargo cli`, see .cargo/config.toml): it needs a \
             cargo that knows `--target host-tuple` and glibc's static library (Debian: \
             libc6-dev)",
        );
    }
    // target/static-cli/<host triple>/release/strument-sandbox: one triple.
    std::fs::read_dir(&dir)
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("release/strument-sandbox"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| fail(&format!("no static CLI under {}", dir.display())))
}

/// `bin run -- true` in the project, as a user types it there (the project
/// is the current directory).
fn run_true(bin: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--", "true"]).current_dir(dir);
    cmd
}

/// A copy of the CLI binary at `path`, written in one go as `cargo install`
/// and `cp` write one, to measure instead of the file itself: on the
/// machine this was written on, `run -- true` from the binary as the linker
/// left it took 3-4 % longer than from a byte-identical copy (likely the
/// page cache: a file written in pieces is cached in smaller pieces, which
/// a start then faults in more often), which tilted the rows against the
/// build made just now and towards an earlier one copied aside.
fn installed_copy(path: &Path, name: &str) -> PathBuf {
    let dir = Path::new(TARGET_TMPDIR).join("startup-bins");
    let to = dir.join(name);
    let _ = std::fs::remove_file(&to);
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::copy(path, &to)) {
        fail(&format!(
            "cannot copy {} to {}: {e}",
            path.display(),
            to.display()
        ));
    }
    to
}

/// One phase of `run`'s work, run once.
type Phase<'a> = Box<dyn Fn() + 'a>;

/// `run`'s own work, phase by phase, each timed in this process (median of
/// many runs, interleaved): a regression in one shows here before it shows
/// in the total.
fn phases(section: &mut Section, bench: &Bench, config: &Config) {
    let dir = bench.project.dir.as_path();
    let policy = Project::policy(dir);
    let prepared = policy
        .prepare()
        .unwrap_or_else(|e| fail(&format!("prepare: {e}")));
    let snapshot = Snapshot::take(&prepared);
    let session = Session::builder(dir)
        .create_caches(false)
        .open()
        .unwrap_or_else(|e| fail(&format!("session: {e}")));
    let phases: [(&str, Phase<'_>); 8] = [
        (
            "`create_missing_caches` (all present: the stamp check)",
            Box::new(|| drop(writable::create_missing_caches())),
        ),
        (
            "`default_writable` (the cache list, `.git`, temporary space)",
            Box::new(|| drop(default_writable(dir, None, &[]))),
        ),
        (
            "`Policy::prepare` (probe, open and judge each root, ruleset, the supervisor's rules)",
            Box::new(|| drop(policy.prepare())),
        ),
        (
            "the reachable-services scan, which `prepare` no longer runs (the supervisor decides every connect)",
            Box::new(|| drop(services::reachable_services())),
        ),
        (
            "tripwire: `Snapshot::take`",
            Box::new(|| drop(Snapshot::take(&prepared))),
        ),
        (
            "tripwire: compare after the command (`changes`)",
            Box::new(|| drop(snapshot.changes())),
        ),
        (
            "`Session::open` without creating caches (`default_writable`, `prepare`, `Snapshot::take`)",
            Box::new(|| drop(Session::builder(dir).create_caches(false).open())),
        ),
        (
            "the same, then `confine` and the session's end: the row above plus the session \
             directory, made for the command's daemons and removed when left empty",
            Box::new(|| {
                if let Ok(session) = Session::builder(dir).create_caches(false).open() {
                    session.confine(&mut Command::new("true"));
                }
            }),
        ),
    ];
    drop(session);
    let runs = config.startup_runs;
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); phases.len()];
    for round in 0..runs + Config::warmup(runs) {
        for (i, (_, f)) in phases.iter().enumerate() {
            let t = Instant::now();
            f();
            if round >= Config::warmup(runs) {
                times[i].push(t.elapsed());
            }
        }
    }
    section.prose(format!(
        "Phase by phase, in this process: the median of {runs} runs of each, interleaved. \
         `run` does `create_missing_caches`, then `Session::open` (`default_writable`, \
         `Policy::prepare`, `Snapshot::take`), makes the session directory (`TMUX_TMPDIR` \
         and the like, under `/dev/shm`), spawns the command, compares the snapshot after it \
         and removes the directory; the rest of its time is the binary's own start (the \
         `--version` row above) and the child's start (the `Spawn::spawn` row)."
    ));
    let rows = phases
        .iter()
        .zip(times)
        .map(|((name, _), t)| cells(name, &Stats::of_times(t)))
        .collect();
    section.table(&["phase", "runs", "median", "min", "max"], rows);
}
