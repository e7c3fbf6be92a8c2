//! `strument-sandbox`: probe the kernel, show a policy, explain a path, run
//! a command confined. One module per subcommand; `output` holds what
//! several print.

#![deny(unsafe_code)]
// The process starts at `sys::main`, not through std's runtime (see there).
#![cfg_attr(not(test), no_main)]

use std::ffi::OsString;

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use strument_sandbox::local_net::{LocalPort, PortReason};
use strument_sandbox::{Policy, Session, SessionBuilder};

#[macro_use]
mod output;
mod explain;
mod forward;
mod policy;
mod probe;
mod run;
#[allow(unsafe_code)]
mod sys;
mod tail;

/// Exit statuses of the tool itself; `run` otherwise exits with the command's.
pub(crate) mod status {
    /// `explain`: some path is not writable.
    pub const NOT_WRITABLE: u8 = 1;
    /// Landlock is unavailable: `probe` found none, `run` refused.
    pub const UNAVAILABLE: u8 = 3;
    /// The policy could not be built or enforced (bad path, threads, kernel refusal).
    pub const POLICY: u8 = 4;
    /// `run --explain-denials`: the command cannot be traced here; nothing ran.
    pub const CANNOT_TRACE: u8 = 5;
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
one: typing into the terminal (TIOCSTI) is refused on every kernel, and so
is every unix socket other than the project's, the state directory's,
ssh-agent's, the name and log services' and --allow-socket ones, and those the
command binds itself (a connect supervisor in this process decides each
connect; from Linux 7.1 Landlock guards the same sockets). Each refused socket
is named after the command, with the --allow-socket that would allow it.
gpg-agent is not allowed by default: naming its socket also lets a command
delete and import secret keys. The same holds for this machine's own
addresses (loopback, every local interface): only ports the command binds
itself, the resolver's, a local proxy's and --allow-connect ones are reachable
there; other hosts are never refused.
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
  strument-sandbox run --allow-connect 127.0.0.1:5432 -- make test

Exit status:
  0    success (`run`: the command's own status otherwise, 128+N if signal N
       killed it)
  1    `explain`: some path is not writable
  2    usage error
  3    Landlock unavailable: `probe` found none, `run` refused and ran nothing
  4    the policy could not be built or enforced, a path cannot be resolved, or `run`
       was started in the home directory (or above it) without --project; nothing ran
  5    `run --explain-denials`: the command cannot be traced here (ptrace refused, or
       `run` itself is being traced); nothing ran
  126  the command could not be executed
  127  the command was not found
A command's own status may be any of these too: with `run --json`, the JSON line that
ends standard error (with \"exit\") is there only when the command ran.";

#[derive(Parser, Debug)]
#[command(name = "strument-sandbox", version, about = "Confine what a command may write, with Linux Landlock", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
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
        The command gets a few variables where the environment does not set them (tmux,\n\
        Gradle and sccache daemons of the session's own; uv and pnpm install by copy):\n\
        `policy` lists them. When the command fails and standard error is not a terminal,\n\
        paths its error output names in places refused on purpose (rustup's home,\n\
        ~/.cargo/bin, ~/go/bin, npm's global prefix, ~/.local/bin, the Nix store,\n\
        ~/.gnupg) are explained: what the place is, why, and what to do instead\n\
        (--json: \"refused_on_purpose\": [{\"path\", \"place\", \"what\", \"why\",\n\
        \"instead\", \"detail\"}]).\n\n\
        --explain-denials also lists, once the command and every process it started have\n\
        ended, each write the kernel refused it, one line each (deduplicated, the first 20;\n\
        --json lists up to 1000): the path as given and made absolute, the operation, the\n\
        system call and its errno, and the smallest --allow that would grant it, the place\n\
        refused on purpose it is in, or why the sandbox was not what refused it (the file\n\
        system's own permissions):\n\
        \x20 refused creating /home/me/x (touch: openat, EACCES): no root grants /home/me, where\n\
        \x20 it would be created; to allow it: --allow /home/me\n\
        It traces the command (ptrace; a seccomp filter stops only the calls that write by\n\
        path), which needs no privilege and works on every Landlock ABI; a debugger or strace\n\
        inside the command then cannot attach (a process has one tracer). When the command\n\
        cannot be traced (kernel.yama.ptrace_scope 2 or 3, or `run` is itself traced),\n\
        nothing runs and the exit status is 5.\n\n\
        Examples:\n  strument-sandbox run -- cargo build\n  \
        strument-sandbox run --json -- npm install 2> run.err; tail -n 1 run.err\n  \
        strument-sandbox run --project ~/src/app --state ~/.local/state/strument -- sh -c 'make && make test'\n  \
        strument-sandbox run --explain-denials -- make install"
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
        /// After the command, list each write the kernel refused it and the --allow that
        /// would grant it (the command is traced; see below).
        #[arg(long)]
        explain_denials: bool,
        /// After the command, print one JSON object on standard error: its exit status and
        /// the files that run later it changed.
        #[arg(long)]
        json: bool,
        /// Pass descriptor N on to the command (repeatable). Otherwise it gets only 0, 1, 2
        /// and a make jobserver's named in MAKEFLAGS: a descriptor opened before the sandbox
        /// writes wherever it points.
        #[arg(long = "keep-fd", value_name = "N")]
        keep_fd: Vec<i32>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
}

#[derive(Args, Debug, Default)]
pub(crate) struct Roots {
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
    /// project's, the state directory's and $SSH_AUTH_SOCK (repeatable). Naming
    /// gpg-agent's socket (for signed commits) lets a command delete and import keys too.
    #[arg(long = "allow-socket", value_name = "PATH")]
    allow_socket: Vec<PathBuf>,
    /// A port of this machine's own addresses the command may connect to, as ADDR:PORT
    /// (127.0.0.1:5432, [::1]:8080, localhost:3000; 0.0.0.0:PORT: every local address),
    /// besides ports bound inside the sandbox, the resolver's and a local proxy's
    /// (repeatable). Other hosts are never mediated.
    #[arg(long = "allow-connect", value_name = "ADDR:PORT", value_parser = parse_allow_connect)]
    allow_connect: Vec<Vec<LocalPort>>,
}

impl Cli {
    /// `run -- CMD [ARG ...]` with no option, the form an agent starts every
    /// command with, read without clap: clap builds every subcommand's
    /// arguments and help texts before it looks at one (about a tenth of
    /// `run`'s own start). Anything else is clap's; the test below checks
    /// that this gives what clap gives.
    fn plain_run(args: impl IntoIterator<Item = OsString>) -> Option<Cli> {
        let mut args = args.into_iter().skip(1);
        if args.next()? != "run" || args.next()? != "--" {
            return None;
        }
        let command: Vec<OsString> = args.collect();
        if command.is_empty() {
            return None;
        }
        Some(Cli {
            command: Cmd::Run {
                roots: Roots::default(),
                verbose: false,
                no_create_caches: false,
                explain_denials: false,
                json: false,
                keep_fd: Vec::new(),
                command,
            },
        })
    }
}

fn parse_allow_connect(text: &str) -> Result<Vec<LocalPort>, String> {
    LocalPort::parse(text, PortReason::Caller)
}

/// A failure of the tool itself, with the exit status it maps to.
pub(crate) struct Failure {
    status: u8,
    message: String,
}

impl Failure {
    pub(crate) fn new(status: u8, message: impl std::fmt::Display) -> Self {
        Failure {
            status,
            message: message.to_string(),
        }
    }
}

/// What `main` does once the process is set up (`sys::main`): the exit
/// status. (A test build starts at the test harness's `main` instead.)
#[cfg_attr(test, allow(dead_code))]
fn entry() -> u8 {
    sys::one_malloc_arena();
    let cli = Cli::plain_run(std::env::args_os()).unwrap_or_else(Cli::parse);
    let result = match cli.command {
        Cmd::Probe { json } => probe::cmd_probe(json),
        Cmd::Policy { roots, json } => policy::cmd_policy(&roots, json),
        Cmd::Explain { roots, json, paths } => explain::cmd_explain(&roots, json, &paths),
        Cmd::Run {
            roots,
            verbose,
            no_create_caches,
            explain_denials,
            json,
            keep_fd,
            command,
        } => run::cmd_run(
            &roots,
            &run::RunOptions {
                verbose,
                create_caches: !no_create_caches,
                explain_denials,
                json,
                keep_fds: keep_fd,
            },
            &command,
        ),
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("strument-sandbox: {}", failure.message);
            failure.status
        }
    }
}

