//! Enforcing a prepared ruleset and the terminal filter, on the calling
//! thread or on a child between `fork` and `exec`. The functions used
//! there call nothing but `prctl`, `seccomp` and `landlock_restrict_self`,
//! all async-signal-safe, and build their error from the raw errno
//! without allocating.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;

use super::landlock::RESTRICT_SELF_TSYNC;
use super::notify::{install_listener, send_listener};
use super::seccomp::install_seccomp_filter;
use crate::connect::ChildHook;
use crate::terminal::{SockFilter, TerminalFilter};

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

/// Why [`restrict_self`] failed: which of its steps.
#[derive(Debug)]
pub(crate) enum RestrictError {
    /// `prctl(PR_SET_NO_NEW_PRIVS)` or `landlock_restrict_self`.
    Landlock(io::Error),
    /// The terminal filter's `seccomp(SECCOMP_SET_MODE_FILTER)`.
    Seccomp(io::Error),
    /// Installing the connect supervisor's filter or sending its listener.
    Supervisor(io::Error),
}

impl From<RestrictError> for io::Error {
    fn from(e: RestrictError) -> io::Error {
        match e {
            RestrictError::Landlock(e)
            | RestrictError::Seccomp(e)
            | RestrictError::Supervisor(e) => e,
        }
    }
}

/// Enforces the ruleset `fd` and the terminal filter on the calling thread
/// (every thread with [`RESTRICT_SELF_TSYNC`]), after setting
/// `no_new_privs`. The filter goes first: if it cannot be installed,
/// Landlock is not enforced either, and the caller refuses; if Landlock
/// then fails, the process is left with a filter that only refuses two
/// ioctls, and the caller still refuses.
///
/// With `connect`, the connect supervisor's program goes on instead, which
/// makes the terminal filter's checks too (`connect::filter`): one
/// filter, one `seccomp` call; its listener is sent to the supervisor and
/// closed here: from then on every `connect` and `bind` waits for the
/// supervisor's answer.
pub(crate) fn restrict_self(
    fd: &OwnedFd,
    flags: u32,
    filter: &TerminalFilter,
    connect: Option<&ChildHook>,
) -> Result<(), RestrictError> {
    let connect = match connect {
        Some(hook) => Listener::Send(hook.program(), hook.sender(), hook.stops_after_sending()),
        None => Listener::None,
    };
    restrict_self_raw(fd.as_raw_fd(), flags, filter.instructions(), connect).map_err(|e| match e {
        RestrictStep::Landlock(errno) => {
            RestrictError::Landlock(io::Error::from_raw_os_error(errno))
        }
        RestrictStep::Seccomp(errno) => RestrictError::Seccomp(io::Error::from_raw_os_error(errno)),
        RestrictStep::Supervisor(errno) => {
            RestrictError::Supervisor(io::Error::from_raw_os_error(errno))
        }
    })
}

/// Which step of [`restrict_self_raw`] failed, with its errno.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RestrictStep {
    Landlock(i32),
    Seccomp(i32),
    Supervisor(i32),
}

impl RestrictStep {
    pub(crate) fn errno(self) -> i32 {
        match self {
            RestrictStep::Landlock(e) | RestrictStep::Seccomp(e) | RestrictStep::Supervisor(e) => e,
        }
    }
}

/// How the connect supervisor's listener leaves a confined child.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Listener<'a> {
    /// No supervisor: the terminal filter alone.
    None,
    /// The supervisor's program, installed here; its listener is sent over
    /// the socket and closed here, once the supervisor has taken it (a
    /// child with a descriptor table of its own: `fork`, or the calling
    /// process). With `true` (tests only), the child stops itself between
    /// sending the listener and waiting for the supervisor to take it.
    Send(&'a [SockFilter], RawFd, bool),
    /// Installed already, by [`install_shared_listener`], into a table the
    /// supervisor's process shares: nothing to do here.
    Installed,
}

/// Sets `no_new_privs` and installs the supervisor's `program` on the
/// calling thread, returning the listener's number: for a child started
/// with `CLONE_FILES`, whose listener lands in the caller's own table, where
/// the supervisor takes it with no hand-over and no wait. The child must
/// then leave the shared table (`unshare(CLONE_FILES)`) and close its copy
/// before anything else, and finish with [`restrict_self_raw`] and
/// [`Listener::Installed`]. Async-signal-safe; allocates nothing.
pub(crate) fn install_shared_listener(program: &[SockFilter]) -> Result<RawFd, RestrictStep> {
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    set_no_new_privs().map_err(|e| RestrictStep::Landlock(errno(e)))?;
    install_listener(program, false).map_err(RestrictStep::Supervisor)
}

/// [`restrict_self`] on a raw descriptor and programs, for a child that
/// shares the caller's memory: nothing here allocates or touches more than
/// the errno. `connect` says where the connect supervisor's listener goes.
pub(crate) fn restrict_self_raw(
    fd: RawFd,
    flags: u32,
    filter: &[SockFilter],
    connect: Listener<'_>,
) -> Result<(), RestrictStep> {
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    set_no_new_privs().map_err(|e| RestrictStep::Landlock(errno(e)))?;
    let all_threads = flags & RESTRICT_SELF_TSYNC != 0;
    match connect {
        // The supervisor's program makes the terminal filter's checks: one
        // filter, one `seccomp` call.
        Listener::Send(program, sender, stop) => {
            let listener =
                install_listener(program, all_threads).map_err(RestrictStep::Supervisor)?;
            send_listener(sender, listener, stop).map_err(RestrictStep::Supervisor)?;
        }
        Listener::Installed => {}
        Listener::None => {
            install_seccomp_filter(filter, all_threads)
                .map_err(|e| RestrictStep::Seccomp(errno(e)))?;
        }
    }
    // SAFETY: landlock_restrict_self takes a descriptor and flags, both
    // integers; the kernel takes a reference of its own and reads no user memory.
    let ret = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, flags) };
    if ret == 0 {
        Ok(())
    } else {
        Err(RestrictStep::Landlock(errno(io::Error::last_os_error())))
    }
}

/// Arranges for `cmd`'s child to enforce the ruleset `fd` and the terminal
/// filter on itself between `fork` and `exec`. The parent stays unconfined.
pub(crate) fn confine_before_exec(
    cmd: &mut Command,
    fd: Arc<OwnedFd>,
    filter: TerminalFilter,
    connect: ChildHook,
) {
    let connect = connect.for_command(cmd);
    let hook = move || restrict_self(&fd, 0, &filter, Some(&connect)).map_err(io::Error::from);
    // SAFETY: the hook runs in the forked child and only performs
    // async-signal-safe syscalls (prctl, seccomp, getpid, sendmsg,
    // close, landlock_restrict_self) on descriptors and programs built by
    // the parent; building an io::Error from a raw errno does not
    // allocate. Nothing else from the parent's state is touched.
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// Makes spawning `cmd` fail with `errno` before it runs: what a command
/// gets when its sandbox cannot be set up.
pub(crate) fn fail_before_exec(cmd: &mut Command, errno: i32) {
    let hook = move || Err(io::Error::from_raw_os_error(errno));
    // SAFETY: the hook only builds an io::Error from a raw errno, which
    // does not allocate.
    unsafe {
        cmd.pre_exec(hook);
    }
}
