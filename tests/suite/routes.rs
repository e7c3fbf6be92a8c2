//! Every write route, tried on the kernel: one attempt that a granted root
//! must let land and one that must be refused, each checked on the
//! filesystem afterwards and compared with what `Report::explain`
//! predicted. Needs a kernel with Landlock (ABI 3 or later for the
//! truncation routes), and root for the device and mount routes.
//!
//! The confined side is this test binary re-executed with [`ROUTE`] set,
//! confined by `Prepared::confine` before `exec`: the harness itself is
//! never confined. It performs one route and prints its result; the
//! unconfined parent prepares the files, checks them afterwards, and
//! writes the table `doc/security.md` publishes (`STRUMENT_BLESS=1`
//! regenerates it).

use std::ffi::{CString, OsStr, OsString};
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};

use proptest::prelude::*;
use strument_sandbox::{Policy, Prepared, probe};

use super::props::{config, near_roots, tree};
use super::support::{FakeHome, show};

/// Set in the confined child: `<row>:<g|r>`, the case to perform.
const ROUTE: &str = "STRUMENT_ROUTE";
/// Set in the unconfined process that ptrace and `/proc/<pid>` routes aim at.
const TARGET: &str = "STRUMENT_ROUTE_TARGET";
const THIS_TEST: &str = "suite::routes::every_write_route_lands_inside_and_is_refused_outside";
const BEGIN: &str = "<!-- routes:begin -->";
const END: &str = "<!-- routes:end -->";

/// What a write through `/proc/<pid>/mem` overwrites.
static BUF: [AtomicU8; 8] = [const { AtomicU8::new(b'-') }; 8];
const MARK: &[u8; 8] = b"landed!!";
const ORIGINAL: &str = "original";

/// The directories one case works in, made fresh for it: `a` and `b` are
/// beneath the two granted roots, `out` and `out2` beneath no root.
struct Places {
    a: PathBuf,
    b: PathBuf,
    out: PathBuf,
    out2: PathBuf,
    /// The unconfined process of the same user.
    target_pid: i32,
    target_addr: usize,
    target_cwd: PathBuf,
    /// Where the confined child's own fork sits (for `/proc/<pid>/cwd`).
    label: String,
}

impl Places {
    fn from_env() -> Places {
        let var = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .unwrap_or_default()
        };
        let num = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0)
        };
        Places {
            a: var("ROUTE_A"),
            b: var("ROUTE_B"),
            out: var("ROUTE_OUT"),
            out2: var("ROUTE_OUT2"),
            target_pid: i32::try_from(num("ROUTE_TARGET_PID")).unwrap_or(0),
            target_addr: num("ROUTE_TARGET_ADDR"),
            target_cwd: var("ROUTE_TARGET_CWD"),
            label: std::env::var("ROUTE_LABEL").unwrap_or_default(),
        }
    }

    fn export(&self, cmd: &mut Command) {
        cmd.env("ROUTE_A", &self.a)
            .env("ROUTE_B", &self.b)
            .env("ROUTE_OUT", &self.out)
            .env("ROUTE_OUT2", &self.out2)
            .env("ROUTE_TARGET_PID", self.target_pid.to_string())
            .env("ROUTE_TARGET_ADDR", self.target_addr.to_string())
            .env("ROUTE_TARGET_CWD", &self.target_cwd)
            .env("ROUTE_LABEL", &self.label);
    }

    /// `/proc/<target>/cwd/<label>`: a name in the unconfined process's cwd.
    fn in_target_cwd(&self) -> PathBuf {
        self.target_cwd.join(&self.label)
    }
}

type Attempt = fn(&Places) -> Result<(), i32>;
type Check = fn(&Places) -> bool;
type Paths = fn(&Places) -> Vec<PathBuf>;

/// One attempt of a route.
struct Case {
    /// Where and how, for the table.
    what: &'static str,
    /// Run in the sandbox; `false` is an unconfined control, for routes no
    /// root can grant (mount), proving the attempt itself is sound.
    sandboxed: bool,
    setup: fn(&Places),
    attempt: Attempt,
    /// Whether the write is visible afterwards, checked unconfined; `None`
    /// when the attempt's own verification is the only evidence (a
    /// process or mount namespace that is gone afterwards).
    landed: Option<Check>,
    /// The paths a write of this route needs (both ends of a rename or
    /// link); explain predicts "lands" when every one is granted. `None`
    /// for routes that are not about a path.
    explain: Option<Paths>,
}

/// A write route: the attempt that must land and the one that must not.
struct Route {
    name: &'static str,
    granted: Case,
    refused: Case,
    /// The refused attempt lands: Landlock does not confine this route.
    /// The suite asserts it so the table stays true.
    gap: bool,
    /// Needs privileges beyond Landlock's (CAP_MKNOD, CAP_SYS_ADMIN):
    /// without root the granted attempt fails for lack of them.
    needs_root: bool,
}

// ---------------------------------------------------------------------------
// Raw syscalls for the confined side.

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("test paths hold no NUL")
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn check(ret: libc::c_int) -> Result<libc::c_int, i32> {
    if ret < 0 { Err(errno()) } else { Ok(ret) }
}

fn io(result: std::io::Result<()>) -> Result<(), i32> {
    result.map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

fn open_fd(path: &Path, flags: libc::c_int) -> Result<OwnedFd, i32> {
    // SAFETY: a valid C string and plain integer flags; the returned
    // descriptor is owned by the OwnedFd from here on.
    let fd = check(unsafe { libc::open(c(path).as_ptr(), flags | libc::O_CLOEXEC, 0o644) })?;
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn write_fd(fd: &OwnedFd, data: &[u8]) -> Result<(), i32> {
    // SAFETY: the buffer is valid for its length for the call.
    let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
    if n < 0 { Err(errno()) } else { Ok(()) }
}

/// Opens `path` with `flags` and writes the mark `landed`.
fn open_write(path: &Path, flags: libc::c_int) -> Result<(), i32> {
    let fd = open_fd(path, flags)?;
    write_fd(&fd, b"landed")
}

fn mknod(path: &Path, kind: libc::mode_t, dev: libc::dev_t) -> Result<(), i32> {
    // SAFETY: a valid C string and integers.
    check(unsafe { libc::mknod(c(path).as_ptr(), kind | 0o600, dev) }).map(drop)
}

fn truncate(path: &Path) -> Result<(), i32> {
    // SAFETY: a valid C string and an integer length.
    check(unsafe { libc::truncate(c(path).as_ptr(), 0) }).map(drop)
}

fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> Result<(), i32> {
    // SAFETY: valid C strings and integers.
    check(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            c(from).as_ptr(),
            libc::AT_FDCWD,
            c(to).as_ptr(),
            flags,
        )
    })
    .map(drop)
}

/// Gives an `O_TMPFILE` descriptor a name, through its `/proc/self/fd` magic link.
fn link_fd(fd: &OwnedFd, to: &Path) -> Result<(), i32> {
    let from = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    // SAFETY: valid C strings and integers.
    check(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            c(&from).as_ptr(),
            libc::AT_FDCWD,
            c(to).as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })
    .map(drop)
}

fn tmpfile_linked(dir: &Path, to: &Path) -> Result<(), i32> {
    let fd = open_fd(dir, libc::O_TMPFILE | libc::O_WRONLY)?;
    write_fd(&fd, b"landed")?;
    link_fd(&fd, to)
}

