//! The seccomp filter of `--explain-denials`: `SECCOMP_RET_TRACE` for the
//! system calls that write to the file system by path, so the tracer sees
//! those and nothing else; every other call runs at full speed.
//!
//! `open` and `openat` stop only with a flag that writes or creates
//! (`O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_TRUNC`): the flags are in a
//! register, so the filter can tell. `openat2`'s are in memory, which a
//! filter cannot read, so every `openat2` stops and the tracer reads its
//! `struct open_how` when the call fails; glibc's `open` does not use it,
//! so few programs pay.
//!
//! Only the build's own convention is decoded (on x86-64 the 64-bit one):
//! a 32-bit program's refusals are still refused, but not explained.
//!
//! Stacked beside the terminal filter (and the connect supervisor's): the
//! kernel runs every filter and takes the most severe answer (`KILL` >
//! `ERRNO` > `USER_NOTIF` > `TRACE` > `ALLOW`), and the system calls each
//! stops are disjoint, so each filter keeps its own calls.

use std::sync::Arc;

use super::Operation;
use crate::terminal::SockFilter;

// Opcodes of <linux/bpf_common.h>.
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

// <linux/seccomp.h>
const RET_TRACE: u32 = 0x7ff0_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

/// Offsets into `struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }`.
const NR: u32 = 0;
const ARCH: u32 = 4;

/// The offset of the low 32 bits of `args[i]`.
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i + if cfg!(target_endian = "little") { 0 } else { 4 }
}

/// The open flags that make an `open` write-shaped. (`O_TMPFILE` needs
/// `O_WRONLY` or `O_RDWR`, so it is among them.)
pub(crate) const WRITE_FLAGS: u32 =
    (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

/// `AT_REMOVEDIR`: `unlinkat` removing a directory.
pub(crate) const AT_REMOVEDIR: u64 = 0x200;

/// Where a path argument of a call is: its index, and the index of the
/// directory descriptor it is relative to (`None`: the working directory).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathArg {
    pub(crate) dirfd: Option<usize>,
    pub(crate) path: usize,
}

/// Where a call keeps what decides its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flags {
    /// Nothing: the call says it.
    None,
    /// Open flags in this argument.
    Open(usize),
    /// A `struct open_how` pointed to by this argument (`openat2`).
    OpenHow(usize),
    /// `unlinkat`'s flags in this argument (`AT_REMOVEDIR`).
    Unlink(usize),
}

/// One write-shaped system call of this architecture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call {
    pub(crate) nr: u64,
    pub(crate) name: &'static str,
    pub(crate) operation: Operation,
    /// One path, or two (from, to) for a rename or link; a symlink's
    /// target is text, not a path the call resolves, so it is not here.
    pub(crate) paths: &'static [PathArg],
    pub(crate) flags: Flags,
}

const fn cwd(path: usize) -> PathArg {
    PathArg { dirfd: None, path }
}

const fn at(dirfd: usize, path: usize) -> PathArg {
    PathArg {
        dirfd: Some(dirfd),
        path,
    }
}

const fn call(
    nr: libc::c_long,
    name: &'static str,
    operation: Operation,
    paths: &'static [PathArg],
    flags: Flags,
) -> Call {
    Call {
        nr: nr as u64,
        name,
        operation,
        paths,
        flags,
    }
}

/// The `*at` forms, which every architecture has.
#[rustfmt::skip]
macro_rules! at_calls {
    () => {
        [
            call(libc::SYS_openat, "openat", Operation::Write, &[at(0, 1)], Flags::Open(2)),
            call(libc::SYS_openat2, "openat2", Operation::Write, &[at(0, 1)], Flags::OpenHow(2)),
            call(libc::SYS_mkdirat, "mkdirat", Operation::MakeDir, &[at(0, 1)], Flags::None),
            call(libc::SYS_mknodat, "mknodat", Operation::MakeNode, &[at(0, 1)], Flags::None),
            call(libc::SYS_unlinkat, "unlinkat", Operation::Remove, &[at(0, 1)], Flags::Unlink(2)),
            call(libc::SYS_renameat2, "renameat2", Operation::Rename, &[at(0, 1), at(2, 3)], Flags::None),
            call(libc::SYS_linkat, "linkat", Operation::Link, &[at(0, 1), at(2, 3)], Flags::None),
            call(libc::SYS_symlinkat, "symlinkat", Operation::Symlink, &[at(1, 2)], Flags::None),
            call(libc::SYS_truncate, "truncate", Operation::Truncate, &[cwd(0)], Flags::None),
        ]
    };
}

