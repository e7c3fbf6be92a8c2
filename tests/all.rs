//! The host tier: every test runs against the kernel of the machine running
//! the suite. nextest runs each test in its own process, which matters
//! because applying a policy is irreversible; tests that apply in-process
//! re-run themselves in a child process so that `cargo test` is safe too.

mod suite;
