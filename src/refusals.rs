//! Places the sandbox refuses on purpose, and the words for a command that
//! failed writing to one.
//!
//! Some writes a developer makes every week are refused by design, because
//! what they write runs later, everywhere, outside the sandbox: a toolchain
//! (`rustup`), a directory of commands on `PATH` (`cargo install`,
//! `go install`, `npm i -g`, `pip install --user`), the Nix store. The
//! kernel's answer is `Permission denied` on a path; [`on_purpose`] turns
//! the paths a failed command's own error output names into what the place
//! is, why it is refused, and the one thing to do.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::explain::Verdict;
use crate::report::Report;

/// A write a failed command attempted in a place refused on purpose.
///
/// # Examples
///
/// ```
/// use strument_sandbox::{Policy, refusals};
/// let report = Policy { writable: vec!["/tmp".into()], ..Policy::default() }.check()?;
/// let output = b"error: failed to create directory `/nix/store/abc-hello`: Permission denied";
/// for r in refusals::on_purpose(&report, output) {
///     eprintln!("{r}");
/// }
/// # Ok::<(), strument_sandbox::PolicyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// The path the command's output named.
    pub path: PathBuf,
    /// The refused place it is in.
    pub place: PathBuf,
    /// What the place is.
    pub what: &'static str,
    /// Why the sandbox refuses it.
    pub why: &'static str,
    /// The one thing to do instead.
    pub instead: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused on purpose: {} is {}",
            self.place.display(),
            self.what
        )?;
        if self.path != self.place {
            write!(f, " (the command's error names {})", self.path.display())?;
        }
        write!(f, "; {}. {}", self.why, self.instead)
    }
}

/// A kind of place refused on purpose.
struct Place {
    what: &'static str,
    why: &'static str,
    /// What to do; `{place}` stands for the place's path.
    instead: &'static str,
}

const RUSTUP: Place = Place {
    what: "rustup's toolchains",
    why: "every later cargo and rustc, inside the sandbox and out, runs from there",
    instead: "Run the rustup command (or the build that installs the toolchain \
              rust-toolchain.toml names, or `rustup target add …`) once outside the sandbox, \
              then run this again",
};
const CARGO_BIN: Place = Place {
    what: "where `cargo install` puts programs, on your PATH",
    why: "a program written there runs at your next command of that name, unconfined",
    instead: "Run `cargo install` outside the sandbox, or install into the project: \
              `cargo install --root .tools …`",
};
const CARGO_RECORD: Place = Place {
    what: "`cargo install`'s record of the programs it put in bin/ beside it, on your PATH",
    why: CARGO_BIN.why,
    instead: CARGO_BIN.instead,
};
const GO_BIN: Place = Place {
    what: "where `go install` puts programs, on your PATH",
    why: "a program written there runs at your next command of that name, unconfined",
    instead: "Run `go install` outside the sandbox, or install into the project: \
              `GOBIN=$PWD/bin go install …`",
};
const NPM_GLOBAL: Place = Place {
    what: "npm's global prefix (`npm i -g`), whose bin/ is on your PATH",
    why: "a package written there runs at your next command of that name, unconfined",
    instead: "Run `npm i -g` outside the sandbox, or use it from the project: \
              `npm i -D …` then `npx …`",
};
const LOCAL_BIN: Place = Place {
    what: "your own programs directory (pip --user, pipx, uv tool), on your PATH",
    why: "a program written there runs at your next command of that name, unconfined",
    instead: "Run the install outside the sandbox, or use a virtual environment in the \
              project: `python3 -m venv .venv`",
};
const USER_SITE: Place = Place {
    what: "Python's user site-packages (`pip install --user`)",
    why: "every Python you run imports from there, unconfined",
    instead: "Use a virtual environment in the project (`python3 -m venv .venv`), or run the \
              install outside the sandbox",
};
const UV_DATA: Place = Place {
    what: "uv's installed Pythons and tools",
    why: "the Pythons and tools uv runs later, everywhere, live there",
    instead: "Run `uv python install` (or `uv tool install`) once outside the sandbox, then \
              run this again",
};
const PYENV_SHIMS: Place = Place {
    what: "pyenv's shims, the commands on your PATH that pick a Python",
    why: "a shim runs at your next python or pip command, unconfined; pyenv rewrites them \
          after each pip install and reports failure when it cannot",
    instead: "When only this was refused the packages are installed: run `pyenv rehash` \
              outside the sandbox for their new commands. Or install into a virtual \
              environment in the project (`python -m venv .venv`), whose pip never rehashes",
};
const PYENV_VERSIONS: Place = Place {
    what: "pyenv's Pythons and their site-packages",
    why: "every project that uses that Python imports what is installed there",
    instead: "Install into a virtual environment in the project (`python -m venv .venv`), \
              or run `pip install` (or `pyenv install`) outside the sandbox",
};
const NIX: Place = Place {
    what: "the Nix store and its database",
    why: "everything Nix builds and runs comes from there; single-user Nix writes it from \
          the calling process",
    instead: "Run the nix command outside the sandbox (with a multi-user Nix the daemon \
              writes the store: allow its socket with --allow-socket \
              /nix/var/nix/daemon-socket/socket)",
};
const GNUPG: Place = Place {
    what: "gpg's home",
    why: "gpg.conf and gpg-agent.conf there name programs gpg runs, and gpg takes a lock \
          file there even to read a key",
    instead: "To sign inside the sandbox, let gpg read without lock files: save \
              `#!/bin/sh` + `exec gpg --lock-never \"$@\"` as ~/bin/gpg-lock-never, then \
              `git config --global gpg.program ~/bin/gpg-lock-never` (gpg replaces keyring \
              files by rename, so a reader never sees half a file), and name the agent's \
              socket: --allow-socket \"$(gpgconf --list-dirs agent-socket)\" (whoever \
              reaches it may also delete and import secret keys); or sign with ssh \
              (`git config gpg.format ssh`), which works as it is",
};

