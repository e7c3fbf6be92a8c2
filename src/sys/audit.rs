//! The audit netlink socket that carries Landlock's denial records.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// `AUDIT_NLGRP_READLOG`: the multicast group of read-only audit listeners
/// (systemd-journald's audit socket is one), which needs `CAP_AUDIT_READ`.
const AUDIT_NLGRP_READLOG: u32 = 1;

/// A `NETLINK_AUDIT` socket, not yet bound.
pub(crate) fn audit_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket takes integers only; the descriptor is owned from here.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket and is owned by nobody else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// Joins the audit socket `fd` to the read-only multicast group, so that
/// it receives a copy of every audit record the kernel emits, whether or
/// not an audit daemon also takes them.
pub(crate) fn audit_join_readlog(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: sockaddr_nl is plain data, valid when zeroed.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = 1 << (AUDIT_NLGRP_READLOG - 1);
    // SAFETY: the address is a valid sockaddr_nl of the size passed.
    let ret = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends one netlink message to the kernel.
pub(crate) fn netlink_send(fd: &OwnedFd, message: &[u8]) -> io::Result<()> {
    // SAFETY: sockaddr_nl is plain data; zeroed, it addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: the buffer and the address are valid for the sizes passed.
    let ret = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            message.as_ptr().cast(),
            message.len(),
            0,
            (&raw const kernel).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Receives one datagram into `buf`, waiting at most `timeout_ms`.
/// Returns 0 when nothing arrived in time.
pub(crate) fn netlink_recv(fd: &OwnedFd, buf: &mut [u8], timeout_ms: i32) -> io::Result<usize> {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&raw mut poll, 1, timeout_ms) };
    if ready < 0 {
        return Err(io::Error::last_os_error());
    }
    if ready == 0 {
        return Ok(0);
    }
    // SAFETY: the buffer is valid and writable for its length.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n.unsigned_abs())
    }
}
