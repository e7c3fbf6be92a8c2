//! Which inherited descriptors a confined command keeps: 0, 1 and 2, the
//! ones the caller names, and a make jobserver's.
//!
//! Every other descriptor the caller holds open is a way out: a shell's
//! `exec 7>>~/file` before `run` would hand the command a descriptor it
//! can write through whatever Landlock says, since Landlock checks opens,
//! not writes to descriptors opened before.

use std::ffi::OsStr;
use std::os::fd::RawFd;
use std::process::Command;

/// The descriptors of a make jobserver named in `MAKEFLAGS`:
/// `--jobserver-auth=R,W` (GNU make 4.2 and later) or `--jobserver-fds=R,W`
/// (earlier). The `fifo:PATH` form of make 4.4 passes no descriptor: the
/// fifo is opened by name (in temporary space, a granted root).
///
/// `-j4 --jobserver-auth=3,4` keeps 3 and 4.
pub(crate) fn jobserver_fds(makeflags: &OsStr) -> Vec<RawFd> {
    let flags = makeflags.to_string_lossy();
    // The last one wins, as make reads it.
    let Some(value) = flags.split_ascii_whitespace().rev().find_map(|word| {
        word.strip_prefix("--jobserver-auth=")
            .or_else(|| word.strip_prefix("--jobserver-fds="))
    }) else {
        return Vec::new();
    };
    let Some((r, w)) = value.split_once(',') else {
        return Vec::new();
    };
    match (r.parse::<RawFd>(), w.parse::<RawFd>()) {
        (Ok(r), Ok(w)) if r >= 0 && w >= 0 => vec![r, w],
        _ => Vec::new(),
    }
}

/// The `MAKEFLAGS` `cmd` will see: its own setting, else this process's.
fn makeflags_of(cmd: &Command) -> Option<std::ffi::OsString> {
    for (name, value) in cmd.get_envs() {
        if name == "MAKEFLAGS" {
            return value.map(OsStr::to_os_string);
        }
    }
    std::env::var_os("MAKEFLAGS")
}

/// Arranges for `cmd` to inherit only 0, 1, 2, `keep` and the jobserver
/// named in its `MAKEFLAGS`.
pub(crate) fn keep_only(cmd: &mut Command, keep: &[RawFd]) {
    let mut fds: Vec<RawFd> = keep.iter().copied().filter(|fd| *fd > 2).collect();
    if let Some(flags) = makeflags_of(cmd) {
        fds.extend(jobserver_fds(&flags));
    }
    fds.sort_unstable();
    fds.dedup();
    crate::sys::keep_only_fds_before_exec(cmd, fds);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jobserver_is_read_in_both_forms() {
        assert_eq!(jobserver_fds("-j4 --jobserver-auth=3,4".as_ref()), [3, 4]);
        assert_eq!(jobserver_fds(" --jobserver-fds=5,6 -j".as_ref()), [5, 6]);
        assert!(jobserver_fds("--jobserver-auth=fifo:/tmp/GMfifo1".as_ref()).is_empty());
        assert!(jobserver_fds("-j4".as_ref()).is_empty());
        assert!(jobserver_fds("--jobserver-auth=-2,-2".as_ref()).is_empty());
        assert_eq!(
            jobserver_fds("--jobserver-auth=3,4 --jobserver-auth=7,8".as_ref()),
            [7, 8]
        );
    }
}
