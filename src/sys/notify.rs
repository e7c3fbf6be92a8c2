//! Seccomp user notification and what the connect supervisor does with a
//! notification: the listener's ioctls, passing it over a socket, reading
//! a child's memory and descriptors, and the socket calls performed for it.
//!
//! The functions the child calls between `fork` and `exec`
//! ([`install_listener`], [`hand_over_listener`], [`send_listener`]) are
//! async-signal-safe: raw syscalls on memory the parent built or on the
//! stack, no allocation.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use super::errno;
use crate::connect::message::{self, Layout};
use crate::terminal::SockFilter;

/// `SECCOMP_SET_MODE_FILTER` of `<linux/seccomp.h>`.
const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;

/// `struct sock_fprog` of `<linux/filter.h>`.
#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const SockFilter,
}

fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A byte count (`ssize_t`), or the errno.
fn cvt_len(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// How many 32-bit words the hand-over key has: two arguments' worth.
#[cfg(target_pointer_width = "64")]
pub(crate) const KEY_WORDS: usize = 4;
#[cfg(not(target_pointer_width = "64"))]
pub(crate) const KEY_WORDS: usize = 2;

/// A hand-over key (see `connect::filter::NotifyFilter`).
pub(crate) type Key = [u32; KEY_WORDS];

/// The longest keyed program [`install_listener`] copies onto the stack to
/// write its key into (the supervisor's is under a hundred instructions).
const KEYED_MAX: usize = 256;

/// The connect supervisor's program as a child installs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Program<'a> {
    pub(crate) instructions: &'a [SockFilter],
    /// Where the words of the hand-over key go, for a program that has one.
    pub(crate) key_at: Option<[usize; KEY_WORDS]>,
}

/// Installs `program` with `SECCOMP_FILTER_FLAG_NEW_LISTENER` and returns
/// the listener's raw descriptor and the key installed with it, or the
/// errno. A keyed program is copied onto the stack and gets a key of its
/// own, drawn here (`getrandom`, which never blocks with `GRND_INSECURE`);
/// a program without one gets installed as it is, with a zero key. With
/// `all_threads`, on every thread: TSYNC and NEW_LISTENER together need
/// `TSYNC_ESRCH` (Linux 5.7), since both would otherwise answer with a
/// positive number. Async-signal-safe.
pub(crate) fn install_listener(
    program: Program<'_>,
    all_threads: bool,
) -> Result<(RawFd, Key), i32> {
    let mut key: Key = [0; KEY_WORDS];
    let mut copy = [SockFilter::new(0, 0, 0, 0); KEYED_MAX];
    let instructions = match program.key_at {
        None => program.instructions,
        Some(key_at) => {
            let len = program.instructions.len();
            if len > KEYED_MAX || key_at.iter().any(|&at| at >= len) {
                return Err(libc::EINVAL);
            }
            random_words(&mut key)?;
            copy[..len].copy_from_slice(program.instructions);
            write_key(&mut copy[..len], key_at, key);
            &copy[..len]
        }
    };
    let Ok(len) = libc::c_ushort::try_from(instructions.len()) else {
        return Err(libc::EINVAL);
    };
    let prog = SockFprog {
        len,
        filter: instructions.as_ptr(),
    };
    let mut flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    if all_threads {
        flags |= libc::SECCOMP_FILTER_FLAG_TSYNC | libc::SECCOMP_FILTER_FLAG_TSYNC_ESRCH;
    }
    // WAIT_KILLABLE_RECV (Linux 5.19): once the supervisor has received a
    // call, a signal no longer interrupts and restarts it, which would
    // repeat a connect already performed. Older kernels refuse the flag.
    let ret = if WITHOUT_KILLABLE_RECV.load(Ordering::Relaxed) {
        seccomp_filter(&prog, flags)
    } else {
        match seccomp_filter(&prog, flags | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV) {
            Err(libc::EINVAL) => seccomp_filter(&prog, flags),
            other => other,
        }
    };
    let fd = ret.and_then(|fd| RawFd::try_from(fd).map_err(|_| libc::EBADF))?;
    Ok((fd, key))
}

/// Writes `key` into `instructions`, word `i` at `key_at[i]`.
/// Async-signal-safe.
pub(crate) fn write_key(instructions: &mut [SockFilter], key_at: [usize; KEY_WORDS], key: Key) {
    for (at, word) in key_at.into_iter().zip(key) {
        instructions[at] = instructions[at].with_k(word);
    }
}

/// Fills `words` from the kernel's random source without blocking.
/// Async-signal-safe. The calls a child makes between `fork` and `exec` go
/// through `syscall` where the C library has a wrapper of its own: each
/// wrapper is one more page of code the child faults in (its page tables
/// for the library are not copied by `fork`), a few microseconds each.
fn random_words(words: &mut [u32]) -> Result<(), i32> {
    let len = std::mem::size_of_val(words);
    let mut filled = 0;
    while filled < len {
        // SAFETY: the kernel writes at most `len - filled` bytes into
        // `words`, from byte `filled` on.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getrandom,
                words.as_mut_ptr().cast::<u8>().add(filled),
                len - filled,
                libc::GRND_INSECURE,
            )
        };
        match n {
            n if n > 0 => filled += n as usize,
            0 => return Err(libc::EIO),
            _ if errno() == libc::EINTR => {}
            _ => return Err(errno()),
        }
    }
    Ok(())
}

/// Set (by test builds only, see `connect::filter`): listeners are
/// installed without `WAIT_KILLABLE_RECV`, as on a kernel before 5.19, so
/// that a signal restarts a call the supervisor performs.
static WITHOUT_KILLABLE_RECV: AtomicBool = AtomicBool::new(false);

/// Installs later listeners without `WAIT_KILLABLE_RECV`.
pub(crate) fn install_without_killable_recv() {
    WITHOUT_KILLABLE_RECV.store(true, Ordering::Relaxed);
}

fn seccomp_filter(prog: &SockFprog, flags: libc::c_ulong) -> Result<libc::c_long, i32> {
    // SAFETY: `prog` points at initialised instructions that outlive the
    // call; the kernel copies the program and keeps no pointer to it.
    let ret = unsafe { libc::syscall(libc::SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, prog) };
    if ret < 0 { Err(errno()) } else { Ok(ret) }
}

/// A `SOCK_SEQPACKET` pair, both ends close-on-exec: listeners travel from
/// children to the supervisor over it, one message each.
pub(crate) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors the kernel writes.
    let ret = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Where a confined child's listener goes (see [`hand_over_listener`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Destination {
    /// The supervisor thread's socket: a message there wakes the thread,
    /// which takes the listener at once.
    pub(crate) socket: RawFd,
    /// For a keyed program, the quiet way: the mailbox (a socket nobody
    /// waits on) and the epoll of the supervisor's watch.
    pub(crate) quiet: Option<Quiet>,
}

