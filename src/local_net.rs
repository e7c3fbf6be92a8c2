//! This machine's own addresses, and which of their ports a confined
//! command may connect to.
//!
//! A service listening on loopback or on a local interface runs its
//! clients' requests *outside* the sandbox: a Gradle daemon or an sccache
//! server builds for whoever connects, `sshd` runs any command, a debugger
//! port or a notebook server executes code. Other hosts are left alone:
//! builds fetch dependencies. So the connect supervisor asks this module
//! about every `connect` and addressed `sendto` to an IPv4 or IPv6 address:
//! an address of this machine is reached only on a port bound inside the
//! same sandbox or named by the policy ([`LocalPort`]).

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::Mutex;

use crate::sys;

/// A port on this machine a confined command may connect to, and why.
///
/// An unspecified address (`0.0.0.0`, `::`) names the port on every
/// address of this machine.
///
/// # Examples
///
/// ```
/// use strument_sandbox::local_net::{LocalPort, PortReason};
/// let db = LocalPort::new("127.0.0.1:5432".parse()?, PortReason::Caller);
/// assert_eq!(db.reason.name(), "caller");
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPort {
    /// The address and port.
    pub address: SocketAddr,
    /// Why it is reachable.
    pub reason: PortReason,
}

impl LocalPort {
    /// A port allowed for `reason`.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::local_net::{LocalPort, PortReason};
    /// let p = LocalPort::new("[::1]:8080".parse()?, PortReason::Caller);
    /// assert_eq!(p.address.port(), 8080);
    /// # Ok::<(), std::net::AddrParseError>(())
    /// ```
    #[must_use]
    pub fn new(address: SocketAddr, reason: PortReason) -> LocalPort {
        LocalPort { address, reason }
    }

    /// Parses what `--allow-connect` takes: `ADDR:PORT` with an IPv4
    /// address, a bracketed IPv6 one (`[::1]:8080`), or `localhost:PORT`
    /// (both `127.0.0.1` and `::1`).
    ///
    /// # Errors
    ///
    /// A sentence naming what is wrong: no port, a port that is not a
    /// number from 1 to 65535, a host that is neither an address nor
    /// `localhost`.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::local_net::{LocalPort, PortReason};
    /// let ports = LocalPort::parse("localhost:8080", PortReason::Caller)?;
    /// assert_eq!(ports.len(), 2);
    /// assert!(LocalPort::parse("127.0.0.1", PortReason::Caller).is_err());
    /// # Ok::<(), String>(())
    /// ```
    pub fn parse(text: &str, reason: PortReason) -> Result<Vec<LocalPort>, String> {
        if let Ok(address) = text.parse::<SocketAddr>() {
            if address.port() == 0 {
                return Err(format!("{text}: port 0 names no listening port"));
            }
            return Ok(vec![LocalPort::new(address, reason)]);
        }
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err(format!("{text}: expected ADDR:PORT, e.g. 127.0.0.1:8080"));
        };
        let port = match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(format!("{text}: the port must be a number from 1 to 65535")),
        };
        if host.eq_ignore_ascii_case("localhost") {
            return Ok(localhost(port)
                .map(|a| LocalPort::new(a, reason.clone()))
                .collect());
        }
        Err(format!(
            "{text}: expected an IP address or localhost before the port (IPv6 in brackets: [::1]:{port})"
        ))
    }
}

fn localhost(port: u16) -> impl Iterator<Item = SocketAddr> {
    [
        SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
        SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port),
    ]
    .into_iter()
}

impl fmt::Display for LocalPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.address, self.reason)
    }
}

/// Why a confined command may connect to a port of this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PortReason {
    /// A `nameserver` of `/etc/resolv.conf` (a local stub such as
    /// systemd-resolved's `127.0.0.53`): name resolution, over UDP and TCP.
    Resolver,
    /// A proxy named in this environment variable (`http_proxy`,
    /// `https_proxy`, `all_proxy`, and their upper-case forms): downloads
    /// go through it.
    Proxy(String),
    /// Named by the caller (`--allow-connect`): a dev database, a server
    /// on purpose.
    Caller,
}

impl PortReason {
    /// A short, stable name for programs.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::local_net::PortReason::Resolver.name(), "resolver");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            PortReason::Resolver => "resolver",
            PortReason::Proxy(_) => "proxy",
            PortReason::Caller => "caller",
        }
    }
}