/// The places of this machine, from the environment and home directory,
/// each with its kind.
fn places(
    env: &dyn Fn(&str) -> Option<OsString>,
    home: Option<&Path>,
) -> Vec<(PathBuf, &'static Place)> {
    let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
    let under_home = |rel: &str| home.map(|h| h.join(rel));
    let mut out: Vec<(PathBuf, &'static Place)> = Vec::new();
    let mut add = |path: Option<PathBuf>, place: &'static Place| {
        if let Some(path) = path {
            out.push((path, place));
        }
    };
    add(
        absolute("RUSTUP_HOME").or_else(|| under_home(".rustup")),
        &RUSTUP,
    );
    // `cargo install` records what it installed beside bin/, and opens
    // that record first.
    let cargo_home = absolute("CARGO_HOME").or_else(|| under_home(".cargo"));
    add(cargo_home.as_ref().map(|c| c.join("bin")), &CARGO_BIN);
    for name in [".crates.toml", ".crates2.json"] {
        add(cargo_home.as_ref().map(|c| c.join(name)), &CARGO_RECORD);
    }
    let gopath = env("GOPATH")
        .and_then(|g| {
            let first = g.as_bytes().split(|b| *b == b':').next()?.to_vec();
            let first = PathBuf::from(std::ffi::OsStr::from_bytes(&first));
            first.is_absolute().then_some(first)
        })
        .or_else(|| under_home("go"));
    add(
        absolute("GOBIN").or_else(|| gopath.map(|g| g.join("bin"))),
        &GO_BIN,
    );
    for prefix in npm_prefixes(env, home) {
        add(Some(prefix.join("lib/node_modules")), &NPM_GLOBAL);
        add(Some(prefix.join("bin")), &NPM_GLOBAL);
    }
    add(under_home(".local/bin"), &LOCAL_BIN);
    // pipx's environments (PIPX_HOME; pipx's docs), whose commands it links
    // into ~/.local/bin.
    add(
        absolute("PIPX_HOME").or_else(|| under_home(".local/share/pipx")),
        &LOCAL_BIN,
    );
    add(
        absolute("PYTHONUSERBASE")
            .or_else(|| under_home(".local"))
            .map(|b| b.join("lib")),
        &USER_SITE,
    );
    add(
        absolute("XDG_DATA_HOME")
            .or_else(|| under_home(".local/share"))
            .map(|d| d.join("uv")),
        &UV_DATA,
    );
    let pyenv = absolute("PYENV_ROOT").or_else(|| under_home(".pyenv"));
    add(pyenv.as_ref().map(|p| p.join("shims")), &PYENV_SHIMS);
    add(pyenv.map(|p| p.join("versions")), &PYENV_VERSIONS);
    add(Some("/nix/store".into()), &NIX);
    add(Some("/nix/var/nix".into()), &NIX);
    add(
        absolute("GNUPGHOME").or_else(|| under_home(".gnupg")),
        &GNUPG,
    );
    out
}