/// The quiet way of a [`Destination`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quiet {
    pub(crate) mailbox: RawFd,
    pub(crate) watch: RawFd,
}

/// The bit every token a child watches its own listener under has (see
/// [`hand_over_listener`]): the watch's other tokens are descriptor
/// numbers, which never have it.
pub(crate) const CHILD_TOKEN: u64 = 1 << 63;

/// Hands the listener `fd`, installed with `key` (a keyed program: see
/// `connect::filter::NotifyFilter`), to the supervisor, then closes it.
/// The child goes on at once: a message holds the listener from then on,
/// until the supervisor takes it.
///
/// The quiet way first, which wakes nobody: the child puts the listener
/// into the watch's epoll itself, armed for one event under a token drawn
/// here ([`CHILD_TOKEN`] set), and queues it with that token in the
/// mailbox, which no thread waits on. The supervisor takes it from there
/// when its command's first notification or its end fires that event,
/// long after this child has `exec`ed. A supervisor woken here instead
/// would run during the `fork`-to-`exec` window, preempting this child on
/// its CPU and copying the pages both still share.
///
/// Where that cannot be done (a full mailbox, an epoll at its watch
/// limit, no quiet way given), the listener goes over `to.socket`, whose
/// message wakes the supervisor's thread (an event already armed here then
/// comes under a token nobody knows, and is ignored). Each `sendmsg`
/// carries the key in arguments it does not use, and so passes the filter
/// the child has just installed, which would otherwise hold it for the
/// very supervisor it is sending to. `stop_after` (tests only) stops the
/// caller with `SIGSTOP` once it has sent, as job control may.
/// Async-signal-safe: used between `fork` and `exec`.
pub(crate) fn hand_over_listener(
    to: Destination,
    fd: RawFd,
    key: &Key,
    stop_after: bool,
) -> Result<(), i32> {
    // SAFETY: getpid takes no arguments (`syscall`: see `random_words`).
    let pid = unsafe { libc::syscall(libc::SYS_getpid) } as i32;
    let quietly = to.quiet.is_some_and(|quiet| {
        let mut token = [0u32; 2];
        random_words(&mut token).is_ok() && {
            let token = (u64::from(token[1]) << 32 | u64::from(token[0])) | CHILD_TOKEN;
            watch_once_raw(quiet.watch, fd, token)
                && send_handed(quiet.mailbox, fd, pid, token, key, libc::MSG_DONTWAIT).is_ok()
        }
    });
    let result = if quietly {
        Ok(())
    } else {
        send_handed(to.socket, fd, pid, 0, key, 0)
    };
    if result.is_ok() && stop_after {
        // SAFETY: kill takes integers only.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
    }
    // SAFETY: `fd` is the listener this child created and owns alone.
    unsafe { libc::close(fd) };
    result
}

/// Arms `epoll` for one input event of `fd` under `token`
/// (`EPOLLONESHOT`). Async-signal-safe.
fn watch_once_raw(epoll: RawFd, fd: RawFd, token: u64) -> bool {
    let mut event = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
        u64: token,
    };
    // SAFETY: `event` is a valid epoll_event the kernel copies (`syscall`:
    // see `random_words`).
    unsafe {
        libc::syscall(
            libc::SYS_epoll_ctl,
            epoll,
            libc::EPOLL_CTL_ADD,
            fd,
            &raw mut event,
        ) == 0
    }
}

/// What one hand-over message carries besides the listener: the sender's
/// pid, and the token it watches the listener under (0: none).
const HANDED_LEN: usize = 16;

/// Sends the listener `fd` over `socket` (`SCM_RIGHTS`) with `pid` and
/// `token`, the key in the fifth and sixth arguments. Async-signal-safe.
fn send_handed(
    socket: RawFd,
    fd: RawFd,
    pid: i32,
    token: u64,
    key: &Key,
    flags: libc::c_int,
) -> Result<(), i32> {
    let mut payload = [0u8; HANDED_LEN];
    payload[..4].copy_from_slice(&pid.to_ne_bytes());
    payload[8..].copy_from_slice(&token.to_ne_bytes());
    let mut iov = iovec(&mut payload);
    let mut control = Control([0; CONTROL_LEN]);
    let mut msg = message(&mut iov, &mut control);
    // SAFETY: CMSG_SPACE computes a size from a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(FD_LEN) } as _;
    // SAFETY: the control buffer is aligned for a cmsghdr and has room for
    // one carrying one descriptor (`CONTROL_LEN`), so the first header is
    // not NULL and its data is inside the buffer.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&raw const msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(FD_LEN) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
    }
    let [fifth, sixth] = key_arguments(key);
    loop {
        // SAFETY: `msg` and what it points at (the payload, the control
        // buffer) outlive the call; the last two arguments are integers
        // `sendmsg` does not read.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_sendmsg,
                socket,
                &raw const msg,
                libc::MSG_NOSIGNAL | flags,
                0,
                fifth,
                sixth,
            )
        };
        if ret >= 0 {
            return Ok(());
        }
        if errno() != libc::EINTR {
            return Err(errno());
        }
    }
}

/// The key as the fifth and sixth arguments of a system call, in the order
/// of the filter's `KEY_PLACES`: low half first.
pub(crate) fn key_arguments(key: &Key) -> [libc::c_long; 2] {
    #[cfg(target_pointer_width = "64")]
    let arguments = [
        (u64::from(key[1]) << 32 | u64::from(key[0])) as libc::c_long,
        (u64::from(key[3]) << 32 | u64::from(key[2])) as libc::c_long,
    ];
    #[cfg(not(target_pointer_width = "64"))]
    let arguments = [key[0] as libc::c_long, key[1] as libc::c_long];
    arguments
}

/// The size of one descriptor in a control message.
const FD_LEN: libc::c_uint = std::mem::size_of::<RawFd>() as libc::c_uint;

/// Room for a control message carrying a few descriptors (a sender of
/// [`hand_over_listener`] sends one; more are closed on receipt).
const CONTROL_LEN: usize = 64;

/// A control-message buffer, aligned as a `cmsghdr` must be.
#[repr(C, align(8))]
struct Control([u8; CONTROL_LEN]);

/// An iovec over `buf`.
fn iovec(buf: &mut [u8]) -> libc::iovec {
    libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    }
}

/// A message of the one `iov`, with `control` for its control messages.
/// The pointers are into both, which must outlive the message's use.
fn message(iov: &mut libc::iovec, control: &mut Control) -> libc::msghdr {
    // SAFETY: an all-zero msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = CONTROL_LEN as _;
    msg
}

/// What one message of [`hand_over_listener`] brought.
pub(crate) enum Handed {
    /// A child's listener, with the child's pid and the token it watches
    /// the listener under ([`CHILD_TOKEN`] set), or 0.
    Listener {
        listener: OwnedFd,
        pid: i32,
        token: u64,
    },
    /// A message without a listener, or cut short: whatever came with it
    /// is closed. (A listener lost on the way closes with it, and its
    /// child's notified calls then fail with `ENOSYS`.)
    Lost,
    /// Every sending end is closed.
    End,
}

