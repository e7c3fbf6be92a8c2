//! Pathname unix sockets a confined command may connect to (Landlock's
//! `RESOLVE_UNIX`, ABI 9), and why each one is allowed.
//!
//! Connecting to a socket is not a write, but the process listening on it
//! may write for the caller: a tmux server runs any command, Docker mounts
//! any directory. From ABI 9 the sandbox handles the right, so only the
//! sockets listed here (and those a confined command creates itself, which
//! the kernel exempts) are reachable.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::report::{RootKind, SkipReason};

/// A place a confined command may connect to unix sockets: a socket file,
/// or a directory (every socket beneath it).
///
/// # Examples
///
/// ```
/// use strument_sandbox::{Socket, SocketReason};
/// let db = Socket::new("/run/postgresql/.s.PGSQL.5432", SocketReason::Caller);
/// assert_eq!(db.reason.name(), "caller");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Socket {
    /// The socket file or the directory, absolute.
    pub path: PathBuf,
    /// Why it is allowed.
    pub reason: SocketReason,
}

impl Socket {
    /// A socket allowed for `reason`.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{Socket, SocketReason};
    /// let s = Socket::new("/run/user/1000/ssh-agent.sock", SocketReason::SshAgent);
    /// assert!(s.path.is_absolute());
    /// ```
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, reason: SocketReason) -> Socket {
        Socket {
            path: path.into(),
            reason,
        }
    }
}

/// Why a confined command may connect to a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketReason {
    /// The project: the session's own place (a dev server's socket).
    Project,
    /// The state directory: the session's own place.
    State,
    /// `$SSH_AUTH_SOCK`: `git` over ssh signs in through the agent.
    SshAgent,
    /// gpg-agent's sockets, when named: signed commits and tags, and with
    /// them key deletion and import (not among [`default_sockets`]).
    GpgAgent,
    /// Named by the caller (`--allow-socket`): a database, Docker on purpose.
    Caller,
    /// A service that answers name and user lookups or takes log records
    /// (nscd, systemd-resolved, systemd-userdb, syslog, journald): it
    /// writes nothing for its caller but log records.
    Lookup,
}

impl SocketReason {
    /// A short, stable name for programs.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::SocketReason::SshAgent.name(), "ssh-agent");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            SocketReason::Project => "project",
            SocketReason::State => "state",
            SocketReason::SshAgent => "ssh-agent",
            SocketReason::GpgAgent => "gpg-agent",
            SocketReason::Caller => "caller",
            SocketReason::Lookup => "lookup",
        }
    }

    /// Whether the path must be a socket file, not a directory. Paths taken
    /// from the environment are: `SSH_AUTH_SOCK=/tmp` must not open every
    /// tmux and X11 socket beneath it.
    fn must_be_socket(self) -> bool {
        matches!(self, SocketReason::SshAgent | SocketReason::GpgAgent)
    }
}

impl fmt::Display for SocketReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SocketReason::Project => "the project: the session's own sockets",
            SocketReason::State => "the state directory: the session's own sockets",
            SocketReason::SshAgent => "$SSH_AUTH_SOCK: git and ssh sign in through the agent",
            SocketReason::GpgAgent => {
                "gpg-agent: signed commits and tags; it also deletes and imports secret keys"
            }
            SocketReason::Caller => "named by the caller",
            SocketReason::Lookup => {
                "name, user and log services: they answer lookups and take log records, \
                 writing nothing else for the caller"
            }
        })
    }
}

/// A socket (or directory of sockets) a rule was anchored to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantedSocket {
    /// The path as given.
    pub path: PathBuf,
    /// Why it is allowed.
    pub reason: SocketReason,
    /// What it resolved to: a directory, or [`RootKind::Special`] for a socket.
    pub kind: RootKind,
}

/// A socket that grants nothing, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedSocket {
    /// The path as given.
    pub path: PathBuf,
    /// Why it was asked for.
    pub reason: SocketReason,
    /// Why no rule could be anchored to it: missing, or cannot be opened
    /// (`ENOTSOCK` for an agent path that is not a socket).
    pub skip: SkipReason,
}

/// The sockets a session connects to by default: the project and the
/// state directory (the session's own places) and `$SSH_AUTH_SOCK`.
/// Temporary space and caches are never among them: tmux, screen, X11 and
/// editors keep their sockets there.
///
/// gpg-agent is not among them: whoever connects to its socket may delete
/// and import secret keys (`DELETE_KEY`, `IMPORT_KEY`), writes outside
/// every root. Signing with gpg inside the sandbox needs the agent named
/// explicitly ([`SocketReason::GpgAgent`], `--allow-socket`), which allows
/// that too.
///
/// # Examples
///
/// ```
/// use strument_sandbox::{SocketReason, default_sockets};
/// let sockets = default_sockets("/home/me/project".as_ref(), None);
/// assert_eq!(sockets[0].reason, SocketReason::Project);
/// ```
#[must_use]
pub fn default_sockets(project_root: &Path, state_dir: Option<&Path>) -> Vec<Socket> {
    let mut out = vec![Socket::new(project_root, SocketReason::Project)];
    if let Some(state) = state_dir {
        out.push(Socket::new(state, SocketReason::State));
    }
    // A relative value names nothing a socket rule could anchor to (ssh
    // resolves it against whatever directory it runs in): ignored, as the
    // cache variables are, rather than failing the whole policy.
    if let Some(agent) = std::env::var_os("SSH_AUTH_SOCK")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        out.push(Socket::new(agent, SocketReason::SshAgent));
    }
    // glibc's NSS and syslog reach these; the ones present on this machine.
    out.extend(
        LOOKUP_SERVICES
            .iter()
            .map(Path::new)
            .filter(|p| p.exists())
            .map(|p| Socket::new(p, SocketReason::Lookup)),
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
pub(crate) fn judge(socket: &Socket, kind: RootKind, is_socket: bool) -> Result<(), SkipReason> {
    let fits = match kind {
        RootKind::Directory => !socket.reason.must_be_socket(),
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
        let agent = Socket::new("/tmp", SocketReason::SshAgent);
        assert!(judge(&agent, RootKind::Directory, false).is_err());
        assert!(judge(&agent, RootKind::Special, true).is_ok());
        assert!(judge(&agent, RootKind::Special, false).is_err());
        let project = Socket::new("/p", SocketReason::Project);
        assert!(judge(&project, RootKind::Directory, false).is_ok());
        assert!(judge(&project, RootKind::File, false).is_err());
    }
}
