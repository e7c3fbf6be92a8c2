//! What the connect supervisor asks of an IPv4 or IPv6 socket it holds.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `SO_PROTOCOL` of a socket: `IPPROTO_TCP`, `IPPROTO_UDP`, …; ports are
/// counted apart per protocol.
pub(crate) fn socket_protocol(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` has room for an int; the kernel updates `len`.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PROTOCOL,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value)
    }
}
