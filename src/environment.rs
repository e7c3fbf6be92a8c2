//! The environment a confined command is given: one table of variables,
//! each with the tool that reads it and why, set only where the caller has
//! not set the variable itself.
//!
//! Two kinds of rows. **Daemon identities**: a build daemon or terminal
//! server a confined command starts must not be found by the user's later,
//! unconfined commands (they would run confined, and fail), and a daemon
//! the user started must not be found by a confined command (it would run
//! the command's work unconfined). Each tool finds its daemon through a
//! directory or address an environment variable can move: the confined
//! command gets one of the session's own, under
//! `/dev/shm/strument-sandbox-<uid>/<session>/` (or the same in `/tmp`
//! where `/dev/shm` is small). **Copies, not hard links**: uv
//! and pnpm install a package into the project by hard-linking the file in
//! their shared store, so an in-place edit in one project's `.venv` or
//! `node_modules` would change the same file in every other project; the
//! confined command's installs copy instead.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::beneath::Dir;
use crate::report::Report;
use crate::root::Origin;
use crate::sys;

/// What a row's value is.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// This text.
    Fixed(&'static str),
    /// The session directory itself.
    Session,
    /// `prefix` followed by a path in the session directory.
    InSession {
        prefix: &'static str,
        name: &'static str,
    },
    /// pnpm's own default store: `$PNPM_HOME/store`, else
    /// `$XDG_DATA_HOME/pnpm/store`, else `~/.local/share/pnpm/store`.
    PnpmStore,
}

/// One row of [`TABLE`].
struct Row {
    tool: &'static str,
    /// Set only when this tool is in use (see [`in_use`]): npm (10 and
    /// later) warns about every `npm_config_*` variable it does not know,
    /// on every run.
    only_with: Option<&'static str>,
    variable: &'static str,
    value: Value,
    why: &'static str,
}

/// The environment of every confined command. Sources: each tool's own
/// documentation or code, named in the row.
const TABLE: &[Row] = &[
    Row {
        tool: "tmux",
        only_with: None,
        variable: "TMUX_TMPDIR",
        value: Value::Session,
        why: "tmux finds its server by the socket $TMUX_TMPDIR/tmux-UID/default (tmux(1)): \
              a server of the session's own, so a confined tmux never drives the user's \
              server and the user's tmux never joins a confined one",
    },
    Row {
        tool: "gradle",
        only_with: None,
        variable: "GRADLE_OPTS",
        value: Value::InSession {
            prefix: "-Dorg.gradle.daemon=false -Dorg.gradle.daemon.registry.base=",
            name: "gradle-daemon",
        },
        why: "Gradle's client finds a daemon to run the build in through the registry in \
              org.gradle.daemon.registry.base (DaemonParameters, Gradle 1 to 8): a registry of \
              the session's own, so a confined build never runs in the user's unconfined daemon \
              and the user's builds never run in a confined one; and no daemon is left behind \
              (org.gradle.daemon=false, Gradle's documented switch): one would outlive `run` and \
              its connect supervisor, holding the shared caches' locks",
    },
    Row {
        tool: "sccache",
        only_with: None,
        variable: "SCCACHE_SERVER_UDS",
        value: Value::InSession {
            prefix: "",
            name: "sccache.sock",
        },
        why: "sccache (0.9 and later) compiles in the server at this unix socket instead of \
              127.0.0.1:4226: a server of the session's own, so a confined rustc never runs in \
              the user's server and the user's never in a confined one",
    },
    Row {
        tool: "sccache",
        only_with: None,
        variable: "SCCACHE_IDLE_TIMEOUT",
        value: Value::Fixed("60"),
        why: "sccache's server exits after this many seconds without a compile (600 by \
              default: DEFAULT_IDLE_TIMEOUT in sccache's src/server.rs): no later session can reach the \
              session's own server, so one left by every `run` would idle for ten minutes \
              each; the next compile of the same session starts a new one",
    },
    Row {
        tool: "uv",
        only_with: None,
        variable: "UV_LINK_MODE",
        value: Value::Fixed("copy"),
        why: "uv hard-links installed files from its cache by default (uv docs, \"link-mode\"): \
              an in-place edit in one project's .venv would change every project's copy",
    },
    Row {
        tool: "pnpm",
        only_with: Some("pnpm"),
        variable: "npm_config_package_import_method",
        value: Value::Fixed("copy"),
        why: "pnpm hard-links files from its store into node_modules by default \
              (package-import-method, read from npm_config_* by pnpm 9 and 10): an in-place \
              edit in one project would change every project's copy; set only when pnpm is \
              on PATH, since npm warns about settings it does not know",
    },
    Row {
        tool: "pnpm",
        only_with: Some("pnpm"),
        variable: "npm_config_store_dir",
        value: Value::PnpmStore,
        why: "without a store-dir pnpm probes whether it can link into its home directory, is \
              refused there, and makes a store at the project's mount root \
              (<mount>/.pnpm-store) that the user's next pnpm rejects \
              (ERR_PNPM_UNEXPECTED_STORE); named, it is the store the user's pnpm uses",
    },
];

