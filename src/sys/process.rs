//! Identity, unix-socket probing, and signalling and reaping children.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// The real user id of the calling process.
pub(crate) fn uid() -> u32 {
    // SAFETY: getuid takes no arguments and cannot fail.
    unsafe { libc::getuid() }
}

/// Whether a stream connection to the unix socket at `path` is accepted
/// now: a server listens and this user may connect. Non-blocking, so a
/// server whose backlog is full counts as listening instead of stalling
/// the caller; the connection is closed at once.
pub(crate) fn unix_connectable(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data, valid when zeroed.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    // Leave room for the terminating NUL; longer paths cannot be bound either.
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return false;
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: socket takes integers only.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` was just returned by socket and is owned by nobody else.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: the address is a valid sockaddr_un of the size passed.
    let ret = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    ret == 0
        || matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN | libc::EINPROGRESS)
        )
}

/// Sends `signal` to process `pid`.
pub(crate) fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes integers only.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// How a child was found by [`wait_child`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildState {
    /// It ended; the raw `waitpid` status, now reaped.
    Ended(libc::c_int),
    /// It stopped, by this signal.
    Stopped(libc::c_int),
    /// Nothing to report: still running.
    Running,
}

/// `waitpid(pid, WNOHANG | WUNTRACED)`: reaps the child if it ended,
/// reports a stop once, otherwise returns at once.
pub(crate) fn wait_child(pid: libc::pid_t) -> io::Result<ChildState> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a valid int for the kernel to write.
        let ret = unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG | libc::WUNTRACED) };
        if ret == 0 {
            return Ok(ChildState::Running);
        }
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        return Ok(if libc::WIFSTOPPED(status) {
            ChildState::Stopped(libc::WSTOPSIG(status))
        } else {
            ChildState::Ended(status)
        });
    }
}
