//! What a route is: one way of writing, tried on the side where it must
//! land and on the side where it must not, over directories made fresh for
//! each attempt.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The two halves of every route: the table's two columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// The attempt that must land (for an unconfined control: must work).
    Granted,
    /// The attempt that must be refused (for a route Landlock does not
    /// confine: is documented to land).
    Refused,
}

impl Side {
    pub(super) const BOTH: [Side; 2] = [Side::Granted, Side::Refused];

    fn from_name(name: &str) -> Option<Side> {
        Side::BOTH.into_iter().find(|side| side.to_string() == name)
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Granted => "granted",
            Side::Refused => "refused",
        })
    }
}

/// The unconfined process of the same user that the ptrace and
/// `/proc/<pid>` routes aim at.
#[derive(Clone, Debug)]
pub(super) struct TargetProcess {
    pub(super) pid: i32,
    /// Where its [`super::syscalls::BUF`] sits.
    pub(super) buffer_address: usize,
    pub(super) cwd: PathBuf,
}

/// The directories one attempt works in, made fresh for it.
#[derive(Clone, Debug)]
pub(super) struct Places {
    /// Beneath the project, the first granted root.
    pub(super) project: PathBuf,
    /// Beneath the state directory, the second granted root.
    pub(super) second_root: PathBuf,
    /// Beneath no root.
    pub(super) outside: PathBuf,
    /// A second directory beneath no root; the confined child's cwd.
    pub(super) outside_too: PathBuf,
    pub(super) target: TargetProcess,
    /// A name unique to this attempt, for names made outside its directories.
    pub(super) label: String,
}

impl Places {
    /// `/proc/<target>/cwd/<label>`: a name in the unconfined process's cwd.
    pub(super) fn via_target_cwd(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/cwd/{}", self.target.pid, self.label))
    }

    /// The name [`Places::via_target_cwd`] reaches, seen unconfined.
    pub(super) fn in_target_cwd(&self) -> PathBuf {
        self.target.cwd.join(&self.label)
    }

    /// One attempt's places as a role argument, a line each (the suite's
    /// paths hold no newline), after the route's row and side.
    pub(super) fn to_argument(&self, row: usize, side: Side) -> OsString {
        let lines: [OsString; 10] = [
            row.to_string().into(),
            side.to_string().into(),
            self.project.clone().into(),
            self.second_root.clone().into(),
            self.outside.clone().into(),
            self.outside_too.clone().into(),
            self.target.pid.to_string().into(),
            self.target.buffer_address.to_string().into(),
            self.target.cwd.clone().into(),
            self.label.clone().into(),
        ];
        let mut argument = Vec::new();
        for (n, line) in lines.into_iter().enumerate() {
            if n > 0 {
                argument.push(b'\n');
            }
            argument.extend(line.into_vec());
        }
        OsString::from_vec(argument)
    }

    /// The row, side and places [`Places::to_argument`] encoded.
    pub(super) fn from_argument(argument: &OsStr) -> (usize, Side, Places) {
        let lines: Vec<&[u8]> = argument.as_bytes().split(|&b| b == b'\n').collect();
        let [
            row,
            side,
            project,
            second_root,
            outside,
            outside_too,
            pid,
            address,
            cwd,
            label,
        ] = lines[..]
        else {
            panic!("a route attempt's argument has ten lines, not {argument:?}");
        };
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let number = |bytes: &[u8]| {
            text(bytes)
                .parse::<usize>()
                .unwrap_or_else(|e| panic!("{:?} in {argument:?}: {e}", text(bytes)))
        };
        let path = |bytes: &[u8]| PathBuf::from(OsStr::from_bytes(bytes));
        let side = Side::from_name(&text(side)).expect("a route attempt's side");
        let places = Places {
            project: path(project),
            second_root: path(second_root),
            outside: path(outside),
            outside_too: path(outside_too),
            target: TargetProcess {
                pid: i32::try_from(number(pid)).expect("a pid"),
                buffer_address: number(address),
                cwd: path(cwd),
            },
            label: text(label),
        };
        (number(row), side, places)
    }
}

/// The two directories a symmetric route's operation gets on one side.
#[derive(Clone, Debug)]
pub(super) struct Dirs {
    /// Where a one-directory operation works; where a two-directory one
    /// starts (the source of a rename or link, the directory a symlink
    /// sits in).
    pub(super) here: PathBuf,
    /// Where a two-directory operation ends.
    pub(super) there: PathBuf,
}

/// Which directories a symmetric route's operation gets on each side.
#[derive(Clone, Copy, Debug)]
pub(super) enum Span {
    /// Here and there are one directory: in the project (granted) or
    /// outside the roots (refused).
    OneDirectory,
    /// Here in the project and there in the second root (granted), or two
    /// directories outside (refused).
    TwoDirectories,
    /// There is the project; here is the second root (granted) or outside
    /// (refused).
    IntoTheProject,
    /// Here is the project; there is the second root (granted) or outside
    /// (refused).
    OutOfTheProject,
}

