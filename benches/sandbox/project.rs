//! The scratch project the commands run in, and the tools, found once.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use strument_sandbox::{Policy, default_writable, probe};

use crate::config::Config;
use crate::perf::landlock_share;
use crate::runner::{Variant, run};
use crate::{BIN, TARGET_TMPDIR, fail};

/// A project directory the sandboxed commands run in, with the bubblewrap
/// equivalent of its policy.
pub struct Project {
    pub dir: PathBuf,
    /// The roots the CLI's policy for `dir` grants, as bubblewrap binds: all
    /// but the device files and `/dev/pts`, which `--dev /dev` provides.
    pub bwrap_binds: Vec<PathBuf>,
    /// How many roots the CLI's policy for `dir` grants.
    pub granted: usize,
}

impl Project {
    pub fn new(dir: &Path, stderr_log: &Path) -> Project {
        fs::create_dir_all(dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
        let dir = dir.canonicalize().expect("canonical project");
        // The CLI creates missing toolchain caches on its first run; let it,
        // so the binds below list the same roots it then grants.
        run(
            Command::new(BIN)
                .args(["run", "--project"])
                .arg(&dir)
                .args(["--", "true"]),
            stderr_log,
        );
        let report = Project::policy(&dir).check().expect("policy check");
        let bwrap_binds = report
            .granted
            .iter()
            .map(|g| g.path.clone())
            .filter(|p| !p.starts_with("/dev") || p.starts_with("/dev/shm"))
            .collect();
        let project = Project {
            dir,
            bwrap_binds,
            granted: report.granted.len(),
        };
        project.assert_confined(&report, stderr_log);
        project
    }

    /// The ratios mean something only if the sandboxed variants are
    /// confined: each of `run`, `Prepared::confine` and bwrap must refuse a
    /// write beside the project (outside every root) and land one inside,
    /// checked on disk. Stops the benchmark otherwise.
    fn assert_confined(&self, report: &strument_sandbox::Report, stderr_log: &Path) {
        // Beside the project, or (a project in a granted temp root, as the
        // file-heavy case's in /dev/shm) in the checkout's target directory.
        let beside = self.dir.with_file_name(format!(
            "{}-outside",
            self.dir
                .file_name()
                .map_or("project".into(), |n| n.to_string_lossy())
        ));
        let in_target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-sandbox-outside");
        let mut verdicts = Vec::new();
        let mut chosen = None;
        for outside in [beside, in_target] {
            let refused = outside.join("written");
            let granted = report
                .explain(&refused)
                .unwrap_or_else(|e| fail(&format!("explain {}: {e}", refused.display())));
            if granted.is_granted() {
                verdicts.push(format!("{} ({:?})", refused.display(), granted.verdict));
            } else {
                chosen = Some((outside, refused));
                break;
            }
        }
        let Some((outside, refused)) = chosen else {
            fail(&format!(
                "{} writable under the project's policy: the benchmark's sandbox would confine \
                 nothing it could check; put the checkout and the project elsewhere",
                verdicts.join(" and ")
            ))
        };
        fs::create_dir_all(&outside)
            .unwrap_or_else(|e| fail(&format!("{}: {e}", outside.display())));
        let landed = self.dir.join("confinement-check");
        let prepared = Project::policy(&self.dir)
            .prepare()
            .unwrap_or_else(|e| fail(&format!("prepare: {e}")));
        let sh = Path::new("sh");
        // The write outside may fail (the point); the one inside must not.
        let script = ["-c", "echo x > \"$1\" 2>/dev/null; echo y > \"$2\"", "sh"];
        let mut confined = self.bare(sh, &script);
        prepared.confine(&mut confined);
        let variants = [
            ("strument-sandbox run", self.sandboxed(sh, &script)),
            ("Prepared::confine", confined),
            ("bwrap", self.bwrap(sh, &script)),
        ];
        for (name, mut cmd) in variants {
            for file in [&refused, &landed] {
                let _ = fs::remove_file(file);
            }
            run(cmd.arg(&refused).arg(&landed), stderr_log);
            if refused.exists() || !landed.is_file() {
                fail(&format!(
                    "{name} is not confining as measured: the write to {} {}, the write to {} {}",
                    refused.display(),
                    if refused.exists() {
                        "landed"
                    } else {
                        "was refused"
                    },
                    landed.display(),
                    if landed.is_file() { "landed" } else { "failed" },
                ));
            }
        }
        let _ = fs::remove_file(&landed);
        eprintln!(
            "sandbox benchmark: run, Prepared::confine and bwrap refuse a write outside {} and land one inside",
            self.dir.display()
        );
    }

    /// The library's default policy for the project at `dir`.
    pub fn policy(dir: &Path) -> Policy {
        let writable = default_writable(dir, None, &[]).expect("default writable set");
        Policy {
            writable,
            ..Policy::default()
        }
    }

    /// `strument-sandbox run --project P -- cmd…`
    pub fn sandboxed(&self, program: &Path, args: &[&str]) -> Command {
        self.sandboxed_with(&[], program, args)
    }

    /// `strument-sandbox run --project P FLAGS… -- cmd…`.
    pub fn sandboxed_with(&self, flags: &[String], program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--project"])
            .arg(&self.dir)
            .args(flags)
            .arg("--")
            .arg(program)
            .args(args)
            .current_dir(&self.dir);
        cmd
    }

    /// `bwrap --ro-bind / / --dev /dev --bind R R … -- cmd…`: the same
    /// writable roots, as mounts.
    pub fn bwrap(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new("bwrap");
        cmd.args(["--ro-bind", "/", "/", "--dev", "/dev"]);
        for root in &self.bwrap_binds {
            cmd.arg("--bind").arg(root).arg(root);
        }
        cmd.arg("--").arg(program).args(args).current_dir(&self.dir);
        cmd
    }

    pub fn bare(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(&self.dir);
        cmd
    }
}

/// The scratch space and the tools, found once.
pub struct Bench {
    /// `target/tmp/bench-sandbox`: everything the benchmark writes, except
    /// the file-heavy workload's project.
    pub work: PathBuf,
    /// The project under `work` the sandboxed commands run in.
    pub project: Project,
    pub stderr_log: PathBuf,
    /// This benchmark binary, re-executed as a worker.
    pub exe: PathBuf,
    /// The Landlock ABI of the machine.
    pub abi: u32,
}

impl Bench {
    pub fn setup(config: &Config) -> Bench {
        let availability = probe();
        if let Some(why) = &availability.error {
            fail(&format!(
                "Landlock is unavailable, nothing to measure: {why}; {}",
                why.hint()
            ));
        }
        require_tool("bwrap", &["--version"], "bubblewrap");
        let work = Path::new(TARGET_TMPDIR).join("bench-sandbox");
        // Only ever removes what an earlier run of this benchmark made.
        fresh_dir(&work);
        let stderr_log = work.join("stderr.log");
        let project = Project::new(&work.join("project"), &stderr_log);
        let exe = std::env::current_exe().expect("the benchmark's own path");
        eprintln!(
            "sandbox benchmark ({} mode): Landlock ABI {}, project {}",
            if config.quick { "quick" } else { "full" },
            availability.abi,
            project.dir.display()
        );
        Bench {
            work,
            project,
            stderr_log,
            exe,
            abi: availability.abi,
        }
    }

    /// [`landlock_share`] of one more run of `variant`, after `before`.
    pub fn share(&self, variant: &Variant<'_>, before: &dyn Fn()) -> Option<f64> {
        before();
        landlock_share(
            &(variant.command)(),
            &self.work.join("perf.data"),
            &self.stderr_log,
        )
    }
}

pub fn require_tool(program: &str, args: &[&str], package: &str) {
    let found = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        fail(&format!(
            "`{program}` not found: install the package `{package}` (apt-get install {package})"
        ));
    }
}

/// Removes the directory `dir` and everything beneath it, when it is there.
pub fn remove_dir(dir: &Path) {
    if dir.exists() {
        fs::remove_dir_all(dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
    }
}

/// Makes `dir` an empty directory, removing what was there.
pub fn fresh_dir(dir: &Path) {
    remove_dir(dir);
    fs::create_dir_all(dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
}

pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| fail(&format!("{}: {e}", to.display())));
    let entries = fs::read_dir(from).unwrap_or_else(|e| fail(&format!("{}: {e}", from.display())));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| fail(&format!("{}: {e}", from.display())));
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_name() == "target" {
            continue;
        }
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap_or_else(|e| fail(&format!("{}: {e}", src.display())));
        }
    }
}
