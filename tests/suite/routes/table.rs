//! The route table: each row one way of writing, in the order
//! `doc/security.md` numbers them. A symmetric route states its operation
//! once: on one file ([`Route::on_a_file`]: in the project, then outside the
//! roots) or over the two directories a [`Span`] gives each side. The rest
//! state their two attempts, or one attempt with an unconfined control.

use std::fs;
use std::io::{Read, Seek};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use super::route::{Case, Dirs, Places, Route, Span, Tried};
use super::syscalls::{
    MARK, ProcPidMem, ProcessVmWritev, WritesMemory, as_errno, cwd_of_a_child_in_the_sandbox,
    has_xattr, mem_of_a_child, mknod, mount_in_own_namespace, open_fd, open_write, ptrace_attach,
    ptrace_child_in_the_sandbox, renameat2, reopen_for_writing, self_cwd, set_mtime, setxattr,
    tmpfile_linked, tracer_of, truncate, write_inherited,
};

const ORIGINAL: &str = "original";

const IN_PROJECT_OR_OUTSIDE: [&str; 2] = ["in the project", "outside the roots"];
const BETWEEN_TWO_DIRECTORIES: [&str; 2] =
    ["between the two roots", "between two directories outside"];
const INTO_THE_PROJECT: [&str; 2] = ["from the second root", "from outside the roots"];
const OUT_OF_THE_PROJECT: [&str; 2] = ["to the second root", "to outside the roots"];
const SYMLINK_POINTING: [&str; 2] = [
    "pointing into the second root",
    "pointing outside the roots",
];
const METADATA: [&str; 2] = [
    "in the project",
    "outside the roots: lands (metadata is not confined)",
];

