//! Descriptors a confined command inherits: every one above 2 is marked
//! close-on-exec in the child, except those kept by name.

use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};

/// `CLOSE_RANGE_CLOEXEC` (Linux 5.11): mark the range close-on-exec
/// instead of closing it, so a descriptor a later `pre_exec` step still
/// needs (a socket to the supervisor) works until `exec`.
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Marks every descriptor from 3 up close-on-exec except those in `keep`,
/// which must be sorted ascending. Runs in the child between `fork` and
/// `exec`: only `close_range`, or where that is missing (before Linux
/// 5.11, or refused by a filter) `getrlimit` and one `fcntl` a descriptor,
/// all async-signal-safe; no allocation.
pub(crate) fn cloexec_all_but(keep: &[i32]) -> io::Result<()> {
    let mut first: u32 = 3;
    for &fd in keep {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd < first {
            continue;
        }
        if fd > first {
            cloexec_range(first, fd - 1)?;
        }
        first = fd.saturating_add(1);
    }
    cloexec_range(first, u32::MAX)
}

fn cloexec_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: close_range takes integers only and touches no memory.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            libc::c_uint::from(first),
            libc::c_uint::from(last),
            CLOSE_RANGE_CLOEXEC,
        )
    };
    if ret == 0 {
        return Ok(());
    }
    // The loop: as many fcntl calls as the descriptor limit allows.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit the kernel writes into.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let end =
        u32::try_from(limit.rlim_cur.min(u64::from(last).saturating_add(1))).unwrap_or(u32::MAX);
    for fd in first..end {
        let Ok(fd) = i32::try_from(fd) else { break };
        // SAFETY: F_GETFD/F_SETFD take and return integers only; a
        // descriptor that is not open answers EBADF, which is ignored.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
    Ok(())
}

/// Arranges for `cmd`'s child to mark every descriptor above 2 but `keep`
/// (sorted ascending) close-on-exec, as its own `pre_exec` step. Marked,
/// not closed: a descriptor another step uses before `exec` (the socket
/// that carries the supervisor's listener) still works until `exec`, so the
/// order of the steps does not matter.
pub(crate) fn keep_only_fds_before_exec(cmd: &mut std::process::Command, keep: Vec<i32>) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child and performs only
    // close_range, or getrlimit and fcntl, on integers; the vector was
    // built by the parent and is only read.
    unsafe {
        cmd.pre_exec(move || cloexec_all_but(&keep));
    }
}

/// A copy of `fd` numbered 3 or above, close-on-exec.
pub(crate) fn dup_above_stdio(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl F_DUPFD_CLOEXEC takes integers; the new descriptor is
    // owned by nobody else.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `copy` was just made and is owned here alone.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Closes every descriptor of `fds`: one `close_range` for each run of
/// consecutive numbers (the roots of a policy are opened one after the
/// other, so usually one call for all), where that is missing or refused
/// one `close` each.
pub(crate) fn close_all(fds: Vec<OwnedFd>) {
    // Collected in place: a raw descriptor has the size of an `OwnedFd`.
    let mut raw: Vec<RawFd> = fds.into_iter().map(IntoRawFd::into_raw_fd).collect();
    raw.sort_unstable();
    for run in raw.chunk_by(|a, b| a.checked_add(1) == Some(*b)) {
        let (Some(&first), Some(&last)) = (run.first(), run.last()) else {
            continue;
        };
        if first != last {
            // SAFETY: every descriptor from `first` to `last` is in `run`,
            // owned by this function since `into_raw_fd` and used by no one else.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    first as libc::c_uint,
                    last as libc::c_uint,
                    0u32,
                )
            };
            if ret == 0 {
                continue;
            }
        }
        for &fd in run {
            // SAFETY: as above, one at a time.
            unsafe { libc::close(fd) };
        }
    }
}