/// One variable the confined command's environment gets: a row of the
/// table with its value for this session.
///
/// # Examples
///
/// ```
/// use strument_sandbox::Policy;
/// let report = Policy { writable: vec!["/tmp".into()], ..Policy::default() }.check()?;
/// let env = strument_sandbox::environment::settings(&report);
/// assert!(env.iter().any(|s| s.variable == "UV_LINK_MODE" && s.value == "copy"));
/// # Ok::<(), strument_sandbox::PolicyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Setting {
    /// The tool that reads the variable.
    pub tool: &'static str,
    /// The variable.
    pub variable: &'static str,
    /// Its value for this session.
    pub value: OsString,
    /// Why the confined command gets it.
    pub why: &'static str,
    /// The value this process's own environment already holds: then the
    /// setting is not applied, the caller's choice stands.
    pub caller: Option<OsString>,
    /// Whether the value names the session directory, which must be made
    /// before the command runs.
    in_session: bool,
}

impl Setting {
    /// Whether the confined command gets this value: the caller's
    /// environment does not set the variable.
    ///
    /// # Examples
    ///
    /// ```
    /// # let report = strument_sandbox::Policy::default().check()?;
    /// for s in strument_sandbox::environment::settings(&report) {
    ///     println!("{} {}", s.variable, if s.applied() { "set" } else { "left alone" });
    /// }
    /// # Ok::<(), strument_sandbox::PolicyError>(())
    /// ```
    #[must_use]
    pub fn applied(&self) -> bool {
        self.caller.is_none()
    }
}

/// The variables a command confined under `report` gets, in table order,
/// with this process's environment as the caller's.
///
/// The session directory they name (`/dev/shm/strument-sandbox-<uid>/<key>`,
/// or in `/tmp` where `/dev/shm` is no tmpfs; one per call, so every command of one session finds the same daemons and
/// no other session's) is made when a command is confined.
///
/// # Examples
///
/// ```
/// let report = strument_sandbox::Policy::default().check()?;
/// let tmux = strument_sandbox::environment::settings(&report)
///     .into_iter()
///     .find(|s| s.variable == "TMUX_TMPDIR");
/// assert!(tmux.is_some());
/// # Ok::<(), strument_sandbox::PolicyError>(())
/// ```
#[must_use]
pub fn settings(report: &Report) -> Vec<Setting> {
    let env = |name: &str| std::env::var_os(name);
    settings_for(report, &env, dirs::home_dir().as_deref(), sys::uid())
}

/// [`settings`] with the environment, home and user given.
pub(crate) fn settings_for(
    report: &Report,
    env: &dyn Fn(&str) -> Option<OsString>,
    home: Option<&Path>,
    uid: u32,
) -> Vec<Setting> {
    let session = session_dir(report, uid);
    let pnpm_store = pnpm_store(env, home);
    let path_dirs = path_dirs(&env("PATH").unwrap_or_default());
    let on_path = |tool: &str| path_dirs.iter().any(|dir| dir.join(tool).is_file());
    // Each tool asked about once, though several rows name it: the search
    // of PATH and the project is a dozen calls a tool.
    let asked: std::cell::RefCell<Vec<(&str, bool)>> = std::cell::RefCell::default();
    let used = |tool: &'static str| {
        let known = asked
            .borrow()
            .iter()
            .find(|(t, _)| *t == tool)
            .map(|(_, u)| *u);
        known.unwrap_or_else(|| {
            let used = in_use(tool, report, &on_path);
            asked.borrow_mut().push((tool, used));
            used
        })
    };
    TABLE
        .iter()
        .filter(|row| row.only_with.is_none_or(used))
        .filter_map(|row| {
            let in_session = matches!(row.value, Value::Session | Value::InSession { .. });
            let value = match row.value {
                Value::Fixed(text) => OsString::from(text),
                Value::Session => session.clone().into_os_string(),
                Value::InSession { prefix, name } => {
                    let mut v = OsString::from(prefix);
                    v.push(session.join(name));
                    v
                }
                Value::PnpmStore => pnpm_store.clone()?.into_os_string(),
            };
            Some(Setting {
                tool: row.tool,
                variable: row.variable,
                value,
                why: row.why,
                caller: env(row.variable),
                in_session,
            })
        })
        .collect()
}