/// Receives one message of [`hand_over_listener`]; with `wait` false,
/// fails with `EAGAIN` (`WouldBlock`) when none is queued.
pub(crate) fn recv_handed(socket: &OwnedFd, wait: bool) -> io::Result<Handed> {
    let mut payload = [0u8; HANDED_LEN];
    let mut iov = iovec(&mut payload);
    let mut control = Control([0; CONTROL_LEN]);
    let mut msg = message(&mut iov, &mut control);
    let flags = libc::MSG_CMSG_CLOEXEC | if wait { 0 } else { libc::MSG_DONTWAIT };
    let n = loop {
        // SAFETY: `msg` points at the buffers above, which outlive the
        // call; received descriptors are close-on-exec.
        let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &raw mut msg, flags) };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    };
    // Every descriptor that came, each owned from here on (the kernel
    // lays its control messages out natively and well formed, so the walk
    // cannot fail).
    // `msg_controllen` is a `size_t` in glibc, a `socklen_t` in musl.
    #[allow(clippy::unnecessary_cast)]
    let received = (msg.msg_controllen as usize).min(CONTROL_LEN);
    let native = Layout::new(std::mem::size_of::<usize>() == 4);
    let fds: Vec<OwnedFd> = message::control(native, &control.0[..received])
        .unwrap_or_default()
        .iter()
        .filter(|c| c.level == libc::SOL_SOCKET && c.kind == libc::SCM_RIGHTS)
        .flat_map(|c| message::rights(&c.data))
        // SAFETY: each was installed in this process's table by this
        // `recvmsg`, and is owned by nothing else.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    if n == 0 && fds.is_empty() {
        return Ok(Handed::End);
    }
    let whole = usize::try_from(n) == Ok(HANDED_LEN)
        && msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) == 0;
    let mut fds = fds.into_iter();
    Ok(match (fds.next(), fds.next()) {
        (Some(listener), None) if whole => {
            let [a, b, c, d, _, _, _, _, token @ ..] = payload;
            Handed::Listener {
                listener,
                pid: i32::from_ne_bytes([a, b, c, d]),
                token: u64::from_ne_bytes(token),
            }
        }
        _ => Handed::Lost,
    })
}

/// Hands the listener `fd` of a program without a key to the supervisor,
/// then closes it: for a process that runs on after installing its filter
/// (`Policy::apply`), which [`hand_over_listener`]'s key would stay with.
/// Under that filter its own `sendmsg` would wait for this very listener,
/// so the descriptor is not passed: its number and the caller's pid go
/// over `socket` with `sendto` without an address (which the filter
/// passes), the supervisor fetches it with `pidfd_getfd`, and the caller
/// waits for that with a `connect(-1)` the filter notifies: it returns
/// (`EBADF`) once the supervisor serves the listener.
/// `stop_between` (tests only) stops the caller with `SIGSTOP` between the
/// two, as job control may. Async-signal-safe: used between `fork` and
/// `exec`.
pub(crate) fn send_listener(socket: RawFd, fd: RawFd, stop_between: bool) -> Result<(), i32> {
    // SAFETY: getpid takes no arguments.
    let pid = unsafe { libc::getpid() };
    let mut payload = [0u8; 8];
    payload[..4].copy_from_slice(&pid.to_ne_bytes());
    payload[4..].copy_from_slice(&fd.to_ne_bytes());
    // SAFETY: `payload` is readable for its length; no address.
    let ret = unsafe {
        libc::sendto(
            socket,
            payload.as_ptr().cast(),
            payload.len(),
            libc::MSG_NOSIGNAL,
            std::ptr::null(),
            0,
        )
    };
    let result = if ret < 0 {
        Err(errno())
    } else {
        if stop_between {
            // SAFETY: getpid and kill take integers only.
            unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
        }
        // SAFETY: integers and a NULL address; the supervisor answers it
        // without reading memory at the address.
        unsafe { libc::syscall(libc::SYS_connect, -1, std::ptr::null::<u8>(), 0) };
        Ok(())
    };
    // SAFETY: `fd` is the listener this child created and owns alone.
    unsafe { libc::close(fd) };
    result
}

/// What one message on the listeners' socket brought.
enum Received {
    /// A child's listener, fetched, with the child's pid.
    Listener { listener: OwnedFd, pid: i32 },
    /// A message whose listener could not be fetched: its child, which
    /// waits for the supervisor and must not run unsupervised, is killed.
    Skipped,
    /// Every sending end is closed.
    End,
}

/// Receives one message of [`send_listener`] and fetches its listener.
fn recv_listener_once(socket: &OwnedFd) -> io::Result<Received> {
    let mut payload = [0u8; 8];
    let n = loop {
        // SAFETY: `payload` is writable for its length.
        let n = unsafe {
            libc::recv(
                socket.as_raw_fd(),
                payload.as_mut_ptr().cast(),
                payload.len(),
                0,
            )
        };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    };
    if n == 0 {
        return Ok(Received::End);
    }
    if n != 8 {
        return Err(io::Error::from_raw_os_error(libc::EBADMSG));
    }
    let pid = i32::from_ne_bytes([payload[0], payload[1], payload[2], payload[3]]);
    let fd = i32::from_ne_bytes([payload[4], payload[5], payload[6], payload[7]]);
    let Ok(pidfd) = pidfd_open(pid) else {
        return Ok(Received::Skipped);
    };
    match pidfd_getfd(&pidfd, fd) {
        Ok(listener) => Ok(Received::Listener { listener, pid }),
        Err(_) => {
            // SAFETY: integers and a NULL siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            Ok(Received::Skipped)
        }
    }
}

/// Receives one listener and the pid that sent it ([`send_listener`]);
/// `None` once every sending end is closed. A child whose listener cannot
/// be fetched is killed (see [`Received::Skipped`]), and the next listener
/// is waited for.
pub(crate) fn recv_listener(socket: &OwnedFd) -> io::Result<Option<(OwnedFd, i32)>> {
    loop {
        match recv_listener_once(socket)? {
            Received::Listener { listener, pid } => return Ok(Some((listener, pid))),
            Received::Skipped => {}
            Received::End => return Ok(None),
        }
    }
}

/// What `poll` found on a listener.
pub(crate) enum Ready {
    /// A notification waits.
    Notification,
    /// No task uses the filter any more.
    Gone,
}

/// Waits for a notification on `listener`.
pub(crate) fn wait_notification(listener: &OwnedFd) -> io::Result<Ready> {
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let ret = unsafe { libc::poll(&raw mut pfd, 1, -1) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if pfd.revents & libc::POLLIN != 0 {
            return Ok(Ready::Notification);
        }
        if pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return Ok(Ready::Gone);
        }
    }
}

