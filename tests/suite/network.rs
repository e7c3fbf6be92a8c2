//! Needs a Landlock kernel and crates.io.

use std::fs;
use std::path::Path;

use super::support::{FakeHome, assert_success, require_tool, show};

/// What the cargo-build scenario does not show: a home where cargo was
/// installed but never downloaded anything has no `~/.cargo/registry`;
/// `run` creates it, so the build's downloads land there.
#[test]
fn cargo_build_in_a_home_without_a_registry_gets_one_created_and_written() {
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

/// A fresh fake home whose cache home starts empty: `pip install` into a
/// project virtualenv writes pip's cache (`~/.cache/pip`, made because pip
/// is installed), and the cache home's own files stay read-only.
#[test]
fn pip_install_into_a_project_venv_writes_pips_cache() {
    let python = Path::new("/usr/bin/python3");
    assert!(
        python.is_file(),
        "/usr/bin/python3 is missing: install it (Debian: apt-get install python3-venv python3-pip)"
    );
    require_tool("pip3", "python3-pip");
    let h = FakeHome::new();
    // A small sdist, so pip builds a wheel and caches it: this network's
    // proxy strips the headers pip's HTTP cache needs, so a plain wheel
    // download would leave the cache empty and prove nothing.
    let script = r#"set -e
mkdir -p hello-1.0 dist
printf 'from setuptools import setup\nsetup(name="hello", version="1.0", py_modules=["hello"])\n' > hello-1.0/setup.py
echo 'X = 1' > hello-1.0/hello.py
tar czf dist/hello-1.0.tar.gz hello-1.0
/usr/bin/python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --use-pep517 dist/hello-1.0.tar.gz
.venv/bin/python -c 'import hello'
echo x > "$HOME/.cache/top-level" || true
"#;
    let out = h.run(&[], &["sh", "-c", script]);
    assert_success(&out);
    let pip_cache = h.home.join(".cache/pip/wheels");
    assert!(
        fs::read_dir(&pip_cache).is_ok_and(|mut d| d.next().is_some()),
        "pip cached no wheel in ~/.cache/pip/wheels\n{}",
        show(&out)
    );
    assert!(
        !h.home.join(".cache/top-level").exists(),
        "a file directly in the cache home was writable"
    );
    h.assert_sentinels_intact();
}

/// The same for `npm install`: npm's cache `~/.npm` is made because npm is
/// installed, and written.
#[test]
fn npm_install_on_a_fresh_home_writes_npms_cache() {
    require_tool("npm", "npm");
    let h = FakeHome::new();
    fs::write(
        h.project.join("package.json"),
        r#"{ "name": "fixture", "version": "1.0.0", "private": true }"#,
    )
    .expect("package.json");
    let mut cmd = std::process::Command::new(super::support::BIN);
    cmd.args(["run", "--project"]).arg(&h.project).args([
        "--",
        "npm",
        "install",
        "--no-audit",
        "--no-fund",
        "is-number@7.0.0",
    ]);
    h.env(&mut cmd);
    cmd.env("npm_config_update_notifier", "false");
    let out = super::support::output(&mut cmd);
    assert_success(&out);
    assert!(
        h.project
            .join("node_modules/is-number/package.json")
            .is_file(),
        "{}",
        show(&out)
    );
    assert!(
        fs::read_dir(h.home.join(".npm/_cacache")).is_ok_and(|mut d| d.next().is_some()),
        "npm wrote nothing to ~/.npm\n{}",
        show(&out)
    );
    h.assert_sentinels_intact();
}
