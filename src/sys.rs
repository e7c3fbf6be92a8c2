//! Raw Landlock, seccomp, prctl and audit-netlink system calls: the crate's
//! only `unsafe` code.
//!
//! Everything here is a thin wrapper over one syscall. The functions used
//! between `fork` and `exec` ([`confine_before_exec`]) call nothing but
//! `prctl`, `seccomp` and `landlock_restrict_self`, all async-signal-safe,
//! and build their error from the raw errno without allocating.

pub(crate) mod beneath;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;

use crate::terminal::{SockFilter, TerminalFilter};

/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;

/// `LANDLOCK_RESTRICT_SELF_TSYNC` (ABI 8): restrict every thread of the process.
pub(crate) const RESTRICT_SELF_TSYNC: u32 = 1 << 3;

/// Asks the kernel for its Landlock ABI version.
///
/// Returns the version, or the errno the kernel (or a seccomp filter in
/// front of it) answered with.
pub(crate) fn landlock_abi_version() -> Result<i64, i32> {
    // SAFETY: with a NULL attribute pointer and size 0 the kernel reads no
    // memory; the VERSION flag only makes it return a number.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(ret)
    }
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_path_beneath_attr`, packed as in `<linux/landlock.h>`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Adds a rule to `ruleset`: `access` beneath the inode `parent` is open on.
pub(crate) fn add_path_beneath_rule(
    ruleset: &OwnedFd,
    parent: &OwnedFd,
    access: u64,
) -> io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `attr` is a valid landlock_path_beneath_attr that outlives the
    // call (the kernel copies it); both descriptors are live and borrowed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &raw const attr,
            0u32,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `struct open_how` from `<linux/openat2.h>`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `RESOLVE_NO_SYMLINKS` from `<linux/openat2.h>`.
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// Opens `path` with `O_PATH`, refusing every symlink on the way
/// (`openat2` with `RESOLVE_NO_SYMLINKS`, Linux 5.6): success means the
/// kernel resolved the path through no symlink at all. `ELOOP` says one
/// was met; `ENOSYS` or a seccomp filter's errno says the call is missing.
pub(crate) fn open_path_without_symlinks(path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: `path` is a NUL-terminated string and `how` a valid open_how
    // of the size passed; both outlive the call, which copies them.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &raw const how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(ret).map_err(io::Error::other)?;
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// Sets `no_new_privs`, which `landlock_restrict_self` requires of an
/// unprivileged caller and which stops a setuid binary from escaping.
fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    let ret = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `SECCOMP_SET_MODE_FILTER` of `<linux/seccomp.h>`.
const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;

/// `SECCOMP_FILTER_FLAG_TSYNC`: install the filter on every thread.
const SECCOMP_FILTER_FLAG_TSYNC: libc::c_uint = 1 << 0;

/// `struct sock_fprog` of `<linux/filter.h>`.
#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const SockFilter,
}

/// Installs `program` as a seccomp filter on the calling thread, or on
/// every thread with `all_threads`. Needs `no_new_privs` (or
/// `CAP_SYS_ADMIN`); a filter, once installed, stays for good.
fn install_seccomp_filter(program: &[SockFilter], all_threads: bool) -> io::Result<()> {
    let Ok(len) = libc::c_ushort::try_from(program.len()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let prog = SockFprog {
        len,
        filter: program.as_ptr(),
    };
    let flags = if all_threads {
        SECCOMP_FILTER_FLAG_TSYNC
    } else {
        0
    };
    // SAFETY: `prog` points at `len` initialised instructions that outlive
    // the call; the kernel copies the program and keeps no pointer to it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            flags,
            &raw const prog,
        )
    };
    match ret {
        0 => Ok(()),
        // With TSYNC, a positive answer is the id of a thread that could
        // not take the filter (it has a diverging one of its own).
        n if n > 0 => Err(io::Error::from_raw_os_error(libc::ESRCH)),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Why [`restrict_self`] failed: which of its steps.
#[derive(Debug)]
pub(crate) enum RestrictError {
    /// `prctl(PR_SET_NO_NEW_PRIVS)` or `landlock_restrict_self`.
    Landlock(io::Error),
    /// The terminal filter's `seccomp(SECCOMP_SET_MODE_FILTER)`.
    Seccomp(io::Error),
}

impl From<RestrictError> for io::Error {
    fn from(e: RestrictError) -> io::Error {
        match e {
            RestrictError::Landlock(e) | RestrictError::Seccomp(e) => e,
        }
    }
}

/// Enforces the ruleset `fd` and the terminal filter on the calling thread
/// (every thread with [`RESTRICT_SELF_TSYNC`]), after setting
/// `no_new_privs`. The filter goes first: if it cannot be installed,
/// Landlock is not enforced either, and the caller refuses; if Landlock
/// then fails, the process is left with a filter that only refuses two
/// ioctls, and the caller still refuses.
pub(crate) fn restrict_self(
    fd: &OwnedFd,
    flags: u32,
    filter: &TerminalFilter,
) -> Result<(), RestrictError> {
    set_no_new_privs().map_err(RestrictError::Landlock)?;
    install_seccomp_filter(filter.instructions(), flags & RESTRICT_SELF_TSYNC != 0)
        .map_err(RestrictError::Seccomp)?;
    // SAFETY: the fd is a live ruleset descriptor borrowed for the call; the
    // kernel takes a reference of its own and reads no user memory.
    let ret = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), flags) };
    if ret == 0 {
        Ok(())
    } else {
        Err(RestrictError::Landlock(io::Error::last_os_error()))
    }
}

/// Arranges for `cmd`'s child to enforce the ruleset `fd` and the terminal
/// filter on itself between `fork` and `exec`. The parent stays unconfined.
pub(crate) fn confine_before_exec(cmd: &mut Command, fd: Arc<OwnedFd>, filter: TerminalFilter) {
    confine_before_exec_with(cmd, fd, filter, 0);
}

/// `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (ABI 7): keep logging refused
/// accesses to the audit log after `execve`, where the kernel stops by default.
pub(crate) const RESTRICT_SELF_LOG_NEW_EXEC_ON: u32 = 1 << 1;

