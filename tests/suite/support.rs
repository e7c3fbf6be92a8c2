//! Shared fixtures: the binary under test, fake homes, and a seccomp filter
//! that makes this kernel answer like one without Landlock.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use strument_sandbox::{Origin, default_writable};

mod processes;
pub use processes::{
    Stopped, assert_connection_refused, assert_no_connection_refused, fixture, said_on_a_line,
    ssh_agent,
};

/// The `strument-sandbox` binary built for this test run.
pub const BIN: &str = env!("CARGO_BIN_EXE_strument-sandbox");

/// A fake home with a project inside and sentinel files outside the roots.
///
/// It lives under `CARGO_TARGET_TMPDIR`, never under a temporary directory:
/// `/tmp`, `/var/tmp`, `/dev/shm` and `$TMPDIR` are granted roots, so a home
/// there would be writable throughout and the tests would prove nothing.
pub struct FakeHome {
    _dir: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    /// Files outside every root, with their original contents
    /// (`tests/scenarios/sentinels.tsv`).
    pub sentinels: Vec<(PathBuf, String)>,
}

impl FakeHome {
    pub fn new() -> FakeHome {
        let base = scratch_base();
        let dir = tempfile::Builder::new()
            .prefix("home-")
            .tempdir_in(&base)
            .expect("create a fake home");
        let home = dir.path().canonicalize().expect("canonical fake home");
        assert_not_under_a_temp_root(&home);
        let project = home.join("project");
        fs::create_dir_all(&project).expect("create project");
        // A lived-in home: the XDG cache home exists, cargo has been used.
        fs::create_dir_all(home.join(".cache")).expect("create ~/.cache");
        let mut sentinels = Vec::new();
        for (relative, mode, contents) in sentinel_table() {
            let path = home.join(relative);
            fs::create_dir_all(path.parent().expect("sentinel has a parent")).expect("mkdir");
            fs::write(&path, &contents).expect("write sentinel");
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod sentinel");
            sentinels.push((path, contents));
        }
        FakeHome {
            _dir: dir,
            home,
            project,
            sentinels,
        }
    }

    /// Asserts every sentinel is still there with its original contents.
    pub fn assert_sentinels_intact(&self) {
        for (path, contents) in &self.sentinels {
            let now = fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("sentinel {} is gone: {e}", path.display()));
            assert_eq!(&now, contents, "sentinel {} was modified", path.display());
        }
    }

    /// What the project's file `name` holds (the test fails if it cannot be
    /// read).
    pub fn project_file(&self, name: &str) -> String {
        let path = self.project.join(name);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// `<home>/<rel>`, made with its parents.
    pub fn home_dir(&self, rel: &str) -> PathBuf {
        let dir = self.home.join(rel);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        dir
    }

    /// An environment that points every toolchain at the fake home.
    pub fn env(&self, cmd: &mut Command) {
        let real_home = dirs::home_dir().unwrap_or_else(|| "/root".into());
        let rustup_home = std::env::var_os("RUSTUP_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| real_home.join(".rustup"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("RUSTUP_HOME", rustup_home)
            .env(
                "RUSTUP_TOOLCHAIN",
                std::env::var_os("RUSTUP_TOOLCHAIN").unwrap_or("stable".into()),
            )
            .env("CARGO_HOME", self.home.join(".cargo"))
            .env("CARGO_TERM_COLOR", "never")
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .env("LANG", "C.UTF-8")
            .current_dir(&self.project);
    }

    /// `strument-sandbox run --project <project> <flags> -- <argv>`.
    #[track_caller]
    pub fn run(&self, flags: &[&OsStr], argv: &[&str]) -> Output {
        output(&mut self.run_command(&self.project, flags, argv))
    }

    /// The command `strument-sandbox run --project <project> <flags> --
    /// <argv>` with this home's environment, started in `project` (which
    /// need not be this home's project: a worktree, a clone), for the
    /// caller to add variables to before running it. A confined run: the
    /// calling test must sit in a `needs_landlock` module
    /// ([`require_landlock`]).
    #[track_caller]
    pub fn run_command(&self, project: &Path, flags: &[&OsStr], argv: &[&str]) -> Command {
        require_landlock();
        self.refused_run_command(project, flags, argv)
    }

    /// The same command for a run that is refused before anything is
    /// confined (a policy error, a kernel without Landlock simulated): it
    /// needs no Landlock, so runs in every profile.
    pub fn refused_run_command(&self, project: &Path, flags: &[&OsStr], argv: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("run").arg("--project").arg(project);
        cmd.args(flags).arg("--").args(argv);
        self.env(&mut cmd);
        cmd.current_dir(project);
        cmd
    }

    /// The command `strument-sandbox policy --project <project> <flags>`
    /// with this home's environment, for the caller to add variables to.
    pub fn policy_command<S: AsRef<OsStr>>(&self, flags: &[S]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("policy").arg("--project").arg(&self.project);
        cmd.args(flags);
        self.env(&mut cmd);
        cmd
    }

    /// `run` of `sh -c script`.
    #[track_caller]
    pub fn sh(&self, script: &str) -> Output {
        self.run(&[], &["sh", "-c", script])
    }
}

/// The sentinels of every fake home, shared with the scenarios' `new_home`
/// (`tests/scenarios/sentinels.tsv`): relative path, mode, contents.
fn sentinel_table() -> Vec<(&'static str, u32, String)> {
    include_str!("../scenarios/sentinels.tsv")
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let mut fields = line.splitn(3, '\t');
            let (Some(path), Some(mode), Some(text)) =
                (fields.next(), fields.next(), fields.next())
            else {
                panic!("sentinels.tsv: {line:?} is not `path<TAB>mode<TAB>contents`")
            };
            let mode = u32::from_str_radix(mode, 8)
                .unwrap_or_else(|e| panic!("sentinels.tsv: mode {mode:?} of {path}: {e}"));
            (path, mode, unescape(text))
        })
        .collect()
}

