//! The tracer: takes the command over at its `exec`, then answers every
//! stop of it and of the processes and threads it starts, until none is
//! left, reading each write-shaped call's result at its exit.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use std::sync::atomic::Ordering;

use super::Operation;
use super::filter::{AT_REMOVEDIR, Call, Flags, WRITE_FLAGS, call_of};
use crate::sys::{self, SyscallInfo, Waited};
use crate::wait::TraceState as Shared;

/// `PATH_MAX`, counting the NUL: the kernel reads no longer path.
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// `AT_FDCWD` as the low 32 bits of a register.
const AT_FDCWD: i32 = libc::AT_FDCWD;

/// One write-shaped call that failed with `EACCES`, `EPERM` or `EXDEV`,
/// as the tracee made it: a candidate for a refusal by the sandbox.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) call: &'static Call,
    pub(crate) operation: Operation,
    pub(crate) errno: i32,
    /// The process's name (`/proc/PID/comm`).
    pub(crate) program: String,
    /// Each path as given, and made absolute against the directory it is
    /// relative to (`None` when that cannot be read).
    pub(crate) paths: Vec<(PathBuf, Option<PathBuf>)>,
}

/// Traces the command `root`, stopped by its `exec` under
/// `PTRACE_TRACEME`, and every process it starts, until all have ended.
/// `failed` hears of each candidate; `changed` is called when the command
/// stops for job control (Ctrl-Z: `true`) or ends (`false`). Returns the
/// command's raw wait status.
///
/// The calling thread must be the one that spawned `root`.
pub(crate) fn trace(
    root: libc::pid_t,
    shared: &Shared,
    failed: &mut dyn FnMut(Failed),
    changed: &dyn Fn(bool),
) -> io::Result<libc::c_int> {
    if let Some(status) = take_over(root)? {
        return Ok(status);
    }
    let mut known: HashSet<libc::pid_t> = HashSet::from([root]);
    set_live(shared, root, true);
    let mut in_flight: HashMap<libc::pid_t, (&'static Call, [u64; 6])> = HashMap::new();
    let mut root_status = None;
    loop {
        let (pid, signal, event) = match sys::wait_tracee(-1, 0)? {
            Waited::NoneLeft => break,
            Waited::Ended(pid, status) => {
                in_flight.remove(&pid);
                if known.remove(&pid) {
                    set_live(shared, pid, false);
                }
                if pid == root {
                    root_status = Some(status);
                    shared.root_ended.store(true, Ordering::SeqCst);
                    changed(false);
                }
                continue;
            }
            Waited::Stopped(pid, signal, event) => (pid, signal, event),
        };
        if known.insert(pid) {
            set_live(shared, pid, true);
        }
        // ESRCH from a resume below: the tracee was killed meanwhile, and
        // its end is the next thing waitpid reports.
        if event == sys::EVENT_SECCOMP {
            match sys::syscall_info(pid) {
                Ok(SyscallInfo::Seccomp { arch, nr, args }) => match call_of(arch, nr) {
                    Some(call) => {
                        in_flight.insert(pid, (call, args));
                        let _ = sys::run_to_exit(pid);
                    }
                    None => {
                        let _ = sys::cont(pid, 0);
                    }
                },
                _ => {
                    let _ = sys::cont(pid, 0);
                }
            }
        } else if signal == libc::SIGTRAP | 0x80 {
            // The exit of a call stopped at its seccomp stop.
            if let (Ok(SyscallInfo::Exit { rval, is_error }), Some((call, args))) =
                (sys::syscall_info(pid), in_flight.remove(&pid))
            {
                let errno = i32::try_from(-rval).unwrap_or(0);
                if is_error && matches!(errno, libc::EACCES | libc::EPERM | libc::EXDEV) {
                    if let Some(f) = read_failed(pid, call, &args, errno) {
                        failed(f);
                    }
                }
            }
            let _ = sys::cont(pid, 0);
        } else if event == sys::EVENT_STOP {
            if matches!(
                signal,
                libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
            ) {
                // Group-stop: stays stopped until SIGCONT, which the
                // kernel then reports as another stop.
                let _ = sys::listen(pid);
                if pid == root {
                    changed(true);
                }
            } else {
                // A new tracee's first stop, or the wake-up after SIGCONT.
                let _ = sys::cont(pid, 0);
            }
        } else if event == sys::EVENT_EXEC {
            // A thread other than the leader exec'd: it now has the
            // leader's id, and its own is gone without an exit report.
            if let Ok(former) = sys::event_message(pid) {
                let former = libc::pid_t::try_from(former).unwrap_or(pid);
                if former != pid && known.remove(&former) {
                    in_flight.remove(&former);
                    set_live(shared, former, false);
                }
            }
            let _ = sys::cont(pid, 0);
        } else if event != 0 {
            // fork, vfork, clone: the new tracee reports on its own.
            let _ = sys::cont(pid, 0);
        } else {
            // A signal on its way to the tracee: delivered as it was.
            let _ = sys::cont(pid, signal);
        }
    }
    root_status.ok_or_else(|| io::Error::from_raw_os_error(libc::ECHILD))
}

fn set_live(shared: &Shared, pid: libc::pid_t, alive: bool) {
    if let Ok(mut live) = shared.live.lock() {
        if alive {
            live.insert(pid);
        } else {
            live.remove(&pid);
        }
    }
}

/// The command stopped at its `exec` under `PTRACE_TRACEME`: detached
/// with a SIGSTOP and seized, so that it and everything it starts are
/// seized tracees (only those can stay stopped under Ctrl-Z), then
/// continued. `Some(status)` when it ended instead.
fn take_over(root: libc::pid_t) -> io::Result<Option<libc::c_int>> {
    loop {
        match sys::wait_tracee(root, 0)? {
            Waited::Ended(_, status) => return Ok(Some(status)),
            Waited::NoneLeft => return Err(io::Error::from_raw_os_error(libc::ECHILD)),
            Waited::Stopped(_, libc::SIGTRAP, 0) => break,
            // A signal that arrived first: let it be delivered later.
            Waited::Stopped(_, _, _) => sys::cont(root, 0)?,
        }
    }
    sys::detach(root, libc::SIGSTOP)?;
    loop {
        match sys::wait_tracee(root, libc::WUNTRACED)? {
            Waited::Ended(_, status) => return Ok(Some(status)),
            Waited::NoneLeft => return Err(io::Error::from_raw_os_error(libc::ECHILD)),
            Waited::Stopped(_, libc::SIGSTOP, _) => break,
            Waited::Stopped(_, _, _) => {}
        }
    }
    sys::seize(root)?;
    // Seizing a stopped process traps it at once: take that stop here, or
    // the loop would take it for a Ctrl-Z.
    loop {
        match sys::wait_tracee(root, 0)? {
            Waited::Ended(_, status) => return Ok(Some(status)),
            Waited::NoneLeft => return Err(io::Error::from_raw_os_error(libc::ECHILD)),
            Waited::Stopped(_, _, sys::EVENT_STOP) => break,
            Waited::Stopped(_, _, _) => sys::cont(root, 0)?,
        }
    }
    // Ends the group-stop (its wake-up, and the SIGCONT itself, come back
    // to the loop as one more stop each, which it resumes), then lets it run.
    sys::signal_process(root, libc::SIGCONT)?;
    sys::cont(root, 0)?;
    Ok(None)
}

/// The failed call's paths and operation, read from the stopped tracee.
/// `None` for an `openat2` that only read.
fn read_failed(
    pid: libc::pid_t,
    call: &'static Call,
    args: &[u64; 6],
    errno: i32,
) -> Option<Failed> {
    let operation = match call.flags {
        Flags::None => call.operation,
        // The filter stopped it for a write flag.
        Flags::Open(i) => open_operation(args[i]).unwrap_or(Operation::Write),
        Flags::OpenHow(i) => {
            // struct open_how { u64 flags; u64 mode; u64 resolve; }: every
            // openat2 stops, and one that only read is not a write.
            let flags = sys::read_bytes(pid, args[i], 8)?;
            open_operation(u64::from_ne_bytes(flags.try_into().ok()?))?
        }
        Flags::Unlink(i) if args[i] & AT_REMOVEDIR != 0 => Operation::RemoveDir,
        Flags::Unlink(_) => Operation::Remove,
    };
    let paths = call
        .paths
        .iter()
        .map(|p| {
            let given = sys::read_string(pid, args[p.path], PATH_MAX)
                .map(|b| PathBuf::from(OsString::from_vec(b)))
                .unwrap_or_default();
            let dirfd = p.dirfd.map_or(AT_FDCWD, |i| args[i] as i32);
            let absolute = if given.is_absolute() {
                Some(given.clone())
            } else {
                base(pid, dirfd).map(|b| {
                    if given.as_os_str().is_empty() {
                        b
                    } else {
                        b.join(&given)
                    }
                })
            };
            (given, absolute)
        })
        .collect();
    let program = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default();
    Some(Failed {
        call,
        operation,
        errno,
        program,
        paths,
    })
}

/// What an open with `flags` asks: creating or writing; `None` for
/// reading only.
fn open_operation(flags: u64) -> Option<Operation> {
    let flags = flags as u32;
    if flags & libc::O_CREAT as u32 != 0 {
        Some(Operation::Create)
    } else if flags & WRITE_FLAGS != 0 {
        Some(Operation::Write)
    } else {
        None
    }
}

/// The directory a relative path of `pid` starts from: its working
/// directory, or what its descriptor `dirfd` names.
fn base(pid: libc::pid_t, dirfd: i32) -> Option<PathBuf> {
    let link = if dirfd == AT_FDCWD {
        format!("/proc/{pid}/cwd")
    } else {
        format!("/proc/{pid}/fd/{dirfd}")
    };
    std::fs::read_link(link).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flags_say_create_write_or_read() {
        let f = |flags: libc::c_int| open_operation(flags as u64);
        assert_eq!(
            f(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC),
            Some(Operation::Create)
        );
        assert_eq!(f(libc::O_RDWR), Some(Operation::Write));
        assert_eq!(f(libc::O_WRONLY | libc::O_APPEND), Some(Operation::Write));
        assert_eq!(f(libc::O_RDONLY | libc::O_CLOEXEC), None);
    }
}