#[cfg(target_arch = "x86_64")]
#[rustfmt::skip]
const CALLS: &[Call] = &{
    let common = at_calls!();
    let old = [
        call(libc::SYS_open, "open", Operation::Write, &[cwd(0)], Flags::Open(1)),
        call(libc::SYS_creat, "creat", Operation::Create, &[cwd(0)], Flags::None),
        call(libc::SYS_mkdir, "mkdir", Operation::MakeDir, &[cwd(0)], Flags::None),
        call(libc::SYS_mknod, "mknod", Operation::MakeNode, &[cwd(0)], Flags::None),
        call(libc::SYS_unlink, "unlink", Operation::Remove, &[cwd(0)], Flags::None),
        call(libc::SYS_rmdir, "rmdir", Operation::RemoveDir, &[cwd(0)], Flags::None),
        call(libc::SYS_rename, "rename", Operation::Rename, &[cwd(0), cwd(1)], Flags::None),
        call(libc::SYS_renameat, "renameat", Operation::Rename, &[at(0, 1), at(2, 3)], Flags::None),
        call(libc::SYS_link, "link", Operation::Link, &[cwd(0), cwd(1)], Flags::None),
        call(libc::SYS_symlink, "symlink", Operation::Symlink, &[cwd(1)], Flags::None),
    ];
    [common[0], common[1], common[2], common[3], common[4], common[5], common[6], common[7], common[8],
     old[0], old[1], old[2], old[3], old[4], old[5], old[6], old[7], old[8], old[9]]
};

#[cfg(target_arch = "aarch64")]
#[rustfmt::skip]
const CALLS: &[Call] = &{
    let common = at_calls!();
    let old = call(libc::SYS_renameat, "renameat", Operation::Rename, &[at(0, 1), at(2, 3)], Flags::None);
    [common[0], common[1], common[2], common[3], common[4], common[5], common[6], common[7], common[8], old]
};

#[cfg(target_arch = "riscv64")]
const CALLS: &[Call] = &at_calls!();

#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
const CALLS: &[Call] = &[];

/// `AUDIT_ARCH_*` of the build's own convention, and whether its numbers
/// share the space with x32's (bit 30).
fn native() -> Option<(u32, bool)> {
    if cfg!(target_arch = "x86_64") {
        Some((0xC000_003E, true))
    } else if cfg!(target_arch = "aarch64") {
        Some((0xC000_00B7, false))
    } else if cfg!(target_arch = "riscv64") {
        Some((0xC000_00F3, false))
    } else {
        None
    }
}

/// The write-shaped call numbered `nr` in the native convention.
pub(crate) fn call_of(arch: u32, nr: u64) -> Option<&'static Call> {
    let (native, _) = native()?;
    if arch != native {
        return None;
    }
    CALLS.iter().find(|c| c.nr == nr)
}

/// The trace filter, built once per command, installed by the child.
#[derive(Debug, Clone)]
pub(crate) struct TraceFilter {
    program: Arc<[SockFilter]>,
}

impl TraceFilter {
    /// The program for this architecture, or `None` on one whose system
    /// call numbers this crate does not know.
    pub(crate) fn new() -> Option<TraceFilter> {
        let (arch, x32) = native()?;
        if CALLS.is_empty() {
            return None;
        }
        Some(TraceFilter {
            program: program(arch, x32, CALLS).into(),
        })
    }

    /// The instructions, shared with the child's pre-exec hook.
    pub(crate) fn program(&self) -> Arc<[SockFilter]> {
        Arc::clone(&self.program)
    }
}

/// Where a jump goes before the program's layout is known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Next,
    Trace,
    Allow,
    /// The block testing the open flags in this argument.
    FlagsIn(u32),
}

