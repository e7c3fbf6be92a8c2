//! Serving one listener: each notified `connect`, `sendto`, `sendmsg` and
//! `sendmmsg` is read from the confined thread, checked still pending,
//! decided, and performed here on the thread's own socket, with the
//! address, data and control messages read and resolved here. A unix
//! socket's `bind` is left to the kernel, under the thread's own Landlock
//! domain, once its socket is noted (see [`continue_bind`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::filter::{self, Call};
use super::message::{self, Cmsg, Header, Layout};
use super::rules::{Destination, Verdict};
use super::{RefusedConnect, Shared, Target};
use crate::local_net::{self, Transport};
use crate::sys;

/// The most of one message's data copied: a datagram larger than this is
/// larger than any socket accepts (`EMSGSIZE`); a stream send is a partial
/// write.
const MAX_SEND: usize = 1 << 20;

/// One listener, and the calls it performs or performed whose answer may
/// find the thread gone from its wait.
pub(crate) struct Served {
    fd: OwnedFd,
    /// By thread: a call (number and arguments) performed here, and where
    /// it stands. A signal that interrupts a thread after its call was
    /// received here (Linux before 5.19, without
    /// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`) makes the kernel restart
    /// the call: the same thread's next notification with the same number
    /// and arguments. It gets the first call's result instead of a second
    /// send or connect.
    performed: Mutex<HashMap<i32, Performed>>,
    /// By pid: a pidfd of each process that is its own thread-group leader
    /// and called here, kept so that each call costs one `pidfd_getfd`
    /// instead of a `pidfd_open` (a pidfs file made and freed) as well.
    processes: Mutex<HashMap<i32, Arc<OwnedFd>>>,
}

/// How many processes' pidfds a listener keeps: past it the table starts
/// anew (a build's short-lived processes would otherwise fill it).
const PROCESSES_KEPT: usize = 64;

/// A call performed here: its number, its arguments, and where it stands.
struct Performed {
    nr: i32,
    args: [u64; 6],
    state: Stage,
}

enum Stage {
    /// Being performed on a thread of its own; the notifications of its
    /// restarts, to answer when it ends (a thread waits in one call at a
    /// time, so a notification of the same call from that thread meanwhile
    /// is a restart).
    Running(Vec<u64>),
    /// Done, and its answer found the thread gone from its wait.
    Done(Outcome),
}

impl Served {
    fn new(fd: OwnedFd) -> Served {
        Served {
            fd,
            performed: Mutex::new(HashMap::new()),
            processes: Mutex::new(HashMap::new()),
        }
    }

    /// The descriptor `fd` of the thread `tid`, fetched with
    /// `pidfd_getfd`, and a pidfd of its process. A pidfd kept from an
    /// earlier call names the process it was opened for, never a later
    /// one given the same pid: once that process has ended its
    /// `pidfd_getfd` fails with `ESRCH`, and the pid is opened anew. Only a
    /// thread-group leader's is kept: a pid is its process's for as long as
    /// the process lives, while another thread's id can be taken by a
    /// thread of another process when it ends.
    fn fetch(&self, tid: i32, fd: i32) -> io::Result<(Arc<OwnedFd>, OwnedFd)> {
        let kept = self
            .processes
            .lock()
            .ok()
            .and_then(|kept| kept.get(&tid).cloned());
        if let Some(pidfd) = kept {
            match sys::pidfd_getfd(&pidfd, fd) {
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    if let Ok(mut kept) = self.processes.lock() {
                        kept.remove(&tid);
                    }
                }
                other => return other.map(|socket| (pidfd, socket)),
            }
        }
        let (pidfd, leader) = open_process(tid)?;
        let pidfd = Arc::new(pidfd);
        if leader {
            if let Ok(mut kept) = self.processes.lock() {
                if kept.len() >= PROCESSES_KEPT {
                    kept.clear();
                }
                kept.insert(tid, Arc::clone(&pidfd));
            }
        }
        let socket = sys::pidfd_getfd(&pidfd, fd)?;
        Ok((pidfd, socket))
    }

    /// Whether `notif` restarts a call performed here: answered (or, while
    /// that call still runs, left to be answered when it ends).
    fn restarted(&self, notif: &sys::Notification) -> bool {
        let Ok(mut performed) = self.performed.lock() else {
            return false;
        };
        let tid = notif.pid as i32;
        let Some(entry) = performed.get_mut(&tid) else {
            return false;
        };
        if !entry.is(notif) {
            // The thread moved on: what it left is forgotten.
            if matches!(entry.state, Stage::Done(_)) {
                performed.remove(&tid);
            }
            return false;
        }
        match &mut entry.state {
            Stage::Running(restarts) => restarts.push(notif.id),
            Stage::Done(outcome) => {
                let outcome = *outcome;
                performed.remove(&tid);
                drop(performed);
                self.answer_performed(notif, outcome);
            }
        }
        true
    }

    /// Whether the call `notif` (or the one it restarts) is being
    /// performed on a thread of its own.
    fn runs(&self, notif: &sys::Notification) -> bool {
        self.performed.lock().is_ok_and(|performed| {
            performed
                .get(&(notif.pid as i32))
                .is_some_and(|e| e.is(notif) && matches!(e.state, Stage::Running(_)))
        })
    }

    /// Ends with `ERESTARTSYS` the wait of a thread in `notif`, a call not
    /// performed, for a signal it is sure to take ([`interruption`]); when
    /// it no longer waits there (a kernel before 5.19 restarted the call
    /// itself), the restart to come gets `EINTR`, as a call that ended so
    /// would: never the kernel's internal code, which that thread, with no
    /// signal left to take, would hand the program.
    fn interrupt(&self, notif: &sys::Notification) {
        if let Ok(mut performed) = self.performed.lock() {
            if answer(&self.fd, notif.id, Err(ERESTARTSYS)).is_ok() {
                let tid = notif.pid as i32;
                if performed.get(&tid).is_some_and(|e| e.is(notif)) {
                    performed.remove(&tid);
                }
                return;
            }
        }
        self.answer_performed(notif, Err(libc::EINTR));
    }

    /// Notes a call about to be performed on a thread of its own.
    fn running(&self, notif: &sys::Notification) {
        if let Ok(mut performed) = self.performed.lock() {
            performed.insert(
                notif.pid as i32,
                Performed {
                    nr: notif.data.nr,
                    args: notif.data.args,
                    state: Stage::Running(Vec::new()),
                },
            );
        }
    }

    /// Answers a call performed here: the notification received, or a
    /// restart of it that came meanwhile; when the thread waits in none of
    /// them, the result is kept for the restart to come. The table stays
    /// locked throughout, so that a restart received meanwhile finds either
    /// the call still running or its result.
    fn answer_performed(&self, notif: &sys::Notification, outcome: Outcome) {
        let tid = notif.pid as i32;
        let same = |e: &Performed| e.is(notif);
        let Ok(mut performed) = self.performed.lock() else {
            let _ = answer(&self.fd, notif.id, outcome);
            return;
        };
        let ids = waiting_ids(&performed, notif);
        let answered = ids.iter().any(|id| answer(&self.fd, *id, outcome).is_ok());
        match performed.get(&tid) {
            // The thread moved on to another call: that one's entry stays.
            Some(e) if !same(e) => {}
            _ if answered => {
                performed.remove(&tid);
            }
            _ => {
                performed.insert(
                    tid,
                    Performed {
                        nr: notif.data.nr,
                        args: notif.data.args,
                        state: Stage::Done(outcome),
                    },
                );
            }
        }
    }
}

impl Served {
    /// Hands `fd` to the thread waiting in `notif` (or in a restart of it
    /// that came meanwhile) as the call's result; `false` when none waits
    /// any more, and nothing was handed.
    fn deliver_fd(&self, notif: &sys::Notification, fd: BorrowedFd<'_>, cloexec: bool) -> bool {
        let tid = notif.pid as i32;
        let Ok(mut performed) = self.performed.lock() else {
            return sys::add_fd_and_answer(&self.fd, notif.id, fd, cloexec).is_ok();
        };
        let handed = waiting_ids(&performed, notif)
            .iter()
            .any(|id| sys::add_fd_and_answer(&self.fd, *id, fd, cloexec).is_ok());
        if performed.get(&tid).is_some_and(|e| e.is(notif)) {
            performed.remove(&tid);
        }
        handed
    }
}