/// As [`confine_before_exec`], with `landlock_restrict_self` flags.
pub(crate) fn confine_before_exec_with(
    cmd: &mut Command,
    fd: Arc<OwnedFd>,
    filter: TerminalFilter,
    flags: u32,
) {
    let hook = move || restrict_self(&fd, flags, &filter).map_err(io::Error::from);
    // SAFETY: the hook runs in the forked child and only performs three
    // async-signal-safe syscalls (prctl, seccomp, landlock_restrict_self)
    // on a descriptor and a program built by the parent; building an
    // io::Error from a raw errno does not allocate. Nothing else from the
    // parent's state is touched.
    unsafe {
        cmd.pre_exec(hook);
    }
}

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

/// A signal's disposition, as `sigaction` reports it.
#[derive(Clone, Copy)]
pub(crate) struct SignalAction(libc::sigaction);

impl std::fmt::Debug for SignalAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignalAction")
    }
}

/// Gives `signal` its default disposition and returns the one it had.
pub(crate) fn default_disposition(signal: libc::c_int) -> io::Result<SignalAction> {
    // SAFETY: sigaction is plain data; all-zero is SIG_DFL with no flags
    // and an empty mask.
    let default: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above, written by the kernel.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid sigaction structs for the call.
    let ret = unsafe { libc::sigaction(signal, &raw const default, &raw mut old) };
    if ret == 0 {
        Ok(SignalAction(old))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Gives `signal` back the disposition `action` (from
/// [`default_disposition`]).
pub(crate) fn restore_disposition(signal: libc::c_int, action: &SignalAction) {
    // SAFETY: a valid sigaction struct; the old one is not asked for.
    unsafe {
        libc::sigaction(signal, &raw const action.0, std::ptr::null_mut());
    }
}

/// Whether this process is the foreground job of the terminal on one of
/// its standard descriptors: only then does stopping it mean anything to
/// a shell (off a terminal, nothing would ever resume it).
pub(crate) fn foreground_of_a_terminal() -> bool {
    // SAFETY: getpgrp takes nothing and cannot fail.
    let own = unsafe { libc::getpgrp() };
    (0..3).any(|fd| {
        // SAFETY: tcgetpgrp on a descriptor number only reads; it fails
        // with ENOTTY (or EBADF) when the descriptor is no terminal.
        let foreground = unsafe { libc::tcgetpgrp(fd) };
        foreground > 0 && foreground == own
    })
}

/// A set of signals (`sigset_t`).
#[derive(Clone, Copy)]
pub(crate) struct SignalSet(libc::sigset_t);

impl SignalSet {
    /// The set holding exactly `signals`.
    pub(crate) fn of(signals: &[libc::c_int]) -> SignalSet {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it, and
        // sigaddset only fails (EINVAL) for a number that is no signal,
        // which leaves the set as it was.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            for &signal in signals {
                libc::sigaddset(&raw mut set, signal);
            }
            SignalSet(set)
        }
    }
}

/// Blocks `set` in the calling thread and returns the mask it had before.
pub(crate) fn block_signals(set: &SignalSet) -> io::Result<SignalSet> {
    // SAFETY: sigset_t is plain data, written by pthread_sigmask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid sigset_t for the call.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set.0, &raw mut old) };
    if ret == 0 {
        Ok(SignalSet(old))
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// Sets the calling thread's signal mask to `mask`.
pub(crate) fn set_signal_mask(mask: &SignalSet) -> io::Result<()> {
    // SAFETY: a valid sigset_t; the old mask is not asked for.
    let ret = unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const mask.0, std::ptr::null_mut())
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// Arranges for `cmd`'s child to set its signal mask to `mask` before
/// `exec`: a mask blocked in the parent would otherwise be inherited.
pub(crate) fn set_signal_mask_before_exec(cmd: &mut Command, mask: SignalSet) {
    let hook = move || set_signal_mask(&mask);
    // SAFETY: the hook runs in the forked child and performs one
    // async-signal-safe call (pthread_sigmask, i.e. rt_sigprocmask) on a
    // copy of the mask; the error is built from the errno without
    // allocating.
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// A signal taken by [`wait_signal`]: its number, `si_code` (who sent it:
/// `SI_USER` for `kill`, `SI_KERNEL` for the terminal, …) and the
/// sender's pid.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SignalInfo {
    pub(crate) signal: libc::c_int,
    pub(crate) code: libc::c_int,
    pub(crate) pid: libc::pid_t,
}

/// Takes one pending signal of `set` (which must be blocked), waiting at
/// most `timeout` (forever with `None`). `None` when the time ran out or a
/// signal outside the set interrupted the wait.
pub(crate) fn wait_signal(
    set: &SignalSet,
    timeout: Option<std::time::Duration>,
) -> io::Result<Option<SignalInfo>> {
    // SAFETY: siginfo_t is plain data, written by the kernel.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let ret = match timeout {
        Some(t) => {
            let ts = libc::timespec {
                tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(t.subsec_nanos().min(999_999_999) as i32),
            };
            // SAFETY: valid set, siginfo and timespec for the call.
            unsafe { libc::sigtimedwait(&raw const set.0, &raw mut info, &raw const ts) }
        }
        // SAFETY: valid set and siginfo for the call.
        None => unsafe { libc::sigwaitinfo(&raw const set.0, &raw mut info) },
    };
    if ret < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EAGAIN | libc::EINTR) => Ok(None),
            _ => Err(err),
        };
    }
    Ok(Some(SignalInfo {
        signal: info.si_signo,
        code: info.si_code,
        // SAFETY: the kernel filled `info` for a signal; si_pid reads the
        // union's kill/child member, which every signal the callers wait
        // for (kill, terminal, SIGCHLD) carries.
        pid: unsafe { info.si_pid() },
    }))
}

/// Sends `signal` to process `pid`.
pub(crate) fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes integers only.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// How a child was found by [`wait_child`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildState {
    /// It ended; the raw `waitpid` status, now reaped.
    Ended(libc::c_int),
    /// It stopped, by this signal.
    Stopped(libc::c_int),
    /// Nothing to report: still running.
    Running,
}

/// `waitpid(pid, WNOHANG | WUNTRACED)`: reaps the child if it ended,
/// reports a stop once, otherwise returns at once.
pub(crate) fn wait_child(pid: libc::pid_t) -> io::Result<ChildState> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a valid int for the kernel to write.
        let ret = unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG | libc::WUNTRACED) };
        if ret == 0 {
            return Ok(ChildState::Running);
        }
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        return Ok(if libc::WIFSTOPPED(status) {
            ChildState::Stopped(libc::WSTOPSIG(status))
        } else {
            ChildState::Ended(status)
        });
    }
}