/// Lays the program out:
///
/// ```text
///     ld arch;  jeq NATIVE ? next : allow
///     ld nr;    (x86-64) jge X32 ? allow : next
///     for each call without flags:  jeq NR ? trace : next
///     for each open call:           jeq NR ? flags_in_N : next
///     ret ALLOW
/// flags_in_N:  ld args[N];  jset WRITE_FLAGS ? trace : allow      (one per N)
/// trace:       ret TRACE
/// allow:       ret ALLOW
/// ```
fn program(arch: u32, x32: bool, calls: &[Call]) -> Vec<SockFilter> {
    let mut body: Vec<(u16, Target, Target, u32)> = vec![
        (LD_W_ABS, Target::Next, Target::Next, ARCH),
        (JEQ_K, Target::Next, Target::Allow, arch),
        (LD_W_ABS, Target::Next, Target::Next, NR),
    ];
    if x32 {
        body.push((JGE_K, Target::Allow, Target::Next, 0x4000_0000));
    }
    let mut flag_args: Vec<u32> = Vec::new();
    for c in calls {
        let nr = u32::try_from(c.nr).unwrap_or(u32::MAX);
        let target = match c.flags {
            Flags::Open(arg) => {
                let arg = u32::try_from(arg).unwrap_or(0);
                if !flag_args.contains(&arg) {
                    flag_args.push(arg);
                }
                Target::FlagsIn(arg)
            }
            Flags::None | Flags::OpenHow(_) | Flags::Unlink(_) => Target::Trace,
        };
        body.push((JEQ_K, target, Target::Next, nr));
    }
    body.push((RET_K, Target::Next, Target::Next, RET_ALLOW));
    let mut flag_blocks: Vec<(u32, usize)> = Vec::new();
    for arg in &flag_args {
        flag_blocks.push((*arg, body.len()));
        body.extend_from_slice(&[
            (LD_W_ABS, Target::Next, Target::Next, arg_low(*arg)),
            (JSET_K, Target::Trace, Target::Allow, WRITE_FLAGS),
        ]);
    }
    let trace = body.len();
    body.push((RET_K, Target::Next, Target::Next, RET_TRACE));
    let allow = body.len();
    body.push((RET_K, Target::Next, Target::Next, RET_ALLOW));
    let position = |t: Target, at: usize| -> u8 {
        let to = match t {
            Target::Next => at + 1,
            Target::Trace => trace,
            Target::Allow => allow,
            Target::FlagsIn(arg) => flag_blocks
                .iter()
                .find(|(a, _)| *a == arg)
                .map_or(allow, |(_, start)| *start),
        };
        // Forward only, and the program is a few dozen instructions.
        u8::try_from(to - at - 1).unwrap_or(u8::MAX)
    };
    body.iter()
        .enumerate()
        .map(|(at, &(code, jt, jf, k))| {
            SockFilter::new(code, position(jt, at), position(jf, at), k)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic BPF interpreter for the opcodes the program uses.
    fn run(program: &[SockFilter], arch: u32, nr: u64, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&u32::try_from(nr).expect("small").to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let (code, jt, jf, k) = program[pc].parts();
            let jump = |taken: bool| 1 + usize::from(if taken { jt } else { jf });
            match code {
                LD_W_ABS => {
                    let at = k as usize;
                    acc = u32::from_ne_bytes(data[at..at + 4].try_into().expect("4 bytes"));
                    pc += 1;
                }
                JEQ_K => pc += jump(acc == k),
                JGE_K => pc += jump(acc >= k),
                JSET_K => pc += jump(acc & k != 0),
                RET_K => return k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    #[test]
    fn only_write_shaped_calls_stop_for_the_tracer() {
        let (arch, _) = native().expect("a supported architecture");
        let p = TraceFilter::new()
            .expect("a supported architecture")
            .program;
        let openat = libc::SYS_openat as u64;
        let read_only = [
            0,
            0,
            libc::O_RDONLY as u64 | libc::O_CLOEXEC as u64,
            0,
            0,
            0,
        ];
        assert_eq!(run(&p, arch, openat, read_only), RET_ALLOW);
        for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_CREAT, libc::O_TRUNC] {
            let args = [0, 0, flags as u64, 0, 0, 0];
            assert_eq!(run(&p, arch, openat, args), RET_TRACE, "{flags:#o}");
        }
        // Every other call stops whatever its arguments: named here, not
        // read from the table's flags, so a call given an open's flags by
        // mistake (and so let through without a write flag) fails.
        let by_flags = ["open", "openat"];
        for c in CALLS.iter().filter(|c| !by_flags.contains(&c.name)) {
            assert_eq!(run(&p, arch, c.nr, [0; 6]), RET_TRACE, "{}", c.name);
        }
        // Reading, writing to a descriptor, and another convention pass.
        for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_close] {
            assert_eq!(run(&p, arch, nr as u64, [0; 6]), RET_ALLOW);
        }
        assert_eq!(run(&p, 0x4000_0003, openat, [0, 0, 1, 0, 0, 0]), RET_ALLOW);
        #[cfg(target_arch = "x86_64")]
        {
            let open = libc::SYS_open as u64;
            assert_eq!(
                run(&p, arch, open, [0, libc::O_RDONLY as u64, 0, 0, 0, 0]),
                RET_ALLOW
            );
            assert_eq!(
                run(&p, arch, open, [0, libc::O_WRONLY as u64, 0, 0, 0, 0]),
                RET_TRACE
            );
            // x32 numbers (bit 30) are not decoded.
            assert_eq!(run(&p, arch, 0x4000_0000 | 83, [0; 6]), RET_ALLOW);
        }
    }

    #[test]
    fn every_jump_lands_inside_the_program() {
        let p = TraceFilter::new()
            .expect("a supported architecture")
            .program;
        crate::bpf::assert_jumps_inside(&p);
    }
}

/// The calls by name, for the judging tests of the parent module.
#[cfg(test)]
pub(crate) mod tests_support {
    pub(crate) fn call(name: &str) -> &'static super::Call {
        super::CALLS
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no call {name}"))
    }
}
