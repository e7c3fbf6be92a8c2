//! Installing a classic-BPF seccomp filter.

use std::io;

use crate::terminal::SockFilter;

/// `SECCOMP_SET_MODE_FILTER` of `<linux/seccomp.h>`.
const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;

/// `SECCOMP_FILTER_FLAG_TSYNC`: install the filter on every thread.
const SECCOMP_FILTER_FLAG_TSYNC: libc::c_uint = 1 << 0;

/// `struct sock_fprog` of `<linux/filter.h>`.
#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const SockFilter,
}

/// Installs `program` as a seccomp filter on the calling thread, or on
/// every thread with `all_threads`. Needs `no_new_privs` (or
/// `CAP_SYS_ADMIN`); a filter, once installed, stays for good.
pub(crate) fn install_seccomp_filter(program: &[SockFilter], all_threads: bool) -> io::Result<()> {
    let Ok(len) = libc::c_ushort::try_from(program.len()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let prog = SockFprog {
        len,
        filter: program.as_ptr(),
    };
    let flags = if all_threads {
        SECCOMP_FILTER_FLAG_TSYNC
    } else {
        0
    };
    // SAFETY: `prog` points at `len` initialised instructions that outlive
    // the call; the kernel copies the program and keeps no pointer to it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            flags,
            &raw const prog,
        )
    };
    match ret {
        0 => Ok(()),
        // With TSYNC, a positive answer is the id of a thread that could
        // not take the filter (it has a diverging one of its own).
        n if n > 0 => Err(io::Error::from_raw_os_error(libc::ESRCH)),
        _ => Err(io::Error::last_os_error()),
    }
}
