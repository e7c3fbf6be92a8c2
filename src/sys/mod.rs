//! Raw system calls: the crate's only `unsafe` code, one file per kernel
//! interface (Landlock, seccomp, confining, audit netlink, signals,
//! processes). Everything here is a thin wrapper over one syscall; the
//! crate root denies `unsafe_code` everywhere else.

mod audit;
mod confine;
mod inet;
mod landlock;
mod netlink;
mod notify;
mod process;
mod seccomp;
mod signal;

pub(crate) use audit::*;
pub(crate) use confine::*;
pub(crate) use inet::*;
pub(crate) use landlock::*;
pub(crate) use netlink::*;
pub(crate) use notify::*;
pub(crate) use process::*;
pub(crate) use signal::*;
