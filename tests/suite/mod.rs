//! Test groups, named for what they need (see `.config/nextest.toml`):
//! `kernel` needs a kernel with Landlock; `network` also needs crates.io;
//! `capped` runs this kernel capped at an older ABI (Landlock at ABI 3 or
//! later, a debug build, crates.io once); `scenarios` runs
//! tests/scenarios/scenarios.sh on this kernel (Landlock, go, crates.io);
//! `tripwire` runs commands confined (Landlock); `vm` boots Debian's kernels
//! of every Landlock generation under qemu; `container` runs the scenarios in
//! podman containers (root, podman, runc, Landlock); `local_net` runs commands
//! next to services on this machine's addresses (Landlock, python3, sshd,
//! pypi.org); `simulated`, `cli` and
//! `writable` run anywhere.

mod capped;
mod cli;
mod container;
mod denials;
mod deputies;
mod kernel;
mod local_net;
mod network;
mod props;
mod roles;
mod routes;
mod scenarios;
mod simulated;
mod supervisor;
mod support;
mod tripwire;
mod vm;
mod widening;
mod writable;
