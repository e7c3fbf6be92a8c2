//! `strument-sandbox`: probe the kernel, show a policy, explain a path, run
//! a command confined.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use strument_sandbox::{
    Advice, Availability, Change, DenialLogError, Explanation, Feature, Origin, Policy, Prepared,
    Report, Service, SignalForwarder, Snapshot, Socket, SocketReason, Verdict,
    create_missing_caches, default_sockets, default_writable, probe, reachable_services,
};

/// Exit statuses of the tool itself; `run` otherwise exits with the command's.
mod status {
    /// `explain`: some path is not writable.
    pub const NOT_WRITABLE: u8 = 1;
    /// Landlock is unavailable: `probe` found none, `run` refused.
    pub const UNAVAILABLE: u8 = 3;
    /// The policy could not be built or enforced (bad path, threads, kernel refusal).
    pub const POLICY: u8 = 4;
    /// `run --explain-denials`: refused writes cannot be read here; nothing ran.
    pub const NO_DENIAL_LOG: u8 = 5;
    /// The command exists but could not be executed.
    pub const CANNOT_EXECUTE: u8 = 126;
    /// The command was not found.
    pub const NOT_FOUND: u8 = 127;
}

const AFTER_HELP: &str = "\
Writes are confined to the project, the state directory, temporary space,
a few device files and toolchain caches (see `policy`); reads and execution
stay open everywhere. Once applied, the confinement cannot be undone and
covers every child process. No unconfined process may act for a confined
one: typing into the terminal (TIOCSTI) is refused on every kernel, abstract
sockets outside the sandbox from Linux 6.12, and unix sockets other than the
project's, ssh-agent's, gpg-agent's and --allow-socket ones from Linux 7.1;
before that, `policy` lists the services a command can still reach.
A root from a variable ($TMPDIR, $XDG_CACHE_HOME, $GOCACHE, …) or from the
project's .git that resolves to the home directory or above is skipped with a
warning; only --project, --state and --allow may be that wide, and then a
warning says the home directory is writable.

Examples:
  strument-sandbox probe                       # does this kernel have Landlock?
  strument-sandbox policy --project ~/src/app  # what would be writable, and why not
  strument-sandbox explain ~/.cargo/bin/tool   # would a write there land? what to --allow
  strument-sandbox run -- go test ./...        # run confined, report hooks it planted
  strument-sandbox run --allow /srv/out -- make install
  strument-sandbox run --allow-socket /run/postgresql -- make test

Exit status:
  0    success (`run`: the command's own status otherwise, 128+N if signal N
       killed it)
  1    `explain`: some path is not writable
  2    usage error
  3    Landlock unavailable: `probe` found none, `run` refused and ran nothing
  4    the policy could not be built or enforced, a path cannot be resolved, or `run`
       was started in the home directory (or above it) without --project; nothing ran
  5    `run --explain-denials`: refused writes cannot be read here; nothing ran
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
    /// Say whether a write to each path would land, by which root, or what to --allow.
    #[command(
        after_help = "Each path is resolved as the kernel resolves it at the moment of a write \
        (symlinks followed,\n`..` taken, the nearest existing directory for a path that does not \
        exist yet) and compared\nwith the roots the policy grants, by device and inode. A file root \
        grants that very file only.\n\n\
        Exit status: 0 when every path is writable, 1 when some path is not, 4 when the policy\n\
        cannot be built or a path cannot be resolved (symlink loop, not a directory, …).\n\n\
        Examples:\n  strument-sandbox explain --project ~/src/app ~/src/app/target ~/.bashrc\n  \
        strument-sandbox explain --allow /srv/out --json /srv/out/site/index.html"
    )]
    Explain {
        #[command(flatten)]
        roots: Roots,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// The paths a write would go to.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Run a command with writes confined to the policy; report files it changed that run later.
    #[command(
        after_help = "The command inherits the confinement, as does everything it starts.\n\
        If Landlock is unavailable nothing runs and the exit status is 3. Otherwise the exit\n\
        status is the command's, or 128+N when signal N killed it.\n\
        Without --project the current directory is the project, except the home directory,\n\
        / or an ancestor of home: there nothing runs and the exit status is 4 (name it with\n\
        --project to run anyway, with a warning that home is writable).\n\n\
        Files that run later, outside the sandbox, stay writable in the project: git hooks,\n\
        .git/config, .git/info/*, a worktree's or submodule's git directory, .envrc,\n\
        .vscode/tasks.json and settings.json. After the command, each one it created,\n\
        modified, deleted, made executable or replaced by a symlink is reported on standard\n\
        error, one line each:\n\
        \x20 .git/hooks/pre-commit was created: git runs it outside the sandbox at your next commit\n\
        Nothing is restored (the change may be what you asked for): read the file before\n\
        running git or opening the project. Nothing is printed when none changed. With --json,\n\
        the last line of standard error is one JSON object instead, always printed:\n\
        {\"exit\": 0, \"signal\": null, \"changes\": [{\"path\", \"name\", \"kind\", \"target\",\n\
        \"why\", \"line\"}]} (kind: created, modified, deleted, made-executable,\n\
        replaced-by-symlink, replaced).\n\n\
        `run` waits for the command: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to it are passed\n\
        on (the terminal's Ctrl-C reaches the command directly, once), Ctrl-Z stops both, and\n\
        `fg` resumes both.\n\n\
        --explain-denials also lists, once the command exits, each access the kernel\n\
        refused it with the root that would grant it.\n\
        It reads Landlock's audit records (ABI 7, Linux 6.15), which needs root\n\
        (CAP_AUDIT_READ) and kernel auditing on (`auditctl -e 1` or audit=1); otherwise\n\
        nothing runs and the exit status is 5. Without root, ask in advance with `explain`.\n\n\
        Examples:\n  strument-sandbox run -- cargo build\n  \
        strument-sandbox run --json -- npm install 2> run.err; tail -n 1 run.err\n  \
        strument-sandbox run --project ~/src/app --state ~/.local/state/strument -- sh -c 'make && make test'\n  \
        sudo strument-sandbox run --explain-denials -- make install"
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
        /// After the command exits, list each access the kernel refused it and the root that
        /// would grant it (needs root and kernel auditing; see below).
        #[arg(long)]
        explain_denials: bool,
        /// After the command, print one JSON object on standard error: its exit status and
        /// the files that run later it changed.
        #[arg(long)]
        json: bool,
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
    /// A unix socket (or a directory of them) the command may connect to, besides the
    /// project's, the state directory's, $SSH_AUTH_SOCK and gpg-agent's (repeatable;
    /// enforced from Linux 7.1, Landlock ABI 9).
    #[arg(long = "allow-socket", value_name = "PATH")]
    allow_socket: Vec<PathBuf>,
}