/// `\n` as a newline and `\\` as a backslash, as the shell's `printf %b`.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            other => panic!("sentinels.tsv: unknown escape {other:?} after \\ in {text:?}"),
        }
    }
    out
}

/// A directory of its own in /tmp, a granted root, removed at the end.
pub fn in_tmp(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .expect("a directory in /tmp")
}

/// Where fake homes and scenario roots go: `CARGO_TARGET_TMPDIR`, unless
/// the checkout itself sits in temporary space, then a directory under the
/// real home's `~/.local/share` (not a granted root). A Nix build has no
/// home (`HOME=/homeless-shelter`): there the build directory is the one
/// place left, and it must lie outside temporary space too.
pub fn scratch_base() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    fs::create_dir_all(&target).expect("create CARGO_TARGET_TMPDIR");
    let target = target
        .canonicalize()
        .expect("canonical CARGO_TARGET_TMPDIR");
    if under_a_temp_root(&target).is_none() {
        return target;
    }
    if let Some(top) = std::env::var_os("NIX_BUILD_TOP")
        .filter(|_| std::env::var_os("HOME").is_some_and(|home| home == "/homeless-shelter"))
    {
        let top = PathBuf::from(top);
        if let Some(root) = under_a_temp_root(&top) {
            panic!(
                "this Nix build's directory {} is under the granted root {} \
                 (sandbox = false puts it in the daemon's temp dir): every fake \
                 home there would be writable and these tests would prove \
                 nothing; build with sandbox = true, or set Nix's build-dir \
                 outside temporary space",
                top.display(),
                root.display()
            );
        }
        let base = top.join("strument-sandbox-tests");
        fs::create_dir_all(&base).expect("create test scratch space in NIX_BUILD_TOP");
        return base.canonicalize().expect("canonical scratch space");
    }
    let data = dirs::data_dir().expect("a home directory for test scratch space");
    let base = data.join("strument-sandbox-tests");
    fs::create_dir_all(&base).expect("create test scratch space");
    base.canonicalize().expect("canonical scratch space")
}

/// The granted temporary root `path` is under, if any: the library's own
/// list ([`default_writable`]'s roots of origin temp, `$TMPDIR` included),
/// each compared as given and resolved.
fn under_a_temp_root(path: &Path) -> Option<PathBuf> {
    let roots = default_writable(Path::new("/"), None, &[])
        .unwrap_or_else(|e| panic!("the default roots: {e}"));
    roots
        .into_iter()
        .filter(|root| matches!(root.origin, Origin::Temp { .. }))
        .find(|root| {
            path.starts_with(&root.path)
                || root
                    .path
                    .canonicalize()
                    .is_ok_and(|resolved| path.starts_with(resolved))
        })
        .map(|root| root.path)
}

fn assert_not_under_a_temp_root(home: &Path) {
    if let Some(root) = under_a_temp_root(home) {
        panic!(
            "the fake home {} is under the granted root {}: every write in it would be \
             allowed and these tests would prove nothing; move the checkout (or \
             CARGO_TARGET_DIR) out of temporary space",
            home.display(),
            root.display()
        );
    }
}

