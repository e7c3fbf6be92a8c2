//! The connect supervisor: the sandbox's decision on every `connect`,
//! `bind`, addressed `sendto`, and every `sendmsg` and `sendmmsg` a
//! confined command makes, on every kernel with Landlock.
//!
//! A confined child installs, before `exec`, a seccomp filter whose
//! listener it sends here over a socket (a child of `Spawn`, which starts
//! in this process's descriptor table, leaves it there); a thread of this
//! process then serves that listener for the child and every process it
//! starts. For
//! each `connect` and `sendto` it reads the address from the caller's
//! memory, checks the call is still pending, decides by its rules, and for
//! an allowed call performs it itself on the caller's own socket (fetched
//! with `pidfd_getfd`), answering with that call's result. It never lets
//! the kernel continue one of those: the kernel would read the address
//! again, after a second thread of the caller had swapped it.
//!
//! A `bind` is the exception: the kernel performs it for the caller
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`), so the socket is bound to exactly
//! the name the program passed (`getsockname`, which sccache checks). That
//! is sound because nothing about a bind is decided or recorded from the
//! address read: Landlock's `MAKE_SOCK` (every ABI) refuses a socket file
//! outside the writable roots in the caller's own domain, and what the
//! socket was bound to is asked of the kernel by the socket itself
//! (`NETLINK_SOCK_DIAG`, by sockfs inode and cookie) when a later connect
//! is decided.
//!
//! Every `sendmsg` and `sendmmsg` is performed here, with or without an
//! address: whether `msg_name` is set, and which socket the descriptor
//! number names, can change between a check and the kernel's own read. The
//! message headers, iovecs, data and control messages are read once (in
//! the thread's layout, 64-bit or compat: see `message`), each name is
//! decided as a `sendto`'s, `SCM_RIGHTS` descriptors are fetched with
//! `pidfd_getfd` and sent under this process's numbers, `SCM_CREDENTIALS`
//! naming the thread's own process is dropped, and every send carries
//! `MSG_NOSIGNAL` (a `SIGPIPE` owed is sent to the thread). A call whose
//! answer finds the thread interrupted (before Linux 5.19, which has
//! `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`) is remembered, and its restart
//! is answered with the same result instead of being performed twice.
//!
//! What the server on the other end sees as its peer (`SO_PEERCRED`, and
//! the credentials of a datagram to a receiver with `SO_PASSCRED`) is this
//! process: its pid, and the same user and group as the command.

pub(crate) mod filter;
pub(crate) mod message;
mod rules;
mod serve;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) use filter::NotifyFilter;
use rules::Bound;
pub(crate) use rules::Rules;

use crate::local_net::{self, Listener, Transport};
use crate::services::ServiceKind;
use crate::sys;

/// Where a refused connection was going.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectTarget {
    /// A pathname unix socket, as the kernel names it.
    Path(PathBuf),
    /// An abstract unix socket name, without its leading NUL.
    Abstract(Vec<u8>),
    /// A port of this machine's own addresses.
    Port {
        /// The address and port, as the command gave them.
        address: SocketAddr,
        /// TCP or UDP.
        transport: Transport,
    },
    /// The other way: a process outside the sandbox connecting to a unix
    /// socket a confined server listens on, refused when the server
    /// accepted it. A client outside may do what a server inside tells it
    /// (tmux's client runs the commands its server sends).
    Inbound {
        /// The server's socket: a path, or `@` and an abstract name.
        socket: String,
        /// The pid of the process that connected, as the kernel noted it.
        peer: u32,
    },
}

impl fmt::Display for ConnectTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectTarget::Path(p) => write!(f, "{}", p.display()),
            ConnectTarget::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
            ConnectTarget::Port { address, transport } => {
                write!(f, "{} {address}", transport.name())
            }
            ConnectTarget::Inbound { socket, peer } => write!(f, "{socket} from pid {peer}"),
        }
    }
}

pub(crate) use ConnectTarget as Target;

/// A connection the supervisor refused a confined command: the socket,
/// the service behind it when known, and how many times it was tried.
///
/// # Examples
///
/// ```no_run
/// use std::process::Command;
/// use strument_sandbox::Policy;
///
/// let prepared = Policy { writable: vec!["/tmp".into()], ..Policy::default() }.prepare()?;
/// let mut cmd = Command::new("tmux");
/// cmd.args(["run-shell", "touch ~/pwned"]);
/// prepared.confine(&mut cmd);
/// let child = cmd.spawn()?;
/// let pid = child.id();
/// # let mut child = child;
/// child.wait()?;
/// for refused in prepared.refused_connects(pid) {
///     eprintln!("{refused}");
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedConnect {
    /// The pid of the confined command whose process tree tried it.
    pub command: u32,
    /// Where it was going.
    pub target: ConnectTarget,
    /// The service known to listen there.
    pub service: Option<ServiceKind>,
    /// How many times it was tried.
    pub attempts: u32,
    /// For a port of this machine: the process listening there, as far as
    /// this user can see it, looked up once the command has ended.
    pub listener: Option<Listener>,
}