/// `println!` that ends the program quietly when standard output is closed
/// (`strument-sandbox policy | head`), as a shell tool should, instead of
/// panicking.
macro_rules! say {
    ($($arg:tt)*) => {
        say(format_args!($($arg)*))
    };
}

fn say(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("strument-sandbox: standard output: {e}");
        }
        // 128 + SIGPIPE, what the shell reports for a tool killed by it.
        std::process::exit(141);
    }
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
        Cmd::Explain { roots, json, paths } => cmd_explain(&roots, json, &paths),
        Cmd::Run {
            roots,
            verbose,
            no_create_caches,
            explain_denials,
            json,
            command,
        } => cmd_run(
            &roots,
            &RunOptions {
                verbose,
                create_caches: !no_create_caches,
                explain_denials,
                json,
            },
            &command,
        ),
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
        let mut v = availability_json(&a);
        v["reachable_services"] = services_json(&services_if_open(&a));
        say!("{v}");
    } else {
        match &a.error {
            None => {
                let tsync_missing = format!(
                    "calling thread only (TSYNC needs ABI {}, Linux {}): apply before starting threads",
                    Feature::Tsync.since_abi(),
                    Feature::Tsync.since_linux()
                );
                say!("landlock: supported");
                say!("abi: {}", a.abi);
                say!(
                    "threads: {}",
                    if a.all_threads() {
                        "all threads confined at once (TSYNC)"
                    } else {
                        tsync_missing.as_str()
                    }
                );
                for l in a.limitations() {
                    say!("limitation: {l}");
                }
                for line in service_lines(&services_if_open(&a)) {
                    say!("{line}");
                }
            }
            Some(why) => {
                say!("landlock: unavailable");
                say!("reason: {why}");
                if let Some(errno) = why.errno() {
                    say!("errno: {errno}");
                }
                say!("hint: {}", why.hint());
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
        say!("{v}");
    } else {
        match &a.error {
            None => say!("landlock: ABI {}", a.abi),
            Some(why) => say!("landlock: unavailable ({why}): `run` would refuse"),
        }
        for line in report_lines(&report) {
            say!("{line}");
        }
    }
    Ok(0)
}

fn cmd_explain(roots: &Roots, json: bool, paths: &[PathBuf]) -> Result<u8, Failure> {
    let policy = build_policy(roots)?;
    let report = policy
        .check()
        .map_err(|e| Failure::new(status::POLICY, e))?;
    let mut explained = Vec::with_capacity(paths.len());
    for path in paths {
        let absolute = std::path::absolute(path)
            .map_err(|e| Failure::new(status::POLICY, format!("{}: {e}", path.display())))?;
        let e = report
            .explain(&absolute)
            .map_err(|e| Failure::new(status::POLICY, e))?;
        explained.push(e);
    }
    if json {
        let v = json!({
            "abi": report.abi,
            "paths": explained.iter().map(explanation_json).collect::<Vec<_>>(),
            "warnings": report.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        });
        say!("{v}");
    } else {
        for e in &explained {
            say!("{}", explanation_text(e));
        }
        // A writable home or a skipped widening root changes every answer.
        for w in &report.warnings {
            say!("warning: {w}");
        }
        if report.abi == 0 {
            say!("note: this kernel has no Landlock: `run` would refuse to run anything");
        }
    }
    Ok(if explained.iter().all(Explanation::is_granted) {
        0
    } else {
        status::NOT_WRITABLE
    })
}

fn explanation_text(e: &Explanation) -> String {
    let path = e.path.display();
    match &e.verdict {
        Verdict::Granted(root) => format!(
            "{path}: writable, granted by {} ({})",
            root.path.display(),
            root.kind.name()
        ),
        Verdict::Denied { allow, skipped } => {
            let checked = e.checked.display();
            let mut line = if e.exists {
                format!("{path}: not writable: no root grants {checked}")
            } else {
                format!(
                    "{path}: not writable: it would be created in {checked}, which no root grants"
                )
            };
            line.push_str(&format!("; to allow it: --allow {}", allow.display()));
            for s in skipped {
                line.push_str(&format!(
                    " (the policy lists {}, but it grants nothing: {})",
                    s.path.display(),
                    s.reason
                ));
            }
            line
        }
    }
}

fn explanation_json(e: &Explanation) -> Value {
    let (granted_by, allow, skipped) = match &e.verdict {
        Verdict::Granted(root) => (
            json!({ "path": root.path.to_string_lossy(), "kind": root.kind.name() }),
            Value::Null,
            Vec::new(),
        ),
        Verdict::Denied { allow, skipped } => (
            Value::Null,
            json!(allow.to_string_lossy()),
            skipped
                .iter()
                .map(|s| json!({ "path": s.path.to_string_lossy(), "reason": s.reason.kind() }))
                .collect(),
        ),
    };
    json!({
        "path": e.path.to_string_lossy(),
        "writable": e.is_granted(),
        "checked": e.checked.to_string_lossy(),
        "exists": e.exists,
        "granted_by": granted_by,
        "allow": allow,
        "skipped": skipped,
    })
}

/// The flags of `run` beyond the roots and the command.
struct RunOptions {
    verbose: bool,
    create_caches: bool,
    explain_denials: bool,
    json: bool,
}

fn cmd_run(roots: &Roots, options: &RunOptions, command: &[OsString]) -> Result<u8, Failure> {
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
        let report = prepared.report();
        print_warnings(report);
        for line in service_lines(&report.reachable_services) {
            eprintln!("strument-sandbox: {line}");
        }
    }
    let before = Snapshot::take(&prepared);
    // Blocked before the command starts, so no signal is lost in between.
    let forwarder = SignalForwarder::install()
        .map_err(|e| Failure::new(status::POLICY, format!("cannot block signals: {e}")))?;
    let status = if options.explain_denials {
        run_explaining_denials(&prepared, &forwarder, program, args)?
    } else {
        let mut cmd = Command::new(program);
        cmd.args(args);
        prepared.confine(&mut cmd);
        let child = forwarder
            .spawn(&mut cmd)
            .map_err(|e| cannot_run(program, &e))?;
        forwarder
            .wait(child)
            .map_err(|e| Failure::new(status::POLICY, format!("waiting for the command: {e}")))?
    };
    let changes = before.changes();
    let code = exit_code(status);
    if options.json {
        eprintln!("{}", run_json(code, status, &changes));
    } else {
        for change in &changes {
            eprintln!("strument-sandbox: {change}");
        }
    }
    Ok(code)
}

