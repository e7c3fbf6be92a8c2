//! Test groups, named for what they need (see `.config/nextest.toml`):
//! `kernel` needs a kernel with Landlock, `network` also needs crates.io,
//! `simulated`, `cli` and `writable` run anywhere.

mod cli;
mod kernel;
mod network;
mod simulated;
mod support;
mod writable;