/// npm's global prefixes this machine may use: the variable, the user's
/// `~/.npmrc` `prefix=`, and the default (the directory above node's
/// `bin/`, as npm computes it).
fn npm_prefixes(env: &dyn Fn(&str) -> Option<OsString>, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for name in ["npm_config_prefix", "NPM_CONFIG_PREFIX"] {
        out.extend(env(name).map(PathBuf::from).filter(|p| p.is_absolute()));
    }
    if let Some(npmrc) = home.and_then(|h| std::fs::read_to_string(h.join(".npmrc")).ok()) {
        for line in npmrc.lines() {
            if let Some((key, value)) = line.split_once('=') {
                if key.trim() == "prefix" {
                    let value = value.trim();
                    let path = match (value.strip_prefix("~/"), home) {
                        (Some(rest), Some(h)) => h.join(rest),
                        _ => PathBuf::from(value),
                    };
                    if path.is_absolute() {
                        out.push(path);
                    }
                }
            }
        }
    }
    let path_var = env("PATH").unwrap_or_default();
    if let Some(node) = std::env::split_paths(&path_var)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("node"))
        .find(|n| n.is_file())
    {
        let real = std::fs::canonicalize(&node).unwrap_or(node);
        out.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
    }
    out
}

/// The refused-on-purpose places that `output` (a failed command's error
/// output) names paths in, each once, in the order first named. A path
/// counts only when the policy behind `report` really refuses a write
/// there ([`Report::explain`]): `--allow ~/.cargo/bin` makes it writable,
/// and then it is not refused on purpose.
///
/// Paths are read from the output as the tools print them: absolute or
/// `~/`, ending at white space or a quote (`'`, `"`, `` ` ``), with a final
/// `:` or `,` left off.
///
/// # Examples
///
/// ```
/// use strument_sandbox::{Policy, refusals};
/// let report = Policy { writable: vec!["/tmp".into()], ..Policy::default() }.check()?;
/// let said = refusals::on_purpose(&report, b"open /nix/store/x.lock: permission denied");
/// assert_eq!(said.len(), 1);
/// assert_eq!(said[0].what, "the Nix store and its database");
/// # Ok::<(), strument_sandbox::PolicyError>(())
/// ```
#[must_use]
pub fn on_purpose(report: &Report, output: &[u8]) -> Vec<Refusal> {
    let env = |name: &str| std::env::var_os(name);
    on_purpose_for(report, output, &env, dirs::home_dir().as_deref())
}

/// [`on_purpose`] with the environment and home given.
pub(crate) fn on_purpose_for(
    report: &Report,
    output: &[u8],
    env: &dyn Fn(&str) -> Option<OsString>,
    home: Option<&Path>,
) -> Vec<Refusal> {
    let mut out: Vec<Refusal> = Vec::new();
    if !names_a_refusal(output) {
        return out;
    }
    let places = places(env, home);
    for path in named_paths(output, home) {
        let Some((place, kind)) = places.iter().find(|(place, _)| path.starts_with(place)) else {
            continue;
        };
        if out.iter().any(|r| r.place == *place) {
            continue;
        }
        let refused = report
            .explain(&path)
            .is_ok_and(|e| matches!(e.verdict, Verdict::Denied { .. }));
        if !refused {
            continue;
        }
        out.push(Refusal {
            path,
            place: place.clone(),
            what: kind.what,
            why: kind.why,
            instead: kind.instead.to_owned(),
        });
    }
    out
}

/// How tools report a write the kernel refused (`EACCES`; `EXDEV` for a
/// rename or link; `EPERM`, `EROFS` where a tool maps it so). Without one,
/// the output's paths are not about a refused write.
const REFUSAL_WORDS: [&[u8]; 7] = [
    b"ermission denied",
    b"EACCES",
    b"EPERM",
    b"EXDEV",
    b"EROFS",
    b"not permitted",
    b"cross-device",
];

fn names_a_refusal(output: &[u8]) -> bool {
    REFUSAL_WORDS
        .iter()
        .any(|word| output.windows(word.len()).any(|w| w == *word))
}

