//! The seccomp filter against terminal injection: `ioctl(TIOCSTI)` pushes
//! bytes into a terminal's input queue and `ioctl(TIOCLINUX)` pastes the
//! console selection, so a confined command could type `rm -rf ~⏎` into the
//! unconfined shell that started it. Landlock cannot stop it (`IOCTL_DEV`
//! is checked at `open`, and fd 0 is inherited), so a classic BPF program
//! refuses those two requests with `EPERM` and allows everything else.
//!
//! The program is built here, in safe code, once per policy; `sys` installs
//! it. It decodes every system-call convention a process of this
//! architecture can use: on x86-64 that is the 64-bit ABI, the i386 one
//! (`int 0x80`, a different `ioctl` number) and x32 (numbers with bit 30
//! set). A call from any other convention cannot be decoded, so it kills
//! the process rather than being allowed unchecked.

use std::sync::Arc;

use crate::bpf::{Asm, Calls, Label, To};

/// One classic BPF instruction, `struct sock_filter` of `<linux/filter.h>`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

impl SockFilter {
    /// An instruction; for programs built elsewhere in the crate (the
    /// connect supervisor's filter).
    pub(crate) const fn new(code: u16, jt: u8, jf: u8, k: u32) -> SockFilter {
        SockFilter { code, jt, jf, k }
    }

    /// The same instruction with `k` for its constant.
    pub(crate) const fn with_k(self, k: u32) -> SockFilter {
        SockFilter { k, ..self }
    }

    /// Opcode, jumps and constant, for tests that interpret a program.
    #[cfg(test)]
    pub(crate) fn parts(&self) -> (u16, u8, u8, u32) {
        (self.code, self.jt, self.jf, self.k)
    }
}

// Opcodes of <linux/bpf_common.h>.
pub(crate) const LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS (0x20)
pub(crate) const JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
pub(crate) const RET_K: u16 = 0x06; // BPF_RET | BPF_K
pub(crate) const JA: u16 = 0x05; // BPF_JMP | BPF_JA

// <linux/seccomp.h>
pub(crate) const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub(crate) const RET_ERRNO: u32 = 0x0005_0000;
pub(crate) const RET_ALLOW: u32 = 0x7fff_0000;

// Offsets into `struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }`.
pub(crate) const NR: u32 = 0;
pub(crate) const ARCH: u32 = 4;
/// The low 32 bits of `args[1]`, the ioctl request: the kernel's `ioctl`
/// takes an `unsigned int`, so the high half is ignored by it and by us.
const ARG1_LOW: u32 = if cfg!(target_endian = "little") {
    24
} else {
    28
};

// The requests refused; the same numbers on every architecture listed below.
pub(crate) const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;

// <linux/audit.h>
pub(crate) const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
pub(crate) const AUDIT_ARCH_I386: u32 = 0x4000_0003;
pub(crate) const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
pub(crate) const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
pub(crate) const AUDIT_ARCH_RISCV64: u32 = 0xC000_00F3;

/// `__X32_SYSCALL_BIT`: x32 calls arrive with `AUDIT_ARCH_X86_64` and this bit.
pub(crate) const X32: u32 = 0x4000_0000;

/// For each system-call convention a process of this build can use: its
/// `AUDIT_ARCH_*` and the numbers `ioctl` has there. x32 has its own
/// `ioctl` (514) and the 64-bit number with the x32 bit is refused by the
/// kernel, but checking it too costs one instruction.
fn conventions() -> Option<&'static [(u32, &'static [u32])]> {
    if cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
        Some(&[
            (AUDIT_ARCH_X86_64, &[16, X32 | 16, X32 | 514]),
            (AUDIT_ARCH_I386, &[54]),
        ])
    } else if cfg!(any(target_arch = "aarch64", target_arch = "arm")) {
        Some(&[(AUDIT_ARCH_AARCH64, &[29]), (AUDIT_ARCH_ARM, &[54])])
    } else if cfg!(target_arch = "riscv64") {
        Some(&[(AUDIT_ARCH_RISCV64, &[29])])
    } else {
        None
    }
}

/// The filter program, ready to install.
#[derive(Debug, Clone)]
pub(crate) struct TerminalFilter {
    program: Arc<[SockFilter]>,
}

