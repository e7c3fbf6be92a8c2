//! After the fact: the writes the kernel refused a command, each with what
//! would have let it through.
//!
//! The unconfined parent traces its confined child. A seccomp filter
//! (`denials/filter.rs`) stops the write-shaped system calls only, for the tracer;
//! the tracer (`denials/trace.rs`) lets each run and reads its result at its exit. A
//! call that failed with `EACCES`, `EPERM` or `EXDEV` is a candidate, and
//! [`Report::explain`] decides whether the sandbox refused it: what the
//! kernel really answered, judged by the same model as `explain`. Works
//! for an ordinary user on every kernel with Landlock (ABI 1 on): `ptrace`
//! of one's own child needs no privilege.

mod filter;
mod trace;

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::TraceError;
use crate::explain::{Explanation, Verdict};
use crate::refusals::{self, Refusal};
use crate::report::Report;
use crate::sys;
use crate::terminal::TerminalFilter;
pub use crate::wait::Tracing;
use crate::wait::{TraceState, Waiter};
use filter::TraceFilter;
use trace::Failed;

/// At most this many distinct refusals are kept; later ones are counted in
/// [`Denied::dropped`], so a command that retries forever cannot exhaust
/// the caller's memory.
pub const MAX_DENIALS: usize = 1000;

/// What a refused system call asked to do to the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum Operation {
    /// Opening an existing file for writing (or truncating it on open).
    Write,
    /// Creating a file (`open` with `O_CREAT`, `creat`).
    Create,
    /// Creating a directory.
    MakeDir,
    /// Creating a device, fifo or socket file (`mknod`).
    MakeNode,
    /// Removing a file (`unlink`).
    Remove,
    /// Removing a directory (`rmdir`, `unlinkat(AT_REMOVEDIR)`).
    RemoveDir,
    /// Moving (renaming) a file: from the first path to the second.
    Rename,
    /// Making a hard link: to the first path, as the second.
    Link,
    /// Creating a symlink.
    Symlink,
    /// Truncating a file by name (`truncate`).
    Truncate,
}

impl Operation {
    /// A short stable name, for programs: `write`, `create`, `make-dir`,
    /// `make-node`, `remove`, `remove-dir`, `rename`, `link`, `symlink`,
    /// `truncate`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::denials::Operation::MakeDir.name(), "make-dir");
    /// ```
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Operation::Write => "write",
            Operation::Create => "create",
            Operation::MakeDir => "make-dir",
            Operation::MakeNode => "make-node",
            Operation::Remove => "remove",
            Operation::RemoveDir => "remove-dir",
            Operation::Rename => "rename",
            Operation::Link => "link",
            Operation::Symlink => "symlink",
            Operation::Truncate => "truncate",
        }
    }

    /// The operation in words, before its path: `creating the directory`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::denials::Operation::Remove.describe(), "removing");
    /// ```
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Operation::Write => "writing",
            Operation::Create => "creating",
            Operation::MakeDir => "creating the directory",
            Operation::MakeNode => "creating the special file",
            Operation::Remove => "removing",
            Operation::RemoveDir => "removing the directory",
            Operation::Rename => "moving",
            Operation::Link => "hard-linking",
            Operation::Symlink => "creating the symlink",
            Operation::Truncate => "truncating",
        }
    }
}

/// One path of a refused call, judged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DeniedPath {
    /// The path as the program gave it.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serialize::path"))]
    pub given: PathBuf,
    /// Made absolute against the directory it was relative to (the
    /// process's working directory or the call's directory descriptor),
    /// read while the process was stopped in the call; `None` when that
    /// directory could not be read.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serialize::path_opt")
    )]
    pub absolute: Option<PathBuf>,
    /// [`Report::explain`]'s answer for [`DeniedPath::absolute`]: which
    /// inode the kernel checks, and the root granting it or the smallest
    /// `--allow` that would; or why it cannot be judged (`{"error": …}` in
    /// JSON).
    #[cfg_attr(feature = "serde", serde(serialize_with = "explanation_or_error"))]
    pub explanation: Result<Explanation, String>,
    /// Whether the file system's own permissions (mode and owner, ACLs, a
    /// read-only mount) let this user do it; when they do not, granting
    /// the path alone would not make the call succeed.
    pub permitted: bool,
    /// When no root grants it because the place is refused on purpose
    /// (rustup's home, `~/.cargo/bin`, the Nix store, …): what the place is,
    /// why, and what to do instead ([`refusals::on_purpose`]). An `--allow`
    /// is then not the answer, and [`Denial::allow`] leaves it out.
    pub on_purpose: Option<Refusal>,
}

