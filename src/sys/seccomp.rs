//! Installing a classic-BPF seccomp filter.

use std::io;

use crate::terminal::SockFilter;

/// Installs `program` as a seccomp filter on the calling thread, or on
/// every thread with `all_threads`. Needs `no_new_privs` (or
/// `CAP_SYS_ADMIN`); a filter, once installed, stays for good.
pub(crate) fn install_seccomp_filter(program: &[SockFilter], all_threads: bool) -> io::Result<()> {
    let Ok(len) = libc::c_ushort::try_from(program.len()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SockFilter is `struct sock_filter`, field for field (repr(C)); the
    // kernel only reads through the pointer.
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut().cast(),
    };
    let flags = if all_threads {
        libc::SECCOMP_FILTER_FLAG_TSYNC
    } else {
        0
    };
    // SAFETY: `prog` points at `len` initialised instructions that outlive
    // the call; the kernel copies the program and keeps no pointer to it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
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
