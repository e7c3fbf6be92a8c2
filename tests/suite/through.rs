//! Routes *through* shared places: what a confined command leaves in a
//! granted root (a symlink, a swapped directory, a descriptor) must not make
//! an unconfined program the writer later: the user's next `go build`,
//! `npm run` or `cargo build`, the next `run`, the sandbox's own set-up, or
//! `git commit`. Each route is tried from inside `run`, followed by the
//! unconfined step, and judged on the files; next to each, the granted half
//! (the toolchain works under the sandbox and afterwards). Needs Landlock,
//! go, npm, git, python3 and crates.io (one cargo build with a dependency),
//! so the nix-build profile leaves it out.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::support::{FakeHome, assert_printed, assert_success, copy_fixture, output};
use super::support::{Need, require};
use super::support::{in_tmp, require_tool, show};

const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n";

/// A file outside every root that a route would overwrite.
fn victim(h: &FakeHome, rel: &str) -> PathBuf {
    let path = h.home.join(rel);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(&path, SECRET).expect("write victim");
    path
}

#[track_caller]
fn assert_untouched(path: &Path) {
    assert_eq!(
        fs::read_to_string(path).ok().as_deref(),
        Some(SECRET),
        "{} changed",
        path.display()
    );
}

/// `cmd` in the fake home, unconfined, the way the user runs it later.
fn unconfined(h: &FakeHome, dir: &Path, argv: &[&str]) -> Output {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    h.env(&mut cmd);
    cmd.current_dir(dir);
    output(&mut cmd)
}

/// Makes `fd` appear as `target` in `cmd`'s process, inherited across its
/// `exec`: the shell's `exec 7>>file` before `run`.
fn dup_to_in_child(cmd: &mut Command, fd: i32, target: i32) {
    use std::os::unix::process::CommandExt;
    // SAFETY: dup2 is async-signal-safe and takes integers only; `fd` stays
    // open in the parent until the command is spawned.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, target) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `sh -c SCRIPT` under `run` in the project, with `var` set to `value`.
fn sh_with(h: &FakeHome, var: &str, value: &Path, script: &str) -> Output {
    let mut cmd = h.run_command(&h.project, &[], &["sh", "-c", script]);
    cmd.env(var, value);
    output(&mut cmd)
}

/// Asserts a confined `ln -s KEY LINK` (its directory made first) fails
/// and leaves no symlink at `link`.
#[track_caller]
fn assert_cannot_plant(h: &FakeHome, key: &Path, link: &Path) {
    let dir = link.parent().expect("parent");
    let out = h.sh(&format!(
        "mkdir -p {}; ln -s {} {}; echo $?",
        dir.display(),
        key.display(),
        link.display()
    ));
    assert_printed(&out, "1");
    assert!(!is_symlink(link));
}

fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every symlink under `dir`.
fn walk_symlinks(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_symlink() => out.push(path),
            Ok(t) if t.is_dir() => out.extend(walk_symlinks(&path)),
            _ => {}
        }
    }
    out
}

mod needs_landlock {
    use super::*;

    #[test]
    fn a_symlink_cannot_be_planted_in_go_build_and_go_test_still_works() {
        require_tool("go", "golang-go");
        let h = FakeHome::new();
        let key = victim(&h, ".ssh/id_ed25519");
        copy_fixture("go-hello", &h.project);
        // Granted: go test writes its cache under the sandbox.
        let out = h.run(&[], &["go", "test", "./..."]);
        assert_success(&out);
        let trim = h.home.join(".cache/go-build/trim.txt");
        assert!(trim.is_file(), "go test made no cache\n{}", show(&out));
        // Refused: a symlink made there, or moved in from /tmp.
        let plant = format!(
            "rm -f {t}; ln -s {k} {t}; l=$?; ln -s {k} /tmp/plant-$$; mv /tmp/plant-$$ {t}; \
         m=$?; rm -f /tmp/plant-$$; echo $l $m",
            t = trim.display(),
            k = key.display()
        );
        let out = h.sh(&plant);
        assert_printed(&out, "1 1");
        assert!(!is_symlink(&trim));
        // `policy` says which roots are narrower, in text and in JSON.
        let text = output(&mut h.policy_command::<&str>(&[]));
        let go_build = String::from_utf8_lossy(&text.stdout)
            .lines()
            .find(|l| l.contains("/.cache/go-build"))
            .map(str::to_owned)
            .unwrap_or_default();
        assert!(
            go_build.ends_with("(no symlinks may be made or moved in)"),
            "{go_build}"
        );
        let json = output(&mut h.policy_command(&["--json"]));
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("policy --json");
        let rights = |path: &Path| {
            v["granted"]
                .as_array()
                .and_then(|g| {
                    g.iter()
                        .find(|r| r["path"] == path.to_string_lossy().as_ref())
                })
                .map(|r| r["rights"].clone())
        };
        assert_eq!(
            rights(&h.home.join(".cache/go-build")),
            Some("no-symlinks".into())
        );
        assert_eq!(rights(&h.project), Some("all".into()));
        // The user's next go build and go test, unconfined, in this project.
        assert_success(&unconfined(&h, &h.project, &["go", "build", "./..."]));
        assert_success(&unconfined(
            &h,
            &h.project,
            &["go", "test", "-count=1", "./..."],
        ));
        assert_untouched(&key);
        assert!(!is_symlink(&trim));
        // And go test under the sandbox again.
        assert_success(&h.run(&[], &["go", "test", "-count=1", "./..."]));
    }