/// Who refused a call, as [`Report::explain`] and the kernel's errno tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum RefusedBy {
    /// The sandbox: no root grants a path the call writes (see its
    /// [`DeniedPath::explanation`]).
    Sandbox,
    /// The sandbox, moving or linking between two granted places
    /// (`EXDEV`): Landlock ABI 1 refuses every move to another directory,
    /// and later ABIs a move that would give the file rights it did not have.
    SandboxMove,
    /// Not the sandbox: the file system itself refuses it, confined or not
    /// (owner and mode, a read-only mount: [`DeniedPath::permitted`] is
    /// false), or a root grants every path, so something else did (an
    /// immutable file, sticky `/tmp`, another security module).
    FileSystem,
    /// Cannot tell: a path could not be read or resolved.
    Unknown,
}

impl RefusedBy {
    /// A short stable name: `sandbox`, `sandbox-move`, `file-system`, `unknown`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::denials::RefusedBy::FileSystem.name(), "file-system");
    /// ```
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            RefusedBy::Sandbox => "sandbox",
            RefusedBy::SandboxMove => "sandbox-move",
            RefusedBy::FileSystem => "file-system",
            RefusedBy::Unknown => "unknown",
        }
    }
}

/// One write the kernel refused a command: the same call on the same
/// paths with the same answer, however many times it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Denial {
    /// What the call asked.
    pub operation: Operation,
    /// The system call: `openat`, `mkdir`, `renameat2`, …
    pub syscall: &'static str,
    /// The errno it failed with: `EACCES`, `EPERM` or `EXDEV`.
    pub errno: i32,
    /// The name of the process that made it first (`/proc/PID/comm`).
    pub program: String,
    /// Its paths: one, or for a rename or link the source and the destination.
    pub paths: Vec<DeniedPath>,
    /// Who refused it.
    pub refused_by: RefusedBy,
    /// How many times it was made and refused.
    pub count: u64,
}

impl Denial {
    /// The paths a root would have to grant, each with the smallest root
    /// that would: those no root grants now.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::Policy;
    ///
    /// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
    /// let denied = prepared.status_with_denials(Command::new("make").arg("install"))?;
    /// for denial in &denied.denials {
    ///     for allow in denial.allow() {
    ///         eprintln!("{denial}: --allow {}", allow.display());
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn allow(&self) -> Vec<PathBuf> {
        self.paths
            .iter()
            .filter(|p| p.on_purpose.is_none())
            .filter_map(|p| needed_root(self.operation, p))
            .map(|(allow, _)| allow)
            .collect()
    }

    /// The errno's symbolic name.
    fn errno_name(&self) -> &'static str {
        match self.errno {
            libc::EACCES => "EACCES",
            libc::EPERM => "EPERM",
            libc::EXDEV => "EXDEV",
            _ => "error",
        }
    }
}

