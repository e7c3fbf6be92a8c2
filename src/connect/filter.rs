//! The seccomp program that hands `connect`, `bind`, `sendto` with an
//! address, and every `sendmsg` and `sendmmsg` to the supervisor
//! (`SECCOMP_RET_USER_NOTIF`), and closes the ways around it that registers
//! alone can show.
//!
//! Built once in the parent, in safe code; the child only installs it.
//! Like the terminal filter it decodes every system-call convention a
//! process of this architecture can use, and kills a call from any other.

use std::sync::Arc;

use crate::terminal::{
    ARCH, AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, AUDIT_ARCH_I386, AUDIT_ARCH_RISCV64,
    AUDIT_ARCH_X86_64, JEQ_K, LD_W_ABS, NR, RET_ALLOW, RET_ERRNO, RET_K, RET_KILL_PROCESS,
    SockFilter, X32,
};

/// The variable that, in test builds, installs listeners without
/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`.
const WITHOUT_KILLABLE_RECV_VAR: &str = "STRUMENT_SANDBOX_TEST_WITHOUT_KILLABLE_RECV";

/// What the program does with one system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Sent to the supervisor: `connect`, `bind`.
    Notify,
    /// `sendto`: sent to the supervisor when its address (argument 4) is
    /// not NULL; otherwise it passes, unless its flags (argument 3) ask for
    /// `MSG_FASTOPEN`, a TCP connect the supervisor does not perform
    /// (`EOPNOTSUPP`: callers fall back to `connect`).
    SendTo,
    /// `sendmsg` (flags in argument 2), `sendmmsg` (argument 3): sent to the
    /// supervisor, which performs every one of them (whether `msg_name` is
    /// set is in memory a second thread can change); `MSG_FASTOPEN` fails
    /// with `EOPNOTSUPP` here first.
    SendMsg(u32),
    /// `io_uring_setup`: `IORING_OP_CONNECT` never passes seccomp.
    Refuse,
    /// i386's `socketcall`: its arguments are in memory, so the call it
    /// multiplexes cannot be told from a register. Modern C libraries call
    /// the socket syscalls directly.
    NoSuchCall,
}

/// What the supervisor performs for a notified call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// `connect(fd, addr, len)`.
    Connect,
    /// `bind(fd, addr, len)`.
    Bind,
    /// `sendto(fd, buf, len, flags, addr, addrlen)`.
    SendTo,
    /// `sendmsg(fd, msg, flags)`.
    SendMsg,
    /// `sendmmsg(fd, msgvec, vlen, flags)`.
    SendMmsg,
}

/// The numbers of the calls that matter, per convention: connect, bind,
/// sendto, sendmsg, sendmmsg, io_uring_setup, and socketcall where it exists.
struct Numbers {
    arch: u32,
    connect: u32,
    bind: u32,
    sendto: u32,
    sendmsg: u32,
    sendmmsg: u32,
    io_uring_setup: u32,
    socketcall: Option<u32>,
}

const fn generic(arch: u32) -> Numbers {
    // asm-generic/unistd.h: aarch64, riscv64.
    Numbers {
        arch,
        connect: 203,
        bind: 200,
        sendto: 206,
        sendmsg: 211,
        sendmmsg: 269,
        io_uring_setup: 425,
        socketcall: None,
    }
}

fn conventions() -> Option<Vec<Numbers>> {
    if cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
        Some(vec![
            Numbers {
                arch: AUDIT_ARCH_X86_64,
                connect: 42,
                bind: 49,
                sendto: 44,
                sendmsg: 46,
                sendmmsg: 307,
                io_uring_setup: 425,
                socketcall: None,
            },
            // x32: common numbers with the x32 bit; sendmsg and sendmmsg
            // have compat numbers of their own.
            Numbers {
                arch: AUDIT_ARCH_X86_64,
                connect: X32 | 42,
                bind: X32 | 49,
                sendto: X32 | 44,
                sendmsg: X32 | 518,
                sendmmsg: X32 | 538,
                io_uring_setup: X32 | 425,
                socketcall: None,
            },
            Numbers {
                arch: AUDIT_ARCH_I386,
                connect: 362,
                bind: 361,
                sendto: 369,
                sendmsg: 370,
                sendmmsg: 345,
                io_uring_setup: 425,
                socketcall: Some(102),
            },
        ])
    } else if cfg!(any(target_arch = "aarch64", target_arch = "arm")) {
        Some(vec![
            generic(AUDIT_ARCH_AARCH64),
            Numbers {
                arch: AUDIT_ARCH_ARM,
                connect: 283,
                bind: 282,
                sendto: 290,
                sendmsg: 296,
                sendmmsg: 374,
                io_uring_setup: 425,
                socketcall: None,
            },
        ])
    } else if cfg!(target_arch = "riscv64") {
        Some(vec![generic(AUDIT_ARCH_RISCV64)])
    } else {
        None
    }
}

/// The notified call behind `(arch, nr)` of a notification.
pub(crate) fn call(arch: u32, nr: i32) -> Option<Call> {
    let nr = nr as u32;
    conventions()?
        .iter()
        .filter(|n| n.arch == arch)
        .find_map(|n| {
            if nr == n.connect {
                Some(Call::Connect)
            } else if nr == n.bind {
                Some(Call::Bind)
            } else if nr == n.sendto {
                Some(Call::SendTo)
            } else if nr == n.sendmsg {
                Some(Call::SendMsg)
            } else if nr == n.sendmmsg {
                Some(Call::SendMmsg)
            } else {
                None
            }
        })
}

/// Whether the calling convention of `(arch, nr)` lays out `msghdr`,
/// `iovec` and `cmsghdr` with 32-bit pointers and lengths (the kernel's
/// compat structures): i386, arm, and x32, whose `sendmsg` and `sendmmsg`
/// are the compat entry points.
pub(crate) fn compat(arch: u32, nr: i32) -> bool {
    match arch {
        AUDIT_ARCH_I386 | AUDIT_ARCH_ARM => true,
        AUDIT_ARCH_X86_64 => nr as u32 & X32 != 0,
        _ => false,
    }
}

fn actions(n: &Numbers) -> Vec<(u32, Action)> {
    let mut out = vec![
        (n.connect, Action::Notify),
        (n.bind, Action::Notify),
        (n.sendto, Action::SendTo),
        (n.sendmsg, Action::SendMsg(2)),
        (n.sendmmsg, Action::SendMsg(3)),
        (n.io_uring_setup, Action::Refuse),
    ];
    if let Some(socketcall) = n.socketcall {
        out.push((socketcall, Action::NoSuchCall));
    }
    out
}

/// The program, ready to install.
#[derive(Debug, Clone)]
pub(crate) struct NotifyFilter {
    program: Arc<[SockFilter]>,
}

impl NotifyFilter {
    /// Builds the program for this architecture, or `None` on one whose
    /// system-call numbers this crate does not know.
    pub(crate) fn new() -> Option<NotifyFilter> {
        // Test builds only: the filter as a kernel before 5.19 installs it
        // (no WAIT_KILLABLE_RECV), so that the restart of a call the
        // supervisor performs can be tested on this one.
        if cfg!(debug_assertions) && std::env::var_os(WITHOUT_KILLABLE_RECV_VAR).is_some() {
            crate::sys::install_without_killable_recv();
        }
        Some(NotifyFilter {
            program: program(&conventions()?).into(),
        })
    }

    /// The instructions.
    pub(crate) fn instructions(&self) -> &[SockFilter] {
        &self.program
    }
}

// The terminal filter's opcodes and answers, and these besides: <linux/bpf_common.h>,
// <linux/seccomp.h>.
const JSET_K: u16 = 0x45;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// `MSG_FASTOPEN` of `<linux/socket.h>`.
const MSG_FASTOPEN: u32 = 0x2000_0000;

/// The offset of the low (or high) 32 bits of argument `i` in `struct seccomp_data`.
const fn arg(i: u32, high: bool) -> u32 {
    let low_first = cfg!(target_endian = "little");
    16 + 8 * i + if high == low_first { 4 } else { 0 }
}

/// Where a jump goes: the next instruction or a label.
#[derive(Clone, Copy)]
enum To {
    Next,
    /// Over this many instructions.
    Skip(usize),
    Label(Label),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    Notify,
    Refuse,
    NoSuchCall,
    NotSupported,
    SendTo,
    FastOpen3,
    SendMsg2,
    SendMsg3,
}

enum Insn {
    Op(u16, u32),
    Jump(u16, u32, To, To),
    At(Label),
}

/// Lays the program out:
///
/// ```text
///     ld arch
///     for each convention:  jeq ARCH ? next : skip;  ld nr;  jeq NR_n ? label_n : next…;  ret ALLOW
///     ret KILL_PROCESS
/// send_to:   ld args[4].lo; jeq 0 ? next : notify; ld args[4].hi; jeq 0 ? fast_open_3 : notify
/// fast_open_3: ld args[3].lo; jset FASTOPEN ? not_supported : next; ret ALLOW
/// send_msg_2: ld args[2].lo; jset FASTOPEN ? not_supported : notify
/// send_msg_3: ld args[3].lo; jset FASTOPEN ? not_supported : notify
/// notify: ret USER_NOTIF;  refuse: ret ERRNO(EPERM);  no_such_call: ret ERRNO(ENOSYS);
/// not_supported: ret ERRNO(EOPNOTSUPP)
/// ```
fn program(conventions: &[Numbers]) -> Vec<SockFilter> {
    let mut asm = vec![Insn::Op(LD_W_ABS, ARCH)];
    // Conventions that share an AUDIT_ARCH (x86-64 and x32) share a block.
    let mut arches: Vec<u32> = conventions.iter().map(|n| n.arch).collect();
    arches.dedup();
    for arch in arches {
        let actions: Vec<(u32, Action)> = conventions
            .iter()
            .filter(|n| n.arch == arch)
            .flat_map(actions)
            .collect();
        // The block after the arch test: ld nr, one test a call, ret ALLOW.
        let skip = 1 + actions.len() + 1;
        asm.push(Insn::Jump(JEQ_K, arch, To::Next, To::Skip(skip)));
        asm.push(Insn::Op(LD_W_ABS, NR));
        for (nr, action) in actions {
            let label = match action {
                Action::Notify => Label::Notify,
                Action::SendTo => Label::SendTo,
                Action::SendMsg(2) => Label::SendMsg2,
                Action::SendMsg(_) => Label::SendMsg3,
                Action::Refuse => Label::Refuse,
                Action::NoSuchCall => Label::NoSuchCall,
            };
            asm.push(Insn::Jump(JEQ_K, nr, To::Label(label), To::Next));
        }
        asm.push(Insn::Op(RET_K, RET_ALLOW));
    }
    asm.push(Insn::Op(RET_K, RET_KILL_PROCESS));
    asm.extend([
        Insn::At(Label::SendTo),
        Insn::Op(LD_W_ABS, arg(4, false)),
        Insn::Jump(JEQ_K, 0, To::Next, To::Label(Label::Notify)),
        Insn::Op(LD_W_ABS, arg(4, true)),
        Insn::Jump(
            JEQ_K,
            0,
            To::Label(Label::FastOpen3),
            To::Label(Label::Notify),
        ),
    ]);
    asm.extend(fast_open(Label::FastOpen3, 3, To::Next));
    asm.push(Insn::Op(RET_K, RET_ALLOW));
    asm.extend(fast_open(Label::SendMsg2, 2, To::Label(Label::Notify)));
    asm.extend(fast_open(Label::SendMsg3, 3, To::Label(Label::Notify)));
    asm.extend([
        Insn::At(Label::Notify),
        Insn::Op(RET_K, RET_USER_NOTIF),
        Insn::At(Label::Refuse),
        Insn::Op(RET_K, RET_ERRNO | libc::EPERM as u32),
        Insn::At(Label::NoSuchCall),
        Insn::Op(RET_K, RET_ERRNO | libc::ENOSYS as u32),
        Insn::At(Label::NotSupported),
        Insn::Op(RET_K, RET_ERRNO | libc::EOPNOTSUPP as u32),
    ]);
    assemble(&asm)
}