/// Runs `cmd` and returns its output, failing the test if it cannot start.
/// Where sessions' directories are made, as coreutils' `stat -f` says:
/// `/dev/shm/strument-sandbox-<uid>` where `/dev/shm` is a tmpfs of at
/// least 1 GiB, else the same in `/tmp`.
pub fn sessions_parent() -> PathBuf {
    let out = output(Command::new("stat").args(["-f", "-c", "%T %b %S", "/dev/shm"]));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let fields: Vec<&str> = said.split_whitespace().collect();
    let size = match fields[..] {
        ["tmpfs", blocks, block_size] if out.status.success() => blocks
            .parse::<u64>()
            .ok()
            .zip(block_size.parse::<u64>().ok())
            .map(|(b, s)| b * s),
        _ => None,
    };
    let base = if size.is_some_and(|s| s >= 1 << 30) {
        "/dev/shm"
    } else {
        "/tmp"
    };
    // /proc/self belongs to this process's (effective) user.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").expect("/proc"));
    Path::new(base).join(format!("strument-sandbox-{uid}"))
}

pub fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Renders an output for assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts `out` succeeded, printing it otherwise.
#[track_caller]
pub fn assert_success(out: &Output) {
    assert!(out.status.success(), "expected success\n{}", show(out));
}

/// Asserts `out` succeeded and printed exactly `stdout` (surrounding
/// whitespace aside).
#[track_caller]
pub fn assert_stdout(out: &Output, stdout: &str) {
    assert_success(out);
    assert_printed(out, stdout);
}

/// Asserts `out` printed exactly `stdout` (surrounding whitespace aside),
/// whatever its status.
#[track_caller]
pub fn assert_printed(out: &Output, stdout: &str) {
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        stdout,
        "{}",
        show(out)
    );
}

/// The rest of the first line of `report` that starts with `prefix` (a
/// tier's `fact: KEY: VALUE` lines); empty when none does.
pub fn after_prefix<'a>(report: &'a str, prefix: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_default()
}

/// Asserts `out` exited with `code`, saying `why` otherwise.
#[track_caller]
pub fn assert_exit(out: &Output, code: i32, why: &str) {
    assert_eq!(out.status.code(), Some(code), "{why}\n{}", show(out));
}

/// Fails unless this is a test build of the CLI, whose `variable` (a test
/// build's switch) takes a path the kernel here would not: a release build
/// ignores it, and the test would pass without taking that path.
pub fn require_test_switch(variable: &str) {
    if !cfg!(debug_assertions) {
        panic!("{variable} is honoured by test builds only: run this test without --release");
    }
}

/// The path to a tool, or a failure naming the Debian package to install:
/// a test never passes by skipping what it could not run.
pub fn require_tool(tool: &str, package: &str) -> PathBuf {
    require_tool_from(tool, &format!("Debian: apt-get install {package}"))
}

/// [`require_tool`] for a tool Debian does not package: `how` says where
/// it comes from.
pub fn require_tool_from(tool: &str, how: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(tool))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("`{tool}` is not on PATH: install it ({how})"))
}

/// Makes `cmd` run under a seccomp filter that fails the three Landlock
/// syscalls with `errno`, exactly what a kernel without Landlock (ENOSYS),
/// with Landlock disabled at boot (EOPNOTSUPP) or behind a container's
/// filter (EPERM) answers.
pub fn without_landlock(cmd: &mut Command, errno: i32) {
    without_syscalls(
        cmd,
        &[
            libc::SYS_landlock_create_ruleset,
            libc::SYS_landlock_add_rule,
            libc::SYS_landlock_restrict_self,
        ],
        errno,
    );
}

/// Makes `cmd` run under a seccomp filter that fails each of `syscalls`
/// with `errno`, as a container's profile does.
pub fn without_syscalls(cmd: &mut Command, syscalls: &[i64], errno: i32) {
    let program = errno_filter(syscalls, errno);
    let hook = move || seccompiler::apply_filter(&program).map_err(std::io::Error::other);
    // SAFETY: the hook runs between fork and exec and only issues the prctl
    // and seccomp syscalls on a program compiled before the fork.
    unsafe {
        cmd.pre_exec(hook);
    }
}

