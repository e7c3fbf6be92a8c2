//! Raw system calls: the crate's only `unsafe` code, one file per kernel
//! interface (Landlock, seccomp, confining, signals, processes, ptrace). Everything here is a thin wrapper over one syscall; the
//! crate root denies `unsafe_code` everywhere else.

mod confine;
mod landlock;
mod process;
mod ptrace;
mod seccomp;
mod signal;

pub(crate) use confine::*;
pub(crate) use landlock::*;
pub(crate) use process::*;
pub(crate) use ptrace::*;
pub(crate) use signal::*;
