//! Workers: the benchmark binary re-executed as a measured child, because
//! an apply cannot be undone and a confined workload must not confine the
//! harness.

use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use strument_sandbox::{Policy, Root, probe};

use crate::alloc::allocated;
use crate::fail;
use crate::runner::timeval;

/// What one `worker apply` run printed.
#[derive(Clone, Copy)]
pub struct WorkerApply {
    pub prepare: Duration,
    pub restrict: Duration,
    pub allocations: u64,
    pub bytes: u64,
}

impl WorkerApply {
    pub fn parse(stdout: &str) -> WorkerApply {
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

/// `sandbox worker apply|apply-raw|files …`
pub fn worker(args: &[String]) {
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
        [mode, kind, n, dir] if mode == "connect" => {
            worker_connect(kind, n.parse().expect("connect count"), Path::new(dir));
        }
        _ => fail(&format!("unknown worker arguments {args:?}")),
    }
}

/// One apply of `n` directory roots, in this fresh single-threaded process.
/// Prints: total ns, prepare ns, restrict ns, allocations, bytes.
fn worker_apply(n: usize, roots: &Path) {
    let writable: Vec<Root> = (0..n)
        .map(|i| Root::from(roots.join(format!("r{i:04}"))))
        .collect();
    let policy = Policy {
        writable,
        ..Policy::default()
    };
    let (a0, b0) = allocated();
    let start = Instant::now();
    let prepared = policy
        .prepare()
        .unwrap_or_else(|e| fail(&format!("prepare: {e}")));
    let mid = Instant::now();
    let report = prepared
        .restrict_self()
        .unwrap_or_else(|e| fail(&format!("restrict: {e}")));
    let end = Instant::now();
    let (a1, b1) = allocated();
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
    // The rights the library handles on this kernel, from the library.
    let handled: u64 = probe().handled_access_fs();
    // The roots share one parent: opened once, each root from it by name,
    // as the library does.
    let parent = CString::new(roots.as_os_str().as_bytes()).expect("no NUL");
    let names: Vec<CString> = (0..n)
        .map(|i| CString::new(format!("r{i:04}")).expect("no NUL"))
        .collect();
    let check = |ret: libc::c_long, what: &str| {
        if ret < 0 {
            fail(&format!("{what}: {}", std::io::Error::last_os_error()));
        }
        ret
    };
    let mut opened: Vec<libc::c_int> = Vec::with_capacity(n);
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
        let dir = libc::open(parent.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        check(dir.into(), "open the parent");
        for name in &names {
            let fd = libc::openat(dir, name.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            check(fd.into(), "open");
            opened.push(fd);
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
        }
        // Opened one after the other, the roots' descriptors are mostly
        // consecutive: one close_range a run closes them, as the library does.
        for run in opened.chunk_by(|a, b| a + 1 == *b) {
            check(
                libc::syscall(
                    libc::SYS_close_range,
                    run[0] as u32,
                    run[run.len() - 1] as u32,
                    0u32,
                ),
                "close_range",
            );
        }
        libc::close(dir);
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

/// `n` connects, each with a one-byte echo, to a server this process runs
/// on a thread: a unix socket bound in `dir`, or TCP on 127.0.0.1. Prints
/// the median and 90th percentile of one connect and echo, in ns.
fn worker_connect(kind: &str, n: usize, dir: &Path) {
    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};

    fn echo<S: Read + Write>(mut s: S) {
        let mut b = [0u8; 1];
        if s.read_exact(&mut b).is_ok() {
            let _ = s.write_all(&b);
        }
    }
    fn ping<S: Read + Write>(mut s: S) {
        let mut b = [7u8; 1];
        s.write_all(&b).expect("write");
        s.read_exact(&mut b).expect("read");
    }
    let mut times = Vec::with_capacity(n);
    if kind == "unix" {
        let path = dir.join(format!("bench-{}.sock", std::process::id()));
        let _ = fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap_or_else(|e| fail(&format!("bind: {e}")));
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                echo(s);
            }
        });
        for _ in 0..n {
            let start = Instant::now();
            ping(UnixStream::connect(&path).unwrap_or_else(|e| fail(&format!("connect: {e}"))));
            times.push(start.elapsed());
        }
        let _ = fs::remove_file(&path);
    } else {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| fail(&format!("bind: {e}")));
        let addr = listener.local_addr().expect("address");
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                echo(s);
            }
        });
        for _ in 0..n {
            let start = Instant::now();
            ping(
                std::net::TcpStream::connect(addr)
                    .unwrap_or_else(|e| fail(&format!("connect: {e}"))),
            );
            times.push(start.elapsed());
        }
    }
    times.sort_unstable();
    // And how many seccomp filters this process runs under, so that the
    // benchmark can tell a mediated run from a plain one.
    let filters = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp_filters:"))
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    println!(
        "{} {} filters={filters}",
        times[n / 2].as_nanos(),
        times[n * 9 / 10].as_nanos()
    );
}