impl RefusedConnect {
    fn new(command: i32, target: ConnectTarget) -> RefusedConnect {
        let service = match &target {
            ConnectTarget::Path(p) => crate::services::service_at(p),
            ConnectTarget::Abstract(name) => {
                crate::services::service_at(Path::new(std::ffi::OsStr::from_bytes(name)))
            }
            ConnectTarget::Port { .. } => None,
            ConnectTarget::Inbound { socket, .. } => {
                crate::services::service_at(Path::new(socket.trim_start_matches('@')))
            }
        };
        RefusedConnect {
            command: command as u32,
            target,
            service,
            attempts: 1,
            listener: None,
        }
    }

    /// The `strument-sandbox run` option that would allow it; `None` for
    /// an abstract name, reachable only when bound inside the sandbox.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn f(r: &strument_sandbox::connect::RefusedConnect) {
    /// if let Some(option) = r.allow_with() {
    ///     println!("to allow it: {option}");
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn allow_with(&self) -> Option<String> {
        match &self.target {
            ConnectTarget::Path(p) => Some(format!("--allow-socket {}", p.display())),
            ConnectTarget::Abstract(_) | ConnectTarget::Inbound { .. } => None,
            ConnectTarget::Port { address, .. } => Some(local_net::allow_option(*address)),
        }
    }

    pub(crate) fn inbound(command: i32, socket: String, peer: i32) -> RefusedConnect {
        RefusedConnect::new(
            command,
            ConnectTarget::Inbound {
                socket,
                peer: peer as u32,
            },
        )
    }
}

impl fmt::Display for RefusedConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let ConnectTarget::Inbound { socket, peer } = &self.target {
            let server = self.service.map_or("a server", |kind| kind.name());
            write!(
                f,
                "refused pid {peer}, outside the sandbox, a connection to {server} a confined \
                 command started at {socket}"
            )?;
            if self.attempts > 1 {
                write!(f, ", {} times", self.attempts)?;
            }
            return write!(
                f,
                "; only processes of the sandbox reach its servers (a client outside may do \
                 what the server tells it)"
            );
        }
        write!(f, "refused a connection to ")?;
        match self.service {
            Some(kind) => write!(
                f,
                "{} at {}, which {}",
                kind.name(),
                self.target,
                kind.allows()
            )?,
            None => write!(f, "{}", self.target)?,
        }
        match &self.listener {
            Some(listener) => write!(f, ", where {listener} listens")?,
            None if matches!(self.target, ConnectTarget::Port { .. }) => {
                write!(f, ", a service of this machine")?;
            }
            None => {}
        }
        if self.attempts > 1 {
            write!(f, ", {} times", self.attempts)?;
        }
        match self.allow_with() {
            Some(option) => write!(f, "; to allow it: {option}"),
            None => write!(
                f,
                "; abstract names are reachable only when bound inside the sandbox"
            ),
        }
    }
}

/// State shared by every thread of one supervisor.
pub(crate) struct Shared {
    rules: Rules,
    bound: Mutex<Bound>,
    refused: Mutex<Vec<RefusedConnect>>,
    /// The thread that waits for the accepts of blocking sockets, started
    /// with the first (see `serve::Waiter`), or the errno that stopped it.
    waiter: OnceLock<Result<Arc<serve::Waiter>, i32>>,
}

impl Shared {
    fn record(&self, refused: RefusedConnect) {
        let Ok(mut list) = self.refused.lock() else {
            return;
        };
        match list
            .iter_mut()
            .find(|r| r.command == refused.command && r.target == refused.target)
        {
            Some(same) => same.attempts = same.attempts.saturating_add(1),
            None => list.push(refused),
        }
    }

    /// Whether a socket file is allowed by its identity alone: named by
    /// the policy, or bound inside.
    fn known(&self, id: (u64, u64)) -> bool {
        self.rules.socket_files.contains(&id)
            || self.bound.lock().is_ok_and(|b| b.files.contains(&id))
    }

    /// Notes the socket a `bind` is about to be performed on, by the kernel
    /// for the caller: by its sockfs inode and cookie, not the address,
    /// which a second thread may change before the kernel reads it. A
    /// socket already bound is not noted: its `bind` fails, and its name
    /// was given outside.
    fn note_bind(&self, socket: std::os::fd::BorrowedFd<'_>) {
        // Not a unix socket (ENOENT), or no `CONFIG_UNIX_DIAG`: nothing is
        // recorded, and connects to it are decided like any other.
        let Ok(diag) = sys::socket_inode(socket).and_then(|ino| sys::unix_socket(ino, None)) else {
            return;
        };
        if diag.name.is_some() {
            return;
        }
        if let Ok(mut bound) = self.bound.lock() {
            let key = (diag.ino, diag.cookie);
            if !bound.pending.contains(&key) {
                bound.pending.push(key);
            }
        }
    }

    /// Records the IP address and port a performed bind (or a first
    /// datagram) gave `socket`, with its transport and cookie.
    fn learn_address(&self, socket: std::os::fd::BorrowedFd<'_>, transport: Transport) {
        let Some(addr) = sys::local_address(socket).ok().and_then(|l| inet(&l)) else {
            return;
        };
        let cookie = sys::socket_cookie(socket).ok();
        self.rules.net.bound(addr, transport, cookie);
    }

