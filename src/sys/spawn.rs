//! Starting a confined child without copying the caller:
//! `clone(CLONE_VM | CLONE_VFORK)`, as glibc's `posix_spawn` does, with the
//! confinement done by the child between `clone` and `execve`.
//!
//! `fork` copies the caller's page tables and makes both sides take
//! copy-on-write faults until the child execs; the parent then waits on a
//! pipe for the exec to succeed, one more cross-CPU wake-up. Here the child
//! shares the caller's memory and runs on a small stack of its own while the
//! caller is suspended until the child execs or exits, so the child may
//! touch nothing but what the caller built for it: every string, array,
//! descriptor and filter comes ready in a [`Plan`]. The child calls only
//! async-signal-safe system calls, allocates nothing, and reports a failure
//! by storing its errno where the caller reads it once it resumes.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use super::confine::{Listener, install_shared_listener, restrict_self_raw};
use super::errno;
use super::fds::cloexec_all_but;
use super::notify::Program;
use crate::terminal::SockFilter;

/// The child's stack: it runs a few frames of this module and `execve`.
const STACK_SIZE: usize = 64 * 1024;

/// `/bin/sh`, which `execvp` falls back to for a file the kernel cannot
/// execute (`ENOEXEC`: a script without `#!`), as `std::process::Command` does.
pub(crate) const SHELL: &CStr = c"/bin/sh";

/// Everything the child needs, built before `clone`.
pub(crate) struct Plan<'a> {
    /// The files to try, in order: the program itself when its name has a
    /// `/`, else each directory of `PATH` joined with it (`execvp`'s search).
    pub(crate) candidates: &'a [CString],
    /// `argv`, NULL-terminated; `argv[0]` as the caller gave it.
    pub(crate) argv: &'a [*const c_char],
    /// `envp`, NULL-terminated.
    pub(crate) envp: &'a [*const c_char],
    /// `["/bin/sh", <candidate>, argv[1..], NULL]` for the `ENOEXEC`
    /// fallback; slot 1 is filled by the child.
    pub(crate) shell_argv: &'a mut [*const c_char],
    /// The directory to change to first, if any.
    pub(crate) cwd: Option<&'a CStr>,
    /// `(from, to)`: `from` duplicated onto `to` (1 or 2) first.
    pub(crate) redirect: &'a [(RawFd, RawFd)],
    /// The Landlock ruleset to enforce, and the terminal filter installed
    /// with it (`None`: the child is not confined).
    pub(crate) confine: Option<(RawFd, &'a [SockFilter])>,
    /// The connect supervisor's filter, installed instead of the terminal
    /// filter (it makes the same checks) when the child is confined, and
    /// how its listener leaves the child.
    pub(crate) connect: Option<Connect<'a>>,
    /// The descriptors above 2 that stay open across `execve`, sorted
    /// ascending; every other one is marked close-on-exec (`None`: all
    /// stay as they are).
    pub(crate) keep_fds: Option<&'a [RawFd]>,
    /// One more step after confining: must be async-signal-safe and must
    /// not allocate; returns 0 or an errno. Other threads of the caller
    /// run on meanwhile (only the calling one is suspended), so it must
    /// touch nothing they change.
    pub(crate) hook: Option<&'a (dyn Fn() -> c_int + Sync)>,
}