fn errno_filter(syscalls: &[i64], errno: i32) -> seccompiler::BpfProgram {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> =
        syscalls.iter().map(|nr| (*nr, Vec::new())).collect();
    let arch = TargetArch::try_from(std::env::consts::ARCH).expect("a seccompiler target arch");
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(u32::try_from(errno).expect("positive errno")),
        arch,
    )
    .expect("a valid seccomp filter");
    filter.try_into().expect("compiles to BPF")
}

/// What a test needs from the machine beyond cargo, each the name of the
/// module it sits in (`needs_landlock`, ...): the nextest profiles select
/// tests by these segments of their paths (`.config/nextest.toml`), never
/// by a list of topics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// A kernel that enforces Landlock (a confined run, `apply`, `prepare`).
    Landlock,
    /// crates.io, npm's or PyPI's registries, or Debian's archive reachable.
    Network,
    /// The VM tier: qemu and Debian's kernel images.
    Qemu,
    /// The container tier: podman and runc.
    Podman,
}

impl Need {
    /// Every need, as the profiles' filters list them.
    pub const ALL: [Need; 4] = [Need::Landlock, Need::Network, Need::Qemu, Need::Podman];

    /// The module a test with this need sits in.
    pub fn module(self) -> &'static str {
        match self {
            Need::Landlock => "needs_landlock",
            Need::Network => "needs_network",
            Need::Qemu => "needs_qemu",
            Need::Podman => "needs_podman",
        }
    }

    /// Whether the test named `test` (`suite::topic::needs_x::name`) sits
    /// in this need's module, at any depth.
    pub fn holds_for(self, test: &str) -> bool {
        test.split("::").any(|segment| segment == self.module())
    }
}

/// Fails the calling test unless it sits in `need`'s module: a test that
/// used Landlock, the network, qemu or podman outside it would run in a
/// profile that has none (`nix build`'s) and fail there, or be left out
/// of the one that has. The running test is the harness thread's name
/// (libtest names each test's thread after it); on a thread the test
/// started there is no name to check, and this checks nothing.
#[track_caller]
pub fn require(need: Need) {
    let thread = std::thread::current();
    let Some(test) = thread.name().filter(|name| name.starts_with("suite::")) else {
        return;
    };
    assert!(
        need.holds_for(test),
        "{test} needs {need:?} but sits in no `{}` module: move it into one, so the \
         nextest profiles that lack it leave it out (.config/nextest.toml)",
        need.module()
    );
}

/// A policy granting `h`'s project alone, on a kernel with Landlock.
pub fn project_only(h: &FakeHome) -> strument_sandbox::Policy {
    require_landlock();
    strument_sandbox::Policy {
        writable: vec![h.project.clone().into()],
        ..strument_sandbox::Policy::default()
    }
}

/// The session variables `prepared` gives a command in this test's
/// environment (those neither this process nor the command sets).
pub fn applied_environment(
    prepared: &strument_sandbox::Prepared,
) -> Vec<&strument_sandbox::environment::Setting> {
    prepared
        .environment()
        .iter()
        .filter(|s| s.applied())
        .collect()
}

/// Asserts the calling test may confine (it sits in `needs_landlock`) and
/// this kernel enforces Landlock; returns what the probe found. Every
/// confined run of a [`FakeHome`] asks this first.
#[track_caller]
pub fn require_landlock() -> strument_sandbox::Availability {
    require(Need::Landlock);
    let availability = strument_sandbox::probe();
    assert!(
        availability.supported(),
        "this test needs a kernel that enforces Landlock; the probe says {:?} \
         (the tests outside `needs_landlock` modules run without it: \
         `cargo nextest run --features cli --profile nix-build`)",
        availability.error
    );
    availability
}

/// The full name of test function `$name` of the calling module, as the
/// harness filters on it (`suite::topic::needs_landlock::name`, the crate's
/// own name left off): derived by the compiler, so renaming the function or
/// moving it to another module cannot leave a stale name behind, and
/// `$name` must be a function in scope.
macro_rules! test_name {
    ($name:ident) => {{
        let _: fn() = $name;
        $crate::suite::support::without_crate(concat!(module_path!(), "::", stringify!($name)))
    }};
}
pub(crate) use test_name;

/// `path` without its first segment, the test crate's name (`all::`).
pub const fn without_crate(path: &'static str) -> &'static str {
    let bytes = path.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b':' && bytes[i + 1] == b':' {
            let (_, rest) = bytes.split_at(i + 2);
            return match std::str::from_utf8(rest) {
                Ok(rest) => rest,
                Err(_) => panic!("a module path is UTF-8"),
            };
        }
        i += 1;
    }
    panic!("a module path starts with its crate's name")
}

