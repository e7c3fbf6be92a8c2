//! Judging a derived root along its whole path: what it resolves
//! *through*, not only what it resolves to.
//!
//! A root from a variable, the cache home or `.git` is input a confined
//! command could have shaped: not only the value, but every directory entry
//! on the way that lies in a granted root. `TMPDIR=/tmp/nix-shell.XXXX` is
//! a name in granted `/tmp`; an earlier confined command can replace it
//! with a symlink to `~/.local/bin`, and the next sandbox would grant that.
//! So a derived root whose path meets a symlink sitting in a granted root is
//! skipped, naming the symlink, unless it resolves into a granted root
//! anyway (then it grants nothing new). A directory on the way that sits in
//! a granted root needs no check of its own: everything below it is inside
//! that root, unless a later symlink leads out, which is judged.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// A path resolved component by component, as the kernel resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Walk {
    /// The physical path it resolved to.
    pub(crate) resolved: PathBuf,
    /// Each symlink met on the way, by its physical path, in order.
    pub(crate) links: Vec<PathBuf>,
}

/// Follows `path` (absolute) one component at a time with `lstat` and
/// `readlink`, as the kernel would: symlinks followed (40 at most, the
/// kernel's limit), `..` taken on the physical directory.
pub(crate) fn walk(path: &Path) -> io::Result<Walk> {
    let mut pending: VecDeque<OsString> = components(path);
    let mut resolved = PathBuf::from("/");
    let mut links = Vec::new();
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&name);
        let meta = std::fs::symlink_metadata(&next)?;
        if !meta.file_type().is_symlink() {
            resolved = next;
            continue;
        }
        if links.len() >= 40 {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let target = std::fs::read_link(&next)?;
        links.push(next);
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        for name in components(&target).into_iter().rev() {
            pending.push_front(name);
        }
    }
    Ok(Walk { resolved, links })
}

/// The names of `path` to resolve: `..` kept, `.` and `/` dropped.
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// The first symlink of `walk` that a confined command could have made:
/// one whose directory is inside a granted directory (`granted`, physical
/// paths). `None` when there is none, or when the root resolves into a
/// granted directory anyway. `trusted` is a symlink judged elsewhere (a
/// `.git` pointer, which must name the project back).
pub(crate) fn planted_on_the_way<'a>(
    walk: &'a Walk,
    granted: &[&Path],
    trusted: Option<&Path>,
) -> Option<&'a Path> {
    let inside = |p: &Path| granted.iter().any(|g| p.starts_with(g));
    if inside(&walk.resolved) {
        return None;
    }
    walk.links
        .iter()
        .filter(|link| Some(link.as_path()) != trusted)
        .find(|link| link.parent().is_some_and(inside))
        .map(PathBuf::as_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_in_a_granted_directory_is_named_unless_it_leads_inside() {
        let (_dir, base) = crate::testing::tree(&["tmp/real", "home/.local/bin"]);
        let (tmp, bin) = (base.join("tmp"), base.join("home/.local/bin"));
        std::os::unix::fs::symlink(&bin, tmp.join("nix-shell.1")).expect("ln");
        std::os::unix::fs::symlink(tmp.join("real"), tmp.join("inside")).expect("ln");
        std::os::unix::fs::symlink("../tmp/nix-shell.1", base.join("home/rel")).expect("ln");

        let out = walk(&tmp.join("nix-shell.1")).expect("walk");
        assert_eq!(out.resolved, bin);
        let granted = [tmp.as_path()];
        assert_eq!(
            planted_on_the_way(&out, &granted, None),
            Some(tmp.join("nix-shell.1").as_path())
        );
        // Through a trusted symlink (in home) to the planted one.
        let out = walk(&base.join("home/rel")).expect("walk");
        assert_eq!(out.resolved, bin);
        assert_eq!(out.links.len(), 2);
        assert_eq!(
            planted_on_the_way(&out, &granted, None),
            Some(tmp.join("nix-shell.1").as_path())
        );
        // Resolving into a granted directory grants nothing new.
        let out = walk(&tmp.join("inside")).expect("walk");
        assert_eq!(out.resolved, tmp.join("real"));
        assert_eq!(planted_on_the_way(&out, &granted, None), None);
        // A symlink outside every granted directory is the user's own.
        let out = walk(&tmp.join("nix-shell.1")).expect("walk");
        assert_eq!(
            planted_on_the_way(&out, &[base.join("x").as_path()], None),
            None
        );
        // A plain directory path meets no symlink.
        let out = walk(&bin.join("../bin/.")).expect("walk");
        assert_eq!(
            out,
            Walk {
                resolved: bin.clone(),
                links: Vec::new()
            }
        );
    }
}
