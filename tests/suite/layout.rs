//! The suite's own layout: one axis. Each file under tests/suite/ is a
//! topic; what a test needs beyond cargo is the `needs_<what>` module it
//! sits in ([`Need`]), the helpers that use Landlock, the network, qemu or
//! podman fail a test outside the matching module ([`require`]), and the
//! nextest profiles filter on those segments alone. Runs anywhere.

use std::fs;
use std::path::{Path, PathBuf};

use super::support::{Need, require, test_name};

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite")
}

/// The `needs_` checks read the running test from its thread's name, and
/// re-run tests by [`test_name!`]: both must name this very test, or every
/// check would pass by checking nothing and every re-run would run nothing.
#[test]
fn the_running_test_is_the_name_the_compiler_derives() {
    let name = test_name!(the_running_test_is_the_name_the_compiler_derives);
    let by_hand = [
        "suite",
        "layout",
        "the_running_test_is_the_name_the_compiler_derives",
    ];
    assert_eq!(name, by_hand.join("::"));
    assert_eq!(std::thread::current().name(), Some(name));
}

/// A test outside a need's module that asks for the need fails, naming the
/// module to move it into; inside it, the same check passes.
#[test]
fn a_test_outside_its_needs_module_fails_naming_it() {
    let caught = std::panic::catch_unwind(|| require(Need::Landlock));
    let message = caught.expect_err("require(Landlock) passed outside needs_landlock");
    let message = message
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message.contains("sits in no `needs_landlock` module"),
        "{message}"
    );
    let nested = "suite::first_hour::needs_landlock::needs_network::npm_install";
    for need in Need::ALL {
        let expected = matches!(need, Need::Landlock | Need::Network);
        assert_eq!(need.holds_for(nested), expected, "{need:?} for {nested}");
        assert!(!need.holds_for("suite::cli::usage_errors"), "{need:?}");
    }
    assert!(!Need::Landlock.holds_for("suite::needs_landlock_too::t"));
}

/// Every `needs_` module (inline or a file) is one of [`Need::ALL`], the
/// ones the profiles' filters name; no topic is named after a need.
#[test]
fn every_needs_module_is_a_need_the_filters_know_and_no_topic_is_a_need() {
    let known: Vec<&str> = Need::ALL.iter().map(|need| need.module()).collect();
    let mut seen = Vec::new();
    for file in rust_files(&suite_dir()) {
        let text = fs::read_to_string(&file).expect("read a suite file");
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let inline = text
            .lines()
            .filter_map(|line| line.trim().strip_prefix("mod "))
            .map(|rest| rest.trim_end_matches([' ', '{', ';']));
        for module in inline.chain([stem]) {
            if module.starts_with("needs_") {
                assert!(
                    known.contains(&module),
                    "{}: `{module}` is no need the nextest filters know ({known:?})",
                    file.display()
                );
                seen.push(module.to_owned());
            }
        }
    }
    for need in known {
        assert!(
            seen.iter().any(|module| module == need),
            "no test sits in `{need}`"
        );
    }
    let words = ["kernel", "landlock", "network", "qemu", "podman", "capped"];
    for file in fs::read_dir(suite_dir()).expect("tests/suite") {
        let path = file.expect("an entry").path();
        let topic = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        assert!(
            !words.contains(&topic) && !topic.starts_with("needs_"),
            "tests/suite/{topic} is named after what it needs, not its topic"
        );
    }
}

/// The profiles select by need, derived from the `needs_` segments, never
/// by a list of topics: `nix build` leaves out every need, the VM override
/// takes `needs_qemu`.
#[test]
fn the_nextest_profiles_filter_on_the_needs_modules_alone() {
    let config =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".config/nextest.toml"))
            .expect("read .config/nextest.toml");
    let names: Vec<&str> = Need::ALL
        .iter()
        .map(|need| need.module().trim_start_matches("needs_"))
        .collect();
    let every_need = format!(
        "default-filter = 'not test(/::needs_({})::/)'",
        names.join("|")
    );
    let filters: Vec<&str> = config
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("filter") || line.starts_with("default-filter"))
        .collect();
    assert_eq!(
        filters,
        ["filter = 'test(/::needs_qemu::/)'", every_need.as_str()],
        "the profiles' filters in .config/nextest.toml"
    );
}

/// No code names a test by its path by hand (a re-run filtered to it, a
/// shell line that starts it): only [`test_name!`] does, so a rename or a
/// move to another module cannot leave a name that filters to nothing.
/// Comments may name tests.
#[test]
fn no_code_names_a_test_by_hand() {
    let files: Vec<(PathBuf, String)> = rust_files(&suite_dir())
        .into_iter()
        .map(|file| {
            let text = fs::read_to_string(&file).expect("read a suite file");
            (file, text)
        })
        .collect();
    let mut tests = Vec::new();
    for (_, text) in &files {
        let mut lines = text.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if line == "#[test]" {
                let name = lines
                    .find_map(|l| l.strip_prefix("fn "))
                    .and_then(|rest| rest.split('(').next())
                    .expect("a test function after #[test]");
                tests.push(name.to_owned());
            }
        }
    }
    assert!(tests.len() > 100, "found only {} tests", tests.len());
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut by_hand = Vec::new();
    for (file, text) in &files {
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for test in &tests {
                let named = line
                    .match_indices(&format!("::{test}"))
                    .any(|(at, m)| !line[at + m.len()..].starts_with(ident));
                if named {
                    by_hand.push(format!("{}:{}: {test}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        by_hand.is_empty(),
        "tests named by hand (use test_name!):\n{}",
        by_hand.join("\n")
    );
}
