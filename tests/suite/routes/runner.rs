//! The unconfined parent's half: prepares one attempt's files, runs it in
//! a child (in the sandbox or not, as the route says), checks the
//! filesystem afterwards, and judges a route's two sides.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use strument_sandbox::Prepared;

use super::roles::{attempt_command, result_of};
use super::route::{Places, Route, Side};
use super::syscalls::INHERITED_FD;
use crate::suite::support::show;

/// What happened to one side of a route.
pub(super) struct Seen {
    pub(super) result: Result<(), i32>,
    pub(super) landed: bool,
    /// Explain's prediction, when the route is about paths.
    pub(super) predicted: Option<bool>,
}

impl Seen {
    /// The attempt succeeded and its write is there.
    pub(super) fn lands(&self) -> bool {
        self.result.is_ok() && self.landed
    }
}

/// Tries one side of route `row` over fresh `places`.
pub(super) fn try_side(
    prepared: &Prepared,
    row: usize,
    route: &Route,
    side: Side,
    places: &Places,
) -> Seen {
    for dir in [
        &places.project,
        &places.second_root,
        &places.outside,
        &places.outside_too,
    ] {
        fs::create_dir_all(dir).expect("make the case's directories");
    }
    let trial = route.trial(side, places);
    (trial.setup)();
    let predicted = trial.explain.as_ref().map(|paths| {
        paths().iter().all(|path| {
            prepared
                .report()
                .explain(path)
                .unwrap_or_else(|e| panic!("explain {}: {e}", path.display()))
                .is_granted()
        })
    });
    let mut cmd = attempt_command(row, side, places);
    cmd.current_dir(&places.outside_too).stdin(Stdio::null());
    let inherited = trial.inherited.as_ref().map(|path| {
        let f = fs::File::options()
            .write(true)
            .open(path)
            .expect("open before the sandbox");
        let raw = f.as_raw_fd();
        // SAFETY: dup2 between fork and exec is async-signal-safe; `raw`
        // stays open in the parent until the child has started.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(raw, INHERITED_FD) < 0
                    || libc::fcntl(INHERITED_FD, libc::F_SETFD, 0) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        f
    });
    if route.sandboxed(side) {
        // A descriptor is passed on only when kept by name: this route is
        // the caller's own choice to hand one over.
        let kept = inherited.as_ref().map(|_| INHERITED_FD);
        prepared.clone().keep_fds(kept).confine(&mut cmd);
    }
    let out = cmd.output().expect("run the route driver");
    drop(inherited);
    let result = result_of(&String::from_utf8_lossy(&out.stdout))
        .unwrap_or_else(|| panic!("row {row} ({side}) printed no result\n{}", show(&out)));
    let landed = match &trial.landed {
        Some(check) => check(),
        None => result.is_ok(),
    };
    Seen {
        result,
        landed,
        predicted,
    }
}

/// What is wrong with a route's two sides, one line each; `root` says
/// whether the suite runs as root (otherwise a route that needs it is
/// excused its granted side, and its refused side must show an errno the
/// granted side did not get).
pub(super) fn judge(route: &Route, granted: &Seen, refused: &Seen, root: bool) -> Vec<String> {
    let mut failures = Vec::new();
    let name = route.name;
    let excused = route.needs_root && !root;
    if !excused && !granted.lands() {
        failures.push(format!(
            "{name}: the granted attempt ({}) did not land: {:?}, landed {}",
            route.granted, granted.result, granted.landed
        ));
    }
    if route.not_confined {
        if !refused.lands() {
            failures.push(format!(
                "{name}: the attempt Landlock is documented not to confine ({}) was refused: \
                 {:?}; update the table and doc/security.md",
                route.refused, refused.result
            ));
        }
    } else {
        match refused.result {
            Ok(()) => failures.push(format!(
                "{name}: the refused attempt ({}) SUCCEEDED (landed on disk: {})",
                route.refused, refused.landed
            )),
            Err(e) if ![libc::EACCES, libc::EPERM, libc::EXDEV].contains(&e) => {
                failures.push(format!(
                    "{name}: refused with {}, not EACCES/EPERM/EXDEV",
                    errno_name(e)
                ));
            }
            // Without root, a route that needs it is refused for lack of a
            // privilege on both sides: the refused side proves Landlock only
            // with an errno the granted side (same call, no privilege) did
            // not get. mknod outside gets Landlock's EACCES before the
            // kernel asks for CAP_MKNOD; a mount whose control could not
            // mount (no user namespaces) proves nothing.
            Err(e) if excused && granted.result == Err(e) => failures.push(format!(
                "{name}: without root the refused attempt's {} is what the granted attempt got \
                 for lack of privilege too: nothing shows Landlock refused it; run as root",
                errno_name(e)
            )),
            Err(_) => {}
        }
        if refused.landed {
            failures.push(format!(
                "{name}: the refused attempt ({}) left its write on disk",
                route.refused
            ));
        }
    }
    for (side, seen) in [(Side::Granted, granted), (Side::Refused, refused)] {
        if let Some(predicted) = seen.predicted {
            let lands = seen.lands();
            if predicted != lands && !(excused && side == Side::Granted) {
                failures.push(format!(
                    "{name} ({}): explain predicted {}, the kernel {}",
                    route.what(side),
                    if predicted { "granted" } else { "refused" },
                    if lands { "let it land" } else { "refused it" }
                ));
            }
        }
    }
    failures
}

/// An errno by its name where the table shows it.
pub(super) fn errno_name(errno: i32) -> String {
    match errno {
        libc::EACCES => "EACCES".into(),
        libc::EPERM => "EPERM".into(),
        libc::EXDEV => "EXDEV".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::EINVAL => "EINVAL".into(),
        other => format!("errno {other}"),
    }
}