impl std::fmt::Display for Denial {
    /// One line: what was refused, the call as made, and why or what to
    /// allow.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |p: &DeniedPath| {
            p.absolute
                .as_ref()
                .unwrap_or(&p.given)
                .display()
                .to_string()
        };
        let targets: Vec<String> = self.paths.iter().map(shown).collect();
        let joiner = if self.operation == Operation::Link {
            " as "
        } else {
            " to "
        };
        write!(
            f,
            "refused {} {}",
            self.operation.describe(),
            targets.join(joiner)
        )?;
        // The paths as given, where they differ from the absolute ones above.
        let mut call = format!("{}: {}", self.program, self.syscall);
        for p in &self.paths {
            match &p.absolute {
                Some(a) if a == &p.given => {}
                Some(a) => {
                    let dir = a.parent().unwrap_or(a);
                    call.push_str(&format!(" {:?} in {}", p.given, dir.display()));
                }
                None => call.push_str(&format!(" {:?}", p.given)),
            }
        }
        write!(f, " ({call}, {})", self.errno_name())?;
        match self.refused_by {
            RefusedBy::Sandbox => {
                let mut first = true;
                for p in &self.paths {
                    let Ok(e) = &p.explanation else { continue };
                    let Verdict::Denied { allow, skipped } = &e.verdict else {
                        continue;
                    };
                    f.write_str(if first { ": " } else { "; " })?;
                    first = false;
                    if self.paths.len() > 1 {
                        write!(f, "{}: ", shown(p))?;
                    }
                    if let Some(refusal) = &p.on_purpose {
                        write!(f, "{refusal}")?;
                        continue;
                    }
                    let (allow, in_directory) =
                        needed_root(self.operation, p).unwrap_or((allow.clone(), false));
                    if in_directory {
                        write!(
                            f,
                            "no root grants {}, the directory it is in",
                            allow.display()
                        )?;
                    } else if e.exists {
                        f.write_str("no root grants it")?;
                    } else {
                        write!(
                            f,
                            "no root grants {}, where it would be created",
                            e.checked.display()
                        )?;
                    }
                    for s in skipped {
                        write!(
                            f,
                            " (the policy lists {}, but it grants nothing: {})",
                            s.path.display(),
                            s.reason
                        )?;
                    }
                    write!(f, "; to allow it: --allow {}", allow.display())?;
                    if !p.permitted {
                        f.write_str(
                            ", though the file system's own permissions refuse it too, \
                             so --allow alone would not do",
                        )?;
                    }
                }
            }
            RefusedBy::SandboxMove => {
                let roots = granting_roots(&self.paths);
                if roots.len() == 1 {
                    write!(
                        f,
                        ": both ends are writable (granted by {}), but Landlock ABI 1 refuses \
                         every move to another directory (Linux 5.19, ABI 2, lifts it)",
                        roots.join(" and ")
                    )?;
                } else {
                    write!(
                        f,
                        ": both ends are writable (granted by {}), but the sandbox lets a \
                         file move between roots only where it gains no rights",
                        roots.join(" and ")
                    )?;
                }
            }
            RefusedBy::FileSystem => {
                let roots = granting_roots(&self.paths);
                let granted = if roots.is_empty() {
                    "outside the roots too".to_owned()
                } else {
                    format!("{} grants it", roots.join(" and "))
                };
                write!(
                    f,
                    ": not the sandbox ({granted}): the file system itself refuses it \
                     (owner and mode, a read-only mount, an immutable file), confined or not"
                )?;
            }
            RefusedBy::Unknown => {
                let why: Vec<&str> = self
                    .paths
                    .iter()
                    .filter_map(|p| p.explanation.as_ref().err().map(String::as_str))
                    .collect();
                write!(f, ": cannot tell why: {}", why.join("; "))?;
            }
        }
        if self.count > 1 {
            write!(f, " ({} times)", self.count)?;
        }
        Ok(())
    }
}

/// The smallest root that would let `operation` through at `p`, when no
/// root grants it, and whether that is the directory `p` is in:
/// [`Report::explain`]'s answer, except that an existing entry removed,
/// moved or replaced is a change to its directory, which only a root over
/// the directory grants (a file root grants writing the file alone).
fn needed_root(operation: Operation, p: &DeniedPath) -> Option<(PathBuf, bool)> {
    let Ok(e) = &p.explanation else { return None };
    let Verdict::Denied { allow, .. } = &e.verdict else {
        return None;
    };
    let changes_entry = !matches!(operation, Operation::Write | Operation::Truncate);
    match e.checked.parent() {
        Some(dir) if e.exists && changes_entry => Some((dir.to_path_buf(), true)),
        _ => Some((allow.clone(), false)),
    }
}