/// Whether `tool` is in use: on `PATH`, or for pnpm, named by the
/// project (`pnpm-lock.yaml`, `pnpm-workspace.yaml`, or `pnpm@` in
/// `package.json`, as corepack's `packageManager` field has it), since
/// `corepack pnpm` runs a pnpm that is on no `PATH`.
fn in_use(tool: &str, report: &Report, on_path: &dyn Fn(&str) -> bool) -> bool {
    // The project's three names first: a project that names pnpm needs no
    // search of PATH, a `stat` a directory.
    let named = tool == "pnpm"
        && project(report).is_some_and(|project| {
            project.join("pnpm-lock.yaml").is_file()
                || project.join("pnpm-workspace.yaml").is_file()
                || std::fs::read(project.join("package.json"))
                    .is_ok_and(|json| json.windows(5).any(|w| w == b"pnpm@"))
        });
    named || on_path(tool)
}

/// The absolute directories of a `PATH`, each once: a directory named
/// twice (`~/.cargo/bin`, added by two shell profiles) is searched once.
pub(crate) fn path_dirs(path_var: &OsStr) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in std::env::split_paths(path_var) {
        // As bytes: `Path`'s own equality walks components, a dozen times
        // a directory here.
        if dir.is_absolute() && !dirs.iter().any(|d| d.as_os_str() == dir.as_os_str()) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The project's path as the report lists it.
fn project(report: &Report) -> Option<&Path> {
    report
        .granted
        .iter()
        .find(|g| g.origin == Origin::Project)
        .map(|g| g.path.as_path())
}

/// Where the session's daemons live: a directory per user in `/dev/shm`
/// (or `/tmp`: [`sessions_parent`]), and
/// in it one per session (one [`Prepared`](crate::Prepared): every command
/// of a [`Session`](crate::Session), or one `run`), named by a hash of the
/// project and state directory paths and the session's own nonce (short: a
/// unix socket's path has at most 107 bytes).
fn session_dir(report: &Report, uid: u32) -> PathBuf {
    let named = |origin: &Origin| {
        report
            .granted
            .iter()
            .map(|g| (&g.path, &g.origin))
            .chain(report.skipped.iter().map(|s| (&s.path, &s.origin)))
            .find(|(_, o)| *o == origin)
            .map(|(p, _)| p.as_os_str().as_bytes().to_vec())
            .unwrap_or_default()
    };
    let mut key = named(&Origin::Project);
    key.push(0);
    key.extend(named(&Origin::State));
    // And this session alone: the connect supervisor lets a command reach
    // only sockets bound in its own sandbox, so another session's daemons
    // (an earlier `run` in the same project) would be refused, not shared.
    static SESSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    key.extend(std::process::id().to_le_bytes());
    key.extend(
        SESSIONS
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_le_bytes(),
    );
    key.extend(nanos.to_le_bytes());
    sessions_parent()
        .join(format!("strument-sandbox-{uid}"))
        .join(format!("{:016x}", fnv1a(&key)))
}

/// Where the per-user directory of sessions is made: a built-in temp root
/// every policy grants, so the session's daemons can write there.
/// `/dev/shm` where it is a tmpfs of at least [`SHM_AT_LEAST`] bytes, as
/// on every desktop and server (half the memory by default): a `mkdir` and
/// `rmdir` there cost 2 µs, against 57 µs on a journaled ext4 `/tmp`
/// (Debian 12's), once for every `run`. Else `/tmp`: a container's
/// `/dev/shm` (64 MiB under Docker and Podman) is left to what it is for,
/// since a session's directory may keep a Gradle daemon's log. Not
/// `$XDG_RUNTIME_DIR`, although it is a tmpfs where it is set: no policy
/// grants it, so the session directory would become a root of its own in
/// every report, made before the policy is prepared, and found in one place
/// or another depending on how the agent was started (doc/security.md,
/// "The confined command's environment").
fn sessions_parent() -> &'static Path {
    static PARENT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    Path::new(PARENT.get_or_init(|| {
        if sys::on_tmpfs_of_at_least(c"/dev/shm", SHM_AT_LEAST) {
            "/dev/shm"
        } else {
            "/tmp"
        }
    }))
}

/// The smallest `/dev/shm` sessions' directories are made in: 1 GiB.
const SHM_AT_LEAST: u64 = 1 << 30;

