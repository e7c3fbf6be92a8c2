//! A project's git directories: finding them through `.git` and
//! `commondir` pointer files, and telling a git directory from anything else.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::PolicyError;
use crate::root::{Origin, Root};

/// The parts of a linked worktree's common git directory that git writes
/// from the worktree (measured with strace on `commit`, `fetch`, `stash`,
/// `rebase`, `branch`): objects, refs and their logs. The rest (`hooks/`,
/// `config`, `info/`) belongs to the main repository and runs there, so
/// it stays read-only. The worktree's own directory (`worktrees/<name>`)
/// is its gitdir, granted whole.
pub(crate) const COMMON_DIR_PARTS: [&str; 3] = ["objects", "refs", "logs"];

/// Granted as well when the common directory has it: the reftable ref
/// store (`git init --ref-format=reftable`, git 2.45), which keeps its lock
/// files inside it, so a worktree can delete refs there too.
pub(crate) const COMMON_DIR_REFTABLE: &str = "reftable";

/// The git directories a project needs when they live outside it.
pub(crate) fn git_dirs(project_root: &Path) -> Result<Vec<Root>, PolicyError> {
    let dotgit = project_root.join(".git");
    let meta = match std::fs::symlink_metadata(&dotgit) {
        Ok(meta) => meta,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            return Ok(Vec::new());
        }
        Err(source) => {
            return Err(PolicyError::Io {
                path: dotgit,
                source,
            });
        }
    };
    let origin = Origin::Git {
        pointer: dotgit.clone(),
    };
    if meta.file_type().is_symlink() {
        // Listed as is: the kernel follows it when the rule is anchored, and
        // Policy checks that it leads to a git directory.
        return Ok(vec![Root::new(dotgit, origin)]);
    }
    if meta.is_dir() {
        return Ok(Vec::new()); // inside the project already
    }
    if !meta.is_file() {
        // A fifo, socket or device: opening or reading it could block.
        return Err(PolicyError::GitFile {
            path: dotgit,
            reason: "not a regular file".into(),
        });
    }
    let bytes = read_pointer_file(&dotgit)
        .map_err(|source| PolicyError::Io {
            path: dotgit.clone(),
            source,
        })?
        .map_err(|reason| PolicyError::GitFile {
            path: dotgit.clone(),
            reason,
        })?;
    let gitdir = project_root.join(parse_git_pointer(&bytes, "gitdir: ").map_err(|reason| {
        PolicyError::GitFile {
            path: dotgit.clone(),
            reason,
        }
    })?);
    let mut out = vec![Root::new(gitdir.clone(), origin)];
    let commondir_file = gitdir.join("commondir");
    match read_pointer_file(&commondir_file) {
        Ok(Err(reason)) => {
            return Err(PolicyError::GitFile {
                path: commondir_file,
                reason,
            });
        }
        Ok(Ok(bytes)) => {
            let common = parse_git_pointer(&bytes, "").map_err(|reason| PolicyError::GitFile {
                path: commondir_file.clone(),
                reason,
            })?;
            let common = gitdir.join(common);
            let origin = Origin::Git {
                pointer: commondir_file,
            };
            if is_git_dir(&common) {
                out.extend(
                    COMMON_DIR_PARTS
                        .iter()
                        .map(|part| Root::new(common.join(part), origin.clone())),
                );
                let reftable = common.join(COMMON_DIR_REFTABLE);
                if reftable.is_dir() {
                    out.push(Root::new(reftable, origin));
                }
            } else {
                // Listed whole so that Policy skips it and says why.
                out.push(Root::new(common, origin));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // ENOTDIR: the gitdir is missing or a file; Policy reports it.
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {}
        Err(source) => {
            return Err(PolicyError::Io {
                path: commondir_file,
                source,
            });
        }
    }
    Ok(out)
}

/// Whether `dir` has the layout of a git directory: `HEAD` and either
/// `objects/` (a repository) or `commondir` (a linked worktree's gitdir).
/// A pointer the project holds is followed only to one of these.
pub(crate) fn is_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file() && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
}