/// In a forked child (a multi-threaded process cannot unshare its mount
/// namespace, and libtest runs tests on threads): a private mount
/// namespace (a user namespace too when not root), then `mount`, then,
/// when `then_write` is given, a write there. The first mount call is
/// where a sandbox is refused; the child's exit status carries the errno.
fn mount_in_own_namespace(
    source: &Path,
    on: &Path,
    fstype: &str,
    flags: libc::c_ulong,
    then_write: Option<&Path>,
) -> Result<(), i32> {
    // SAFETY: geteuid has no preconditions.
    let ns = if unsafe { libc::geteuid() } == 0 {
        libc::CLONE_NEWNS
    } else {
        libc::CLONE_NEWNS | libc::CLONE_NEWUSER
    };
    let (root, source, on_c) = (c(Path::new("/")), c(source), c(on));
    let fstype = CString::new(fstype).expect("fstype");
    let write = then_write.map(c);
    let (pid, tx) = fork_waiting(
        || {},
        move || {
            // SAFETY: only raw syscalls on C strings made before the fork;
            // the namespace and its mounts die with this child.
            unsafe {
                if libc::unshare(ns) < 0
                    || libc::mount(
                        std::ptr::null(),
                        root.as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) < 0
                    || libc::mount(
                        source.as_ptr(),
                        on_c.as_ptr(),
                        fstype.as_ptr(),
                        flags,
                        std::ptr::null(),
                    ) < 0
                {
                    return *libc::__errno_location();
                }
                if let Some(path) = &write {
                    let fd = libc::open(
                        path.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                        0o644,
                    );
                    if fd < 0 || libc::write(fd, b"landed".as_ptr().cast(), 6) != 6 {
                        return *libc::__errno_location();
                    }
                    return 0;
                }
                let mut st: libc::statfs = std::mem::zeroed();
                if libc::statfs(on_c.as_ptr(), &raw mut st) < 0 {
                    return *libc::__errno_location();
                }
                if st.f_type == libc::TMPFS_MAGIC {
                    0
                } else {
                    libc::ENODEV
                }
            }
        },
    )?;
    match release(pid, tx) {
        0 => Ok(()),
        errno => Err(errno),
    }
}

/// Forks a child that runs `before` (async-signal-safe only), then waits
/// for a byte on a pipe and exits with `after()`'s status.
fn fork_waiting(before: impl FnOnce(), after: impl FnOnce() -> i32) -> Result<(i32, OwnedFd), i32> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid two-element array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both were just returned by pipe2 and are owned here.
    let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child calls only async-signal-safe functions (the
    // closures do raw syscalls and atomic loads) and leaves with _exit.
    let pid = check(unsafe { libc::fork() })?;
    if pid == 0 {
        before();
        let mut byte = 0u8;
        // SAFETY: reading one byte into a valid buffer; then _exit.
        unsafe {
            libc::read(rx.as_raw_fd(), (&raw mut byte).cast(), 1);
            libc::_exit(after());
        }
    }
    drop(rx);
    Ok((pid, tx))
}

/// Releases a child made by [`fork_waiting`] and returns its exit status.
fn release(pid: i32, tx: OwnedFd) -> i32 {
    let _ = write_fd(&tx, b"x");
    drop(tx);
    let mut status = 0;
    // SAFETY: waiting for our own child into a valid int.
    unsafe { libc::waitpid(pid, &raw mut status, 0) };
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    }
}

fn tracer_of(pid: i32) -> Option<i32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
}

fn ptrace_attach(pid: i32) -> Result<(), i32> {
    // SAFETY: PTRACE_ATTACH takes a pid and ignores the pointers.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_ATTACH,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    } as libc::c_int)
    .map(drop)
}

