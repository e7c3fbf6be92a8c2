//! Raw Landlock and prctl system calls: the crate's only `unsafe` code.
//!
//! Everything here is a thin wrapper over one syscall. The functions used
//! between `fork` and `exec` ([`confine_before_exec`]) call nothing but
//! `prctl` and `landlock_restrict_self`, both async-signal-safe, and build
//! their error from the raw errno without allocating.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;

/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;

/// `LANDLOCK_RESTRICT_SELF_TSYNC` (ABI 8): restrict every thread of the process.
pub(crate) const RESTRICT_SELF_TSYNC: u32 = 1 << 3;

/// Asks the kernel for its Landlock ABI version.
///
/// Returns the version, or the errno the kernel (or a seccomp filter in
/// front of it) answered with.
pub(crate) fn landlock_abi_version() -> Result<i64, i32> {
    // SAFETY: with a NULL attribute pointer and size 0 the kernel reads no
    // memory; the VERSION flag only makes it return a number.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(ret)
    }
}

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

/// Enforces the ruleset `fd` on the calling thread (every thread with
/// [`RESTRICT_SELF_TSYNC`]), after setting `no_new_privs`.
pub(crate) fn restrict_self(fd: &OwnedFd, flags: u32) -> io::Result<()> {
    set_no_new_privs()?;
    // SAFETY: the fd is a live ruleset descriptor borrowed for the call; the
    // kernel takes a reference of its own and reads no user memory.
    let ret = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), flags) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Arranges for `cmd`'s child to enforce the ruleset `fd` on itself between
/// `fork` and `exec`. The parent stays unconfined.
pub(crate) fn confine_before_exec(cmd: &mut Command, fd: Arc<OwnedFd>) {
    let hook = move || restrict_self(&fd, 0);
    // SAFETY: the hook runs in the forked child and only performs two
    // async-signal-safe syscalls (prctl, landlock_restrict_self) on a
    // descriptor opened by the parent; io::Error::last_os_error does not
    // allocate. Nothing else from the parent's state is touched.
    unsafe {
        cmd.pre_exec(hook);
    }
}