/// Every write route, in the table's order.
#[allow(clippy::too_many_lines)]
pub(super) fn routes() -> Vec<Route> {
    use Span::{IntoTheProject, OneDirectory, OutOfTheProject, TwoDirectories};
    vec![
        Route::on_a_file(
            "`open(O_WRONLY)` an existing file",
            IN_PROJECT_OR_OUTSIDE,
            file,
            |f| open_write(f, libc::O_WRONLY),
            starts_landed,
        ),
        Route::on_a_file(
            "`open(O_RDWR)` an existing file",
            IN_PROJECT_OR_OUTSIDE,
            file,
            |f| open_write(f, libc::O_RDWR),
            starts_landed,
        ),
        Route::on_a_file(
            "`open(O_CREAT)` a new file",
            IN_PROJECT_OR_OUTSIDE,
            nothing,
            |f| open_write(f, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL),
            exists,
        ),
        Route::on_a_file(
            "`open(O_WRONLY|O_TRUNC)`",
            IN_PROJECT_OR_OUTSIDE,
            file,
            |f| open_fd(f, libc::O_WRONLY | libc::O_TRUNC).map(drop),
            emptied,
        ),
        Route::on_a_file(
            "`open(O_RDONLY|O_TRUNC)`: truncation by a read-only open",
            IN_PROJECT_OR_OUTSIDE,
            file,
            |f| open_fd(f, libc::O_RDONLY | libc::O_TRUNC).map(drop),
            emptied,
        ),
        Route::on_a_file(
            "`open(O_APPEND)`",
            IN_PROJECT_OR_OUTSIDE,
            file,
            |f| open_write(f, libc::O_WRONLY | libc::O_APPEND),
            |f| content(f) == "originallanded",
        )
        .tracing(|f: &Path| content(f) != ORIGINAL),
        Route::on_a_file(
            "`open(O_TMPFILE)` then `linkat` to name it",
            IN_PROJECT_OR_OUTSIDE,
            nothing,
            |f| tmpfile_linked(dir_of(f), f),
            starts_landed,
        )
        .tracing(exists),
        Route::symmetric(
            "`O_TMPFILE` in a root, `linkat` into another place",
            ["into the second root", "into a directory outside the roots"],
            OutOfTheProject,
            Case {
                setup: nothing,
                attempt: |d| tmpfile_linked(&d.here, &d.there.join("named")),
                landed: Some(|d| starts_landed(&d.there.join("named"))),
                explain: Some(|d| vec![d.here.clone(), d.there.join("named")]),
            },
        )
        .tracing(|d: &Dirs| exists(&d.there.join("named"))),
        Route::on_a_file(
            "`truncate(2)` by path",
            IN_PROJECT_OR_OUTSIDE,
            file,
            truncate,
            emptied,
        ),
        Route::on_a_file(
            "`unlink` a file",
            IN_PROJECT_OR_OUTSIDE,
            file,
            |f| as_errno(fs::remove_file(f)),
            |f| !exists(f),
        ),
        Route::on_a_file(
            "`rmdir` an empty directory",
            IN_PROJECT_OR_OUTSIDE,
            |f| fs::create_dir(f).expect("mkdir"),
            |f| as_errno(fs::remove_dir(f)),
            |f| !exists(f),
        ),
        Route::on_a_file(
            "`mkdir`",
            IN_PROJECT_OR_OUTSIDE,
            nothing,
            |f| as_errno(fs::create_dir(f)),
            exists,
        ),
        mknod_route::<{ libc::S_IFIFO }, 0, 0>("`mknod` a fifo"),
        mknod_route::<{ libc::S_IFSOCK }, 0, 0>("`mknod` a socket"),
        mknod_route::<{ libc::S_IFCHR }, 0, 0>(
            "`mknod` a whiteout (char device 0:0, no CAP_MKNOD needed)",
        ),
        mknod_route::<{ libc::S_IFCHR }, 1, 3>("`mknod` a char device (1:3, CAP_MKNOD)")
            .needing_root(),
        mknod_route::<{ libc::S_IFBLK }, 7, 0>("`mknod` a block device (7:0, CAP_MKNOD)")
            .needing_root(),
        Route::on_a_file(
            "`symlink`",
            IN_PROJECT_OR_OUTSIDE,
            nothing,
            |f| as_errno(symlink("/etc/passwd", f)),
            exists,
        ),
        Route::symmetric(
            "`link` (a hard link)",
            ["within the project", "within a directory outside"],
            OneDirectory,
            HARD_LINK,
        ),
        Route::new(
            "a hard link in the project to a file outside",
            [
                "made before the sandbox, written through: lands on the outside inode",
                "made from inside the sandbox",
            ],
            Tried::Paired {
                granted: Case {
                    setup: |p| {
                        file(&p.outside.join("f"));
                        fs::hard_link(p.outside.join("f"), p.project.join("hl")).expect("link");
                    },
                    attempt: |p| open_write(&p.project.join("hl"), libc::O_WRONLY),
                    landed: Some(|p| starts_landed(&p.outside.join("f"))),
                    explain: Some(|p| vec![p.project.join("hl")]),
                },
                refused: Case {
                    setup: |p| file(&p.outside.join("f")),
                    attempt: |p| as_errno(fs::hard_link(p.outside.join("f"), p.project.join("hl"))),
                    landed: Some(|p| exists(&p.project.join("hl"))),
                    explain: Some(|p| vec![p.outside.join("f"), p.project.join("hl")]),
                },
            },
        ),
        Route::new(
            "a hard link outside to a file in the project",
            [
                "the file's own name in the project",
                "written through the outside name",
            ],
            Tried::Paired {
                granted: Case {
                    setup: linked_from_outside,
                    attempt: |p| open_write(&p.project.join("f"), libc::O_WRONLY),
                    landed: Some(|p| starts_landed(&p.project.join("f"))),
                    explain: Some(|p| vec![p.project.join("f")]),
                },
                refused: Case {
                    setup: linked_from_outside,
                    attempt: |p| open_write(&p.outside.join("hl"), libc::O_WRONLY),
                    landed: Some(|p| starts_landed(&p.project.join("f"))),
                    explain: Some(|p| vec![p.outside.join("hl")]),
                },
            },
        ),
        Route::symmetric(
            "a symlink in the project, written through",
            SYMLINK_POINTING,
            OutOfTheProject,
            THROUGH_A_SYMLINK,
        ),
        Route::symmetric(
            "a dangling symlink in the project, `O_CREAT` through it",
            SYMLINK_POINTING,
            OutOfTheProject,
            THROUGH_A_DANGLING_SYMLINK,
        ),
        Route::new(
            "`..` from a root",
            [
                "`a/sub/../new`, staying inside",
                "`<project>/../new`, climbing out",
            ],
            Tried::Paired {
                granted: Case {
                    setup: |p| fs::create_dir(p.project.join("sub")).expect("mkdir"),
                    attempt: |p| {
                        open_write(
                            &p.project.join("sub/../new"),
                            libc::O_WRONLY | libc::O_CREAT,
                        )
                    },
                    landed: Some(|p| exists(&p.project.join("new"))),
                    explain: Some(|p| vec![p.project.join("sub/../new")]),
                },
                refused: Case {
                    setup: nothing,
                    attempt: |p| open_write(&above_the_project(p), libc::O_WRONLY | libc::O_CREAT),
                    landed: Some(|p| exists(&above_the_project(p))),
                    explain: Some(|p| vec![above_the_project(p)]),
                },
            },
        ),
        Route::on_a_file(
            "`/proc/self/fd/N` of a read-only descriptor, re-opened for writing",
            ["a file in the project", "a file outside the roots"],
            file,
            reopen_for_writing,
            starts_landed,
        ),
        Route::on_a_file(
            "`/proc/self/cwd`",
            ["cwd in the project", "cwd outside the roots"],
            nothing,
            self_cwd,
            exists,
        ),
        Route::new(
            "`/proc/<pid>/cwd` of another process",
            [
                "a child in the same sandbox, cwd in the project",
                "an unconfined process of the same user, cwd outside",
            ],
            Tried::Paired {
                granted: Case {
                    setup: nothing,
                    attempt: |p| cwd_of_a_child_in_the_sandbox(&p.project),
                    landed: Some(|p| exists(&p.project.join("via-cwd"))),
                    explain: Some(|p| vec![p.project.join("via-cwd")]),
                },
                refused: Case {
                    setup: nothing,
                    attempt: |p| {
                        open_write(
                            &p.via_target_cwd(),
                            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                        )
                    },
                    landed: Some(|p| exists(&p.in_target_cwd())),
                    explain: Some(|p| vec![p.via_target_cwd()]),
                },
            },
        ),
        Route::symmetric(
            "`rename` within one directory",
            IN_PROJECT_OR_OUTSIDE,
            OneDirectory,
            RENAME,
        ),
        Route::symmetric(
            "`rename` between directories",
            BETWEEN_TWO_DIRECTORIES,
            TwoDirectories,
            RENAME,
        ),
        Route::symmetric(
            "`rename` into a root",
            INTO_THE_PROJECT,
            IntoTheProject,
            RENAME,
        ),
        Route::symmetric(
            "`rename` out of a root",
            OUT_OF_THE_PROJECT,
            OutOfTheProject,
            RENAME,
        ),
        Route::symmetric(
            "`rename` a directory out of a root",
            OUT_OF_THE_PROJECT,
            OutOfTheProject,
            Case {
                setup: |d| {
                    fs::create_dir(d.here.join("d")).expect("mkdir");
                    file(&d.here.join("d/f"));
                },
                attempt: |d| as_errno(fs::rename(d.here.join("d"), d.there.join("d"))),
                landed: Some(|d| moved(&d.here.join("d/f"), &d.there.join("d/f"))),
                explain: Some(|d| vec![d.here.join("d"), d.there.join("d")]),
            },
        ),
        Route::symmetric(
            "`renameat2(RENAME_NOREPLACE)` within one directory",
            IN_PROJECT_OR_OUTSIDE,
            OneDirectory,
            RENAME_NOREPLACE,
        ),
        Route::symmetric(
            "`renameat2(RENAME_NOREPLACE)` between directories",
            BETWEEN_TWO_DIRECTORIES,
            TwoDirectories,
            RENAME_NOREPLACE,
        ),
        Route::symmetric(
            "`renameat2(RENAME_NOREPLACE)` into a root",
            INTO_THE_PROJECT,
            IntoTheProject,
            RENAME_NOREPLACE,
        ),
        Route::symmetric(
            "`renameat2(RENAME_NOREPLACE)` out of a root",
            OUT_OF_THE_PROJECT,
            OutOfTheProject,
            RENAME_NOREPLACE,
        ),
        Route::symmetric(
            "`renameat2(RENAME_EXCHANGE)` within one directory",
            IN_PROJECT_OR_OUTSIDE,
            OneDirectory,
            RENAME_EXCHANGE,
        ),
        Route::symmetric(
            "`renameat2(RENAME_EXCHANGE)` between directories",
            BETWEEN_TWO_DIRECTORIES,
            TwoDirectories,
            RENAME_EXCHANGE,
        ),
        Route::symmetric(
            "`renameat2(RENAME_EXCHANGE)` across a root's edge",
            [
                "the project with the second root",
                "the project with outside the roots",
            ],
            OutOfTheProject,
            RENAME_EXCHANGE,
        ),
        Route::on_a_file(
            "`bind` a unix socket",
            IN_PROJECT_OR_OUTSIDE,
            nothing,
            |f| as_errno(UnixListener::bind(f).map(drop)),
            exists,
        ),
        Route::new(
            "`mount` a tmpfs",
            [
                "unconfined control, own mount namespace: mounts",
                "sandboxed, over a directory inside the project",
            ],
            Tried::Same(Case {
                setup: |p| fs::create_dir(p.project.join("mnt")).expect("mkdir"),
                attempt: |p| {
                    let on = p.project.join("mnt");
                    mount_in_own_namespace(Path::new("tmpfs"), &on, "tmpfs", 0, None)
                },
                landed: None,
                explain: None,
            }),
        )
        .with_unconfined_control()
        .needing_root(),
        Route::new(
            "`mount --bind` a directory outside into the project",
            [
                "unconfined control: writes through it land outside",
                "sandboxed",
            ],
            Tried::Same(Case {
                setup: |p| fs::create_dir(p.project.join("mnt")).expect("mkdir"),
                attempt: |p| {
                    let (on, then_write) = (p.project.join("mnt"), p.project.join("mnt/new"));
                    mount_in_own_namespace(
                        &p.outside,
                        &on,
                        "none",
                        libc::MS_BIND,
                        Some(&then_write),
                    )
                },
                landed: Some(|p| exists(&p.outside.join("new"))),
                explain: None,
            }),
        )
        .with_unconfined_control()
        .needing_root(),
        Route::new(
            "`ptrace(PTRACE_ATTACH)`",
            [
                "a child in the same sandbox",
                "an unconfined process of the same user",
            ],
            Tried::Paired {
                granted: Case {
                    setup: nothing,
                    attempt: |_| ptrace_child_in_the_sandbox(),
                    landed: None,
                    explain: None,
                },
                refused: Case {
                    setup: nothing,
                    attempt: |p| ptrace_attach(p.target.pid),
                    landed: Some(|p| tracer_of(p.target.pid).is_some_and(|t| t != 0)),
                    explain: None,
                },
            },
        ),
        memory_route::<ProcPidMem>(
            "write `/proc/<pid>/mem`",
            [
                "unconfined control, of a child: lands (in the sandbox even its own children's \
                 mem file is refused: `/proc` is no root)",
                "sandboxed, of an unconfined process of the same user",
            ],
        )
        .with_unconfined_control(),
        memory_route::<ProcessVmWritev>(
            "`process_vm_writev` (another process's memory)",
            [
                "of a child in the same sandbox",
                "of an unconfined process of the same user",
            ],
        ),
        Route::on_a_file(
            "a descriptor opened for writing before the sandbox (inherited)",
            [
                "of a file in the project",
                "of a file outside: lands (Landlock checks at open, not at write)",
            ],
            file,
            |_| write_inherited(),
            starts_landed,
        )
        .through_inherited()
        .not_confined_by_landlock(),
        Route::on_a_file(
            "`chmod`",
            METADATA,
            file,
            |f| as_errno(fs::set_permissions(f, fs::Permissions::from_mode(0o600))),
            |f| fs::metadata(f).is_ok_and(|m| m.mode() & 0o777 == 0o600),
        )
        .not_about_a_path()
        .not_confined_by_landlock(),
        Route::on_a_file("`utimensat` (timestamps)", METADATA, file, set_mtime, |f| {
            fs::metadata(f).is_ok_and(|m| m.mtime() == 12345)
        })
        .not_about_a_path()
        .not_confined_by_landlock(),
        Route::on_a_file(
            "`setxattr` (extended attributes)",
            METADATA,
            file,
            setxattr,
            has_xattr,
        )
        .not_about_a_path()
        .not_confined_by_landlock(),
    ]
}

