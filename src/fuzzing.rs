//! Entry points for `cargo fuzz`, compiled only with `--cfg fuzzing`
//! (which `cargo fuzz` sets): not part of the crate's API.

use std::path::PathBuf;

/// The `.git` / `commondir` pointer parser behind
/// [`default_writable`](crate::default_writable).
///
/// # Errors
///
/// A reason, for input that is not one line `<prefix><path>`.
pub fn parse_git_pointer(bytes: &[u8], prefix: &str) -> Result<PathBuf, String> {
    crate::git::parse_git_pointer(bytes, prefix)
}