impl Span {
    pub(super) fn dirs(self, side: Side, p: &Places) -> Dirs {
        let (here, there) = match (self, side) {
            (Span::OneDirectory, Side::Granted) => (&p.project, &p.project),
            (Span::OneDirectory, Side::Refused) => (&p.outside, &p.outside),
            (Span::TwoDirectories, Side::Granted) => (&p.project, &p.second_root),
            (Span::TwoDirectories, Side::Refused) => (&p.outside, &p.outside_too),
            (Span::IntoTheProject, Side::Granted) => (&p.second_root, &p.project),
            (Span::IntoTheProject, Side::Refused) => (&p.outside, &p.project),
            (Span::OutOfTheProject, Side::Granted) => (&p.project, &p.second_root),
            (Span::OutOfTheProject, Side::Refused) => (&p.project, &p.outside),
        };
        Dirs {
            here: here.clone(),
            there: there.clone(),
        }
    }
}

/// One attempt over `P`: the directories of a symmetric route ([`Dirs`])
/// or all of an attempt's [`Places`].
pub(super) struct Case<P: ?Sized> {
    /// Run unconfined before the attempt.
    pub(super) setup: fn(&P),
    /// Run in the child, confined unless the route's granted side is an
    /// unconfined control; the errno it failed with.
    pub(super) attempt: fn(&P) -> Result<(), i32>,
    /// Whether the write is visible afterwards, checked unconfined; `None`
    /// when the attempt's own verification is the only evidence (a process
    /// or mount namespace that is gone afterwards).
    pub(super) landed: Option<fn(&P) -> bool>,
    /// The paths a write of this route needs (both ends of a rename or
    /// link); explain predicts "lands" when every one is granted. `None`
    /// for routes that are not about a path.
    pub(super) explain: Option<fn(&P) -> Vec<PathBuf>>,
}

/// The name a one-file route works on, in its directory.
const FILE: &str = "f";

/// How a route's two sides are tried.
pub(super) enum Tried {
    /// One operation on one file, [`FILE`] in the project (granted) or
    /// outside the roots (refused).
    OnAFile {
        case: Case<Path>,
        trace: Option<fn(&Path) -> bool>,
        /// The unconfined parent opens the file for writing before the
        /// sandbox and hands it down as [`super::syscalls::INHERITED_FD`]:
        /// the route is that descriptor.
        inherited: bool,
    },
    /// One operation over the two directories [`Span`] gives each side.
    Symmetric {
        span: Span,
        case: Case<Dirs>,
        trace: Option<fn(&Dirs) -> bool>,
    },
    /// The same attempt on both sides: the granted one is an unconfined
    /// control ([`Route::with_unconfined_control`]).
    Same(Case<Places>),
    /// Two attempts that differ in more than where they are tried.
    Paired {
        granted: Case<Places>,
        refused: Case<Places>,
    },
}

/// What the refused side of a symmetric route looks at for any trace of
/// the write, when that is wider than `landed`, which asks for the exact
/// write the granted side must make: a [`Path`] for a one-file route, the
/// [`Dirs`] for a two-directory one.
pub(super) trait Traced {
    fn set_trace(tried: &mut Tried, trace: fn(&Self) -> bool) -> bool;
}

impl Traced for Path {
    fn set_trace(tried: &mut Tried, trace: fn(&Path) -> bool) -> bool {
        let Tried::OnAFile { trace: t, .. } = tried else {
            return false;
        };
        *t = Some(trace);
        true
    }
}

impl Traced for Dirs {
    fn set_trace(tried: &mut Tried, trace: fn(&Dirs) -> bool) -> bool {
        let Tried::Symmetric { trace: t, .. } = tried else {
            return false;
        };
        *t = Some(trace);
        true
    }
}

/// A write route: one row of the table.
pub(super) struct Route {
    pub(super) name: &'static str,
    /// Where and how each side is tried, for the table.
    pub(super) granted: &'static str,
    pub(super) refused: &'static str,
    pub(super) tried: Tried,
    /// The granted attempt runs unconfined: a control proving the attempt
    /// sound, for routes no root can grant (mount, `/proc/<pid>/mem`).
    pub(super) control: bool,
    /// The refused attempt lands: Landlock does not confine this route.
    /// The suite asserts it so the table stays true.
    pub(super) not_confined: bool,
    /// Needs privileges beyond Landlock's (`CAP_MKNOD`, `CAP_SYS_ADMIN`):
    /// without root the granted attempt fails for lack of them.
    pub(super) needs_root: bool,
}

