//! `run`: a command confined, the files that run later it changed, and
//! with `--explain-denials` the accesses the kernel refused it.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::{Command, ExitStatus};

use serde_json::{Value, json};
use strument_sandbox::denials::{Denial, Denied, RefusedBy};
use strument_sandbox::spawn::Spawn;
use strument_sandbox::{ApplyError, Finished, Report, SessionError, TraceError};

use strument_sandbox::refusals::{self, Refusal};

use crate::forward::SignalForwarder;
use crate::output::{environment_lines, json_with, report_lines};
use crate::sys;
use crate::tail::{self, Tailing};
use crate::{Failure, Roots, session_builder, status};

/// The flags of `run` beyond the roots and the command.
pub(crate) struct RunOptions {
    pub(crate) verbose: bool,
    pub(crate) create_caches: bool,
    pub(crate) explain_denials: bool,
    pub(crate) json: bool,
    /// Descriptors above 2 the command keeps (`--keep-fd`).
    pub(crate) keep_fds: Vec<i32>,
}

pub(crate) fn cmd_run(
    roots: &Roots,
    options: &RunOptions,
    command: &[OsString],
) -> Result<u8, Failure> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::new(2, "run: no command given after `--`"))?;
    let session = session_builder(roots)?
        .create_caches(options.create_caches)
        .keep_fds(options.keep_fds.iter().copied())
        .open()
        .map_err(refused)?;
    if options.verbose {
        for path in session.created_caches() {
            eprintln!("strument-sandbox: created {}", path.display());
        }
        print_report(session.report());
    } else {
        print_warnings(session.report());
    }
    // Blocked before the command starts, so no signal is lost in between.
    let mut forwarder = SignalForwarder::install()
        .map_err(|e| Failure::new(status::POLICY, format!("cannot block signals: {e}")))?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    let mut denials = None;
    let mut said = Vec::new();
    // What the command leaves running is adopted here, not by init, so the
    // connect supervisor may still take its sockets under Yama's
    // ptrace_scope 1 (sys::become_subreaper). Should the kernel refuse,
    // those processes get EPERM for every connect instead
    // (doc/security.md): nothing is let through. With --explain-denials
    // the tracer reaps them: traced by a thread of the process that
    // adopted them, they end as its own children would.
    let _ = sys::become_subreaper();
    let finished = if options.explain_denials {
        let (finished, denied) = session
            .run_explaining_denials(&mut cmd, &mut forwarder)
            .map_err(|e| match e {
                TraceError::Spawn(err) => cannot_run(program, &err),
                e => Failure::new(
                    status::CANNOT_TRACE,
                    format!("--explain-denials: {e}; nothing ran; {}", e.hint()),
                ),
            })?;
        print_denials(&denied);
        denials = Some(denied.denials);
        finished
    } else if !tail::wanted() {
        // On a terminal nothing is passed through: the command starts
        // without `Command`, with no copy of this process for the child
        // (`clone(CLONE_VM | CLONE_VFORK)`), everything built before.
        session
            .run_spawn(&Spawn::new(program).args(args), &mut forwarder)
            .map_err(|e| cannot_run(program, &e))?
    } else {
        // The command's standard error passed on with its end kept, so a
        // failure can be explained from the paths it names; started the
        // same way, its standard error a pipe of ours.
        let mut waiter = Tailing::new(&mut forwarder);
        let spawn = waiter.redirect(Spawn::new(program).args(args));
        let finished = session
            .run_spawn(&spawn, &mut waiter)
            .map_err(|e| cannot_run(program, &e))?;
        let said_last = waiter.finish();
        if !finished.status.success() {
            said = refusals::on_purpose(session.report(), &said_last);
        }
        finished
    };
    let code = exit_code(finished.status);
    if options.json {
        eprintln!("{}", run_json(code, &finished, &said, denials.as_deref()));
    } else {
        // One line a socket refused, after the command's own output.
        for refused in &finished.refused {
            eprintln!("strument-sandbox: {refused}");
        }
        for change in &finished.changes {
            eprintln!("strument-sandbox: {change}");
        }
        for refusal in &said {
            eprintln!("strument-sandbox: {refusal}");
        }
    }
    Ok(code)
}

