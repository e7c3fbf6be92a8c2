//! Answering, before a command runs, whether a write to a path would land.

use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::ExplainError;
use crate::report::{Granted, Report, Skipped};
use crate::root::RootKind;

/// The kernel's limit on symlinks followed while resolving one path
/// (`MAXSYMLINKS`); past it, `open(2)` fails with `ELOOP`.
const MAX_SYMLINKS: usize = 40;

/// `PATH_MAX`, counting the terminating NUL.
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// What a write to one path would meet under a policy: the answer of
/// [`Report::explain`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Explanation {
    /// The path as asked.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub path: PathBuf,
    /// The inode the kernel checks, by its resolved name (symlinks followed,
    /// `..` taken): the file or directory `path` names when it exists;
    /// otherwise the nearest existing directory on the way, in which the
    /// first missing piece would be created.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub checked: PathBuf,
    /// Whether `path` exists. When it does not, `checked` is the directory
    /// the write would create something in.
    pub exists: bool,
    /// Writable or not, and why.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub verdict: Verdict,
}

/// Whether a write is allowed: there is no third answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Verdict {
    /// The write lands: this root covers [`Explanation::checked`] (the
    /// nearest one, when several do).
    #[cfg_attr(feature = "serde", serde(rename = "granted_by"))]
    Granted(Granted),
    /// No granted root covers [`Explanation::checked`]; the kernel refuses
    /// the write with `EACCES` (`EXDEV` for a rename or link).
    #[cfg_attr(feature = "serde", serde(rename = "denied"))]
    Denied {
        /// The smallest root that would make the write land, to pass as
        /// `--allow`: [`Explanation::checked`] itself. It is a file root
        /// (write and truncate only) when it names a file: a tool that
        /// replaces the file by renaming a new one over it needs the
        /// directory instead.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
        allow: PathBuf,
        /// Roots the policy lists above the path that grant nothing,
        /// with the reason (typically one that did not exist yet when the
        /// policy was applied).
        skipped: Vec<Skipped>,
    },
}

impl Explanation {
    /// Whether the write lands.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::Policy;
    /// let report = Policy { writable: vec!["/tmp".into()], ..Policy::default() }.check()?;
    /// assert!(report.explain("/tmp/new-file".as_ref())?.is_granted());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn is_granted(&self) -> bool {
        matches!(self.verdict, Verdict::Granted(_))
    }
}

// Answering lives beside the answer, so that the report does not depend
// on it: `Report` is defined in report.rs, which explain.rs reads.
impl Report {
    /// Answers whether a write to `path` lands under this policy, and by
    /// which root, or, when no root grants it, the smallest root that
    /// would (`--allow`).
    ///
    /// The answer follows what the kernel does at the moment of the write,
    /// not string prefixes: `path` is resolved now, symlinks followed
    /// (also a dangling one at the end, which `open(O_CREAT)` follows to
    /// create its target) and `..` taken on the resolved directory; when
    /// it does not exist, its nearest existing directory is what the
    /// kernel checks, because that is where the first missing piece would
    /// be created. The resolved inode and its ancestors are then compared,
    /// by device and inode number, with the roots opened when this report
    /// was made: the same membership the kernel decided at apply. A file
    /// root (a lock file, `/dev/null`) grants writes to that very inode
    /// only, never to its siblings.
    ///
    /// What it does not model: rename and link between two places need
    /// both to be writable, so ask for both; a hard link made inside a
    /// root *before* the policy was applied is writable through that name
    /// even if the inode is also reachable from outside (Landlock checks
    /// names, not inodes); file metadata (`chmod`, `chown`, timestamps,
    /// extended attributes) is not confined at all. Magic links in `/proc`
    /// are followed by their text, so an anonymous target (`pipe:[…]`)
    /// is explained as a missing name.
    ///
    /// # Errors
    ///
    /// [`ExplainError::EmptyPath`] and [`ExplainError::RelativePath`] for
    /// a path that is not absolute; [`ExplainError::Resolve`] when the
    /// path cannot be resolved (`ELOOP`, `ENOTDIR`, `ENAMETOOLONG`,
    /// `EACCES`), which a write would fail with too.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{Policy, explain::Verdict};
    ///
    /// let project = tempfile::tempdir()?;
    /// let report = Policy { writable: vec![project.path().to_path_buf().into()], ..Policy::default() }.check()?;
    ///
    /// let inside = report.explain(&project.path().join("src/../new.rs"))?;
    /// assert!(inside.is_granted());
    ///
    /// let outside = report.explain("/etc/passwd".as_ref())?;
    /// match outside.verdict {
    ///     Verdict::Denied { allow, .. } => assert_eq!(allow, std::path::Path::new("/etc/passwd")),
    ///     Verdict::Granted(root) => panic!("granted by {}", root.path.display()),
    ///     _ => unreachable!(),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn explain(&self, path: &Path) -> Result<Explanation, ExplainError> {
        explain(self, path)
    }
}