/// A new epoll instance, close-on-exec.
pub(crate) fn epoll_new() -> io::Result<OwnedFd> {
    // SAFETY: flags only.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Watches `fd` for input (a listener: a notification waiting; hang-up,
/// no task using the filter, is always reported) under the token `token`.
/// With `once`, the watch is disarmed after its first event
/// (`EPOLLONESHOT`). Safe to call while another thread waits on `epoll`.
pub(crate) fn epoll_add(epoll: &OwnedFd, fd: RawFd, token: u64, once: bool) -> io::Result<()> {
    epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, token, once)
}

/// Arms again the watch of `fd`, added with `once` and disarmed by its
/// event, for one more event.
pub(crate) fn epoll_rearm(epoll: &OwnedFd, fd: RawFd, token: u64) -> io::Result<()> {
    epoll_ctl(epoll, libc::EPOLL_CTL_MOD, fd, token, true)
}

fn epoll_ctl(epoll: &OwnedFd, op: i32, fd: RawFd, token: u64, once: bool) -> io::Result<()> {
    let mut events = libc::EPOLLIN as u32;
    if once {
        events |= libc::EPOLLONESHOT as u32;
    }
    let mut event = libc::epoll_event { events, u64: token };
    // SAFETY: `event` is a valid epoll_event the kernel copies.
    let ret = unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, fd, &raw mut event) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Waits for events on `epoll` (retrying on `EINTR`), at most `timeout_ms`
/// (`None`: until one comes; `Some(0)`: takes what is there): each as its
/// token and whether it is input (`true`) or only a hang-up or error.
pub(crate) fn epoll_wait_for(
    epoll: &OwnedFd,
    timeout_ms: Option<i32>,
) -> io::Result<Vec<(u64, bool)>> {
    const MAX: usize = 16;
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX];
    let timeout = timeout_ms.unwrap_or(-1);
    loop {
        // SAFETY: `events` holds MAX writable entries.
        let n = unsafe {
            libc::epoll_wait(epoll.as_raw_fd(), events.as_mut_ptr(), MAX as i32, timeout)
        };
        match usize::try_from(n) {
            Ok(n) => {
                return Ok(events[..n]
                    .iter()
                    .map(|e| (e.u64, e.events & libc::EPOLLIN as u32 != 0))
                    .collect());
            }
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
        }
    }
}

/// One notification: the syscall a confined thread is blocked in.
pub(crate) type Notification = libc::seccomp_notif;

/// `SECCOMP_IOCTL_NOTIF_RECV`. `ENOENT` when the task went away between
/// poll and receive.
pub(crate) fn recv_notification(listener: &OwnedFd) -> io::Result<Notification> {
    // SAFETY: the kernel requires the struct zeroed; it is plain data.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `notif` is a writable seccomp_notif for the ioctl.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &raw mut notif,
        )
    };
    cvt(ret.into())?;
    Ok(notif)
}

/// `SECCOMP_IOCTL_NOTIF_SEND`: the blocked syscall returns `val`, or fails
/// with `errno` when it is not zero.
pub(crate) fn answer(listener: &OwnedFd, id: u64, val: i64, errno: i32) -> io::Result<()> {
    send_response(listener, id, val, -errno, 0)
}

/// `SECCOMP_IOCTL_NOTIF_SEND` with `SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the
/// kernel performs the blocked call itself, reading its arguments again.
/// Only for a call whose outcome nothing here decides or records from what
/// was read (`bind`: see `connect::serve`).
pub(crate) fn answer_continue(listener: &OwnedFd, id: u64) -> io::Result<()> {
    send_response(
        listener,
        id,
        0,
        0,
        libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    )
}

fn send_response(listener: &OwnedFd, id: u64, val: i64, error: i32, flags: u32) -> io::Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: `resp` is a valid seccomp_notif_resp the kernel only reads.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &raw const resp,
        )
    };
    cvt(ret.into()).map(drop)
}

/// `SECCOMP_IOCTL_NOTIF_ID_VALID`: whether the thread is still blocked in
/// notification `id`, so that what was read from it (memory, descriptors,
/// its pid) was read from that thread.
pub(crate) fn still_waiting(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: the kernel reads one u64.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &raw const id,
        )
    };
    ret == 0
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): the kernel wakes the
/// supervisor and the waiting thread as a pair, on one CPU, which halves a
/// notification's round trip. Older kernels refuse it; nothing else changes.
pub(crate) fn prefer_sync_wake_up(listener: &OwnedFd) {
    const SYNC_WAKE_UP: u64 = 1;
    // SAFETY: the kernel reads one u64 flag value (passed by value).
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SYNC_WAKE_UP,
        );
    }
}

/// `pidfd_open(pid, 0)`.
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: integers only.
    let fd = cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether `pidfd_open` and `pidfd_getfd` may be called here: each asked
/// with an argument it refuses (pid -1, descriptor -1), so that the kernel
/// answers `EINVAL` and `EBADF` when the call runs, and a seccomp profile
/// that refuses the call answers with its own errno (Docker's default:
/// `EPERM` for `pidfd_getfd` without `CAP_SYS_PTRACE`). Makes no pidfd: a
/// process's first one cost `run -- true` about 30 µs (an A/B of 600 rounds).
pub(crate) fn pidfd_calls_allowed() -> Result<(), (&'static str, io::Error)> {
    let answered = |call: &'static str, ret: libc::c_long, expected: i32| {
        let errno = io::Error::last_os_error();
        match (ret, errno.raw_os_error()) {
            (-1, Some(e)) if e == expected => Ok(()),
            (-1, _) => Err((call, errno)),
            // An answer these arguments cannot get: not the call it names.
            _ => Err((call, io::Error::from_raw_os_error(libc::ENOSYS))),
        }
    };
    // SAFETY: integers only; pid -1 names no process.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, -1, 0) };
    answered("pidfd_open", ret, libc::EINVAL)?;
    // SAFETY: integers only; descriptor -1 is no pidfd.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_getfd, -1, 0, 0) };
    answered("pidfd_getfd", ret, libc::EBADF)
}

/// `pidfd_getfd(pidfd, fd, 0)`: a duplicate of another process's
/// descriptor, sharing its open file description (and so its flags).
pub(crate) fn pidfd_getfd(pidfd: &OwnedFd, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: integers only.
    let new = cvt(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) })?;
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new as RawFd) })
}

/// Reads `buf.len()` bytes at `addr` in thread `tid`'s memory; returns how
/// many were read.
pub(crate) fn read_memory(tid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    copy_memory(tid, addr, Local::Into(buf))
}

