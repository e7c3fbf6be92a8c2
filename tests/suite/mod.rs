//! Test groups, named for what they need (see `.config/nextest.toml`):
//! `kernel` needs a kernel with Landlock; `network` also needs crates.io;
//! `capped` runs this kernel capped at an older ABI (Landlock at ABI 3 or
//! later, a debug build, crates.io once); `scenarios` runs
//! tests/scenarios/scenarios.sh on this kernel (Landlock, go, crates.io);
//! `tripwire` runs commands confined (Landlock); `denials` runs
//! `run --explain-denials` as an ordinary user (root drops to `nobody`); `vm` boots Debian's kernels
//! of every Landlock generation under qemu; `container` runs the scenarios in
//! podman containers (root, podman, runc, Landlock); `local_net` runs commands
//! next to services on this machine's addresses (Landlock, python3, sshd,
//! pypi.org); `simulated`, `cli`, `writable` and `readline` (a lint of the
//! shared shell scripts) run anywhere. `first_hour` needs Landlock and npm's
//! and PyPI's registries.

mod capped;
mod cli;
mod container;
mod datagrams;
mod denials;
mod deputies;
mod first_hour;
mod kernel;
mod local_net;
mod network;
mod props;
mod readline;
mod roles;
mod routes;
mod scenarios;
mod simulated;
mod supervisor;
mod support;
mod through;
mod tripwire;
mod vm;
mod widening;
mod writable;
