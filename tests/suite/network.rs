//! Needs a Landlock kernel and crates.io.

use std::fs;

use super::support::{FakeHome, assert_success};

#[test]
fn cargo_build_with_a_crates_io_dependency_writes_the_registry() {
    let h = FakeHome::new();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cargo-hello");
    for name in ["Cargo.toml", "Cargo.lock"] {
        fs::copy(fixture.join(name), h.project.join(name)).expect("copy manifest");
    }
    fs::create_dir_all(h.project.join("src")).expect("mkdir src");
    fs::copy(fixture.join("src/main.rs"), h.project.join("src/main.rs")).expect("copy main.rs");
    // A home where cargo was installed but never downloaded anything.
    fs::create_dir_all(h.home.join(".cargo")).expect("mkdir ~/.cargo");
    let out = h.run(&[], &["cargo", "build", "--locked"]);
    assert_success(&out);
    let registry = h.home.join(".cargo/registry");
    for sub in ["index", "cache", "src"] {
        assert!(
            fs::read_dir(registry.join(sub))
                .map(|mut d| d.next().is_some())
                .unwrap_or(false),
            "the fake CARGO_HOME's registry/{sub} was not written"
        );
    }
    assert!(
        h.project.join("target/debug/cargo-hello").is_file(),
        "no binary in target/"
    );
    h.assert_sentinels_intact();
}