/// A confined server's `accept` or `accept4`, performed here on its
/// listening socket, so that a connection from a process outside the
/// sandbox never reaches it: a client outside may do what a server inside
/// tells it (tmux's client runs the commands its server sends). Every
/// `connect` of the sandbox's own processes is performed by this process
/// ([`sys::peer_pid`] then names it); a unix connection from any other pid
/// is closed here, recorded, and the next one is taken (`EAGAIN` for a
/// non-blocking socket with none left). TCP and UDP connections are not looked at:
/// browsers and tools outside reach a development server as before.
fn accept(
    served: &Arc<Served>,
    notif: &sys::Notification,
    call: Call,
    command: i32,
    shared: &Arc<Shared>,
) {
    let tid = notif.pid as i32;
    let args = notif.data.args;
    let fetched = served.fetch(tid, args[0] as i32);
    let (_, socket) = match fetched {
        Ok(fetched) => fetched,
        Err(e) => {
            let _ = sys::answer(&served.fd, notif.id, 0, errno_of(&e));
            return;
        }
    };
    let flags = if call == Call::Accept4 {
        args[3] as i32
    } else {
        0
    };
    if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        let _ = sys::answer(&served.fd, notif.id, 0, libc::EINVAL);
        return;
    }
    let accepting = Accepting {
        tid,
        socket,
        flags,
        addr: args[1],
        addrlen: args[2],
        command,
    };
    match accepting.take(shared) {
        Taken::Connection(conn) => accepting.deliver(served, notif, &conn),
        Taken::Failed(errno) => {
            let _ = sys::answer(&served.fd, notif.id, 0, errno);
        }
        Taken::WouldWait => {
            // A blocking socket with nothing waiting: watched by the
            // waiter, so the listener keeps serving the others (the
            // client's own connect among them).
            served.running(notif);
            let pending = Box::new(Pending {
                accepting,
                served: Arc::clone(served),
                notif: *notif,
                shared: Arc::clone(shared),
            });
            if let Err(pending) = Waiter::watch(shared, pending) {
                pending
                    .served
                    .answer_performed(&pending.notif, Err(libc::EAGAIN));
            }
        }
    }
}

/// An accept waiting for a connection, watched by the [`Waiter`].
struct Pending {
    accepting: Accepting,
    served: Arc<Served>,
    notif: sys::Notification,
    shared: Arc<Shared>,
}

/// The accepts of blocking sockets with no connection yet, watched by one
/// thread of the supervisor's (an epoll set of their sockets): a waiting
/// accept costs no thread of its own. Every quarter of a second it also
/// lets go of those whose thread no longer waits, and ends those with a
/// signal pending ([`interruption`]), and the blocking connects performed
/// on threads of their own ([`Waiter::watch_connect`]) likewise.
pub(crate) struct Waiter {
    epoll: OwnedFd,
    next: std::sync::atomic::AtomicU64,
    pending: Mutex<HashMap<u64, Box<Pending>>>,
    connects: Mutex<HashMap<u64, Connecting>>,
}

/// A blocking `connect` performed on a thread of its own: the
/// notification its thread waits in (the call's, or a restart's).
struct Connecting {
    served: Arc<Served>,
    id: u64,
    tid: i32,
}

impl Waiter {
    /// Hands `pending` to the waiter of `shared`, started the first time;
    /// `Err(pending)` when it cannot be.
    fn watch(shared: &Shared, pending: Box<Pending>) -> Result<(), Box<Pending>> {
        let Ok(waiter) = Waiter::of(shared) else {
            return Err(pending);
        };
        waiter.add(pending)
    }

    /// The waiter of `shared`, started the first time.
    fn of(shared: &Shared) -> Result<&Arc<Waiter>, i32> {
        let waiter = shared.waiter.get_or_init(|| {
            let waiter = Arc::new(Waiter {
                epoll: sys::epoll_new().map_err(|e| errno_of(&e))?,
                next: std::sync::atomic::AtomicU64::new(0),
                pending: Mutex::new(HashMap::new()),
                connects: Mutex::new(HashMap::new()),
            });
            let own = Arc::clone(&waiter);
            sys::spawn_unsignalled("strument-connect-accept".into(), move || Waiter::run(&own))
                .map_err(|e| errno_of(&e))?;
            Ok(waiter)
        });
        waiter.as_ref().map_err(|e| *e)
    }

    /// Watches the thread waiting in `notif`, a blocking `connect` being
    /// performed on a thread of its own, for a signal: the kernel's own
    /// connect would return for it (or restart), while this one may wait
    /// for the kernel's connect timeout, two minutes to a host that never
    /// answers. Unwatched when the waiter cannot start: the call then ends
    /// as before, when the connect does.
    fn watch_connect(shared: &Shared, served: &Arc<Served>, notif: &sys::Notification) {
        let Ok(waiter) = Waiter::of(shared) else {
            return;
        };
        let token = waiter
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut connects) = waiter.connects.lock() {
            connects.insert(
                token,
                Connecting {
                    served: Arc::clone(served),
                    id: notif.id,
                    tid: notif.pid as i32,
                },
            );
        }
    }

    fn add(&self, pending: Box<Pending>) -> Result<(), Box<Pending>> {
        let token = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let fd = pending.accepting.socket.as_raw_fd();
        let Ok(mut map) = self.pending.lock() else {
            return Err(pending);
        };
        map.insert(token, pending);
        if sys::epoll_add(&self.epoll, fd, token, true).is_err() {
            return map.remove(&token).map_or(Ok(()), Err);
        }
        Ok(())
    }

    fn remove(&self, token: u64) -> Option<Box<Pending>> {
        let pending = self.pending.lock().ok()?.remove(&token)?;
        let _ = sys::epoll_del(&self.epoll, pending.accepting.socket.as_raw_fd());
        Some(pending)
    }

    /// Ends once its supervisor is gone and nothing waits.
    fn run(this: &Arc<Waiter>) {
        let mut swept = Instant::now();
        loop {
            let idle = this.pending.lock().map_or(true, |map| map.is_empty())
                && this.connects.lock().map_or(true, |map| map.is_empty());
            if idle && Arc::strong_count(this) == 1 {
                return;
            }
            let Ok(ready) = sys::epoll_wait_for(&this.epoll, Some(250)) else {
                return;
            };
            for (token, _) in ready {
                let Some(pending) = this.remove(token) else {
                    continue;
                };
                let Pending {
                    accepting,
                    served,
                    notif,
                    shared,
                } = *pending;
                match accepting.take(&shared) {
                    Taken::Connection(conn) => accepting.deliver(&served, &notif, &conn),
                    Taken::Failed(errno) => served.answer_performed(&notif, Err(errno)),
                    // Another took it first: wait for the next.
                    Taken::WouldWait => {
                        let again = Box::new(Pending {
                            accepting,
                            served,
                            notif,
                            shared,
                        });
                        if let Err(p) = this.add(again) {
                            p.served.answer_performed(&p.notif, Err(libc::EAGAIN));
                        }
                    }
                }
            }
            if swept.elapsed() >= std::time::Duration::from_millis(250) {
                swept = Instant::now();
                this.sweep();
            }
        }
    }

    /// Lets go of the accepts and connects whose thread no longer waits,
    /// and ends those whose thread has a signal pending, as the kernel's
    /// own call would return for it (Ctrl-C in a Python server or client,
    /// Ctrl-Z, a `SIGTERM`): with `ERESTARTSYS` where the thread will take
    /// the signal, so that the kernel restarts the call after a handler
    /// with `SA_RESTART` or a stop, and otherwise fails it with `EINTR`
    /// ([`interruption`]). A connect goes on meanwhile on its own thread:
    /// a restart of it waits for that connect, as the kernel's restarted
    /// connect waits for the handshake under way, and after `EINTR` it
    /// completes in the background, as POSIX says of an interrupted
    /// connect.
    fn sweep(&self) {
        let accepts: Vec<(u64, Option<i32>)> = match self.pending.lock() {
            Ok(map) => map
                .iter()
                .filter_map(|(token, p)| {
                    if !sys::still_waiting(&p.served.fd, p.notif.id) {
                        Some((*token, None))
                    } else {
                        interruption(p.accepting.tid).map(|errno| (*token, Some(errno)))
                    }
                })
                .collect(),
            Err(_) => return,
        };
        for (token, errno) in accepts {
            if let Some(p) = self.remove(token) {
                match errno {
                    Some(ERESTARTSYS) => p.served.interrupt(&p.notif),
                    _ => p.served.answer_performed(&p.notif, Err(libc::EINTR)),
                }
            }
        }
        let Ok(mut connects) = self.connects.lock() else {
            return;
        };
        connects.retain(|_, c| {
            if !sys::still_waiting(&c.served.fd, c.id) {
                return false;
            }
            match interruption(c.tid) {
                // Only this wait is answered: the connect's own answer,
                // when it ends, goes to a restart or is kept for one.
                Some(errno) => {
                    let _ = sys::answer(&c.served.fd, c.id, 0, errno);
                    false
                }
                None => true,
            }
        });
    }
}

