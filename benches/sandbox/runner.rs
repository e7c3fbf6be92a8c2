//! Running and timing children, variants interleaved.

use std::fs;
use std::io::{Read, Write as _};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use strument_sandbox::spawn::Spawned;

use crate::config::Config;
use crate::fail;

/// One measured run.
#[derive(Clone, Copy)]
pub struct Sample {
    pub time: Duration,
    /// The child's peak resident set, in KiB (`ru_maxrss` from `wait4`):
    /// the largest image it had across its `exec`s, see [`peak_rss`].
    pub max_rss_kib: u64,
    /// User plus system CPU time: the child's and its waited-for
    /// descendants' from `wait4`, or what a worker reports for its workload.
    pub cpu: Duration,
}

/// Spawns `cmd`, waits for it with `wait4` (for the rusage of this child
/// and its descendants alone) and returns the wall time and its standard
/// output. A failing command stops the benchmark with its standard error.
pub fn run(cmd: &mut Command, stderr_log: &Path) -> (Sample, String) {
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

/// Times a child the library's `Spawn` starts, from the call to its reaping.
pub fn run_spawned(spawn: &dyn Fn() -> std::io::Result<Spawned>) -> Sample {
    let start = Instant::now();
    let child = spawn().unwrap_or_else(|e| fail(&format!("cannot spawn: {e}")));
    let (status, usage) = wait4(child.id());
    let time = start.elapsed();
    if !status.success() {
        fail(&format!("spawned child failed ({status})"));
    }
    Sample {
        time,
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        cpu: timeval(usage.ru_utime) + timeval(usage.ru_stime),
    }
}

pub fn timeval(t: libc::timeval) -> Duration {
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

/// Whose clock a run is measured by.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// The wall time around the child, as its parent sees it.
    Wall,
    /// The "wall-ns cpu-ns" the child prints for its own workload (a
    /// worker), so that process start-up is not counted.
    SelfTimed,
}

/// A variant of a case: a key the case's code refers to it by, a name for
/// the tables, and how to build its command afresh for each run.
pub struct Variant<'a> {
    pub key: String,
    pub name: String,
    pub command: Box<dyn Fn() -> Command + 'a>,
    pub timing: Timing,
    /// Started by the library's `Spawn` instead of `command` (which then
    /// only serves to measure peak memory): stdio inherited, no pipe.
    pub spawn: Option<Box<dyn Fn() -> std::io::Result<Spawned> + 'a>>,
    /// Run with this process pinned to the CPU it is on, so that the
    /// command and every process it starts inherit that one CPU.
    pub pinned: bool,
}

impl<'a> Variant<'a> {
    pub fn new(
        key: impl Into<String>,
        name: impl Into<String>,
        command: impl Fn() -> Command + 'a,
    ) -> Variant<'a> {
        Variant {
            key: key.into(),
            name: name.into(),
            command: Box::new(command),
            timing: Timing::Wall,
            spawn: None,
            pinned: false,
        }
    }

    /// Run pinned to one CPU, see [`Variant::pinned`].
    pub fn pinned(mut self) -> Variant<'a> {
        self.pinned = true;
        self
    }

    /// Timed through `spawn` rather than `command`.
    pub fn spawned(mut self, spawn: impl Fn() -> std::io::Result<Spawned> + 'a) -> Variant<'a> {
        self.spawn = Some(Box::new(spawn));
        self
    }

    pub fn self_timed(mut self) -> Variant<'a> {
        self.timing = Timing::SelfTimed;
        self
    }
}

/// What [`measure`] found: every variant's runs, looked up by key.
pub struct Measured<'v, 'a> {
    pub variants: &'v [Variant<'a>],
    runs: Vec<Vec<(Sample, String)>>,
}

impl Measured<'_, '_> {
    fn index(&self, key: &str) -> usize {
        self.variants
            .iter()
            .position(|v| v.key == key)
            .unwrap_or_else(|| fail(&format!("no variant {key:?}")))
    }

