//! Raw system calls: the crate's only `unsafe` code, one file per kernel
//! interface (Landlock, seccomp, confining, audit netlink,
//! processes). Everything here is a thin wrapper over one syscall; the
//! crate root denies `unsafe_code` everywhere else.

mod audit;
mod confine;
mod fds;
mod fs;
mod landlock;
mod notify;
mod process;
mod seccomp;

pub(crate) use audit::*;
pub(crate) use confine::*;
pub(crate) use fds::*;
pub(crate) use fs::*;
pub(crate) use landlock::*;
pub(crate) use notify::*;
pub(crate) use process::*;