impl fmt::Display for PortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortReason::Resolver => f.write_str("the system resolver (/etc/resolv.conf)"),
            PortReason::Proxy(variable) => write!(f, "the proxy in ${variable}"),
            PortReason::Caller => f.write_str("named by the caller"),
        }
    }
}

/// The ports of this machine a session connects to by default: the system
/// resolver's (each `nameserver` of `/etc/resolv.conf`, port 53) and the
/// proxy named in `http_proxy`, `https_proxy`, `all_proxy` or their
/// upper-case forms, when its host is an IP address or `localhost`. Those
/// on other hosts are listed too; connections there are never mediated.
///
/// # Examples
///
/// ```
/// for port in strument_sandbox::local_net::default_local_ports() {
///     println!("{port}");
/// }
/// ```
#[must_use]
pub fn default_local_ports() -> Vec<LocalPort> {
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let mut out: Vec<LocalPort> = nameservers(&resolv)
        .map(|a| LocalPort::new(a, PortReason::Resolver))
        .collect();
    for variable in PROXY_VARIABLES {
        let Ok(value) = std::env::var(variable) else {
            continue;
        };
        for address in proxy_addresses(&value) {
            if !out.iter().any(|p| p.address == address) {
                out.push(LocalPort::new(address, PortReason::Proxy(variable.into())));
            }
        }
    }
    out
}

/// The variables a proxy is named in, as curl, pip, npm and cargo read them.
const PROXY_VARIABLES: [&str; 6] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
];

/// The `nameserver` addresses of a `resolv.conf`, on port 53.
fn nameservers(text: &str) -> impl Iterator<Item = SocketAddr> + '_ {
    text.lines().filter_map(|line| {
        let mut words = line.split_whitespace();
        if words.next() != Some("nameserver") {
            return None;
        }
        // A link-local IPv6 server may carry a zone: `fe80::1%eth0`.
        let word = words.next()?;
        let ip = word.split('%').next()?.parse::<IpAddr>().ok()?;
        Some(SocketAddr::new(ip, 53))
    })
}

/// Where a proxy URL (`http://user:pw@127.0.0.1:3128/`, `socks5h://[::1]`,
/// `localhost:8080`) points, when its host is an address or `localhost`;
/// the scheme's port when none is given.
fn proxy_addresses(url: &str) -> Vec<SocketAddr> {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        s if s.starts_with("socks") => 1080,
        _ => 80,
    };
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let Some((host, after)) = bracketed.split_once(']') else {
            return Vec::new();
        };
        (host, after.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    let port = match port {
        None | Some("") => default_port,
        Some(p) => match p.parse() {
            Ok(p) => p,
            Err(_) => return Vec::new(),
        },
    };
    if host.eq_ignore_ascii_case("localhost") {
        return localhost(port).collect();
    }
    match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => Vec::new(),
    }
}

/// The transport of a socket, by its protocol (`SO_PROTOCOL`): ports are
/// counted apart per transport, so a UDP port bound inside opens nothing
/// of a TCP listener on the same number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Transport {
    /// TCP, and MPTCP (whose listeners take TCP clients).
    Tcp,
    /// UDP.
    Udp,
    /// ICMP echo (`ping` sockets): answered by the kernel, no service.
    Ping,
    /// Another protocol (SCTP, UDP-Lite), by number.
    Other(i32),
}

impl Transport {
    /// The transport of a socket whose `SO_PROTOCOL` is `protocol`.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::local_net::Transport;
    /// assert_eq!(Transport::from_protocol(libc::IPPROTO_TCP), Transport::Tcp);
    /// ```
    #[must_use]
    pub fn from_protocol(protocol: i32) -> Transport {
        match protocol {
            libc::IPPROTO_TCP | libc::IPPROTO_MPTCP => Transport::Tcp,
            libc::IPPROTO_UDP => Transport::Udp,
            libc::IPPROTO_ICMP | libc::IPPROTO_ICMPV6 => Transport::Ping,
            other => Transport::Other(other),
        }
    }

    /// A short, stable name: `tcp`, `udp`, `ping`, `other`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::local_net::Transport::Udp.name(), "udp");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::Ping => "ping",
            Transport::Other(_) => "other",
        }
    }
}

