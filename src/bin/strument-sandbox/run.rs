//! `run`: a command confined, the files that run later it changed, and
//! with `--explain-denials` the accesses the kernel refused it.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use strument_sandbox::{
    Advice, Change, DenialLogError, Prepared, RefusedConnect, Report, SignalForwarder, Snapshot,
    create_missing_caches,
};

use crate::output::report_lines;
use crate::{Failure, Roots, build_policy, status};

/// The flags of `run` beyond the roots and the command.
pub(crate) struct RunOptions {
    pub(crate) verbose: bool,
    pub(crate) create_caches: bool,
    pub(crate) explain_denials: bool,
    pub(crate) json: bool,
}

pub(crate) fn cmd_run(
    roots: &Roots,
    options: &RunOptions,
    command: &[OsString],
) -> Result<u8, Failure> {
    let verbose = options.verbose;
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::new(2, "run: no command given after `--`"))?;
    refuse_home_as_implicit_project(roots)?;
    // Before the policy is built: the cache home is granted by the
    // directories in it, so the ones made here must exist by then.
    if options.create_caches {
        for path in create_missing_caches() {
            if verbose {
                eprintln!("strument-sandbox: created {}", path.display());
            }
        }
    }
    let policy = build_policy(roots)?;
    let refused = |e: strument_sandbox::ApplyError| match e {
        strument_sandbox::ApplyError::Unavailable(_) => Failure::new(status::UNAVAILABLE, e),
        e => Failure::new(status::POLICY, e),
    };
    let prepared = policy.prepare().map_err(refused)?;
    if verbose {
        print_report(prepared.report());
    } else {
        print_warnings(prepared.report());
    }
    let before = Snapshot::take(&prepared);
    // Blocked before the command starts, so no signal is lost in between.
    let forwarder = SignalForwarder::install()
        .map_err(|e| Failure::new(status::POLICY, format!("cannot block signals: {e}")))?;
    let (status, pid) = if options.explain_denials {
        run_explaining_denials(&prepared, &forwarder, program, args)?
    } else {
        let mut cmd = Command::new(program);
        cmd.args(args);
        prepared.confine(&mut cmd);
        let child = forwarder
            .spawn(&mut cmd)
            .map_err(|e| cannot_run(program, &e))?;
        let pid = child.id();
        let status = forwarder
            .wait(child)
            .map_err(|e| Failure::new(status::POLICY, format!("waiting for the command: {e}")))?;
        (status, pid)
    };
    let refused = prepared.refused_connects(pid);
    let changes = before.changes();
    let code = exit_code(status);
    if options.json {
        eprintln!("{}", run_json(code, status, &changes, &refused));
    } else {
        // One line a socket refused, after the command's own output.
        for refused in &refused {
            eprintln!("strument-sandbox: {refused}");
        }
        for change in &changes {
            eprintln!("strument-sandbox: {change}");
        }
    }
    Ok(code)
}

/// `run --json`: how the command ended, what it changed that runs later,
/// and the sockets it was refused.
fn run_json(
    code: u8,
    status: std::process::ExitStatus,
    changes: &[Change],
    refused: &[RefusedConnect],
) -> Value {
    use std::os::unix::process::ExitStatusExt;
    let refused: Vec<Value> = refused
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
    json!({
        "exit": code,
        "signal": status.signal(),
        "changes": changes,
        "refused_connects": refused,
    })
}

/// Loud even without -v: a `/` root confines nothing, a writable home
/// defeats the point, and a skipped widening root is worth knowing about.
fn print_warnings(report: &Report) {
    for w in &report.warnings {
        eprintln!("strument-sandbox: warning: {w}");
    }
}

fn print_report(report: &Report) {
    for line in report_lines(report) {
        eprintln!("strument-sandbox: {line}");
    }
}

/// `run` without `--project` takes the current directory as the project:
/// started in the home directory (or `/`, or above home) that would make the
/// whole home writable, so it refuses and says how to name a project.
fn refuse_home_as_implicit_project(roots: &Roots) -> Result<(), Failure> {
    if roots.project.is_some() {
        return Ok(());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::new(status::POLICY, format!("current directory: {e}")))?;
    let Some(covers) = strument_sandbox::covers_home(&cwd) else {
        return Ok(());
    };
    Err(Failure::new(
        status::POLICY,
        format!(
            "refusing to run: the current directory {} is {covers}, and without --project it \
             would be the project, writable whole; nothing ran. cd into the project, or name \
             it: `strument-sandbox run --project ~/src/app -- CMD` (an explicit \
             `--project {}` runs, with a warning)",
            cwd.display(),
            cwd.display()
        ),
    ))
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

/// `run --explain-denials`: the command runs as a child, and afterwards
/// each refused access is printed with the root that would grant it.
fn run_explaining_denials(
    prepared: &Prepared,
    forwarder: &SignalForwarder,
    program: &OsString,
    args: &[OsString],
) -> Result<(std::process::ExitStatus, u32), Failure> {
    let audited = prepared
        .status_with_denials_forwarding(Command::new(program).args(args), forwarder)
        .map_err(|e| match e {
            DenialLogError::Spawn(err) => cannot_run(program, &err),
            e => Failure::new(
                status::NO_DENIAL_LOG,
                format!("--explain-denials: {e}; nothing ran; {}", e.hint()),
            ),
        })?;
    for denial in &audited.denials {
        let what = denial.what();
        let on = if denial.in_directory() { "in" } else { "on" };
        let (Some(path), Some(advice)) = (&denial.path, denial.advice(prepared.report())) else {
            eprintln!("strument-sandbox: refused {what}: {}", denial.record);
            continue;
        };
        let advice = match advice {
            Advice::Allow(allow) => format!(
                "no root grants it; to allow it: --allow {}",
                allow.display()
            ),
            other => other.to_string(),
        };
        eprintln!(
            "strument-sandbox: refused {what} {on} {}: {advice}",
            path.display()
        );
    }
    let logged = audited.denials.len() as u64;
    match audited.refused {
        Some(total) if total > logged => eprintln!(
            "strument-sandbox: {} more refused accesses were not logged",
            total - logged
        ),
        _ if audited.lost => {
            eprintln!("strument-sandbox: some audit records were lost: the list may be incomplete");
        }
        _ if logged == 0 => eprintln!("strument-sandbox: no access was refused"),
        _ => {}
    }
    Ok((audited.status, audited.command))
}

/// The shell's convention: the exit code, or 128 + the signal.
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        _ => 1,
    }
}
