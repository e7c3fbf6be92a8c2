//! Serving one listener: each notified `connect` and `sendto` is read from
//! the confined thread, checked still pending, decided, and performed here
//! on the thread's own socket, with the address read and resolved here. A
//! `bind` is left to the kernel, under the thread's own Landlock domain,
//! once its socket is noted (see [`continue_bind`]).

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::filter::{self, Call};
use super::rules::{Destination, Verdict};
use super::{RefusedConnect, Shared, Target};
use crate::local_net::{self, Transport};
use crate::sys;

/// The most of a `sendto` buffer copied: a datagram larger than this is
/// larger than any socket accepts; a stream send is a partial write.
const MAX_SEND: usize = 1 << 20;

/// Serves `listener` until no process uses its filter any more. `command`
/// is the pid of the confined command it belongs to.
pub(crate) fn serve(listener: OwnedFd, command: i32, shared: Arc<Shared>) {
    sys::prefer_sync_wake_up(&listener);
    let listener = Arc::new(listener);
    loop {
        match sys::wait_notification(&listener) {
            Ok(sys::Ready::Notification) => {}
            Ok(sys::Ready::Gone) | Err(_) => return,
        }
        let Ok(notif) = sys::recv_notification(&listener) else {
            // ENOENT: the thread went away between poll and receive.
            continue;
        };
        handle(&listener, &notif, command, &shared);
    }
}

/// The answer to one call: a value, or an errno.
type Outcome = Result<i64, i32>;

fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn handle(listener: &Arc<OwnedFd>, notif: &sys::Notification, command: i32, shared: &Shared) {
    let id = notif.id;
    let Some(call) = filter::call(notif.data.arch, notif.data.nr) else {
        let _ = sys::answer(listener, id, 0, libc::ENOSYS);
        return;
    };
    match prepare(listener, notif, call, command, shared) {
        Ok(Some(work)) => work.run(listener, id, shared),
        Ok(None) => {}
        Err(errno) => {
            let _ = sys::answer(listener, id, 0, errno);
        }
    }
}

/// A call read, checked and decided, ready to perform.
struct Work {
    call: Call,
    socket: OwnedFd,
    /// The address to hand the kernel: the one read, or for a pathname
    /// socket `/proc/self/fd/N` of the inode opened here.
    address: Vec<u8>,
    /// Keeps the descriptor named in `address` open.
    _target: Option<File>,
    data: Vec<u8>,
    flags: i32,
    /// A UDP socket sending to this machine: the port the kernel gives it
    /// on the way is learnt as bound inside, so that a server of the
    /// sandbox can answer it.
    udp_local: bool,
}

