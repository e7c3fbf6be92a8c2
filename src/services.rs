//! Local services a confined command can reach over pathname unix sockets
//! when the kernel cannot stop it (Landlock ABI < 9): each one acts for its
//! client, outside the sandbox. Found where each service keeps its socket,
//! and kept only when a connection from this user is accepted now.

use std::collections::HashSet;
use std::fmt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::abi::Feature;
use crate::sys;

/// A kind of local service that acts for whoever connects to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServiceKind {
    /// A tmux server (`/tmp/tmux-$UID/`).
    Tmux,
    /// A GNU screen session.
    Screen,
    /// The D-Bus session bus (`$XDG_RUNTIME_DIR/bus`).
    SessionBus,
    /// systemd's user manager (`$XDG_RUNTIME_DIR/systemd/private`).
    SystemdUser,
    /// A Docker daemon.
    Docker,
    /// A Podman service.
    Podman,
    /// An X11 display (`/tmp/.X11-unix/X*`).
    X11,
    /// An editor's or terminal's remote-control socket (Neovim, Emacs,
    /// VS Code, kitty, WezTerm).
    Editor,
    /// gpg-agent (`S.gpg-agent` and its siblings).
    GpgAgent,
}

impl ServiceKind {
    /// A short, stable name for programs.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::ServiceKind::Tmux.name(), "tmux");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            ServiceKind::Tmux => "tmux",
            ServiceKind::Screen => "screen",
            ServiceKind::SessionBus => "session-bus",
            ServiceKind::SystemdUser => "systemd-user",
            ServiceKind::Docker => "docker",
            ServiceKind::Podman => "podman",
            ServiceKind::X11 => "x11",
            ServiceKind::Editor => "editor",
            ServiceKind::GpgAgent => "gpg-agent",
        }
    }

    /// What a confined command can make the service do, unconfined.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(strument_sandbox::ServiceKind::Tmux.allows().contains("run-shell"));
    /// ```
    #[must_use]
    pub fn allows(&self) -> &'static str {
        match self {
            ServiceKind::Tmux => {
                "runs any command unconfined (`tmux run-shell`, `send-keys` into a pane)"
            }
            ServiceKind::Screen => "types into any window (`screen -X stuff`)",
            ServiceKind::SessionBus => {
                "starts any command as a user unit (`systemd-run --user`) and drives every session service"
            }
            ServiceKind::SystemdUser => "starts and edits user services (`systemctl --user`)",
            ServiceKind::Docker => {
                "starts a container that mounts and writes any directory (root-equivalent for the system daemon)"
            }
            ServiceKind::Podman => "starts a container that mounts and writes this user's files",
            ServiceKind::X11 => "types keystrokes into any window, terminals included (`xdotool`)",
            ServiceKind::Editor => "edits and saves files, runs commands in the editor's terminal",
            ServiceKind::GpgAgent => {
                "deletes, imports and generates secret keys (`DELETE_KEY`, `IMPORT_KEY`)"
            }
        }
    }
}

/// A service socket this user can connect to now, and which a confined
/// command could therefore ask to write for it.
///
/// # Examples
///
/// ```
/// for s in strument_sandbox::reachable_services() {
///     println!("{s}");
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// What listens there.
    pub kind: ServiceKind,
    /// The socket.
    pub path: PathBuf,
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {} {}; Linux {} (Landlock ABI {}) closes this",
            self.kind.name(),
            self.path.display(),
            self.kind.allows(),
            Feature::ResolveUnix.since_linux(),
            Feature::ResolveUnix.since_abi()
        )
    }
}

