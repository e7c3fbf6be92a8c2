//! Opening, making and reading names beneath a directory descriptor:
//! `openat`, `openat2`, `mkdirat`, `readlinkat`. What the sandbox writes
//! unconfined goes through these, so that no symlink a confined command
//! planted can redirect it.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `struct open_how` from `<linux/openat2.h>`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `RESOLVE_NO_SYMLINKS`: fail with `ELOOP` on any symlink on the way.
pub(crate) const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// `RESOLVE_BENEATH`: fail with `EXDEV` on any escape above the directory
/// (`..` past it, an absolute path).
pub(crate) const RESOLVE_BENEATH: u64 = 0x08;

/// The descriptor a successful open returned.
fn owned(ret: libc::c_long) -> io::Result<OwnedFd> {
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(ret).map_err(io::Error::other)?;
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat2(dir, name, {flags, mode, resolve})` (Linux 5.6); `dir` `None`
/// is the current directory. `ENOSYS` (or a seccomp filter's errno) says
/// the call is missing: the caller then walks with [`openat`].
pub(crate) fn openat2(
    dir: Option<BorrowedFd<'_>>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        // Open flags are non-negative bits.
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: u64::from(mode),
        resolve,
    };
    let dir = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `name` is NUL-terminated and `how` a valid open_how of the
    // size passed; both outlive the call, which copies them. `dir` is a
    // live descriptor borrowed for the call, or AT_FDCWD.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            name.as_ptr(),
            &raw const how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    owned(ret)
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`.
pub(crate) fn openat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is a
    // live descriptor borrowed for it.
    let ret = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    };
    owned(libc::c_long::from(ret))
}

/// `mkdirat(dir, name, mode)`: makes a directory entry, never following a
/// symlink at `name` (an existing one answers `EEXIST`).
pub(crate) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is a
    // live descriptor borrowed for it.
    let ret = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `unlinkat(dir, name, AT_REMOVEDIR)`: removes the empty directory
/// `name` (a symlink there answers `ENOTDIR`; a directory with entries,
/// `ENOTEMPTY`).
pub(crate) fn rmdirat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is a
    // live descriptor borrowed for it.
    let ret = unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What `fstat` says of an open descriptor: its mode, device and inode.
/// `fstat` rather than std's `statx` with an empty path, which the kernel
/// must first copy in and look up: a root costs one cheaper call.
pub(crate) fn fstat_id(fd: BorrowedFd<'_>) -> io::Result<(libc::mode_t, u64, u64)> {
    // SAFETY: stat is plain data, valid when zeroed.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is a live descriptor borrowed for the call; `st` is a
    // valid stat the kernel writes into.
    if unsafe { libc::fstat(fd.as_raw_fd(), &raw mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.st_mode, st.st_dev, st.st_ino))
}

/// The owner and mode `fstat` gives an open descriptor (an `O_PATH` one
/// too), without duplicating it as std's `File::metadata` would need.
pub(crate) fn fstat_owner(fd: BorrowedFd<'_>) -> io::Result<(libc::uid_t, libc::mode_t)> {
    // SAFETY: stat is plain data, valid when zeroed.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is a live descriptor borrowed for the call; `st` is a
    // valid stat the kernel writes into.
    if unsafe { libc::fstat(fd.as_raw_fd(), &raw mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.st_uid, st.st_mode))
}

/// Whether the directory at `path` is on a tmpfs of at least `bytes`
/// (`statfs`); `false` when it cannot be asked.
pub(crate) fn on_tmpfs_of_at_least(path: &CStr, bytes: u64) -> bool {
    // SAFETY: statfs is plain data, valid when zeroed.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and outlives the call; `st` is a
    // valid statfs the kernel writes into.
    if unsafe { libc::statfs(path.as_ptr(), &raw mut st) } != 0 || st.f_type != libc::TMPFS_MAGIC {
        return false;
    }
    // Wider than either field on every target (32-bit ones included).
    let size = u128::from(st.f_blocks) * i128::from(st.f_bsize).unsigned_abs();
    size >= u128::from(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tmpfs_is_told_from_other_file_systems_and_by_its_size() {
        // procfs is never a tmpfs, whatever its size.
        assert!(!on_tmpfs_of_at_least(c"/proc", 0));
        assert!(!on_tmpfs_of_at_least(c"/no/such/directory", 0));
        // /dev/shm, where /proc/self/mounts says it is a tmpfs: big enough
        // for a byte, never for 2^64 - 1.
        let mounts = std::fs::read_to_string("/proc/self/mounts").expect("/proc/self/mounts");
        let shm_is_tmpfs = mounts
            .lines()
            .filter_map(|l| {
                let mut fields = l.split(' ');
                Some((fields.nth(1)?, fields.next()?))
            })
            .rfind(|(at, _)| *at == "/dev/shm")
            .is_some_and(|(_, fs)| fs == "tmpfs");
        assert_eq!(on_tmpfs_of_at_least(c"/dev/shm", 1), shm_is_tmpfs);
        assert!(!on_tmpfs_of_at_least(c"/dev/shm", u64::MAX));
    }
}