/// Reads the call's address (and data) from the thread, fetches its
/// socket, resolves a pathname against the thread's working directory,
/// checks the thread is still waiting, and decides. `Ok(None)`: the thread
/// is gone, nothing to answer.
fn prepare(
    listener: &OwnedFd,
    notif: &sys::Notification,
    call: Call,
    command: i32,
    shared: &Shared,
) -> Result<Option<Work>, i32> {
    let tid = notif.pid as i32;
    let args = notif.data.args;
    let (addr_at, addr_len) = match call {
        // A unix socket's bind is the kernel's, under the command's own
        // Landlock rules (continue_bind); a port is bound here, on the
        // command's socket, and learnt as bound inside.
        Call::Bind if !binds_port(notif) => {
            continue_bind(listener, notif, shared);
            return Ok(None);
        }
        Call::Bind => (args[1], args[2]),
        Call::Connect => (args[1], args[2]),
        Call::SendTo => (args[4], args[5]),
    };
    // The kernel takes the length as an int and refuses more than a
    // sockaddr_storage.
    let addr_len = addr_len as u32 as i32;
    if addr_len < 0 || addr_len as usize > size_of::<libc::sockaddr_storage>() {
        return Err(libc::EINVAL);
    }
    let mut address = vec![0u8; addr_len as usize];
    read_exactly(tid, addr_at, &mut address)?;
    let mut data = Vec::new();
    if call == Call::SendTo {
        let len = (args[2] as usize).min(MAX_SEND);
        data.resize(len, 0);
        read_exactly(tid, args[1], &mut data)?;
    }
    let pidfd = open_process(tid).map_err(|e| errno_of(&e))?;
    let socket = sys::pidfd_getfd(&pidfd, args[0] as i32).map_err(|e| errno_of(&e))?;
    let unix = parse_unix(&address);
    // A relative socket path is resolved against the thread's directory.
    let cwd = match &unix {
        Some(Unix::Path(p)) if !p.is_absolute() => {
            Some(open_path(Path::new(&format!("/proc/{tid}/cwd")), false)?)
        }
        _ => None,
    };
    let flags = if call == Call::SendTo {
        args[3] as i32
    } else {
        0
    };
    let mut work = Work {
        call,
        socket,
        address,
        _target: None,
        data,
        flags,
        udp_local: false,
    };
    if call == Call::Bind {
        if let Some(at) = parse_inet(&work.address) {
            let transport = transport_of(&work.socket);
            if shared
                .rules
                .net
                .joins_group_outside(work.socket.as_fd(), at, transport)
            {
                return Err(libc::EADDRINUSE);
            }
        }
        if !sys::still_waiting(listener, notif.id) {
            return Ok(None);
        }
        return Ok(Some(work));
    }
    // What the command's own binds made, asked of the kernel now.
    shared.settle();
    let destination = match unix {
        Some(Unix::Path(path)) => {
            let path = match &cwd {
                Some(cwd) => proc_fd(cwd).join(&path),
                None => path,
            };
            let target = open_path(&path, false)?;
            let meta = target.metadata().map_err(|e| errno_of(&e))?;
            if !meta.file_type().is_socket() {
                // What the kernel answers for a file that is no socket.
                return Err(libc::ECONNREFUSED);
            }
            let id = (meta.dev(), meta.ino());
            // Its name is asked of the kernel only when its identity
            // alone does not decide.
            let resolved = if shared.known(id) {
                PathBuf::new()
            } else {
                proc_link(&target)?
            };
            work.address = unix_address(&proc_fd(&target))?;
            work._target = Some(target);
            Destination::Path {
                resolved,
                id,
                changed: ctime(&meta),
            }
        }
        Some(Unix::Abstract(name)) => Destination::Abstract(name),
        Some(Unix::Unnamed) | None => match parse_inet(&work.address) {
            Some(inet) => {
                let transport = transport_of(&work.socket);
                work.udp_local =
                    transport == Transport::Udp && shared.rules.net.is_local(inet.ip());
                Destination::Inet(inet, transport)
            }
            None => Destination::Other,
        },
    };
    if !sys::still_waiting(listener, notif.id) {
        return Ok(None);
    }
    let verdict = {
        let bound = shared.bound.lock().map_err(|_| libc::EIO)?;
        shared.rules.connect(&destination, &bound)
    };
    if verdict == Verdict::Refuse {
        // What the kernel's own lines answer: RESOLVE_UNIX (ABI 9) EACCES,
        // the abstract-socket scope (ABI 6) EPERM.
        let (target, errno) = match destination {
            Destination::Path { resolved, .. } => (Target::Path(resolved), libc::EACCES),
            Destination::Abstract(name) => {
                // A name nobody holds is refused the way the kernel refuses
                // it, as a connection nobody accepts: a client waiting for
                // a server it started itself retries on that.
                let kind = sys::socket_type(work.socket.as_fd()).unwrap_or(libc::SOCK_STREAM);
                if !sys::unix_address_taken(kind, &work.address) {
                    return Err(libc::ECONNREFUSED);
                }
                (Target::Abstract(name), libc::EPERM)
            }
            // Gradle's cache-lock ping to the user's own daemon: it only
            // makes the owner release a lock on a shared cache.
            Destination::Inet(_, Transport::Udp)
                if call == Call::SendTo && local_net::is_gradle_lock_ping(&work.data) =>
            {
                return Ok(Some(work));
            }
            Destination::Inet(address, transport) => {
                // A port nobody listens on is refused the way the kernel
                // refuses it: a client waiting for a server it started
                // itself retries on ECONNREFUSED, not on EACCES.
                if transport == Transport::Tcp
                    && call == Call::Connect
                    && !local_net::listening(address, transport)
                {
                    return Err(libc::ECONNREFUSED);
                }
                (Target::Port { address, transport }, libc::EACCES)
            }
            _ => return Err(libc::EACCES),
        };
        shared.record(RefusedConnect::new(command, target));
        return Err(errno);
    }
    Ok(Some(work))
}