/// Our side of a copy to or from another process's memory.
enum Local<'a> {
    /// The buffer read into.
    Into(&'a mut [u8]),
    /// The bytes written.
    From(&'a [u8]),
}

/// `process_vm_readv` or `process_vm_writev` of one buffer, at `addr` in
/// thread `tid`'s memory; returns how many bytes were copied.
fn copy_memory(tid: i32, addr: u64, local: Local<'_>) -> io::Result<usize> {
    let len = match &local {
        Local::Into(buf) => buf.len(),
        Local::From(buf) => buf.len(),
    };
    if len == 0 {
        return Ok(0);
    }
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len,
    };
    let n = match local {
        Local::Into(buf) => {
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: len,
            };
            // SAFETY: `local` is our writable buffer; `remote` is only read
            // by the kernel, in the other process, with its permission checks.
            unsafe { libc::process_vm_readv(tid, &raw const local, 1, &raw const remote, 1, 0) }
        }
        Local::From(buf) => {
            let local = libc::iovec {
                iov_base: buf.as_ptr().cast_mut().cast(),
                iov_len: len,
            };
            // SAFETY: `local` is only read by the kernel; `remote` is written
            // in the other process, with its permission checks.
            unsafe { libc::process_vm_writev(tid, &raw const local, 1, &raw const remote, 1, 0) }
        }
    };
    cvt_len(n)
}

/// A socket address as bytes, handed to the kernel unchanged.
fn with_addr<T>(addr: &[u8], f: impl FnOnce(*const libc::sockaddr, libc::socklen_t) -> T) -> T {
    // Copied into storage so the kernel sees an aligned sockaddr.
    // SAFETY: sockaddr_storage is plain data, valid when zeroed.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = addr.len().min(size_of::<libc::sockaddr_storage>());
    // SAFETY: `len` bytes fit in both.
    unsafe {
        std::ptr::copy_nonoverlapping(addr.as_ptr(), (&raw mut storage).cast::<u8>(), len);
    }
    f((&raw const storage).cast(), len as libc::socklen_t)
}

/// `connect(fd, addr)`.
pub(crate) fn connect(fd: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // SAFETY: a valid address of the given length.
    let ret = with_addr(addr, |a, len| unsafe {
        libc::connect(fd.as_raw_fd(), a, len)
    });
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `bind(fd, addr)`.
pub(crate) fn bind(fd: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // SAFETY: a valid address of the given length.
    let ret = with_addr(addr, |a, len| unsafe { libc::bind(fd.as_raw_fd(), a, len) });
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `sendto(fd, data, flags, addr)`; returns the bytes sent.
pub(crate) fn sendto(
    fd: BorrowedFd<'_>,
    data: &[u8],
    flags: i32,
    addr: &[u8],
) -> io::Result<usize> {
    let ret = with_addr(addr, |a, len| {
        // SAFETY: `data` is readable for its length; a valid address.
        unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                flags,
                a,
                len,
            )
        }
    });
    cvt_len(ret)
}

/// `SO_TYPE` of a socket: `SOCK_STREAM`, `SOCK_DGRAM`, `SOCK_SEQPACKET`.
pub(crate) fn socket_type(fd: BorrowedFd<'_>) -> io::Result<i32> {
    int_option(fd, libc::SO_TYPE)
}

/// `SO_PROTOCOL` of a socket: `IPPROTO_TCP`, `IPPROTO_UDP`, …; ports are
/// counted apart per protocol.
pub(crate) fn socket_protocol(fd: BorrowedFd<'_>) -> io::Result<i32> {
    int_option(fd, libc::SO_PROTOCOL)
}

/// A `SOL_SOCKET` option of a socket, read over `value`: an integer or a
/// C struct of integers (any bytes the kernel writes make a valid one).
fn option<T: Copy>(fd: BorrowedFd<'_>, name: libc::c_int, mut value: T) -> io::Result<T> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` has room for `len` bytes, which the kernel writes at
    // most of, and updates `len`; every bit pattern is a valid `T`.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    cvt(ret.into()).map(|_| value)
}

/// An integer `SOL_SOCKET` option of a socket.
pub(crate) fn int_option(fd: BorrowedFd<'_>, name: libc::c_int) -> io::Result<i32> {
    option(fd, name, 0 as libc::c_int)
}

/// The send timeout of `fd` (`SO_SNDTIMEO`), `None` when it has none: a
/// blocking send then waits as long as it takes.
pub(crate) fn send_timeout(fd: BorrowedFd<'_>) -> io::Result<Option<std::time::Duration>> {
    let zero = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    let value = option(fd, libc::SO_SNDTIMEO, zero)?;
    let (secs, micros) = (
        u64::try_from(value.tv_sec).unwrap_or(0),
        u32::try_from(value.tv_usec).unwrap_or(0),
    );
    let timeout = std::time::Duration::new(secs, micros.saturating_mul(1000));
    Ok((!timeout.is_zero()).then_some(timeout))
}

/// Whether any socket of `kind` is bound to the unix address `addr` now:
/// a fresh socket is bound to it and closed at once (`EADDRINUSE` says
/// someone has it). Binding has no effect on whoever owns the name.
pub(crate) fn unix_address_taken(kind: i32, addr: &[u8]) -> bool {
    // SAFETY: integers only.
    let fd = unsafe { libc::socket(libc::AF_UNIX, kind | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return true;
    }
    // SAFETY: a new descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    matches!(bind(fd.as_fd(), addr), Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE))
}

/// Whether the open file description of `fd` is non-blocking.
pub(crate) fn is_nonblocking(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: F_GETFL takes no pointer.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(flags & libc::O_NONBLOCK != 0)
    }
}

/// `prctl(PR_SET_PTRACER, pid)`: under Yama's `ptrace_scope` 1 a process
/// may read another's memory and descriptors only if it is an ancestor,
/// or was named this way. `EINVAL` without Yama, which needs nothing.
pub(crate) fn allow_ptracer(pid: i32) -> io::Result<()> {
    // SAFETY: integers only.
    let ret = unsafe { libc::prctl(libc::PR_SET_PTRACER, pid as libc::c_ulong, 0, 0, 0) };
    if ret == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What the kernel says of one unix socket (`NETLINK_SOCK_DIAG`): asked
/// of the socket itself, so no rename or second thread changes the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnixSocket {
    /// Its inode on sockfs and its cookie: together they name this socket
    /// and no later one, with no descriptor held.
    pub(crate) ino: u32,
    pub(crate) cookie: [u32; 2],
    /// The name it is bound to (`UNIX_DIAG_NAME`, as `getsockname` gives
    /// `sun_path`: an abstract name starts with a NUL); `None` unbound.
    pub(crate) name: Option<Vec<u8>>,
    /// The socket file (device, inode) of a pathname socket (`UNIX_DIAG_VFS`).
    pub(crate) file: Option<(u64, u64)>,
}

/// The sockfs inode of a socket descriptor.
pub(crate) fn socket_inode(socket: BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: fstat writes a stat struct, plain data valid when zeroed.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is writable for the call.
    if unsafe { libc::fstat(socket.as_raw_fd(), &raw mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(st.st_ino).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))
}