    /// Asks the kernel what each noted socket is now bound to, and records
    /// it as bound inside: the socket file by device and inode, an abstract
    /// name (also one the kernel chose). A socket closed since is forgotten;
    /// one still unbound stays noted.
    fn settle(&self) {
        let Ok(mut bound) = self.bound.lock() else {
            return;
        };
        if bound.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut bound.pending);
        for (ino, cookie) in pending {
            let Ok(diag) = sys::unix_socket(ino, Some(cookie)) else {
                continue;
            };
            match (diag.name, diag.file) {
                (None, _) => bound.pending.push((ino, cookie)),
                (Some(name), Some(file)) => {
                    bound.files.insert(file);
                    bound.files.extend(seen_at(&name, file));
                }
                (Some(name), None) => {
                    if let Some(abstract_name) = name.strip_prefix(&[0]) {
                        bound.abstract_names.insert(abstract_name.to_vec());
                    }
                }
            }
        }
    }
}

/// The identity `stat` gives the socket file at `name` when it is the one
/// `UNIX_DIAG_VFS` reported: an absolute path opened through no symlink
/// (`openat2` with `RESOLVE_NO_SYMLINKS`, so no component swapped for one
/// can lead elsewhere), a socket, with the same inode number. The device
/// may differ: an overlayfs (a container's root, the VM tier's) shows its
/// own where the kernel's socket names the upper layer's; and
/// `udiag_vfs_ino` holds only the low 32 bits. A relative name (the
/// binder's directory is not known here) is left to the kernel's identity.
fn seen_at(name: &[u8], (_, ino): (u64, u64)) -> Option<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let name = name.strip_suffix(&[0]).unwrap_or(name);
    if name.first() != Some(&b'/') {
        return None;
    }
    let path = std::ffi::CString::new(name).ok()?;
    let fd = sys::open_path_without_symlinks(&path).ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    (meta.file_type().is_socket() && meta.ino() & u64::from(u32::MAX) == ino)
        .then(|| (meta.dev(), meta.ino()))
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// What a child needs to hand its listener over: the program and where
/// the listener goes.
#[derive(Debug, Clone)]
pub(crate) struct ChildHook {
    filter: NotifyFilter,
    ends: Arc<Ends>,
    /// Tests only: the child stops itself once it has sent its listener.
    stop_after_sending: bool,
}

/// Where children hand their listeners over (see `sys::Destination`).
#[derive(Debug)]
struct Ends {
    /// The sending end of the socket the supervisor's thread (or, for
    /// `Policy::apply`, the helper) waits on.
    socket: OwnedFd,
    /// The watch, whose mailbox and epoll a child of a keyed program uses
    /// instead, waking nobody.
    quiet: Option<Arc<Watch>>,
}

/// The variable that, set on a confined command in test builds, stops its
/// child with `SIGSTOP` once it has sent its listener
/// (`sys::hand_over_listener`), as job control may.
pub(crate) const STOP_AFTER_SENDING_VAR: &str = "STRUMENT_SANDBOX_TEST_STOP_AFTER_SENDING";

impl ChildHook {
    /// The seccomp program: the supervisor's, which makes the terminal
    /// filter's checks too (see `filter::program`).
    pub(crate) fn program(&self) -> sys::Program<'_> {
        self.filter.program()
    }

    /// Where the listener goes.
    pub(crate) fn destination(&self) -> sys::Destination {
        sys::Destination {
            socket: self.ends.socket.as_raw_fd(),
            quiet: self.ends.quiet.as_ref().map(|watch| sys::Quiet {
                mailbox: watch.mailbox_out.as_raw_fd(),
                watch: watch.epoll.as_raw_fd(),
            }),
        }
    }

    /// Whether the child stops once it has sent its listener (tests only).
    pub(crate) fn stops_after_sending(&self) -> bool {
        self.stop_after_sending
    }

    /// In test builds, stops a child of `cmd` after sending its listener
    /// when `cmd`'s environment sets [`STOP_AFTER_SENDING_VAR`].
    pub(crate) fn for_command(mut self, cmd: &std::process::Command) -> ChildHook {
        self.stop_after_sending = cfg!(debug_assertions)
            && cmd
                .get_envs()
                .any(|(name, value)| name == STOP_AFTER_SENDING_VAR && value.is_some());
        self
    }
}

/// One supervisor: a watch over the listeners of confined children until
/// each one's first call, kept by a thread of its own (started with the
/// first child that needs it, so that a policy applied to the calling
/// process starts no thread) or by a caller that waits for its command
/// anyway ([`Serving`]); and a thread serving each listener from its first
/// call on, until no process uses it. A command that never connects costs
/// no thread of its own.
pub(crate) struct Supervisor {
    /// The supervisor's filter, the terminal filter's checks included,
    /// keyed (see [`NotifyFilter`]).
    filter: NotifyFilter,
    shared: Arc<Shared>,
    /// The watch, made with the first child, or the errno that stopped it.
    watch: OnceLock<Result<Arc<Watch>, i32>>,
    /// The sending end of the listeners' socket, once the thread runs, or
    /// the errno that stopped it.
    started: OnceLock<Result<Started, i32>>,
}

/// What a running supervisor thread is reached through.
struct Started {
    ends: Arc<Ends>,
}