/// Copies `tests/fixtures/<name>` to `to`, leaving out any `target`.
pub fn copy_fixture(name: &str, to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    fs::create_dir_all(to).expect("mkdir fixture copy");
    for entry in fs::read_dir(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("fixture entry");
        if entry.file_type().expect("file type").is_file() {
            fs::copy(entry.path(), to.join(entry.file_name())).expect("copy fixture file");
        } else if entry.file_name() != "target" {
            copy_fixture(
                &format!("{name}/{}", entry.file_name().to_string_lossy()),
                &to.join(entry.file_name()),
            );
        }
    }
}

/// Runs the calling test's `body` in a child process (this test binary,
/// filtered to `test`, this test's own [`test_name!`]), so that an
/// irreversible apply never confines the test harness. Returns the child's output; the body's own
/// assertions decide the child's status.
pub fn in_child(test: &str, body: impl FnOnce()) -> Option<Output> {
    super::roles::body_in_child(test, |_| {}, body)
}

/// Runs `body` in a forked copy of this process, which has one thread: the
/// test harness runs each test on a thread of its own, and before Landlock
/// ABI 8 `apply` confines only a single-threaded process. Fails the test if
/// the body failed.
pub fn in_a_single_threaded_fork(body: impl FnOnce() + std::panic::UnwindSafe) {
    // SAFETY: the child runs the body and leaves with _exit; this is a test
    // process whose other thread (the harness's main) is waiting for us.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(body).is_ok();
        // SAFETY: ends the forked child without unwinding into the harness.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: `status` is a valid int for the kernel to write.
    assert_eq!(unsafe { libc::waitpid(pid, &raw mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the applied body failed: {status:#x}"
    );
}

/// The shared scenario script, `tests/scenarios/scenarios.sh`.
pub fn scenario_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/scenarios.sh")
}

/// Every scenario of each mode, pinned here as the VM tier pins its checks:
/// deleting a scenario from the script's registry fails
/// [`the_scenario_registry_lists_exactly_the_pinned_scenarios`] (which runs
/// in every profile, `nix build`'s included) instead of shrinking what every
/// tier asserts. Adding one is an edit here too.
pub const SCENARIOS: [(&str, &[&str]); 2] = [
    (
        "enabled",
        &[
            "probe-supported",
            "go-test",
            "cargo-build",
            "rm-rf-home",
            "write-outside-denied",
        ],
    ),
    (
        "disabled",
        &["probe-refuses", "run-refuses", "policy-reports"],
    ),
];

/// What the script's registry lists for `mode` (`scenarios.sh list MODE`).
fn registered_scenarios(mode: &str) -> Vec<String> {
    require_tool("bash", "bash");
    let out = output(
        Command::new("bash")
            .arg(scenario_script())
            .arg("list")
            .arg(mode),
    );
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The scenarios of `mode` (`enabled` or `disabled`) every tier must see
/// report `ok <name>:`: the pinned [`SCENARIOS`], which the script's
/// registry must list exactly, in order.
pub fn scenarios(mode: &str) -> Vec<String> {
    let pinned: Vec<String> = SCENARIOS
        .iter()
        .find(|(m, _)| *m == mode)
        .unwrap_or_else(|| panic!("no scenario mode {mode:?}"))
        .1
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let registered = registered_scenarios(mode);
    assert_eq!(
        registered, pinned,
        "tests/scenarios/scenarios.sh lists other {mode} scenarios than tests/suite/support.rs \
         pins (SCENARIOS): a scenario was added or removed in one place only"
    );
    pinned
}

#[test]
fn the_scenario_registry_lists_exactly_the_pinned_scenarios() {
    for (mode, _) in SCENARIOS {
        scenarios(mode);
    }
}

/// Asserts a run of the scenario script (on the host or inside a guest)
/// succeeded, with an `ok` line for each of `scenarios` and the closing
/// `N passed, 0 failed` line.
#[track_caller]
pub fn assert_scenarios_passed(out: &Output, scenarios: &[String]) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "a scenario failed\n{}", show(out));
    for name in scenarios {
        let ok = format!("ok {name}: ");
        assert!(
            stdout.lines().any(|l| l.starts_with(&ok)),
            "scenario {name} did not report ok\n{}",
            show(out)
        );
    }
    let summary = format!("{} passed, 0 failed", scenarios.len());
    assert!(
        stdout.lines().any(|l| l == summary),
        "no `{summary}` line\n{}",
        show(out)
    );
}