/// The form of an address that decides where it goes: an IPv4-mapped IPv6
/// address (`::ffff:127.0.0.1`) is its IPv4 address.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Where a connection to `ip` is delivered when it goes to this machine:
/// the unspecified address (`0.0.0.0`, `::`) reaches loopback.
fn delivered(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V4(v4) if v4.is_unspecified() => Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(v6) if v6.is_unspecified() => Ipv6Addr::LOCALHOST.into(),
        other => other,
    }
}

/// Whether a socket listening on `listener` takes a connection to `to`
/// (both on this machine): the same port, and the listener's address the
/// same or unspecified (every address).
fn takes(listener: SocketAddr, to: SocketAddr) -> bool {
    listener.port() == to.port()
        && (listener.ip().is_unspecified()
            || canonical(listener.ip()).is_unspecified()
            || canonical(listener.ip()) == delivered(to.ip()))
}

/// A prefix of addresses the kernel delivers on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prefix {
    ip: IpAddr,
    len: u8,
}

impl Prefix {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.ip, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let shift = 32u32.saturating_sub(u32::from(self.len));
                let mask = u32::MAX.checked_shl(shift).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let shift = 128u32.saturating_sub(u32::from(self.len));
                let mask = u128::MAX.checked_shl(shift).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The addresses of this machine: loopback, unspecified, and every prefix
/// the kernel's routing tables deliver locally (`local`, `broadcast` and
/// `anycast` routes: each interface address, AnyIP ranges, subnet
/// broadcasts), read from route netlink when made and again after the
/// kernel announces a change of addresses or routes.
#[derive(Debug)]
pub(crate) struct LocalAddresses {
    prefixes: Vec<Prefix>,
    /// Hears address and route changes; `None` when it could not be made,
    /// and then the table is read again on every question it cannot answer
    /// from loopback alone.
    changes: Option<OwnedFd>,
    /// Whether the table has been read: not before the first question that
    /// needs it, so a command that reaches no other address costs no dump.
    read: bool,
}

impl LocalAddresses {
    /// The table, read at the first question that needs it (see
    /// [`LocalAddresses::contains`]), listening for changes from then on.
    pub(crate) fn unread() -> LocalAddresses {
        LocalAddresses {
            prefixes: Vec::new(),
            changes: None,
            read: false,
        }
    }

    fn read_now(&mut self) {
        // Subscribed before the dump, so no change falls in between.
        self.changes = sys::route_socket(sys::ROUTE_CHANGES, true).ok();
        self.prefixes = dump_local_prefixes().unwrap_or_default();
        self.read = true;
    }

    /// Whether `ip` is an address of this machine.
    pub(crate) fn contains(&mut self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        if ip.is_loopback() || ip.is_unspecified() || ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
            return true;
        }
        if self.read {
            self.refresh_if_changed();
        } else {
            self.read_now();
        }
        self.prefixes.iter().any(|p| p.contains(ip))
    }

    fn refresh_if_changed(&mut self) {
        let changed = match &self.changes {
            None => true,
            Some(fd) => {
                let mut buf = [0u8; 4096];
                let mut changed = false;
                loop {
                    match sys::route_recv(fd, &mut buf) {
                        Ok(0) => break,
                        Ok(_) => changed = true,
                        // Overflowed: changes were lost, read it all again.
                        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => changed = true,
                        Err(_) => break,
                    }
                }
                changed
            }
        };
        if changed {
            if let Ok(prefixes) = dump_local_prefixes() {
                self.prefixes = prefixes;
            }
        }
    }
}

// <linux/netlink.h>, <linux/rtnetlink.h>
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const RTA_DST: u16 = 1;
const RTN_LOCAL: u8 = 2;
const RTN_BROADCAST: u8 = 3;
const RTN_ANYCAST: u8 = 4;
const NLMSG_HDRLEN: usize = 16;
const RTMSG_LEN: usize = 12;

/// Dumps every route of both families and keeps the prefixes delivered on
/// this machine.
fn dump_local_prefixes() -> io::Result<Vec<Prefix>> {
    let fd = sys::route_socket(0, false)?;
    let mut request = Vec::with_capacity(NLMSG_HDRLEN + RTMSG_LEN);
    let len = (NLMSG_HDRLEN + RTMSG_LEN) as u32;
    request.extend_from_slice(&len.to_ne_bytes());
    request.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    request.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    request.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    request.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel assigns
    request.extend_from_slice(&[libc::AF_UNSPEC as u8; 1]);
    request.extend_from_slice(&[0u8; RTMSG_LEN - 1]);
    sys::netlink_send(&fd, &request)?;
    let mut prefixes = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = sys::route_recv(&fd, &mut buf)?;
        if n == 0 || parse_routes(&buf[..n], &mut prefixes)? {
            return Ok(prefixes);
        }
    }
}

