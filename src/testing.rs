//! What the unit tests of several modules share.

use std::path::PathBuf;

use crate::{Policy, Report, Root};

/// A fresh temporary directory holding the directories `dirs` (relative,
/// made with their parents), and its path with every symlink resolved:
/// `$TMPDIR` may be reached through one, and the tests compare paths the
/// kernel resolved. The directory is removed when the first half drops.
pub(crate) fn tree(dirs: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    for d in dirs {
        std::fs::create_dir_all(base.join(d)).expect("mkdir");
    }
    (dir, base)
}

/// What a policy writable at `roots`, and nowhere else, grants here.
pub(crate) fn report_writable<R: Into<Root>>(roots: impl IntoIterator<Item = R>) -> Report {
    Policy {
        writable: roots.into_iter().map(Into::into).collect(),
        ..Policy::default()
    }
    .check()
    .expect("check")
}