    /// The samples of the variant `key`.
    pub fn samples(&self, key: &str) -> Vec<Sample> {
        self.runs[self.index(key)].iter().map(|r| r.0).collect()
    }

    /// What the variant `key` printed, run by run.
    pub fn stdouts(&self, key: &str) -> impl Iterator<Item = &str> {
        self.runs[self.index(key)].iter().map(|r| r.1.as_str())
    }

    pub fn variant(&self, key: &str) -> &Variant<'_> {
        &self.variants[self.index(key)]
    }
}

/// [`measure`] for the short cases (start-up, apply): a tenth of `runs`
/// as warm-up ([`Config::warmup`]) and nothing to do between runs.
pub fn measure_short<'v, 'a>(
    label: &str,
    variants: &'v [Variant<'a>],
    runs: usize,
    stderr_log: &Path,
) -> Measured<'v, 'a> {
    measure(
        label,
        variants,
        (runs, Config::warmup(runs)),
        &|| {},
        stderr_log,
    )
}

/// Runs every variant `runs` times, interleaved with the starting variant
/// rotating each round (A B C, B C A, …) so drift on a busy machine falls
/// on all of them alike, after `warmup` unmeasured rounds. `before` runs
/// untimed before each run (cleaning a target directory, say).
pub fn measure<'v, 'a>(
    label: &str,
    variants: &'v [Variant<'a>],
    (runs, warmup): (usize, usize),
    before: &dyn Fn(),
    stderr_log: &Path,
) -> Measured<'v, 'a> {
    let n = variants.len();
    let mut measured = vec![Vec::with_capacity(runs); n];
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
            let pin = variants[v].pinned.then(Pinned::to_this_cpu);
            let (mut sample, stdout) = match &variants[v].spawn {
                Some(spawn) => (run_spawned(spawn.as_ref()), String::new()),
                None => run(&mut (variants[v].command)(), stderr_log),
            };
            drop(pin);
            if variants[v].timing == Timing::SelfTimed {
                (sample.time, sample.cpu) = parse_worker_times(&stdout);
            }
            if round >= warmup {
                measured[v].push((sample, stdout));
            }
        }
    }
    eprintln!();
    Measured {
        variants,
        runs: measured,
    }
}

/// This thread pinned to the CPU it runs on (children inherit it), its
/// own set of CPUs put back when dropped.
struct Pinned {
    was: libc::cpu_set_t,
}

impl Pinned {
    fn to_this_cpu() -> Pinned {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: cpu_set_t is plain data, valid when zeroed; the calls take
        // this thread (0), the size and a pointer to a live set.
        unsafe {
            let mut was: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut was) != 0 {
                fail(&format!(
                    "sched_getaffinity: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let cpu = usize::try_from(libc::sched_getcpu())
                .unwrap_or_else(|_| fail("sched_getcpu failed"));
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut one);
            if libc::sched_setaffinity(0, size, &one) != 0 {
                fail(&format!(
                    "sched_setaffinity: {}",
                    std::io::Error::last_os_error()
                ));
            }
            Pinned { was }
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: as in `to_this_cpu`: this thread and a live set.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.was) };
    }
}

/// A worker's "wall-ns cpu-ns" line.
fn parse_worker_times(stdout: &str) -> (Duration, Duration) {
    match two_numbers(stdout) {
        Some((wall, cpu)) => (Duration::from_nanos(wall), Duration::from_nanos(cpu)),
        None => fail(&format!("worker printed no times: {stdout:?}")),
    }
}

/// The two numbers a worker printed, when it printed two and nothing else
/// that reads as a number.
pub fn two_numbers(stdout: &str) -> Option<(u64, u64)> {
    let v: Vec<u64> = stdout
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match v[..] {
        [a, b] => Some((a, b)),
        _ => None,
    }
}

/// The median peak RSS of three runs of the command, spawned with `fork`.
pub fn peak_rss(command: &dyn Fn() -> Command, stderr_log: &Path) -> u64 {
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
