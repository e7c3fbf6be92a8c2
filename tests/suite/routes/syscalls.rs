//! The raw system calls the confined side makes, each returning the errno
//! it failed with, and the small process helpers (fork, ptrace, another
//! process's memory) the process routes need.

use std::ffi::CString;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// What a write through `/proc/<pid>/mem` overwrites.
pub(super) static BUF: [AtomicU8; 8] = [const { AtomicU8::new(b'-') }; 8];
/// What such a write writes.
pub(super) const MARK: &[u8; 8] = b"landed!!";

pub(super) fn c_string(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("test paths hold no NUL")
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn or_errno(ret: libc::c_int) -> Result<libc::c_int, i32> {
    if ret < 0 { Err(errno()) } else { Ok(ret) }
}

pub(super) fn as_errno(result: std::io::Result<()>) -> Result<(), i32> {
    result.map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

pub(super) fn open_fd(path: &Path, flags: libc::c_int) -> Result<OwnedFd, i32> {
    // SAFETY: a valid C string and plain integer flags; the returned
    // descriptor is owned by the OwnedFd from here on.
    let fd =
        or_errno(unsafe { libc::open(c_string(path).as_ptr(), flags | libc::O_CLOEXEC, 0o644) })?;
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn write_fd(fd: &OwnedFd, data: &[u8]) -> Result<(), i32> {
    // SAFETY: the buffer is valid for its length for the call.
    let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
    if n < 0 { Err(errno()) } else { Ok(()) }
}

/// Opens `path` with `flags` and writes the mark `landed`.
pub(super) fn open_write(path: &Path, flags: libc::c_int) -> Result<(), i32> {
    let fd = open_fd(path, flags)?;
    write_fd(&fd, b"landed")
}

pub(super) fn mknod(path: &Path, kind: libc::mode_t, dev: libc::dev_t) -> Result<(), i32> {
    // SAFETY: a valid C string and integers.
    or_errno(unsafe { libc::mknod(c_string(path).as_ptr(), kind | 0o600, dev) }).map(drop)
}

pub(super) fn truncate(path: &Path) -> Result<(), i32> {
    // SAFETY: a valid C string and an integer length.
    or_errno(unsafe { libc::truncate(c_string(path).as_ptr(), 0) }).map(drop)
}

pub(super) fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> Result<(), i32> {
    // SAFETY: valid C strings and integers.
    or_errno(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            c_string(from).as_ptr(),
            libc::AT_FDCWD,
            c_string(to).as_ptr(),
            flags,
        )
    })
    .map(drop)
}

/// Gives an `O_TMPFILE` descriptor a name, through its `/proc/self/fd` magic link.
fn link_fd(fd: &OwnedFd, to: &Path) -> Result<(), i32> {
    let from = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    // SAFETY: valid C strings and integers.
    or_errno(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            c_string(&from).as_ptr(),
            libc::AT_FDCWD,
            c_string(to).as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })
    .map(drop)
}

pub(super) fn tmpfile_linked(dir: &Path, to: &Path) -> Result<(), i32> {
    let fd = open_fd(dir, libc::O_TMPFILE | libc::O_WRONLY)?;
    write_fd(&fd, b"landed")?;
    link_fd(&fd, to)
}

