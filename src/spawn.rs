//! Starting a confined command without `std::process::Command`: the
//! fastest way from a prepared policy to a running child.
//!
//! [`Prepared::confine`](crate::Prepared::confine) hooks a
//! [`Command`](std::process::Command), which then `fork`s: the whole
//! caller's address space is marked copy-on-write, and the caller waits on
//! a pipe for the child's `exec`. [`Spawn`] instead builds everything the
//! child needs first (argument and environment strings, the `PATH`
//! candidates, the ruleset descriptor and the terminal filter) and starts
//! the child with `clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn` does:
//! the child restricts itself and execs without copying anything.
//!
//! What that saves grows with the caller: `fork` copies the page tables of
//! all the memory the caller has touched, so a `Prepared::confine` child
//! of an agent holding a few hundred megabytes costs milliseconds before it
//! runs a single instruction of its own, while a `Spawn` child costs the
//! same whatever the caller's size (doc/performance.md measures both from
//! a caller with a 256 MiB heap). A long-lived agent that starts many
//! commands should start them here; from async code, wait for the child on
//! a blocking thread (`tokio::task::spawn_blocking`).
//!
//! Standard input, output and error are inherited, or given instead
//! ([`Spawn::stdin_from`], [`Spawn::stdout_to`], [`Spawn::stderr_to`]:
//! the ends of a pipe or a socket pair to feed or read the command),
//! and only the descriptors above 2
//! the prepared policy keeps (see [`Prepared::keep_fds`](crate::Prepared::keep_fds)); the
//! environment gets the session's variables as with `confine` (see
//! [`Prepared::environment`](crate::Prepared::environment)).
//!
//! ```no_run
//! use strument_sandbox::{Policy, spawn::Spawn};
//!
//! let prepared = Policy { writable: vec!["/tmp".into()], ..Policy::default() }.prepare()?;
//! let mut child = Spawn::new("make").arg("test").spawn(&prepared)?;
//! let status = child.wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ffi::{CString, OsStr, OsString, c_char};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::fds;
use crate::prepared::Prepared;
use crate::sys;
/// A child [`Spawn::spawn`] started (defined beside [`Waiter`](crate::session::Waiter), which waits for it).
pub use crate::wait::Spawned;

/// A command line to start confined: program, arguments, environment and
/// working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Spawn {
    program: OsString,
    args: Vec<OsString>,
    env: Option<Vec<(OsString, OsString)>>,
    cwd: Option<PathBuf>,
    /// Descriptors the child gets as its standard input, output and error,
    /// by `dup2` before anything else (`(from, to)`, `to` 0, 1 or 2).
    redirect: Vec<(RawFd, RawFd)>,
}

impl Spawn {
    /// `program`, searched in `PATH` when its name has no `/` (as `execvp`
    /// and [`Command`](std::process::Command) do).
    ///
    /// # Examples
    ///
    /// ```
    /// let spawn = strument_sandbox::spawn::Spawn::new("go").args(["test", "./..."]);
    /// ```
    pub fn new(program: impl Into<OsString>) -> Spawn {
        Spawn {
            program: program.into(),
            args: Vec::new(),
            env: None,
            cwd: None,
            redirect: Vec::new(),
        }
    }

    /// One more argument.
    ///
    /// # Examples
    ///
    /// ```
    /// let spawn = strument_sandbox::spawn::Spawn::new("ls").arg("-l");
    /// ```
    pub fn arg(mut self, arg: impl Into<OsString>) -> Spawn {
        self.args.push(arg.into());
        self
    }

    /// More arguments.
    ///
    /// # Examples
    ///
    /// ```
    /// let spawn = strument_sandbox::spawn::Spawn::new("cargo").args(["build", "--release"]);
    /// ```
    pub fn args<I, S>(mut self, args: I) -> Spawn
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// The child's whole environment, instead of the caller's; its `PATH`
    /// is the one searched.
    ///
    /// # Examples
    ///
    /// ```
    /// let spawn = strument_sandbox::spawn::Spawn::new("/usr/bin/env").env([("LANG", "C")]);
    /// ```
    pub fn env<I, K, V>(mut self, vars: I) -> Spawn
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.env = Some(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        self
    }

    /// The directory the child starts in, instead of the caller's.
    ///
    /// # Examples
    ///
    /// ```
    /// let spawn = strument_sandbox::spawn::Spawn::new("make").current_dir("/home/me/project");
    /// ```
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Spawn {
        self.cwd = Some(dir.into());
        self
    }