/// How a confined child's listener reaches the connect supervisor.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Connect<'a> {
    /// The child starts in the caller's descriptor table (`CLONE_FILES`),
    /// so that the listener lands there: [`spawn`] returns it, with no
    /// socket to send it over and no wait for a supervisor. Where the child
    /// cannot then take a table of its own (`unshare` refused, as Docker's
    /// default seccomp profile does without `CAP_SYS_ADMIN`), the spawn
    /// fails, [`shares_tables`] answers `false` from then on, and the
    /// caller starts the child again with [`Connect::Send`].
    Share(Program<'a>),
    /// The child hands the listener over, as a forked child does
    /// (`sys::hand_over_listener`).
    Send(Program<'a>, super::notify::Destination),
}

/// Whether children may start in the caller's descriptor table: true until
/// one could not leave it.
static TABLES_SHARED: AtomicBool = AtomicBool::new(true);

/// Whether [`Connect::Share`] may be used (see there).
pub(crate) fn shares_tables() -> bool {
    TABLES_SHARED.load(Ordering::Relaxed)
}

/// The block shared with the child: the plan, the signals the caller
/// handles (see [`reset_signal_handlers`]), and the errno it leaves when it
/// cannot exec.
struct Shared<'a, 'b> {
    plan: &'b mut Plan<'a>,
    caught: u64,
    errno: AtomicI32,
    /// The supervisor's listener, once the child has installed it in the
    /// table it shares with the caller; -1 before.
    listener: AtomicI32,
    /// Set by a child whose `unshare(CLONE_FILES)` was refused.
    unshare_refused: AtomicBool,
}

impl Shared<'_, '_> {
    /// Whether the child starts in the caller's descriptor table, to leave
    /// the supervisor's listener there.
    fn shares_table(&self) -> bool {
        self.plan.confine.is_some() && matches!(self.plan.connect, Some(Connect::Share(_)))
    }
}

/// Starts the child described by `plan` and returns its pid once it has
/// exec'd. The child starts with an empty signal mask and `SIGPIPE` at its
/// default action, as `std::process::Command` gives its children; every
/// signal the caller handles is reset to its default action in the child
/// before anything can be delivered there (a handler run in the child would
/// run on the caller's memory).
///
/// With [`Plan::connect`], the supervisor's listener comes back with the
/// pid, in this process's table.
///
/// An error is the child's own (`ENOENT` when no candidate exists,
/// `EACCES` when one exists but cannot be executed, or the confinement's
/// errno), after the child has been reaped; or `clone`'s.
pub(crate) fn spawn(plan: &mut Plan<'_>) -> io::Result<(libc::pid_t, Option<OwnedFd>)> {
    if plan.argv.last().is_none_or(|p| !p.is_null())
        || plan.envp.last().is_none_or(|p| !p.is_null())
        || plan.shell_argv.len() < 3
        || plan.shell_argv.last().is_none_or(|p| !p.is_null())
    {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let stack = Stack::take()?;
    let mut shared = Shared {
        plan,
        caught: caught_signals(),
        errno: AtomicI32::new(0),
        listener: AtomicI32::new(-1),
        unshare_refused: AtomicBool::new(false),
    };
    let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    if shared.shares_table() {
        flags |= libc::CLONE_FILES;
    }
    // Blocked for the child's first instructions: a handler of the caller's
    // must not run on the child's stack with the caller's memory.
    let previous = block_all_signals();
    // SAFETY: `child` runs on `stack` (its top passed, the stack growing
    // down) with a pointer to `shared`, which outlives the child's use of
    // it: CLONE_VFORK suspends this thread until the child has exec'd or
    // exited, and the child touches only `shared` and what the plan's
    // slices point at, all owned by the caller and alive for this call.
    // With CLONE_FILES the child changes no descriptor of the shared table
    // but the listener it adds (see `prepare_and_exec`).
    let pid = unsafe {
        libc::clone(
            child,
            stack.top(),
            flags,
            (&raw mut shared).cast::<c_void>(),
        )
    };
    let clone_error = io::Error::last_os_error();
    set_thread_mask(&previous);
    stack.put_back();
    // The child leaves the listener's number before it leaves the shared
    // table (one killed between the two would leave it unnamed, open until
    // this process ends).
    let listener = match shared.listener.load(Ordering::Acquire) {
        -1 => None,
        // SAFETY: the child made this descriptor in this process's table
        // (CLONE_FILES) and keeps no claim on it: it closed its own copy in
        // the table it then took, or exited.
        fd => Some(unsafe { OwnedFd::from_raw_fd(fd) }),
    };
    if pid < 0 {
        return Err(clone_error);
    }
    match shared.errno.load(Ordering::Acquire) {
        0 => Ok((pid, listener)),
        errno => {
            drop(listener);
            reap(pid);
            if shared.unshare_refused.load(Ordering::Acquire) {
                TABLES_SHARED.store(false, Ordering::Relaxed);
            }
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// Kills and reaps a child of this process not reaped yet (so that its
/// pid cannot name another process meanwhile).
pub(crate) fn kill_and_reap(pid: libc::pid_t) {
    // SAFETY: kill takes integers; `pid` is an unreaped child of ours.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    reap(pid);
}

/// Reaps the child that failed before `execve` (it exited with 127).
fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: `status` is a valid int for the kernel to write; the pid is
    // our own child, not yet waited for.
    while unsafe { libc::waitpid(pid, &raw mut status, 0) } < 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
}

/// Starts a thread of the library's own with every signal blocked from its
/// first instruction (the caller's mask is blocked around the start, and
/// the thread inherits it): a signal sent to the whole process, such as the
/// terminal's Ctrl-Z or Ctrl-C, is then taken by the caller's threads as if
/// the library had none, never acted on by default in one of its threads
/// (which would stop or end the whole process behind the caller's back).
///
/// # Errors
///
/// When the thread cannot be started.
pub(crate) fn spawn_unsignalled<F>(name: String, body: F) -> io::Result<()>
where
    F: FnOnce() + Send + 'static,
{
    let previous = block_all_signals();
    let started = std::thread::Builder::new().name(name).spawn(body);
    set_thread_mask(&previous);
    started.map(drop)
}

std::thread_local! {
    /// Whether [`wake_without_preempting`] changed this thread's policy.
    static BATCH_MADE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes the calling thread, if it runs under the ordinary policy
/// (`SCHED_OTHER`), a `SCHED_BATCH` one: woken, it waits for the CPU's
/// current task to sleep or for the scheduler's next turn (the tick)
/// instead of preempting it.
/// Threads it starts inherit the policy ([`wakes_without_preempting`]
/// says so; [`wake_as_usual`] puts it back).
pub(crate) fn wake_without_preempting() {
    if set_policy(libc::SCHED_OTHER, libc::SCHED_BATCH) {
        BATCH_MADE.set(true);
    }
}

/// Whether [`wake_without_preempting`] changed the calling thread's
/// policy, which a thread it starts inherits.
pub(crate) fn wakes_without_preempting() -> bool {
    BATCH_MADE.get()
}

/// Puts back the ordinary policy on a thread started by one that
/// [`wakes_without_preempting`].
pub(crate) fn wake_as_usual() {
    set_policy(libc::SCHED_BATCH, libc::SCHED_OTHER);
}

/// Sets the calling thread's policy to `to` if it is `from` (a nice value
/// is kept: it is not a parameter of either); whether it did.
fn set_policy(from: libc::c_int, to: libc::c_int) -> bool {
    // SAFETY: 0 names the calling thread; no memory is passed.
    if unsafe { libc::sched_getscheduler(0) } != from {
        return false;
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param the kernel reads.
    unsafe { libc::sched_setscheduler(0, to, &raw const param) == 0 }
}

/// Blocks every signal in the calling thread and returns the mask it had,
/// for [`set_thread_mask`] to put back.
pub(super) fn block_all_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigfillset initialises it.
    let all = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&raw mut set);
        set
    };
    // SAFETY: sigset_t is plain data, valid when zeroed.
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid; pthread_sigmask only changes this thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut previous) };
    previous
}

/// Sets the calling thread's signal mask to `mask`. Async-signal-safe.
pub(super) fn set_thread_mask(mask: &libc::sigset_t) {
    // SAFETY: `mask` is a valid set; pthread_sigmask only changes this thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) };
}

/// The child's own stack, with a guard page below. Kept for the calling
/// thread's next spawn: mapping one each time, faulting its pages in and
/// unmapping it cost a fifth of a bare child (measured in C, a
/// `CLONE_VM | CLONE_VFORK` child that only exits: 54-66 µs fresh, 31-40
/// µs reused). Reuse is safe because `CLONE_VFORK` returns only once the
/// child has exec'd (its memory is its own) or exited.
pub(super) struct Stack {
    base: *mut c_void,
    len: usize,
}

thread_local! {
    /// The stack of this thread's last spawn, for its next.
    static SPARE: std::cell::Cell<Option<Stack>> = const { std::cell::Cell::new(None) };
}

impl Stack {
    /// This thread's spare stack, or a new one (also when a spawn is
    /// already under way on this thread, from a signal handler).
    fn take() -> io::Result<Stack> {
        match SPARE.try_with(std::cell::Cell::take) {
            Ok(Some(stack)) => Ok(stack),
            _ => Stack::new(),
        }
    }

    /// Keeps the stack for this thread's next spawn, unless one is kept
    /// already (or the thread is ending): then it is unmapped.
    fn put_back(self) {
        let _ = SPARE.try_with(|spare| match spare.take() {
            Some(kept) => spare.set(Some(kept)),
            None => spare.set(Some(self)),
        });
    }

    fn new() -> io::Result<Stack> {
        Stack::mapped(STACK_SIZE, 0)
    }

    /// A new stack of `size` bytes above a guard page, mapped with `flags`
    /// besides the private anonymous stack mapping's (`MAP_NORESERVE`: only
    /// the pages touched are ever made). Unmapped when dropped.
    pub(super) fn mapped(size: usize, flags: c_int) -> io::Result<Stack> {
        let guard = page_size();
        let len = size + guard;
        // SAFETY: an anonymous private mapping at an address the kernel
        // picks; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | flags,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base, len };
        // SAFETY: the lowest page of the mapping just made: an overflow of
        // the child's stack faults instead of writing below it.
        if unsafe { libc::mprotect(base, guard, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    pub(super) fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, where a downward stack starts.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `mapped`, no longer used: the child
        // has exec'd or exited (a helper forked from it has its own copy).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf takes an integer only.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// The child: runs on its own stack in the caller's memory, the caller
/// suspended. Never returns: `execve` or `_exit(127)` with the errno left
/// in `Shared`.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Shared` the caller passed to clone, alive and
    // not touched by the suspended caller until this child execs or exits.
    let shared = unsafe { &mut *arg.cast::<Shared<'_, '_>>() };
    let errno = prepare_and_exec(shared);
    shared.errno.store(errno, Ordering::Release);
    // SAFETY: _exit ends this process at once, running nothing of the
    // caller's (no atexit handlers, no buffered output flushed twice).
    unsafe { libc::_exit(127) }
}

/// The child's work; returns the errno that stopped it.
fn prepare_and_exec(shared: &mut Shared<'_, '_>) -> c_int {
    reset_signal_handlers(shared.caught);
    let empty = empty_signal_set();
    // SAFETY: `empty` is a valid set; this task's mask only.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &raw const empty, std::ptr::null_mut()) };
    // Still in the caller's table: the supervisor's listener is made there
    // and its number left for the caller; then a table of this child's own
    // (a copy, what `fork` gives), where its copy of the listener is
    // closed, before any other descriptor is touched.
    if let (true, Some(Connect::Share(program))) = (shared.shares_table(), shared.plan.connect) {
        let listener = match install_shared_listener(program) {
            Ok(fd) => fd,
            Err(step) => return step.errno(),
        };
        shared.listener.store(listener, Ordering::Release);
        // SAFETY: unshare takes flags only; CLONE_FILES copies the table.
        if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
            shared.unshare_refused.store(true, Ordering::Release);
            return errno();
        }
        // SAFETY: the copy of the listener in this child's own table, which
        // nothing else here uses.
        unsafe { libc::close(listener) };
    }
    let plan = &mut *shared.plan;
    for &(from, to) in plan.redirect {
        // SAFETY: dup2 on descriptors the caller keeps open for this call;
        // the copy at `to` is not close-on-exec.
        if unsafe { libc::dup2(from, to) } < 0 {
            return errno();
        }
    }
    if let Some(dir) = plan.cwd {
        // SAFETY: `dir` is a NUL-terminated string owned by the caller.
        if unsafe { libc::chdir(dir.as_ptr()) } != 0 {
            return errno();
        }
    }
    if let Some((ruleset, filter)) = plan.confine {
        // Confined, a `Share` child installed its filter above.
        let connect = match plan.connect {
            Some(Connect::Share(_)) => Listener::Installed,
            Some(Connect::Send(program, to)) => Listener::Send(program, to, false),
            None => Listener::None,
        };
        if let Err(step) = restrict_self_raw(ruleset, 0, filter, connect) {
            return step.errno();
        }
    }
    if let Some(keep) = plan.keep_fds {
        if let Err(e) = cloexec_all_but(keep) {
            return e.raw_os_error().unwrap_or(libc::EIO);
        }
    }
    if let Some(hook) = plan.hook {
        let e = hook();
        if e != 0 {
            return e;
        }
    }
    exec_first(plan)
}

/// `execvp`'s loop over the candidates: a missing file tries the next one,
/// a file that exists but cannot be executed is remembered (`EACCES`), any
/// other error stops.
fn exec_first(plan: &mut Plan<'_>) -> c_int {
    let mut denied = false;
    let mut last = libc::ENOENT;
    for candidate in plan.candidates {
        // SAFETY: every pointer is a NUL-terminated string or the final
        // NULL of an array the caller built; execve returns only on failure.
        unsafe { libc::execve(candidate.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr()) };
        last = errno();
        if last == libc::ENOEXEC {
            if let Some(slot) = plan.shell_argv.get_mut(1) {
                *slot = candidate.as_ptr();
            }
            // SAFETY: as above; the shell's argv names the candidate.
            unsafe { libc::execve(SHELL.as_ptr(), plan.shell_argv.as_ptr(), plan.envp.as_ptr()) };
            return errno();
        }
        match last {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return last,
        }
    }
    if denied { libc::EACCES } else { last }
}

/// Every handled signal back to its default action, `SIGPIPE` too (the
/// Rust runtime ignores it; a command expects it to kill). Ignored ones stay
/// ignored, as across `execve`. Signals glibc keeps for itself (32, 33) are
/// sent only to the caller's threads, never to this task.
///
/// `caught` is which signals have a handler, asked by the caller just
/// before `clone` ([`caught_signals`]): there, in a process whose pages
/// and kernel state are warm, the 64 `sigaction`s cost a few microseconds,
/// where here, in a new process, they were a tenth of a confined child's
/// set-up (and reading `SigCgt` from `/proc/thread-self/status` instead
/// cost the caller three times the 64 calls). The race this accepts: a
/// handler another thread of the caller installs between that question and
/// the `clone` stays in the child until `execve`, and a signal sent to the
/// child in that window (its set-up, a fraction of a millisecond) would run
/// it on the caller's memory.
fn reset_signal_handlers(caught: u64) {
    for signal in 1..=libc::SIGRTMAX() {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        let handled = signal <= 64 && caught & (1 << (signal - 1)) != 0;
        if handled || signal == libc::SIGPIPE {
            // SAFETY: zeroed is SIG_DFL with no flags and an empty mask.
            let default: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: a valid struct; this task's disposition only (no
            // CLONE_SIGHAND: the caller's handlers are a copy).
            unsafe { libc::sigaction(signal, &raw const default, std::ptr::null_mut()) };
        }
    }
}

/// Whether `signal` has a handler (neither `SIG_DFL` nor `SIG_IGN`).
fn has_handler(signal: c_int) -> bool {
    // SAFETY: sigaction is plain data, valid when zeroed.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: reading the disposition into a valid struct.
    if unsafe { libc::sigaction(signal, std::ptr::null(), &raw mut old) } != 0 {
        return false;
    }
    old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN
}

/// The signals this process has a handler for, bit `n - 1` for signal `n`
/// (the handlers are the process's, whichever thread asks).
fn caught_signals() -> u64 {
    (1..=libc::SIGRTMAX().min(64))
        .filter(|&signal| signal != libc::SIGKILL && signal != libc::SIGSTOP)
        .filter(|&signal| has_handler(signal))
        .fold(0, |mask, signal| mask | 1 << (signal - 1))
}

fn empty_signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        set
    }
}

/// `waitpid(pid)`: the raw status once the child has ended (and is reaped),
/// `None` when `block` is false and it still runs. Retries on `EINTR`.
pub(crate) fn wait_pid(pid: libc::pid_t, block: bool) -> io::Result<Option<c_int>> {
    let flags = if block { 0 } else { libc::WNOHANG };
    let mut status: c_int = 0;
    loop {
        // SAFETY: `status` is a valid int for the kernel to write.
        let ret = unsafe { libc::waitpid(pid, &raw mut status, flags) };
        if ret == 0 {
            return Ok(None);
        }
        if ret > 0 {
            return Ok(Some(status));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn on_signal(_: c_int) {}

    #[test]
    fn the_caught_signals_are_the_handled_ones_not_the_ignored_ones() {
        // SAFETY: zeroed is an empty mask and no flags; the handler does nothing.
        unsafe {
            let mut handle: libc::sigaction = std::mem::zeroed();
            handle.sa_sigaction = on_signal as extern "C" fn(c_int) as libc::sighandler_t;
            libc::sigaction(libc::SIGUSR1, &raw const handle, std::ptr::null_mut());
            let mut ignore: libc::sigaction = std::mem::zeroed();
            ignore.sa_sigaction = libc::SIG_IGN;
            libc::sigaction(libc::SIGUSR2, &raw const ignore, std::ptr::null_mut());
        }
        let caught = caught_signals();
        assert_ne!(caught & 1 << (libc::SIGUSR1 - 1), 0, "{caught:#x}");
        assert_eq!(caught & 1 << (libc::SIGUSR2 - 1), 0, "{caught:#x}");
        // SIGKILL and SIGSTOP are never asked for.
        assert_eq!(caught & 1 << (libc::SIGKILL - 1), 0);
        assert_eq!(caught & 1 << (libc::SIGSTOP - 1), 0);
    }
}
