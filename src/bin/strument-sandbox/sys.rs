//! The system calls `run` makes to stand between a shell and its command:
//! signal masks, dispositions, synchronous waiting for signals, signalling
//! and reaping the child. They change the calling thread's signal mask, so
//! they live in the tool, not in the library an agent links. The binary's
//! only `unsafe` code, each with a `SAFETY:` line.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

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

/// Gives SIGCHLD its default disposition with `SA_NOCLDSTOP`: raised when
/// a child ends, not each time one stops (a traced child stops twice for
/// every traced call). Returns the disposition it had.
pub(crate) fn no_child_stop_signals() -> io::Result<SignalAction> {
    // SAFETY: sigaction is plain data; all-zero is SIG_DFL with an empty mask.
    let mut quiet: libc::sigaction = unsafe { std::mem::zeroed() };
    quiet.sa_flags = libc::SA_NOCLDSTOP;
    // SAFETY: as above, written by the kernel.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid sigaction structs for the call.
    let ret = unsafe { libc::sigaction(libc::SIGCHLD, &raw const quiet, &raw mut old) };
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

/// Makes this process the child subreaper of everything it starts
/// (`PR_SET_CHILD_SUBREAPER`): a process the command leaves behind (a
/// daemon that forked twice, a server its client started) is adopted by
/// `run`, not by init, and so stays a descendant of the connect
/// supervisor, which Yama's `ptrace_scope` 1 (Ubuntu's default) requires
/// before the supervisor may take the socket of the process it performs a
/// `connect` or `accept` for. [`reap_orphans`] reaps them as they end.
pub(crate) fn become_subreaper() -> io::Result<()> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes integer arguments only.
    let ret = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reaps every child that has ended but `command`: the processes adopted
/// under [`become_subreaper`]. Stops at `command` itself if it has ended,
/// leaving its status for [`wait_child`]. Only children that signal their
/// end with `SIGCHLD` are looked at (no `__WALL`), as `run` starts no
/// other kind. Never while a thread traces the command: an adopted tracee
/// is reaped by its tracer, and reaping it here would take its end from the
/// tracer, which would then wait for it forever.
pub(crate) fn reap_orphans(command: libc::pid_t) {
    loop {
        // SAFETY: siginfo_t is plain data, all-zero valid (si_pid 0).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid siginfo_t for the kernel to write;
        // WNOWAIT leaves the child waitable.
        let ret = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &raw mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: waitid filled `info` (or left it zeroed: pid 0).
        let pid = unsafe { info.si_pid() };
        if ret != 0 || pid == 0 || pid == command {
            return;
        }
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid int; `pid` is an ended child of ours.
        if unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) } <= 0 {
            return;
        }
    }
}

