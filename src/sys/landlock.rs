//! Landlock's three system calls and the `openat2` that opens a root.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

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

/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_path_beneath_attr`, packed as in `<linux/landlock.h>`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Adds a rule to `ruleset`: `access` beneath the inode `parent` is open on.
pub(crate) fn add_path_beneath_rule(
    ruleset: &OwnedFd,
    parent: &OwnedFd,
    access: u64,
) -> io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `attr` is a valid landlock_path_beneath_attr that outlives the
    // call (the kernel copies it); both descriptors are live and borrowed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &raw const attr,
            0u32,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens `path` with `O_PATH`, refusing every symlink on the way
/// (`openat2` with `RESOLVE_NO_SYMLINKS`, Linux 5.6): success means the
/// kernel resolved the path through no symlink at all. `ELOOP` says one
/// was met; `ENOSYS` or a seccomp filter's errno says the call is missing.
pub(crate) fn open_path_without_symlinks(path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    open_path_without_symlinks_at(None, path)
}

/// [`open_path_without_symlinks`] of `path` relative to the directory
/// `dir` (`None`: the working directory; an absolute path ignores it),
/// through no symlink from there: a root whose parent is already open
/// walks one name instead of its whole path.
pub(crate) fn open_path_without_symlinks_at(
    dir: Option<BorrowedFd<'_>>,
    path: &std::ffi::CStr,
) -> io::Result<OwnedFd> {
    // SAFETY: open_how is plain data (non-exhaustive in libc, so built from
    // zeroes): all-zero is no flags, no mode, no resolve restriction.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: `path` is a NUL-terminated string and `how` a valid open_how
    // of the size passed; both outlive the call, which copies them; `dir`
    // is a live descriptor borrowed for the call, or AT_FDCWD.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd()),
            path.as_ptr(),
            &raw const how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(ret).map_err(io::Error::other)?;
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}
