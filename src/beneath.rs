//! Writes the sandbox itself makes, unconfined: beneath a directory
//! descriptor, through no symlink.
//!
//! The places the sandbox writes before confining a command (the caches it
//! makes, its stamp file, a per-session directory) lie in or under granted
//! roots, where an earlier confined command could have left a symlink. A
//! plain `create(true)` would follow it and make the unconfined sandbox the
//! writer of whatever it points to. Everything here opens a trusted anchor
//! (the home directory or `/`, which no confined command can change), then
//! resolves the rest with `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)`,
//! or, where a filter refuses `openat2`, one `openat(O_NOFOLLOW)` a
//! component; and creates the last name with `mkdirat` or
//! `openat(O_CREAT | O_EXCL | O_NOFOLLOW)`, which never follow a symlink.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use crate::sys;

/// A directory opened through no symlink below its anchor.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_encoded_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// A single plain name: no `/`, not `.` or `..`, not empty.
fn plain_name(name: &OsStr) -> io::Result<CString> {
    let bytes = name.as_encoded_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    c_name(name)
}

impl Dir {
    /// Opens `anchor`, following symlinks as any program would: the caller
    /// trusts it (the home directory, `/`) because no confined command can
    /// change it.
    pub(crate) fn anchor(anchor: &Path) -> io::Result<Dir> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(anchor)?;
        Ok(Dir {
            fd: OwnedFd::from(file),
        })
    }

    /// The directory `rel` beneath this one, through no symlink and no
    /// `..`: `ELOOP` when a component is a symlink, `ENOTDIR` when one is
    /// not a directory, `EXDEV` or `EINVAL` for a way out.
    pub(crate) fn dir(&self, rel: &Path) -> io::Result<Dir> {
        if rel.as_os_str().is_empty() {
            let fd = self.fd.try_clone()?;
            return Ok(Dir { fd });
        }
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        let c = c_name(rel.as_os_str())?;
        match sys::openat2(
            Some(self.fd.as_fd()),
            &c,
            libc::O_PATH | libc::O_DIRECTORY,
            0,
            sys::RESOLVE_NO_SYMLINKS | sys::RESOLVE_BENEATH,
        ) {
            Ok(fd) => Ok(Dir { fd }),
            Err(e) if refused_openat2(&e) => self.walk(rel),
            Err(e) => Err(e),
        }
    }

    /// [`Dir::dir`] one `openat(O_NOFOLLOW)` a component, where `openat2`
    /// is refused.
    fn walk(&self, rel: &Path) -> io::Result<Dir> {
        let mut fd = self.fd.try_clone()?;
        for component in rel.components() {
            let Component::Normal(name) = component else {
                continue;
            };
            let c = plain_name(name)?;
            let next = sys::openat(
                fd.as_fd(),
                &c,
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY,
                0,
            )?;
            fd = next;
        }
        Ok(Dir { fd })
    }

    /// Makes the directory `name` here, never through a symlink: `true`
    /// when made, `false` when a directory (not a symlink to one) is
    /// already there; an error for anything else at that name.
    pub(crate) fn make_dir(&self, name: &OsStr, mode: libc::mode_t) -> io::Result<bool> {
        let c = plain_name(name)?;
        match sys::mkdirat(self.fd.as_fd(), &c, mode) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                sys::openat(
                    self.fd.as_fd(),
                    &c,
                    libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY,
                    0,
                )?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Opens the directory `name` here, making it first when it is not
    /// there, through no symlink: [`Dir::make_dir`] and [`Dir::dir`] in one
    /// `openat(O_NOFOLLOW)` when it exists (the usual case), with a
    /// `mkdirat` and a second `openat` when it does not.
    ///
    /// # Errors
    ///
    /// The OS error of `mkdirat` other than `EEXIST`, or of the `openat`
    /// (`ELOOP`/`ENOTDIR` for a symlink or a file at the name).
    pub(crate) fn make_open_dir(&self, name: &OsStr, mode: libc::mode_t) -> io::Result<Dir> {
        let c = plain_name(name)?;
        let open = || {
            sys::openat(
                self.fd.as_fd(),
                &c,
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY,
                0,
            )
        };
        match open() {
            Ok(fd) => return Ok(Dir { fd }),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
        match sys::mkdirat(self.fd.as_fd(), &c, mode) {
            Ok(()) => {}
            // Made by someone else in between: opened (and checked) below.
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(e),
        }
        Ok(Dir { fd: open()? })
    }

    /// The owner and mode of this directory, from its descriptor.
    ///
    /// # Errors
    ///
    /// The OS error of `fstat`.
    pub(crate) fn owner(&self) -> io::Result<(libc::uid_t, libc::mode_t)> {
        sys::fstat_owner(self.fd.as_fd())
    }

    /// Removes the empty directory `name` here, never through a symlink.
    pub(crate) fn remove_empty_dir(&self, name: &OsStr) -> io::Result<()> {
        sys::rmdirat(self.fd.as_fd(), &plain_name(name)?)
    }

    /// Creates the regular file `name` here when nothing is at that name
    /// (`O_CREAT | O_EXCL`, which never follows a symlink): `true` when
    /// made, `false` when something was already there.
    pub(crate) fn make_file(&self, name: &OsStr, mode: libc::mode_t) -> io::Result<bool> {
        let c = plain_name(name)?;
        match sys::openat(
            self.fd.as_fd(),
            &c,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            mode,
        ) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Opens the regular file `name` here for writing, creating it when
    /// missing, never through a symlink (`O_NOFOLLOW`: `ELOOP`) and never
    /// a fifo or device (`O_NONBLOCK`, then checked).
    pub(crate) fn write_file(&self, name: &OsStr, mode: libc::mode_t) -> io::Result<File> {
        let c = plain_name(name)?;
        let fd = sys::openat(
            self.fd.as_fd(),
            &c,
            libc::O_WRONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NONBLOCK,
            mode,
        )?;
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(file)
    }
}

/// Whether `openat2` itself is missing or filtered, rather than answering
/// about the path: then the component walk answers instead.
fn refused_openat2(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EPERM | libc::E2BIG)
    )
}