/// In a forked child (a multi-threaded process cannot unshare its mount
/// namespace, and libtest runs tests on threads): a private mount
/// namespace (a user namespace too when not root), then `mount`, then,
/// when `then_write` is given, a write there. The first mount call is
/// where a sandbox is refused; the child's exit status carries the errno.
pub(super) fn mount_in_own_namespace(
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
    let (root, source, on_c) = (c_string(Path::new("/")), c_string(source), c_string(on));
    let fstype = CString::new(fstype).expect("fstype");
    let write = then_write.map(c_string);
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
    or_errno(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both were just returned by pipe2 and are owned here.
    let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child calls only async-signal-safe functions (the
    // closures do raw syscalls and atomic loads) and leaves with _exit.
    let pid = or_errno(unsafe { libc::fork() })?;
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

pub(super) fn tracer_of(pid: i32) -> Option<i32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
}

pub(super) fn ptrace_attach(pid: i32) -> Result<(), i32> {
    // SAFETY: PTRACE_ATTACH takes a pid and ignores the pointers.
    or_errno(unsafe {
        libc::ptrace(
            libc::PTRACE_ATTACH,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    } as libc::c_int)
    .map(drop)
}

pub(super) fn ptrace_child_in_the_sandbox() -> Result<(), i32> {
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

/// A way of writing another process's memory.
pub(super) trait WritesMemory {
    /// Writes [`MARK`] at `addr` in process `pid`.
    fn write(pid: i32, addr: usize) -> Result<(), i32>;
}

/// Through `/proc/<pid>/mem`.
pub(super) struct ProcPidMem;

impl WritesMemory for ProcPidMem {
    fn write(pid: i32, addr: usize) -> Result<(), i32> {
        let fd = open_fd(Path::new(&format!("/proc/{pid}/mem")), libc::O_RDWR)?;
        let offset = libc::off_t::try_from(addr).map_err(|_| libc::EOVERFLOW)?;
        // SAFETY: MARK is valid for its length; the kernel writes the other
        // process's memory, not ours.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), MARK.as_ptr().cast(), MARK.len(), offset) };
        if n < 0 { Err(errno()) } else { Ok(()) }
    }
}

/// With `process_vm_writev`.
pub(super) struct ProcessVmWritev;

impl WritesMemory for ProcessVmWritev {
    fn write(pid: i32, addr: usize) -> Result<(), i32> {
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
        let n =
            unsafe { libc::process_vm_writev(pid, &raw const local, 1, &raw const remote, 1, 0) };
        if n < 0 { Err(errno()) } else { Ok(()) }
    }
}

/// Forks a child and writes [`MARK`] into its copy of [`BUF`] with
/// `write`; the child checks that it arrived.
pub(super) fn mem_of_a_child(write: fn(i32, usize) -> Result<(), i32>) -> Result<(), i32> {
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

pub(super) fn cwd_of_a_child_in_the_sandbox(dir: &Path) -> Result<(), i32> {
    let dir = c_string(dir);
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

/// Creates `file` through `/proc/self/cwd`, from its directory.
pub(super) fn self_cwd(file: &Path) -> Result<(), i32> {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return Err(libc::EINVAL);
    };
    as_errno(std::env::set_current_dir(dir))?;
    open_write(
        &Path::new("/proc/self/cwd").join(name),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
    )
}

pub(super) fn reopen_for_writing(path: &Path) -> Result<(), i32> {
    let ro = open_fd(path, libc::O_RDONLY)?;
    open_write(
        &PathBuf::from(format!("/proc/self/fd/{}", ro.as_raw_fd())),
        libc::O_WRONLY,
    )
}

pub(super) fn setxattr(path: &Path) -> Result<(), i32> {
    let name = CString::new("user.strument").expect("name");
    // SAFETY: valid C strings and a buffer valid for its length.
    or_errno(unsafe {
        libc::setxattr(
            c_string(path).as_ptr(),
            name.as_ptr(),
            b"landed".as_ptr().cast(),
            6,
            0,
        )
    })
    .map(drop)
}

pub(super) fn has_xattr(path: &Path) -> bool {
    let name = CString::new("user.strument").expect("name");
    let mut buf = [0u8; 16];
    // SAFETY: valid C strings and a buffer valid for its length.
    let n = unsafe {
        libc::getxattr(
            c_string(path).as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    n == 6 && &buf[..6] == b"landed"
}

/// Sets the modification time through a read-only descriptor.
pub(super) fn set_mtime(path: &Path) -> Result<(), i32> {
    let f = fs::File::options()
        .read(true)
        .open(path)
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
    // A read-only descriptor: the timestamp change itself is the write.
    let f = f?;
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(12345);
    as_errno(f.set_times(fs::FileTimes::new().set_modified(when)))
}

/// Where the parent installs a descriptor it opened before the sandbox.
pub(super) const INHERITED_FD: libc::c_int = 100;

/// Writes through the descriptor the parent opened for writing before the
/// sandbox and installed as [`INHERITED_FD`].
pub(super) fn write_inherited() -> Result<(), i32> {
    // SAFETY: the descriptor was installed by the parent for this child only.
    let fd = unsafe { OwnedFd::from_raw_fd(INHERITED_FD) };
    write_fd(&fd, b"landed")
}
