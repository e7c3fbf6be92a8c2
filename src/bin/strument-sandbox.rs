//! `strument-sandbox`: probe the kernel, show a policy, run a command confined.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use strument_sandbox::{
    Availability, Policy, Report, create_missing_caches, default_writable, probe,
};

/// Exit statuses of the tool itself; `run` otherwise exits with the command's.
mod status {
    /// Landlock is unavailable: `probe` found none, `run` refused.
    pub const UNAVAILABLE: u8 = 3;
    /// The policy could not be built or enforced (bad path, threads, kernel refusal).
    pub const POLICY: u8 = 4;
    /// The command exists but could not be executed.
    pub const CANNOT_EXECUTE: u8 = 126;
    /// The command was not found.
    pub const NOT_FOUND: u8 = 127;
}

const AFTER_HELP: &str = "\
Writes are confined to the project, the state directory, temporary space,
a few device files and toolchain caches (see `policy`); reads and execution
stay open everywhere. Once applied, the confinement cannot be undone and
covers every child process.

Examples:
  strument-sandbox probe                       # does this kernel have Landlock?
  strument-sandbox policy --project ~/src/app  # what would be writable, and why not
  strument-sandbox run -- go test ./...        # confine, then exec
  strument-sandbox run --allow /srv/out -- make install

Exit status:
  0    success (`run`: the command's own status otherwise)
  2    usage error
  3    Landlock unavailable: `probe` found none, `run` refused and ran nothing
  4    the policy could not be built or enforced; nothing ran
  126  the command could not be executed
  127  the command was not found";

#[derive(Parser)]
#[command(name = "strument-sandbox", version, about = "Confine what a command may write, with Linux Landlock", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Report which Landlock ABI the running kernel offers (exit 0 only when supported).
    #[command(
        after_help = "Exit status: 0 when Landlock is supported, 3 when it is not.\n\n\
        Example:\n  strument-sandbox probe --json"
    )]
    Probe {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the writable roots for a project: granted, or skipped and why.
    #[command(
        after_help = "A root that does not exist grants nothing, and creating it later does not \
        change that:\nthe list is decided when the sandbox is applied.\n\n\
        Example:\n  strument-sandbox policy --project ~/src/app --allow /srv/out --json"
    )]
    Policy {
        #[command(flatten)]
        roots: Roots,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Confine writes to the policy, then exec the command.
    #[command(
        after_help = "The command inherits the confinement, as does everything it starts.\n\
        If Landlock is unavailable nothing runs and the exit status is 3.\n\n\
        Examples:\n  strument-sandbox run -- cargo build\n  \
        strument-sandbox run --project ~/src/app --state ~/.local/state/strument -- sh -c 'make && make test'"
    )]
    Run {
        #[command(flatten)]
        roots: Roots,
        /// Print the policy report on standard error before running.
        #[arg(short, long)]
        verbose: bool,
        /// Do not create missing toolchain caches (`~/.cache`, `$CARGO_HOME/registry`, …)
        /// before confining; missing ones then stay unwritable for the whole run.
        #[arg(long)]
        no_create_caches: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
}

#[derive(Args)]
struct Roots {
    /// The project root [default: the current directory].
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// The session's state directory.
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Another writable root (repeatable).
    #[arg(long = "allow", value_name = "PATH")]
    allow: Vec<PathBuf>,
}

/// A failure of the tool itself, with the exit status it maps to.
struct Failure {
    status: u8,
    message: String,
}

