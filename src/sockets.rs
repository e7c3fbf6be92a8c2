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
/// state directory (the session's own places) and `$SSH_AUTH_SOCK`.
/// Temporary space and caches are never among them: tmux, screen, X11 and
/// editors keep their sockets there.
///
/// gpg-agent is not among them: whoever connects to its socket may delete
/// and import secret keys (`DELETE_KEY`, `IMPORT_KEY`), writes outside
/// every root. Signing with gpg inside the sandbox needs the agent named
/// explicitly (`Origin::GpgAgent`, `--allow-socket`), which allows
/// that too.
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
    sockets_for(project_root, state_dir)
}

/// [`default_sockets`], for the session's inputs.
pub(crate) fn sockets_for(project_root: &Path, state_dir: Option<&Path>) -> Vec<Root> {
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
    // glibc's NSS and syslog reach these; the ones present on this machine.
    out.extend(
        LOOKUP_SERVICES
            .iter()
            .map(Path::new)
            .filter(|p| p.exists())
            .map(|p| Root::new(p, Origin::Lookup)),
    );
    out
}

/// Services that answer lookups or take log records and write nothing else
/// for whoever connects: nscd, systemd-resolved's varlink socket, the
/// systemd-userdb directory (its sockets answer user and group queries),
/// syslog's `/dev/log` and journald's sockets.
const LOOKUP_SERVICES: [&str; 8] = [
    "/run/nscd/socket",
    "/run/systemd/resolve/io.systemd.Resolve",
    "/run/systemd/userdb",
    "/dev/log",
    "/run/systemd/journal/socket",
    "/run/systemd/journal/stdout",
    "/run/systemd/journal/dev-log",
    "/run/systemd/journal/syslog",
];

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
