//! Starting the `apply` helper: a process detached from the caller (not
//! its child, in a session of its own) with a copy of the caller's memory,
//! so that it runs Rust code the caller built for it.
//!
//! A helper that is not the caller's child takes two steps: an
//! intermediate child starts it and exits, and the helper is left to init
//! (or the nearest subreaper). The intermediate here is a
//! `clone(CLONE_VM | CLONE_VFORK)` child, as in [`spawn`](mod@super::spawn):
//! it shares the caller's memory (no page tables copied for it, none torn
//! down when it exits), the caller is suspended until it exits, and it
//! leaves the helper's pid in memory the caller reads then, with no
//! message between processes. Only the helper's own `fork` copies the
//! caller's memory, once. Against the previous two `fork`s (the
//! caller's, then the intermediate's, the pid sent over a socket) this
//! took `restrict_self` of one root from 444 to 365 µs (medians of the
//! benchmark's apply worker, interleaved, on a busy 2-CPU VM).
//!
//! The intermediate runs on a stack of its own in the caller's memory and
//! makes only `fork` and `_exit`, signals blocked: a handler of the
//! caller's must not run there. It exits with no signal to the caller
//! (exit signal 0), so a caller that ignores `SIGCHLD`, or waits for any
//! child, neither loses nor sees it; it is reaped here with `__WCLONE`.
//! The helper returns from that `fork` on the same stack, now a private
//! copy, and runs there: the mapping is large enough for a main thread.

use super::spawn::{block_all_signals, set_thread_mask};
use std::ffi::{c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The stack the intermediate starts on and the helper keeps: what a main
/// thread gets by default (`ulimit -s`), reserved lazily (`MAP_NORESERVE`:
/// only the pages touched are ever made).
const STACK_SIZE: usize = 8 * 1024 * 1024;

/// What the intermediate and the helper need, built before `clone`.
struct Start<F> {
    /// The descriptor the helper keeps, as fd 3.
    keep: RawFd,
    /// The helper's work; taken by the helper in its own copy.
    body: Option<F>,
    /// The caller's signal mask, restored in the helper.
    mask: libc::sigset_t,
    /// The helper's pid, or `-errno` of the intermediate's `fork`; written
    /// by the intermediate, read by the caller once it resumes.
    pid: AtomicI32,
}

/// Starts a helper process, detached from the caller (in a session of its
/// own, so that neither the caller's `waitpid` nor a signal to its process
/// group reaches it, and not its child), that keeps only `keep` (as fd 3,
/// with 0-2 on `/dev/null`), runs `body` and exits. Returns the helper's
/// pid once the intermediate child is reaped; the helper may not have run
/// yet.
///
/// The helper runs Rust code after `fork` (glibc's, with its fork
/// handlers): when the caller has other threads this relies on them
/// leaving `malloc` usable in the child, as any `fork` does; the helper
/// takes no lock of the caller's besides.
pub(crate) fn fork_helper<F: FnOnce(OwnedFd)>(keep: &OwnedFd, body: F) -> io::Result<i32> {
    let stack = super::spawn::Stack::mapped(STACK_SIZE, libc::MAP_NORESERVE)?;
    let mut start = Start {
        keep: keep.as_raw_fd(),
        body: Some(body),
        // Blocked for the intermediate: a handler of the caller's must not
        // run on its stack with the caller's memory.
        mask: block_all_signals(),
        pid: AtomicI32::new(0),
    };
    // SAFETY: `intermediate` runs on `stack` (its top passed, the stack
    // growing down) with a pointer to `start`, which outlives the child's
    // use of it: CLONE_VFORK suspends this thread until the child has
    // exited, and the child touches only `start` (and, in the helper it
    // forks, a private copy of everything).
    let intermediate_pid = unsafe {
        libc::clone(
            intermediate::<F>,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK,
            (&raw mut start).cast::<c_void>(),
        )
    };
    let clone_error = io::Error::last_os_error();
    set_thread_mask(&start.mask);
    // The intermediate has exited (CLONE_VFORK): its stack is the helper's
    // alone now, in the helper's copy; this one goes.
    drop(stack);
    if intermediate_pid < 0 {
        return Err(clone_error);
    }
    let mut status = 0;
    // SAFETY: `status` is a valid int for the kernel to write; the pid is
    // our own child (exit signal 0: `__WCLONE`), not waited for yet.
    while unsafe { libc::waitpid(intermediate_pid, &raw mut status, libc::__WCLONE) } < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    match start.pid.load(Ordering::Acquire) {
        pid if pid > 0 => Ok(pid),
        0 => Err(io::Error::other("the helper process could not be started")),
        errno => Err(io::Error::from_raw_os_error(-errno)),
    }
}

/// The intermediate: in the caller's memory, the caller suspended. Forks
/// the helper, leaves its pid (or `-errno`) in `Start`, and exits.
extern "C" fn intermediate<F: FnOnce(OwnedFd)>(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Start` the caller passed to clone, alive and
    // not touched by the suspended caller until this child exits.
    let start = unsafe { &mut *arg.cast::<Start<F>>() };
    // SAFETY: fork has no memory-safety preconditions; the child (the
    // helper, with a private copy of this memory) only makes syscalls and
    // runs `body`, then exits without returning into the caller's frames.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        helper(start);
    }
    let result = if pid > 0 {
        pid
    } else {
        -io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EAGAIN)
    };
    start.pid.store(result, Ordering::Release);
    // SAFETY: _exit ends this process at once, running nothing of the
    // caller's (no atexit handlers, no buffered output flushed twice).
    unsafe { libc::_exit(0) }
}

/// The helper: a private copy of the caller's memory, on the
/// intermediate's stack. Never returns.
fn helper<F: FnOnce(OwnedFd)>(start: &mut Start<F>) -> ! {
    let keep = start.keep;
    set_thread_mask(&start.mask);
    // SAFETY: setsid, dup2, close_range, open and _exit take integers and a
    // NUL-terminated literal; they touch no Rust-owned memory.
    unsafe {
        libc::setsid();
        if keep != 3 {
            libc::dup2(keep, 3);
        }
        libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 3 {
                libc::close(null);
            }
        }
    }
    if let Some(body) = start.body.take() {
        // SAFETY: fd 3 is the kept socket, owned by this process alone now.
        body(unsafe { OwnedFd::from_raw_fd(3) });
    }
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}