/// `run --json`: how the command ended and what it changed that runs later.
fn run_json(code: u8, status: std::process::ExitStatus, changes: &[Change]) -> Value {
    use std::os::unix::process::ExitStatusExt;
    json!({
        "exit": code,
        "signal": status.signal(),
        "changes": changes.iter().map(|c| json!({
            "path": c.path.to_string_lossy(),
            "name": c.name.to_string_lossy(),
            "kind": c.kind.name(),
            "target": c.target.as_ref().map(|t| t.to_string_lossy()),
            "why": c.why,
            "line": c.to_string(),
        })).collect::<Vec<_>>(),
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

/// The report as `policy` prints it, one fact a line: the root, where it
/// came from, and what it resolved to when that differs.
fn report_lines(report: &Report) -> Vec<String> {
    let resolved = |r: &Option<PathBuf>| {
        r.as_ref()
            .map(|r| format!(" -> {}", r.display()))
            .unwrap_or_default()
    };
    let granted = report.granted.iter().map(|g| {
        format!(
            "granted  {:<9}  {}{}  [{}]",
            g.kind.name(),
            g.path.display(),
            resolved(&g.resolved),
            g.origin
        )
    });
    let skipped = report.skipped.iter().map(|s| {
        format!(
            "skipped  {:<9}  {}  [{}]  ({})",
            s.reason.kind(),
            s.path.display(),
            s.origin,
            s.reason
        )
    });
    let sockets = report.sockets.iter().map(|s| {
        format!(
            "socket   {:<9}  {}  ({})",
            s.kind.name(),
            s.path.display(),
            s.reason
        )
    });
    let skipped_sockets = report.skipped_sockets.iter().map(|s| {
        format!(
            "socket   skipped    {}  ({}: {})",
            s.path.display(),
            s.reason,
            s.skip
        )
    });
    let warnings = report.warnings.iter().map(|w| format!("warning: {w}"));
    let limitations = report
        .limitations
        .iter()
        .map(|l| format!("limitation: {l}"));
    granted
        .chain(skipped)
        .chain(sockets)
        .chain(skipped_sockets)
        .chain(warnings)
        .chain(limitations)
        .chain(service_lines(&report.reachable_services))
        .collect()
}

/// The services a confined command can still reach, when the kernel
/// cannot close the route (Landlock ABI < 9); nothing otherwise.
fn services_if_open(a: &Availability) -> Vec<Service> {
    if a.supported() && !a.has(Feature::ResolveUnix) {
        reachable_services()
    } else {
        Vec::new()
    }
}

fn service_lines(services: &[Service]) -> impl Iterator<Item = String> + '_ {
    services.iter().map(|s| format!("reachable: {s}"))
}

fn services_json(services: &[Service]) -> Value {
    services
        .iter()
        .map(|s| {
            json!({
                "kind": s.kind.name(),
                "path": s.path.to_string_lossy(),
                "allows": s.kind.allows(),
                "closed_by_linux": Feature::ResolveUnix.since_linux(),
                "closed_by_abi": Feature::ResolveUnix.since_abi(),
            })
        })
        .collect()
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
) -> Result<std::process::ExitStatus, Failure> {
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
    Ok(audited.status)
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
    let mut sockets = default_sockets(&project, state.as_deref());
    for path in &roots.allow_socket {
        sockets.push(Socket::new(absolute(path)?, SocketReason::Caller));
    }
    Ok(Policy { writable, sockets })
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

/// Where a root came from, for programs: the kind, and the variable or
/// pointer file that named it.
fn origin_json(o: &Origin) -> Value {
    let pointer = match o {
        Origin::Git { pointer } => Some(pointer.to_string_lossy()),
        _ => None,
    };
    json!({
        "kind": o.kind(),
        "variable": o.variable().map(|v| v.name),
        "value": o.variable().map(|v| v.value.to_string_lossy()),
        "pointer": pointer,
        "explicit": o.is_explicit(),
    })
}

fn report_json(r: &Report) -> Value {
    json!({
        "abi": r.abi,
        "granted": r.granted.iter().map(|g| json!({
            "path": g.path.to_string_lossy(),
            "kind": g.kind.name(),
            "origin": origin_json(&g.origin),
            "resolved": g.resolved.as_ref().map(|p| p.to_string_lossy()),
        })).collect::<Vec<_>>(),
        "skipped": r.skipped.iter().map(|s| json!({
            "path": s.path.to_string_lossy(),
            "reason": s.reason.kind(),
            "detail": s.reason.to_string(),
            "origin": origin_json(&s.origin),
        })).collect::<Vec<_>>(),
        "warnings": r.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        "limitations": r.limitations.iter().map(|l| l.kind()).collect::<Vec<_>>(),
        "sockets": r.sockets.iter().map(|s| json!({
            "path": s.path.to_string_lossy(),
            "kind": s.kind.name(),
            "reason": s.reason.name(),
            "detail": s.reason.to_string(),
        })).collect::<Vec<_>>(),
        "skipped_sockets": r.skipped_sockets.iter().map(|s| json!({
            "path": s.path.to_string_lossy(),
            "reason": s.reason.name(),
            "skip": s.skip.kind(),
            "detail": s.skip.to_string(),
        })).collect::<Vec<_>>(),
        "reachable_services": services_json(&r.reachable_services),
    })
}