/// FNV-1a, 64 bits: a stable name, not a secret.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// pnpm's default store directory, as pnpm computes it (`@pnpm/config`:
/// `pnpmHomeDir` is `$PNPM_HOME`, else the XDG data home's `pnpm`).
pub(crate) fn pnpm_store(
    env: &dyn Fn(&str) -> Option<OsString>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(pnpm_home) = absolute("PNPM_HOME") {
        return Some(pnpm_home.join("store"));
    }
    let data = absolute("XDG_DATA_HOME").or_else(|| home.map(|h| h.join(".local/share")))?;
    Some(data.join("pnpm/store"))
}

/// Sets each applied setting on `cmd`, unless the caller chose the
/// variable for this command ([`Command::env`] or [`Command::env_remove`]).
/// The session directory is made first; when it cannot be, the settings
/// that name it are left out (the tools then use their defaults, which
/// the sandbox's other rules still confine) and the error is returned.
pub(crate) fn apply(settings: &[Setting], cmd: &mut Command) -> io::Result<()> {
    let chosen: Vec<OsString> = cmd.get_envs().map(|(k, _)| k.to_os_string()).collect();
    let (set, made) = to_set(settings, &|name| chosen.iter().any(|k| k == name));
    for (variable, value) in set {
        cmd.env(variable, value);
    }
    made
}

/// The variables of `settings` a command gets, where neither this process
/// nor the command (`chosen`) sets them, making the session directory they
/// name; with the error of making it (its variables are then left out).
pub(crate) fn to_set<'a>(
    settings: &'a [Setting],
    chosen: &dyn Fn(&str) -> bool,
) -> (Vec<(&'static str, &'a OsString)>, io::Result<()>) {
    let made = match &session_dir_of(settings) {
        Some(dir) => make_session_dir(dir),
        None => Ok(()),
    };
    let set = settings
        .iter()
        .filter(|s| s.applied() && !chosen(s.variable))
        .filter(|s| !(s.in_session && made.is_err()))
        .map(|s| (s.variable, &s.value))
        .collect();
    (set, made)
}

/// Makes the session directory `dir` (`/dev/shm/strument-sandbox-<uid>/<key>`
/// or the same in `/tmp`) and returns it open: the one place the sandbox creates directories for
/// the environment. Unconfined, in a temp root a confined command (or
/// another user) can write, so each level is made and opened beneath the
/// descriptor of the level above, with `O_NOFOLLOW`: a symlink planted at
/// either name is refused, not followed. The per-user level must be this
/// user's and closed to others (mode `0700`), as tmux demands of its own.
///
/// # Errors
///
/// The OS error of `mkdirat`/`openat`, or `PermissionDenied` when the
/// per-user directory belongs to someone else or others may write in it.
pub(crate) fn make_session_dir(dir: &Path) -> io::Result<()> {
    let (parent, user, key) =
        session_levels(dir).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let user_dir = dir.parent().unwrap_or(dir);
    // The temp root itself (`/tmp`) is trusted: no confined command can
    // replace it. Below it, nothing is followed.
    let parent = Dir::anchor(parent)?;
    let user = parent.make_open_dir(user, 0o700)?;
    let (owner, mode) = user.owner()?;
    if owner != sys::uid() || mode & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not this user's alone (owner {owner}, mode {:o})",
                user_dir.display(),
                mode & 0o7777
            ),
        ));
    }
    user.make_dir(key, 0o700)?;
    Ok(())
}

/// The session directory `settings` name (the one `TMUX_TMPDIR` holds).
pub(crate) fn session_dir_of(settings: &[Setting]) -> Option<PathBuf> {
    settings
        .iter()
        .find(|s| s.variable == "TMUX_TMPDIR")
        .map(|s| PathBuf::from(&s.value))
}

/// A session directory's three levels: the temp root, the per-user
/// directory's name and the session's key.
fn session_levels(dir: &Path) -> Option<(&Path, &OsStr, &OsStr)> {
    let key = dir.file_name()?;
    let user_dir = dir.parent()?;
    Some((user_dir.parent()?, user_dir.file_name()?, key))
}

/// Removes the session directory `dir` ([`session_dir_of`]) when nothing
/// was left in it: a daemon a command left there (a tmux server's socket)
/// keeps it. Reached beneath the per-user directory, opened through no
/// symlink, as [`make_session_dir`] made it. Best effort: nothing to report
/// if it fails.
pub(crate) fn remove_session_dir(dir: &Path) {
    let Some((parent, user, key)) = session_levels(dir) else {
        return;
    };
    let _ = Dir::anchor(parent)
        .and_then(|parent| parent.dir(Path::new(user)))
        .and_then(|user| user.remove_empty_dir(key));
}