/// [`DeniedPath::explanation`] in JSON: the explanation, or `{"error": why}`.
#[cfg(feature = "serde")]
fn explanation_or_error<S: serde::Serializer>(
    explanation: &Result<Explanation, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    use serde::ser::SerializeMap;
    match explanation {
        Ok(e) => e.serialize(s),
        Err(why) => {
            let mut m = s.serialize_map(Some(1))?;
            m.serialize_entry("error", why)?;
            m.end()
        }
    }
}

/// The roots granting `paths`, each named once.
fn granting_roots(paths: &[DeniedPath]) -> Vec<String> {
    let mut roots: Vec<String> = Vec::new();
    for p in paths {
        if let Ok(Explanation {
            verdict: Verdict::Granted(root),
            ..
        }) = &p.explanation
        {
            let root = root.path.display().to_string();
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
    }
    roots
}

/// What [`Prepared::status_with_denials`](crate::Prepared::status_with_denials)
/// observed: how the command ended and the writes it was refused.
#[derive(Debug)]
#[non_exhaustive]
pub struct Denied {
    /// The command's pid, for [`Prepared::refused_connects`](crate::Prepared::refused_connects).
    pub command: u32,
    /// How the command ended.
    pub status: ExitStatus,
    /// Each distinct refused write, in the order first met, at most
    /// [`MAX_DENIALS`]; writes refused by the file system rather than the
    /// sandbox are here too, marked [`RefusedBy::FileSystem`].
    pub denials: Vec<Denial>,
    /// Refused writes not kept, past [`MAX_DENIALS`] distinct ones.
    pub dropped: u64,
}

/// Collects the failed calls the tracer hears of into [`Denial`]s.
struct Collector<'r> {
    report: &'r Report,
    abi: u32,
    denials: Vec<Denial>,
    index: HashMap<Key, usize>,
    dropped: u64,
}

/// What makes two refusals the same one.
#[derive(PartialEq, Eq, Hash)]
struct Key {
    syscall: &'static str,
    errno: i32,
    paths: Vec<PathBuf>,
}

impl Collector<'_> {
    fn add(&mut self, failed: Failed) {
        let key = Key {
            syscall: failed.call.name,
            errno: failed.errno,
            paths: failed
                .paths
                .iter()
                .map(|(given, absolute)| absolute.as_ref().unwrap_or(given).clone())
                .collect(),
        };
        if let Some(&i) = self.index.get(&key) {
            self.denials[i].count += 1;
            return;
        }
        if self.denials.len() >= MAX_DENIALS {
            self.dropped += 1;
            return;
        }
        if let Some(denial) = judge(self.report, self.abi, failed) {
            self.index.insert(key, self.denials.len());
            self.denials.push(denial);
        }
    }
}