/// The service sockets this user can connect to now, wherever each
/// service keeps its socket: tmux and screen servers, the session bus and
/// systemd's private socket, Docker and Podman, X11 displays, editors.
///
/// A confined command reaches them too until Landlock ABI 9 (Linux 7.1),
/// whose `RESOLVE_UNIX` right the sandbox handles; [`Report`](crate::Report)
/// lists them when the kernel is older. A few directory reads and one
/// non-blocking `connect` per socket found; a socket nobody listens on
/// (a server that crashed) is left out.
///
/// # Examples
///
/// ```
/// let services = strument_sandbox::reachable_services();
/// assert!(services.iter().all(|s| s.path.is_absolute()));
/// ```
#[must_use]
pub fn reachable_services() -> Vec<Service> {
    let uid = sys::uid();
    let env = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let runtime = env("XDG_RUNTIME_DIR").unwrap_or_else(|| format!("/run/user/{uid}").into());
    let tmp = PathBuf::from("/tmp");
    let mut found = Found::default();

    let tmux_tmp = env("TMUX_TMPDIR").unwrap_or_else(|| tmp.clone());
    found.dir(ServiceKind::Tmux, &tmux_tmp.join(format!("tmux-{uid}")));
    let screen_dir = env("SCREENDIR").unwrap_or_else(|| {
        let user = std::env::var("USER").unwrap_or_default();
        PathBuf::from(format!("/run/screen/S-{user}"))
    });
    found.dir(ServiceKind::Screen, &screen_dir);
    found.file(ServiceKind::SessionBus, &runtime.join("bus"));
    if let Some(bus) = std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .ok()
        .and_then(|a| a.strip_prefix("unix:path=").map(|p| p.to_owned()))
    {
        let path = bus.split(',').next().unwrap_or_default();
        found.file(ServiceKind::SessionBus, Path::new(path));
    }
    found.file(ServiceKind::SystemdUser, &runtime.join("systemd/private"));
    for docker in ["/run/docker.sock", "/var/run/docker.sock"] {
        found.file(ServiceKind::Docker, Path::new(docker));
    }
    found.file(ServiceKind::Docker, &runtime.join("docker.sock"));
    found.file(ServiceKind::Podman, Path::new("/run/podman/podman.sock"));
    found.file(ServiceKind::Podman, &runtime.join("podman/podman.sock"));
    found.dir(ServiceKind::X11, &tmp.join(".X11-unix"));
    // Editors and terminals keep remote-control sockets in the runtime
    // directory, under names of their own.
    for name in read_names(&runtime) {
        let path = runtime.join(&name);
        let name = name.to_string_lossy();
        if name.starts_with("nvim.") || name.starts_with("vscode-ipc-") || name.starts_with("kitty")
        {
            found.file(ServiceKind::Editor, &path);
        } else if name == "emacs" || name == "wezterm" || name == "nvim" {
            found.dir(ServiceKind::Editor, &path);
        }
    }
    found.dir(ServiceKind::Editor, &tmp.join(format!("emacs{uid}")));
    found.services
}

/// Services found so far, one per socket inode.
#[derive(Default)]
struct Found {
    seen: HashSet<(u64, u64)>,
    services: Vec<Service>,
}

impl Found {
    /// Every socket directly in `dir`.
    fn dir(&mut self, kind: ServiceKind, dir: &Path) {
        for name in read_names(dir) {
            self.file(kind, &dir.join(name));
        }
    }

    /// `path`, when it is a socket that accepts a connection from this user.
    fn file(&mut self, kind: ServiceKind, path: &Path) {
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        if meta.file_type().is_socket()
            && self.seen.insert((meta.dev(), meta.ino()))
            && sys::unix_connectable(path)
        {
            self.services.push(Service {
                kind,
                path: path.to_path_buf(),
            });
        }
    }
}

fn read_names(dir: &Path) -> Vec<std::ffi::OsString> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    names
}

/// The kind of service known to listen at `path` (a socket path, or an
/// abstract name such as X11's `/tmp/.X11-unix/X0`), by the places each
/// service keeps its socket; for the report of a refused connection.
pub(crate) fn service_at(path: &Path) -> Option<ServiceKind> {
    let name = path.file_name()?.to_string_lossy();
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = path.to_string_lossy();
    Some(if parent.starts_with("tmux-") {
        ServiceKind::Tmux
    } else if parent == ".X11-unix" {
        ServiceKind::X11
    } else if text.starts_with("/run/screen/") || parent.starts_with("S-") {
        ServiceKind::Screen
    } else if name == "bus" || text.starts_with("/tmp/dbus-") {
        ServiceKind::SessionBus
    } else if name == "private" && parent == "systemd" {
        ServiceKind::SystemdUser
    } else if name == "docker.sock" {
        ServiceKind::Docker
    } else if name == "podman.sock" {
        ServiceKind::Podman
    } else if name.starts_with("S.gpg-agent") {
        ServiceKind::GpgAgent
    } else if name.starts_with("nvim")
        || name.starts_with("vscode-ipc-")
        || name.starts_with("kitty")
        || parent == "emacs"
        || parent.starts_with("emacs")
        || parent == "wezterm"
    {
        ServiceKind::Editor
    } else {
        return None;
    })
}