#[cfg(feature = "serde")]
impl serde::Serialize for Setting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut o = s.serialize_struct("Setting", 6)?;
        o.serialize_field("tool", self.tool)?;
        o.serialize_field("variable", self.variable)?;
        o.serialize_field("value", &self.value.to_string_lossy())?;
        o.serialize_field("why", self.why)?;
        o.serialize_field("applied", &self.applied())?;
        o.serialize_field("caller", &self.caller.as_ref().map(|c| c.to_string_lossy()))?;
        o.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::ffi::OsStr;

    fn report(project: &Path) -> Report {
        crate::testing::report_writable([crate::Root::new(project, Origin::Project)])
    }

    #[test]
    fn the_caller_keeps_what_it_set_and_the_session_is_per_project() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        // A PATH with a pnpm on it: its rows are there only then.
        let bin = tempfile::tempdir().expect("tempdir");
        std::fs::write(bin.path().join("pnpm"), "").expect("pnpm");
        let vars: HashMap<&str, OsString> = [
            ("UV_LINK_MODE", "hardlink".into()),
            ("PATH", bin.path().into()),
        ]
        .into();
        let env = |name: &str| vars.get(name).cloned();
        let got = settings_for(&report(a.path()), &env, Some("/home/u".as_ref()), 1000);
        let by = |v: &str| got.iter().find(|s| s.variable == v).cloned();
        let uv = by("UV_LINK_MODE").expect("uv row");
        assert!(!uv.applied());
        assert_eq!(uv.caller, Some("hardlink".into()));
        let tmux = by("TMUX_TMPDIR").expect("tmux row");
        assert!(tmux.applied());
        assert!(
            Path::new(&tmux.value).starts_with(sessions_parent().join("strument-sandbox-1000")),
            "{tmux:?}"
        );
        assert_eq!(
            by("npm_config_store_dir").map(|s| s.value),
            Some("/home/u/.local/share/pnpm/store".into())
        );
        let other = settings_for(&report(b.path()), &env, None, 1000);
        let no_pnpm = settings_for(&report(b.path()), &|_| None, Some("/home/u".as_ref()), 1000);
        assert!(no_pnpm.iter().all(|s| s.tool != "pnpm"));
        let other_tmux = other.iter().find(|s| s.variable == "TMUX_TMPDIR");
        assert_ne!(other_tmux.map(|s| &s.value), Some(&tmux.value));
        // No home and no variable: pnpm's row is left out, not guessed.
        assert!(other.iter().all(|s| s.variable != "npm_config_store_dir"));
    }

    #[test]
    fn a_command_that_names_a_variable_keeps_its_own() {
        let project = tempfile::tempdir().expect("tempdir");
        let env = |_: &str| None;
        let got = settings_for(&report(project.path()), &env, None, sys::uid());
        let mut cmd = Command::new("true");
        cmd.env("UV_LINK_MODE", "symlink");
        apply(&got, &mut cmd).expect("session dir");
        let envs: HashMap<_, _> = cmd.get_envs().collect();
        assert_eq!(
            envs.get(OsStr::new("UV_LINK_MODE")),
            Some(&Some(OsStr::new("symlink")))
        );
        assert!(envs.contains_key(OsStr::new("TMUX_TMPDIR")));
    }

    #[test]
    fn a_symlink_planted_at_the_session_dir_is_not_followed() {
        let scratch = tempfile::tempdir().expect("tempdir");
        let user = scratch.path().join("strument-sandbox-x");
        let target = scratch.path().join("elsewhere");
        std::fs::create_dir(&target).expect("mkdir");
        std::fs::create_dir(&user).expect("mkdir");
        std::fs::set_permissions(&user, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod");
        std::os::unix::fs::symlink(&target, user.join("key")).expect("symlink");
        let err = make_session_dir(&user.join("key")).expect_err("a symlink is refused");
        // O_NOFOLLOW | O_DIRECTORY on a symlink: ENOTDIR (ELOOP without
        // O_DIRECTORY).
        assert!(
            matches!(err.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)),
            "{err}"
        );
        assert!(std::fs::read_dir(&target).expect("ls").next().is_none());
        // The same with the per-user level a symlink.
        std::fs::remove_file(user.join("key")).expect("rm");
        let link = scratch.path().join("strument-sandbox-y");
        std::os::unix::fs::symlink(&user, &link).expect("symlink");
        assert!(make_session_dir(&link.join("key")).is_err());
        assert!(!user.join("key").exists());
        // Granted: a fresh one is made, 0700.
        let fresh = scratch.path().join("strument-sandbox-z/key");
        make_session_dir(&fresh).expect("made");
        assert!(fresh.is_dir());
    }
}