// ---------------------------------------------------------------------------
// Operations several rows share, and the setups and checks, run unconfined.

/// `mknod` a node of type `KIND` (`S_IFIFO`, …), device `MAJOR:MINOR`;
/// where it must land it must be of that type, where it must not nothing
/// may be there.
fn mknod_route<const KIND: libc::mode_t, const MAJOR: u32, const MINOR: u32>(
    name: &'static str,
) -> Route {
    Route::on_a_file(
        name,
        IN_PROJECT_OR_OUTSIDE,
        nothing,
        |f| mknod(f, KIND, libc::makedev(MAJOR, MINOR)),
        |f| fs::symlink_metadata(f).is_ok_and(|m| m.mode() & libc::S_IFMT == KIND),
    )
    .tracing(exists)
}

/// A write to `there/f` through the symlink `here/link`.
const THROUGH_A_SYMLINK: Case<Dirs> = Case {
    setup: |d| {
        file(&d.there.join("f"));
        symlink(d.there.join("f"), d.here.join("link")).expect("symlink");
    },
    attempt: |d| open_write(&d.here.join("link"), libc::O_WRONLY),
    landed: Some(|d| starts_landed(&d.there.join("f"))),
    explain: Some(|d| vec![d.here.join("link")]),
};

/// `O_CREAT` of `there/new` through the dangling symlink `here/link`.
const THROUGH_A_DANGLING_SYMLINK: Case<Dirs> = Case {
    setup: |d| symlink(d.there.join("new"), d.here.join("link")).expect("symlink"),
    attempt: |d| open_write(&d.here.join("link"), libc::O_WRONLY | libc::O_CREAT),
    landed: Some(|d| exists(&d.there.join("new"))),
    explain: Some(|d| vec![d.here.join("link")]),
};