impl TerminalFilter {
    /// Builds the program for this architecture, or `None` on one whose
    /// system-call numbers this crate does not know.
    pub(crate) fn new() -> Option<TerminalFilter> {
        Some(TerminalFilter {
            program: program(conventions()?)?.into(),
        })
    }

    /// The instructions, for `sys::install_seccomp_filter`.
    pub(crate) fn instructions(&self) -> &[SockFilter] {
        &self.program
    }
}

/// The calls this filter checks, as [`Asm::dispatch`] takes them: per
/// architecture, each `ioctl` number going to `ioctl`; `None` on an
/// architecture whose numbers this crate does not know. The connect
/// supervisor's program dispatches these with its own calls, so that a
/// call is dispatched once.
pub(crate) fn ioctl_calls(ioctl: Label) -> Option<Calls> {
    Some(
        conventions()?
            .iter()
            .map(|(arch, numbers)| (*arch, numbers.iter().map(|n| (*n, ioctl)).collect()))
            .collect(),
    )
}

/// The check at `ioctl`, for an `ioctl` call: its request `TIOCSTI` or
/// `TIOCLINUX` goes to `refuse`, any other to `allow`.
pub(crate) fn check_ioctl(asm: &mut Asm, ioctl: Label, allow: Label, refuse: Label) {
    asm.at(ioctl);
    asm.op(LD_W_ABS, ARG1_LOW);
    asm.jump(JEQ_K, TIOCSTI, To::Label(refuse), To::Next);
    asm.jump(JEQ_K, TIOCLINUX, To::Label(refuse), To::Label(allow));
}

/// Lays the program out:
///
/// ```text
///     <dispatch: each ioctl number to check, any other call to allow>
/// check:  ld args[1];  jeq TIOCSTI ? deny : next;  jeq TIOCLINUX ? deny : allow
/// allow:  ret ALLOW
/// deny:   ret ERRNO(EPERM)
/// ```
fn program(conventions: &[(u32, &[u32])]) -> Option<Vec<SockFilter>> {
    let mut asm = Asm::default();
    let (check, allow, deny) = (asm.label(), asm.label(), asm.label());
    let table: Calls = conventions
        .iter()
        .map(|(arch, numbers)| (*arch, numbers.iter().map(|n| (*n, check)).collect()))
        .collect();
    asm.dispatch(&table, allow);
    check_ioctl(&mut asm, check, allow, deny);
    asm.at(allow);
    asm.ret(RET_ALLOW);
    asm.at(deny);
    asm.ret(RET_ERRNO | libc::EPERM as u32);
    asm.finish()
}

/// The programs as they were laid out before the search tree (a `jeq` per
/// call, in a chain), kept as the reference the tree must answer like for
/// every number.
#[cfg(test)]
pub(crate) mod linear {
    use super::*;

    fn stmt(code: u16, k: u32) -> SockFilter {
        SockFilter::new(code, 0, 0, k)
    }

    fn jeq(k: u32, jt: u8, jf: u8) -> SockFilter {
        SockFilter::new(JEQ_K, jt, jf, k)
    }

    /// ```text
    ///     ld arch
    ///     for each convention:  jeq ARCH ? next : skip;  ld nr;  jeq IOCTL_n ? check : next…;  ret ALLOW
    ///     ret KILL_PROCESS                         (an architecture not listed)
    /// check:
    ///     ld args[1];  jeq TIOCSTI ? deny : next;  jeq TIOCLINUX ? deny : next;  ret ALLOW
    /// deny:
    ///     ret ERRNO(EPERM)
    /// ```
    pub(crate) fn terminal() -> Vec<SockFilter> {
        let conventions = conventions().expect("a supported architecture");
        let jump = |d: usize| u8::try_from(d).unwrap();
        let mut out = vec![stmt(LD_W_ABS, ARCH)];
        let mut to_check: Vec<usize> = Vec::new();
        for (arch, numbers) in conventions {
            let block = 1 + numbers.len() + 1;
            out.push(jeq(*arch, 0, jump(block)));
            out.push(stmt(LD_W_ABS, NR));
            for n in *numbers {
                to_check.push(out.len());
                out.push(jeq(*n, 0, 0));
            }
            out.push(stmt(RET_K, RET_ALLOW));
        }
        out.push(stmt(RET_K, RET_KILL_PROCESS));
        let check = out.len();
        for at in to_check {
            out[at].jt = jump(check - at - 1);
        }
        out.push(stmt(LD_W_ABS, ARG1_LOW));
        out.push(jeq(TIOCSTI, 2, 0));
        out.push(jeq(TIOCLINUX, 1, 0));
        out.push(stmt(RET_K, RET_ALLOW));
        out.push(stmt(RET_K, RET_ERRNO | libc::EPERM as u32));
        out
    }