/// The trusted anchor for `path` and the rest of it: the home directory
/// when `path` is beneath it (no confined command can change the home
/// directory's own entry), `/` otherwise.
pub(crate) fn split_at_anchor<'a>(path: &'a Path, home: Option<&'a Path>) -> (&'a Path, &'a Path) {
    if let Some(home) = home {
        if let Ok(rest) = path.strip_prefix(home) {
            return (home, rest);
        }
    }
    let rest = path.strip_prefix("/").unwrap_or(path);
    (Path::new("/"), rest)
}

/// Opens the directory `path` through no symlink below its anchor (see
/// [`split_at_anchor`]).
pub(crate) fn open_dir(path: &Path, home: Option<&Path>) -> io::Result<Dir> {
    let (anchor, rest) = split_at_anchor(path, home);
    Dir::anchor(anchor)?.dir(rest)
}

/// Makes the directory `path` (its parent must exist), through no symlink
/// below its anchor: `true` when made.
pub(crate) fn make_dir(path: &Path, home: Option<&Path>) -> io::Result<bool> {
    let (parent, name) = parent_and_name(path)?;
    open_dir(parent, home)?.make_dir(name, 0o777)
}

/// Makes the empty regular file `path` when nothing is there, through no
/// symlink below its anchor: `true` when made.
pub(crate) fn make_file(path: &Path, home: Option<&Path>) -> io::Result<bool> {
    let (parent, name) = parent_and_name(path)?;
    open_dir(parent, home)?.make_file(name, 0o666)
}

fn parent_and_name(path: &Path) -> io::Result<(&Path, &OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_made_through_a_symlink() {
        let (_dir, base) = crate::testing::tree(&["target", "real"]);
        let target = base.join("target");
        std::os::unix::fs::symlink(&target, base.join("real/link")).expect("symlink");
        std::os::unix::fs::symlink(&target, base.join("linkdir")).expect("symlink");
        // A symlink at the name: mkdirat answers EEXIST and it is no directory.
        assert!(make_dir(&base.join("real/link"), Some(&base)).is_err());
        // A symlink on the way: ELOOP, nothing made in the target.
        let through = make_dir(&base.join("linkdir/made"), Some(&base));
        assert_eq!(
            through.map_err(|e| e.raw_os_error()),
            Err(Some(libc::ELOOP))
        );
        assert!(make_file(&base.join("linkdir/stamp"), Some(&base)).is_err());
        assert!(
            std::fs::read_dir(&target)
                .expect("readable")
                .next()
                .is_none()
        );
        // A symlink at the file's name: O_EXCL and O_NOFOLLOW refuse it.
        std::os::unix::fs::symlink(target.join("victim"), base.join("real/stamp")).expect("ln");
        assert!(
            open_dir(&base.join("real"), Some(&base))
                .and_then(|d| d.write_file("stamp".as_ref(), 0o666))
                .is_err()
        );
        assert!(!target.join("victim").exists());
        // The granted half: plain directories and files are made.
        assert_eq!(
            make_dir(&base.join("real/new"), Some(&base)).ok(),
            Some(true)
        );
        assert_eq!(
            make_dir(&base.join("real/new"), Some(&base)).ok(),
            Some(false)
        );
        assert_eq!(
            make_file(&base.join("real/new/f"), Some(&base)).ok(),
            Some(true)
        );
        assert!(base.join("real/new/f").is_file());
        assert!(
            open_dir(&base.join("real"), Some(&base))
                .and_then(|d| d.write_file("plain".as_ref(), 0o666))
                .is_ok()
        );
    }
}