/// The listeners of commands that have made no call yet, watched by the
/// supervisor's thread (`epoll`, each armed for one event): at a
/// listener's first notification it gets a thread of its own, at its
/// hang-up (no process uses the filter) it is closed.
///
/// A child of a keyed program watches its listener here itself, under a
/// token of its own, and leaves the listener in the mailbox
/// (`sys::hand_over_listener`): the hand-over wakes nobody, and the
/// listener is taken from the mailbox by whoever gets that token's first
/// event. Listeners handed over otherwise are watched under their
/// descriptor number.
///
/// The hang-up still wakes this thread as the command exits, even for a
/// command that never connects: the filter's release wakes every poller
/// of its listener, and epoll, `poll` and `select` all take `EPOLLHUP`
/// whatever they asked for. The one waiter it does not wake, a thread
/// blocked in `SECCOMP_IOCTL_NOTIF_RECV`, would cost a thread for each
/// command, and nothing but a signal would end it once the command has
/// gone; watching later than the hand-over would make an early first
/// call wait. Measured on this project's benchmark machine (an
/// experiment that left the listener unwatched), the wake costs a
/// `true` 10 to 35 µs of its start-up, most of it in a single-threaded
/// caller, whose next `fork` then interrupts the CPU this thread ran on.
/// So the thread, woken by nothing but ends, leaves the watch unarmed for
/// [`COOL_DOWN`]: the ends of the commands that follow within it wake
/// nobody, and are taken together when it is over (see [`accept`]).
struct Watch {
    epoll: OwnedFd,
    /// By token: the child's (`sys::CHILD_TOKEN` set), or the listener's
    /// descriptor number. Held while the mailbox is emptied into it, so
    /// that a token looked up after that finds what the mailbox held.
    quiet: Mutex<std::collections::HashMap<u64, Quiet>>,
    /// The mailbox: its receiving end, and the sending end children use.
    mailbox_out: OwnedFd,
    mailbox_in: OwnedFd,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

/// A listener watched until its command's first call.
struct Quiet {
    served: Arc<serve::Served>,
    /// The pid of the command.
    command: i32,
}

/// The tokens of the supervisor thread's own `epoll`: the listeners'
/// socket, and the [`Watch`] (an `epoll` itself, which the thread shares
/// with a [`Serving`] caller).
const RECEIVER: u64 = u64::MAX;
const WATCHED: u64 = u64::MAX - 1;

/// How long the supervisor's thread leaves the [`Watch`] unarmed after a
/// wake that brought nothing but ends: a command's first call made in that
/// time waits for it (at most this long); the ends of the commands that
/// follow wake nobody and are taken together when it is over. A caller
/// that starts confined commands one after another, each a few
/// milliseconds long, then wakes this thread about once for every few of
/// them instead of once for each, and its `fork`s interrupt the CPU the
/// thread ran on that much less often. Measured on this project's
/// benchmark machine (`true` from a single-threaded caller, 20 alternating
/// runs of 300): `Prepared::confine`'s median ratio to bare 1.407 without,
/// 1.359 with.
const COOL_DOWN: std::time::Duration = std::time::Duration::from_millis(20);

impl Watch {
    /// Watches `quiet`'s listener until its first call.
    fn add(&self, quiet: Quiet) -> io::Result<()> {
        let fd = quiet.served.raw_fd();
        let token = u64::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        self.insert(token, quiet)
            .map_err(|_| io::Error::from_raw_os_error(libc::EIO))?;
        sys::epoll_add(&self.epoll, fd, token, true).inspect_err(|_| drop(self.take(token)))
    }

    /// Watches again, for one more event, a listener [`Watch::take`]n
    /// after its event; gives it back if it cannot be. A child's watch
    /// cannot be armed from here (it is of the child's descriptor): the
    /// listener is watched under its own number instead.
    fn rearm(&self, token: u64, quiet: Quiet) -> Result<(), Quiet> {
        let fd = quiet.served.raw_fd();
        if token & sys::CHILD_TOKEN != 0 {
            let Ok(own) = u64::try_from(fd) else {
                return Err(quiet);
            };
            self.insert(own, quiet)?;
            return sys::epoll_add(&self.epoll, fd, own, true)
                .or_else(|_| self.take(own).map_or(Ok(()), Err));
        }
        self.insert(token, quiet)?;
        sys::epoll_rearm(&self.epoll, fd, token).or_else(|_| self.take(token).map_or(Ok(()), Err))
    }

    fn insert(&self, token: u64, quiet: Quiet) -> Result<(), Quiet> {
        let Ok(mut all) = self.quiet.lock() else {
            return Err(quiet);
        };
        all.insert(token, quiet);
        Ok(())
    }

    /// Takes the listener watched under `token`: for a child's token,
    /// from the mailbox if it is still there.
    fn take(&self, token: u64) -> Option<Quiet> {
        let mut all = self.quiet.lock().ok()?;
        if token & sys::CHILD_TOKEN != 0 && !all.contains_key(&token) {
            self.collect(&mut all);
        }
        all.remove(&token)
    }