/// Parses one datagram of a route dump into `out`; `Ok(true)` at its end.
fn parse_routes(mut buf: &[u8], out: &mut Vec<Prefix>) -> io::Result<bool> {
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32_at(buf, 0) as usize;
        let kind = u16_at(buf, 4);
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(io::Error::from_raw_os_error(libc::EBADMSG));
        }
        let body = &buf[NLMSG_HDRLEN..len];
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = body
                    .get(..4)
                    .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                return Err(io::Error::from_raw_os_error(
                    errno.checked_neg().unwrap_or(libc::EIO),
                ));
            }
            RTM_NEWROUTE => out.extend(local_prefix(body)),
            _ => {}
        }
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(false)
}

/// The destination of one `rtmsg` when its type delivers locally.
fn local_prefix(body: &[u8]) -> Option<Prefix> {
    let header = body.get(..RTMSG_LEN)?;
    let (family, dst_len, kind) = (i32::from(header[0]), header[1], header[7]);
    if !matches!(kind, RTN_LOCAL | RTN_BROADCAST | RTN_ANYCAST) {
        return None;
    }
    let mut attrs = &body[RTMSG_LEN..];
    while attrs.len() >= 4 {
        let len = usize::from(u16_at(attrs, 0));
        let kind = u16_at(attrs, 2);
        if len < 4 || len > attrs.len() {
            return None;
        }
        let data = &attrs[4..len];
        if kind == RTA_DST {
            let ip: IpAddr = match family {
                libc::AF_INET => <[u8; 4]>::try_from(data).ok()?.into(),
                libc::AF_INET6 => <[u8; 16]>::try_from(data).ok()?.into(),
                _ => return None,
            };
            return Some(Prefix { ip, len: dst_len });
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    None
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_ne_bytes(b)
}

fn u16_at(buf: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([buf[at], buf[at + 1]])
}

/// What a connection to an IPv4 or IPv6 address may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Another host: never mediated.
    OtherHost,
    /// This machine, on a port a process of the sandbox bound.
    BoundInside,
    /// This machine, on a port the policy names.
    Named(PortReason),
    /// This machine, `ping`: the kernel answers, no service.
    Echo,
    /// This machine, any other port: `EACCES`.
    Refused,
}

/// The supervisor's view of the network: this machine's addresses, the
/// ports the policy names, and the ports bound inside the sandbox.
#[derive(Debug)]
pub(crate) struct LocalNet {
    addresses: Mutex<LocalAddresses>,
    named: Vec<LocalPort>,
    bound: Mutex<Vec<BoundPort>>,
    /// The `inet_diag` socket [`LocalNet::still_held`] asks on, opened at
    /// the first question.
    diag: Mutex<Option<OwnedFd>>,
}

/// A port a process of the sandbox bound: the address `getsockname` gave
/// after the bind, the transport, and the socket's cookie (`SO_COOKIE`),
/// which tells it from a socket that takes the port after it is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BoundPort {
    address: SocketAddr,
    transport: Transport,
    cookie: Option<u64>,
}

/// Nothing named, and this machine's addresses read at the first question
/// loopback alone cannot answer, as [`LocalNet::new`] does.
impl Default for LocalNet {
    fn default() -> LocalNet {
        LocalNet {
            addresses: Mutex::new(LocalAddresses::unread()),
            named: Vec::new(),
            bound: Mutex::new(Vec::new()),
            diag: Mutex::new(None),
        }
    }
}

impl LocalNet {
    /// This machine's addresses, read at the first question about one
    /// that is not loopback (a command that connects nowhere else costs no
    /// route dump); `named` are the policy's ports.
    pub(crate) fn new(named: Vec<LocalPort>) -> LocalNet {
        LocalNet {
            addresses: Mutex::new(LocalAddresses::unread()),
            named,
            bound: Mutex::new(Vec::new()),
            diag: Mutex::new(None),
        }
    }

    /// Records what a bind inside the sandbox gave a socket: its address
    /// with the port the kernel chose (`getsockname` after the bind), and
    /// the socket's cookie when known.
    pub(crate) fn bound(&self, local: SocketAddr, transport: Transport, cookie: Option<u64>) {
        let port = BoundPort {
            address: local,
            transport,
            cookie,
        };
        if let Ok(mut bound) = self.bound.lock() {
            if !bound.contains(&port) {
                bound.push(port);
            }
        }
    }