/// [`Report::explain`]: the answer for `path` under `report`.
pub(crate) fn explain(report: &Report, path: &Path) -> Result<Explanation, ExplainError> {
    if path.as_os_str().is_empty() {
        return Err(ExplainError::EmptyPath);
    }
    if !path.is_absolute() {
        return Err(ExplainError::RelativePath {
            path: path.to_path_buf(),
        });
    }
    // The kernel refuses a path string of PATH_MAX bytes or more before
    // resolving anything, however many `.` it holds.
    if path.as_os_str().len() >= PATH_MAX {
        return Err(ExplainError::Resolve {
            path: path.to_path_buf(),
            at: path.to_path_buf(),
            source: io::Error::from_raw_os_error(libc::ENAMETOOLONG),
        });
    }
    let resolved = resolve(path).map_err(|(at, source)| ExplainError::Resolve {
        path: path.to_path_buf(),
        at,
        source,
    })?;
    let granted =
        covering_root(report, &resolved).map_err(|(at, source)| ExplainError::Resolve {
            path: path.to_path_buf(),
            at,
            source,
        })?;
    let verdict = match granted {
        Some(root) => Verdict::Granted(root.clone()),
        None => Verdict::Denied {
            allow: resolved.path.clone(),
            skipped: report
                .skipped
                .iter()
                .filter(|s| path.starts_with(&s.path) || resolved.path.starts_with(&s.path))
                .cloned()
                .collect(),
        },
    };
    Ok(Explanation {
        path: path.to_path_buf(),
        checked: resolved.path,
        exists: resolved.exists,
        verdict,
    })
}

/// The nearest granted root that covers the resolved target: the
/// target itself when it is an existing non-directory (any root kind),
/// then the directory checked and each of its ancestors (directory
/// roots only, since only they grant rights beneath them).
fn covering_root<'r>(
    report: &'r Report,
    target: &Resolved,
) -> Result<Option<&'r Granted>, (PathBuf, io::Error)> {
    let by_id: HashMap<(u64, u64), &Granted> =
        report.granted.iter().rev().map(|g| (g.id(), g)).collect();
    let id_of = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| (m.dev(), m.ino()))
            .map_err(|e| (p.to_path_buf(), e))
    };
    let mut dir = target.path.as_path();
    if target.exists && !target.is_dir {
        if let Some(root) = by_id.get(&id_of(dir)?) {
            return Ok(Some(root));
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => return Ok(None),
        }
    }
    loop {
        if let Some(root) = by_id.get(&id_of(dir)?) {
            if root.kind == RootKind::Directory {
                return Ok(Some(root));
            }
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => return Ok(None),
        }
    }
}

/// A path resolved the way a write resolves it.
#[derive(Debug)]
struct Resolved {
    /// Absolute, without symlinks, `.` or `..`: the existing target, or the
    /// nearest existing directory of a missing one.
    path: PathBuf,
    /// Whether the target itself exists.
    exists: bool,
    /// Whether `path` is a directory (always, when `exists` is false).
    is_dir: bool,
}