/// Lets the kernel perform a `bind`, after noting its socket.
///
/// Unlike a `connect`, the kernel's own lines decide a `bind` completely:
/// making a socket file is Landlock's `MAKE_SOCK`, handled on every ABI and
/// granted on the writable roots only, so the kernel refuses a name
/// outside them (`EACCES`) whatever address it reads; an abstract name or
/// an IP port writes no file. Nothing here is decided or recorded from the
/// address either: what the socket was bound to is asked of the kernel by
/// the socket later ([`Shared::settle`]). So the second read of the
/// address, after a second thread may have swapped it, changes nothing,
/// and the name bound is exactly the program's: `getsockname` and
/// `/proc/net/unix` show the path it passed.
/// Whether the `bind` notified binds a TCP or UDP port: its socket's
/// protocol, which the command cannot change, not the address it passed.
fn binds_port(notif: &sys::Notification) -> bool {
    open_process(notif.pid as i32)
        .and_then(|pidfd| sys::pidfd_getfd(&pidfd, notif.data.args[0] as i32))
        .is_ok_and(|socket| {
            matches!(
                sys::socket_protocol(socket.as_fd()),
                Ok(libc::IPPROTO_TCP | libc::IPPROTO_UDP)
            )
        })
}

fn continue_bind(listener: &OwnedFd, notif: &sys::Notification, shared: &Shared) {
    let tid = notif.pid as i32;
    // A socket that cannot be fetched (a non-dumpable process) is bound
    // all the same, and not recorded as bound inside.
    let socket =
        open_process(tid).and_then(|pidfd| sys::pidfd_getfd(&pidfd, notif.data.args[0] as i32));
    if !sys::still_waiting(listener, notif.id) {
        return;
    }
    if let Ok(socket) = socket {
        shared.note_bind(socket.as_fd());
    }
    let _ = sys::answer_continue(listener, notif.id);
}

impl Work {
    /// Performs the call and answers. A call that may wait long (a
    /// handshake with another host, a full datagram queue) is performed on
    /// a thread of its own so the listener keeps serving the others.
    fn run(self, listener: &Arc<OwnedFd>, id: u64, shared: &Shared) {
        if self.may_block() {
            let shared_listener = Arc::clone(listener);
            let spawned = std::thread::Builder::new()
                .name("strument-connect-call".into())
                .spawn(move || {
                    let outcome = self.perform(false);
                    respond(&shared_listener, id, outcome);
                });
            if spawned.is_err() {
                respond(listener, id, Err(libc::EAGAIN));
            }
            return;
        }
        let outcome = self.perform(true);
        if outcome.is_ok() && self.udp_local {
            shared.learn_address(self.socket.as_fd(), Transport::Udp);
        }
        if outcome.is_ok() && self.call == Call::Bind {
            shared.learn_address(self.socket.as_fd(), transport_of(&self.socket));
        }
        respond(listener, id, outcome);
    }

    /// Whether performing this may wait: a blocking socket connecting to
    /// another host, or sending (tried without waiting first).
    fn may_block(&self) -> bool {
        // A UDP connect only names the peer: it never waits.
        let remote = !self.udp_local
            && match self.call {
                Call::Connect => parse_inet(&self.address).is_some_and(|a| !a.ip().is_loopback()),
                Call::Bind | Call::SendTo => false,
            };
        remote && !sys::is_nonblocking(self.socket.as_fd()).unwrap_or(true)
    }

    fn perform(&self, first_try: bool) -> Outcome {
        let fd = self.socket.as_fd();
        let result = match self.call {
            Call::Connect => sys::connect(fd, &self.address).map(|()| 0),
            // A port's bind (a unix socket's is the kernel's: continue_bind).
            Call::Bind => sys::bind(fd, &self.address).map(|()| 0),
            Call::SendTo => {
                let flags = if first_try {
                    self.flags | libc::MSG_DONTWAIT
                } else {
                    self.flags
                };
                let sent = sys::sendto(fd, &self.data, flags, &self.address);
                match sent {
                    // Would wait, on a socket the command left blocking:
                    // wait for it, the way the command would have.
                    Err(e)
                        if first_try
                            && e.raw_os_error() == Some(libc::EAGAIN)
                            && self.flags & libc::MSG_DONTWAIT == 0
                            && !sys::is_nonblocking(fd).unwrap_or(true) =>
                    {
                        return self.perform(false);
                    }
                    other => other.map(|n| n as i64),
                }
            }
        };
        result.map_err(|e| errno_of(&e))
    }
}

/// The transport of an IPv4 or IPv6 socket, by its protocol.
fn transport_of(socket: &OwnedFd) -> Transport {
    Transport::from_protocol(sys::socket_protocol(socket.as_fd()).unwrap_or(0))
}

fn respond(listener: &OwnedFd, id: u64, outcome: Outcome) {
    let _ = match outcome {
        Ok(val) => sys::answer(listener, id, val, 0),
        Err(errno) => sys::answer(listener, id, 0, errno),
    };
}