/// The paths `output` names, in order: tokens that start with `/` or `~/`,
/// except a source location in a stack trace (`/usr/lib/x.js:12:5`), which
/// names code that ran, not a file written.
fn named_paths(output: &[u8], home: Option<&Path>) -> Vec<PathBuf> {
    let is_end = |b: &u8| b.is_ascii_whitespace() || matches!(b, b'\'' | b'"' | b'`' | b'(' | b')');
    let mut out = Vec::new();
    for token in output.split(is_end) {
        if is_source_location(token) {
            continue;
        }
        let token = trim_end(token);
        let path = if token.starts_with(b"/") {
            PathBuf::from(std::ffi::OsStr::from_bytes(token))
        } else if let (Some(rest), Some(home)) = (token.strip_prefix(b"~/"), home) {
            home.join(std::ffi::OsStr::from_bytes(rest))
        } else {
            continue;
        };
        // `/a/b/` names `/a/b`.
        let path: PathBuf = path.components().collect();
        if token.len() > 1 && !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// `path:LINE` or `path:LINE:COLUMN`.
fn is_source_location(token: &[u8]) -> bool {
    let mut rest = token;
    for _ in 0..2 {
        let Some(colon) = rest.iter().rposition(|b| *b == b':') else {
            return false;
        };
        let tail = &rest[colon + 1..];
        let tail = trim_end(tail);
        if !tail.is_empty() && tail.iter().all(u8::is_ascii_digit) {
            return true;
        }
        rest = &rest[..colon];
    }
    false
}

fn trim_end(mut token: &[u8]) -> &[u8] {
    while let [rest @ .., b':' | b',' | b';' | b'.'] = token {
        token = rest;
    }
    token
}

#[cfg(feature = "serde")]
impl serde::Serialize for Refusal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut o = s.serialize_struct("Refusal", 6)?;
        o.serialize_field("path", &self.path.to_string_lossy())?;
        o.serialize_field("place", &self.place.to_string_lossy())?;
        o.serialize_field("what", self.what)?;
        o.serialize_field("why", self.why)?;
        o.serialize_field("instead", &self.instead)?;
        o.serialize_field("detail", &self.to_string())?;
        o.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use std::collections::HashMap;

    #[test]
    fn paths_are_read_as_tools_print_them() {
        let home = Path::new("/home/u");
        let got = named_paths(
            b"error: failed to create `/home/u/.cargo/bin/x`: denied\n\
              open /home/u/go/bin/y: permission denied\n\
              '/a b' ~/.local/bin/z, (/c). at f (/lib/x.cjs:2208:11) /lib/y.js:3",
            Some(home),
        );
        let want: Vec<PathBuf> = [
            "/home/u/.cargo/bin/x",
            "/home/u/go/bin/y",
            "/a",
            "/home/u/.local/bin/z",
            "/c",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_refused_place_is_named_once_and_an_allowed_one_not_at_all() {
        let home = tempfile::tempdir().expect("tempdir");
        let h = home.path();
        std::fs::create_dir_all(h.join(".cargo/bin")).expect("mkdir");
        std::fs::create_dir_all(h.join("go/bin")).expect("mkdir");
        let vars: HashMap<&str, OsString> = HashMap::new();
        let env = |name: &str| vars.get(name).cloned();
        let output = format!(
            "failed `{0}/.cargo/bin/a`: EACCES\nfailed {0}/.cargo/bin/b\nopen {0}/go/bin/c: permission denied",
            h.display()
        );
        let report = crate::testing::report_writable([h.join("go/bin")]);
        let said = on_purpose_for(&report, output.as_bytes(), &env, Some(h));
        assert_eq!(said.len(), 1, "{said:?}");
        assert_eq!(said[0].place, h.join(".cargo/bin"));
        assert!(said[0].to_string().contains("refused on purpose"));
    }

    #[test]
    fn pyenv_s_refused_rehash_is_explained() {
        let home = tempfile::tempdir().expect("tempdir");
        let h = home.path();
        std::fs::create_dir_all(h.join(".pyenv/shims")).expect("mkdir");
        let vars: HashMap<&str, OsString> = HashMap::new();
        let env = |name: &str| vars.get(name).cloned();
        // What pyenv 2.4's pip shim prints after an install it cannot rehash.
        let output = format!(
            "mktemp: failed to create file via template ‘{0}/.pyenv/shims/tmp.XXXXXXXXXX’: \
             Permission denied\npyenv: cannot rehash: {0}/.pyenv/shims isn't writable\n",
            h.display()
        );
        let report = Policy::default().check().expect("check");
        let said = on_purpose_for(&report, output.as_bytes(), &env, Some(h));
        assert_eq!(said.len(), 1, "{said:?}");
        assert_eq!(said[0].place, h.join(".pyenv/shims"));
        assert!(said[0].to_string().contains("pyenv rehash"), "{}", said[0]);
    }
}
