//! The host tier's tests, one file a topic. What a test needs from the
//! machine beyond cargo is the module it sits in, never its topic:
//! `needs_landlock` (a kernel that enforces Landlock), `needs_network`
//! (crates.io, npm's or PyPI's registries, Debian's archive), `needs_qemu`
//! (the VM tier: qemu and Debian's kernel images), `needs_podman` (the
//! container tier: podman, runc, root); two needs nest
//! (`first_hour::needs_landlock::needs_network::…`). The nextest profiles
//! filter on these segments (`.config/nextest.toml`; `suite::layout`
//! checks them), and the helpers that confine, download or boot fail a
//! test outside the matching module (`support::require`). A test outside
//! every `needs_` module runs anywhere, `nix build`'s sandbox included.
//!
//! `support` (fake homes, the `needs_` checks, [`support::test_name!`])
//! and `roles` (re-running this binary to play a part) hold no topic.

mod cli;
mod confine;
mod container;
mod datagrams;
mod denials;
mod deputies;
mod first_hour;
mod layout;
mod local_net;
mod older_abis;
mod props;
mod readline;
mod roles;
mod routes;
mod scenarios;
mod simulated;
mod spawn;
mod supervisor;
mod support;
mod through;
mod tripwire;
mod vm;
mod widening;
mod writable;
