//! A file-heavy workload in the project: where Landlock's per-operation
//! path walk shows, if anywhere.

use std::fs;
use std::path::{Path, PathBuf};

use crate::cases::{AGAINST_BARE, against_bare};
use crate::config::Config;
use crate::fail;
use crate::perf::share_text;
use crate::project::{Bench, Project, fresh_dir};
use crate::report::Section;
use crate::runner::{Variant, measure};
use crate::stats::{Stats, median_cpu, paired_ratio, ratio, signed_dur};

pub fn run(bench: &Bench, config: &Config) -> Section {
    // tmpfs unless told otherwise: see the note below.
    let parent = std::env::var_os("STRUMENT_BENCH_FILES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            if Path::new("/dev/shm").is_dir() {
                "/dev/shm".into()
            } else {
                bench.work.clone()
            }
        });
    let scratch = parent.join(format!("strument-bench-{}", std::process::id()));
    let project = Project::new(&scratch.join("project"), &bench.stderr_log);
    let dir = project.dir.join("files");
    let dir_arg = dir.to_str().expect("UTF-8 scratch path").to_string();
    let count = config.files.to_string();
    let checked_ops = 3 * config.files + 220;
    let mut section = Section::new("File-heavy workload in the project");
    section.prose(format!(
        "A worker (this binary re-executed) makes \
         110 directories (10 × 10), then creates and writes 256 bytes to each of {} files, \
         renames each into another directory, unlinks each and removes the directories; it \
         times that itself (wall and CPU time), so process start-up is not counted. It works \
         with paths relative to its current directory, so the bare run walks no long paths \
         while Landlock still checks every ancestor up to the project root on each create, \
         rename, unlink, mkdir and rmdir ({checked_ops} checked operations): the deep case is \
         the worst case for the kernel's walk. Sandboxed: `strument-sandbox run` with the \
         project's default policy; bwrap: the same roots as bind mounts.",
        config.files
    ));
    section.prose(format!(
        "The project for this case lives in `{}` (tmpfs; `STRUMENT_BENCH_FILES_DIR` \
         overrides). On the ext4 of the machine this was written on, the inode allocator's \
         scan past recently deleted inodes (`recently_deleted()` in `fs/ext4/ialloc.c`, on a \
         file system without a journal) made one run of this workload take anything from \
         0.6 s to 6 s, bare and sandboxed alike, which drowns a 5 % difference; tmpfs leaves \
         the VFS and Landlock work only, so the sandbox's share is as large as it gets.",
        parent.display()
    ));
    let mut rows = Vec::new();
    let mut shares = Vec::new();
    for depth in [3usize, 64] {
        let depth_s = depth.to_string();
        let args: [&str; 5] = ["worker", "files", &dir_arg, &count, &depth_s];
        let variants = [
            Variant::new("bare", "bare", || project.bare(&bench.exe, &args)).self_timed(),
            Variant::new("run", "`strument-sandbox run`", || {
                project.sandboxed(&bench.exe, &args)
            })
            .self_timed(),
            Variant::new("bwrap", "`bwrap`", || project.bwrap(&bench.exe, &args)).self_timed(),
        ];
        let clean = || fresh_dir(&dir);
        let measured = measure(
            &format!("files at depth {depth}"),
            &variants,
            (config.files_runs, 1),
            &clean,
            &bench.stderr_log,
        );
        let bare = measured.samples("bare");
        let bare_stats = Stats::of(&bare);
        let share = bench.share(measured.variant("run"), &clean);
        shares.push(format!("depth {depth}: {}", share_text(share)));
        for v in &variants {
            let samples = measured.samples(&v.key);
            let s = Stats::of(&samples);
            let extra =
                (s.median.as_secs_f64() - bare_stats.median.as_secs_f64()) / checked_ops as f64;
            let mut row = against_bare(
                &format!("{} files, depth {depth}", config.files),
                &v.name,
                &samples,
                &bare,
            );
            row.push(if v.key == "bare" {
                "—".into()
            } else {
                signed_dur(extra)
            });
            rows.push(row);
        }
        let run = measured.samples("run");
        let r = ratio(Stats::of(&run).median, bare_stats.median);
        section.target(
            format!("file-heavy workload, depth {depth}: ratio to bare ≤ 1.05"),
            format!(
                "{r:.3} (paired {:.3}, CPU time {:.3}; bwrap {:.3}); Landlock's checks: {} of \
                 the sandboxed run's CPU samples",
                paired_ratio(&run, &bare),
                ratio(median_cpu(&run), median_cpu(&bare)),
                ratio(
                    Stats::of(&measured.samples("bwrap")).median,
                    bare_stats.median
                ),
                share_text(share)
            ),
            r <= 1.05,
        );
    }
    let mut header = AGAINST_BARE.to_vec();
    header.push("extra per checked op");
    section.table(&header, rows);
    section.prose(format!(
        "Landlock's share: the CPU samples with a frame in the kernel's Landlock checks \
         (`security/landlock/`), in one more sandboxed run under `perf record -e cpu-clock \
         -g`: {}.",
        shares.join("; ")
    ));
    // Only what this run made: the per-process directory under `parent`.
    fs::remove_dir_all(&scratch).unwrap_or_else(|e| fail(&format!("{}: {e}", scratch.display())));
    section
}