/// Resolves `path` component by component, as the kernel's path walk
/// does: `..` goes to the parent of the directory reached so far (not of
/// the string), every symlink is followed (at most [`MAX_SYMLINKS`]), and
/// the walk stops at the first name that does not exist.
fn resolve(path: &Path) -> Result<Resolved, (PathBuf, io::Error)> {
    let mut pending: VecDeque<OsString> = names(path).collect();
    let mut at = PathBuf::from("/");
    let mut links = 0;
    let mut is_dir = true;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            at.pop();
            is_dir = true;
            continue;
        }
        if name == "." {
            if !is_dir {
                return Err((at, io::Error::from_raw_os_error(libc::ENOTDIR)));
            }
            continue;
        }
        let next = at.join(&name);
        let meta = match std::fs::symlink_metadata(&next) {
            Ok(meta) => meta,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Ok(Resolved {
                    path: at,
                    exists: false,
                    is_dir: true,
                });
            }
            Err(e) => return Err((next, e)),
        };
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err((next, io::Error::from_raw_os_error(libc::ELOOP)));
            }
            let target = std::fs::read_link(&next).map_err(|e| (next.clone(), e))?;
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            for name in names(&target).collect::<Vec<_>>().into_iter().rev() {
                pending.push_front(name);
            }
            continue;
        }
        is_dir = meta.is_dir();
        if !is_dir && !pending.is_empty() {
            return Err((next, io::Error::from_raw_os_error(libc::ENOTDIR)));
        }
        at = next;
    }
    Ok(Resolved {
        path: at,
        exists: true,
        is_dir,
    })
}