/// One `accept` being performed: the thread, its listening socket, its
/// `accept4` flags and where it wants the peer's address.
struct Accepting {
    tid: i32,
    socket: OwnedFd,
    flags: i32,
    addr: u64,
    addrlen: u64,
    command: i32,
}

/// What one try at taking a connection came to.
enum Taken {
    Connection(OwnedFd),
    Failed(i32),
    /// The socket is blocking and no connection waits on it: the
    /// [`Waiter`] watches it.
    WouldWait,
}

/// Serializes the accepts and connects tried here without waiting
/// ([`without_waiting`]), so that two of them never undo each other.
static NONBLOCKING: Mutex<()> = Mutex::new(());

/// Makes `call` on `fd` without waiting: a socket the command left
/// blocking is made non-blocking for that one call (its flags read once,
/// set, and set back); also `true` when it was blocking. The command's
/// thread waits in the very call performed here, and its others have no
/// use for the socket meanwhile (one being connected, or listening, whose
/// accepts all wait here), so none of them sees the change.
fn without_waiting<T>(fd: BorrowedFd<'_>, call: impl FnOnce() -> T) -> (T, bool) {
    let _one = NONBLOCKING.lock();
    let flags = sys::status_flags(fd).unwrap_or(libc::O_NONBLOCK);
    if flags & libc::O_NONBLOCK != 0 {
        return (call(), false);
    }
    let _ = sys::set_status_flags(fd, flags | libc::O_NONBLOCK);
    let result = call();
    let _ = sys::set_status_flags(fd, flags);
    (result, true)
}

impl Accepting {
    /// Takes the first connection from inside, refusing those from
    /// outside before it; never waits (`WouldWait` for a blocking socket
    /// with none left).
    fn take(&self, shared: &Shared) -> Taken {
        let fd = self.socket.as_fd();
        let own_flags = libc::SOCK_CLOEXEC | (self.flags & libc::SOCK_NONBLOCK);
        loop {
            // Never waiting here (a blocking socket's accepts wait in the
            // Waiter).
            let (taken, blocking) = without_waiting(fd, || sys::accept4(fd, own_flags));
            match taken {
                Ok(conn) if from_inside(&conn) => return Taken::Connection(conn),
                Ok(conn) => {
                    let peer = sys::peer_pid(conn.as_fd()).unwrap_or(0);
                    let name = sys::local_address(fd)
                        .ok()
                        .and_then(|a| parse_unix(&a))
                        .map_or_else(String::new, |u| match u {
                            Unix::Path(p) => p.display().to_string(),
                            Unix::Abstract(n) => format!("@{}", String::from_utf8_lossy(&n)),
                            Unix::Unnamed => String::new(),
                        });
                    shared.record(RefusedConnect::inbound(self.command, name, peer));
                    // The next one, if any, on a non-blocking socket too: a
                    // server polling edge-triggered (tokio) would not hear
                    // of a connection queued behind this one again.
                    drop(conn);
                }
                Err(e) if blocking && e.raw_os_error() == Some(libc::EAGAIN) => {
                    return Taken::WouldWait;
                }
                Err(e) => return Taken::Failed(errno_of(&e)),
            }
        }
    }

    /// Writes the peer's address where the thread asked for it, as the
    /// kernel's `accept` does, and hands it the connection.
    fn deliver(&self, served: &Served, notif: &sys::Notification, conn: &OwnedFd) {
        let tid = notif.pid as i32;
        if self.addr != 0 {
            let mut given = [0u8; 4];
            if read_exactly(tid, self.addrlen, &mut given).is_err() {
                served.answer_performed(notif, Err(libc::EFAULT));
                return;
            }
            let given = u32::from_ne_bytes(given) as usize;
            let peer = sys::peer_address(conn.as_fd()).unwrap_or_default();
            let written = sys::write_memory(tid, self.addr, &peer[..peer.len().min(given)])
                .and_then(|_| {
                    sys::write_memory(tid, self.addrlen, &(peer.len() as u32).to_ne_bytes())
                });
            if written.is_err() {
                served.answer_performed(notif, Err(libc::EFAULT));
                return;
            }
        }
        let cloexec = self.flags & libc::SOCK_CLOEXEC != 0;
        // Gone meanwhile: the connection closes with this copy.
        let _ = served.deliver_fd(notif, conn.as_fd(), cloexec);
    }
}

/// The kernel's own code for a call to restart once its signal is
/// handled (`<linux/errno.h>`, never seen by a program): after a handler
/// with `SA_RESTART`, or a stop and `SIGCONT`, the call is made again;
/// after any other handler it fails with `EINTR`.
const ERESTARTSYS: i32 = 512;

/// How to end the wait of thread `tid` in a call performed here, when it
/// has a signal pending that it neither blocks nor ignores
/// (`/proc/TID/status`); `None` when it has none. Its wait for the
/// supervisor's answer ends only for `SIGKILL` (a fatal signal is made one
/// only when no signal is pending already), so a handler would not run, a
/// stop would not stop it and, once a handled signal is pending, `SIGTERM`
/// would not end it.
///
/// `ERESTARTSYS` when the thread is sure to take the signal on its way
/// back (a signal sent to the thread, or to a process of one thread): the
/// kernel then does exactly what it does for its own interrupted calls.
/// A signal sent to a process of several threads may be taken by another,
/// and a thread that takes none would return the kernel's internal code
/// to the program: `EINTR` then.
fn interruption(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let mask = |name: &str| {
        field(name)
            .and_then(|v| u64::from_str_radix(v, 16).ok())
            .unwrap_or(0)
    };
    let deliverable = !mask("SigBlk:") & !mask("SigIgn:");
    let own = mask("SigPnd:") & deliverable;
    let shared = mask("ShdPnd:") & deliverable;
    let alone = field("Threads:") == Some("1");
    if own != 0 || (shared != 0 && alone) {
        Some(ERESTARTSYS)
    } else if shared != 0 {
        Some(libc::EINTR)
    } else {
        None
    }
}

/// Whether a connection taken from a confined server's socket comes from
/// the sandbox: any but a unix one does (see [`accept`]); a unix one when
/// this process made it, for a confined client (or is the caller itself).
fn from_inside(conn: &OwnedFd) -> bool {
    match sys::socket_domain(conn.as_fd()) {
        Ok(libc::AF_UNIX) => {
            sys::peer_pid(conn.as_fd()).is_ok_and(|pid| pid == std::process::id() as i32)
        }
        _ => true,
    }
}