    /// Moves every listener waiting in the mailbox into `all`, under the
    /// token its child watches it under. A message without a token (none
    /// is sent so) or without a listener is dropped.
    fn collect(&self, all: &mut std::collections::HashMap<u64, Quiet>) {
        while let Ok(handed) = sys::recv_handed(&self.mailbox_in, false) {
            match handed {
                sys::Handed::Listener {
                    listener,
                    pid,
                    token,
                } if token & sys::CHILD_TOKEN != 0 => {
                    all.insert(
                        token,
                        Quiet {
                            served: serve::served(listener),
                            command: pid,
                        },
                    );
                }
                sys::Handed::Listener { .. } | sys::Handed::Lost => {}
                sys::Handed::End => return,
            }
        }
    }

    /// Whether no listener is watched or waits in the mailbox.
    fn is_empty(&self) -> bool {
        self.quiet.lock().map_or(true, |mut all| {
            self.collect(&mut all);
            all.is_empty()
        })
    }

    /// Takes what the watched listeners have now, without waiting: each
    /// command's first call, handed to a thread of its own, and each
    /// hang-up. The supervisor's thread and a [`Serving`] caller may both
    /// call it: each event, armed once, reaches one of them.
    ///
    /// Whether what it took were ends alone (at least one, and no first
    /// call).
    fn serve_ready(&self, shared: &Arc<Shared>) -> bool {
        let Ok(events) = sys::epoll_wait_for(&self.epoll, Some(0)) else {
            return false;
        };
        let mut only_ends = !events.is_empty();
        for (token, input) in events {
            match self.take(token) {
                Some(quiet) if input => {
                    only_ends = false;
                    first_call(self, token, quiet, shared);
                }
                // No process uses the filter any more: closed (and so no
                // longer watched).
                _ => {}
            }
        }
        only_ends
    }
}

/// The connect supervisor's watch over the confined commands that have
/// made no call yet, kept by the thread that waits for the command
/// ([`Waiter::wait_spawned_serving`](crate::session::Waiter::wait_spawned_serving))
/// instead of a thread of the supervisor's own: a command that never
/// connects then costs no thread at all, neither its start nor its end.
///
/// The waiting thread polls [`Serving::fd`] with whatever else it waits on,
/// and calls [`Serving::serve`] whenever it is readable: each command's
/// first call is handed to a thread of its own there, which serves it and
/// every call after, so nothing the waiter does in between can stall a
/// command. A waiter that does not poll the descriptor calls
/// [`Serving::in_background`] first.
///
/// # Examples
///
/// ```no_run
/// use std::io;
/// use std::os::fd::AsRawFd;
/// use std::process::ExitStatus;
/// use strument_sandbox::session::{Serving, Waiter};
/// use strument_sandbox::spawn::Spawned;
///
/// struct Polling;
/// impl Waiter for Polling {
///     fn wait_spawned_serving(
///         &mut self,
///         child: &mut Spawned,
///         serving: &mut Serving<'_>,
///     ) -> io::Result<ExitStatus> {
///         loop {
///             if let Some(status) = child.try_wait()? {
///                 return Ok(status);
///             }
///             let Some(fd) = serving.fd() else {
///                 return child.wait(); // a thread of the supervisor's serves
///             };
///             let mut poll = [libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
///             // A pidfd of the child, or a signalfd of SIGCHLD, would end this wait too.
///             unsafe { libc::poll(poll.as_mut_ptr(), 1, 10) };
///             serving.serve();
///         }
///     }
/// }
/// ```
pub struct Serving<'a> {
    supervisor: &'a Supervisor,
    /// `None` once handed to the supervisor's thread.
    watch: Option<&'a Watch>,
}

impl fmt::Debug for Serving<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serving")
            .field("by_caller", &self.watch.is_some())
            .finish()
    }
}

impl<'a> Serving<'a> {
    /// Kept by the caller: `supervisor`'s watch.
    pub(crate) fn new(supervisor: &'a Supervisor) -> io::Result<Serving<'a>> {
        Ok(Serving {
            supervisor,
            watch: Some(supervisor.watch()?),
        })
    }

    /// The descriptor to poll for input (`POLLIN`), or `None` when a thread
    /// of the supervisor's serves instead (after
    /// [`Serving::in_background`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # fn look(serving: &strument_sandbox::session::Serving<'_>) {
    /// if let Some(fd) = serving.fd() { /* poll it with the rest */ }
    /// # }
    /// ```
    #[must_use]
    pub fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.watch.map(|w| w.epoll.as_fd())
    }

    /// Takes what is ready, without waiting: each command's first call,
    /// handed to a thread that serves that command from then on. Call it
    /// whenever [`Serving::fd`] is readable; a call with nothing ready does
    /// nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn look(serving: &strument_sandbox::session::Serving<'_>) {
    /// serving.serve();
    /// # }
    /// ```
    pub fn serve(&self) {
        if let Some(watch) = self.watch {
            // Its caller polls the watch itself, with no cool-down.
            let _ = watch.serve_ready(&self.supervisor.shared);
        }
    }