/// The names of a path as the kernel's walk sees them: `..` kept (it must
/// be taken on the resolved directory, not on the string), `.` kept (it
/// asks that what came before be a directory: `file/.` is `ENOTDIR`), and a
/// trailing slash turned into a final `.`, which asks the same.
/// `Path::components` cannot be used: it drops both.
fn names(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    let bytes = path.as_os_str().as_bytes();
    let trailing_slash = bytes.len() > 1 && bytes.ends_with(b"/");
    bytes
        .split(|b| *b == b'/')
        .filter(|name| !name.is_empty())
        .map(|name| OsStr::from_bytes(name).to_os_string())
        .chain(trailing_slash.then(|| OsString::from(".")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    struct Tree {
        _dir: tempfile::TempDir,
        base: PathBuf,
    }

    fn tree() -> Tree {
        let (dir, base) = crate::testing::tree(&["root/sub", "out/deep"]);
        fs::write(base.join("root/file"), "x").expect("file");
        fs::write(base.join("out/file"), "x").expect("file");
        fs::write(base.join("lock"), "").expect("lock");
        symlink(base.join("out"), base.join("root/to-out")).expect("symlink");
        symlink("../root", base.join("out/to-root")).expect("symlink");
        symlink(base.join("out/new-target"), base.join("root/dangling")).expect("symlink");
        symlink("loop", base.join("root/loop")).expect("symlink");
        Tree { _dir: dir, base }
    }

    fn report(t: &Tree) -> Report {
        crate::testing::report_writable(["root", "lock", "missing"].map(|r| t.base.join(r)))
    }

    fn granted_by(r: &Report, p: &Path) -> Option<PathBuf> {
        match r.explain(p).expect("explain").verdict {
            Verdict::Granted(g) => Some(g.path),
            Verdict::Denied { .. } => None,
        }
    }

    #[test]
    fn inside_is_granted_by_the_root_and_outside_is_not() {
        let t = tree();
        let r = report(&t);
        let root = t.base.join("root");
        assert_eq!(granted_by(&r, &root), Some(root.clone()));
        assert_eq!(granted_by(&r, &root.join("file")), Some(root.clone()));
        assert_eq!(granted_by(&r, &root.join("new/deeper")), Some(root.clone()));
        assert_eq!(granted_by(&r, &t.base.join("out/file")), None);
        assert_eq!(granted_by(&r, &t.base), None);
    }

    #[test]
    fn symlinks_and_dotdot_resolve_like_the_kernel_not_like_strings() {
        let t = tree();
        let r = report(&t);
        // Lexically inside the root, really outside.
        let e = r
            .explain(&t.base.join("root/to-out/file"))
            .expect("explain");
        assert!(!e.is_granted());
        assert_eq!(e.checked, t.base.join("out/file"));
        // `..` after a symlink is taken on the symlink's target.
        let e = r
            .explain(&t.base.join("root/to-out/../lock"))
            .expect("explain");
        assert_eq!(e.checked, t.base.join("lock"));
        assert!(e.is_granted(), "the lock file is a file root");
        assert!(
            !r.explain(&t.base.join("root/../out/x"))
                .expect("explain")
                .is_granted()
        );
        // Lexically outside, really inside.
        assert!(
            r.explain(&t.base.join("out/to-root/x"))
                .expect("explain")
                .is_granted()
        );
        // A dangling symlink: O_CREAT would create its target, outside.
        let e = r.explain(&t.base.join("root/dangling")).expect("explain");
        assert!(!e.exists);
        assert_eq!(e.checked, t.base.join("out"));
        assert!(!e.is_granted());
    }

    #[test]
    fn a_file_root_grants_only_its_own_inode() {
        let t = tree();
        let r = report(&t);
        assert_eq!(
            granted_by(&r, &t.base.join("lock")),
            Some(t.base.join("lock"))
        );
        let e = r.explain(&t.base.join("lock-sibling")).expect("explain");
        assert_eq!(e.checked, t.base);
        assert!(!e.is_granted());
        // Not a directory: nothing can be created beneath a file.
        assert!(matches!(
            r.explain(&t.base.join("lock/x")),
            Err(ExplainError::Resolve { .. })
        ));
    }

    #[test]
    fn denials_name_the_smallest_root_and_skipped_roots_above() {
        let t = tree();
        let r = report(&t);
        match r
            .explain(&t.base.join("missing/later/file"))
            .expect("explain")
            .verdict
        {
            Verdict::Denied { allow, skipped } => {
                assert_eq!(allow, t.base);
                assert_eq!(skipped.len(), 1);
                assert_eq!(skipped[0].path, t.base.join("missing"));
            }
            Verdict::Granted(g) => panic!("granted by {g:?}"),
        }
        match r
            .explain(&t.base.join("out/file"))
            .expect("explain")
            .verdict
        {
            Verdict::Denied { allow, skipped } => {
                assert_eq!(allow, t.base.join("out/file"));
                assert!(skipped.is_empty());
            }
            Verdict::Granted(g) => panic!("granted by {g:?}"),
        }
    }

    #[test]
    fn unresolvable_paths_are_errors() {
        let t = tree();
        let r = report(&t);
        assert!(matches!(
            r.explain("".as_ref()),
            Err(ExplainError::EmptyPath)
        ));
        assert!(matches!(
            r.explain("relative".as_ref()),
            Err(ExplainError::RelativePath { .. })
        ));
        // `.` and a trailing slash ask for a directory, as in the kernel's
        // walk, though `Path::components` drops both.
        for tail in ["/.", "/", "/./"] {
            let mut p = t.base.join("root/file").into_os_string();
            p.push(tail);
            match r.explain(Path::new(&p)) {
                Err(ExplainError::Resolve { source, .. }) => {
                    assert_eq!(source.raw_os_error(), Some(libc::ENOTDIR), "{p:?}");
                }
                other => panic!("{p:?}: {other:?}"),
            }
            let mut d = t.base.join("root").into_os_string();
            d.push(tail);
            assert!(r.explain(Path::new(&d)).is_ok(), "{d:?}");
        }
        match r.explain(&t.base.join("root/loop")) {
            Err(ExplainError::Resolve { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(libc::ELOOP));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_filesystem_root_and_dotdot_above_it() {
        let r = crate::testing::report_writable(["/"]);
        let e = r
            .explain("/../../etc/../no-such-dir/x".as_ref())
            .expect("explain");
        assert_eq!(e.checked, Path::new("/"));
        assert!(e.is_granted());
    }
}