/// Judges a failed call: who refused it, and for each path what would
/// grant it. `None` when it was no refusal at all: a rename between two
/// granted places on different mounts, the kernel's own `EXDEV`, which
/// `mv` answers by copying.
fn judge(report: &Report, abi: u32, failed: Failed) -> Option<Denial> {
    let mut operation = failed.operation;
    let paths: Vec<DeniedPath> = failed
        .paths
        .into_iter()
        .map(|(given, absolute)| {
            let explanation = match &absolute {
                Some(a) => report.explain(a).map_err(|e| e.to_string()),
                None => Err(format!(
                    "the directory {} is relative to could not be read",
                    given.display()
                )),
            };
            let permitted = explanation
                .as_ref()
                .is_ok_and(|e| file_system_permits(operation, e));
            let on_purpose = match (&explanation, &absolute) {
                (
                    Ok(Explanation {
                        verdict: Verdict::Denied { .. },
                        ..
                    }),
                    Some(a),
                ) => on_purpose(report, a),
                _ => None,
            };
            DeniedPath {
                given,
                absolute,
                explanation,
                permitted,
                on_purpose,
            }
        })
        .collect();
    // `open(O_CREAT)` of a file that exists writes it.
    if operation == Operation::Create
        && paths
            .first()
            .is_some_and(|p| p.explanation.as_ref().is_ok_and(|e| e.exists))
    {
        operation = Operation::Write;
    }
    let granted_by = |p: &DeniedPath| match &p.explanation {
        Ok(Explanation {
            verdict: Verdict::Granted(root),
            ..
        }) => Some(root.path.clone()),
        _ => None,
    };
    // Exhaustive on purpose: a new kind of verdict must be judged here.
    let outside = |p: &DeniedPath| match &p.explanation {
        Ok(e) => match &e.verdict {
            Verdict::Denied { .. } => true,
            Verdict::Granted(_) => false,
        },
        Err(_) => false,
    };
    let roots: Vec<PathBuf> = paths.iter().filter_map(granted_by).collect();
    let all_granted = roots.len() == paths.len();
    // A write the file system's own permissions refuse fails unconfined
    // too: no --allow would make it land, so it is reported as theirs.
    let refused_by = if paths.iter().any(|p| outside(p) && p.permitted) {
        RefusedBy::Sandbox
    } else if paths.iter().any(|p| p.explanation.is_ok() && !p.permitted) {
        RefusedBy::FileSystem
    } else if !all_granted {
        RefusedBy::Unknown
    } else if failed.errno == libc::EXDEV {
        // Both ends granted: Landlock's refer rule, or a mount boundary.
        let same_root = roots.windows(2).all(|w| w[0] == w[1]);
        if abi == 1 || !same_root {
            RefusedBy::SandboxMove
        } else {
            return None;
        }
    } else {
        RefusedBy::FileSystem
    };
    Some(Denial {
        operation,
        syscall: failed.call.name,
        errno: failed.errno,
        program: failed.program,
        paths,
        refused_by,
        count: 1,
    })
}

/// The place refused on purpose that `path` is in, if any, in the words of
/// [`refusals::on_purpose`] (which reads a command's error output: here,
/// the one line a refused write of `path` would print).
fn on_purpose(report: &Report, path: &std::path::Path) -> Option<Refusal> {
    use std::os::unix::ffi::OsStrExt;
    let mut line = path.as_os_str().as_bytes().to_vec();
    line.extend_from_slice(b": Permission denied");
    refusals::on_purpose(report, &line).into_iter().next()
}

/// Whether the file system's own permissions let this user do
/// `operation` where `e` says the kernel checks: write the file itself, or
/// change the directory an entry is made in or removed from.
fn file_system_permits(operation: Operation, e: &Explanation) -> bool {
    let (path, mode) = match operation {
        Operation::Write | Operation::Truncate if e.exists => (e.checked.as_path(), libc::W_OK),
        _ if e.exists => (
            e.checked.parent().unwrap_or(&e.checked),
            libc::W_OK | libc::X_OK,
        ),
        _ => (e.checked.as_path(), libc::W_OK | libc::X_OK),
    };
    sys::permitted(path, mode).is_ok()
}

/// Why this process cannot trace its child, when it can tell beforehand.
fn untraceable() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let tracer = status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(0);
    if tracer != 0 {
        return Some(format!(
            "this process is itself traced (by pid {tracer}), and its children would be too: a \
             process has one tracer"
        ));
    }
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok()?;
    match scope.trim() {
        "3" => Some("ptrace is disabled on this machine (kernel.yama.ptrace_scope = 3)".into()),
        // Root has CAP_SYS_PTRACE.
        "2" if sys::uid() != 0 => Some(
            "ptrace needs CAP_SYS_PTRACE on this machine (kernel.yama.ptrace_scope = 2)".into(),
        ),
        _ => None,
    }
}