impl Performed {
    /// Whether this is the call `notif` makes (the same number and arguments).
    fn is(&self, notif: &sys::Notification) -> bool {
        self.nr == notif.data.nr && self.args == notif.data.args
    }
}

/// The notifications a call performed here may be answered through:
/// `notif`, then the restarts of it that came while it ran, newest first.
fn waiting_ids(performed: &HashMap<i32, Performed>, notif: &sys::Notification) -> Vec<u64> {
    let mut ids = vec![notif.id];
    if let Some(Stage::Running(restarts)) = performed
        .get(&(notif.pid as i32))
        .filter(|e| e.is(notif))
        .map(|e| &e.state)
    {
        ids.extend(restarts.iter().rev());
    }
    ids
}

fn answer(listener: &OwnedFd, id: u64, outcome: Outcome) -> io::Result<()> {
    match outcome {
        Ok(val) => sys::answer(listener, id, val, 0),
        Err(errno) => sys::answer(listener, id, 0, errno),
    }
}

/// `listener`, ready to serve.
pub(crate) fn served(listener: OwnedFd) -> Arc<Served> {
    sys::prefer_sync_wake_up(&listener);
    Arc::new(Served::new(listener))
}

impl Served {
    /// The listener.
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The listener's descriptor number.
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

/// Serves the listener until no process uses its filter any more,
/// starting with `first`, a notification already received, if any.
/// `command` is the pid of the confined command it belongs to.
pub(crate) fn serve(
    served: Arc<Served>,
    command: i32,
    first: Option<sys::Notification>,
    shared: Arc<Shared>,
) {
    if let Some(notif) = first {
        handle(&served, &notif, command, &shared);
    }
    while serve_one(&served, command, &shared) {}
}

/// Whether `notif` is a `connect` on descriptor -1, which the process of
/// `Policy::apply` makes to wait for its listener to be taken
/// (`sys::send_listener`).
pub(crate) fn is_wait_for_listener(notif: &sys::Notification) -> bool {
    filter::call(notif.data.arch, notif.data.nr) == Some(Call::Connect)
        && notif.data.args[0] as i32 == -1
}

/// Waits for one notification and answers it; `false` once no process
/// uses the filter any more.
fn serve_one(served: &Arc<Served>, command: i32, shared: &Arc<Shared>) -> bool {
    match sys::wait_notification(&served.fd) {
        Ok(sys::Ready::Notification) => {}
        Ok(sys::Ready::Gone) | Err(_) => return false,
    }
    // ENOENT: the thread went away between poll and receive.
    if let Ok(notif) = sys::recv_notification(&served.fd) {
        handle(served, &notif, command, shared);
    }
    true
}

/// The answer to one call: a value, or an errno.
type Outcome = Result<i64, i32>;

fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn handle(served: &Arc<Served>, notif: &sys::Notification, command: i32, shared: &Arc<Shared>) {
    let id = notif.id;
    let Some(call) = filter::call(notif.data.arch, notif.data.nr) else {
        let _ = sys::answer(&served.fd, id, 0, libc::ENOSYS);
        return;
    };
    if served.restarted(notif) {
        // A restart waiting for a blocking connect still under way: its
        // wait is watched for signals, as the first was.
        if call == Call::Connect && served.runs(notif) {
            Waiter::watch_connect(shared, served, notif);
        }
        return;
    }
    // No descriptor: the kernel's answer, given without fetching one. (The
    // process of `Policy::apply` waits in this call for its listener to be
    // served: see `sys::send_listener`.)
    if is_wait_for_listener(notif) {
        let _ = sys::answer(&served.fd, id, 0, libc::EBADF);
        return;
    }
    if matches!(call, Call::Accept | Call::Accept4) {
        accept(served, notif, call, command, shared);
        return;
    }
    match prepare(served, notif, call, command, shared) {
        Ok(Some(work)) => work.run(served, *notif, shared),
        Ok(None) => {}
        Err(errno) => {
            let _ = sys::answer(&served.fd, id, 0, errno);
        }
    }
}

/// A call read, checked and decided, ready to perform.
struct Work {
    call: Call,
    socket: OwnedFd,
    /// One for `connect`, `bind`, `sendto` and `sendmsg`; those of a
    /// `sendmmsg` up to the first that could not be read or was refused.
    messages: Vec<Message>,
    /// The thread's flags for a send.
    flags: i32,
    /// A `sendmmsg`: where the thread's `mmsghdr` array lies, in its
    /// layout, so that each `msg_len` is written back as the kernel does.
    vector: Option<(u64, Layout)>,
    /// How many messages were sent.
    sent: usize,
    /// Whether the socket is a stream, whose send may be partial.
    stream: bool,
}

/// One address and what is sent to it.
struct Message {
    /// The address to hand the kernel: the one read, or for a pathname
    /// socket `/proc/self/fd/N` of the inode opened here; `None`: a
    /// message without `msg_name`, for the socket's peer.
    address: Option<Vec<u8>>,
    /// Keeps the descriptor named in `address` open.
    _target: Option<File>,
    data: Vec<u8>,
    /// Control messages, laid out natively, descriptors replaced by
    /// those of `_fds`.
    control: Vec<u8>,
    /// Descriptors fetched from the thread for `SCM_RIGHTS`, closed once sent.
    _fds: Vec<OwnedFd>,
    /// A UDP socket sending to this machine: the port the kernel gives it
    /// on the way is learnt as bound inside, so that a server of the
    /// sandbox can answer it.
    udp_local: bool,
    /// The bytes sent.
    sent: usize,
}

impl Message {
    fn to(address: Vec<u8>) -> Message {
        Message {
            address: Some(address),
            _target: None,
            data: Vec::new(),
            control: Vec::new(),
            _fds: Vec::new(),
            udp_local: false,
            sent: 0,
        }
    }
}

/// A message as read from the thread, before its socket is known.
struct Read {
    name: Option<Vec<u8>>,
    data: Vec<u8>,
    /// Whether the data went past [`MAX_SEND`].
    cut: bool,
    control: Vec<Cmsg>,
}

/// The items up to the first error; the first item's error when it fails
/// (a `sendmmsg` sends the messages before one that fails and answers
/// their count, or fails like the first).
fn until_error<T>(items: impl IntoIterator<Item = Result<T, i32>>) -> Result<Vec<T>, i32> {
    let mut out = Vec::new();
    for item in items {
        match item {
            Ok(t) => out.push(t),
            Err(e) if out.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    Ok(out)
}

/// Reads a socket address of `len` bytes (an int, at most a
/// `sockaddr_storage`, as the kernel takes it for `connect` and `sendto`).
fn read_address(tid: i32, at: u64, len: u64) -> Result<Vec<u8>, i32> {
    let len = len as u32 as i32;
    if len < 0 || len as usize > size_of::<libc::sockaddr_storage>() {
        return Err(libc::EINVAL);
    }
    let mut address = vec![0u8; len as usize];
    read_exactly(tid, at, &mut address)?;
    Ok(address)
}

/// Gathers the buffers of `iovecs`, up to [`MAX_SEND`] bytes in all.
fn gather(tid: i32, iovecs: &[(u64, u64)]) -> Result<(Vec<u8>, bool), i32> {
    let total = iovecs
        .iter()
        .map(|(_, len)| *len)
        .fold(0u64, u64::saturating_add);
    let mut data = Vec::with_capacity(total.min(MAX_SEND as u64) as usize);
    for &(base, len) in iovecs {
        let take = (len as usize).min(MAX_SEND - data.len());
        let at = data.len();
        data.resize(at + take, 0);
        read_exactly(tid, base, &mut data[at..])?;
    }
    Ok((data, total > MAX_SEND as u64))
}

/// Reads one `msghdr`'s name, data and control messages.
fn read_message(tid: i32, layout: Layout, header: &[u8]) -> Result<Read, i32> {
    let header = Header::parse(layout, header)?;
    let mut iov = vec![0u8; header.iov_bytes(layout)];
    read_exactly(tid, header.iov, &mut iov)?;
    let (data, cut) = gather(tid, &message::iovecs(layout, &iov)?)?;
    let mut control = vec![0u8; header.controllen as usize];
    read_exactly(tid, header.control, &mut control)?;
    let control = message::control(layout, &control)?;
    let name = if header.namelen == 0 {
        None
    } else {
        let mut name = vec![0u8; header.namelen];
        read_exactly(tid, header.name, &mut name)?;
        Some(name)
    };
    Ok(Read {
        name,
        data,
        cut,
        control,
    })
}

/// The messages of a `sendto`, `sendmsg` or `sendmmsg`, up to the first
/// that cannot be read, and the call's flags.
fn read_sends(notif: &sys::Notification, call: Call) -> Result<(Vec<Read>, i32), i32> {
    let tid = notif.pid as i32;
    let args = notif.data.args;
    let layout = Layout::new(filter::compat(notif.data.arch, notif.data.nr));
    match call {
        Call::SendTo => {
            let name = read_address(tid, args[4], args[5])?;
            let (data, cut) = gather(tid, &[(args[1], args[2])])?;
            let read = Read {
                name: Some(name),
                data,
                cut,
                control: Vec::new(),
            };
            Ok((vec![read], args[3] as i32))
        }
        Call::SendMsg => {
            let mut header = vec![0u8; layout.msghdr_len()];
            read_exactly(tid, args[1], &mut header)?;
            Ok((vec![read_message(tid, layout, &header)?], args[2] as i32))
        }
        Call::SendMmsg => {
            let count = (args[2] as u32 as u64).min(message::MAX_IOV) as usize;
            let mut vector = vec![0u8; count * layout.mmsghdr_len()];
            let got = sys::read_memory(tid, args[1], &mut vector).map_err(|e| errno_of(&e));
            let got = if count == 0 { 0 } else { got? };
            let reads = until_error(vector.chunks(layout.mmsghdr_len()).enumerate().map(
                |(i, header)| {
                    if (i + 1) * layout.mmsghdr_len() > got {
                        return Err(libc::EFAULT);
                    }
                    read_message(tid, layout, header)
                },
            ))?;
            Ok((reads, args[3] as i32))
        }
        Call::Connect | Call::Bind | Call::Accept | Call::Accept4 => Err(libc::ENOSYS),
    }
}

/// The credentials a thread may name in `SCM_CREDENTIALS` without
/// privilege: its process id, and its real, effective or saved ids.
fn may_claim(tid: i32, (pid, uid, gid): (i32, u32, u32)) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    let ids = |key: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| {
                v.split_whitespace()
                    .take(3)
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    tgid_in(&status) == Some(pid) && ids("Uid:").contains(&uid) && ids("Gid:").contains(&gid)
}

fn tgid_in(status: &str) -> Option<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A message's control messages for this process's `sendmsg`: each
/// descriptor of `SCM_RIGHTS` fetched from the thread (`EBADF` for one it
/// does not have, as the kernel answers); `SCM_CREDENTIALS` naming the
/// thread's own process and ids dropped (the kernel then attaches this
/// process's, to a receiver that asked for them), naming anyone else
/// `EPERM`, as the kernel answers an unprivileged sender; every other
/// message passed as it was.
fn own_control(
    tid: i32,
    pidfd: &OwnedFd,
    cmsgs: Vec<Cmsg>,
) -> Result<(Vec<u8>, Vec<OwnedFd>), i32> {
    let mut fds = Vec::new();
    let mut out = Vec::with_capacity(cmsgs.len());
    for mut c in cmsgs {
        if c.level == libc::SOL_SOCKET && c.kind == libc::SCM_RIGHTS {
            let mut data = Vec::with_capacity(c.data.len());
            for fd in message::rights(&c.data) {
                let own = sys::pidfd_getfd(pidfd, fd).map_err(|_| libc::EBADF)?;
                data.extend_from_slice(&own.as_raw_fd().to_ne_bytes());
                fds.push(own);
            }
            c.data = data;
        } else if c.level == libc::SOL_SOCKET && c.kind == libc::SCM_CREDENTIALS {
            if !may_claim(tid, message::credentials(&c.data)?) {
                return Err(libc::EPERM);
            }
            continue;
        }
        out.push(c);
    }
    Ok((message::native_control(&out), fds))
}

/// Reads the call's address (and data) from the thread, fetches its
/// socket, resolves a pathname against the thread's working directory,
/// checks the thread is still waiting, and decides. `Ok(None)`: the thread
/// is gone, nothing to answer.
fn prepare(
    served: &Served,
    notif: &sys::Notification,
    call: Call,
    command: i32,
    shared: &Shared,
) -> Result<Option<Work>, i32> {
    let listener = &served.fd;
    let tid = notif.pid as i32;
    let args = notif.data.args;
    let fetched = served.fetch(tid, args[0] as i32);
    let (reads, flags) = match call {
        // A unix socket's bind is the kernel's, under the command's own
        // Landlock rules (continue_bind); a port is bound here, on the
        // command's socket, and learnt as bound inside.
        Call::Bind if !fetched.as_ref().is_ok_and(|(_, socket)| binds_port(socket)) => {
            continue_bind(
                listener,
                notif,
                fetched.ok().map(|(_, socket)| socket),
                shared,
            );
            return Ok(None);
        }
        Call::Bind | Call::Connect => (Vec::new(), 0),
        Call::SendTo | Call::SendMsg | Call::SendMmsg => read_sends(notif, call)?,
        Call::Accept | Call::Accept4 => return Err(libc::ENOSYS),
    };
    let address = match call {
        Call::Bind | Call::Connect => Some(read_address(tid, args[1], args[2])?),
        _ => None,
    };
    let (pidfd, socket) = fetched.map_err(|e| errno_of(&e))?;
    let mut work = Work {
        call,
        socket,
        messages: Vec::new(),
        flags,
        vector: (call == Call::SendMmsg).then(|| {
            let compat = filter::compat(notif.data.arch, notif.data.nr);
            (args[1], Layout::new(compat))
        }),
        sent: 0,
        stream: false,
    };
    if let Some(address) = address {
        if call == Call::Bind {
            // A port an outside socket holds with SO_REUSEPORT: joining its
            // group would share its connections.
            if let Some(at) = parse_inet(&address, false) {
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
            work.messages.push(Message::to(address));
            return Ok(Some(work));
        }
        let resolved = resolve(tid, &work.socket, address, false, shared)?;
        let (message, destination) = resolved.message(Vec::new());
        if !sys::still_waiting(listener, notif.id) {
            return Ok(None);
        }
        judge(call, &message, destination, &work, command, shared)?;
        work.messages.push(message);
        return Ok(Some(work));
    }
    // A send: each message's name resolved and its control messages made
    // this process's, up to the first that fails.
    let fd = work.socket.as_fd();
    let kind = sys::socket_type(fd).unwrap_or(libc::SOCK_DGRAM);
    let stream = kind == libc::SOCK_STREAM;
    work.stream = stream;
    // Sockets whose send never goes where a name says: TCP ignores it
    // (without MSG_FASTOPEN, refused by the filter), a unix stream fails
    // with it, a unix seqpacket socket ignores it. Their names are passed
    // as read, undecided, so the kernel answers as it would.
    let ignores_name = match sys::socket_domain(fd) {
        Ok(libc::AF_UNIX) => kind != libc::SOCK_DGRAM,
        _ => stream && sys::socket_protocol(fd).is_ok_and(|p| p == libc::IPPROTO_TCP),
    };
    let mut destinations = Vec::new();
    let messages = until_error(reads.into_iter().map(|read| {
        if read.cut && !stream {
            return Err(libc::EMSGSIZE);
        }
        let (control, fds) = own_control(tid, &pidfd, read.control)?;
        let mut message = match read.name {
            Some(name) if ignores_name => {
                destinations.push(None);
                Message {
                    data: read.data,
                    ..Message::to(name)
                }
            }
            Some(name) => {
                let resolved = resolve(tid, &work.socket, name, true, shared)?;
                let (message, destination) = resolved.message(read.data);
                destinations.push(Some(destination));
                message
            }
            None => {
                destinations.push(None);
                Message {
                    address: None,
                    data: read.data,
                    ..Message::to(Vec::new())
                }
            }
        };
        message.control = control;
        message._fds = fds;
        Ok(message)
    }))?;
    if !sys::still_waiting(listener, notif.id) {
        return Ok(None);
    }
    // Judged in order: a sendmmsg sends those before the first refused.
    for (message, destination) in messages.into_iter().zip(destinations) {
        if let Some(destination) = destination {
            if let Err(errno) = judge(call, &message, destination, &work, command, shared) {
                if work.messages.is_empty() {
                    return Err(errno);
                }
                break;
            }
        }
        work.messages.push(message);
    }
    Ok(Some(work))
}

/// An address read from the thread, resolved: what is judged, and what is
/// handed to the kernel.
struct Resolved {
    destination: Destination,
    address: Vec<u8>,
    target: Option<File>,
    udp_local: bool,
}

impl Resolved {
    fn message(self, data: Vec<u8>) -> (Message, Destination) {
        let message = Message {
            _target: self.target,
            udp_local: self.udp_local,
            data,
            ..Message::to(self.address)
        };
        (message, self.destination)
    }
}

/// Resolves an address the thread `tid` passed for `socket`: a relative
/// socket path against its working directory, the socket file opened
/// `O_PATH` and named as `/proc/self/fd/N`. `sending`: the address of a
/// send, where an IPv4 UDP or raw socket takes `AF_UNSPEC` as `AF_INET`.
fn resolve(
    tid: i32,
    socket: &OwnedFd,
    address: Vec<u8>,
    sending: bool,
    shared: &Shared,
) -> Result<Resolved, i32> {
    let unix = parse_unix(&address);
    // A relative socket path is resolved against the thread's directory.
    let cwd = match &unix {
        Some(Unix::Path(p)) if !p.is_absolute() => {
            Some(open_path(Path::new(&format!("/proc/{tid}/cwd")), false)?)
        }
        _ => None,
    };
    // What the command's own binds made, asked of the kernel now.
    shared.settle();
    let mut resolved = Resolved {
        destination: Destination::Other,
        address,
        target: None,
        udp_local: false,
    };
    resolved.destination = match unix {
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
            let path = if shared.known(id) {
                PathBuf::new()
            } else {
                proc_link(&target)?
            };
            resolved.address = unix_address(&proc_fd(&target))?;
            resolved.target = Some(target);
            Destination::Path {
                resolved: path,
                id,
                changed: ctime(&meta),
            }
        }
        Some(Unix::Abstract(name)) => Destination::Abstract(name),
        Some(Unix::Unnamed) => Destination::Other,
        None => match parse_inet(&resolved.address, sending && is_ipv4(socket)) {
            Some(inet) => {
                let transport = transport_of(socket);
                resolved.udp_local =
                    transport == Transport::Udp && shared.rules.net.is_local(inet.ip());
                Destination::Inet(inet, transport)
            }
            None => Destination::Other,
        },
    };
    Ok(resolved)
}

/// Decides one message of `work`, recording a refusal; the errno the
/// kernel's own lines answer when it is refused.
fn judge(
    call: Call,
    message: &Message,
    destination: Destination,
    work: &Work,
    command: i32,
    shared: &Shared,
) -> Result<(), i32> {
    let verdict = {
        let bound = shared.bound.lock().map_err(|_| libc::EIO)?;
        shared.rules.connect(&destination, &bound)
    };
    if verdict == Verdict::Allow {
        return Ok(());
    }
    // What the kernel's own lines answer: RESOLVE_UNIX (ABI 9) EACCES,
    // the abstract-socket scope (ABI 6) EPERM.
    let (target, errno) = match destination {
        Destination::Path { resolved, .. } => (Target::Path(resolved), libc::EACCES),
        Destination::Abstract(name) => {
            // A name nobody holds is refused the way the kernel refuses
            // it, as a connection nobody accepts: a client waiting for
            // a server it started itself retries on that.
            let kind = sys::socket_type(work.socket.as_fd()).unwrap_or(libc::SOCK_STREAM);
            let address = message.address.as_deref().unwrap_or_default();
            if !sys::unix_address_taken(kind, address) {
                return Err(libc::ECONNREFUSED);
            }
            (Target::Abstract(name), libc::EPERM)
        }
        // Gradle's cache-lock ping to the user's own daemon: it only
        // makes the owner release a lock on a shared cache.
        Destination::Inet(_, Transport::Udp)
            if call != Call::Connect && local_net::is_gradle_lock_ping(&message.data) =>
        {
            return Ok(());
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
    Err(errno)
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
fn binds_port(socket: &OwnedFd) -> bool {
    matches!(
        sys::socket_protocol(socket.as_fd()),
        Ok(libc::IPPROTO_TCP | libc::IPPROTO_UDP)
    )
}

/// `socket`: the thread's socket, or `None` where it cannot be fetched (a
/// non-dumpable process): bound all the same, and not recorded as bound
/// inside.
fn continue_bind(
    listener: &OwnedFd,
    notif: &sys::Notification,
    socket: Option<OwnedFd>,
    shared: &Shared,
) {
    if !sys::still_waiting(listener, notif.id) {
        return;
    }
    if let Some(socket) = socket {
        shared.note_bind(socket.as_fd());
    }
    let _ = sys::answer_continue(listener, notif.id);
}

/// How long a connect on this machine may keep the listener waiting for
/// its handshake before it moves to a thread of its own: a loopback
/// handshake takes microseconds, but ends after the non-blocking connect
/// has returned.
const HANDSHAKE_INLINE_MS: i32 = 5;

/// Connects `fd` to `address` without waiting long ([`without_waiting`]);
/// `None` when that would wait on a socket the command left blocking: a
/// TCP handshake not done within [`HANDSHAKE_INLINE_MS`] (a server on this
/// machine whose queue is full drops the first `SYN`), a unix server whose
/// backlog is full. The connect made again on a thread of its own then
/// waits, as the command's would have: for the same handshake (a blocking
/// connect of a socket already connecting waits for it to end), or for
/// room in the backlog.
fn connect_without_waiting(fd: BorrowedFd<'_>, address: &[u8]) -> Option<Outcome> {
    match without_waiting(fd, || sys::connect(fd, address)) {
        (Err(e), true) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
            match sys::writable_within(fd, HANDSHAKE_INLINE_MS) {
                // Done: its result, as the blocking connect would return it.
                Ok(true) => Some(match sys::int_option(fd, libc::SO_ERROR) {
                    Ok(0) => Ok(0),
                    Ok(errno) => Err(errno),
                    Err(e) => Err(errno_of(&e)),
                }),
                _ => None,
            }
        }
        (Err(e), true) if e.raw_os_error() == Some(libc::EAGAIN) => None,
        (tried, _) => Some(tried.map(|()| 0).map_err(|e| errno_of(&e))),
    }
}

impl Work {
    /// Performs the call and answers. A call that may wait long (a
    /// handshake with another host, a server on this machine whose queue
    /// of connections is full, a full send queue of a blocking socket) is
    /// performed on a thread of its own so the listener keeps serving the
    /// others.
    fn run(mut self, served: &Arc<Served>, notif: sys::Notification, shared: &Arc<Shared>) {
        if !self.may_block() {
            if let Some(outcome) = self.perform(None, shared) {
                self.finish(served, &notif, shared, outcome);
                return;
            }
        }
        served.running(&notif);
        if self.call == Call::Connect {
            Waiter::watch_connect(shared, served, &notif);
        }
        let (served_too, shared_too) = (Arc::clone(served), Arc::clone(shared));
        let spawned = sys::spawn_unsignalled("strument-connect-call".into(), move || {
            let waiting = Waiting {
                served: &served_too,
                notif: &notif,
            };
            let outcome = self
                .perform(Some(&waiting), &shared_too)
                .unwrap_or(Err(libc::EAGAIN));
            self.finish(&served_too, &notif, &shared_too, outcome);
        });
        if spawned.is_err() {
            served.answer_performed(&notif, Err(libc::EAGAIN));
        }
    }

    /// Whether performing this may wait: a blocking socket connecting to
    /// another host. (A send is tried without waiting first.)
    fn may_block(&self) -> bool {
        // A UDP connect only names the peer: it never waits.
        let remote = self.call == Call::Connect
            && !self.messages.iter().any(|m| m.udp_local)
            && self
                .messages
                .first()
                .and_then(|m| m.address.as_deref())
                .and_then(|a| parse_inet(a, false))
                .is_some_and(|a| !a.ip().is_loopback());
        remote && !sys::is_nonblocking(self.socket.as_fd()).unwrap_or(true)
    }

    /// Performs the call; `None` when a connect or a send would wait on a
    /// socket the command left blocking and no thread `waiting` for it is
    /// given (the first try, on the listener's thread): then it is
    /// performed again, waiting, on a thread of its own.
    fn perform(&mut self, waiting: Option<&Waiting<'_>>, shared: &Shared) -> Option<Outcome> {
        let fd = self.socket.as_fd();
        let address = self.messages.first().and_then(|m| m.address.as_deref());
        let result = match (self.call, address) {
            (Call::Connect, Some(address)) if waiting.is_none() => {
                return connect_without_waiting(fd, address);
            }
            (Call::Connect, Some(address)) => sys::connect(fd, address).map(|()| 0),
            // A port's bind (a unix socket's is the kernel's: continue_bind).
            (Call::Bind, Some(address)) => sys::bind(fd, address).map(|()| 0),
            (Call::Connect | Call::Bind, None) => return Some(Err(libc::EINVAL)),
            (Call::Accept | Call::Accept4, _) => return Some(Err(libc::ENOSYS)),
            (Call::SendTo | Call::SendMsg | Call::SendMmsg, _) => {
                return self.send(waiting, shared);
            }
        };
        Some(result.map_err(|e| errno_of(&e)))
    }

    /// Sends the messages not sent yet, one by one, stopping at the first
    /// that fails. Always with `MSG_NOSIGNAL`: a closed peer's `SIGPIPE`
    /// is the thread's (see [`Work::finish`]), not this process's. And
    /// never waiting in the kernel: a send that would wait on a socket the
    /// command left blocking goes to a thread of its own (`None`, with no
    /// thread `waiting`), which waits here for room, for the socket's send
    /// timeout and for a signal to the thread ([`Room`]), so that Ctrl-C
    /// or `SIGTERM` ends the send as they end the kernel's own.
    fn send(&mut self, waiting: Option<&Waiting<'_>>, shared: &Shared) -> Option<Outcome> {
        let fd = self.socket.as_fd();
        let may_wait =
            self.flags & libc::MSG_DONTWAIT == 0 && !sys::is_nonblocking(fd).unwrap_or(true);
        let flags = self.flags | libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
        // Made at the first wait, as the kernel's send timeout counts the
        // time spent waiting: a send that never waits reads no option.
        let mut room: Option<Room<'_>> = None;
        while let Some(message) = self.messages.get_mut(self.sent) {
            let data = &message.data[message.sent..];
            // Control messages go with a message's first bytes only.
            let control: &[u8] = if message.sent == 0 {
                &message.control
            } else {
                &[]
            };
            let sent = if self.call == Call::SendTo {
                let address = message.address.as_deref().unwrap_or_default();
                sys::sendto(fd, data, flags, address)
            } else {
                let address = message.address.as_deref();
                sys::sendmsg(fd, address, data, control, flags)
            };
            match sent {
                Ok(n) => {
                    message.sent += n;
                    if let Some(room) = room.as_mut() {
                        room.sent();
                    }
                    if message.udp_local {
                        shared.learn_address(fd, Transport::Udp);
                    }
                    // A blocking stream socket takes the whole buffer, as
                    // the kernel's own send waits until it has: the rest,
                    // waiting (on a thread of its own).
                    if self.stream && may_wait && n > 0 && message.sent < message.data.len() {
                        waiting?;
                        continue;
                    }
                    self.sent += 1;
                    // The next message of a `sendmmsg` is a send of its
                    // own, with a send timeout of its own.
                    room = None;
                }
                // Would wait, on a socket the command left blocking: wait
                // for it, the way the command would have.
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && may_wait => {
                    let waiting = waiting?;
                    match room.get_or_insert_with(|| Room::new(fd)).wait(waiting) {
                        Ok(()) => {}
                        // The send timeout, or a signal: what went out is
                        // the result, as the kernel's send returns it.
                        Err(_) if message.sent > 0 => {
                            self.sent += 1;
                            break;
                        }
                        Err(errno) if self.sent == 0 => return Some(Err(errno)),
                        Err(_) => break,
                    }
                }
                // Part of it went out: that part's count.
                Err(_) if message.sent > 0 => {
                    self.sent += 1;
                    break;
                }
                Err(e) if self.sent == 0 => return Some(Err(errno_of(&e))),
                Err(_) => break,
            }
        }
        Some(Ok(match self.call {
            Call::SendMmsg => self.sent as i64,
            _ => self.messages.first().map_or(0, |m| m.sent as i64),
        }))
    }

    /// Answers with `outcome`, after what the kernel would have done
    /// besides: a port bound learnt, each `msg_len` of a `sendmmsg`
    /// written back, `SIGPIPE` to a thread that sent to a closed stream
    /// without `MSG_NOSIGNAL`.
    fn finish(
        &self,
        served: &Served,
        notif: &sys::Notification,
        shared: &Shared,
        outcome: Outcome,
    ) {
        let tid = notif.pid as i32;
        if outcome.is_ok() && self.call == Call::Bind {
            shared.learn_address(self.socket.as_fd(), transport_of(&self.socket));
        }
        if let Some((at, layout)) = self.vector {
            for (i, m) in self.messages.iter().take(self.sent).enumerate() {
                let field = at + (i * layout.mmsghdr_len() + layout.msg_len_at()) as u64;
                let _ = sys::write_memory(tid, field, &(m.sent as u32).to_ne_bytes());
            }
        }
        let sending = matches!(self.call, Call::SendTo | Call::SendMsg | Call::SendMmsg);
        if sending && outcome == Err(libc::EPIPE) && self.flags & libc::MSG_NOSIGNAL == 0 {
            let tgid = std::fs::read_to_string(format!("/proc/{tid}/status"))
                .ok()
                .and_then(|s| tgid_in(&s));
            if let Some(tgid) = tgid {
                let _ = sys::tgkill(tgid, tid, libc::SIGPIPE);
            }
        }
        if outcome == Err(ERESTARTSYS) {
            served.interrupt(notif);
        } else {
            served.answer_performed(notif, outcome);
        }
    }
}

/// The thread a call performed on a thread of the supervisor's is for.
struct Waiting<'a> {
    served: &'a Served,
    notif: &'a sys::Notification,
}

/// How long a send waits for room before it looks for a signal again.
const SIGNAL_EVERY: Duration = Duration::from_millis(250);

/// The longest pause between tries of a send that `poll` finds room for
/// and the kernel still refuses: an unconnected datagram socket is
/// writable whatever the queue of the socket it sends to.
const MOST_BACKOFF: Duration = Duration::from_millis(64);

/// A blocking send's wait for room, performed here without blocking in
/// the kernel: `poll` for `POLLOUT`, a signal to the command's thread
/// looked for between, and the socket's own send timeout (`SO_SNDTIMEO`)
/// kept.
struct Room<'a> {
    fd: BorrowedFd<'a>,
    /// When `SO_SNDTIMEO` runs out, if it is set.
    deadline: Option<Instant>,
    /// The pause before the next try, once `poll` said there was room
    /// and the kernel refused anyway.
    backoff: Option<Duration>,
    /// Whether the last wait ended with room found.
    found: bool,
}

impl<'a> Room<'a> {
    fn new(fd: BorrowedFd<'a>) -> Room<'a> {
        let timeout = sys::send_timeout(fd).ok().flatten();
        Room {
            fd,
            deadline: timeout.and_then(|t| Instant::now().checked_add(t)),
            backoff: None,
            found: false,
        }
    }

    /// Something went out: the next refusal waits afresh.
    fn sent(&mut self) {
        (self.backoff, self.found) = (None, false);
    }

    /// Waits until the socket may take more, or ends the send as the
    /// kernel's would: `EAGAIN` once the send timeout runs out; for a
    /// signal the thread will take, `ERESTARTSYS` (restarted after
    /// `SA_RESTART`), or `EINTR` with a send timeout set or when another
    /// thread may take it ([`interruption`]). A thread that has left its
    /// wait (a kernel before 5.19 lets a signal take it out, and restarts
    /// the call) is not looked at: the send goes on for the restart, as
    /// before; one that is gone ends it.
    fn wait(&mut self, waiting: &Waiting<'_>) -> Result<(), i32> {
        loop {
            let left = self
                .deadline
                .map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Err(libc::EAGAIN);
            }
            let slice = left.map_or(SIGNAL_EVERY, |l| l.min(SIGNAL_EVERY));
            let room = if self.found {
                let pause = self
                    .backoff
                    .map_or(Duration::from_millis(1), |b| (b * 2).min(MOST_BACKOFF));
                self.backoff = Some(pause);
                std::thread::sleep(pause.min(slice));
                true
            } else {
                let ms = i32::try_from(slice.as_millis()).unwrap_or(i32::MAX).max(1);
                sys::writable_within(self.fd, ms).unwrap_or(true)
            };
            let tid = waiting.notif.pid as i32;
            if sys::still_waiting(&waiting.served.fd, waiting.notif.id) {
                if let Some(errno) = interruption(tid) {
                    return Err(if self.deadline.is_some() {
                        libc::EINTR
                    } else {
                        errno
                    });
                }
            } else if !Path::new(&format!("/proc/{tid}")).exists() {
                return Err(libc::EINTR);
            }
            if room {
                self.found = true;
                return Ok(());
            }
        }
    }
}

/// Whether `socket` is an IPv4 socket.
fn is_ipv4(socket: &OwnedFd) -> bool {
    sys::socket_domain(socket.as_fd()).is_ok_and(|d| d == libc::AF_INET)
}

/// The transport of an IPv4 or IPv6 socket, by its protocol.
fn transport_of(socket: &OwnedFd) -> Transport {
    Transport::from_protocol(sys::socket_protocol(socket.as_fd()).unwrap_or(0))
}

fn read_exactly(tid: i32, at: u64, buf: &mut [u8]) -> Result<(), i32> {
    match sys::read_memory(tid, at, buf) {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(_) => Err(libc::EFAULT),
        Err(e) => Err(errno_of(&e)),
    }
}

/// A pidfd for the process thread `tid` belongs to, and whether `tid` is
/// that process's leader: `pidfd_open` takes only a thread-group leader
/// (another thread: `EINVAL`, from Linux 6.9 `ENOENT`).
fn open_process(tid: i32) -> io::Result<(OwnedFd, bool)> {
    match sys::pidfd_open(tid) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) => {
            let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
            let tgid = tgid_in(&status).ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
            Ok((sys::pidfd_open(tgid)?, false))
        }
        other => other.map(|pidfd| (pidfd, true)),
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

/// An IPv4 or IPv6 address; with `unspec_is_v4`, `AF_UNSPEC` read as
/// `AF_INET`, as an IPv4 UDP or raw socket's send reads it
/// (`udp_sendmsg`, `raw_sendmsg`).
fn parse_inet(address: &[u8], unspec_is_v4: bool) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(address.get(..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(address.get(2..4)?.try_into().ok()?);
    if family == libc::AF_INET || (unspec_is_v4 && family == libc::AF_UNSPEC) {
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
            parse_inet(&inet, false),
            Some(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert!(parse_unix(&[1]).is_none());
        // AF_UNSPEC is an IPv4 address to an IPv4 socket's send.
        let mut unspec = inet.clone();
        unspec[..2].copy_from_slice(&(libc::AF_UNSPEC as u16).to_ne_bytes());
        assert_eq!(parse_inet(&unspec, false), None);
        assert_eq!(parse_inet(&unspec, true), parse_inet(&inet, false));
    }

    fn notification(tid: u32, id: u64, nr: i32, arg0: u64) -> sys::Notification {
        let mut notif: sys::Notification = empty_notification();
        notif.pid = tid;
        notif.id = id;
        notif.data.nr = nr;
        notif.data.args[0] = arg0;
        notif
    }

    fn empty_notification() -> sys::Notification {
        sys::Notification {
            id: 0,
            pid: 0,
            flags: 0,
            data: libc::seccomp_data {
                nr: 0,
                arch: 0,
                instruction_pointer: 0,
                args: [0; 6],
            },
        }
    }

    #[test]
    fn a_process_s_pidfd_is_kept_while_it_lives_and_never_serves_once_it_ended() {
        let served = Served::new(OwnedFd::from(File::open("/dev/null").expect("/dev/null")));
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("spawn sleep");
        let pid = child.id() as i32;
        let (first, _) = served.fetch(pid, 0).expect("the child's standard input");
        let (second, _) = served.fetch(pid, 0).expect("again");
        assert!(Arc::ptr_eq(&first, &second), "the kept pidfd is used again");
        child.kill().expect("kill");
        child.wait().expect("wait");
        // The kept pidfd names the ended process: it fetches nothing, and
        // is dropped rather than tried again.
        assert!(served.fetch(pid, 0).is_err());
        assert!(!served.processes.lock().expect("lock").contains_key(&pid));
        // Granted beside it: this process's own descriptor is fetched.
        let me = std::process::id() as i32;
        assert!(served.fetch(me, served.fd.as_raw_fd()).is_ok());
    }

    /// A listener on which every answer fails, as for a thread gone from
    /// its wait.
    fn gone_from_its_wait() -> Served {
        Served::new(OwnedFd::from(
            File::open("/dev/null").expect("open /dev/null"),
        ))
    }

    #[test]
    fn a_restarted_call_gets_the_first_call_s_result_and_another_call_does_not() {
        let served = gone_from_its_wait();
        let first = notification(7, 1, 46, 3);
        // Running on a thread of its own: a restart waits for it.
        served.running(&first);
        assert!(served.restarted(&notification(7, 2, 46, 3)));
        // Another thread's call, or another call, is no restart.
        assert!(!served.restarted(&notification(8, 3, 46, 3)));
        assert!(!served.restarted(&notification(7, 4, 46, 4)));
        // Done, its answer (and the restart's) failing: kept for the next.
        served.answer_performed(&first, Ok(5));
        let kept = |tid| {
            served
                .performed
                .lock()
                .expect("lock")
                .get(&tid)
                .map(|e| matches!(e.state, Stage::Done(Ok(5))))
        };
        assert_eq!(kept(7), Some(true));
        assert!(served.restarted(&notification(7, 5, 46, 3)));
        // The thread moved on to another call: the result is forgotten.
        assert!(!served.restarted(&notification(7, 6, 44, 3)));
        assert_eq!(kept(7), None);
    }

    #[test]
    fn an_interrupt_that_finds_the_thread_gone_leaves_eintr_for_its_restart() {
        // As when a kernel before 5.19 restarted the call itself.
        let served = gone_from_its_wait();
        let accept = notification(7, 1, 43, 3);
        served.running(&accept);
        served.interrupt(&accept);
        let kept = served
            .performed
            .lock()
            .expect("lock")
            .get(&7)
            .map(|e| match e.state {
                Stage::Done(outcome) => Some(outcome),
                Stage::Running(_) => None,
            });
        // Never ERESTARTSYS, which the restart's thread would hand the
        // program as an errno.
        assert_eq!(kept, Some(Some(Err(libc::EINTR))));
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
