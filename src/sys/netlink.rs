//! Route netlink: dumping the kernel's routes, and a socket that hears
//! when addresses or routes change. Messages are built and parsed in safe
//! code by the caller (`local_net`); here only the sockets and sending.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR |
/// RTMGRP_IPV6_ROUTE` (<linux/rtnetlink.h>): every change to an address
/// or a route, local ones included.
pub(crate) const ROUTE_CHANGES: u32 = 0x10 | 0x40 | 0x100 | 0x400;

/// A `NETLINK_ROUTE` socket, bound to the multicast `groups` (0: none),
/// non-blocking when `nonblocking`.
pub(crate) fn route_socket(groups: u32, nonblocking: bool) -> io::Result<OwnedFd> {
    let mut kind = libc::SOCK_RAW | libc::SOCK_CLOEXEC;
    if nonblocking {
        kind |= libc::SOCK_NONBLOCK;
    }
    // SAFETY: socket takes integers only.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, kind, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_nl is plain data, valid when zeroed.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: the address is a valid sockaddr_nl of the size passed.
    let ret = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Receives one datagram of netlink messages into `buf`; its length.
/// On a non-blocking socket with nothing queued, `EAGAIN`.
pub(crate) fn route_recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the buffer is valid for writes of its length.
    let got = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    usize::try_from(got).map_err(|_| io::Error::last_os_error())
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