/// The most a pointer file may hold: git writes one short line.
const MAX_POINTER_FILE: u64 = 64 * 1024;

/// Reads a pointer file git wrote (`.git`, `commondir`), refusing, with
/// the reason, anything that is not a small regular file: reading a fifo
/// would wait forever for a writer, and `/dev/zero` would never end.
pub(crate) fn read_pointer_file(path: &Path) -> io::Result<Result<Vec<u8>, String>> {
    // O_NONBLOCK: opening a fifo must not wait for a writer either.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(Err("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_POINTER_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_POINTER_FILE {
        return Ok(Err(format!(
            "over {MAX_POINTER_FILE} bytes: not a pointer file git wrote"
        )));
    }
    Ok(Ok(bytes))
}

/// Parses the one-line pointer files git writes: `.git` files
/// (`gitdir: <path>`) and `commondir` (`<path>`). The path may be relative,
/// to the directory holding the file; joining keeps an absolute one as is.
pub(crate) fn parse_git_pointer(bytes: &[u8], prefix: &str) -> Result<PathBuf, String> {
    // git strips trailing whitespace, including a CRLF written on Windows.
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let line = &bytes[..end];
    let Some(path) = line.strip_prefix(prefix.as_bytes()) else {
        return Err(format!("expected a line `{prefix}<path>`"));
    };
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path.iter().any(|b| *b == b'\n' || *b == b'\r' || *b == 0) {
        return Err("expected a single line holding a path".into());
    }
    Ok(PathBuf::from(OsStr::from_bytes(path)))
}

/// The git directories of `project` the tripwire watches: where its `.git` leads, then a
/// worktree's common directory. A `.git` that cannot be read or parsed
/// leads nowhere; the `.git` entry itself is watched regardless.
pub(crate) fn watched_git_dirs(project: &Path) -> Vec<PathBuf> {
    let dotgit = project.join(".git");
    let Ok(meta) = fs::symlink_metadata(&dotgit) else {
        return Vec::new();
    };
    let gitdir = if meta.is_file() {
        match read_pointer_file(&dotgit) {
            Ok(Ok(bytes)) => match parse_git_pointer(&bytes, "gitdir: ") {
                Ok(p) => canonical(project.join(p)),
                Err(_) => return Vec::new(),
            },
            _ => return Vec::new(),
        }
    } else {
        dotgit
    };
    let mut dirs = vec![gitdir.clone()];
    if let Ok(Ok(bytes)) = read_pointer_file(&gitdir.join("commondir")) {
        if let Ok(common) = parse_git_pointer(&bytes, "") {
            dirs.push(canonical(gitdir.join(common)));
        }
    }
    dirs
}

/// `path` with symlinks and `..` resolved, as git resolves a pointer, so a
/// report names `/src/app/.git/hooks`, not `…/worktrees/x/../../hooks`.
fn canonical(path: PathBuf) -> PathBuf {
    fs::canonicalize(&path).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_pointer_parsing() {
        assert_eq!(
            parse_git_pointer(b"gitdir: /a/b\n", "gitdir: "),
            Ok("/a/b".into())
        );
        assert_eq!(
            parse_git_pointer(b"gitdir: ../x\r\n", "gitdir: "),
            Ok("../x".into())
        );
        assert_eq!(parse_git_pointer(b"../..\n", ""), Ok("../..".into()));
        assert!(parse_git_pointer(b"", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"gitdir: \n", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"\x7fELF\x00\x01", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"gitdir: /a\n/b", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"", "").is_err());
        // Non-UTF-8 paths are paths.
        assert_eq!(
            parse_git_pointer(b"gitdir: /a/\xff", "gitdir: "),
            Ok(PathBuf::from(OsStr::from_bytes(b"/a/\xff")))
        );
    }
}