impl Failure {
    fn new(status: u8, message: impl std::fmt::Display) -> Self {
        Failure {
            status,
            message: message.to_string(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Probe { json } => cmd_probe(json),
        Cmd::Policy { roots, json } => cmd_policy(&roots, json),
        Cmd::Run {
            roots,
            verbose,
            no_create_caches,
            command,
        } => cmd_run(&roots, verbose, !no_create_caches, &command),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("strument-sandbox: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

fn cmd_probe(json: bool) -> Result<u8, Failure> {
    let a = probe();
    if json {
        println!("{}", availability_json(&a));
    } else {
        match &a.error {
            None => {
                println!("landlock: supported");
                println!("abi: {}", a.abi);
                println!(
                    "threads: {}",
                    if a.all_threads() {
                        "all threads confined at once (TSYNC)"
                    } else {
                        "calling thread only (TSYNC needs ABI 8): apply before starting threads"
                    }
                );
                for l in a.limitations() {
                    println!("limitation: {l}");
                }
            }
            Some(why) => {
                println!("landlock: unavailable");
                println!("reason: {why}");
                if let Some(errno) = why.errno() {
                    println!("errno: {errno}");
                }
                println!("hint: {}", why.hint());
            }
        }
    }
    Ok(if a.supported() {
        0
    } else {
        status::UNAVAILABLE
    })
}

fn cmd_policy(roots: &Roots, json: bool) -> Result<u8, Failure> {
    let policy = build_policy(roots)?;
    let report = policy
        .check()
        .map_err(|e| Failure::new(status::POLICY, e))?;
    let a = probe();
    if json {
        let mut v = report_json(&report);
        v["landlock"] = availability_json(&a);
        println!("{v}");
    } else {
        match &a.error {
            None => println!("landlock: ABI {}", a.abi),
            Some(why) => println!("landlock: unavailable ({why}): `run` would refuse"),
        }
        for g in &report.granted {
            println!("granted  {:<9}  {}", g.kind.name(), g.path.display());
        }
        for s in &report.skipped {
            println!(
                "skipped  {:<9}  {}  ({})",
                s.reason.kind(),
                s.path.display(),
                s.reason
            );
        }
        for w in &report.warnings {
            println!("warning: {w}");
        }
        for l in &report.limitations {
            println!("limitation: {l}");
        }
    }
    Ok(0)
}

fn cmd_run(
    roots: &Roots,
    verbose: bool,
    create_caches: bool,
    command: &[OsString],
) -> Result<u8, Failure> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::new(2, "run: no command given after `--`"))?;
    let policy = build_policy(roots)?;
    if create_caches {
        for path in create_missing_caches() {
            if verbose {
                eprintln!("strument-sandbox: created {}", path.display());
            }
        }
    }
    let report = policy.apply().map_err(|e| match e {
        strument_sandbox::ApplyError::Unavailable(_) => Failure::new(status::UNAVAILABLE, e),
        e => Failure::new(status::POLICY, e),
    })?;
    if verbose {
        for g in &report.granted {
            eprintln!("strument-sandbox: granted {}", g.path.display());
        }
        for s in &report.skipped {
            eprintln!(
                "strument-sandbox: skipped {} ({})",
                s.path.display(),
                s.reason
            );
        }
        for w in &report.warnings {
            eprintln!("strument-sandbox: warning: {w}");
        }
        for l in &report.limitations {
            eprintln!("strument-sandbox: limitation: {l}");
        }
    }
    // exec only returns on failure.
    let err = Command::new(program).args(args).exec();
    let name = Path::new(program).display();
    Err(match err.kind() {
        io::ErrorKind::NotFound => {
            Failure::new(status::NOT_FOUND, format!("{name}: command not found"))
        }
        _ => Failure::new(
            status::CANNOT_EXECUTE,
            format!("{name}: cannot execute: {err}"),
        ),
    })
}

/// The default writable set for the flags, with relative paths taken
/// against the current directory (the library itself accepts only absolute ones).
fn build_policy(roots: &Roots) -> Result<Policy, Failure> {
    let bad = |e: &dyn std::fmt::Display| Failure::new(status::POLICY, e);
    let absolute =
        |p: &Path| std::path::absolute(p).map_err(|e| bad(&format!("{}: {e}", p.display())));
    let project = match &roots.project {
        Some(p) => absolute(p)?,
        None => std::env::current_dir().map_err(|e| bad(&format!("current directory: {e}")))?,
    };
    let state = roots.state.as_deref().map(absolute).transpose()?;
    let extra = roots
        .allow
        .iter()
        .map(|p| absolute(p))
        .collect::<Result<Vec<_>, _>>()?;
    let writable = default_writable(&project, state.as_deref(), &extra).map_err(|e| bad(&e))?;
    Ok(Policy { writable })
}

fn availability_json(a: &Availability) -> Value {
    json!({
        "supported": a.supported(),
        "abi": a.abi,
        "reason": a.error.as_ref().map(|e| e.kind()),
        "errno": a.error.as_ref().and_then(|e| e.errno()),
        "message": a.error.as_ref().map(|e| e.to_string()),
        "hint": a.error.as_ref().map(|e| e.hint()),
        "all_threads": a.all_threads(),
        "limitations": a.limitations().iter().map(|l| l.kind()).collect::<Vec<_>>(),
    })
}

fn report_json(r: &Report) -> Value {
    json!({
        "abi": r.abi,
        "granted": r.granted.iter().map(|g| json!({
            "path": g.path.to_string_lossy(),
            "kind": g.kind.name(),
        })).collect::<Vec<_>>(),
        "skipped": r.skipped.iter().map(|s| json!({
            "path": s.path.to_string_lossy(),
            "reason": s.reason.kind(),
            "detail": s.reason.to_string(),
        })).collect::<Vec<_>>(),
        "warnings": r.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        "limitations": r.limitations.iter().map(|l| l.kind()).collect::<Vec<_>>(),
    })
}