fn ptrace_child_in_the_sandbox(_: &Places) -> Result<(), i32> {
    let (pid, tx) = fork_waiting(|| {}, || 0)?;
    let attached = ptrace_attach(pid);
    if attached.is_ok() {
        let mut status = 0;
        // SAFETY: waiting for the attach stop of our own child.
        unsafe { libc::waitpid(pid, &raw mut status, 0) };
        // TracerPid names the tracing thread, and libtest runs tests on one.
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let traced = tracer_of(pid) == Some(me);
        // SAFETY: detaching our stopped tracee; pointers ignored.
        unsafe {
            libc::ptrace(
                libc::PTRACE_DETACH,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
        release(pid, tx);
        return if traced { Ok(()) } else { Err(libc::ESRCH) };
    }
    release(pid, tx);
    attached
}

fn write_mem(pid: i32, addr: usize) -> Result<(), i32> {
    let fd = open_fd(Path::new(&format!("/proc/{pid}/mem")), libc::O_RDWR)?;
    let offset = libc::off_t::try_from(addr).map_err(|_| libc::EOVERFLOW)?;
    // SAFETY: MARK is valid for its length; the kernel writes the other
    // process's memory, not ours.
    let n = unsafe { libc::pwrite(fd.as_raw_fd(), MARK.as_ptr().cast(), MARK.len(), offset) };
    if n < 0 { Err(errno()) } else { Ok(()) }
}

fn vm_write(pid: i32, addr: usize) -> Result<(), i32> {
    let local = libc::iovec {
        iov_base: MARK.as_ptr().cast_mut().cast(),
        iov_len: MARK.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: MARK.len(),
    };
    // SAFETY: the local iovec points at MARK, valid for its length and
    // only read; the remote one is written in the other process.
    let n = unsafe { libc::process_vm_writev(pid, &raw const local, 1, &raw const remote, 1, 0) };
    if n < 0 { Err(errno()) } else { Ok(()) }
}

/// Forks a child and writes [`MARK`] into its copy of [`BUF`] with
/// `write`; the child checks that it arrived.
fn mem_of_a_child(write: fn(i32, usize) -> Result<(), i32>) -> Result<(), i32> {
    let marked = || {
        i32::from(
            !BUF.iter()
                .zip(MARK)
                .all(|(b, m)| b.load(Ordering::Relaxed) == *m),
        )
    };
    let (pid, tx) = fork_waiting(|| {}, marked)?;
    let written = write(pid, BUF.as_ptr() as usize);
    let status = release(pid, tx);
    written?;
    if status == 0 {
        Ok(())
    } else {
        Err(libc::ESRCH)
    }
}

fn cwd_of_a_child_in_the_sandbox(p: &Places) -> Result<(), i32> {
    let dir = c(&p.a);
    let (pid, tx) = fork_waiting(
        // SAFETY: chdir to a valid C string, async-signal-safe.
        move || unsafe {
            libc::chdir(dir.as_ptr());
        },
        || 0,
    )?;
    // Give the child time to chdir before its cwd is followed.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let result = open_write(
        &PathBuf::from(format!("/proc/{pid}/cwd/via-cwd")),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
    );
    release(pid, tx);
    result
}

fn self_cwd(dir: &Path) -> Result<(), i32> {
    io(std::env::set_current_dir(dir))?;
    open_write(
        Path::new("/proc/self/cwd/via-cwd"),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
    )
}

fn reopen_for_writing(path: &Path) -> Result<(), i32> {
    let ro = open_fd(path, libc::O_RDONLY)?;
    open_write(
        &PathBuf::from(format!("/proc/self/fd/{}", ro.as_raw_fd())),
        libc::O_WRONLY,
    )
}

fn setxattr(path: &Path) -> Result<(), i32> {
    let name = CString::new("user.strument").expect("name");
    // SAFETY: valid C strings and a buffer valid for its length.
    check(unsafe {
        libc::setxattr(
            c(path).as_ptr(),
            name.as_ptr(),
            b"landed".as_ptr().cast(),
            6,
            0,
        )
    })
    .map(drop)
}

fn has_xattr(path: &Path) -> bool {
    let name = CString::new("user.strument").expect("name");
    let mut buf = [0u8; 16];
    // SAFETY: valid C strings and a buffer valid for its length.
    let n = unsafe {
        libc::getxattr(
            c(path).as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    n == 6 && &buf[..6] == b"landed"
}

/// Where the parent installs a descriptor it opened before the sandbox.
const INHERITED_FD: libc::c_int = 100;

/// Writes through the descriptor the parent opened for writing before the
/// sandbox and installed as [`INHERITED_FD`].
fn write_inherited(_: &Places) -> Result<(), i32> {
    // SAFETY: the descriptor was installed by the parent for this child only.
    let fd = unsafe { OwnedFd::from_raw_fd(INHERITED_FD) };
    write_fd(&fd, b"landed")
}

// ---------------------------------------------------------------------------
// Setups and checks, run unconfined.

fn file(path: &Path) {
    fs::write(path, ORIGINAL).expect("write a fixture file");
}
fn content(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}
fn starts_landed(path: &Path) -> bool {
    content(path).starts_with("landed")
}
fn emptied(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.len() == 0)
}
fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}
fn moved(from: &Path, to: &Path) -> bool {
    !exists(from) && content(to) == ORIGINAL
}
fn swapped(x: &Path, y: &Path) -> bool {
    content(x) == "second" && content(y) == ORIGINAL
}
fn two_files(x: &Path, y: &Path) {
    file(x);
    fs::write(y, "second").expect("write a fixture file");
}
fn nothing(_: &Places) {}

/// The route table. Each row is one way of writing; the two cases say
/// where it must land and where it must be refused.
#[allow(clippy::too_many_lines)]
fn routes() -> Vec<Route> {
    macro_rules! case {
        ($what:expr, $setup:expr, $attempt:expr, $landed:expr, $explain:expr) => {
            Case {
                what: $what,
                sandboxed: true,
                setup: $setup,
                attempt: $attempt,
                landed: Some($landed),
                explain: Some($explain),
            }
        };
    }
    macro_rules! route {
        ($name:expr, $granted:expr, $refused:expr) => {
            Route {
                name: $name,
                granted: $granted,
                refused: $refused,
                gap: false,
                needs_root: false,
            }
        };
    }
    vec![
        route!(
            "`open(O_WRONLY)` an existing file",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| open_write(&p.a.join("f"), libc::O_WRONLY),
                |p| starts_landed(&p.a.join("f")),
                |p| vec![p.a.join("f")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| open_write(&p.out.join("f"), libc::O_WRONLY),
                |p| starts_landed(&p.out.join("f")),
                |p| vec![p.out.join("f")]
            )
        ),
        route!(
            "`open(O_RDWR)` an existing file",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| open_write(&p.a.join("f"), libc::O_RDWR),
                |p| starts_landed(&p.a.join("f")),
                |p| vec![p.a.join("f")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| open_write(&p.out.join("f"), libc::O_RDWR),
                |p| starts_landed(&p.out.join("f")),
                |p| vec![p.out.join("f")]
            )
        ),
        route!(
            "`open(O_CREAT)` a new file",
            case!(
                "in the project",
                nothing,
                |p| open_write(
                    &p.a.join("new"),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL
                ),
                |p| exists(&p.a.join("new")),
                |p| vec![p.a.join("new")]
            ),
            case!(
                "outside the roots",
                nothing,
                |p| open_write(
                    &p.out.join("new"),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL
                ),
                |p| exists(&p.out.join("new")),
                |p| vec![p.out.join("new")]
            )
        ),
        route!(
            "`open(O_WRONLY|O_TRUNC)`",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| open_fd(&p.a.join("f"), libc::O_WRONLY | libc::O_TRUNC).map(drop),
                |p| emptied(&p.a.join("f")),
                |p| vec![p.a.join("f")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| open_fd(&p.out.join("f"), libc::O_WRONLY | libc::O_TRUNC).map(drop),
                |p| emptied(&p.out.join("f")),
                |p| vec![p.out.join("f")]
            )
        ),
        route!(
            "`open(O_RDONLY|O_TRUNC)`: truncation by a read-only open",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| open_fd(&p.a.join("f"), libc::O_RDONLY | libc::O_TRUNC).map(drop),
                |p| emptied(&p.a.join("f")),
                |p| vec![p.a.join("f")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| open_fd(&p.out.join("f"), libc::O_RDONLY | libc::O_TRUNC).map(drop),
                |p| emptied(&p.out.join("f")),
                |p| vec![p.out.join("f")]
            )
        ),
        route!(
            "`open(O_APPEND)`",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| open_write(&p.a.join("f"), libc::O_WRONLY | libc::O_APPEND),
                |p| content(&p.a.join("f")) == "originallanded",
                |p| vec![p.a.join("f")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| open_write(&p.out.join("f"), libc::O_WRONLY | libc::O_APPEND),
                |p| content(&p.out.join("f")) != ORIGINAL,
                |p| vec![p.out.join("f")]
            )
        ),
        route!(
            "`open(O_TMPFILE)` then `linkat` to name it",
            case!(
                "in the project",
                nothing,
                |p| tmpfile_linked(&p.a, &p.a.join("named")),
                |p| starts_landed(&p.a.join("named")),
                |p| vec![p.a.join("named")]
            ),
            case!(
                "outside the roots",
                nothing,
                |p| tmpfile_linked(&p.out, &p.out.join("named")),
                |p| exists(&p.out.join("named")),
                |p| vec![p.out.join("named")]
            )
        ),
        route!(
            "`O_TMPFILE` in a root, `linkat` into another place",
            case!(
                "into the second root",
                nothing,
                |p| tmpfile_linked(&p.a, &p.b.join("named")),
                |p| starts_landed(&p.b.join("named")),
                |p| vec![p.a.clone(), p.b.join("named")]
            ),
            case!(
                "into a directory outside the roots",
                nothing,
                |p| tmpfile_linked(&p.a, &p.out.join("named")),
                |p| exists(&p.out.join("named")),
                |p| vec![p.a.clone(), p.out.join("named")]
            )
        ),
        route!(
            "`truncate(2)` by path",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| truncate(&p.a.join("f")),
                |p| emptied(&p.a.join("f")),
                |p| vec![p.a.join("f")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| truncate(&p.out.join("f")),
                |p| emptied(&p.out.join("f")),
                |p| vec![p.out.join("f")]
            )
        ),
        route!(
            "`unlink` a file",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| io(fs::remove_file(p.a.join("f"))),
                |p| !exists(&p.a.join("f")),
                |p| vec![p.a.join("f")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| io(fs::remove_file(p.out.join("f"))),
                |p| !exists(&p.out.join("f")),
                |p| vec![p.out.join("f")]
            )
        ),
        route!(
            "`rmdir` an empty directory",
            case!(
                "in the project",
                |p| fs::create_dir(p.a.join("d")).expect("mkdir"),
                |p| io(fs::remove_dir(p.a.join("d"))),
                |p| !exists(&p.a.join("d")),
                |p| vec![p.a.join("d")]
            ),
            case!(
                "outside the roots",
                |p| fs::create_dir(p.out.join("d")).expect("mkdir"),
                |p| io(fs::remove_dir(p.out.join("d"))),
                |p| !exists(&p.out.join("d")),
                |p| vec![p.out.join("d")]
            )
        ),
        route!(
            "`mkdir`",
            case!(
                "in the project",
                nothing,
                |p| io(fs::create_dir(p.a.join("d"))),
                |p| exists(&p.a.join("d")),
                |p| vec![p.a.join("d")]
            ),
            case!(
                "outside the roots",
                nothing,
                |p| io(fs::create_dir(p.out.join("d"))),
                |p| exists(&p.out.join("d")),
                |p| vec![p.out.join("d")]
            )
        ),
        route!(
            "`mknod` a fifo",
            case!(
                "in the project",
                nothing,
                |p| mknod(&p.a.join("fifo"), libc::S_IFIFO, 0),
                |p| fs::symlink_metadata(p.a.join("fifo")).is_ok_and(|m| m.file_type().is_fifo()),
                |p| vec![p.a.join("fifo")]
            ),
            case!(
                "outside the roots",
                nothing,
                |p| mknod(&p.out.join("fifo"), libc::S_IFIFO, 0),
                |p| exists(&p.out.join("fifo")),
                |p| vec![p.out.join("fifo")]
            )
        ),
        route!(
            "`mknod` a socket",
            case!(
                "in the project",
                nothing,
                |p| mknod(&p.a.join("sock"), libc::S_IFSOCK, 0),
                |p| fs::symlink_metadata(p.a.join("sock")).is_ok_and(|m| m.file_type().is_socket()),
                |p| vec![p.a.join("sock")]
            ),
            case!(
                "outside the roots",
                nothing,
                |p| mknod(&p.out.join("sock"), libc::S_IFSOCK, 0),
                |p| exists(&p.out.join("sock")),
                |p| vec![p.out.join("sock")]
            )
        ),
        route!(
            "`mknod` a whiteout (char device 0:0, no CAP_MKNOD needed)",
            case!(
                "in the project",
                nothing,
                |p| mknod(&p.a.join("wh"), libc::S_IFCHR, 0),
                |p| fs::symlink_metadata(p.a.join("wh"))
                    .is_ok_and(|m| m.file_type().is_char_device()),
                |p| vec![p.a.join("wh")]
            ),
            case!(
                "outside the roots",
                nothing,
                |p| mknod(&p.out.join("wh"), libc::S_IFCHR, 0),
                |p| exists(&p.out.join("wh")),
                |p| vec![p.out.join("wh")]
            )
        ),
        Route {
            needs_root: true,
            ..route!(
                "`mknod` a char device (1:3, CAP_MKNOD)",
                case!(
                    "in the project",
                    nothing,
                    |p| mknod(&p.a.join("null"), libc::S_IFCHR, libc::makedev(1, 3)),
                    |p| fs::symlink_metadata(p.a.join("null"))
                        .is_ok_and(|m| m.file_type().is_char_device()),
                    |p| vec![p.a.join("null")]
                ),
                case!(
                    "outside the roots",
                    nothing,
                    |p| mknod(&p.out.join("null"), libc::S_IFCHR, libc::makedev(1, 3)),
                    |p| exists(&p.out.join("null")),
                    |p| vec![p.out.join("null")]
                )
            )
        },
        Route {
            needs_root: true,
            ..route!(
                "`mknod` a block device (7:0, CAP_MKNOD)",
                case!(
                    "in the project",
                    nothing,
                    |p| mknod(&p.a.join("loop"), libc::S_IFBLK, libc::makedev(7, 0)),
                    |p| fs::symlink_metadata(p.a.join("loop"))
                        .is_ok_and(|m| m.file_type().is_block_device()),
                    |p| vec![p.a.join("loop")]
                ),
                case!(
                    "outside the roots",
                    nothing,
                    |p| mknod(&p.out.join("loop"), libc::S_IFBLK, libc::makedev(7, 0)),
                    |p| exists(&p.out.join("loop")),
                    |p| vec![p.out.join("loop")]
                )
            )
        },
        route!(
            "`symlink`",
            case!(
                "in the project",
                nothing,
                |p| io(symlink("/etc/passwd", p.a.join("link"))),
                |p| exists(&p.a.join("link")),
                |p| vec![p.a.join("link")]
            ),
            case!(
                "outside the roots",
                nothing,
                |p| io(symlink("/etc/passwd", p.out.join("link"))),
                |p| exists(&p.out.join("link")),
                |p| vec![p.out.join("link")]
            )
        ),
        route!(
            "`link` (a hard link)",
            case!(
                "within the project",
                |p| file(&p.a.join("f")),
                |p| io(fs::hard_link(p.a.join("f"), p.a.join("hl"))),
                |p| exists(&p.a.join("hl")),
                |p| vec![p.a.join("f"), p.a.join("hl")]
            ),
            case!(
                "within a directory outside",
                |p| file(&p.out.join("f")),
                |p| io(fs::hard_link(p.out.join("f"), p.out.join("hl"))),
                |p| exists(&p.out.join("hl")),
                |p| vec![p.out.join("f"), p.out.join("hl")]
            )
        ),
        route!(
            "a hard link in the project to a file outside",
            case!(
                "made before the sandbox, written through: lands on the outside inode",
                |p| {
                    file(&p.out.join("f"));
                    fs::hard_link(p.out.join("f"), p.a.join("hl")).expect("link")
                },
                |p| open_write(&p.a.join("hl"), libc::O_WRONLY),
                |p| starts_landed(&p.out.join("f")),
                |p| vec![p.a.join("hl")]
            ),
            case!(
                "made from inside the sandbox",
                |p| file(&p.out.join("f")),
                |p| io(fs::hard_link(p.out.join("f"), p.a.join("hl"))),
                |p| exists(&p.a.join("hl")),
                |p| vec![p.out.join("f"), p.a.join("hl")]
            )
        ),
        route!(
            "a hard link outside to a file in the project",
            case!(
                "the file's own name in the project",
                |p| {
                    file(&p.a.join("f"));
                    fs::hard_link(p.a.join("f"), p.out.join("hl")).expect("link")
                },
                |p| open_write(&p.a.join("f"), libc::O_WRONLY),
                |p| starts_landed(&p.a.join("f")),
                |p| vec![p.a.join("f")]
            ),
            case!(
                "written through the outside name",
                |p| {
                    file(&p.a.join("f"));
                    fs::hard_link(p.a.join("f"), p.out.join("hl")).expect("link")
                },
                |p| open_write(&p.out.join("hl"), libc::O_WRONLY),
                |p| starts_landed(&p.a.join("f")),
                |p| vec![p.out.join("hl")]
            )
        ),
        route!(
            "a symlink in the project, written through",
            case!(
                "pointing into the second root",
                |p| {
                    file(&p.b.join("f"));
                    symlink(p.b.join("f"), p.a.join("link")).expect("symlink")
                },
                |p| open_write(&p.a.join("link"), libc::O_WRONLY),
                |p| starts_landed(&p.b.join("f")),
                |p| vec![p.a.join("link")]
            ),
            case!(
                "pointing outside the roots",
                |p| {
                    file(&p.out.join("f"));
                    symlink(p.out.join("f"), p.a.join("link")).expect("symlink")
                },
                |p| open_write(&p.a.join("link"), libc::O_WRONLY),
                |p| starts_landed(&p.out.join("f")),
                |p| vec![p.a.join("link")]
            )
        ),
        route!(
            "a dangling symlink in the project, `O_CREAT` through it",
            case!(
                "pointing into the second root",
                |p| symlink(p.b.join("new"), p.a.join("link")).expect("symlink"),
                |p| open_write(&p.a.join("link"), libc::O_WRONLY | libc::O_CREAT),
                |p| exists(&p.b.join("new")),
                |p| vec![p.a.join("link")]
            ),
            case!(
                "pointing outside the roots",
                |p| symlink(p.out.join("new"), p.a.join("link")).expect("symlink"),
                |p| open_write(&p.a.join("link"), libc::O_WRONLY | libc::O_CREAT),
                |p| exists(&p.out.join("new")),
                |p| vec![p.a.join("link")]
            )
        ),
        route!(
            "`..` from a root",
            case!(
                "`a/sub/../new`, staying inside",
                |p| fs::create_dir(p.a.join("sub")).expect("mkdir"),
                |p| open_write(&p.a.join("sub/../new"), libc::O_WRONLY | libc::O_CREAT),
                |p| exists(&p.a.join("new")),
                |p| vec![p.a.join("sub/../new")]
            ),
            case!(
                "`<project>/../new`, climbing out",
                nothing,
                |p| open_write(
                    &p.a.join("../..").join(format!("{}-dotdot", p.label)),
                    libc::O_WRONLY | libc::O_CREAT
                ),
                |p| exists(&p.a.join("../..").join(format!("{}-dotdot", p.label))),
                |p| vec![p.a.join("../..").join(format!("{}-dotdot", p.label))]
            )
        ),
        route!(
            "`/proc/self/fd/N` of a read-only descriptor, re-opened for writing",
            case!(
                "a file in the project",
                |p| file(&p.a.join("f")),
                |p| reopen_for_writing(&p.a.join("f")),
                |p| starts_landed(&p.a.join("f")),
                |p| vec![p.a.join("f")]
            ),
            case!(
                "a file outside the roots",
                |p| file(&p.out.join("f")),
                |p| reopen_for_writing(&p.out.join("f")),
                |p| starts_landed(&p.out.join("f")),
                |p| vec![p.out.join("f")]
            )
        ),
        route!(
            "`/proc/self/cwd`",
            case!(
                "cwd in the project",
                nothing,
                |p| self_cwd(&p.a),
                |p| exists(&p.a.join("via-cwd")),
                |p| vec![p.a.join("via-cwd")]
            ),
            case!(
                "cwd outside the roots",
                nothing,
                |p| self_cwd(&p.out),
                |p| exists(&p.out.join("via-cwd")),
                |p| vec![p.out.join("via-cwd")]
            )
        ),
        route!(
            "`/proc/<pid>/cwd` of another process",
            case!(
                "a child in the same sandbox, cwd in the project",
                nothing,
                cwd_of_a_child_in_the_sandbox,
                |p| exists(&p.a.join("via-cwd")),
                |p| vec![p.a.join("via-cwd")]
            ),
            case!(
                "an unconfined process of the same user, cwd outside",
                nothing,
                |p| open_write(
                    &PathBuf::from(format!("/proc/{}/cwd/{}", p.target_pid, p.label)),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL
                ),
                |p| exists(&p.in_target_cwd()),
                |p| vec![PathBuf::from(format!(
                    "/proc/{}/cwd/{}",
                    p.target_pid, p.label
                ))]
            )
        ),
        route!(
            "`rename` within one directory",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| io(fs::rename(p.a.join("f"), p.a.join("g"))),
                |p| moved(&p.a.join("f"), &p.a.join("g")),
                |p| vec![p.a.join("f"), p.a.join("g")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| io(fs::rename(p.out.join("f"), p.out.join("g"))),
                |p| moved(&p.out.join("f"), &p.out.join("g")),
                |p| vec![p.out.join("f"), p.out.join("g")]
            )
        ),
        route!(
            "`rename` between directories",
            case!(
                "between the two roots",
                |p| file(&p.a.join("f")),
                |p| io(fs::rename(p.a.join("f"), p.b.join("g"))),
                |p| moved(&p.a.join("f"), &p.b.join("g")),
                |p| vec![p.a.join("f"), p.b.join("g")]
            ),
            case!(
                "between two directories outside",
                |p| file(&p.out.join("f")),
                |p| io(fs::rename(p.out.join("f"), p.out2.join("g"))),
                |p| moved(&p.out.join("f"), &p.out2.join("g")),
                |p| vec![p.out.join("f"), p.out2.join("g")]
            )
        ),
        route!(
            "`rename` into a root",
            case!(
                "from the second root",
                |p| file(&p.b.join("f")),
                |p| io(fs::rename(p.b.join("f"), p.a.join("g"))),
                |p| moved(&p.b.join("f"), &p.a.join("g")),
                |p| vec![p.b.join("f"), p.a.join("g")]
            ),
            case!(
                "from outside the roots",
                |p| file(&p.out.join("f")),
                |p| io(fs::rename(p.out.join("f"), p.a.join("g"))),
                |p| moved(&p.out.join("f"), &p.a.join("g")),
                |p| vec![p.out.join("f"), p.a.join("g")]
            )
        ),
        route!(
            "`rename` out of a root",
            case!(
                "to the second root",
                |p| file(&p.a.join("f")),
                |p| io(fs::rename(p.a.join("f"), p.b.join("g"))),
                |p| moved(&p.a.join("f"), &p.b.join("g")),
                |p| vec![p.a.join("f"), p.b.join("g")]
            ),
            case!(
                "to outside the roots",
                |p| file(&p.a.join("f")),
                |p| io(fs::rename(p.a.join("f"), p.out.join("g"))),
                |p| moved(&p.a.join("f"), &p.out.join("g")),
                |p| vec![p.a.join("f"), p.out.join("g")]
            )
        ),
        route!(
            "`rename` a directory out of a root",
            case!(
                "to the second root",
                |p| {
                    fs::create_dir(p.a.join("d")).expect("mkdir");
                    file(&p.a.join("d/f"))
                },
                |p| io(fs::rename(p.a.join("d"), p.b.join("d"))),
                |p| moved(&p.a.join("d/f"), &p.b.join("d/f")),
                |p| vec![p.a.join("d"), p.b.join("d")]
            ),
            case!(
                "to outside the roots",
                |p| {
                    fs::create_dir(p.a.join("d")).expect("mkdir");
                    file(&p.a.join("d/f"))
                },
                |p| io(fs::rename(p.a.join("d"), p.out.join("d"))),
                |p| moved(&p.a.join("d/f"), &p.out.join("d/f")),
                |p| vec![p.a.join("d"), p.out.join("d")]
            )
        ),
        route!(
            "`renameat2(RENAME_NOREPLACE)` within one directory",
            case!(
                "in the project",
                |p| file(&p.a.join("f")),
                |p| renameat2(&p.a.join("f"), &p.a.join("g"), libc::RENAME_NOREPLACE),
                |p| moved(&p.a.join("f"), &p.a.join("g")),
                |p| vec![p.a.join("f"), p.a.join("g")]
            ),
            case!(
                "outside the roots",
                |p| file(&p.out.join("f")),
                |p| renameat2(&p.out.join("f"), &p.out.join("g"), libc::RENAME_NOREPLACE),
                |p| moved(&p.out.join("f"), &p.out.join("g")),
                |p| vec![p.out.join("f"), p.out.join("g")]
            )
        ),
        route!(
            "`renameat2(RENAME_NOREPLACE)` between directories",
            case!(
                "between the two roots",
                |p| file(&p.a.join("f")),
                |p| renameat2(&p.a.join("f"), &p.b.join("g"), libc::RENAME_NOREPLACE),
                |p| moved(&p.a.join("f"), &p.b.join("g")),
                |p| vec![p.a.join("f"), p.b.join("g")]
            ),
            case!(
                "between two directories outside",
                |p| file(&p.out.join("f")),
                |p| renameat2(&p.out.join("f"), &p.out2.join("g"), libc::RENAME_NOREPLACE),
                |p| moved(&p.out.join("f"), &p.out2.join("g")),
                |p| vec![p.out.join("f"), p.out2.join("g")]
            )
        ),
        route!(
            "`renameat2(RENAME_NOREPLACE)` into a root",
            case!(
                "from the second root",
                |p| file(&p.b.join("f")),
                |p| renameat2(&p.b.join("f"), &p.a.join("g"), libc::RENAME_NOREPLACE),
                |p| moved(&p.b.join("f"), &p.a.join("g")),
                |p| vec![p.b.join("f"), p.a.join("g")]
            ),
            case!(
                "from outside the roots",
                |p| file(&p.out.join("f")),
                |p| renameat2(&p.out.join("f"), &p.a.join("g"), libc::RENAME_NOREPLACE),
                |p| moved(&p.out.join("f"), &p.a.join("g")),
                |p| vec![p.out.join("f"), p.a.join("g")]
            )
        ),
        route!(
            "`renameat2(RENAME_NOREPLACE)` out of a root",
            case!(
                "to the second root",
                |p| file(&p.a.join("f")),
                |p| renameat2(&p.a.join("f"), &p.b.join("g"), libc::RENAME_NOREPLACE),
                |p| moved(&p.a.join("f"), &p.b.join("g")),
                |p| vec![p.a.join("f"), p.b.join("g")]
            ),
            case!(
                "to outside the roots",
                |p| file(&p.a.join("f")),
                |p| renameat2(&p.a.join("f"), &p.out.join("g"), libc::RENAME_NOREPLACE),
                |p| moved(&p.a.join("f"), &p.out.join("g")),
                |p| vec![p.a.join("f"), p.out.join("g")]
            )
        ),
        route!(
            "`renameat2(RENAME_EXCHANGE)` within one directory",
            case!(
                "in the project",
                |p| two_files(&p.a.join("f"), &p.a.join("g")),
                |p| renameat2(&p.a.join("f"), &p.a.join("g"), libc::RENAME_EXCHANGE),
                |p| swapped(&p.a.join("f"), &p.a.join("g")),
                |p| vec![p.a.join("f"), p.a.join("g")]
            ),
            case!(
                "outside the roots",
                |p| two_files(&p.out.join("f"), &p.out.join("g")),
                |p| renameat2(&p.out.join("f"), &p.out.join("g"), libc::RENAME_EXCHANGE),
                |p| swapped(&p.out.join("f"), &p.out.join("g")),
                |p| vec![p.out.join("f"), p.out.join("g")]
            )
        ),
        route!(
            "`renameat2(RENAME_EXCHANGE)` between directories",
            case!(
                "between the two roots",
                |p| two_files(&p.a.join("f"), &p.b.join("g")),
                |p| renameat2(&p.a.join("f"), &p.b.join("g"), libc::RENAME_EXCHANGE),
                |p| swapped(&p.a.join("f"), &p.b.join("g")),
                |p| vec![p.a.join("f"), p.b.join("g")]
            ),
            case!(
                "between two directories outside",
                |p| two_files(&p.out.join("f"), &p.out2.join("g")),
                |p| renameat2(&p.out.join("f"), &p.out2.join("g"), libc::RENAME_EXCHANGE),
                |p| swapped(&p.out.join("f"), &p.out2.join("g")),
                |p| vec![p.out.join("f"), p.out2.join("g")]
            )
        ),
        route!(
            "`renameat2(RENAME_EXCHANGE)` across a root's edge",
            case!(
                "the project with the second root",
                |p| two_files(&p.a.join("f"), &p.b.join("g")),
                |p| renameat2(&p.a.join("f"), &p.b.join("g"), libc::RENAME_EXCHANGE),
                |p| swapped(&p.a.join("f"), &p.b.join("g")),
                |p| vec![p.a.join("f"), p.b.join("g")]
            ),
            case!(
                "the project with outside the roots",
                |p| two_files(&p.a.join("f"), &p.out.join("g")),
                |p| renameat2(&p.a.join("f"), &p.out.join("g"), libc::RENAME_EXCHANGE),
                |p| swapped(&p.a.join("f"), &p.out.join("g")),
                |p| vec![p.a.join("f"), p.out.join("g")]
            )
        ),
        route!(
            "`bind` a unix socket",
            case!(
                "in the project",
                nothing,
                |p| io(UnixListener::bind(p.a.join("sock")).map(drop)),
                |p| exists(&p.a.join("sock")),
                |p| vec![p.a.join("sock")]
            ),
            case!(
                "outside the roots",
                nothing,
                |p| io(UnixListener::bind(p.out.join("sock")).map(drop)),
                |p| exists(&p.out.join("sock")),
                |p| vec![p.out.join("sock")]
            )
        ),
        Route {
            name: "`mount` a tmpfs",
            granted: Case {
                what: "unconfined control, own mount namespace: mounts",
                sandboxed: false,
                setup: |p| fs::create_dir(p.a.join("mnt")).expect("mkdir"),
                attempt: |p| {
                    mount_in_own_namespace(Path::new("tmpfs"), &p.a.join("mnt"), "tmpfs", 0, None)
                },
                landed: None,
                explain: None,
            },
            refused: Case {
                what: "sandboxed, over a directory inside the project",
                sandboxed: true,
                setup: |p| fs::create_dir(p.a.join("mnt")).expect("mkdir"),
                attempt: |p| {
                    mount_in_own_namespace(Path::new("tmpfs"), &p.a.join("mnt"), "tmpfs", 0, None)
                },
                landed: None,
                explain: None,
            },
            gap: false,
            needs_root: true,
        },
        Route {
            name: "`mount --bind` a directory outside into the project",
            granted: Case {
                what: "unconfined control: writes through it land outside",
                sandboxed: false,
                setup: |p| fs::create_dir(p.a.join("mnt")).expect("mkdir"),
                attempt: |p| {
                    mount_in_own_namespace(
                        &p.out,
                        &p.a.join("mnt"),
                        "none",
                        libc::MS_BIND,
                        Some(&p.a.join("mnt/new")),
                    )
                },
                landed: Some(|p| exists(&p.out.join("new"))),
                explain: None,
            },
            refused: Case {
                what: "sandboxed",
                sandboxed: true,
                setup: |p| fs::create_dir(p.a.join("mnt")).expect("mkdir"),
                attempt: |p| {
                    mount_in_own_namespace(
                        &p.out,
                        &p.a.join("mnt"),
                        "none",
                        libc::MS_BIND,
                        Some(&p.a.join("mnt/new")),
                    )
                },
                landed: Some(|p| exists(&p.out.join("new"))),
                explain: None,
            },
            gap: false,
            needs_root: true,
        },
        Route {
            name: "`ptrace(PTRACE_ATTACH)`",
            granted: Case {
                what: "a child in the same sandbox",
                sandboxed: true,
                setup: nothing,
                attempt: ptrace_child_in_the_sandbox,
                landed: None,
                explain: None,
            },
            refused: Case {
                what: "an unconfined process of the same user",
                sandboxed: true,
                setup: nothing,
                attempt: |p| ptrace_attach(p.target_pid),
                landed: Some(|p| tracer_of(p.target_pid).is_some_and(|t| t != 0)),
                explain: None,
            },
            gap: false,
            needs_root: false,
        },
        Route {
            name: "write `/proc/<pid>/mem`",
            granted: Case {
                what: "unconfined control, of a child: lands (in the sandbox even its own children's \
                       mem file is refused: `/proc` is no root)",
                sandboxed: false,
                setup: nothing,
                attempt: |_| mem_of_a_child(write_mem),
                landed: None,
                explain: None,
            },
            refused: Case {
                what: "sandboxed, of an unconfined process of the same user",
                sandboxed: true,
                setup: nothing,
                attempt: |p| write_mem(p.target_pid, p.target_addr),
                landed: Some(|p| target_memory(p) == *MARK),
                explain: None,
            },
            gap: false,
            needs_root: false,
        },
        Route {
            name: "`process_vm_writev` (another process's memory)",
            granted: Case {
                what: "of a child in the same sandbox",
                sandboxed: true,
                setup: nothing,
                attempt: |_| mem_of_a_child(vm_write),
                landed: None,
                explain: None,
            },
            refused: Case {
                what: "of an unconfined process of the same user",
                sandboxed: true,
                setup: nothing,
                attempt: |p| vm_write(p.target_pid, p.target_addr),
                landed: Some(|p| target_memory(p) == *MARK),
                explain: None,
            },
            gap: false,
            needs_root: false,
        },
        Route {
            name: "a descriptor opened for writing before the sandbox (inherited)",
            granted: Case {
                what: "of a file in the project",
                sandboxed: true,
                setup: |p| file(&p.a.join("f")),
                attempt: write_inherited,
                landed: Some(|p| starts_landed(&p.a.join("f"))),
                explain: None,
            },
            refused: Case {
                what: "of a file outside: lands (Landlock checks at open, not at write)",
                sandboxed: true,
                setup: |p| file(&p.out.join("f")),
                attempt: write_inherited,
                landed: Some(|p| starts_landed(&p.out.join("f"))),
                explain: None,
            },
            gap: true,
            needs_root: false,
        },
        Route {
            gap: true,
            ..route!(
                "`chmod`",
                Case {
                    explain: None,
                    ..case!(
                        "in the project",
                        |p| file(&p.a.join("f")),
                        |p| io(fs::set_permissions(
                            p.a.join("f"),
                            fs::Permissions::from_mode(0o600)
                        )),
                        |p| fs::metadata(p.a.join("f")).is_ok_and(|m| m.mode() & 0o777 == 0o600),
                        |p| vec![p.a.join("f")]
                    )
                },
                Case {
                    explain: None,
                    ..case!(
                        "outside the roots: lands (metadata is not confined)",
                        |p| file(&p.out.join("f")),
                        |p| io(fs::set_permissions(
                            p.out.join("f"),
                            fs::Permissions::from_mode(0o600)
                        )),
                        |p| fs::metadata(p.out.join("f")).is_ok_and(|m| m.mode() & 0o777 == 0o600),
                        |p| vec![p.out.join("f")]
                    )
                }
            )
        },
        Route {
            gap: true,
            ..route!(
                "`utimensat` (timestamps)",
                Case {
                    explain: None,
                    ..case!(
                        "in the project",
                        |p| file(&p.a.join("f")),
                        |p| set_mtime(&p.a.join("f")),
                        |p| fs::metadata(p.a.join("f")).is_ok_and(|m| m.mtime() == 12345),
                        |p| vec![p.a.join("f")]
                    )
                },
                Case {
                    explain: None,
                    ..case!(
                        "outside the roots: lands (metadata is not confined)",
                        |p| file(&p.out.join("f")),
                        |p| set_mtime(&p.out.join("f")),
                        |p| fs::metadata(p.out.join("f")).is_ok_and(|m| m.mtime() == 12345),
                        |p| vec![p.out.join("f")]
                    )
                }
            )
        },
        Route {
            gap: true,
            ..route!(
                "`setxattr` (extended attributes)",
                Case {
                    explain: None,
                    ..case!(
                        "in the project",
                        |p| file(&p.a.join("f")),
                        |p| setxattr(&p.a.join("f")),
                        |p| has_xattr(&p.a.join("f")),
                        |p| vec![p.a.join("f")]
                    )
                },
                Case {
                    explain: None,
                    ..case!(
                        "outside the roots: lands (metadata is not confined)",
                        |p| file(&p.out.join("f")),
                        |p| setxattr(&p.out.join("f")),
                        |p| has_xattr(&p.out.join("f")),
                        |p| vec![p.out.join("f")]
                    )
                }
            )
        },
    ]
}

fn set_mtime(path: &Path) -> Result<(), i32> {
    let f = fs::File::options()
        .read(true)
        .open(path)
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
    // A read-only descriptor: the timestamp change itself is the write.
    let f = f?;
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(12345);
    io(f.set_times(fs::FileTimes::new().set_modified(when)))
}

fn target_memory(p: &Places) -> [u8; 8] {
    let mut out = [0u8; 8];
    if let Ok(mut f) = fs::File::open(format!("/proc/{}/mem", p.target_pid)) {
        use std::io::Seek;
        if f.seek(std::io::SeekFrom::Start(p.target_addr as u64))
            .is_ok()
        {
            let _ = f.read_exact(&mut out);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The two re-executed roles.

/// The confined child: performs one case and prints its result.
fn drive(spec: &str) {
    let (row, which) = spec.split_once(':').expect("ROUTE is <row>:<g|r>");
    let row: usize = row.parse().expect("row number");
    let routes = routes();
    let route = &routes[row];
    let case = if which == "g" {
        &route.granted
    } else {
        &route.refused
    };
    let places = Places::from_env();
    match (case.attempt)(&places) {
        Ok(()) => println!("ROUTE-RESULT ok"),
        Err(errno) => println!("ROUTE-RESULT errno {errno}"),
    }
}

/// The unconfined process the ptrace and `/proc/<pid>` routes aim at.
fn be_target() {
    // Yama (ptrace_scope 1, most desktops) would refuse any tracer that is
    // not an ancestor on its own and hide whether Landlock refuses: allow
    // every tracer. Without Yama this fails with EINVAL, which is fine.
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
    println!(
        "ROUTE-TARGET {} {}",
        std::process::id(),
        BUF.as_ptr() as usize
    );
    std::io::stdout().flush().expect("flush");
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
}

struct Target {
    child: Child,
    pid: i32,
    addr: usize,
    cwd: PathBuf,
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_target(cwd: &Path) -> Target {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([THIS_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(TARGET, "1")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start the unconfined target");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let (pid, addr) = loop {
        let line = lines
            .next()
            .expect("the target printed its pid")
            .expect("read the target's stdout");
        // libtest prints the test's name first, on the same line.
        if let Some((_, rest)) = line.split_once("ROUTE-TARGET ") {
            let mut it = rest.split(' ').map(|n| n.parse::<usize>().expect("number"));
            break (it.next().expect("pid"), it.next().expect("address"));
        }
    };
    Target {
        child,
        pid: i32::try_from(pid).expect("pid fits"),
        addr,
        cwd: cwd.to_path_buf(),
    }
}

// ---------------------------------------------------------------------------
// The parent: runs every case, checks, compares, writes the table.

/// What happened to one case.
struct Seen {
    result: Result<(), i32>,
    landed: bool,
    /// Explain's prediction, when the route is about paths.
    predicted: Option<bool>,
}

impl Seen {
    /// The attempt succeeded and its write is there.
    fn lands(&self) -> bool {
        self.result.is_ok() && self.landed
    }
}

fn errno_name(errno: i32) -> String {
    match errno {
        libc::EACCES => "EACCES".into(),
        libc::EPERM => "EPERM".into(),
        libc::EXDEV => "EXDEV".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::EINVAL => "EINVAL".into(),
        other => format!("errno {other}"),
    }
}

fn run_case(prepared: &Prepared, row: usize, which: &str, case: &Case, p: &Places) -> Seen {
    for dir in [&p.a, &p.b, &p.out, &p.out2] {
        fs::create_dir_all(dir).expect("make the case's directories");
    }
    (case.setup)(p);
    let predicted = case.explain.map(|paths| {
        paths(p).iter().all(|path| {
            prepared
                .report()
                .explain(path)
                .unwrap_or_else(|e| panic!("explain {}: {e}", path.display()))
                .is_granted()
        })
    });
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([THIS_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROUTE, format!("{row}:{which}"))
        .current_dir(&p.out2)
        .stdin(Stdio::null());
    p.export(&mut cmd);
    let mut inherited = None;
    if std::ptr::fn_addr_eq(case.attempt, write_inherited as Attempt) {
        let path = if which == "g" {
            p.a.join("f")
        } else {
            p.out.join("f")
        };
        let f = fs::File::options()
            .write(true)
            .open(&path)
            .expect("open before the sandbox");
        let raw = f.as_raw_fd();
        inherited = Some(f);
        // SAFETY: dup2 between fork and exec is async-signal-safe; `raw`
        // stays open in the parent until the child has started.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(raw, INHERITED_FD) < 0
                    || libc::fcntl(INHERITED_FD, libc::F_SETFD, 0) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    if case.sandboxed {
        prepared.confine(&mut cmd);
    }
    let out = cmd.output().expect("run the route driver");
    drop(inherited);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = stdout
        .lines()
        .find_map(|l| l.split_once("ROUTE-RESULT ").map(|(_, r)| r))
        .map(|r| match r.strip_prefix("errno ") {
            Some(n) => Err(n.parse().expect("errno")),
            None => Ok(()),
        })
        .unwrap_or_else(|| panic!("row {row}:{which} printed no result\n{}", show(&out)));
    let landed = match case.landed {
        Some(check) => check(p),
        None => result.is_ok(),
    };
    Seen {
        result,
        landed,
        predicted,
    }
}

#[test]
fn every_write_route_lands_inside_and_is_refused_outside() {
    if let Ok(spec) = std::env::var(ROUTE) {
        drive(&spec);
        return;
    }
    if std::env::var_os(TARGET).is_some() {
        be_target();
        return;
    }
    let abi = probe().abi;
    assert!(
        abi >= 3,
        "the route suite needs Landlock ABI 3 or later; this kernel has {abi}"
    );
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;

    let h = FakeHome::new();
    let state = h.home.join("state");
    let target_cwd = h.home.join("target-cwd");
    for dir in [&state, &target_cwd] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let prepared = Policy {
        writable: vec![h.project.clone(), state.clone()],
        ..Policy::default()
    }
    .prepare()
    .expect("prepare the route policy");
    let target = start_target(&target_cwd);

    let routes = routes();
    let mut failures = Vec::new();
    let mut table = String::new();
    writeln!(
        table,
        "| # | route | granted: must land | refused: must not | kernel's errno | explain |\n\
         |---|---|---|---|---|---|"
    )
    .expect("fmt");
    for (row, route) in routes.iter().enumerate() {
        let mut seen = Vec::new();
        for (which, case) in [("g", &route.granted), ("r", &route.refused)] {
            let label = format!("r{row:02}{which}");
            let places = Places {
                a: h.project.join(&label),
                b: state.join(&label),
                out: h.home.join("outside").join(&label),
                out2: h.home.join("outside2").join(&label),
                target_pid: target.pid,
                target_addr: target.addr,
                target_cwd: target.cwd.clone(),
                label,
            };
            seen.push(run_case(&prepared, row, which, case, &places));
        }
        let (g, r) = (&seen[0], &seen[1]);
        let name = route.name;
        let excused = route.needs_root && !root;
        if !excused && !g.lands() {
            failures.push(format!(
                "{name}: the granted attempt ({}) did not land: {:?}, landed {}",
                route.granted.what, g.result, g.landed
            ));
        }
        if route.gap {
            if !r.lands() {
                failures.push(format!(
                    "{name}: the attempt Landlock is documented not to confine ({}) was refused: \
                     {:?}; update the table and doc/security.md",
                    route.refused.what, r.result
                ));
            }
        } else {
            match r.result {
                Ok(()) => failures.push(format!(
                    "{name}: the refused attempt ({}) SUCCEEDED (landed on disk: {})",
                    route.refused.what, r.landed
                )),
                Err(e) if ![libc::EACCES, libc::EPERM, libc::EXDEV].contains(&e) => {
                    failures.push(format!(
                        "{name}: refused with {}, not EACCES/EPERM/EXDEV",
                        errno_name(e)
                    ))
                }
                Err(_) => {}
            }
            if r.landed {
                failures.push(format!(
                    "{name}: the refused attempt ({}) left its write on disk",
                    route.refused.what
                ));
            }
        }
        for (case, s) in [(&route.granted, g), (&route.refused, r)] {
            if let Some(predicted) = s.predicted {
                let lands = s.lands();
                if predicted != lands && !(excused && std::ptr::eq(case, &route.granted)) {
                    failures.push(format!(
                        "{name} ({}): explain predicted {}, the kernel {}",
                        case.what,
                        if predicted { "granted" } else { "refused" },
                        if lands { "let it land" } else { "refused it" }
                    ));
                }
            }
        }
        let refused = if route.gap {
            "lands: **not confined**".to_string()
        } else {
            r.result
                .err()
                .map_or_else(|| "SUCCEEDED".into(), errno_name)
        };
        let explain = match (g.predicted, r.predicted) {
            (Some(_), Some(_)) => "agrees",
            _ => "not a path",
        };
        writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} |",
            row + 1,
            cell(name),
            cell(route.granted.what),
            cell(route.refused.what),
            refused,
            explain
        )
        .expect("fmt");
    }
    drop(target);
    h.assert_sentinels_intact();

    let generated = format!(
        "{BEGIN}\n{} write routes, {} attempts, run by `{THIS_TEST}` on Landlock ABI {abi}{}.\n\n{table}{END}\n",
        routes.len(),
        routes.len() * 2,
        if root { " as root" } else { "" },
    );
    let out_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("route-table.md");
    fs::write(&out_path, &generated).expect("write the generated table");
    assert!(
        failures.is_empty(),
        "{} route failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    compare_with_doc(&generated, abi, root);
}

/// A table cell: a `|` in a route's name would end the cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// Checks that `doc/security.md` publishes exactly the table this run
/// produced; `STRUMENT_BLESS=1` rewrites it instead.
fn compare_with_doc(generated: &str, abi: u32, root: bool) {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("doc/security.md");
    let text = fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
    let (start, end) = match (text.find(BEGIN), text.find(END)) {
        (Some(s), Some(e)) if s < e => (s, e + END.len() + 1),
        _ => panic!("{} lacks the {BEGIN} … {END} section", doc.display()),
    };
    let published = &text[start..end.min(text.len())];
    if std::env::var_os("STRUMENT_BLESS").is_some() {
        let updated = format!(
            "{}{generated}{}",
            &text[..start],
            &text[end.min(text.len())..]
        );
        fs::write(&doc, updated).expect("rewrite doc/security.md");
        return;
    }
    if published == generated {
        return;
    }
    assert!(
        published.contains("on Landlock ABI "),
        "doc/security.md's route section holds no generated table; run this test with \
         STRUMENT_BLESS=1 to write it"
    );
    let recorded_here = published.contains(&format!(
        "Landlock ABI {abi}{}.",
        if root { " as root" } else { "" }
    ));
    assert!(
        !recorded_here,
        "doc/security.md's route table differs from this run's (written to {}/route-table.md); \
         rerun with STRUMENT_BLESS=1 to regenerate it",
        env!("CARGO_TARGET_TMPDIR")
    );
    eprintln!(
        "note: doc/security.md was generated on another ABI or user; the routes were checked, the \
         published table was not compared"
    );
}

// ---------------------------------------------------------------------------
// Generated paths: the kernel and explain agree beyond the table's routes.

/// Set in the confined child of the kernel-agreement property: the path
/// to write, and how.
const PROBE: &str = "STRUMENT_PROBE_WRITE";
const PROBE_TEST: &str = "suite::routes::the_kernel_lands_exactly_the_writes_explain_grants";

/// In the confined child: one write, its errno printed.
fn probe_write(spec: &OsStr) {
    let bytes = spec.as_bytes();
    let (how, path) = bytes.split_at(1);
    let path = CString::new(path).expect("no NUL");
    let flags = match how {
        b"a" => libc::O_WRONLY | libc::O_APPEND,
        _ => libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
    };
    // SAFETY: a valid C string and integer flags.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            flags | libc::O_CLOEXEC | libc::O_NONBLOCK,
            0o600,
        )
    };
    let errno = if fd < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    } else {
        0
    };
    println!("PROBE-RESULT {errno}");
}

#[test]
fn the_kernel_lands_exactly_the_writes_explain_grants() {
    if let Some(spec) = std::env::var_os(PROBE) {
        probe_write(&spec);
        return;
    }
    let t = tree();
    let prepared = Policy {
        writable: vec![
            t.base.join("dir/sub"),
            t.base.join("file"),
            t.base.join("link_dir/sub/deep"),
        ],
        ..Policy::default()
    }
    .prepare()
    .expect("prepare: this property needs Landlock");
    let report = prepared.report().clone();
    let n = std::sync::atomic::AtomicU32::new(0);
    proptest!(config(64), |(path in near_roots(t.base.clone()))| {
        let Ok(e) = report.explain(&path) else { return Ok(()) };
        // Probe only inside the tree: a write explain got wrong must not
        // land anywhere else.
        if !e.checked.starts_with(&t.base) {
            return Ok(());
        }
        let meta = fs::metadata(&e.checked).expect("checked exists");
        // Opening a socket fails before Landlock is asked; a fifo opens
        // non-blocking, so Landlock answers first.
        if meta.file_type().is_socket() {
            return Ok(());
        }
        let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (how, target) = if e.exists && !meta.is_dir() {
            ("a", path.clone())
        } else if e.exists {
            ("c", path.join(format!("probe-{n}")))
        } else {
            ("c", e.checked.join(format!("probe-{n}")))
        };
        let mut spec = OsString::from(how);
        spec.push(target.as_os_str());
        let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
        cmd.args([PROBE_TEST, "--exact", "--nocapture", "--test-threads=1"]).env(PROBE, &spec);
        prepared.confine(&mut cmd);
        let out = cmd.output().expect("run the probe");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let errno: i32 = stdout
            .lines()
            .find_map(|l| l.split_once("PROBE-RESULT ").map(|(_, r)| r.trim().parse().expect("errno")))
            .expect("the probe printed its result");
        let _ = fs::remove_file(&target);
        let refused = errno == libc::EACCES;
        prop_assert_eq!(
            !refused,
            e.is_granted(),
            "{:?} (written as {:?}): explain says {:?}, the kernel answered errno {}",
            path, target, e.verdict, errno
        );
    });
    let probed = n.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        probed >= 16,
        "only {probed} of the generated paths were probed on the kernel"
    );
}