/// The block at `label` that tests the flags in argument `flags` for
/// `MSG_FASTOPEN`: set, `EOPNOTSUPP`; clear, on to `clear`.
fn fast_open(label: Label, flags: u32, clear: To) -> [Insn; 3] {
    [
        Insn::At(label),
        Insn::Op(LD_W_ABS, arg(flags, false)),
        Insn::Jump(JSET_K, MSG_FASTOPEN, To::Label(Label::NotSupported), clear),
    ]
}

/// Resolves labels: each jump becomes a forward distance. The program is
/// well under the 255 instructions a classic BPF jump can span.
fn assemble(asm: &[Insn]) -> Vec<SockFilter> {
    let mut at = Vec::new();
    let mut pos = 0usize;
    for insn in asm {
        match insn {
            Insn::At(label) => at.push((*label, pos)),
            _ => pos += 1,
        }
    }
    let find = |label: Label| at.iter().find(|(l, _)| *l == label).map(|(_, p)| *p);
    let mut out = Vec::with_capacity(pos);
    for insn in asm {
        let here = out.len();
        let distance = |to: To| -> u8 {
            let target = match to {
                To::Next => here + 1,
                To::Skip(n) => here + 1 + n,
                To::Label(l) => find(l).unwrap_or(here + 1),
            };
            u8::try_from(target - here - 1).unwrap_or(u8::MAX)
        };
        match insn {
            Insn::Op(code, k) => out.push(SockFilter::new(*code, 0, 0, *k)),
            Insn::Jump(code, k, jt, jf) => {
                out.push(SockFilter::new(*code, distance(*jt), distance(*jf), *k));
            }
            Insn::At(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic BPF interpreter for the opcodes the program uses.
    fn run(program: &[SockFilter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = program[pc];
            let (code, jt, jf, k) = i.parts();
            match code {
                LD_W_ABS => {
                    let at = k as usize;
                    acc = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
                    pc += 1;
                }
                JEQ_K => pc += 1 + usize::from(if acc == k { jt } else { jf }),
                JSET_K => pc += 1 + usize::from(if acc & k != 0 { jt } else { jf }),
                RET_K => return k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    #[test]
    fn connect_bind_addressed_sendto_and_every_sendmsg_reach_the_supervisor_in_every_convention() {
        let table = conventions().expect("a supported architecture");
        let p = program(&table);
        for n in &table {
            let a = n.arch;
            assert_eq!(
                run(&p, n.connect, a, [3, 0x1000, 16, 0, 0, 0]),
                RET_USER_NOTIF
            );
            assert_eq!(run(&p, n.bind, a, [3, 0x1000, 16, 0, 0, 0]), RET_USER_NOTIF);
            assert_eq!(call(a, n.connect as i32), Some(Call::Connect));
            assert_eq!(call(a, n.sendto as i32), Some(Call::SendTo));
            // sendto with an address, even one only in the high half.
            assert_eq!(
                run(&p, n.sendto, a, [3, 1, 1, 0, 0x1000, 16]),
                RET_USER_NOTIF
            );
            assert_eq!(
                run(&p, n.sendto, a, [3, 1, 1, 0, 1 << 40, 16]),
                RET_USER_NOTIF
            );
            // Without one it passes, unless it asks for TCP fast open.
            assert_eq!(run(&p, n.sendto, a, [3, 1, 1, 0, 0, 0]), RET_ALLOW);
            let fo = u64::from(MSG_FASTOPEN);
            let not_supported = RET_ERRNO | libc::EOPNOTSUPP as u32;
            assert_eq!(run(&p, n.sendto, a, [3, 1, 1, fo, 0, 0]), not_supported);
            // Every sendmsg and sendmmsg is the supervisor's, but fast open.
            assert_eq!(run(&p, n.sendmsg, a, [3, 1, 0, 0, 0, 0]), RET_USER_NOTIF);
            assert_eq!(run(&p, n.sendmsg, a, [3, 1, fo, 0, 0, 0]), not_supported);
            assert_eq!(run(&p, n.sendmmsg, a, [3, 1, 1, fo, 0, 0]), not_supported);
            assert_eq!(run(&p, n.sendmmsg, a, [3, 1, 1, 0, 0, 0]), RET_USER_NOTIF);
            assert_eq!(call(a, n.sendmsg as i32), Some(Call::SendMsg));
            assert_eq!(call(a, n.sendmmsg as i32), Some(Call::SendMmsg));
            assert_eq!(
                compat(a, n.sendmsg as i32),
                a == AUDIT_ARCH_I386 || a == AUDIT_ARCH_ARM || n.sendmsg & X32 != 0
            );
            assert_eq!(
                run(&p, n.io_uring_setup, a, [0; 6]),
                RET_ERRNO | libc::EPERM as u32
            );
            if let Some(sc) = n.socketcall {
                assert_eq!(
                    run(&p, sc, a, [3, 0, 0, 0, 0, 0]),
                    RET_ERRNO | libc::ENOSYS as u32
                );
            }
            // Anything else passes: read, write, socket.
            for other in [0u32, 1, 41, 63, 64] {
                if actions(n).iter().all(|(nr, _)| *nr != other) {
                    assert_eq!(run(&p, other, a, [0; 6]), RET_ALLOW, "{a:#x} {other}");
                }
            }
        }
        assert_eq!(run(&p, 42, 0x1234, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn every_jump_lands_inside_the_program() {
        let f = NotifyFilter::new().expect("a supported architecture");
        let p = f.instructions();
        for (at, i) in p.iter().enumerate() {
            let (code, jt, jf, _) = i.parts();
            if code == JEQ_K || code == JSET_K {
                assert!(at + 1 + usize::from(jt.max(jf)) < p.len());
            }
        }
    }
}
