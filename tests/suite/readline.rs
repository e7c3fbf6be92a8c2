//! No readline-only bash builtin (compgen, complete, compopt, bind) in the
//! shell every tier runs: nixpkgs' `pkgs.bash` is built without readline, and
//! the NixOS VM tests run the scenarios with it. The lint is
//! `.ci/lint-readline-builtins.sh`; here it runs on the tree, and on planted
//! files to show it tells a use from a mention. Runs anywhere (bash, awk).

use std::fs;
use std::path::Path;
use std::process::Command;

use super::support::{assert_success, output, require_tool, scratch_base, show};

/// Runs the lint on `paths` (relative to the repository) from `dir`.
fn lint(dir: &Path, paths: &[&str]) -> std::process::Output {
    require_tool("bash", "bash");
    require_tool("awk", "mawk");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/lint-readline-builtins.sh");
    output(
        Command::new("bash")
            .arg(script)
            .args(paths)
            .current_dir(dir),
    )
}

#[test]
fn the_shared_scripts_use_no_readline_only_builtin() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `nix build` leaves the Nix files out of the package's source
    // (nix/package.nix); there the `readline-builtins` check lints them.
    let mut paths = vec!["tests/scenarios", "tests/vm"];
    paths.extend(
        ["nix", "nixos-tests", "flake.nix"]
            .into_iter()
            .filter(|p| repo.join(p).exists()),
    );
    let out = lint(repo, &paths);
    println!("linted {paths:?}\n{}", show(&out));
    assert_success(&out);
}

#[test]
fn the_lint_fails_on_each_use_and_passes_mentions() {
    let dir = scratch_base().join("readline-lint");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("mkdir scratch");
    let uses = [
        (
            "compgen",
            r#"compgen -G "$registry/src/*" >/dev/null || fail"#,
        ),
        ("compgen", r#"if x=$(compgen -c); then :; fi"#),
        ("complete", "true && complete -F _f f"),
        ("compopt", "{ compopt -o nospace; }"),
        ("bind", "a; bind -x '\"a\":b'"),
        ("compgen", "FOO=1 builtin compgen -A file"),
        ("compgen", "bash -c 'compgen -G x'"),
    ];
    let mut script = String::from("#!/usr/bin/env bash\n");
    for (_, line) in uses {
        script.push_str(line);
        script.push('\n');
    }
    fs::write(dir.join("uses.sh"), &script).expect("write uses.sh");
    // The same names, never run as commands.
    fs::write(
        dir.join("mentions.sh"),
        concat!(
            "#!/usr/bin/env bash\n",
            "# compgen -G is what we avoid\n",
            "command -v compgen || type complete\n",
            "names=(compgen complete compopt bind)\n",
            "touch \"$dest/complete\"\n",
            "python3 -c 's = socket.socket(); s.bind(p)'\n",
            "echo \"the build is complete\"\n",
        ),
    )
    .expect("write mentions.sh");
    fs::write(
        dir.join("gen.nix"),
        "{ complete = true;\n  text = ''\n    compgen -G \"$out/*\"\n  '';\n}\n",
    )
    .expect("write gen.nix");

    // Refused: every use, by file and line.
    let out = lint(&dir, &["uses.sh"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    for (n, (name, _)) in uses.iter().enumerate() {
        let at = format!("uses.sh:{}: {name} ", n + 2);
        assert!(
            stdout.lines().any(|l| l.starts_with(&at)),
            "no `{at}` line\n{}",
            show(&out)
        );
    }
    assert_eq!(stdout.lines().count(), uses.len(), "{}", show(&out));
    let out = lint(&dir, &["gen.nix"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    // Line 3's compgen; line 1's `complete =` is a Nix attribute.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("gen.nix:3: compgen ") && stdout.lines().count() == 1,
        "{}",
        show(&out)
    );

    // Granted: the mentions pass.
    let out = lint(&dir, &["mentions.sh"]);
    assert_success(&out);
}