    /// Hands the watch to a thread of the supervisor's own, for a waiter
    /// that does not poll [`Serving::fd`]; [`Serving::fd`] is `None` from
    /// then on.
    ///
    /// # Errors
    ///
    /// When the thread cannot start. The commands' notified calls then
    /// fail (`ENOSYS`) once the session ends, and wait until then: never
    /// pass unchecked.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn look(serving: &mut strument_sandbox::session::Serving<'_>) -> std::io::Result<()> {
    /// serving.in_background()?;
    /// assert!(serving.fd().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_background(&mut self) -> io::Result<()> {
        if self.watch.is_some() {
            self.supervisor.start()?;
            self.watch = None;
        }
        Ok(())
    }

    /// Once the caller stops serving: what is ready is taken (the hang-up
    /// of an ended command's listener, there by the time it is reaped),
    /// and what is still watched (a process the command left running,
    /// which has not connected yet) goes to the supervisor's thread.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        self.serve();
        match self.watch {
            Some(watch) if !watch.is_empty() => self.in_background(),
            _ => Ok(()),
        }
    }
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervisor").finish_non_exhaustive()
    }
}

impl Supervisor {
    /// A supervisor deciding by `rules`, whose children install its filter
    /// (the terminal filter's checks included); no thread runs yet.
    ///
    /// # Errors
    ///
    /// When the architecture has no filter.
    pub(crate) fn new(rules: Rules) -> io::Result<Supervisor> {
        let filter = NotifyFilter::new().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "no seccomp program for this architecture ({})",
                    std::env::consts::ARCH
                ),
            )
        })?;
        // Every socket of a confined thread, and the listener of
        // `Policy::apply`, is fetched with pidfd_getfd: where a container's
        // seccomp profile refuses it (Docker's default without
        // CAP_SYS_PTRACE) the supervisor could serve nothing, so nothing
        // runs.
        sys::pidfd_calls_allowed().map_err(|(call, e)| {
            io::Error::new(
                e.kind(),
                format!(
                    "{call} is refused here ({e}); Docker's default seccomp profile \
                     allows pidfd_getfd only with CAP_SYS_PTRACE: run the container with \
                     --cap-add SYS_PTRACE, or with a profile that allows pidfd_open and \
                     pidfd_getfd"
                ),
            )
        })?;
        Ok(Supervisor {
            filter,
            shared: Arc::new(Shared {
                rules,
                bound: Mutex::new(Bound::default()),
                refused: Mutex::new(Vec::new()),
                waiter: OnceLock::new(),
            }),
            watch: OnceLock::new(),
            started: OnceLock::new(),
        })
    }

    /// What a child installs and where it sends its listener; starts the
    /// thread that receives listeners the first time.
    ///
    /// # Errors
    ///
    /// When the socket pair cannot be made or the thread cannot start.
    pub(crate) fn hook(&self) -> io::Result<ChildHook> {
        let started = self.start()?;
        Ok(ChildHook {
            filter: self.filter.clone(),
            ends: Arc::clone(&started.ends),
            stop_after_sending: false,
        })
    }

    /// The watch over listeners until their first call, made the first
    /// time; watched by nobody until [`Supervisor::start`] or a
    /// [`Serving`] caller.
    fn watch(&self) -> io::Result<&Arc<Watch>> {
        self.watch
            .get_or_init(|| {
                let (mailbox_out, mailbox_in) = sys::seqpacket_pair().map_err(|e| errno(&e))?;
                Ok(Arc::new(Watch {
                    epoll: sys::epoll_new().map_err(|e| errno(&e))?,
                    quiet: Mutex::new(std::collections::HashMap::new()),
                    mailbox_out,
                    mailbox_in,
                }))
            })
            .as_ref()
            .map_err(|e| io::Error::from_raw_os_error(*e))
    }

    /// The thread that takes listeners and keeps the watch, started the
    /// first time.
    fn start(&self) -> io::Result<&Started> {
        let watch = Arc::clone(self.watch()?);
        let started = self.started.get_or_init(|| {
            let (receiver, sender) = sys::seqpacket_pair().map_err(|e| errno(&e))?;
            // Its own epoll: the listeners' socket and the watch, which a
            // `Serving` caller may poll too.
            let own = sys::epoll_new().map_err(|e| errno(&e))?;
            sys::epoll_add(&own, receiver.as_raw_fd(), RECEIVER, false).map_err(|e| errno(&e))?;
            // Armed for one event at a time: see COOL_DOWN.
            sys::epoll_add(&own, watch.epoll.as_raw_fd(), WATCHED, true).map_err(|e| errno(&e))?;
            let shared = Arc::clone(&self.shared);
            let ends = Arc::new(Ends {
                socket: sender,
                quiet: Some(Arc::clone(&watch)),
            });
            sys::spawn_unsignalled("strument-connect".into(), move || {
                accept(receiver, &own, &watch, &shared);
            })
            .map_err(|e| errno(&e))?;
            Ok(Started { ends })
        });
        started
            .as_ref()
            .map_err(|e| io::Error::from_raw_os_error(*e))
    }

    /// The program a child of [`Spawn`](crate::spawn::Spawn) installs, its
    /// listener landing in this process's table (see `sys::Plan::connect`).
    pub(crate) fn program(&self) -> sys::Program<'_> {
        self.filter.program()
    }

    /// Serves the listener of `command`, a child of
    /// [`Spawn`](crate::spawn::Spawn) that has exec'd: watched by the
    /// supervisor's thread (started now the first time) until its first
    /// call, then served by a thread of its own until no process uses its
    /// filter.
    ///
    /// # Errors
    ///
    /// When the thread cannot start or the listener cannot be watched: the
    /// listener is closed, and the command's notified calls then fail
    /// (`ENOSYS`), never pass unchecked.
    ///
    /// With `by_caller`, no thread starts: the caller keeps the watch
    /// through a [`Serving`].
    pub(crate) fn serve_child(
        &self,
        listener: OwnedFd,
        command: i32,
        by_caller: bool,
    ) -> io::Result<()> {
        if !by_caller {
            self.start()?;
        }
        self.watch()?.add(Quiet {
            served: serve::served(listener),
            command,
        })
    }

    /// For `Policy::apply`: starts a helper process, unconfined because it
    /// is forked before the caller restricts itself, that serves the
    /// listener the caller is about to send, and ends when no process uses
    /// that filter any more. The caller names it as its ptracer, which
    /// Yama's `ptrace_scope` 1 requires of a process that is not an
    /// ancestor.
    ///
    /// # Errors
    ///
    /// When the socket pair, the fork or `PR_SET_PTRACER` fails.
    pub(crate) fn start_helper(&self) -> io::Result<ChildHook> {
        let (ours, theirs) = sys::seqpacket_pair()?;
        let shared = Arc::clone(&self.shared);
        // No wait here for the helper to be scheduled: its pid is known
        // once the intermediate child has forked it.
        let helper = sys::fork_helper(&theirs, move |socket| {
            if let Ok(Some((listener, command))) = sys::recv_listener(&socket) {
                serve::serve(serve::served(listener), command, None, shared);
            }
        })?;
        drop(theirs);
        sys::allow_ptracer(helper)?;
        // The caller runs on after installing it, and would hold a key.
        let filter = NotifyFilter::without_key().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "no seccomp program for this architecture",
            )
        })?;
        Ok(ChildHook {
            filter,
            ends: Arc::new(Ends {
                socket: ours,
                quiet: None,
            }),
            stop_after_sending: false,
        })
    }

    /// Takes the refusals recorded for the command with pid `command`.
    pub(crate) fn take_refused(&self, command: u32) -> Vec<RefusedConnect> {
        let Ok(mut list) = self.shared.refused.lock() else {
            return Vec::new();
        };
        let (mut mine, rest): (Vec<RefusedConnect>, _) =
            list.drain(..).partition(|r| r.command == command);
        *list = rest;
        drop(list);
        // Off the refused call's path: a scan of /proc for each port.
        for refused in &mut mine {
            if let ConnectTarget::Port { address, transport } = refused.target {
                refused.listener = local_net::find_listener(address, transport);
            }
        }
        mine
    }
}