/// Asks the kernel about the unix socket with sockfs inode `ino` (and,
/// when given, `cookie`: then a later socket with the same inode number
/// fails with `ESTALE`). `ENOENT` once the socket is closed; another error
/// when the kernel has no `CONFIG_UNIX_DIAG`.
pub(crate) fn unix_socket(ino: u32, cookie: Option<[u32; 2]>) -> io::Result<UnixSocket> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const UDIAG_SHOW_NAME: u32 = 0x1;
    const UDIAG_SHOW_VFS: u32 = 0x2;
    const UNIX_DIAG_NAME: u16 = 0;
    const UNIX_DIAG_VFS: u16 = 1;
    let cookie_in = cookie.unwrap_or([u32::MAX, u32::MAX]);
    // struct nlmsghdr, then struct unix_diag_req.
    let mut req = Vec::with_capacity(40);
    req.extend_from_slice(&40u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(&[libc::AF_UNIX as u8, 0, 0, 0]);
    req.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    req.extend_from_slice(&ino.to_ne_bytes());
    req.extend_from_slice(&(UDIAG_SHOW_NAME | UDIAG_SHOW_VFS).to_ne_bytes());
    req.extend_from_slice(&cookie_in[0].to_ne_bytes());
    req.extend_from_slice(&cookie_in[1].to_ne_bytes());
    let diag = super::diag_socket()?;
    let mut buf = [0u8; 512];
    let msg = super::diag_exchange(&diag, &req, &mut buf)?;
    let u16_at = |at: usize| {
        msg.get(at..at + 2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        msg.get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let bad = || io::Error::from_raw_os_error(libc::EBADMSG);
    let len = u32_at(0).ok_or_else(bad)? as usize;
    match u16_at(4) {
        Some(SOCK_DIAG_BY_FAMILY) => {}
        Some(2) => {
            // NLMSG_ERROR: a negative errno follows the header.
            let errno = u32_at(16).map_or(libc::EIO, |e| -(e as i32));
            return Err(io::Error::from_raw_os_error(errno));
        }
        _ => return Err(bad()),
    }
    // struct unix_diag_msg: family, type, state, pad, ino, cookie[2].
    let mut socket = UnixSocket {
        ino: u32_at(16 + 4).ok_or_else(bad)?,
        cookie: [
            u32_at(16 + 8).ok_or_else(bad)?,
            u32_at(16 + 12).ok_or_else(bad)?,
        ],
        name: None,
        file: None,
    };
    // The attributes follow the 16 bytes of unix_diag_msg.
    let end = len.min(msg.len());
    let mut at = 16 + 16;
    while at + 4 <= end {
        let attr_len = usize::from(u16_at(at).ok_or_else(bad)?);
        if attr_len < 4 || at + attr_len > end {
            return Err(bad());
        }
        match u16_at(at + 2) {
            Some(UNIX_DIAG_NAME) => socket.name = Some(msg[at + 4..at + attr_len].to_vec()),
            Some(UNIX_DIAG_VFS) => {
                let ino = u32_at(at + 4).ok_or_else(bad)?;
                let dev = u32_at(at + 8).ok_or_else(bad)?;
                // The kernel's own dev_t: 12 bits of major, 20 of minor.
                let dev = libc::makedev(dev >> 20, dev & 0xf_ffff);
                socket.file = Some((dev, u64::from(ino)));
            }
            _ => {}
        }
        at += (attr_len + 3) & !3;
    }
    Ok(socket)
}

/// `getsockname(fd)`, as bytes.
pub(crate) fn local_address(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    address_by(fd, libc::getsockname)
}

/// The peer's address of a connected socket, as `getpeername` gives it.
pub(crate) fn peer_address(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    address_by(fd, libc::getpeername)
}

/// `getsockname` or `getpeername` of `fd`, as bytes.
fn address_by(
    fd: BorrowedFd<'_>,
    call: unsafe extern "C" fn(
        libc::c_int,
        *mut libc::sockaddr,
        *mut libc::socklen_t,
    ) -> libc::c_int,
) -> io::Result<Vec<u8>> {
    // SAFETY: plain data, valid when zeroed.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` has room for `len` bytes; the kernel updates `len`.
    let ret = unsafe { call(fd.as_raw_fd(), (&raw mut storage).cast(), &raw mut len) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = (len as usize).min(size_of::<libc::sockaddr_storage>());
    // SAFETY: the kernel wrote `len` bytes of `storage`.
    let bytes = unsafe { std::slice::from_raw_parts((&raw const storage).cast::<u8>(), len) };
    Ok(bytes.to_vec())
}

/// Writes `buf` at `addr` in thread `tid`'s memory; returns how many bytes
/// were written.
pub(crate) fn write_memory(tid: i32, addr: u64, buf: &[u8]) -> io::Result<usize> {
    copy_memory(tid, addr, Local::From(buf))
}

/// `sendmsg(fd)` of one buffer, an optional address and control messages
/// laid out natively (`cmsghdr`s as bytes); returns the bytes sent.
pub(crate) fn sendmsg(
    fd: BorrowedFd<'_>,
    addr: Option<&[u8]>,
    data: &[u8],
    control: &[u8],
    flags: i32,
) -> io::Result<usize> {
    let send = |name: *const libc::sockaddr, namelen: libc::socklen_t| {
        let mut iov = libc::iovec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        // SAFETY: msghdr is plain data, valid when zeroed.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = name.cast_mut().cast();
        msg.msg_namelen = namelen;
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        if !control.is_empty() {
            msg.msg_control = control.as_ptr().cast_mut().cast();
            msg.msg_controllen = control.len() as _;
        }
        // SAFETY: the message, its one buffer, its address and control
        // bytes are live and only read by the kernel during the call; the
        // kernel copies the control bytes before parsing them, so their
        // alignment does not matter.
        unsafe { libc::sendmsg(fd.as_raw_fd(), &raw const msg, flags) }
    };
    let ret = match addr {
        Some(addr) => with_addr(addr, send),
        None => send(std::ptr::null(), 0),
    };
    cvt_len(ret)
}

/// `SO_DOMAIN` of a socket: `AF_UNIX`, `AF_INET`, `AF_INET6`, …
pub(crate) fn socket_domain(fd: BorrowedFd<'_>) -> io::Result<i32> {
    int_option(fd, libc::SO_DOMAIN)
}

/// `tgkill(tgid, tid, signal)`: a signal to one thread, as the kernel
/// sends `SIGPIPE` to the thread whose send found the other end closed.
pub(crate) fn tgkill(tgid: i32, tid: i32, signal: i32) -> io::Result<()> {
    // SAFETY: integers only.
    cvt(unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, signal) }).map(drop)
}

/// `accept4(fd, NULL, NULL, flags)`: a connection waiting on a listening
/// socket fetched from a confined thread, taken here.
pub(crate) fn accept4(fd: BorrowedFd<'_>, flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: NULL address and length: the kernel writes no peer address.
    let ret = unsafe {
        libc::accept4(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            flags,
        )
    };
    // SAFETY: on success a new descriptor owned by nobody else.
    cvt(ret.into()).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The process `SO_PEERCRED` names: whoever called `connect` on the other
/// end of a unix stream connection, as the kernel noted it then.
pub(crate) fn peer_pid(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let none = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    option(fd, libc::SO_PEERCRED, none).map(|cred| cred.pid)
}

/// `struct seccomp_notif_addfd` of `<linux/seccomp.h>` (Linux 5.9).
#[repr(C)]
struct AddFd {
    id: u64,
    flags: u32,
    srcfd: u32,
    newfd: u32,
    newfd_flags: u32,
}

/// `SECCOMP_IOCTL_NOTIF_ADDFD`: `_IOW('!', 3, struct seccomp_notif_addfd)`.
const IOCTL_NOTIF_ADDFD: libc::c_ulong = 0x4018_2103;
/// `SECCOMP_ADDFD_FLAG_SEND` (Linux 5.14): the descriptor is installed and
/// the call answered with its number, in one step.
const ADDFD_FLAG_SEND: u32 = 2;

/// Set (by test builds only, see `connect::filter`): descriptors are
/// handed over as before 5.14, installed and then answered.
static WITHOUT_ADDFD_SEND: AtomicBool = AtomicBool::new(false);

/// Hands later descriptors over without `SECCOMP_ADDFD_FLAG_SEND`.
pub(crate) fn add_fds_without_send() {
    WITHOUT_ADDFD_SEND.store(true, Ordering::Relaxed);
}

/// Installs `fd` in the table of the thread waiting in notification `id`
/// and answers the call with its number there (`SECCOMP_ADDFD_FLAG_SEND`;
/// on a kernel before 5.14, installed, then answered). `ENOENT`: the thread
/// no longer waits in that call, and nothing was installed.
pub(crate) fn add_fd_and_answer(
    listener: &OwnedFd,
    id: u64,
    fd: BorrowedFd<'_>,
    cloexec: bool,
) -> io::Result<i32> {
    let add = |flags: u32| {
        let request = AddFd {
            id,
            flags,
            srcfd: fd.as_raw_fd() as u32,
            newfd: 0,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: `request` is a valid seccomp_notif_addfd the kernel only reads.
        let ret = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                IOCTL_NOTIF_ADDFD as _,
                &raw const request,
            )
        };
        cvt(ret.into()).map(|n| n as i32)
    };
    let sent = if WITHOUT_ADDFD_SEND.load(Ordering::Relaxed) {
        Err(io::Error::from_raw_os_error(libc::EINVAL))
    } else {
        add(ADDFD_FLAG_SEND)
    };
    match sent {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let installed = add(0)?;
            answer(listener, id, i64::from(installed), 0)?;
            Ok(installed)
        }
        other => other,
    }
}