    /// Whether `ip` is an address of this machine.
    pub(crate) fn is_local(&self, ip: IpAddr) -> bool {
        self.addresses.lock().map_or(true, |mut a| a.contains(ip))
    }

    /// Whether a `connect` or `sendto` over `transport` to `to` may go.
    pub(crate) fn reach(&self, to: SocketAddr, transport: Transport) -> Reach {
        if !self.is_local(to.ip()) {
            return Reach::OtherHost;
        }
        if transport == Transport::Ping {
            return Reach::Echo;
        }
        let cookies: Vec<Option<u64>> = self.bound.lock().map_or_else(
            |_| Vec::new(),
            |bound| {
                bound
                    .iter()
                    .filter(|p| p.transport == transport && takes(p.address, to))
                    .map(|p| p.cookie)
                    .collect()
            },
        );
        if !cookies.is_empty() && self.still_held(to, transport, &cookies) {
            return Reach::BoundInside;
        }
        match self.named.iter().find(|p| takes(p.address, to)) {
            Some(port) => Reach::Named(port.reason.clone()),
            None => Reach::Refused,
        }
    }

    /// Whether binding `socket` to `at` would join a `SO_REUSEPORT` group
    /// a socket outside the sandbox holds (same user, the option set on
    /// both): the kernel would then spread the user's own later
    /// connections over the command's server, and the command's over the
    /// user's. Such a bind fails with `EADDRINUSE`, what the kernel
    /// answers where the group is not shared. A socket without the option,
    /// or port 0, joins nothing.
    pub(crate) fn joins_group_outside(
        &self,
        socket: std::os::fd::BorrowedFd<'_>,
        at: SocketAddr,
        transport: Transport,
    ) -> bool {
        if at.port() == 0 || !sys::reuses_port(socket).unwrap_or(false) {
            return false;
        }
        let Ok(Some(cookie)) = self.socket_at(at, transport) else {
            return false;
        };
        !self.bound.lock().is_ok_and(|bound| {
            bound
                .iter()
                .any(|p| p.transport == transport && p.cookie == Some(cookie))
        })
    }

    /// Whether the socket a connection or datagram to `to` would reach is one
    /// a process of the sandbox bound (its cookie among `cookies`), asked of
    /// the kernel's own lookup (`inet_diag`): a port the sandbox bound and
    /// closed, then taken by a server outside it (the user's notebook on the
    /// port a test server used), is the outside server's. Nobody there: the
    /// kernel refuses the connection itself. Without `inet_diag` in the
    /// kernel (no `tcp_diag`/`udp_diag`), or a cookie unknown, the port counts
    /// as held, as it did before cookies were kept (doc/security.md).
    fn still_held(&self, to: SocketAddr, transport: Transport, cookies: &[Option<u64>]) -> bool {
        if cookies.iter().any(Option::is_none) {
            return true;
        }
        match self.socket_at(to, transport) {
            Ok(Some(cookie)) => cookies.contains(&Some(cookie)),
            Ok(None) | Err(_) => true,
        }
    }

    /// [`sys::socket_at`] over the kept `inet_diag` socket, opened at the
    /// first question and again after one fails. `EPROTONOSUPPORT` for a
    /// transport other than TCP and UDP, which `inet_diag` is not asked of.
    fn socket_at(&self, to: SocketAddr, transport: Transport) -> io::Result<Option<u64>> {
        let tcp = match transport {
            Transport::Tcp => true,
            Transport::Udp => false,
            Transport::Ping | Transport::Other(_) => {
                return Err(io::Error::from_raw_os_error(libc::EPROTONOSUPPORT));
            }
        };
        let mut diag = self
            .diag
            .lock()
            .map_err(|_| io::Error::from_raw_os_error(libc::EDEADLK))?;
        let socket = match diag.take() {
            Some(socket) => socket,
            None => sys::diag_socket()?,
        };
        let found = sys::socket_at(&socket, to, tcp);
        if found.is_ok() {
            *diag = Some(socket);
        }
        found
    }
}