/// The supervisor's thread: takes the listeners confined children send,
/// and watches every listener until its first call, when it gets a thread
/// of its own (so that a call that waits stalls no other command), or its
/// end. Runs until every sending end is closed (the supervisor is gone)
/// and no listener is watched.
///
/// The watch is armed in this thread's `epoll` for one event at a time,
/// and armed again at once after a wake that brought a first call; after
/// one that brought nothing but ends, only once [`COOL_DOWN`] is over.
fn accept(receiver: OwnedFd, own: &OwnedFd, watch: &Watch, shared: &Arc<Shared>) {
    // What wakes this thread is mostly a command's end (see `Watch`), in
    // the middle of the command's `exit`: preempting it there would delay
    // the caller's `wait`. A first call waits for it as long as the CPU's
    // current task runs on: not at all on an idle machine (the command
    // waiting in that call sleeps at once), until the scheduler's next
    // turn on a busy CPU; its later calls are served on a thread of their
    // own, at the ordinary policy.
    sys::wake_without_preempting();
    let mut receiver = Some(receiver);
    // While the watch is left unarmed: when to arm it again.
    let mut cooling: Option<std::time::Instant> = None;
    loop {
        if receiver.is_none() && watch.is_empty() {
            return;
        }
        let timeout = cooling.map(|until| {
            let left = until.saturating_duration_since(std::time::Instant::now());
            // Rounded up: a wait of 0 would spin until the deadline.
            i32::try_from(left.as_millis().saturating_add(1)).unwrap_or(i32::MAX)
        });
        let Ok(events) = sys::epoll_wait_for(own, timeout) else {
            return;
        };
        if cooling.is_some_and(|until| std::time::Instant::now() >= until) {
            cooling = arm_watch(own, watch);
        }
        for (token, _) in events {
            if token == WATCHED {
                cooling = if watch.serve_ready(shared) {
                    Some(std::time::Instant::now() + COOL_DOWN)
                } else {
                    arm_watch(own, watch)
                };
                continue;
            }
            let Some(socket) = &receiver else { continue };
            match sys::recv_handed(socket, true) {
                Ok(sys::Handed::Listener { listener, pid, .. }) => {
                    let served = serve::served(listener);
                    let quiet = Quiet {
                        served: Arc::clone(&served),
                        command: pid,
                    };
                    if watch.add(quiet).is_err() {
                        serve_apart(served, pid, None, shared);
                    }
                }
                Ok(sys::Handed::Lost) => {}
                // Every sending end closed: no listener comes any more
                // (closing the socket also stops its watch).
                Ok(sys::Handed::End) | Err(_) => receiver = None,
            }
        }
    }
}