/// `link(here/f, there/hl)`.
const HARD_LINK: Case<Dirs> = Case {
    setup: |d| file(&d.here.join("f")),
    attempt: |d| as_errno(fs::hard_link(d.here.join("f"), d.there.join("hl"))),
    landed: Some(|d| exists(&d.there.join("hl"))),
    explain: Some(|d| vec![d.here.join("f"), d.there.join("hl")]),
};

/// `rename(here/f, there/g)`.
const RENAME: Case<Dirs> = Case {
    attempt: |d| as_errno(fs::rename(d.here.join("f"), d.there.join("g"))),
    ..RENAME_NOREPLACE
};

/// `renameat2(here/f, there/g, RENAME_NOREPLACE)`.
const RENAME_NOREPLACE: Case<Dirs> = Case {
    setup: |d| file(&d.here.join("f")),
    attempt: |d| {
        renameat2(
            &d.here.join("f"),
            &d.there.join("g"),
            libc::RENAME_NOREPLACE,
        )
    },
    landed: Some(|d| moved(&d.here.join("f"), &d.there.join("g"))),
    explain: Some(|d| vec![d.here.join("f"), d.there.join("g")]),
};

/// `renameat2(here/f, there/g, RENAME_EXCHANGE)`.
const RENAME_EXCHANGE: Case<Dirs> = Case {
    setup: |d| two_files(&d.here.join("f"), &d.there.join("g")),
    attempt: |d| renameat2(&d.here.join("f"), &d.there.join("g"), libc::RENAME_EXCHANGE),
    landed: Some(|d| swapped(&d.here.join("f"), &d.there.join("g"))),
    explain: Some(|d| vec![d.here.join("f"), d.there.join("g")]),
};

