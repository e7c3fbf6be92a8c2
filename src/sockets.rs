//! Pathname unix sockets a confined command may connect to (Landlock's
//! `RESOLVE_UNIX`, ABI 9), and why each one is allowed.
//!
//! Connecting to a socket is not a write, but the process listening on it
//! may write for the caller: a tmux server runs any command, Docker mounts
//! any directory. From ABI 9 the sandbox handles the right, so only the
//! sockets listed here (and those a confined command creates itself, which
//! the kernel exempts) are reachable.

use std::path::{Path, PathBuf};

use crate::root::{Origin, Root, RootKind, SkipReason};

/// The sockets a session connects to by default: the project and the
/// state directory (the session's own places), `$SSH_AUTH_SOCK` and
/// gpg-agent's sockets. Temporary space and caches are never among them:
/// tmux, screen, X11 and editors keep their sockets there.
///
/// gpg-agent's sockets are looked for where gpg puts them for the default
/// home (`$XDG_RUNTIME_DIR/gnupg`, `/run/user/$UID/gnupg`, else
/// `~/.gnupg`); with `$GNUPGHOME` set elsewhere, `gpgconf --list-dirs
/// socketdir` is asked, since the directory then depends on a hash of it.
///
/// # Examples
///
/// ```
/// use strument_sandbox::{Origin, default_sockets};
/// let sockets = default_sockets("/home/me/project".as_ref(), None);
/// assert_eq!(sockets[0].origin, Origin::Project);
/// ```
#[must_use]
pub fn default_sockets(project_root: &Path, state_dir: Option<&Path>) -> Vec<Root> {
    sockets_for(project_root, state_dir, dirs::home_dir().as_deref())
}

/// [`default_sockets`] with the home directory already read.
pub(crate) fn sockets_for(
    project_root: &Path,
    state_dir: Option<&Path>,
    home: Option<&Path>,
) -> Vec<Root> {
    let mut out = vec![Root::new(project_root, Origin::Project)];
    if let Some(state) = state_dir {
        out.push(Root::new(state, Origin::State));
    }
    // A relative value names nothing a socket rule could anchor to (ssh
    // resolves it against whatever directory it runs in): ignored, as the
    // cache variables are, rather than failing the whole policy.
    if let Some(agent) = std::env::var_os("SSH_AUTH_SOCK")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        out.push(Root::new(agent, Origin::SshAgent));
    }
    if let Some(dir) = gpg_socket_dir(home) {
        for name in GPG_SOCKETS {
            out.push(Root::new(dir.join(name), Origin::GpgAgent));
        }
    }
    out
}

/// The sockets gpg and git use for signing: the agent, and keyboxd where
/// gpg 2.4 keeps the public keys.
const GPG_SOCKETS: [&str; 2] = ["S.gpg-agent", "S.keyboxd"];

fn gpg_socket_dir(home: Option<&Path>) -> Option<PathBuf> {
    let default_home = home.filter(|h| h.is_absolute()).map(|h| h.join(".gnupg"));
    match std::env::var_os("GNUPGHOME").filter(|v| Path::new(v).is_absolute()) {
        Some(custom) if Some(PathBuf::from(&custom)) != default_home => {
            let out = std::process::Command::new("gpgconf")
                .args(["--list-dirs", "socketdir"])
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())?;
            let dir = String::from_utf8(out.stdout).ok()?;
            Some(PathBuf::from(dir.trim_end()))
        }
        _ => {
            let runtime = std::env::var_os("XDG_RUNTIME_DIR")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| PathBuf::from(format!("/run/user/{}", crate::sys::uid())));
            let dir = runtime.join("gnupg");
            if dir.is_dir() {
                Some(dir)
            } else {
                default_home
            }
        }
    }
}

/// Checks what a socket path is, for the report: a directory, or a socket
/// file; anything else is skipped.
pub(crate) fn judge(origin: &Origin, kind: RootKind, is_socket: bool) -> Result<(), SkipReason> {
    // Paths taken from the environment must be socket files:
    // `SSH_AUTH_SOCK=/tmp` must not open every tmux and X11 socket beneath it.
    let must_be_socket = matches!(origin, Origin::SshAgent | Origin::GpgAgent);
    let fits = match kind {
        RootKind::Directory => !must_be_socket,
        RootKind::Special => is_socket,
        RootKind::File => false,
    };
    if fits {
        Ok(())
    } else {
        Err(SkipReason::CannotOpen {
            errno: libc::ENOTSOCK,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_must_be_sockets_and_the_project_may_be_a_directory() {
        let agent = Origin::SshAgent;
        assert!(judge(&agent, RootKind::Directory, false).is_err());
        assert!(judge(&agent, RootKind::Special, true).is_ok());
        assert!(judge(&agent, RootKind::Special, false).is_err());
        let project = Origin::Project;
        assert!(judge(&project, RootKind::Directory, false).is_ok());
        assert!(judge(&project, RootKind::File, false).is_err());
    }
}