/// Arms the watch in the supervisor thread's `epoll` for one more event
/// (ready at once if the watch has events waiting); if that fails, when to
/// try again, soon: an unarmed watch would leave a first call waiting.
fn arm_watch(own: &OwnedFd, watch: &Watch) -> Option<std::time::Instant> {
    match sys::epoll_rearm(own, watch.epoll.as_raw_fd(), WATCHED) {
        Ok(()) => None,
        Err(_) => Some(std::time::Instant::now() + std::time::Duration::from_millis(1)),
    }
}

/// A watched listener has a notification: the command's first call,
/// served with all that follow on a thread of its own.
fn first_call(watch: &Watch, token: u64, quiet: Quiet, shared: &Arc<Shared>) {
    let notif = match sys::recv_notification(quiet.served.fd()) {
        Ok(notif) => notif,
        // The thread left its call (a signal, or its end) before it was
        // received: its restart, if any, comes as a new event.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => {
            if let Err(quiet) = watch.rearm(token, quiet) {
                serve_apart(quiet.served, quiet.command, None, shared);
            }
            return;
        }
        // Unusable: dropped, the command's notified calls then fail.
        Err(_) => return,
    };
    serve_apart(quiet.served, quiet.command, Some(notif), shared);
}

/// Serves `served` on a thread of its own from now on, starting with
/// `first`, a notification already received. Without a thread the
/// listener is dropped: the command's notified calls then fail with
/// `ENOSYS`, never pass unchecked (`first` is then never answered, and
/// fails the same way once the listener closes).
fn serve_apart(
    served: Arc<serve::Served>,
    command: i32,
    first: Option<sys::Notification>,
    shared: &Arc<Shared>,
) {
    let shared = Arc::clone(shared);
    // Started by the watch's thread, it would inherit its policy.
    let inherited = sys::wakes_without_preempting();
    let _ = sys::spawn_unsignalled(format!("strument-connect-{command}"), move || {
        if inherited {
            sys::wake_as_usual();
        }
        serve::serve(served, command, first, shared);
    });
}

/// The IP address and port of a `getsockname` answer, if it is one.
fn inet(local: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(local.get(..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(local.get(2..4)?.try_into().ok()?);
    let ip: std::net::IpAddr = if family == libc::AF_INET {
        <[u8; 4]>::try_from(local.get(4..8)?).ok()?.into()
    } else if family == libc::AF_INET6 {
        <[u8; 16]>::try_from(local.get(8..24)?).ok()?.into()
    } else {
        return None;
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_bind_records_what_the_kernel_bound_the_socket_to_whatever_is_renamed_over_it() {
        use std::os::unix::fs::MetadataExt;
        use std::os::unix::net::{UnixDatagram, UnixListener};
        let shared = Shared {
            rules: Rules::default(),
            bound: Mutex::new(Bound::default()),
            refused: Mutex::new(Vec::new()),
            waiter: OnceLock::new(),
        };
        let pending = || shared.bound.lock().expect("lock").pending.len();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.sock");
        let socket = UnixDatagram::unbound().expect("socket");
        shared.note_bind(socket.as_fd());
        // Not bound yet: noted, nothing recorded.
        shared.settle();
        assert_eq!(pending(), 1);
        assert!(shared.bound.lock().expect("lock").files.is_empty());
        let address = serve::unix_address(&path).expect("address");
        sys::bind(socket.as_fd(), &address).expect("bind");
        let meta = std::fs::metadata(&path).expect("stat");
        // Another socket renamed over the name before the supervisor asks:
        // the first still names its own file.
        let other_path = dir.path().join("other.sock");
        let _other = UnixListener::bind(&other_path).expect("bind");
        let other = std::fs::metadata(&other_path).expect("stat");
        std::fs::rename(&other_path, &path).expect("rename");
        shared.settle();
        assert_eq!(pending(), 0);
        assert!(shared.known((meta.dev(), meta.ino())));
        assert!(!shared.known((other.dev(), other.ino())));
        // A socket bound already (outside) is not noted.
        let outside = UnixListener::bind(dir.path().join("outside.sock")).expect("bind");
        shared.note_bind(outside.as_fd());
        assert_eq!(pending(), 0);
        // An abstract name is recorded as the kernel holds it.
        let name = format!("strument-settle-{}", std::process::id());
        let socket = UnixDatagram::unbound().expect("socket");
        shared.note_bind(socket.as_fd());
        let mut address = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        address.push(0);
        address.extend_from_slice(name.as_bytes());
        sys::bind(socket.as_fd(), &address).expect("bind");
        shared.settle();
        assert!(
            shared
                .bound
                .lock()
                .expect("lock")
                .abstract_names
                .contains(name.as_bytes())
        );
        // A socket closed unbound is forgotten.
        let closed = UnixDatagram::unbound().expect("socket");
        shared.note_bind(closed.as_fd());
        assert_eq!(pending(), 1);
        drop(closed);
        shared.settle();
        assert_eq!(pending(), 0);
    }
}
