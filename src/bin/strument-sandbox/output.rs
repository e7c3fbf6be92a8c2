//! What several subcommands print: standard output that ends quietly on a
//! closed pipe, the report a line a fact, and how sockets are mediated.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use strument_sandbox::{Availability, Origin, ProbeError, Report, Rights, abi::Feature};

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
    // A git directory of the repository the project sits inside (a
    // monorepo's package) says so: its pointer is above the project.
    let project = report
        .granted
        .iter()
        .find(|g| g.origin == Origin::Project)
        .map(|g| g.path.as_path());
    let enclosing = |o: &Origin| match (o, project) {
        (Origin::Git { pointer }, Some(project)) => pointer
            .parent()
            .is_some_and(|tree| project.starts_with(tree) && project != tree),
        _ => false,
    };
    let note = |o: &Origin| {
        if enclosing(o) {
            "  (the enclosing repository's: the project is inside its working tree)"
        } else {
            ""
        }
    };
    let granted = report.granted.iter().map(|g| {
        // Only a narrower set is worth a word: every other root has them all.
        let rights = if g.rights == Rights::All {
            String::new()
        } else {
            format!("  ({})", g.rights)
        };
        let rest = format!(
            "{}  [{}]{rights}{}",
            resolved(&g.resolved),
            g.origin,
            note(&g.origin)
        );
        row("granted", g.kind.name(), &g.path, &rest)
    });
    let skipped = report.skipped.iter().map(|s| {
        let rest = format!("  [{}]  ({}){}", s.origin, s.reason, note(&s.origin));
        row("skipped", s.reason.name(), &s.path, &rest)
    });
    let sockets = report.sockets.iter().map(|s| {
        let rest = format!("  ({})", s.origin);
        row("socket", s.kind.name(), &s.path, &rest)
    });
    let skipped_sockets = report.skipped_sockets.iter().map(|s| {
        let rest = format!("  ({}: {})", s.origin, s.reason);
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
        .landlock
        .limitations()
        .into_iter()
        .map(|l| format!("limitation: {l}"));
    granted
        .chain(skipped)
        .chain(sockets)
        .chain(skipped_sockets)
        .chain(ports)
        .chain(warnings)
        .chain(limitations)
        .chain(std::iter::once(mediation_line(report.landlock.abi)))
        .collect()
}

/// The confined command's environment (`strument_sandbox::environment`),
/// one variable a line: its value, or the caller's that stands instead.
pub(crate) fn environment_lines(report: &Report) -> Vec<String> {
    strument_sandbox::environment::settings(report)
        .iter()
        .map(|s| {
            let value = match &s.caller {
                None => format!("{}={}", s.variable, s.value.to_string_lossy()),
                Some(caller) => format!(
                    "{}={} (set by the caller; left alone)",
                    s.variable,
                    caller.to_string_lossy()
                ),
            };
            format!("env      {:<9}  {value}  ({})", s.tool, s.why)
        })
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
        "sockets: every connect and addressed sendto is decided by the connect supervisor \
         (seccomp user notification, performed for the command; a unix socket's bind is \
         Landlock's): a socket listed here, one beneath the project or state directory, or one \
         bound inside the sandbox{second}; on this machine's own addresses a port listed here \
         (connect) or bound inside"
    )
}

/// One line of the report: what, the stable name, the path, and the rest.
fn row(tag: &str, name: &str, path: &Path, rest: &str) -> String {
    format!("{tag:<7}  {name:<9}  {}{rest}", path.display())
}

/// `item` as the library serializes it, with one more field beside.
pub(crate) fn json_with<T: serde::Serialize>(item: &T, key: &str, value: Value) -> Value {
    let mut v = json!(item);
    v[key] = value;
    v
}

/// What `--json` prints of a probe: the library's fields, and beside them
/// what a person or a script reads without the library (`supported`, the
/// errno for every reason, `message`, `hint`, `all_threads`,
/// `limitations`), as doc/json.md lists.
pub(crate) fn availability_json(a: &Availability) -> Value {
    let mut v = json!(a);
    v["supported"] = json!(a.supported());
    v["reason"] = json!(a.error.as_ref().map(ProbeError::name));
    v["errno"] = json!(a.error.as_ref().and_then(ProbeError::errno));
    v["message"] = json!(a.error.as_ref().map(ToString::to_string));
    v["hint"] = json!(a.error.as_ref().map(ProbeError::hint));
    v["all_threads"] = json!(a.all_threads());
    v["limitations"] = json!(a.limitations());
    v
}

/// What `policy --json` prints: the report, its probe as
/// [`availability_json`], and each skipped root's reason as a sentence
/// (`detail`).
pub(crate) fn report_json(report: &Report) -> Value {
    let mut v = json!(report);
    v["landlock"] = availability_json(&report.landlock);
    for (key, skipped) in [
        ("skipped", &report.skipped),
        ("skipped_sockets", &report.skipped_sockets),
    ] {
        for (i, s) in skipped.iter().enumerate() {
            v[key][i]["detail"] = json!(s.reason.to_string());
        }
    }
    v
}