    /// The child's standard input is `fd` instead of the caller's, as
    /// [`Spawn::stdout_to`] does for standard output: the reading end of a
    /// pipe or a socket the caller writes to, or `/dev/null` for a command
    /// that must not wait for a terminal.
    ///
    /// # Examples
    ///
    /// One socket pair as the command's input and output:
    ///
    /// ```no_run
    /// use std::io::{Read, Write};
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    /// use strument_sandbox::{Policy, spawn::Spawn};
    ///
    /// let prepared = Policy { writable: vec!["/tmp".into()], ..Policy::default() }.prepare()?;
    /// let (mut ours, theirs) = UnixStream::pair()?;
    /// let mut child = Spawn::new("sort")
    ///     .stdin_from(theirs.as_raw_fd())
    ///     .stdout_to(theirs.as_raw_fd())
    ///     .spawn(&prepared)?;
    /// // The child has its own copy: ours is closed, so that reading ends
    /// // with the child's output.
    /// drop(theirs);
    /// ours.write_all(b"b\na\n")?;
    /// ours.shutdown(std::net::Shutdown::Write)?;
    /// let mut sorted = String::new();
    /// ours.read_to_string(&mut sorted)?;
    /// assert!(child.wait()?.success());
    /// assert_eq!(sorted, "a\nb\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stdin_from(mut self, fd: RawFd) -> Spawn {
        self.redirect.retain(|(_, to)| *to != 0);
        self.redirect.push((fd, 0));
        self
    }

    /// The child's standard output is `fd` instead of the caller's: `fd`
    /// is duplicated onto descriptor 1 in the child, before it confines
    /// itself. The caller keeps `fd` open until [`Spawn::spawn`] returns
    /// (and closes it then, for a pipe to see its end with the child's).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::os::fd::AsRawFd;
    /// let log = std::fs::File::create("/tmp/out.log")?;
    /// let spawn = strument_sandbox::spawn::Spawn::new("make").stdout_to(log.as_raw_fd());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stdout_to(mut self, fd: RawFd) -> Spawn {
        self.redirect.retain(|(_, to)| *to != 1);
        self.redirect.push((fd, 1));
        self
    }

    /// The child's standard error is `fd` instead of the caller's, as
    /// [`Spawn::stdout_to`] does for standard output.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::os::fd::AsRawFd;
    /// let log = std::fs::File::create("/tmp/err.log")?;
    /// let spawn = strument_sandbox::spawn::Spawn::new("make").stderr_to(log.as_raw_fd());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stderr_to(mut self, fd: RawFd) -> Spawn {
        self.redirect.retain(|(_, to)| *to != 2);
        self.redirect.push((fd, 2));
        self
    }

    /// Starts the command confined by `prepared` and returns once it has
    /// exec'd. The child restricts itself exactly as with
    /// [`Prepared::confine`](crate::Prepared::confine) (`no_new_privs`, the
    /// terminal filter, `landlock_restrict_self`), then execs; it starts
    /// with an empty signal mask and every handled signal, `SIGPIPE`
    /// included, at its default action. The caller stays unconfined and
    /// may have other threads.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] when the program is not found,
    /// `PermissionDenied` when it cannot be executed, `InvalidInput` for a
    /// NUL byte in a string, or the error of confining or of `clone`.
    /// Nothing ran after any error.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use strument_sandbox::{Policy, spawn::Spawn};
    /// let prepared = Policy { writable: vec!["/tmp".into()], ..Policy::default() }.prepare()?;
    /// let status = Spawn::new("true").spawn(&prepared)?.wait()?;
    /// assert!(status.success());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn(&self, prepared: &Prepared) -> io::Result<Spawned> {
        self.spawn_served(prepared, false)
    }

    /// [`Spawn::spawn`]; with `by_caller`, the child's listener is watched
    /// by the caller until its first call (a [`Serving`](crate::session::Serving)
    /// of `prepared`'s supervisor), not by a thread started for it.
    pub(crate) fn spawn_served(&self, prepared: &Prepared, by_caller: bool) -> io::Result<Spawned> {
        let (ruleset, filter, keep) = prepared.child_parts();
        let chosen = |name: &str| {
            self.env
                .as_ref()
                .is_some_and(|vars| vars.iter().any(|(k, _)| k == name))
        };
        let extra = prepared.environment_to_set(&chosen);
        let supervisor = prepared.supervisor();
        let confine = Some((ruleset, filter));
        if sys::shares_tables() {
            // The child's listener lands in this process's table (the child
            // starts in it: no socket, no wait) and is watched by the
            // supervisor's thread from then on.
            let program = supervisor.program();
            let started = self.start(
                confine,
                Some(sys::Connect::Share(program)),
                Some(keep),
                &extra,
            );
            match started {
                Ok((pid, listener)) => {
                    let served = match listener {
                        Some(listener) => supervisor.serve_child(listener, pid, by_caller),
                        None => Err(io::Error::from_raw_os_error(libc::EBADF)),
                    };
                    // Without the supervisor nothing may run, as with
                    // `confine`: the child, whose connects would all fail,
                    // is stopped.
                    if let Err(e) = served {
                        sys::kill_and_reap(pid);
                        return Err(e);
                    }
                    return Ok(Spawned::started(pid));
                }
                // The child could not leave this process's table: started
                // again below, handing its listener over instead.
                Err(_) if !sys::shares_tables() => {}
                Err(e) => return Err(e),
            }
        }
        // The child hands its listener over, as a child of `confine` does.
        let hook = supervisor.hook()?;
        let connect = Some(sys::Connect::Send(hook.program(), hook.destination()));
        let (pid, _) = self.start(confine, connect, Some(keep), &extra)?;
        Ok(Spawned::started(pid))
    }

    /// Starts the command unconfined, by the same path: what confining adds
    /// is measured against this.
    #[doc(hidden)]
    pub fn spawn_unconfined(&self) -> io::Result<Spawned> {
        let (pid, _) = self.start(None, None, None, &[])?;
        Ok(Spawned::started(pid))
    }

    fn start(
        &self,
        confine: Option<(RawFd, &[crate::terminal::SockFilter])>,
        connect: Option<sys::Connect<'_>>,
        keep: Option<&[RawFd]>,
        extra_env: &[(&str, &OsString)],
    ) -> io::Result<(libc::pid_t, Option<std::os::fd::OwnedFd>)> {
        let mut env: Vec<CString> = match &self.env {
            Some(vars) => vars
                .iter()
                .map(|(k, v)| env_entry(k, v))
                .collect::<io::Result<_>>()?,
            None => std::env::vars_os()
                .map(|(k, v)| env_entry(&k, &v))
                .collect::<io::Result<_>>()?,
        };
        for (name, value) in extra_env {
            env.push(env_entry(OsStr::new(name), value)?);
        }
        let path = env
            .iter()
            .find_map(|e| e.to_bytes().strip_prefix(b"PATH="))
            .unwrap_or(b"/bin:/usr/bin");
        let candidates = candidates(self.program.as_bytes(), path)?;
        // Every descriptor above 2 but these is closed at `exec` (see
        // `Prepared::keep_fds`); the jobserver is the one `MAKEFLAGS` names
        // in the child's own environment.
        let keep = keep.map(|keep| {
            let makeflags = env
                .iter()
                .find_map(|e| e.to_bytes().strip_prefix(b"MAKEFLAGS="));
            fds::kept(keep, makeflags.map(OsStr::from_bytes))
        });
        let argv0 = c_string(self.program.as_bytes())?;
        let args = self
            .args
            .iter()
            .map(|a| c_string(a.as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        let cwd = self
            .cwd
            .as_ref()
            .map(|d| c_string(d.as_os_str().as_bytes()))
            .transpose()?;
        let (redirect, _copies) = redirect_plan(&self.redirect)?;
        let argv = null_terminated(std::iter::once(&argv0).chain(&args));
        let envp = null_terminated(&env);
        let mut shell_argv = vec![sys::SHELL.as_ptr(), std::ptr::null()];
        shell_argv.extend(args.iter().map(|a| a.as_ptr()));
        shell_argv.push(std::ptr::null());
        let mut plan = sys::Plan {
            candidates: &candidates,
            argv: &argv,
            envp: &envp,
            shell_argv: &mut shell_argv,
            cwd: cwd.as_deref(),
            redirect: &redirect,
            confine,
            connect,
            keep_fds: keep.as_deref(),
            hook: None,
        };
        sys::spawn(&mut plan)
    }
}

/// One `dup2` in the child: `(from, to)`.
type Redirect = (RawFd, RawFd);

/// The `dup2` steps of `redirect`, in the child's order, and the copies
/// they read from, which the caller keeps open until the spawn returns: a
/// descriptor given for one stream that is itself another stream's target
/// (`stdout_to(2)` with `stderr_to(1)`, or `stdin_from(1)`) is read from a
/// copy above 2, made here, so that no step overwrites what a later one
/// reads.
fn redirect_plan(redirect: &[(RawFd, RawFd)]) -> io::Result<(Vec<Redirect>, Vec<OwnedFd>)> {
    let mut steps = redirect.to_vec();
    let mut copies = Vec::new();
    for step in &mut steps {
        let (from, to) = *step;
        if from != to && redirect.iter().any(|&(_, other)| other == from) {
            let copy = sys::dup_above_stdio(from)?;
            step.0 = copy.as_raw_fd();
            copies.push(copy);
        }
    }
    Ok((steps, copies))
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// `key=value`, NUL-terminated, as `execve` takes each variable.
pub(crate) fn env_entry(key: &OsStr, value: &OsStr) -> io::Result<CString> {
    let mut entry = Vec::with_capacity(key.len() + value.len() + 2);
    entry.extend_from_slice(key.as_bytes());
    entry.push(b'=');
    entry.extend_from_slice(value.as_bytes());
    c_string(&entry)
}

/// The files `execvp` would try for `program`, in order: itself when its
/// name has a `/`, else `dir/program` for each directory of `path` (an
/// empty one meaning the current directory). A directory `path` names
/// twice (`~/.cargo/bin`, added by two shell profiles) is tried once: the
/// second `execve` of the same file could only fail as the first did.
fn candidates(program: &[u8], path: &[u8]) -> io::Result<Vec<CString>> {
    if program.is_empty() {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    if program.contains(&b'/') {
        return Ok(vec![c_string(program)?]);
    }
    let mut found: Vec<CString> = Vec::new();
    for dir in path.split(|b| *b == b':') {
        let candidate = if dir.is_empty() {
            c_string(program)?
        } else {
            let mut full = Vec::with_capacity(dir.len() + 1 + program.len());
            full.extend_from_slice(dir);
            full.push(b'/');
            full.extend_from_slice(program);
            c_string(&full)?
        };
        if !found.contains(&candidate) {
            found.push(candidate);
        }
    }
    Ok(found)
}

fn null_terminated<'a>(strings: impl IntoIterator<Item = &'a CString>) -> Vec<*const c_char> {
    strings
        .into_iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_file(a: RawFd, b: RawFd) -> bool {
        let stat = |fd: RawFd| {
            let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).expect("readlink");
            let meta = std::fs::metadata(format!("/proc/self/fd/{fd}")).expect("stat");
            (link, std::os::unix::fs::MetadataExt::ino(&meta))
        };
        stat(a) == stat(b)
    }

    #[test]
    fn a_stream_given_another_s_descriptor_reads_from_a_copy_made_first() {
        // Swapped output and error: each step reads a copy above 2 of what
        // the other overwrites.
        let (steps, copies) = redirect_plan(&[(2, 1), (1, 2)]).expect("dup");
        assert_eq!(copies.len(), 2);
        assert_eq!(steps.iter().map(|s| s.1).collect::<Vec<_>>(), [1, 2]);
        assert!(steps.iter().all(|s| s.0 > 2), "{steps:?}");
        assert!(same_file(steps[0].0, 2) && same_file(steps[1].0, 1));
        // Input from the caller's output, output elsewhere.
        let (steps, copies) = redirect_plan(&[(1, 0), (7, 1)]).expect("dup");
        assert_eq!(copies.len(), 1);
        assert!(steps[0].0 > 2 && same_file(steps[0].0, 1), "{steps:?}");
        assert_eq!(steps[1], (7, 1));
        // Nothing overwritten: given as they are, no copy.
        for plan in [&[(5, 0), (5, 1), (6, 2)][..], &[(1, 1), (2, 2)], &[(2, 1)]] {
            let (steps, copies) = redirect_plan(plan).expect("no dup");
            assert_eq!(steps, plan);
            assert!(copies.is_empty());
        }
    }

    #[test]
    fn path_search_tries_each_directory_in_order() {
        let found = candidates(b"true", b"/a:/b/c::/d").expect("no NUL");
        let found: Vec<&[u8]> = found.iter().map(|c| c.to_bytes()).collect();
        assert_eq!(found, [&b"/a/true"[..], b"/b/c/true", b"true", b"/d/true"]);
        // A directory named twice is tried once, where it first stands.
        let found = candidates(b"true", b"/a:/a:/b::/a:").expect("no NUL");
        let found: Vec<&[u8]> = found.iter().map(|c| c.to_bytes()).collect();
        assert_eq!(found, [&b"/a/true"[..], b"/b/true", b"true"]);
        let direct = candidates(b"./run.sh", b"/a").expect("no NUL");
        assert_eq!(direct[0].to_bytes(), b"./run.sh");
        assert!(candidates(b"", b"/a").is_err());
    }
}