/// Why the session did not open, with the exit status it maps to; the
/// home directory as the implicit project in the flags' words.
fn refused(e: SessionError) -> Failure {
    match e {
        SessionError::Apply(ApplyError::Unavailable(_)) => Failure::new(status::UNAVAILABLE, e),
        SessionError::HomeAsProject { dir, covers } => Failure::new(
            status::POLICY,
            format!(
                "refusing to run: the current directory {} is {covers}, and without --project it \
                 would be the project, writable whole; nothing ran. cd into the project, or name \
                 it: `strument-sandbox run --project ~/src/app -- CMD` (an explicit \
                 `--project {}` runs, with a warning)",
                dir.display(),
                dir.display()
            ),
        ),
        e => Failure::new(status::POLICY, e),
    }
}

/// `run --json`: how the command ended and what it changed that runs later.
fn run_json(code: u8, finished: &Finished, said: &[Refusal], denials: Option<&[Denial]>) -> Value {
    use std::os::unix::process::ExitStatusExt;
    // Each change with the line a person reads, as the tripwire prints it.
    let refused: Vec<Value> = finished
        .refused
        .iter()
        .map(|r| {
            json!({
                "target": r.target.to_string(),
                "service": r.service.map(|s| s.name()),
                "attempts": r.attempts,
                "allow_with": r.allow_with(),
                "listener": r.listener.as_ref().map(|l| json!({
                    "pid": l.pid,
                    "name": l.name,
                    "uid": l.uid,
                    "user": l.user,
                })),
                "detail": r.to_string(),
            })
        })
        .collect();
    let changes: Vec<Value> = finished
        .changes
        .iter()
        .map(|c| json_with(c, "line", json!(c.to_string())))
        .collect();
    let mut v = json!({
        "exit": code,
        "signal": finished.status.signal(),
        "changes": changes,
        "refused_on_purpose": said,
        "refused_connects": refused,
    });
    // With --explain-denials: each refused write, with the roots to allow
    // and the line a person reads.
    if let Some(denials) = denials {
        let denials: Vec<Value> = denials
            .iter()
            .map(|d| {
                let allow: Vec<String> = d
                    .allow()
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                json_with(
                    &json_with(d, "allow", json!(allow)),
                    "line",
                    json!(d.to_string()),
                )
            })
            .collect();
        v["denials"] = json!(denials);
    }
    v
}

/// Loud even without -v: a `/` root confines nothing, a writable home
/// defeats the point, and a skipped widening root is worth knowing about.
fn print_warnings(report: &Report) {
    for w in &report.warnings {
        eprintln!("strument-sandbox: warning: {w}");
    }
}

fn print_report(report: &Report) {
    for line in report_lines(report)
        .into_iter()
        .chain(environment_lines(report))
    {
        eprintln!("strument-sandbox: {line}");
    }
}

fn cannot_run(program: &OsString, err: &io::Error) -> Failure {
    let name = Path::new(program).display();
    match err.kind() {
        io::ErrorKind::NotFound => {
            Failure::new(status::NOT_FOUND, format!("{name}: command not found"))
        }
        _ => Failure::new(
            status::CANNOT_EXECUTE,
            format!("{name}: cannot execute: {err}"),
        ),
    }
}

/// At most this many refused writes are printed; `--json` lists them all.
const SHOWN_DENIALS: usize = 20;

/// `run --explain-denials`: each write the kernel refused the command, with
/// what would grant it, the sandbox's first.
fn print_denials(denied: &Denied) {
    let by_sandbox =
        |d: &&Denial| matches!(d.refused_by, RefusedBy::Sandbox | RefusedBy::SandboxMove);
    // The sandbox's refusals first: those are what an --allow changes.
    let (sandbox, others): (Vec<&Denial>, Vec<&Denial>) =
        denied.denials.iter().partition(by_sandbox);
    for denial in sandbox.iter().chain(&others).take(SHOWN_DENIALS) {
        eprintln!("strument-sandbox: {denial}");
    }
    let hidden = denied.denials.len().saturating_sub(SHOWN_DENIALS) as u64 + denied.dropped;
    if hidden > 0 {
        eprintln!(
            "strument-sandbox: … and {hidden} more refused writes (--json lists the first {})",
            strument_sandbox::denials::MAX_DENIALS
        );
    } else if sandbox.is_empty() {
        eprintln!("strument-sandbox: the sandbox refused no write");
    }
}

/// The shell's convention: the exit code, or 128 + the signal.
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        _ => 1,
    }
}
