//! What several subcommands print: standard output that ends quietly on a
//! closed pipe, the report a line a fact, and how sockets are mediated.

use std::io;
use std::path::{Path, PathBuf};

use strument_sandbox::{Feature, Report};

/// `println!` that ends the program quietly when standard output is closed
/// (`strument-sandbox policy | head`), as a shell tool should, instead of
/// panicking.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::say(format_args!($($arg)*))
    };
}

pub(crate) fn say(args: std::fmt::Arguments<'_>) {
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

/// The report as `policy` prints it, one fact a line: the root, where it
/// came from, and what it resolved to when that differs.
pub(crate) fn report_lines(report: &Report) -> Vec<String> {
    let resolved = |r: &Option<PathBuf>| {
        r.as_ref()
            .map(|r| format!(" -> {}", r.display()))
            .unwrap_or_default()
    };
    let granted = report.granted.iter().map(|g| {
        let rest = format!("{}  [{}]", resolved(&g.resolved), g.origin);
        row("granted", g.kind.name(), &g.path, &rest)
    });
    let skipped = report.skipped.iter().map(|s| {
        let rest = format!("  [{}]  ({})", s.origin, s.reason);
        row("skipped", s.reason.name(), &s.path, &rest)
    });
    let sockets = report.sockets.iter().map(|s| {
        let rest = format!("  ({})", s.reason);
        row("socket", s.kind.name(), &s.path, &rest)
    });
    let skipped_sockets = report.skipped_sockets.iter().map(|s| {
        let rest = format!("  ({}: {})", s.reason, s.skip);
        row("socket", "skipped", &s.path, &rest)
    });
    let ports = report.local_ports.iter().map(|p| {
        format!(
            "{:<7}  {:<9}  {}  ({})",
            "connect",
            p.reason.name(),
            p.address,
            p.reason
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
        .chain(ports)
        .chain(warnings)
        .chain(limitations)
        .chain(std::iter::once(mediation_line(report.abi)))
        .collect()
}

/// How a confined command reaches unix sockets on this kernel.
pub(crate) fn mediation_line(abi: u32) -> String {
    let second = if abi >= Feature::ResolveUnix.since_abi() {
        format!(
            "; Landlock ABI {abi} grants RESOLVE_UNIX on the same sockets, for what the supervisor does not see"
        )
    } else {
        String::new()
    };
    format!(
        "sockets: every connect, bind and addressed sendto is decided by the connect supervisor \
         (seccomp user notification, performed for the command): a socket listed here, one \
         beneath the project or state directory, or one bound inside the sandbox{second}; \
         on this machine's own addresses a port listed here (connect) or bound inside"
    )
}

/// One line of the report: what, the stable name, the path, and the rest.
fn row(tag: &str, name: &str, path: &Path, rest: &str) -> String {
    format!("{tag:<7}  {name:<9}  {}{rest}", path.display())
}
