//! Tracing a confined command's write-shaped system calls (`run
//! --explain-denials`): `ptrace`, `waitpid` on tracees, reading their
//! memory, and the pre-exec hook that makes the child a tracee.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use super::seccomp::install_seccomp_filter;
use crate::terminal::SockFilter;

/// `PTRACE_O_*` options every tracee gets (`<linux/ptrace.h>`).
const PTRACE_O_TRACESYSGOOD: libc::c_int = 1;
const PTRACE_O_TRACEFORK: libc::c_int = 1 << 1;
const PTRACE_O_TRACEVFORK: libc::c_int = 1 << 2;
const PTRACE_O_TRACECLONE: libc::c_int = 1 << 3;
const PTRACE_O_TRACEEXEC: libc::c_int = 1 << 4;
const PTRACE_O_TRACESECCOMP: libc::c_int = 1 << 7;
const PTRACE_O_EXITKILL: libc::c_int = 1 << 20;

/// Every process and thread the command starts is traced too; a
/// syscall-exit stop is told apart from a real SIGTRAP; and should the
/// tracer die, its tracees die with it rather than run on with every
/// write-shaped call failing `ENOSYS` (seccomp's answer when no tracer
/// listens).
const OPTIONS: libc::c_int = PTRACE_O_TRACESYSGOOD
    | PTRACE_O_TRACEFORK
    | PTRACE_O_TRACEVFORK
    | PTRACE_O_TRACECLONE
    | PTRACE_O_TRACEEXEC
    | PTRACE_O_TRACESECCOMP
    | PTRACE_O_EXITKILL;

/// `PTRACE_SEIZE`, `PTRACE_INTERRUPT`, `PTRACE_LISTEN`,
/// `PTRACE_GET_SYSCALL_INFO` (Linux 5.3, below Landlock's 5.13).
const PTRACE_SEIZE: libc::c_uint = 0x4206;
const PTRACE_LISTEN: libc::c_uint = 0x4208;
const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;

/// `PTRACE_SYSCALL_INFO_*`: what a stop's syscall information describes.
pub(crate) const SYSCALL_INFO_EXIT: u8 = 2;
pub(crate) const SYSCALL_INFO_SECCOMP: u8 = 3;

/// The event of a ptrace stop, `status >> 16` (`PTRACE_EVENT_*`).
pub(crate) const EVENT_SECCOMP: libc::c_int = 7;
pub(crate) const EVENT_STOP: libc::c_int = 128;

/// `struct ptrace_syscall_info` of `<linux/ptrace.h>`, the `seccomp`
/// member of its union (the largest; `entry` is its prefix and `exit`
/// overlays `nr` and the first argument).
#[repr(C)]
#[derive(Default)]
struct RawSyscallInfo {
    op: u8,
    pad: [u8; 3],
    arch: u32,
    instruction_pointer: u64,
    stack_pointer: u64,
    nr: u64,
    args: [u64; 6],
    ret_data: u32,
    pad2: u32,
}

/// A tracee's system call at a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyscallInfo {
    /// At a seccomp stop: about to run.
    Seccomp {
        /// `AUDIT_ARCH_*` of the convention it came in by.
        arch: u32,
        nr: u64,
        args: [u64; 6],
    },
    /// At a syscall-exit stop: its result, `-errno` on error.
    Exit { rval: i64, is_error: bool },
    /// Any other stop.
    Other,
}

