//! What the supervisor allows: the decision as data, kept apart from the
//! mechanics of performing a call, so that further kinds of destination
//! (this machine's own addresses) plug in as rules of their own.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::local_net::{LocalNet, Reach, Transport};

/// Where a `connect` or `sendto` goes, as the supervisor read and resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Destination {
    /// A pathname unix socket, opened: what it resolved to and its inode.
    Path {
        /// The socket file's path, as the kernel names the opened inode.
        resolved: PathBuf,
        /// Device and inode.
        id: (u64, u64),
        /// When the inode last changed (a rename, a link): `None` when unknown.
        changed: Option<SystemTime>,
    },
    /// An abstract unix socket name, without the leading NUL.
    Abstract(Vec<u8>),
    /// An IPv4 or IPv6 address, and the socket's transport.
    Inet(SocketAddr, Transport),
    /// Anything else: an unnamed unix address, `AF_UNSPEC` (disconnect),
    /// families the sandbox does not mediate. The kernel judges them.
    Other,
}

/// The supervisor's answer to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Performed by the supervisor.
    Allow,
    /// Fails with `EACCES`, what Landlock's `RESOLVE_UNIX` answers.
    Refuse,
}

/// What the policy grants, fixed when it was prepared.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    /// Directories every socket beneath which may be connected to (the
    /// project, the state directory, directories named by the caller), as
    /// the kernel names them.
    pub(crate) socket_dirs: Vec<PathBuf>,
    /// Socket files named by the policy (`$SSH_AUTH_SOCK`, the caller's),
    /// by identity: a file renamed over the name later is not them.
    pub(crate) socket_files: HashSet<(u64, u64)>,
    /// A socket beneath [`Rules::socket_dirs`] that changed after this
    /// (created, renamed or linked there) counts only if it was bound
    /// inside: otherwise a confined command could move a socket it may not
    /// reach (tmux's, in a writable `/tmp`) into the project.
    pub(crate) since: Option<SystemTime>,
    /// This machine's own addresses, the ports the policy names on them,
    /// and those bound inside.
    pub(crate) net: Arc<LocalNet>,
}

/// What processes of the sandbox bound, asked of the kernel by the sockets
/// their `bind` calls named.
#[derive(Debug, Default)]
pub(crate) struct Bound {
    /// Socket files, by identity.
    pub(crate) files: HashSet<(u64, u64)>,
    /// Abstract names.
    pub(crate) abstract_names: HashSet<Vec<u8>>,
    /// Unix sockets a `bind` was asked for and not yet seen bound, by sockfs
    /// inode and cookie.
    pub(crate) pending: Vec<(u32, [u32; 2])>,
}

impl Rules {
    /// Whether a `connect` or `sendto` to `to` is allowed.
    pub(crate) fn connect(&self, to: &Destination, bound: &Bound) -> Verdict {
        let allowed = match to {
            Destination::Path {
                resolved,
                id,
                changed,
            } => {
                self.socket_files.contains(id)
                    || bound.files.contains(id)
                    || (beneath(resolved, &self.socket_dirs) && self.unchanged(*changed))
            }
            Destination::Abstract(name) => bound.abstract_names.contains(name),
            // Other hosts pass, performed here all the same, so that the
            // address judged is the address used.
            Destination::Inet(to, transport) => self.net.reach(*to, *transport) != Reach::Refused,
            Destination::Other => true,
        };
        if allowed {
            Verdict::Allow
        } else {
            Verdict::Refuse
        }
    }

    fn unchanged(&self, changed: Option<SystemTime>) -> bool {
        match (self.since, changed) {
            (Some(since), Some(changed)) => changed < since,
            (None, _) => true,
            (Some(_), None) => false,
        }
    }
}

fn beneath(path: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|d| path.starts_with(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn path(p: &str, id: u64, changed: SystemTime) -> Destination {
        Destination::Path {
            resolved: p.into(),
            id: (1, id),
            changed: Some(changed),
        }
    }

    #[test]
    fn sockets_are_allowed_by_identity_place_or_having_been_bound_inside() {
        let start = SystemTime::now();
        let before = start - Duration::from_secs(60);
        let after = start + Duration::from_secs(1);
        let rules = Rules {
            socket_dirs: vec!["/home/me/project".into()],
            socket_files: [(1, 7)].into(),
            since: Some(start),
            ..Rules::default()
        };
        let mut bound = Bound::default();
        let agent = path("/tmp/ssh-x/agent.1", 7, after);
        let tmux = path("/tmp/tmux-1000/default", 8, before);
        let dev_server = path("/home/me/project/dev.sock", 9, before);
        let moved_in = path("/home/me/project/t", 8, after);
        assert_eq!(rules.connect(&agent, &bound), Verdict::Allow);
        assert_eq!(rules.connect(&dev_server, &bound), Verdict::Allow);
        assert_eq!(rules.connect(&tmux, &bound), Verdict::Refuse);
        assert_eq!(rules.connect(&moved_in, &bound), Verdict::Refuse);
        // A sibling whose name merely starts like the project's is not in it.
        let sibling = path("/home/me/project2/s", 10, before);
        assert_eq!(rules.connect(&sibling, &bound), Verdict::Refuse);
        let own = path("/tmp/own.sock", 11, after);
        assert_eq!(rules.connect(&own, &bound), Verdict::Refuse);
        bound.files.insert((1, 11));
        assert_eq!(rules.connect(&own, &bound), Verdict::Allow);

        let name = Destination::Abstract(b"svc".to_vec());
        assert_eq!(rules.connect(&name, &bound), Verdict::Refuse);
        bound.abstract_names.insert(b"svc".to_vec());
        assert_eq!(rules.connect(&name, &bound), Verdict::Allow);

        // This machine's ports are refused unless bound inside; other
        // hosts pass.
        let ssh = Destination::Inet("127.0.0.1:22".parse().unwrap(), Transport::Tcp);
        assert_eq!(rules.connect(&ssh, &bound), Verdict::Refuse);
        rules
            .net
            .bound("0.0.0.0:22".parse().unwrap(), Transport::Tcp, None);
        assert_eq!(rules.connect(&ssh, &bound), Verdict::Allow);
        let web = Destination::Inet("192.0.2.80:443".parse().unwrap(), Transport::Tcp);
        assert_eq!(rules.connect(&web, &bound), Verdict::Allow);
    }
}