/// [`Prepared::status_with_denials_waiting`](crate::Prepared::status_with_denials_waiting):
/// runs `cmd` under `ruleset` and `filter`, traced on a thread of its
/// own while `waiter` watches, and judges what it was refused against
/// `report`.
pub(crate) fn status_with_denials(
    report: &Report,
    ruleset: &Arc<OwnedFd>,
    filter: &TerminalFilter,
    connect: crate::connect::ChildHook,
    cmd: &mut Command,
    waiter: &mut dyn Waiter,
) -> Result<Denied, TraceError> {
    let trace_filter = TraceFilter::new().ok_or(TraceError::Architecture)?;
    if let Some(why) = untraceable() {
        return Err(TraceError::Untraceable(why));
    }
    // The session's variables are on `cmd` already (`set_environment`):
    // none to add in the child.
    sys::confine_before_exec(
        cmd,
        Arc::clone(ruleset),
        filter.clone(),
        connect,
        Vec::new(),
    );
    // The write-shaped calls stop for the parent, which traces the child.
    sys::trace_before_exec(cmd, trace_filter.program());
    waiter.prepare_spawn(cmd);
    let mut collector = Collector {
        report,
        abi: report.landlock.abi,
        denials: Vec::new(),
        index: HashMap::new(),
        dropped: 0,
    };
    let tracing = Tracing {
        shared: TraceState::default(),
        done: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
        watcher: sys::thread_id(),
    };
    let mut command = 0;
    let raw = std::thread::scope(|scope| {
        let (spawned_tx, spawned_rx) = std::sync::mpsc::channel();
        let collector = &mut collector;
        let tracing = &tracing;
        // The tracer: the thread that spawns the command must be the one
        // that traces it, and waits only for its own children and tracees,
        // so the caller's other children are never reaped here.
        let tracer = scope.spawn(move || -> Result<libc::c_int, TraceError> {
            // Ctrl-Z is for the waiter to follow (Waiter::watch), never for
            // this thread to take.
            sys::block_job_control_here();
            let child = cmd.spawn();
            let pid = match child.as_ref().map(|c| libc::pid_t::try_from(c.id())) {
                Ok(Ok(pid)) => pid,
                _ => {
                    let _ = spawned_tx.send(None);
                    return Err(match child {
                        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                            TraceError::Untraceable(format!("ptrace refused: {e}"))
                        }
                        Err(e) => TraceError::Spawn(e),
                        Ok(_) => TraceError::Spawn(io::Error::other("pid out of range")),
                    });
                }
            };
            let _ = spawned_tx.send(Some(pid));
            let changed = |stopped: bool| {
                if stopped {
                    tracing.stopped.store(true, Ordering::SeqCst);
                }
                tracing.wake();
            };
            let result = trace::trace(pid, &tracing.shared, &mut |f| collector.add(f), &changed)
                .map_err(TraceError::Wait);
            tracing.done.store(true, Ordering::SeqCst);
            tracing.wake();
            result
        });
        let watched = match spawned_rx.recv() {
            Ok(Some(pid)) => {
                command = pid.unsigned_abs();
                waiter.watch(command, tracing)
            }
            _ => Ok(()),
        };
        let traced = tracer
            .join()
            .unwrap_or_else(|_| Err(TraceError::Wait(io::Error::other("the tracer panicked"))));
        watched.map_err(TraceError::Wait).and(traced)
    });
    let raw = raw?;
    Ok(Denied {
        command,
        status: ExitStatus::from_raw(raw),
        denials: collector.denials,
        dropped: collector.dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn failed(call: &'static str, errno: i32, paths: &[&Path]) -> Failed {
        let call = filter::tests_support::call(call);
        Failed {
            call,
            operation: call.operation,
            errno,
            program: "test".into(),
            paths: paths
                .iter()
                .map(|p| (p.to_path_buf(), Some(p.to_path_buf())))
                .collect(),
        }
    }

    #[test]
    fn explain_decides_who_refused() {
        let (_dir, base) = crate::testing::tree(&["root", "other", "out"]);
        let (root, other, out) = (base.join("root"), base.join("other"), base.join("out"));
        let report = crate::testing::report_writable([&root, &other]);
        // Outside every root: the sandbox, and the smallest --allow.
        let d = judge(
            &report,
            7,
            failed("mkdirat", libc::EACCES, &[&out.join("x")]),
        )
        .expect("a denial");
        assert_eq!(d.refused_by, RefusedBy::Sandbox);
        assert_eq!(d.allow(), [out.as_path()]);
        assert!(
            d.to_string()
                .contains(&format!("--allow {}", out.display())),
            "{d}"
        );
        // Inside a root: not the sandbox.
        let d = judge(
            &report,
            7,
            failed("mkdirat", libc::EACCES, &[&root.join("x")]),
        )
        .expect("a denial");
        assert_eq!(d.refused_by, RefusedBy::FileSystem);
        assert!(d.allow().is_empty());
        // Outside, but the file system refuses it anyway (a read-only
        // directory): its refusal, not the sandbox's.
        let locked = out.join("locked");
        std::fs::create_dir(&locked).expect("mkdir");
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o555))
            .expect("chmod");
        let d = judge(
            &report,
            7,
            failed("mkdirat", libc::EACCES, &[&locked.join("x")]),
        )
        .expect("a denial");
        let root_user = sys::uid() == 0;
        assert_eq!(
            d.refused_by,
            if root_user {
                RefusedBy::Sandbox
            } else {
                RefusedBy::FileSystem
            }
        );
        // EXDEV within one root is a mount boundary, not a refusal, except
        // on ABI 1, which refuses every move to another directory.
        let within = [root.join("a").as_path(), root.join("b/a").as_path()].map(Path::to_path_buf);
        let within: Vec<&Path> = within.iter().map(PathBuf::as_path).collect();
        assert!(judge(&report, 7, failed("renameat2", libc::EXDEV, &within)).is_none());
        let d = judge(&report, 1, failed("renameat2", libc::EXDEV, &within)).expect("a denial");
        assert_eq!(d.refused_by, RefusedBy::SandboxMove);
        // Between two roots: the refer rule.
        let between = [root.join("a"), other.join("a")];
        let between: Vec<&Path> = between.iter().map(PathBuf::as_path).collect();
        let d = judge(&report, 7, failed("renameat2", libc::EXDEV, &between)).expect("a denial");
        assert_eq!(d.refused_by, RefusedBy::SandboxMove);
        // Into a place outside: the sandbox, naming the destination only.
        let out_of = [root.join("a"), out.join("a")];
        let out_of: Vec<&Path> = out_of.iter().map(PathBuf::as_path).collect();
        let d = judge(&report, 7, failed("renameat2", libc::EXDEV, &out_of)).expect("a denial");
        assert_eq!(d.refused_by, RefusedBy::Sandbox);
        assert_eq!(d.allow(), std::slice::from_ref(&out));
        // Removing a file outside: its directory is what to grant, not the
        // file (a file root grants writing it, not removing it).
        std::fs::write(out.join("f"), "x").expect("write");
        let d = judge(
            &report,
            7,
            failed("unlinkat", libc::EACCES, &[&out.join("f")]),
        )
        .expect("a denial");
        assert_eq!(d.allow(), std::slice::from_ref(&out));
        assert!(d.to_string().contains("the directory it is in"), "{d}");
    }

    #[test]
    fn the_same_refusal_is_counted_once_and_the_list_is_capped() {
        let report = crate::testing::report_writable(["/tmp"]);
        let mut c = Collector {
            report: &report,
            abi: 7,
            denials: Vec::new(),
            index: HashMap::new(),
            dropped: 0,
        };
        for _ in 0..3 {
            c.add(failed(
                "mkdirat",
                libc::EACCES,
                &[Path::new("/no-such-dir/x")],
            ));
        }
        assert_eq!(c.denials.len(), 1);
        assert_eq!(c.denials[0].count, 3);
        for i in 0..MAX_DENIALS + 5 {
            let p = PathBuf::from(format!("/no-such-dir/{i}"));
            c.add(failed("mkdirat", libc::EACCES, &[&p]));
        }
        assert_eq!(c.denials.len(), MAX_DENIALS);
        assert_eq!(c.dropped, 6);
    }
}
