//! Identity and unix-socket probing.

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
