//! Enforcing a prepared ruleset and the terminal filter, on the calling
//! thread or on a child between `fork` and `exec`. The functions used
//! there call nothing but `prctl`, `seccomp` and `landlock_restrict_self`,
//! all async-signal-safe, and build their error from the raw errno
//! without allocating.

use std::ffi::{CString, c_char};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;

use super::errno;
use super::landlock::RESTRICT_SELF_TSYNC;
use super::notify::{Destination, Program, hand_over_listener, install_listener, send_listener};
use super::seccomp::install_seccomp_filter;
use crate::connect::ChildHook;
use crate::terminal::{SockFilter, TerminalFilter};

/// Sets `no_new_privs`, which `landlock_restrict_self` requires of an
/// unprivileged caller and which stops a setuid binary from escaping.
fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only. Through
    // `syscall`, as the child's later calls here are: one page of the C
    // library's code for all of them (see `notify::random_words`).
    let ret = unsafe { libc::syscall(libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
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
        Some(hook) => Listener::Send(
            hook.program(),
            hook.destination(),
            hook.stops_after_sending(),
        ),
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
    /// The supervisor's program, installed here; its listener is sent to
    /// the destination and closed here (a child with a descriptor table of
    /// its own: `fork`, or the calling process). A keyed program's goes
    /// over `SCM_RIGHTS` at once ([`hand_over_listener`]: a child that
    /// `exec`s next); one without a key waits for the supervisor to take
    /// it over the destination's socket ([`send_listener`]: the calling
    /// process, which runs on). With `true` (tests only), the child stops
    /// itself once it has sent the listener.
    Send(Program<'a>, Destination, bool),
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
pub(crate) fn install_shared_listener(program: Program<'_>) -> Result<RawFd, RestrictStep> {
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    set_no_new_privs().map_err(|e| RestrictStep::Landlock(errno(e)))?;
    let (listener, _) = install_listener(program, false).map_err(RestrictStep::Supervisor)?;
    Ok(listener)
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
        Listener::Send(program, to, stop) => {
            let (listener, key) =
                install_listener(program, all_threads).map_err(RestrictStep::Supervisor)?;
            match program.key_at {
                Some(_) => hand_over_listener(to, listener, &key, stop),
                None => send_listener(to.socket, listener, stop),
            }
            .map_err(RestrictStep::Supervisor)?;
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

unsafe extern "C" {
    /// The C library's environment, which `execvp` passes on. In a child
    /// of std's `Command`, std has pointed it at the command's own
    /// variables before the hooks run, when the command sets any.
    static mut environ: *const *const c_char;
}

/// How many pointers the array [`add_to_environ`] builds may hold without
/// a mapping of its own: room the parent reserves (4 KiB on a 64-bit
/// build) for an environment of a few hundred variables.
const ENVIRON_SLOTS: usize = 512;

/// Adds to the environment the child is about to `exec` with each of
/// `entries` (`NAME=value`) whose name it has no entry for, in a new
/// array: in `slots`' spare room, reserved by the parent, when it fits
/// (a mapping and its fault cost more than the fault alone), else in a
/// mapping this child makes for itself. The entries stay where the
/// parent built them, and nothing is allocated. For a child between
/// `fork` and `exec`, where std's own copy of the environment would cost
/// the parent a copy of every variable before each `fork` (see
/// doc/performance.md).
fn add_to_environ(entries: &[CString], slots: &mut Vec<usize>) -> Result<(), i32> {
    // SAFETY: this child is single-threaded (after fork); `environ` is the
    // C library's NULL-terminated array (or NULL), read here and replaced
    // below, nothing else touching it meanwhile.
    let old = unsafe { environ };
    let mut count = 0usize;
    if !old.is_null() {
        // SAFETY: the array is NULL-terminated, so every index up to the
        // NULL is in bounds.
        while !unsafe { *old.add(count) }.is_null() {
            count += 1;
        }
    }
    let present = |entry: &CString| -> bool {
        let bytes = entry.as_bytes();
        let name = match bytes.iter().position(|&b| b == b'=') {
            Some(at) => &bytes[..=at],
            None => bytes,
        };
        (0..count).any(|i| {
            // SAFETY: `i < count`: one of the environment's NUL-terminated
            // strings, read only.
            unsafe { starts_with(*old.add(i), name) }
        })
    };
    let missing = entries.iter().filter(|e| !present(e)).count();
    if missing == 0 {
        return Ok(());
    }
    let new = if count + missing < slots.capacity() {
        // A pointer is a usize wide and aligned: the room holds as many.
        slots
            .spare_capacity_mut()
            .as_mut_ptr()
            .cast::<*const c_char>()
    } else {
        let len = (count + missing + 1) * std::mem::size_of::<*const c_char>();
        // SAFETY: an anonymous private mapping of `len` bytes; no memory of
        // ours is named.
        let new = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if new == libc::MAP_FAILED {
            return Err(errno());
        }
        new.cast::<*const c_char>()
    };
    let mut at = 0;
    for i in 0..count {
        // SAFETY: `i < count`, within the old array; `at < count + missing
        // + 1`, within the new one.
        unsafe { *new.add(at) = *old.add(i) };
        at += 1;
    }
    for entry in entries.iter().filter(|e| !present(e)) {
        // SAFETY: as above; the entry lives in the hook's captured state
        // until `exec` copies it.
        unsafe { *new.add(at) = entry.as_ptr() };
        at += 1;
    }
    // SAFETY: the last of the `count + missing + 1` slots.
    unsafe { *new.add(at) = std::ptr::null() };
    // SAFETY: as for the read above; std restores its own pointer only if
    // a hook fails, and the array (the parent's room, which the hook holds
    // until `exec`, or the mapping) goes with the process at `exec`.
    unsafe { environ = new.cast_const() };
    Ok(())
}

/// Whether the NUL-terminated string `s` begins with `prefix`.
///
/// # Safety
///
/// `s` points at a NUL-terminated string.
unsafe fn starts_with(s: *const c_char, prefix: &[u8]) -> bool {
    prefix.iter().enumerate().all(|(i, &b)| {
        // SAFETY: every byte before the first mismatch is not NUL (a NUL
        // mismatches any byte of the prefix but NUL, which a name has
        // not), so index `i` is within the string.
        (unsafe { *s.add(i) }) as u8 == b
    })
}

/// Arranges for `cmd`'s child to enforce the ruleset `fd` and the terminal
/// filter on itself between `fork` and `exec`, with `environment` added to
/// its variables where it has none of the name. The parent stays
/// unconfined.
pub(crate) fn confine_before_exec(
    cmd: &mut Command,
    fd: Arc<OwnedFd>,
    filter: TerminalFilter,
    connect: ChildHook,
    environment: Vec<CString>,
) {
    let connect = connect.for_command(cmd);
    // Room for the child's new environment, when it adds to it.
    let mut slots = if environment.is_empty() {
        Vec::new()
    } else {
        Vec::with_capacity(ENVIRON_SLOTS + environment.len())
    };
    let hook = move || {
        add_to_environ(&environment, &mut slots).map_err(io::Error::from_raw_os_error)?;
        restrict_self(&fd, 0, &filter, Some(&connect)).map_err(io::Error::from)
    };
    // SAFETY: the hook runs in the forked child and only performs
    // async-signal-safe syscalls (mmap, prctl, seccomp, getpid, getrandom,
    // epoll_ctl, sendmsg, close, landlock_restrict_self) on descriptors,
    // programs and strings built by the parent, writes into room the
    // parent reserved, and writes `environ`, which nothing else in the
    // child reads before `exec`; building an io::Error from a raw errno
    // does not allocate. Nothing else from the parent's state is touched.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    /// Runs `add_to_environ(entries)` in a forked child whose `environ` is
    /// `own` (NULL-terminated, or NULL), and returns whether the child's
    /// environment then held exactly `expected`, in order.
    fn added_in_a_child(own: *const *const c_char, entries: &[&CStr], expected: &[&CStr]) -> bool {
        // In the parent's room, and in a mapping of the child's own.
        added_with_room(own, entries, expected, ENVIRON_SLOTS)
            && added_with_room(own, entries, expected, 0)
    }

    /// How many entries the NULL-terminated array `own` (or NULL) has.
    fn own_len(own: *const *const c_char) -> usize {
        let mut len = 0;
        // SAFETY: the tests' arrays are NULL-terminated.
        while !own.is_null() && !unsafe { *own.add(len) }.is_null() {
            len += 1;
        }
        len
    }

    /// [`added_in_a_child`] with room for `room` pointers.
    fn added_with_room(
        own: *const *const c_char,
        entries: &[&CStr],
        expected: &[&CStr],
        room: usize,
    ) -> bool {
        let entries: Vec<CString> = entries.iter().map(|e| CString::from(*e)).collect();
        let mut slots: Vec<usize> = Vec::with_capacity(room);
        let room_at = slots.as_ptr() as usize;
        // SAFETY: the child touches only `environ`, the entries and the
        // expected strings (reads, and a new mapping), and leaves with
        // `_exit`: nothing of the test harness's runs there.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: this child is single-threaded; `own` outlives it.
            unsafe { environ = own };
            let added = add_to_environ(&entries, &mut slots).is_ok();
            // SAFETY: `environ` is NULL-terminated after the call.
            let now = unsafe { environ };
            // Unchanged when nothing was missing, else in the room exactly
            // when it fits there.
            let mut same = added
                && if expected.len() == own_len(own) {
                    now == own
                } else if expected.len() < room {
                    now as usize == room_at
                } else {
                    now != own && now as usize != room_at
                };
            for (i, want) in expected.iter().enumerate() {
                // SAFETY: indexes up to the first NULL, which stops the walk.
                let got = unsafe { *now.add(i) };
                // SAFETY: a non-NULL entry is a NUL-terminated string.
                same &= !got.is_null() && unsafe { CStr::from_ptr(got) } == *want;
                if !same {
                    break;
                }
            }
            // SAFETY: as above; the array has `expected.len()` entries then NULL.
            same &= unsafe { *now.add(expected.len()) }.is_null();
            // SAFETY: _exit ends the child without running the harness's code.
            unsafe { libc::_exit(i32::from(!same)) };
        }
        assert!(pid > 0, "fork: {}", io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: our own child; `status` is a valid int.
        assert_eq!(unsafe { libc::waitpid(pid, &raw mut status, 0) }, pid);
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }

    #[test]
    fn the_child_adds_only_the_variables_its_environment_lacks() {
        let own = [c"A=1".as_ptr(), c"BB=1".as_ptr(), std::ptr::null()];
        // `A` is there: kept as it is. `B` and `AB` are not, whatever names
        // begin or end like them.
        assert!(added_in_a_child(
            own.as_ptr(),
            &[c"A=2", c"B=3", c"AB=4"],
            &[c"A=1", c"BB=1", c"B=3", c"AB=4"],
        ));
        // Nothing missing: the environment is left as it is.
        assert!(added_in_a_child(
            own.as_ptr(),
            &[c"A=9"],
            &[c"A=1", c"BB=1"]
        ));
        // No environment at all: every entry.
        assert!(added_in_a_child(
            std::ptr::null(),
            &[c"A=2", c"B=3"],
            &[c"A=2", c"B=3"],
        ));
    }
}
