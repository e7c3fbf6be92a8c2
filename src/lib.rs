//! Confine what a coding agent, and every command it runs, may **write**.
//!
//! The guarantee is deliberately narrow: integrity, not confidentiality.
//! Writes cannot land outside the project and a few named places, while
//! reads and execution stay open across the whole filesystem. A mistaken
//! or injected `rm -rf ~` becomes impossible; exfiltration is no harder than
//! it was. The enforcement is Linux [Landlock], so it needs no privileges,
//! covers every child process, and cannot be undone once applied.
//!
//! Leaving reads open is what keeps builds working: nothing has to list
//! `/usr/bin`, `~/.cargo/bin` or `~/go/bin`, and a sandbox that breaks
//! builds is a sandbox that gets switched off. See `doc/security.md` for the
//! threat model and what is not covered.
//!
//! An agent opens one [`Session`] over its project and confines every
//! command it runs through it; the agent itself stays unconfined:
//!
//! ```no_run
//! use std::process::Command;
//! use strument_sandbox::Session;
//!
//! let session = Session::builder("/home/me/project").open()?; // refuses unless Landlock is there
//! for warning in &session.report().warnings {
//!     eprintln!("warning: {warning}");
//! }
//! let finished = session.run(Command::new("cargo").arg("build"))?;
//! for change in &finished.changes {
//!     eprintln!("{change}"); // a git hook or .envrc the command changed
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The session does, in order, what the seed's functions offer one by one:
//! [`probe()`], [`default_writable`] and [`default_sockets`] into a
//! [`Policy`], [`Policy::prepare`] (or [`Policy::apply`] to confine the
//! calling process itself), and a [`tripwire`] snapshot of the files that
//! run later, outside the sandbox (git hooks, `.git/config`, `.envrc`),
//! which Landlock cannot refuse inside the project. What is granted, what
//! is skipped and why, is the [`Report`].
//!
//! The rest lives in modules named for their concept: [`abi`] (what each
//! Landlock version adds), [`root`] (what a root is, where it came from,
//! what it covers), [`sockets`], [`services`] (local services a confined
//! command can still reach), [`explain`] (whether a write would land),
//! [`denials`] (what the kernel refused, read back), [`tripwire`],
//! [`writable`] (the default roots and the caches they need) and
//! [`session`].
//!
//! A command the session (or [`Prepared::confine`]) confines also gets a
//! few environment variables where the caller has not set them
//! ([`environment`]): daemons of the session's own (tmux, Gradle,
//! sccache), so neither side of the sandbox runs in the other's, and
//! installs by copy (uv, pnpm). When a command fails after writing into a
//! place refused on purpose (rustup's home, `~/.cargo/bin`, the Nix store,
//! …), [`refusals::on_purpose`] turns its error output into what the place
//! is and what to do instead.
//!
//! With the `serde` feature the report types derive `Serialize`, in the
//! shape `strument-sandbox policy --json` (and `probe`, `explain`, `run`)
//! prints: paths as strings, stable names (`"directory"`, `"widens"`) for
//! enums, an enum with data as an object tagged with its variant (the
//! shape is documented once, in `doc/json.md`). An agent renders its
//! `/sandbox` view from them.
//!
//! Errors live in one place ([`PolicyError`], [`ApplyError`],
//! [`SessionError`], [`ProbeError`], [`ExplainError`], [`TraceError`]);
//! each has `hint()`, what a person can do about it. Every enum a program
//! reads has `name()`, a short stable string.
//!
//! [Landlock]: https://docs.kernel.org/userspace-api/landlock.html

#![deny(missing_docs)]
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::missing_errors_doc)]
// A sandbox library must not panic on paths that can fail at run time.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod abi;
pub(crate) mod beneath;
mod bpf;
pub mod connect;
pub mod denials;
pub mod environment;
mod error;
pub mod explain;
mod fds;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod git;
pub mod local_net;
mod policy;
mod prepared;
mod probe;
pub mod refusals;
mod report;
pub mod root;
#[cfg(feature = "serde")]
mod serialize;
pub mod services;
pub mod session;
pub mod sockets;
pub mod spawn;
#[allow(unsafe_code)]
mod sys;
mod terminal;
#[cfg(test)]
mod testing;
mod through;
pub mod tripwire;
mod wait;
pub mod writable;

pub use error::{ApplyError, ExplainError, PolicyError, ProbeError, SessionError, TraceError};
pub use policy::Policy;
pub use prepared::Prepared;
pub use probe::{Availability, probe};
pub use report::{Granted, Report, Skipped, Warning};
pub use root::{Origin, Rights, Root, SkipReason};
pub use session::{Finished, Session, SessionBuilder};
pub use sockets::default_sockets;
pub use writable::default_writable;

// The README's examples are compiled (and type-checked) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