impl Route {
    pub(super) fn new(name: &'static str, what: [&'static str; 2], tried: Tried) -> Route {
        Route {
            name,
            granted: what[0],
            refused: what[1],
            tried,
            control: false,
            not_confined: false,
            needs_root: false,
        }
    }

    /// A route of one operation on one file: `setup` prepares it, then
    /// `attempt` writes it, and `landed` sees the write. Explain is asked
    /// about the file.
    pub(super) fn on_a_file(
        name: &'static str,
        what: [&'static str; 2],
        setup: fn(&Path),
        attempt: fn(&Path) -> Result<(), i32>,
        landed: fn(&Path) -> bool,
    ) -> Route {
        let case = Case {
            setup,
            attempt,
            landed: Some(landed),
            explain: Some(|file| vec![file.to_path_buf()]),
        };
        let tried = Tried::OnAFile {
            case,
            trace: None,
            inherited: false,
        };
        Route::new(name, what, tried)
    }

    /// A route of one operation over `span`'s directories.
    pub(super) fn symmetric(
        name: &'static str,
        what: [&'static str; 2],
        span: Span,
        case: Case<Dirs>,
    ) -> Route {
        let tried = Tried::Symmetric {
            span,
            case,
            trace: None,
        };
        Route::new(name, what, tried)
    }

    /// The refused side of this symmetric route looks for `trace`.
    pub(super) fn tracing<P: Traced + ?Sized>(mut self, trace: fn(&P) -> bool) -> Route {
        assert!(
            P::set_trace(&mut self.tried, trace),
            "{}: a trace for another kind of route",
            self.name
        );
        self
    }

    /// This one-file route is not about a path: explain is not asked.
    pub(super) fn not_about_a_path(mut self) -> Route {
        match &mut self.tried {
            Tried::OnAFile { case, .. } => case.explain = None,
            _ => panic!("{}: only a one-file route is built with explain", self.name),
        }
        self
    }

    /// This one-file route writes through a descriptor the parent opened
    /// on the file before the sandbox.
    pub(super) fn through_inherited(mut self) -> Route {
        match &mut self.tried {
            Tried::OnAFile { inherited, .. } => *inherited = true,
            _ => panic!("{}: only a one-file route inherits its file", self.name),
        }
        self.not_about_a_path()
    }

    pub(super) fn needing_root(self) -> Route {
        Route {
            needs_root: true,
            ..self
        }
    }

    pub(super) fn with_unconfined_control(self) -> Route {
        Route {
            control: true,
            ..self
        }
    }

    pub(super) fn not_confined_by_landlock(self) -> Route {
        Route {
            not_confined: true,
            ..self
        }
    }

    pub(super) fn what(&self, side: Side) -> &'static str {
        match side {
            Side::Granted => self.granted,
            Side::Refused => self.refused,
        }
    }

    /// Whether `side` runs in the sandbox.
    pub(super) fn sandboxed(&self, side: Side) -> bool {
        !(self.control && side == Side::Granted)
    }

    /// One side of this route over `places`.
    pub(super) fn trial(&self, side: Side, places: &Places) -> Trial {
        match &self.tried {
            Tried::OnAFile {
                case,
                trace,
                inherited,
            } => {
                let file: Rc<Path> = Span::OneDirectory.dirs(side, places).here.join(FILE).into();
                Trial {
                    inherited: inherited.then(|| file.to_path_buf()),
                    ..Trial::over(&case.traced(side, *trace), &file)
                }
            }
            Tried::Symmetric { span, case, trace } => {
                let dirs = Rc::new(span.dirs(side, places));
                Trial::over(&case.traced(side, *trace), &dirs)
            }
            Tried::Same(case) => Trial::over(case, &Rc::new(places.clone())),
            Tried::Paired { granted, refused } => {
                let case = match side {
                    Side::Granted => granted,
                    Side::Refused => refused,
                };
                Trial::over(case, &Rc::new(places.clone()))
            }
        }
    }
}

impl<P: ?Sized> Case<P> {
    /// This case as `side` runs it: the refused side checks for `trace`,
    /// when there is one, instead of `landed`.
    fn traced(&self, side: Side, trace: Option<fn(&P) -> bool>) -> Case<P> {
        let landed = match (side, trace) {
            (Side::Refused, Some(trace)) => Some(trace),
            _ => self.landed,
        };
        Case { landed, ..*self }
    }
}

impl<P: ?Sized> Clone for Case<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: ?Sized> Copy for Case<P> {}

/// One side of a route, bound to its directories.
pub(super) struct Trial {
    pub(super) setup: Box<dyn Fn()>,
    pub(super) attempt: Box<dyn Fn() -> Result<(), i32>>,
    pub(super) landed: Option<Box<dyn Fn() -> bool>>,
    pub(super) explain: Option<Box<dyn Fn() -> Vec<PathBuf>>>,
    /// The file to open for writing before the sandbox and hand down.
    pub(super) inherited: Option<PathBuf>,
}

impl Trial {
    fn over<P: ?Sized + 'static>(case: &Case<P>, at: &Rc<P>) -> Trial {
        let (setup, attempt) = (case.setup, case.attempt);
        let (setup_at, attempt_at) = (Rc::clone(at), Rc::clone(at));
        Trial {
            setup: Box::new(move || setup(&setup_at)),
            attempt: Box::new(move || attempt(&attempt_at)),
            landed: case.landed.map(|landed| {
                let at = Rc::clone(at);
                Box::new(move || landed(&at)) as Box<dyn Fn() -> bool>
            }),
            explain: case.explain.map(|explain| {
                let at = Rc::clone(at);
                Box::new(move || explain(&at)) as Box<dyn Fn() -> Vec<PathBuf>>
            }),
            inherited: None,
        }
    }
}