    #[test]
    fn npm_cache_refuses_symlinks_while_npm_install_npm_run_and_npx_work() {
        require_tool("npm", "npm");
        let h = FakeHome::new();
        let key = victim(&h, ".ssh/id_ed25519");
        let pkg = h.project.join("pkg");
        fs::create_dir_all(&pkg).expect("mkdir");
        fs::write(
            pkg.join("package.json"),
            r#"{"name":"hello-bin","version":"1.0.0","bin":{"hello-bin":"hello.js"}}"#,
        )
        .expect("package.json");
        fs::write(
            pkg.join("hello.js"),
            "#!/usr/bin/env node\nconsole.log('hello from bin')\n",
        )
        .expect("hello.js");
        assert_success(&unconfined(&h, &pkg, &["npm", "pack", "-q"]));
        fs::write(
            h.project.join("package.json"),
            r#"{"name":"app","version":"1.0.0","scripts":{"hi":"hello-bin"}}"#,
        )
        .expect("package.json");
        // Granted: npm install, npm run and npx, which links node_modules/.bin
        // in ~/.npm/_npx, all under the sandbox.
        let out = h.sh(
            "npm install --offline --no-audit --no-fund ./pkg/hello-bin-1.0.0.tgz >/dev/null \
         && npm run -s hi && npx --offline --yes ./pkg/hello-bin-1.0.0.tgz",
        );
        assert_success(&out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout)
                .matches("hello from bin")
                .count(),
            2,
            "{}",
            show(&out)
        );
        let npx_links = walk_symlinks(&h.home.join(".npm/_npx"));
        assert!(!npx_links.is_empty(), "npx linked nothing in _npx");
        // Refused: a symlink in npm's content cache, whose index files npm
        // appends to.
        let index = h.home.join(".npm/_cacache/index-v5");
        assert_cannot_plant(&h, &key, &index.join("planted"));
        // The user's next npm run and npx, unconfined.
        let out = unconfined(&h, &h.project, &["npm", "run", "-s", "hi"]);
        assert_success(&out);
        let out = unconfined(
            &h,
            &h.project,
            &["npx", "--offline", "--yes", "./pkg/hello-bin-1.0.0.tgz"],
        );
        assert_success(&out);
        assert_untouched(&key);
        assert!(walk_symlinks(&h.home.join(".npm/_cacache")).is_empty());
    }

    #[test]
    fn a_directory_moves_into_a_cache_without_symlinks_but_not_out_of_it() {
        require_tool("python3", "python3");
        let h = FakeHome::new();
        let cache = h.home_dir(".cache/go-build");
        // Landlock refuses a rename that would give the moved directory rights
        // it did not have: out of a root without MAKE_SYM into one with it
        // (EXDEV). Into the narrower root, and files either way, work.
        let script = format!(
            r#"
import os
c, p = {cache:?}, {project:?}
os.mkdir(c + "/d1"); os.mkdir(p + "/d2"); open(c + "/f1", "w").close()
def attempt(src, dst):
    try:
        os.rename(src, dst); return "ok"
    except OSError as e:
        return str(e.errno)
print(attempt(c + "/d1", p + "/d1"), attempt(p + "/d2", c + "/d2"), attempt(c + "/f1", p + "/f1"))
"#,
            cache = cache.to_string_lossy(),
            project = h.project.to_string_lossy(),
        );
        let out = h.run(&[], &["python3", "-c", &script]);
        assert_success(&out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{} ok ok", libc::EXDEV),
            "{}",
            show(&out)
        );
        assert!(cache.join("d1").is_dir() && !h.project.join("d1").exists());
        assert!(cache.join("d2").is_dir() && h.project.join("f1").is_file());
    }

    #[test]
    fn a_tmpdir_swapped_for_a_symlink_is_not_granted_by_the_next_run() {
        let h = FakeHome::new();
        let bin = h.home_dir(".local/bin");
        let shell = in_tmp("nix-shell.");
        let tmpdir = shell.path().to_path_buf();
        let run = |script: &str| sh_with(&h, "TMPDIR", &tmpdir, script);
        // Granted: $TMPDIR as the directory it is.
        assert_success(&run("echo x > \"$TMPDIR/ok\""));
        assert!(tmpdir.join("ok").is_file());
        // The swap, from inside.
        let out = run(&format!(
            "rm -rf \"$TMPDIR\" && ln -s {} \"$TMPDIR\"",
            bin.display()
        ));
        assert_success(&out);
        assert!(is_symlink(&tmpdir));
        // The next run must not grant ~/.local/bin, and says why.
        let out = run(&format!("echo evil > {}/git", bin.display()));
        assert!(!out.status.success(), "{}", show(&out));
        assert!(!bin.join("git").exists());
        let err = stderr(&out);
        assert!(
            err.contains("not granted")
                && err.contains(&format!("resolves through {}", tmpdir.display())),
            "{err}"
        );
        let _ = fs::remove_file(&tmpdir);
    }

    #[test]
    fn a_cache_home_in_tmp_whose_entry_is_swapped_grants_nothing_outside() {
        let h = FakeHome::new();
        let config = h.home_dir(".config");
        let victim_file = victim(&h, ".config/app/settings");
        let real = in_tmp("cache.");
        fs::create_dir(real.path().join("go-build")).expect("mkdir");
        fs::remove_dir(h.home.join(".cache")).expect("rmdir ~/.cache");
        std::os::unix::fs::symlink(real.path(), h.home.join(".cache")).expect("ln ~/.cache");
        // Granted: the cache as it is (inside /tmp anyway).
        assert_success(&h.sh("echo x > ~/.cache/go-build/ok"));
        // The swap, from inside: the entry and a new one now lead to ~/.config.
        assert_success(&h.sh(&format!(
            "rm -rf ~/.cache/go-build && ln -s {c} ~/.cache/go-build && ln -s {c} ~/.cache/other",
            c = config.display()
        )));
        let out = h.sh(&format!(
            "echo evil > {}; echo evil > ~/.cache/go-build/new",
            victim_file.display()
        ));
        assert!(!out.status.success(), "{}", show(&out));
        assert_untouched(&victim_file);
        assert!(!config.join("new").exists());
        let err = stderr(&out);
        assert!(
            err.contains("/go-build, a symlink in a granted directory"),
            "{err}"
        );
        assert!(
            err.contains("/other, a symlink in a granted directory"),
            "{err}"
        );
    }

    #[test]
    fn the_sandbox_makes_no_cache_or_stamp_through_a_planted_symlink() {
        let h = FakeHome::new();
        let target = h.home.join("planted-target");
        let cache_home = in_tmp("xdg-cache.");
        let xdg = cache_home.path().to_path_buf();
        let run = |script: &str| sh_with(&h, "XDG_CACHE_HOME", &xdg, script);
        // Granted: the first run makes its stamp (and go-build, go being on
        // PATH or not) in the cache home.
        assert_success(&run("true"));
        let stamp = xdg.join(".strument-sandbox-toolchains-checked");
        assert!(stamp.is_file(), "no stamp made");
        // Planted: the stamp, and every cache the next run would make, as
        // symlinks to a file and directories outside every root.
        let mut plant = format!(
            "rm -f {s}; ln -s {t} {s}",
            s = stamp.display(),
            t = target.display()
        );
        for (_, sub) in [("go", "go-build"), ("pip", "pip"), ("npm", "node-gyp")] {
            plant.push_str(&format!(
                "; rm -rf {x}/{sub}; ln -s {t}-{sub} {x}/{sub}",
                x = xdg.display(),
                t = target.display()
            ));
        }
        assert_success(&run(&plant));
        // The next run, whose set-up step is unconfined.
        assert_success(&run("true"));
        let made: Vec<PathBuf> = fs::read_dir(&h.home)
            .expect("home")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains("planted-target"))
            .collect();
        assert!(made.is_empty(), "the set-up step wrote through: {made:?}");
        assert!(is_symlink(&stamp));
    }

    #[test]
    fn a_descriptor_the_caller_holds_is_not_passed_on_unless_kept() {
        let h = FakeHome::new();
        let file = victim(&h, "notes.txt");
        let keep = |flags: &[&OsStr]| {
            let mut cmd = h.run_command(&h.project, flags, &["sh", "-c", "echo written >&7"]);
            let f = fs::OpenOptions::new()
                .append(true)
                .open(&file)
                .expect("open for appending");
            let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
            // The shell's `exec 7>>file` before `run`.
            dup_to_in_child(&mut cmd, fd, 7);
            let out = output(&mut cmd);
            drop(f);
            out
        };
        let out = keep(&[]);
        assert!(!out.status.success(), "{}", show(&out));
        assert_untouched(&file);
        let out = keep(&["--keep-fd".as_ref(), "7".as_ref()]);
        assert_success(&out);
        assert_eq!(
            fs::read_to_string(&file).expect("read"),
            format!("{SECRET}written\n")
        );
    }

    #[test]
    fn a_make_jobserver_named_in_makeflags_is_kept() {
        let h = FakeHome::new();
        let mut cmd = h.run_command(
            &h.project,
            &[],
            &[
                "sh",
                "-c",
                "test -e /proc/self/fd/8 && test -e /proc/self/fd/9 && ! test -e /proc/self/fd/10",
            ],
        );
        cmd.env("MAKEFLAGS", " -j2 --jobserver-auth=8,9");
        let devnull = fs::File::open("/dev/null").expect("/dev/null");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&devnull);
        for target in [8, 9, 10] {
            dup_to_in_child(&mut cmd, fd, target);
        }
        assert_success(&output(&mut cmd));
        // Without the jobserver named, none of them is passed on.
        let mut cmd = h.run_command(
            &h.project,
            &[],
            &[
                "sh",
                "-c",
                "! test -e /proc/self/fd/8 && ! test -e /proc/self/fd/10",
            ],
        );
        for target in [8, 10] {
            dup_to_in_child(&mut cmd, fd, target);
        }
        assert_success(&output(&mut cmd));
    }

    #[test]
    fn git_gc_is_not_a_change_and_a_pre_commit_config_is() {
        require_tool("git", "git");
        let h = FakeHome::new();
        let git = |argv: &[&str]| {
            let mut v = vec!["git"];
            v.extend_from_slice(argv);
            unconfined(&h, &h.project, &v)
        };
        assert_success(&git(&["init", "-q", "."]));
        fs::write(h.project.join("a"), "a\n").expect("write");
        assert_success(&git(&["add", "a"]));
        assert_success(&git(&["commit", "-qm", "a"]));
        let refs = h.project.join(".git/info/refs");
        let before = fs::metadata(&refs).map(|m| (m.ino(), m.mtime_nsec())).ok();
        let out = h.run(&[], &["sh", "-c", "git gc -q && git repack -adq"]);
        assert_success(&out);
        assert!(refs.is_file(), "git gc wrote no info/refs");
        assert_ne!(
            before,
            fs::metadata(&refs).map(|m| (m.ino(), m.mtime_nsec())).ok()
        );
        assert!(!stderr(&out).contains(" was "), "{}", show(&out));
        // A pre-commit configuration and a lefthook one appearing are reported:
        // the installed hook runs them at the user's next commit.
        let out = h.sh("printf 'repos: []\\n' > .pre-commit-config.yaml; echo x > .lefthook.yml; mkdir -p .husky && echo x > .husky/pre-commit");
        assert_success(&out);
        let err = stderr(&out);
        for name in [
            ".pre-commit-config.yaml was created",
            ".lefthook.yml was created",
            ".husky/pre-commit was created",
        ] {
            assert!(err.contains(name), "{name}: {err}");
        }
    }

    mod needs_network {
        use super::*;

        #[test]
        fn cargo_registry_refuses_symlinks_while_cargo_build_works() {
            require(Need::Network);
            require_tool("cargo", "cargo");
            let h = FakeHome::new();
            let key = victim(&h, ".ssh/id_ed25519");
            h.home_dir(".cargo");
            copy_fixture("cargo-hello", &h.project);
            // Granted: cargo build with a dependency from crates.io (itoa).
            let out = h.run(&[], &["cargo", "build"]);
            assert_success(&out);
            assert!(h.project.join("target").is_dir());
            let registry = h.home.join(".cargo/registry");
            assert!(registry.is_dir(), "run made no registry cache");
            assert_cannot_plant(&h, &key, &registry.join("index/.package-cache"));
            assert!(walk_symlinks(&registry).is_empty());
            // The user's next cargo build, unconfined.
            assert_success(&unconfined(
                &h,
                &h.project,
                &["cargo", "build", "--offline"],
            ));
            assert_untouched(&key);
        }
    }
}