/// Stops this whole process once with `SIGTSTP`, as the terminal's Ctrl-Z
/// would, though the calling thread blocks it: unblocked for the moment of
/// a signal to this thread alone, which the kernel delivers before `raise`
/// returns, then blocked again once the process is resumed. A `SIGTSTP`
/// already pending (the terminal's own copy for this process, not yet
/// taken) is taken first: unblocking would deliver it, and the `raise`
/// after `fg` would then stop the process a second time.
pub(crate) fn stop_self() -> io::Result<()> {
    let tstp = SignalSet::of(&[libc::SIGTSTP]);
    while wait_signal(&tstp, Some(std::time::Duration::ZERO))?.is_some() {}
    // SAFETY: sigset_t is plain data, written by pthread_sigmask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid sigset_t for the call.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &raw const tstp.0, &raw mut old) };
    if ret != 0 {
        return Err(io::Error::from_raw_os_error(ret));
    }
    // SAFETY: raise takes a signal number only.
    let raised = unsafe { libc::raise(libc::SIGTSTP) };
    // SAFETY: `old` was written by the successful call above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const old, std::ptr::null_mut());
    }
    if raised == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A pipe, both ends close-on-exec: `(read, write)`. (`std::io::pipe` is
/// newer than the crate's `rust-version`.)
pub(crate) fn pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made by pipe2 and are owned by no one else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// A descriptor readable while a signal of `set` (which must be blocked)
/// is pending: `signalfd`, close-on-exec and non-blocking. Only its
/// readiness is used; the signals are taken by [`wait_signal`].
pub(crate) fn signalfd(set: &SignalSet) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a valid set; -1 asks for a new descriptor.
    let fd =
        unsafe { libc::signalfd(-1, &raw const set.0, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just made and is owned by no one else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `poll(2)` on `fds` (each `(descriptor, events)`), at most `timeout`
/// (forever with `None`); returns each descriptor's `revents`, all 0 when
/// the time ran out or a signal interrupted the wait.
pub(crate) fn poll(
    fds: &[(std::os::fd::BorrowedFd<'_>, libc::c_short)],
    timeout: Option<std::time::Duration>,
) -> io::Result<Vec<libc::c_short>> {
    use std::os::fd::AsRawFd;
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|(fd, events)| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: *events,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| {
        libc::c_int::try_from(t.as_millis()).unwrap_or(libc::c_int::MAX)
    });
    // SAFETY: `polled` is a live array of `len` pollfd entries.
    let ret = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
    if ret < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
        return Ok(vec![0; fds.len()]);
    }
    Ok(polled.iter().map(|p| p.revents).collect())
}

/// The process's entry, in place of std's runtime start (`lang_start`),
/// which before `main` asks glibc for the main thread's stack
/// (`pthread_getattr_np`, a read of `/proc/self/maps`) only to name a stack
/// overflow in its message: 23 µs of every `run` on the machine this was
/// measured on (a static binary started 300 times, medians of 15 rounds,
/// against the same with std's start). What else that start does and `run`
/// relies on is done here: `SIGPIPE` ignored (a write to a closed pipe is
/// an error, not the end of `run`), standard descriptors that are closed
/// opened on `/dev/null` (so that no pipe or file of `run`'s takes their
/// number), a panic ended with status 101 and standard output flushed. A
/// stack overflow now ends `run` with `SIGSEGV` and no message. The
/// arguments are still std's: glibc hands them to it before `main`.
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: signal takes integers; one thread runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    open_closed_standard_fds();
    let code = std::panic::catch_unwind(crate::entry).unwrap_or(101);
    let _ = io::Write::flush(&mut io::stdout());
    libc::c_int::from(code)
}

/// Opens `/dev/null` on each of descriptors 0, 1 and 2 that is closed, as
/// std's runtime does before `main`.
#[cfg(not(test))]
fn open_closed_standard_fds() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is three valid pollfd structs; a zero timeout.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } < 0 {
        return;
    }
    for pfd in fds {
        if pfd.revents & libc::POLLNVAL != 0 {
            // SAFETY: a NUL-terminated path and flags; the lowest free
            // descriptor is the closed one, which is what is wanted: it is
            // left open for the process's lifetime.
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
}

/// One malloc arena for the whole process: the connect supervisor's
/// thread allocates from the main one instead of mapping and later
/// unmapping an arena of its own (a 64 MiB reservation), which a
/// short-lived `run` pays for at start and at exit.
pub(crate) fn one_malloc_arena() {
    // SAFETY: mallopt takes integers; called before any other thread runs.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watcher of a traced command stops `run` when the command has
    /// stopped; the terminal's own `SIGTSTP` for `run` may still be pending
    /// then. `run` must stop once, so that one `fg` resumes it. Checked in
    /// a forked child (in a process group of its own whose parent, this
    /// process, is in another group of the session, so `SIGTSTP` is not
    /// discarded as in an orphaned group): stopped once, then continued, it
    /// exits instead of stopping again.
    #[test]
    fn stop_self_stops_once_with_the_terminal_s_copy_pending() {
        // SAFETY: the child makes only async-signal-safe calls (setpgid,
        // sigprocmask, kill, sigtimedwait, raise, _exit) and allocates nothing.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            // SAFETY: as above; the child never returns into the test harness.
            unsafe {
                libc::setpgid(0, 0);
                let tstp = SignalSet::of(&[libc::SIGTSTP]);
                libc::pthread_sigmask(libc::SIG_BLOCK, &raw const tstp.0, std::ptr::null_mut());
                // The terminal's copy, pending while the thread blocks it.
                libc::kill(libc::getpid(), libc::SIGTSTP);
                let code = if stop_self().is_ok() { 0 } else { 3 };
                libc::_exit(code);
            }
        }
        let wait = || {
            let mut status = 0;
            // SAFETY: `status` is a valid int for the kernel to write.
            let ret = unsafe { libc::waitpid(pid, &raw mut status, libc::WUNTRACED) };
            assert_eq!(ret, pid, "waitpid: {}", io::Error::last_os_error());
            status
        };
        let first = wait();
        assert!(libc::WIFSTOPPED(first), "not stopped: {first:#x}");
        // SAFETY: kill takes integers only.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        let second = wait();
        if libc::WIFSTOPPED(second) {
            // SAFETY: as above; the child is ours, reaped below.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            wait();
            panic!("stopped a second time after SIGCONT");
        }
        assert!(
            libc::WIFEXITED(second) && libc::WEXITSTATUS(second) == 0,
            "ended {second:#x}"
        );
    }
}
