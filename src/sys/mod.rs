//! Raw system calls: the crate's only `unsafe` code, one file per kernel
//! interface (Landlock, seccomp, confining, descriptors, the file system,
//! processes, ptrace). Everything here is a thin wrapper over one syscall; the
//! crate root denies `unsafe_code` everywhere else.

mod confine;
mod fds;
mod fs;
mod helper;
mod inet_diag;
mod landlock;
mod netlink;
mod notify;
mod process;
mod ptrace;
mod seccomp;
mod spawn;

pub(crate) use confine::*;
pub(crate) use fds::*;
pub(crate) use fs::*;
pub(crate) use helper::fork_helper;
pub(crate) use inet_diag::*;
pub(crate) use landlock::*;
pub(crate) use netlink::*;
pub(crate) use notify::*;
pub(crate) use process::*;
pub(crate) use ptrace::*;
pub(crate) use spawn::{
    Connect, Plan, SHELL, kill_and_reap, shares_tables, spawn, spawn_unsignalled, wait_pid,
    wake_as_usual, wake_without_preempting, wakes_without_preempting,
};

/// The errno of the last failed call, `EIO` if there is none.
fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