/// Whether a UDP datagram is Gradle's cache-lock contention message: a
/// version byte 1 and the 8-byte lock id (Gradle 1 to 4), followed by a
/// type byte 0 to 2 from Gradle 5 on (unlock request, its confirmation,
/// release confirmation). Every Gradle process that shares `~/.gradle/caches`
/// asks the lock's owner this way, at the port the owner wrote into the lock
/// file; the owner only releases the lock. Without it a confined build
/// fails whenever the user's own daemon holds a cache ("Failed to ping owner
/// of lock"), so it is let through to any port of this machine: nine or ten
/// bytes that begin with 1 carry no command.
pub(crate) fn is_gradle_lock_ping(data: &[u8]) -> bool {
    match data {
        [1, _, _, _, _, _, _, _, _] => true,
        [1, _, _, _, _, _, _, _, _, kind] => *kind <= 2,
        _ => false,
    }
}

/// The process listening where a refused connection was going, as far as
/// this user can see it: the owner always (`/proc/net/tcp`), the process
/// when its descriptors are readable (this user's own, or all as root).
///
/// # Examples
///
/// ```
/// # fn f(l: &strument_sandbox::local_net::Listener) {
/// println!("listening there: {l}");
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listener {
    /// The user owning the listening socket.
    pub uid: u32,
    /// That user's name, from `/etc/passwd`.
    pub user: Option<String>,
    /// The process holding the socket, when found.
    pub pid: Option<u32>,
    /// Its name (`/proc/PID/comm`).
    pub name: Option<String>,
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.name, self.pid) {
            (Some(name), Some(pid)) => write!(f, "{name} (pid {pid}")?,
            _ => write!(f, "a process (")?,
        }
        match &self.user {
            Some(user) => write!(f, ", user {user})"),
            None => write!(f, ", uid {})", self.uid),
        }
    }
}

/// The most `/proc/PID/fd` entries looked at for a refusal's listener.
const MAX_FDS_SCANNED: usize = 100_000;

/// Whether a socket listens on `to` over `transport` (`/proc/net`).
pub(crate) fn listening(to: SocketAddr, transport: Transport) -> bool {
    listening_owner(to, transport).is_some()
}

/// The owner and inode of the socket listening on `to` over `transport`.
fn listening_owner(to: SocketAddr, transport: Transport) -> Option<(u32, u64)> {
    let (tables, listening): (&[&str], Option<&str>) = match transport {
        Transport::Tcp => (&["/proc/net/tcp", "/proc/net/tcp6"], Some("0A")),
        Transport::Udp => (&["/proc/net/udp", "/proc/net/udp6"], None),
        _ => return None,
    };
    tables.iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        text.lines()
            .skip(1)
            .find_map(|line| listening_socket(line, to, listening))
    })
}

/// Finds the socket listening on `to` over `transport`, and the process
/// holding it. Only for a refusal: it reads `/proc/net` and then scans
/// descriptors, bounded by [`MAX_FDS_SCANNED`].
pub(crate) fn find_listener(to: SocketAddr, transport: Transport) -> Option<Listener> {
    let (uid, inode) = listening_owner(to, transport)?;
    let (pid, name) = match holder(inode) {
        Some((pid, name)) => (Some(pid), Some(name)),
        None => (None, None),
    };
    Some(Listener {
        uid,
        user: user_name(uid),
        pid,
        name,
    })
}

/// One line of `/proc/net/{tcp,udp}{,6}`: the owner and inode of the
/// socket, when it is bound where `to` goes (and listening, for TCP).
fn listening_socket(line: &str, to: SocketAddr, state: Option<&str>) -> Option<(u32, u64)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (local, st) = (fields.get(1)?, fields.get(3)?);
    if state.is_some_and(|s| s != *st) {
        return None;
    }
    let listener = proc_net_address(local)?;
    if !takes(listener, to) {
        return None;
    }
    Some((fields.get(7)?.parse().ok()?, fields.get(9)?.parse().ok()?))
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address
/// as the kernel prints it, each 32-bit word in the machine's byte order.
fn proc_net_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| {
        ip.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
            .map(u32::to_ne_bytes)
    };
    let ip: IpAddr = match ip.len() {
        8 => word(0)?.into(),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            bytes.into()
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The process holding socket `inode`, and its name.
fn holder(inode: u64) -> Option<(u32, String)> {
    let wanted = format!("socket:[{inode}]");
    let mut scanned = 0usize;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            scanned += 1;
            if scanned > MAX_FDS_SCANNED {
                return None;
            }
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str()) {
                let name = std::fs::read_to_string(entry.path().join("comm"))
                    .map(|n| n.trim_end().to_owned())
                    .unwrap_or_default();
                return Some((pid, name));
            }
        }
    }
    None
}

fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?.parse::<u32>().ok()?;
        (id == uid).then(|| name.to_owned())
    })
}

/// The `strument-sandbox run` option that allows a connection to `to`.
pub(crate) fn allow_option(to: SocketAddr) -> String {
    let to = SocketAddr::new(delivered(to.ip()), to.port());
    format!("--allow-connect {to}")
}

/// The shape `policy --json` lists a port in: the address, the port, why
/// (a stable name, and for a proxy the variable that named it) and the
/// sentence a person reads.
#[cfg(feature = "serde")]
impl serde::Serialize for LocalPort {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut o = s.serialize_struct("LocalPort", 5)?;
        o.serialize_field("address", &self.address.ip().to_string())?;
        o.serialize_field("port", &self.address.port())?;
        o.serialize_field("reason", self.reason.name())?;
        o.serialize_field(
            "variable",
            &match &self.reason {
                PortReason::Proxy(variable) => Some(variable.as_str()),
                _ => None,
            },
        )?;
        o.serialize_field("detail", &self.reason.to_string())?;
        o.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_mapped_unspecified_and_interface_addresses_are_this_machine() {
        let mut here = LocalAddresses::unread();
        for local in [
            "127.0.0.1",
            "127.0.0.2",
            "::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
            "::",
        ] {
            assert!(here.contains(local.parse().unwrap()), "{local}");
        }
        for other in [
            "192.0.2.200",
            "2001:db8::7",
            "::ffff:192.0.2.200",
            "8.8.8.8",
        ] {
            assert!(!here.contains(other.parse().unwrap()), "{other}");
        }
        // Every interface address, as /proc lists them (read apart from
        // the route dump this module relies on): IPv4 local host routes
        // of the FIB, IPv6 interface addresses.
        let fib = std::fs::read_to_string("/proc/net/fib_trie").unwrap();
        let mut last = None;
        let mut seen = 0;
        for line in fib.lines() {
            if let Some(ip) = line.trim().strip_prefix("|-- ") {
                last = ip.parse::<IpAddr>().ok();
            } else if line.contains("host LOCAL") {
                assert!(here.contains(last.unwrap()), "{last:?}");
                seen += 1;
            }
        }
        let inet6 = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
        for line in inet6.lines() {
            let hex = line.split_whitespace().next().unwrap();
            let ip = Ipv6Addr::from(u128::from_str_radix(hex, 16).unwrap());
            assert!(here.contains(ip.into()), "{ip}");
            seen += 1;
        }
        assert!(seen >= 2, "no interface address found in /proc/net");
    }

    #[test]
    fn bound_inside_is_counted_per_transport_and_address() {
        let net = LocalNet::new(LocalPort::parse("127.0.0.1:5432", PortReason::Caller).unwrap());
        let tcp = |addr| net.reach(a(addr), Transport::Tcp);
        assert_eq!(tcp("127.0.0.1:8080"), Reach::Refused);
        net.bound(a("127.0.0.2:8080"), Transport::Tcp, None);
        net.bound(a("127.0.0.1:8080"), Transport::Udp, None);
        // Another loopback address, another transport: still refused.
        assert_eq!(tcp("127.0.0.1:8080"), Reach::Refused);
        assert_eq!(tcp("127.0.0.2:8080"), Reach::BoundInside);
        net.bound(a("0.0.0.0:9000"), Transport::Tcp, None);
        assert_eq!(tcp("[::ffff:127.0.0.1]:9000"), Reach::BoundInside);
        assert_eq!(tcp("0.0.0.0:5432"), Reach::Named(PortReason::Caller));
        assert_eq!(tcp("127.0.0.1:5433"), Reach::Refused);
        assert_eq!(tcp("[::1]:22"), Reach::Refused);
        assert_eq!(net.reach(a("127.0.0.1:0"), Transport::Ping), Reach::Echo);
        assert_eq!(tcp("192.0.2.200:22"), Reach::OtherHost);
    }

