//! Directories made and opened beneath a directory descriptor, never
//! through a symlink: for what the sandbox itself creates, unconfined, in a
//! place a confined command may also write (a granted temp root).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Opens the directory `name` beneath `parent` (or the current directory,
/// for an absolute `name`, when `parent` is `None`), refusing a symlink in
/// the last component (`O_NOFOLLOW`).
pub(crate) fn open_dir(parent: Option<BorrowedFd<'_>>, name: &CStr) -> io::Result<OwnedFd> {
    let at = parent.map_or(libc::AT_FDCWD, |fd| fd.as_raw_fd());
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `name` is NUL-terminated and outlives the call; `at` is a
    // descriptor the caller borrows for the call, or AT_FDCWD.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes the directory `name` beneath `parent` with `mode` (less the
/// umask); `EEXIST` is returned as an error for the caller to judge.
pub(crate) fn make_dir(parent: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and outlives the call; `parent` is a
    // valid descriptor for the duration of the call.
    let ret = unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), mode) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