    /// `first` with `then` run wherever it would allow, as the two were
    /// installed as one program: each `ret ALLOW` became a jump to `then`.
    pub(crate) fn followed_by(first: &[SockFilter], then: &[SockFilter]) -> Vec<SockFilter> {
        let len = first.len();
        let mut out: Vec<SockFilter> = first
            .iter()
            .enumerate()
            .map(|(at, ins)| {
                if ins.code == RET_K && ins.k == RET_ALLOW {
                    stmt(JA, u32::try_from(len - at - 1).unwrap())
                } else {
                    *ins
                }
            })
            .collect();
        out.extend_from_slice(then);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf;

    const DENY: u32 = RET_ERRNO | libc::EPERM as u32;

    fn run(program: &[SockFilter], nr: u32, arch: u32, arg1: u64) -> u32 {
        bpf::run(program, nr, arch, [0, arg1, 0, 0, 0, 0]).0
    }

    fn program() -> Vec<SockFilter> {
        let p = TerminalFilter::new().expect("a supported architecture");
        p.instructions().to_vec()
    }

    #[test]
    fn tiocsti_and_tioclinux_are_refused_in_every_convention() {
        let table = conventions().expect("a supported architecture");
        let p = program();
        for (arch, numbers) in table {
            for n in *numbers {
                assert_eq!(run(&p, *n, *arch, TIOCSTI.into()), DENY, "{arch:#x} {n}");
                assert_eq!(run(&p, *n, *arch, TIOCLINUX.into()), DENY);
                // The kernel truncates the request to 32 bits: so do we.
                assert_eq!(run(&p, *n, *arch, 0xffff_0000_0000_5412), DENY);
                // Other terminal ioctls (TCGETS, TIOCGWINSZ, TIOCSPGRP) pass.
                for ok in [0x5401u64, 0x5413, 0x5410] {
                    assert_eq!(run(&p, *n, *arch, ok), RET_ALLOW);
                }
            }
            // Another system call with TIOCSTI's value as its argument passes.
            assert_eq!(run(&p, 1, *arch, TIOCSTI.into()), RET_ALLOW);
        }
        assert_eq!(run(&p, 16, 0x1234, 0), RET_KILL_PROCESS);
    }

    #[test]
    fn every_number_of_every_convention_gets_the_linear_programs_answer() {
        let (p, reference) = (program(), linear::terminal());
        let mut arches: Vec<u32> = conventions()
            .expect("a supported architecture")
            .iter()
            .map(|(arch, _)| *arch)
            .collect();
        arches.push(0x1234);
        let requests = [
            u64::from(TIOCSTI),
            u64::from(TIOCLINUX),
            0xffff_0000_0000_5412,
            0x5401,
            0,
        ];
        let mut refused = 0;
        for arch in arches {
            for nr in (0..1024).chain(X32..X32 + 1024) {
                for arg in requests {
                    let answer = run(&p, nr, arch, arg);
                    assert_eq!(
                        answer,
                        run(&reference, nr, arch, arg),
                        "{arch:#x} {nr} {arg:#x}"
                    );
                    refused += usize::from(answer == DENY);
                }
            }
        }
        // Granted beside refused: both answers were met.
        assert!(refused > 0);
        assert_eq!(run(&p, 1, conventions().unwrap()[0].0, 0), RET_ALLOW);
    }

    #[test]
    fn every_jump_lands_inside_the_program() {
        let p = program();
        crate::bpf::assert_jumps_inside(&p);
        assert_eq!(p.last().map(|i| i.k), Some(DENY));
    }
}