/// The session the flags name, with relative paths taken against the
/// current directory (the library itself accepts only absolute ones).
pub(crate) fn session_builder(roots: &Roots) -> Result<SessionBuilder, Failure> {
    let absolute = |p: &Path| {
        std::path::absolute(p)
            .map_err(|e| Failure::new(status::POLICY, format!("{}: {e}", p.display())))
    };
    let mut builder = match &roots.project {
        Some(p) => Session::builder(absolute(p)?),
        None => Session::in_current_directory(),
    };
    if let Some(state) = &roots.state {
        builder = builder.state_dir(absolute(state)?);
    }
    for path in &roots.allow {
        builder = builder.allow(absolute(path)?);
    }
    for port in roots.allow_connect.iter().flatten() {
        builder = builder.allow_connect(port.clone());
    }
    for path in &roots.allow_socket {
        builder = builder.allow_socket(absolute(path)?);
    }
    Ok(builder)
}

/// The policy the flags name, built without touching anything.
pub(crate) fn build_policy(roots: &Roots) -> Result<Policy, Failure> {
    session_builder(roots)?
        .policy()
        .map_err(|e| Failure::new(status::POLICY, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn argv(args: &[&[u8]]) -> Vec<OsString> {
        std::iter::once(b"strument-sandbox".as_slice())
            .chain(args.iter().copied())
            .map(|a| OsString::from_vec(a.to_vec()))
            .collect()
    }

    #[test]
    fn a_plain_run_is_read_as_clap_reads_it() {
        let plain: [&[&[u8]]; 5] = [
            &[b"run", b"--", b"true"],
            &[b"run", b"--", b"sh", b"-c", b"exit 3"],
            &[b"run", b"--", b"--json", b"--", b"-v"],
            &[b"run", b"--", b""],
            &[b"run", b"--", b"\xff\xfe", b"--project=/"],
        ];
        for args in plain {
            let args = argv(args);
            let fast = Cli::plain_run(args.clone()).expect("read without clap");
            let clap = Cli::try_parse_from(&args).expect("clap reads it");
            assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{args:?}");
        }
    }

    #[test]
    fn any_other_form_is_left_to_clap() {
        let other: [&[&[u8]]; 8] = [
            &[],
            &[b"run"],
            &[b"run", b"--"],
            &[b"run", b"--json", b"--", b"true"],
            &[b"run", b"true"],
            &[b"policy", b"--", b"true"],
            &[b"--", b"run", b"--", b"true"],
            &[b"Run", b"--", b"true"],
        ];
        for args in other {
            assert!(Cli::plain_run(argv(args)).is_none(), "{args:?}");
        }
        // Clap, given the same, errs or reads options this path never sets.
        assert!(Cli::try_parse_from(argv(&[b"run", b"--"])).is_err());
        let clap = Cli::try_parse_from(argv(&[b"run", b"--json", b"--", b"true"]));
        assert!(matches!(
            clap,
            Ok(Cli {
                command: Cmd::Run { json: true, .. }
            })
        ));
    }
}