/// A write of [`MARK`] into another process's memory with `W`: of a child
/// (granted), of the unconfined target (refused).
fn memory_route<W: WritesMemory>(name: &'static str, what: [&'static str; 2]) -> Route {
    let tried = Tried::Paired {
        granted: Case {
            setup: nothing,
            attempt: |_| mem_of_a_child(W::write),
            landed: None,
            explain: None,
        },
        refused: Case {
            setup: nothing,
            attempt: |p| W::write(p.target.pid, p.target.buffer_address),
            landed: Some(|p| target_memory(p) == *MARK),
            explain: None,
        },
    };
    Route::new(name, what, tried)
}

fn linked_from_outside(p: &Places) {
    file(&p.project.join("f"));
    fs::hard_link(p.project.join("f"), p.outside.join("hl")).expect("link");
}

/// `<project>/../..`, the fake home, and a name unique to the attempt.
fn above_the_project(p: &Places) -> PathBuf {
    p.project.join("../..").join(format!("{}-dotdot", p.label))
}

fn target_memory(p: &Places) -> [u8; 8] {
    let mut out = [0u8; 8];
    if let Ok(mut f) = fs::File::open(format!("/proc/{}/mem", p.target.pid)) {
        let at = std::io::SeekFrom::Start(p.target.buffer_address as u64);
        if f.seek(at).is_ok() {
            let _ = f.read_exact(&mut out);
        }
    }
    out
}

fn nothing<P: ?Sized>(_: &P) {}

/// The directory a one-file route's file is in.
fn dir_of(file: &Path) -> &Path {
    file.parent()
        .expect("a one-file route's file is in a directory")
}

fn file(path: &Path) {
    fs::write(path, ORIGINAL).expect("write a fixture file");
}

fn two_files(x: &Path, y: &Path) {
    file(x);
    fs::write(y, "second").expect("write a fixture file");
}

fn content(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

fn starts_landed(path: &Path) -> bool {
    content(path).starts_with("landed")
}

fn emptied(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.len() == 0)
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

fn moved(from: &Path, to: &Path) -> bool {
    !exists(from) && content(to) == ORIGINAL
}

fn swapped(x: &Path, y: &Path) -> bool {
    content(x) == "second" && content(y) == ORIGINAL
}
