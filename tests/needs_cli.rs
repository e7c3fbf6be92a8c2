//! The integration suite (`tests/all.rs`) drives the CLI binary, so it is
//! built only with `--features cli` (its `required-features`). Without the
//! feature, `cargo test` would otherwise run the library's unit tests alone
//! and report green: this target has no `required-features`, and fails.

/// Without `--features cli` there is no integration suite to run: say so.
#[cfg(not(feature = "cli"))]
#[test]
fn the_integration_suite_needs_the_cli_feature() {
    panic!(
        "the integration suite (tests/all.rs) was not built: it needs `--features cli`. \
         Run `cargo nextest run --features cli` (or `cargo test --features cli`); \
         without the feature only the library's unit tests would have run"
    );
}

/// With `--features cli`, the suite is built: this target only checks that
/// the binary it drives was built too.
#[cfg(feature = "cli")]
#[test]
fn the_integration_suite_is_built_with_the_cli_feature() {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_strument-sandbox"));
    assert!(bin.is_file(), "{} was not built", bin.display());
}
