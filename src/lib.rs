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
//! What Landlock cannot refuse inside the project, files that run later
//! outside the sandbox (git hooks, `.git/config`, `.envrc`, editor tasks),
//! a [`Snapshot`] reports after each command: take it from the
//! [`Prepared`] policy, call [`Snapshot::changes`] after every command and
//! once more at the end of the session.
//!
//! ```no_run
//! use strument_sandbox::{Policy, default_local_ports, default_sockets, default_writable, probe};
//!
//! let availability = probe();
//! if let Some(why) = &availability.error {
//!     eprintln!("no sandbox: {why}; {}", why.hint());
//! }
//! let writable = default_writable("/home/me/project".as_ref(), None, &[])?;
//! let sockets = default_sockets("/home/me/project".as_ref(), None);
//! let local_ports = default_local_ports(); // the resolver, a proxy from the environment
//! let report = Policy { writable, sockets, local_ports }.apply()?; // refuses unless Landlock is there
//! println!("writable: {:?}", report.granted_paths());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With the `serde` feature the report types implement `Serialize`, in the
//! shape `strument-sandbox policy --json` (and `probe`, `explain`, `run`)
//! prints: paths as strings, stable names (`"directory"`, `"widens"`) for
//! enums, and the sentence a person reads as `detail`. An agent renders its
//! `/sandbox` view from them.
//!
//! Errors live in one place ([`PolicyError`], [`ApplyError`],
//! [`ProbeError`], [`ExplainError`], [`DenialLogError`]); each has
//! `hint()`, what a person can do about it. Every enum a program reads has
//! `name()`, a short stable string.
//!
//! [Landlock]: https://docs.kernel.org/userspace-api/landlock.html

#![deny(missing_docs)]
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::missing_errors_doc)]
// A sandbox library must not panic on paths that can fail at run time.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod abi;
mod connect;
mod denials;
mod error;
mod explain;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod git;
mod local_net;
mod policy;
mod prepared;
mod probe;
mod report;
mod root;
#[cfg(feature = "serde")]
mod serialize;
mod services;
mod sockets;
mod supervise;
#[allow(unsafe_code)]
mod sys;
mod terminal;
mod tripwire;
mod writable;

pub use abi::Feature;
pub use connect::{ConnectTarget, RefusedConnect};
pub use denials::{Advice, Audited, Denial};
pub use error::{ApplyError, DenialLogError, ExplainError, PolicyError, ProbeError};
pub use explain::{Explanation, Verdict};
pub use local_net::{Listener, LocalPort, PortReason, Transport, default_local_ports};
pub use policy::Policy;
pub use prepared::Prepared;
pub use probe::{Availability, Limitation, probe};
pub use report::{Granted, Report, RootKind, SkipReason, Skipped, Warning};
pub use root::{Covers, Origin, Root, Variable, covers_home};
pub use services::{Service, ServiceKind, reachable_services};
pub use sockets::{GrantedSocket, SkippedSocket, Socket, SocketReason, default_sockets};
pub use supervise::SignalForwarder;
pub use tripwire::{Change, ChangeKind, Snapshot};
pub use writable::{create_missing_caches, default_writable};

// The README's examples are compiled (and type-checked) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