fn read_exactly(tid: i32, at: u64, buf: &mut [u8]) -> Result<(), i32> {
    match sys::read_memory(tid, at, buf) {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(_) => Err(libc::EFAULT),
        Err(e) => Err(errno_of(&e)),
    }
}

/// A pidfd for the process thread `tid` belongs to: `pidfd_open` takes
/// only a thread-group leader (another thread: `EINVAL`, from Linux 6.9
/// `ENOENT`).
fn open_process(tid: i32) -> io::Result<OwnedFd> {
    match sys::pidfd_open(tid) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) => {
            let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
            let tgid = status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
            sys::pidfd_open(tgid)
        }
        other => other,
    }
}

enum Unix {
    Path(PathBuf),
    Abstract(Vec<u8>),
    Unnamed,
}

/// A unix socket address: `sun_family` then `sun_path`, a path up to its
/// first NUL, or an abstract name after a leading NUL.
fn parse_unix(address: &[u8]) -> Option<Unix> {
    let family = u16::from_ne_bytes(address.get(..2)?.try_into().ok()?);
    if i32::from(family) != libc::AF_UNIX {
        return None;
    }
    let name = &address[2..];
    Some(match name.first() {
        None => Unix::Unnamed,
        Some(0) => Unix::Abstract(name[1..].to_vec()),
        Some(_) => {
            let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
            Unix::Path(PathBuf::from(OsStr::from_bytes(&name[..end])))
        }
    })
}

fn parse_inet(address: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(address.get(..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(address.get(2..4)?.try_into().ok()?);
    if family == libc::AF_INET {
        let ip: [u8; 4] = address.get(4..8)?.try_into().ok()?;
        Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)))
    } else if family == libc::AF_INET6 {
        let ip: [u8; 16] = address.get(8..24)?.try_into().ok()?;
        Some(SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(ip),
            port,
            0,
            0,
        )))
    } else {
        None
    }
}

/// A `sockaddr_un` for `path`, as bytes; `ENAMETOOLONG` past `sun_path`.
pub(crate) fn unix_address(path: &Path) -> Result<Vec<u8>, i32> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= 108 {
        return Err(libc::ENAMETOOLONG);
    }
    let mut out = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    out.extend_from_slice(bytes);
    out.push(0);
    Ok(out)
}

/// Opens `path` with `O_PATH`, following symlinks as `connect` does.
fn open_path(path: &Path, directory: bool) -> Result<File, i32> {
    let mut flags = libc::O_PATH | libc::O_CLOEXEC;
    if directory {
        flags |= libc::O_DIRECTORY;
    }
    OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| errno_of(&e))
}

fn proc_fd(file: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// The path the kernel gives an open descriptor.
fn proc_link(file: &File) -> Result<PathBuf, i32> {
    std::fs::read_link(proc_fd(file)).map_err(|e| errno_of(&e))
}

/// The inode's change time: a rename or a new link moves it, and no
/// unprivileged call sets it back.
fn ctime(meta: &std::fs::Metadata) -> Option<std::time::SystemTime> {
    let secs = u64::try_from(meta.ctime()).ok()?;
    let nanos = u32::try_from(meta.ctime_nsec()).ok()?;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sockaddr(path: &[u8]) -> Vec<u8> {
        let mut a = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(path);
        a
    }

    #[test]
    fn unix_addresses_are_read_as_the_kernel_reads_them() {
        // A path ends at its first NUL, whatever follows.
        match parse_unix(&sockaddr(b"/tmp/s.sock\0garbage")) {
            Some(Unix::Path(p)) => assert_eq!(p, Path::new("/tmp/s.sock")),
            _ => panic!("not a path"),
        }
        // A leading NUL makes every following byte the abstract name.
        match parse_unix(&sockaddr(b"\0name\0x")) {
            Some(Unix::Abstract(n)) => assert_eq!(n, b"name\0x"),
            _ => panic!("not abstract"),
        }
        assert!(matches!(parse_unix(&sockaddr(b"")), Some(Unix::Unnamed)));
        // Another family is not a unix address; too short is nothing.
        let mut inet = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        inet.extend_from_slice(&[0x1f, 0x90, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(parse_unix(&inet).is_none());
        assert_eq!(
            parse_inet(&inet),
            Some(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert!(parse_unix(&[1]).is_none());
    }

    #[test]
    fn a_socket_path_too_long_for_sun_path_is_refused() {
        assert_eq!(
            unix_address(Path::new(&"x".repeat(108))),
            Err(libc::ENAMETOOLONG)
        );
        let a = unix_address(Path::new("/proc/self/fd/7")).expect("fits");
        assert_eq!(a.len(), 2 + 15 + 1);
    }
}