/// The calling thread of a child between `fork` and `exec`: asks to be
/// traced by its parent (`PTRACE_TRACEME`; the `exec` then stops it, so
/// the parent can take over before the command runs a single instruction),
/// then installs `program`, the seccomp filter that stops the write-shaped
/// system calls for that tracer. Registered after
/// [`confine_before_exec`](super::confine_before_exec), which set
/// `no_new_privs`, which the filter needs.
pub(crate) fn trace_before_exec(cmd: &mut Command, program: std::sync::Arc<[SockFilter]>) {
    let hook = move || {
        // SAFETY: PTRACE_TRACEME takes no pointer; the other arguments are ignored.
        let ret = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
        if ret != 0 {
            return Err(io::Error::last_os_error());
        }
        install_seccomp_filter(&program, false)
    };
    // SAFETY: the hook runs in the forked child and performs two
    // async-signal-safe syscalls (ptrace, seccomp) on a program built by the
    // parent; the error is built from the raw errno without allocating.
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// Calls `ptrace(request, pid, addr, data)` for requests without pointers.
fn request(request: libc::c_uint, pid: libc::pid_t, addr: usize, data: usize) -> io::Result<()> {
    // SAFETY: the requests passed here (SEIZE, CONT, SYSCALL, LISTEN,
    // DETACH) read no user memory: `addr` and `data` are integers to them.
    let ret = unsafe { libc::ptrace(request, pid, addr, data) };
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Takes over `pid`, stopped and detached, as a seized tracee with the
/// options every tracee needs: seizing (rather than `PTRACE_TRACEME`'s
/// attach) is what lets a stopped command stay stopped (`PTRACE_LISTEN`),
/// and the processes it starts inherit it.
pub(crate) fn seize(pid: libc::pid_t) -> io::Result<()> {
    request(PTRACE_SEIZE, pid, 0, OPTIONS as usize)
}

/// Lets the stopped tracee run on, delivering `signal` (0: none).
pub(crate) fn cont(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    request(
        libc::PTRACE_CONT,
        pid,
        0,
        usize::try_from(signal).unwrap_or(0),
    )
}

/// Lets the tracee, stopped at a seccomp stop, run the system call and
/// stop again at its exit.
pub(crate) fn run_to_exit(pid: libc::pid_t) -> io::Result<()> {
    request(libc::PTRACE_SYSCALL, pid, 0, 0)
}

/// Leaves a tracee in group-stop stopped, but no longer held by the
/// tracer: `SIGCONT` resumes it, and the tracer hears of it.
pub(crate) fn listen(pid: libc::pid_t) -> io::Result<()> {
    request(PTRACE_LISTEN, pid, 0, 0)
}

/// Detaches from the stopped tracee, delivering `signal` as it goes.
pub(crate) fn detach(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    request(
        libc::PTRACE_DETACH,
        pid,
        0,
        usize::try_from(signal).unwrap_or(0),
    )
}

/// The event message of a ptrace event stop (`PTRACE_GETEVENTMSG`): at an
/// `exec` stop, the thread id the exec'ing thread had before.
pub(crate) fn event_message(pid: libc::pid_t) -> io::Result<libc::c_ulong> {
    let mut message: libc::c_ulong = 0;
    // SAFETY: the kernel writes one unsigned long into `message`, which
    // lives across the call.
    let ret = unsafe { libc::ptrace(libc::PTRACE_GETEVENTMSG, pid, 0, &raw mut message) };
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(message)
    }
}

/// `PTRACE_EVENT_EXEC`: a tracee's `execve` succeeded.
pub(crate) const EVENT_EXEC: libc::c_int = 4;

/// The stopped tracee's system call (`PTRACE_GET_SYSCALL_INFO`).
pub(crate) fn syscall_info(pid: libc::pid_t) -> io::Result<SyscallInfo> {
    let mut raw = RawSyscallInfo::default();
    // SAFETY: the kernel writes at most `size_of::<RawSyscallInfo>()` bytes
    // (the size passed as `addr`) into `raw`, which lives across the call.
    let ret = unsafe {
        libc::ptrace(
            PTRACE_GET_SYSCALL_INFO,
            pid,
            std::mem::size_of::<RawSyscallInfo>(),
            &raw mut raw,
        )
    };
    if ret == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(match raw.op {
        SYSCALL_INFO_SECCOMP => SyscallInfo::Seccomp {
            arch: raw.arch,
            nr: raw.nr,
            args: raw.args,
        },
        SYSCALL_INFO_EXIT => SyscallInfo::Exit {
            // The exit member: `s64 rval; u8 is_error;` where `nr` and
            // `args[0]` lie.
            rval: raw.nr as i64,
            is_error: raw.args[0] & 0xff != 0,
        },
        _ => SyscallInfo::Other,
    })
}

/// What `waitpid` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// `pid` ended; the raw status.
    Ended(libc::pid_t, libc::c_int),
    /// `pid` stopped: the signal and the ptrace event (`status >> 16`).
    Stopped(libc::pid_t, libc::c_int, libc::c_int),
    /// No child or tracee is left (`ECHILD`).
    NoneLeft,
}