/// Removes `fd` from `epoll`.
pub(crate) fn epoll_del(epoll: &OwnedFd, fd: RawFd) -> io::Result<()> {
    // SAFETY: EPOLL_CTL_DEL reads no event.
    let ret = unsafe {
        libc::epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            fd,
            std::ptr::null_mut(),
        )
    };
    cvt(ret.into()).map(drop)
}

/// Whether `fd` becomes writable within `timeout_ms` (`poll`, retried on
/// `EINTR`); `POLLERR` and `POLLHUP` count: a connect that failed is done.
pub(crate) fn writable_within(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd, writable, for the length given.
        let ret = unsafe { libc::poll(&raw mut pfd, 1, timeout_ms) };
        if ret >= 0 {
            return Ok(ret > 0);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// The status flags (`F_GETFL`) of the open file description of `fd`.
pub(crate) fn status_flags(fd: BorrowedFd<'_>) -> io::Result<i32> {
    // SAFETY: F_GETFL takes no pointer.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(flags)
    }
}

/// Sets the status flags (`F_SETFL`) of the open file description of `fd`.
pub(crate) fn set_status_flags(fd: BorrowedFd<'_>, flags: i32) -> io::Result<()> {
    // SAFETY: F_SETFL takes an integer.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) }.into()).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::NotifyFilter;

    /// What a forked child saw of the keyed program it installed: the key
    /// `install_listener` returned, and the errno (0: sent) of a `sendmsg`
    /// carrying that key, the words the program was built with, and the
    /// key with one word changed.
    fn installed_in_a_child(filter: &NotifyFilter, built: Key) -> (Key, [i32; 3]) {
        let (mut fds, mut pipe) = ([0; 2], [0; 2]);
        // SAFETY: each call writes two descriptors into its array.
        unsafe {
            assert_eq!(
                libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()),
                0
            );
            assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        }
        // SAFETY: the child makes raw system calls on memory built before
        // the fork and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let mut report = [0u8; 4 * KEY_WORDS + 12];
            // SAFETY: integer arguments.
            unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
            let Ok((listener, key)) = install_listener(filter.program(), false) else {
                // SAFETY: leaves the child.
                unsafe { libc::_exit(2) };
            };
            // Without its listener, a notified call fails with ENOSYS at once.
            // SAFETY: the child's own descriptor.
            unsafe { libc::close(listener) };
            let mut other = key;
            other[0] ^= 1;
            for (i, k) in [key, built, other].iter().enumerate() {
                let mut byte = [0u8; 1];
                let mut iov = iovec(&mut byte);
                let mut control = Control([0; CONTROL_LEN]);
                let mut msg = message(&mut iov, &mut control);
                msg.msg_controllen = 0;
                let [fifth, sixth] = key_arguments(k);
                // SAFETY: `msg` outlives the call; the last two are integers.
                let ret = unsafe {
                    libc::syscall(
                        libc::SYS_sendmsg,
                        fds[0],
                        &raw const msg,
                        0,
                        0,
                        fifth,
                        sixth,
                    )
                };
                let errno = if ret < 0 { errno() } else { 0 };
                report[4 * KEY_WORDS + 4 * i..][..4].copy_from_slice(&errno.to_ne_bytes());
            }
            for (i, word) in key.iter().enumerate() {
                report[4 * i..][..4].copy_from_slice(&word.to_ne_bytes());
            }
            // SAFETY: writes the report and leaves the child.
            unsafe {
                libc::write(pipe[1], report.as_ptr().cast(), report.len());
                libc::_exit(0);
            }
        }
        let mut report = [0u8; 4 * KEY_WORDS + 12];
        // SAFETY: reads into the report; closes this test's descriptors.
        let n = unsafe {
            libc::close(pipe[1]);
            let n = libc::read(pipe[0], report.as_mut_ptr().cast(), report.len());
            let mut status = 0;
            libc::waitpid(pid, &raw mut status, 0);
            for fd in [pipe[0], fds[0], fds[1]] {
                libc::close(fd);
            }
            n
        };
        assert_eq!(n, report.len() as isize, "the child reported nothing");
        let word = |i: usize| u32::from_ne_bytes(report[4 * i..][..4].try_into().expect("4 bytes"));
        let key = std::array::from_fn(word);
        let errnos = std::array::from_fn(|i| word(KEY_WORDS + i) as i32);
        (key, errnos)
    }

    #[test]
    fn each_install_of_a_keyed_program_passes_the_sendmsg_of_its_own_key_alone() {
        let filter = NotifyFilter::new().expect("a supported architecture");
        let built = filter.built_key().expect("keyed");
        let (first, errnos) = installed_in_a_child(&filter, built);
        // Granted: the key it was installed with. Notified (and, with no
        // listener, ENOSYS): the words it was built with, a word changed.
        assert_eq!(errnos, [0, libc::ENOSYS, libc::ENOSYS]);
        let (second, errnos) = installed_in_a_child(&filter, built);
        assert_eq!(errnos, [0, libc::ENOSYS, libc::ENOSYS]);
        assert_ne!(first, second, "two installs drew the same key");
        assert_ne!(first, built);
        // The program without a key notifies its own install's sendmsg too.
        let keyless = NotifyFilter::without_key().expect("a supported architecture");
        let (zero, errnos) = installed_in_a_child(&keyless, built);
        assert_eq!(zero, [0; KEY_WORDS]);
        assert_eq!(errnos, [libc::ENOSYS; 3]);
    }

    /// The three ways a listener can go: the waking socket, the mailbox and
    /// the watch, each socket as (sending end, receiving end).
    struct Ways {
        socket: (OwnedFd, OwnedFd),
        mailbox: (OwnedFd, OwnedFd),
        watch: OwnedFd,
    }

    impl Ways {
        fn new() -> Ways {
            Ways {
                socket: seqpacket_pair().expect("socketpair"),
                mailbox: seqpacket_pair().expect("socketpair"),
                watch: epoll_new().expect("epoll"),
            }
        }

        fn destination(&self, quiet: bool) -> Destination {
            Destination {
                socket: self.socket.0.as_raw_fd(),
                quiet: quiet.then(|| Quiet {
                    mailbox: self.mailbox.0.as_raw_fd(),
                    watch: self.watch.as_raw_fd(),
                }),
            }
        }
    }

    /// An eventfd standing for a listener: pollable, readable once written.
    fn stand_in() -> RawFd {
        // SAFETY: flags only.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(fd >= 0, "eventfd: {}", io::Error::last_os_error());
        fd
    }

    /// Makes `fd` readable, as a notification makes a listener.
    fn notify(fd: &OwnedFd) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: `one` is readable for its 8 bytes.
        let n = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        assert_eq!(n, 8, "write: {}", io::Error::last_os_error());
    }

    fn nothing_on(socket: &OwnedFd) -> bool {
        matches!(recv_handed(socket, false), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// The listener and what came with it, from the next message on `socket`.
    fn handed_on(socket: &OwnedFd) -> (OwnedFd, i32, u64) {
        match recv_handed(socket, false) {
            Ok(Handed::Listener {
                listener,
                pid,
                token,
            }) => (listener, pid, token),
            Ok(_) => panic!("a message without a listener"),
            Err(e) => panic!("no message: {e}"),
        }
    }

    #[test]
    fn a_listener_handed_over_quietly_waits_in_the_mailbox_watched_once_under_a_drawn_token() {
        let ways = Ways::new();
        let key = [7; KEY_WORDS];
        hand_over_listener(ways.destination(true), stand_in(), &key, false).expect("handed over");
        hand_over_listener(ways.destination(true), stand_in(), &key, false).expect("handed over");
        // Nothing woke the supervisor's thread: its socket is empty.
        assert!(nothing_on(&ways.socket.1));
        let (first, pid, token) = handed_on(&ways.mailbox.1);
        let (second, _, other) = handed_on(&ways.mailbox.1);
        assert!(nothing_on(&ways.mailbox.1));
        // SAFETY: getpid takes no arguments.
        assert_eq!(pid, unsafe { libc::getpid() });
        assert_ne!(token & CHILD_TOKEN, 0);
        assert_ne!(other & CHILD_TOKEN, 0);
        assert_ne!(token, other, "two hand-overs drew the same token");
        // Watched under its token, for one event: a notification fires it,
        // a second finds it disarmed.
        assert_eq!(epoll_wait_for(&ways.watch, Some(0)).expect("epoll"), []);
        notify(&first);
        assert_eq!(
            epoll_wait_for(&ways.watch, Some(0)).expect("epoll"),
            [(token, true)]
        );
        notify(&first);
        assert_eq!(epoll_wait_for(&ways.watch, Some(0)).expect("epoll"), []);
        notify(&second);
        assert_eq!(
            epoll_wait_for(&ways.watch, Some(0)).expect("epoll"),
            [(other, true)]
        );
    }

    #[test]
    fn a_listener_goes_over_the_waking_socket_when_the_mailbox_is_full_or_not_given() {
        let ways = Ways::new();
        let key = [7; KEY_WORDS];
        // Fill the mailbox (the smallest send buffer the kernel allows).
        let small: libc::c_int = 1;
        // SAFETY: `small` is a readable c_int.
        unsafe {
            libc::setsockopt(
                ways.mailbox.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&raw const small).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let mut queued = 0;
        loop {
            let fd = stand_in();
            let sent = send_handed(
                ways.mailbox.0.as_raw_fd(),
                fd,
                0,
                CHILD_TOKEN,
                &key,
                libc::MSG_DONTWAIT,
            );
            // SAFETY: our own descriptor; the message holds its own reference.
            unsafe { libc::close(fd) };
            match sent {
                Ok(()) => queued += 1,
                Err(e) => {
                    assert_eq!(e, libc::EAGAIN, "filling the mailbox");
                    break;
                }
            }
            assert!(queued < 100_000, "the mailbox never filled");
        }
        assert!(queued > 0);
        hand_over_listener(ways.destination(true), stand_in(), &key, false).expect("handed over");
        let (_, _, token) = handed_on(&ways.socket.1);
        assert_eq!(token, 0, "the supervisor's thread watches it itself");
        // Without the quiet way: the waking socket, and no watch.
        let none = Ways::new();
        hand_over_listener(none.destination(false), stand_in(), &key, false).expect("handed over");
        let (listener, _, token) = handed_on(&none.socket.1);
        assert_eq!(token, 0);
        assert!(nothing_on(&none.mailbox.1));
        notify(&listener);
        assert_eq!(epoll_wait_for(&none.watch, Some(0)).expect("epoll"), []);
    }
}