    #[test]
    fn a_port_bound_inside_then_taken_outside_is_refused() {
        use std::net::TcpListener;
        use std::os::fd::AsFd;
        let net = LocalNet::new(Vec::new());
        // The sandbox's server, learnt with its cookie: reachable.
        let inside = TcpListener::bind("127.0.0.1:0").expect("listen");
        let at = inside.local_addr().expect("address");
        let cookie = sys::socket_cookie(inside.as_fd()).expect("SO_COOKIE");
        net.bound(at, Transport::Tcp, Some(cookie));
        assert_eq!(net.reach(at, Transport::Tcp), Reach::BoundInside);
        // Closed: nobody there, the kernel itself refuses the connection.
        drop(inside);
        assert_eq!(net.reach(at, Transport::Tcp), Reach::BoundInside);
        // The same port taken by a server outside the sandbox: refused.
        let outside = TcpListener::bind(at).expect("the port again");
        assert_eq!(net.reach(at, Transport::Tcp), Reach::Refused);
        // Learnt without a cookie (no SO_COOKIE): held, as before.
        net.bound(at, Transport::Tcp, None);
        assert_eq!(net.reach(at, Transport::Tcp), Reach::BoundInside);
        drop(outside);
    }

    #[test]
    fn resolvers_and_proxies_are_read_as_their_tools_read_them() {
        let conf = "# stub\nnameserver 127.0.0.53\noptions edns0\nnameserver fe80::1%eth0\n";
        assert_eq!(
            nameservers(conf).collect::<Vec<_>>(),
            [a("127.0.0.53:53"), a("[fe80::1]:53")]
        );
        assert_eq!(
            proxy_addresses("http://u:p@127.0.0.1:3128/"),
            [a("127.0.0.1:3128")]
        );
        assert_eq!(proxy_addresses("socks5h://[::1]"), [a("[::1]:1080")]);
        assert_eq!(proxy_addresses("localhost:8080").len(), 2);
        assert_eq!(proxy_addresses("https://127.0.0.1"), [a("127.0.0.1:443")]);
        assert!(proxy_addresses("http://proxy.corp:3128").is_empty());
        assert!(proxy_addresses("http://127.0.0.1:x").is_empty());
    }

    #[test]
    fn allow_connect_takes_addresses_and_localhost() {
        assert_eq!(
            LocalPort::parse("[::1]:22", PortReason::Caller).unwrap()[0].address,
            a("[::1]:22")
        );
        assert!(LocalPort::parse("127.0.0.1:0", PortReason::Caller).is_err());
        assert!(LocalPort::parse("db:5432", PortReason::Caller).is_err());
        assert!(LocalPort::parse("::1", PortReason::Caller).is_err());
        assert_eq!(
            allow_option(a("0.0.0.0:22")),
            "--allow-connect 127.0.0.1:22"
        );
        assert_eq!(
            allow_option(a("[::ffff:127.0.0.1]:22")),
            "--allow-connect 127.0.0.1:22"
        );
    }

    #[test]
    fn gradle_lock_pings_are_nine_or_ten_bytes_beginning_with_one() {
        let id = 6_379_527_810_439_397_790u64.to_be_bytes();
        let old = [&[1u8][..], &id].concat();
        assert!(is_gradle_lock_ping(&old));
        for kind in 0..=2u8 {
            assert!(is_gradle_lock_ping(&[&old[..], &[kind]].concat()));
        }
        assert!(!is_gradle_lock_ping(&[&old[..], &[3]].concat()));
        assert!(!is_gradle_lock_ping(&[&[2u8][..], &id].concat()));
        assert!(!is_gradle_lock_ping(&old[..8]));
        assert!(!is_gradle_lock_ping(b"touch ~/pwned\n"));
    }

    #[test]
    fn proc_net_addresses_are_decoded_in_machine_order() {
        let v4 = format!("{:08X}:1F90", u32::from_ne_bytes([127, 0, 0, 1]));
        assert_eq!(proc_net_address(&v4), Some(a("127.0.0.1:8080")));
        let one = u32::from_ne_bytes([0, 0, 0, 1]);
        let v6 = format!("{:08X}{:08X}{:08X}{:08X}:0016", 0, 0, 0, one);
        assert_eq!(proc_net_address(&v6), Some(a("[::1]:22")));
    }

    #[test]
    fn a_listener_of_this_process_is_found_with_its_pid() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = server.local_addr().unwrap();
        let found = find_listener(at, Transport::Tcp).unwrap();
        assert_eq!(found.pid, Some(std::process::id()));
        assert_eq!(found.uid, crate::sys::uid());
        drop(server);
        assert_eq!(find_listener(at, Transport::Tcp), None);
    }
}