/// `waitpid(pid, __WALL | __WNOTHREAD | extra)`, blocking, retried on
/// `EINTR`: a stop or end of the calling thread's children and tracees only
/// (`__WNOTHREAD`), threads included (`__WALL`), so a caller's other
/// children are never reaped here.
pub(crate) fn wait_tracee(pid: libc::pid_t, extra: libc::c_int) -> io::Result<Waited> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a valid int for the kernel to write.
        let ret = unsafe {
            libc::waitpid(
                pid,
                &raw mut status,
                libc::__WALL | libc::__WNOTHREAD | extra,
            )
        };
        if ret < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => return Ok(Waited::NoneLeft),
                _ => return Err(err),
            }
        }
        return Ok(if libc::WIFSTOPPED(status) {
            Waited::Stopped(ret, libc::WSTOPSIG(status), status >> 16)
        } else {
            Waited::Ended(ret, status)
        });
    }
}

/// Reads the NUL-terminated string at `addr` in process `pid`, at most
/// `max` bytes, page by page (`process_vm_readv` stops at the first page
/// it cannot read). `None` when nothing at `addr` is readable or no NUL
/// comes within `max`.
pub(crate) fn read_string(pid: libc::pid_t, addr: u64, max: usize) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let to_page_end = usize::try_from(PAGE - at % PAGE).ok()?;
        let chunk = read_bytes(pid, at, to_page_end.min(max - out.len()))?;
        if let Some(nul) = chunk.iter().position(|b| *b == 0) {
            out.extend_from_slice(&chunk[..nul]);
            return Some(out);
        }
        out.extend_from_slice(&chunk);
        at = at.checked_add(u64::try_from(chunk.len()).ok()?)?;
    }
    None
}

/// Reads `len` bytes at `addr` in process `pid` (`process_vm_readv`, as
/// the connect supervisor reads addresses); `None` when they cannot all be
/// read.
pub(crate) fn read_bytes(pid: libc::pid_t, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let n = super::notify::read_memory(pid, addr, &mut buf).ok()?;
    (n == len).then_some(buf)
}

/// Whether the file system's own permissions (mode, owner, ACLs, a
/// read-only mount) let this process's user do `mode` (`W_OK`, `X_OK`) on
/// `path`, by the effective ids as the kernel checks a write
/// (`faccessat(AT_EACCESS)`). Landlock is not asked: this process is
/// unconfined.
pub(crate) fn permitted(path: &Path, mode: libc::c_int) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated string alive across the call.
    let ret = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mode, libc::AT_EACCESS) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's id.
pub(crate) fn thread_id() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    libc::pid_t::try_from(tid).unwrap_or(0)
}

/// Sends `signal` to thread `tid` of this process.
pub(crate) fn signal_thread(tid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: tgkill takes integers only.
    let ret = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, signal) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Blocks `SIGTSTP` in the calling thread (a tracer of this crate's own),
/// so that the terminal's Ctrl-Z, sent to the whole process, is taken by a
/// thread that follows the command's stop instead.
pub(crate) fn block_job_control_here() {
    // SAFETY: sigset_t is plain data; sigemptyset and sigaddset initialise
    // it; pthread_sigmask reads it and keeps no pointer.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, libc::SIGTSTP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut());
    }
}

/// Sends `signal` to process `pid` (a tracee).
pub(crate) fn signal_process(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes integers only.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
