//! Which TCP or UDP socket of this machine an address and port lead to,
//! by its cookie (`NETLINK_SOCK_DIAG`, `inet_diag`): how the supervisor
//! tells a port a process of the sandbox still holds from the same port
//! taken over later by a process outside it.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `SO_COOKIE` (Linux 4.14): a number naming this socket and no later one.
pub(crate) fn socket_cookie(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut value: u64 = 0;
    let mut len = size_of::<u64>() as libc::socklen_t;
    // SAFETY: `value` has room for the 8 bytes the kernel writes; it updates `len`.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_COOKIE,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// A `NETLINK_SOCK_DIAG` socket to ask [`socket_at`] with: kept by the
/// caller, since opening and closing one costs as much as the question.
pub(crate) fn diag_socket() -> io::Result<OwnedFd> {
    // SAFETY: integers only.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether `SO_REUSEPORT` is set on a socket.
pub(crate) fn reuses_port(fd: BorrowedFd<'_>) -> io::Result<bool> {
    super::int_option(fd, libc::SO_REUSEPORT).map(|v| v != 0)
}

/// Sends one request on a `NETLINK_SOCK_DIAG` socket and receives the
/// kernel's one answer into `buf`; the part of it received.
pub(crate) fn diag_exchange<'a>(
    diag: &OwnedFd,
    req: &[u8],
    buf: &'a mut [u8],
) -> io::Result<&'a [u8]> {
    // SAFETY: `req` is readable for its length.
    if unsafe { libc::send(diag.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::recv(diag.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    Ok(&buf[..n.min(buf.len())])
}

/// The cookie of the socket a TCP connect (`tcp`) or a UDP datagram to
/// `to` would reach on this machine: the listener, or the bound UDP
/// socket, as the kernel's own lookup finds it (a wildcard bind included),
/// asked over `diag` (one question at a time). `Ok(None)`: no socket
/// there. An error: no `inet_diag` in this kernel (`tcp_diag`,
/// `udp_diag`), or the question could not be asked; the caller then opens
/// another `diag` for the next one.
pub(crate) fn socket_at(diag: &OwnedFd, to: SocketAddr, tcp: bool) -> io::Result<Option<u64>> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;
    // An IPv4-mapped address is an IPv4 one to the kernel's lookup, which
    // also finds a dual-stack listener on `::` that way.
    let ip = match to.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let (family, address) = match ip {
        IpAddr::V4(v4) => {
            let mut a = [0u8; 16];
            a[..4].copy_from_slice(&v4.octets());
            (libc::AF_INET as u8, a)
        }
        IpAddr::V6(v6) => (libc::AF_INET6 as u8, v6.octets()),
    };
    let protocol = if tcp {
        libc::IPPROTO_TCP
    } else {
        libc::IPPROTO_UDP
    } as u8;
    let port = to.port().to_be_bytes();
    // struct inet_diag_sockid: the socket looked up is the local side of
    // the id: source for TCP (inet_diag_find_one_icsk), destination for
    // UDP (udp_dump_one passes the id's source as the peer).
    let mut id = Vec::with_capacity(48);
    let none = [0u8; 16];
    let (sport, dport, src, dst) = if tcp {
        ([port[0], port[1]], [0, 0], address, none)
    } else {
        ([0, 0], [port[0], port[1]], none, address)
    };
    id.extend_from_slice(&sport);
    id.extend_from_slice(&dport);
    id.extend_from_slice(&src);
    id.extend_from_slice(&dst);
    id.extend_from_slice(&0u32.to_ne_bytes()); // any interface
    id.extend_from_slice(&u32::MAX.to_ne_bytes()); // INET_DIAG_NOCOOKIE
    id.extend_from_slice(&u32::MAX.to_ne_bytes());
    // struct nlmsghdr, then struct inet_diag_req_v2.
    let len = 16 + 8 + id.len();
    let mut req = Vec::with_capacity(len);
    req.extend_from_slice(&(len as u32).to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(&[family, protocol, 0, 0]);
    req.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    req.extend_from_slice(&id);
    let mut buf = [0u8; 512];
    let msg = diag_exchange(diag, &req, &mut buf)?;
    let bad = || io::Error::from_raw_os_error(libc::EBADMSG);
    let u32_at = |at: usize| {
        msg.get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(bad)
    };
    match msg.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]])) {
        Some(SOCK_DIAG_BY_FAMILY) => {
            // struct inet_diag_msg: family, state, timer, retrans, then
            // the sockid, whose cookie is its last 8 bytes (at 4 + 40).
            let at = 16 + 4 + 40;
            let low = u64::from(u32_at(at)?);
            let high = u64::from(u32_at(at + 4)?);
            Ok(Some(high << 32 | low))
        }
        Some(NLMSG_ERROR) => match -(u32_at(16)? as i32) {
            libc::ENOENT => Ok(None),
            errno => Err(io::Error::from_raw_os_error(errno)),
        },
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, UdpSocket};
    use std::os::fd::AsFd;

    #[test]
    fn the_socket_at_a_port_is_named_by_its_cookie() {
        let diag = diag_socket().expect("NETLINK_SOCK_DIAG");
        let socket_at = |to, tcp| super::socket_at(&diag, to, tcp);
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let at = listener.local_addr().expect("address");
        let cookie = socket_cookie(listener.as_fd()).expect("cookie");
        assert_eq!(socket_at(at, true).expect("inet_diag"), Some(cookie));
        // A wildcard listener is found by the address a client would use.
        let any = TcpListener::bind("0.0.0.0:0").expect("listen");
        let port = any.local_addr().expect("address").port();
        let cookie = socket_cookie(any.as_fd()).expect("cookie");
        let loopback = SocketAddr::from(([127, 0, 0, 1], port));
        assert_eq!(socket_at(loopback, true).expect("inet_diag"), Some(cookie));

        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let at = udp.local_addr().expect("address");
        let cookie = socket_cookie(udp.as_fd()).expect("cookie");
        assert_eq!(socket_at(at, false).expect("inet_diag"), Some(cookie));

        // IPv6, and the IPv4-mapped form of an IPv4 listener's address.
        let v6 = TcpListener::bind("[::1]:0").expect("listen on ::1");
        let v6_at = v6.local_addr().expect("address");
        let cookie = socket_cookie(v6.as_fd()).expect("cookie");
        assert_eq!(socket_at(v6_at, true).expect("inet_diag"), Some(cookie));
        let tcp_at = listener.local_addr().expect("address");
        let mapped: SocketAddr = format!("[::ffff:127.0.0.1]:{}", tcp_at.port())
            .parse()
            .expect("mapped");
        let cookie = socket_cookie(listener.as_fd()).expect("cookie");
        assert_eq!(socket_at(mapped, true).expect("inet_diag"), Some(cookie));

        // Closed: nothing there any more.
        drop(listener);
        drop(udp);
        assert_eq!(socket_at(tcp_at, true).expect("inet_diag"), None);
        let closed = SocketAddr::from(([127, 0, 0, 1], at.port()));
        assert_eq!(socket_at(closed, false).expect("inet_diag"), None);
    }
}
