//! The seccomp program that hands `connect`, `bind`, `sendto` with an
//! address, every `sendmsg` and `sendmmsg`, and `accept` and `accept4` to
//! the supervisor (`SECCOMP_RET_USER_NOTIF`), and closes the ways around
//! it that registers alone can show.
//!
//! Built once in the parent, in safe code; the child only installs it.
//! Like the terminal filter it decodes every system-call convention a
//! process of this architecture can use, and kills a call from any other;
//! it makes the terminal filter's checks too, so that a child installs
//! one program and each call is dispatched once.

use std::sync::Arc;

use crate::bpf::{Asm, Label, To};
use crate::sys::{KEY_WORDS, Key, Program};
use crate::terminal::{
    self, AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, AUDIT_ARCH_I386, AUDIT_ARCH_RISCV64,
    AUDIT_ARCH_X86_64, JEQ_K, LD_W_ABS, RET_ALLOW, RET_ERRNO, SockFilter, X32,
};

/// The variable that, in test builds, installs listeners without
/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`.
const WITHOUT_KILLABLE_RECV_VAR: &str = "STRUMENT_SANDBOX_TEST_WITHOUT_KILLABLE_RECV";

/// The variable that, in test builds, hands a descriptor over as a kernel
/// before 5.14 must: without `SECCOMP_ADDFD_FLAG_SEND`.
const WITHOUT_ADDFD_SEND_VAR: &str = "STRUMENT_SANDBOX_TEST_WITHOUT_ADDFD_SEND";

/// What the program does with one system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Sent to the supervisor: `connect`, `bind`, `accept`, `accept4`.
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
    /// `prctl`: `PR_SET_DUMPABLE` with 0 succeeds without being performed,
    /// so that the supervisor can still take the process's sockets and read
    /// its memory (a non-dumpable process's are closed to it without
    /// `CAP_SYS_PTRACE`, and every call it performs for one would fail:
    /// ssh-agent started inside could serve nobody); any other passes.
    Prctl,
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
    /// `accept(fd, addr, addrlen)`.
    Accept,
    /// `accept4(fd, addr, addrlen, flags)`.
    Accept4,
}

/// The numbers of the calls that matter, per convention: connect, bind,
/// sendto, sendmsg, sendmmsg, accept where it exists, accept4,
/// io_uring_setup, and socketcall where it exists.
struct Numbers {
    arch: u32,
    connect: u32,
    bind: u32,
    sendto: u32,
    sendmsg: u32,
    sendmmsg: u32,
    accept: Option<u32>,
    accept4: u32,
    io_uring_setup: u32,
    socketcall: Option<u32>,
    prctl: u32,
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
        accept: Some(202),
        accept4: 242,
        io_uring_setup: 425,
        socketcall: None,
        prctl: 167,
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
                accept: Some(43),
                accept4: 288,
                io_uring_setup: 425,
                socketcall: None,
                prctl: 157,
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
                accept: Some(X32 | 43),
                accept4: X32 | 288,
                io_uring_setup: X32 | 425,
                socketcall: None,
                prctl: X32 | 157,
            },
            Numbers {
                arch: AUDIT_ARCH_I386,
                connect: 362,
                bind: 361,
                sendto: 369,
                sendmsg: 370,
                sendmmsg: 345,
                // i386 has accept only through socketcall.
                accept: None,
                accept4: 364,
                io_uring_setup: 425,
                socketcall: Some(102),
                prctl: 172,
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
                accept: Some(285),
                accept4: 366,
                io_uring_setup: 425,
                socketcall: None,
                prctl: 172,
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
            } else if Some(nr) == n.accept {
                Some(Call::Accept)
            } else if nr == n.accept4 {
                Some(Call::Accept4)
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
        (n.accept4, Action::Notify),
        (n.io_uring_setup, Action::Refuse),
        (n.prctl, Action::Prctl),
    ];
    if let Some(accept) = n.accept {
        out.push((accept, Action::Notify));
    }
    if let Some(socketcall) = n.socketcall {
        out.push((socketcall, Action::NoSuchCall));
    }
    out
}

/// The program, ready to install.
///
/// A keyed program ([`NotifyFilter::new`]) lets one `sendmsg` pass
/// unnotified: the one whose fifth and sixth arguments, which `sendmsg`
/// does not use, carry the hand-over key. A child installing the program
/// writes a key of its own, drawn then, into it (`sys::install_listener`)
/// and passes its listener to the supervisor over `SCM_RIGHTS` with that
/// `sendmsg`, then `exec`s, which leaves no trace of the key in the
/// process: no command ever holds the key of the filter it runs under. The
/// words the program is built with are drawn here, in case an install
/// ever skipped the child's own. A process that goes on running after
/// installing its filter (`Policy::apply`) would hold its key, and
/// installs the program without one ([`NotifyFilter::without_key`]).
#[derive(Debug, Clone)]
pub(crate) struct NotifyFilter {
    program: Arc<[SockFilter]>,
    key_at: Option<[usize; KEY_WORDS]>,
}

impl NotifyFilter {
    /// Builds the keyed program for this architecture, or `None` on one
    /// whose system-call numbers this crate does not know.
    pub(crate) fn new() -> Option<NotifyFilter> {
        // Test builds only: the filter as a kernel before 5.19 installs it
        // (no WAIT_KILLABLE_RECV), so that the restart of a call the
        // supervisor performs can be tested on this one.
        if cfg!(debug_assertions) && std::env::var_os(WITHOUT_KILLABLE_RECV_VAR).is_some() {
            crate::sys::install_without_killable_recv();
        }
        // And the hand-over of an accepted connection as on Linux 5.13,
        // which no guest of the VM tier runs: installed, then answered.
        if cfg!(debug_assertions) && std::env::var_os(WITHOUT_ADDFD_SEND_VAR).is_some() {
            crate::sys::add_fds_without_send();
        }
        let (program, key_at) = program(&conventions()?, Some(placeholder_key()))?;
        Some(NotifyFilter {
            program: program.into(),
            key_at,
        })
    }

    /// The program without the hand-over key's exception: every `sendmsg`
    /// is notified.
    pub(crate) fn without_key() -> Option<NotifyFilter> {
        let (program, _) = program(&conventions()?, None)?;
        Some(NotifyFilter {
            program: program.into(),
            key_at: None,
        })
    }

    /// The instructions: the terminal filter's checks and this filter's,
    /// one program.
    #[cfg(test)]
    pub(crate) fn instructions(&self) -> &[SockFilter] {
        &self.program
    }

    /// The key's words the program was built with, for a keyed one.
    #[cfg(test)]
    pub(crate) fn built_key(&self) -> Option<Key> {
        let key_at = self.key_at?;
        Some(std::array::from_fn(|i| self.program[key_at[i]].parts().3))
    }

    /// The instructions and where the key's words go, as a child installs
    /// them.
    pub(crate) fn program(&self) -> Program<'_> {
        Program {
            instructions: &self.program,
            key_at: self.key_at,
        }
    }
}

/// Words for the key the program is built with, unknown outside this
/// process: std's `RandomState`, seeded from the kernel's random source,
/// hashing nothing. Every install draws a key of its own instead.
fn placeholder_key() -> Key {
    use std::hash::BuildHasher;
    let mut key = [0; KEY_WORDS];
    for (i, word) in key.iter_mut().enumerate() {
        let hash = std::collections::hash_map::RandomState::new().hash_one(i);
        *word = (hash ^ (hash >> 32)) as u32;
    }
    key
}

// The terminal filter's opcodes and answers, and these besides: <linux/bpf_common.h>,
// <linux/seccomp.h>.
const JSET_K: u16 = 0x45;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// `MSG_FASTOPEN` of `<linux/socket.h>`.
const MSG_FASTOPEN: u32 = 0x2000_0000;

/// `PR_SET_DUMPABLE` of `<linux/prctl.h>`.
const PR_SET_DUMPABLE: u32 = 4;

/// The offset of `instruction_pointer` in `struct seccomp_data`. Loading
/// it first stops the kernel's emulation of the program at install (see
/// [`program`]).
const INSTRUCTION_POINTER: u32 = 8;

/// The argument words that carry the hand-over key, in the key's order: the
/// fifth and sixth arguments, which `sendmsg` does not use; their high
/// halves too where registers have them.
#[cfg(target_pointer_width = "64")]
const KEY_PLACES: [(u32, bool); KEY_WORDS] = [(4, false), (4, true), (5, false), (5, true)];
#[cfg(not(target_pointer_width = "64"))]
const KEY_PLACES: [(u32, bool); KEY_WORDS] = [(4, false), (5, false)];

/// The offset of the low (or high) 32 bits of argument `i` in `struct seccomp_data`.
const fn arg(i: u32, high: bool) -> u32 {
    let low_first = cfg!(target_endian = "little");
    16 + 8 * i + if high == low_first { 4 } else { 0 }
}

/// Where each call of interest goes.
struct Labels {
    notify: Label,
    refuse: Label,
    no_such_call: Label,
    send_to: Label,
    send_msg_2: Label,
    send_msg_3: Label,
    prctl: Label,
}

impl Labels {
    fn new(asm: &mut Asm) -> Labels {
        Labels {
            notify: asm.label(),
            refuse: asm.label(),
            no_such_call: asm.label(),
            send_to: asm.label(),
            send_msg_2: asm.label(),
            send_msg_3: asm.label(),
            prctl: asm.label(),
        }
    }

    fn of(&self, action: Action) -> Label {
        match action {
            Action::Notify => self.notify,
            Action::SendTo => self.send_to,
            Action::SendMsg(2) => self.send_msg_2,
            Action::SendMsg(_) => self.send_msg_3,
            Action::Refuse => self.refuse,
            Action::NoSuchCall => self.no_such_call,
            Action::Prctl => self.prctl,
        }
    }
}

/// Lays the program out, the terminal filter's checks included, so that a
/// call is dispatched once (the kernel runs one filter and takes its answer;
/// the terminal filter's calls, `ioctl`, are not among those mediated here).
/// With `key`, the `sendmsg` carrying it passes; the places of its words in
/// the program come back with it.
///
/// ```text
///     ld instruction_pointer
///     <dispatch: ioctl to ioctl, each call of interest to its label, any other to allow>
/// ioctl:     ld args[1].lo; jeq TIOCSTI ? refuse : next; jeq TIOCLINUX ? refuse : allow
/// send_to:   ld args[4].lo; jeq 0 ? next : notify; ld args[4].hi; jeq 0 ? fast_open_3 : notify
/// fast_open_3: ld args[3].lo; jset FASTOPEN ? not_supported : allow
/// send_msg_2: (keyed) ld args[4].lo; jeq KEY0 ? next : flags_2; … ld args[5].hi; jeq KEY3 ? allow : flags_2
/// flags_2:   ld args[2].lo; jset FASTOPEN ? not_supported : notify
/// send_msg_3: ld args[3].lo; jset FASTOPEN ? not_supported : notify
/// prctl:     ld args[0].lo; jeq PR_SET_DUMPABLE ? next : allow;
///            ld args[1].lo; jeq 0 ? next : allow; ld args[1].hi; jeq 0 ? keep : allow
/// keep: ret ERRNO(0);  allow: ret ALLOW;  notify: ret USER_NOTIF;  refuse: ret ERRNO(EPERM);
/// no_such_call: ret ERRNO(ENOSYS);  not_supported: ret ERRNO(EOPNOTSUPP)
/// ```
///
/// The first load is of no use to the program: it is there for the
/// kernel, which at each install runs the program once per call number of
/// each architecture to find the calls it always allows, and lets those
/// skip the filter from then on (`seccomp_cache_prepare`, Linux 5.11). It
/// can only follow loads of the number and the architecture, so it stops
/// at this one, for every number. The walk cost a child some 20 µs of its
/// start (about 920 walks of this tree, measured on the benchmark machine:
/// 55 against 30 µs for the whole `seccomp` call); without the cache the
/// program runs on every call instead, some 20 ns each (a `getppid`: 240
/// against 260 ns). A clean `cargo build` makes about 40,000 calls: under
/// a millisecond.
fn program(
    conventions: &[Numbers],
    key: Option<Key>,
) -> Option<(Vec<SockFilter>, Option<[usize; KEY_WORDS]>)> {
    let mut asm = Asm::default();
    let (ioctl, allow) = (asm.label(), asm.label());
    let labels = Labels::new(&mut asm);
    let mut table = terminal::ioctl_calls(ioctl)?;
    for n in conventions {
        let calls = actions(n)
            .into_iter()
            .map(|(nr, action)| (nr, labels.of(action)));
        match table.iter_mut().find(|(arch, _)| *arch == n.arch) {
            Some((_, known)) => known.extend(calls),
            None => table.push((n.arch, calls.collect())),
        }
    }
    asm.op(LD_W_ABS, INSTRUCTION_POINTER);
    asm.dispatch(&table, allow);
    terminal::check_ioctl(&mut asm, ioctl, allow, labels.refuse);
    let key_block = arguments_and_answers(&mut asm, &labels, allow, key);
    let (program, places) = asm.finish_placing(&[key_block])?;
    // Each word is compared by the `jeq` after its load.
    let key_at = key.map(|_| std::array::from_fn(|i| places[0] + 2 * i + 1));
    Some((program, key_at))
}

/// What follows the dispatch: the blocks that look at a call's arguments
/// (`send_to`, `send_msg_2`, `send_msg_3` and the `MSG_FASTOPEN` tests),
/// then each label's answer.
fn arguments_and_answers(asm: &mut Asm, labels: &Labels, allow: Label, key: Option<Key>) -> Label {
    let (not_supported, fast_open_3, keep) = (asm.label(), asm.label(), asm.label());
    let (key_block, flags_2) = (asm.label(), asm.label());
    asm.at(labels.send_to);
    asm.op(LD_W_ABS, arg(4, false));
    asm.jump(JEQ_K, 0, To::Next, To::Label(labels.notify));
    asm.op(LD_W_ABS, arg(4, true));
    asm.jump(JEQ_K, 0, To::Label(fast_open_3), To::Label(labels.notify));
    fast_open(asm, fast_open_3, 3, not_supported, allow);
    asm.at(labels.send_msg_2);
    asm.at(key_block);
    if let Some(key) = key {
        for (i, ((arg_i, high), word)) in KEY_PLACES.into_iter().zip(key).enumerate() {
            asm.op(LD_W_ABS, arg(arg_i, high));
            let yes = if i + 1 == KEY_WORDS {
                To::Label(allow)
            } else {
                To::Next
            };
            asm.jump(JEQ_K, word, yes, To::Label(flags_2));
        }
    }
    fast_open(asm, flags_2, 2, not_supported, labels.notify);
    fast_open(asm, labels.send_msg_3, 3, not_supported, labels.notify);
    asm.at(labels.prctl);
    asm.op(LD_W_ABS, arg(0, false));
    asm.jump(JEQ_K, PR_SET_DUMPABLE, To::Next, To::Label(allow));
    asm.op(LD_W_ABS, arg(1, false));
    asm.jump(JEQ_K, 0, To::Next, To::Label(allow));
    asm.op(LD_W_ABS, arg(1, true));
    asm.jump(JEQ_K, 0, To::Label(keep), To::Label(allow));
    for (label, answer) in [
        (allow, RET_ALLOW),
        (labels.notify, RET_USER_NOTIF),
        (labels.refuse, RET_ERRNO | libc::EPERM as u32),
        (labels.no_such_call, RET_ERRNO | libc::ENOSYS as u32),
        (not_supported, RET_ERRNO | libc::EOPNOTSUPP as u32),
        // Success, the call not performed: the process stays dumpable.
        (keep, RET_ERRNO),
    ] {
        asm.at(label);
        asm.ret(answer);
    }
    key_block
}

/// The block at `label` that tests the flags in argument `flags` for
/// `MSG_FASTOPEN`: set, to `not_supported`; clear, to `clear`.
fn fast_open(asm: &mut Asm, label: Label, flags: u32, not_supported: Label, clear: Label) {
    asm.at(label);
    asm.op(LD_W_ABS, arg(flags, false));
    asm.jump(
        JSET_K,
        MSG_FASTOPEN,
        To::Label(not_supported),
        To::Label(clear),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::bpf;
    use crate::terminal::{ARCH, NR, RET_KILL_PROCESS, linear};

    fn run(program: &[SockFilter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        bpf::run(program, nr, arch, args).0
    }

    /// The program as it was laid out before the search tree, without the
    /// terminal filter's checks:
    ///
    /// ```text
    ///     ld arch
    ///     for each convention:  jeq ARCH ? next : skip;  ld nr;  jeq NR_n ? label_n : next…;  ret ALLOW
    ///     ret KILL_PROCESS
    /// ```
    /// then the blocks of [`program`] (`arguments_and_answers`).
    fn linear_program(conventions: &[Numbers]) -> Vec<SockFilter> {
        let mut asm = Asm::default();
        let allow = asm.label();
        let labels = Labels::new(&mut asm);
        asm.op(LD_W_ABS, ARCH);
        let mut arches: Vec<u32> = conventions.iter().map(|n| n.arch).collect();
        arches.dedup();
        for arch in arches {
            let other = asm.label();
            asm.jump(JEQ_K, arch, To::Next, To::Label(other));
            asm.op(LD_W_ABS, NR);
            for n in conventions.iter().filter(|n| n.arch == arch) {
                for (nr, action) in actions(n) {
                    asm.jump(JEQ_K, nr, To::Label(labels.of(action)), To::Next);
                }
            }
            asm.ret(RET_ALLOW);
            asm.at(other);
        }
        asm.ret(RET_KILL_PROCESS);
        // The blocks after the dispatch are the program's own: what is
        // compared here is the dispatch.
        arguments_and_answers(&mut asm, &labels, allow, None);
        asm.finish().unwrap()
    }

    /// What children installed before: the linear terminal filter, its
    /// `ret ALLOW` jumping to the linear connect filter.
    fn reference() -> Vec<SockFilter> {
        let table = conventions().expect("a supported architecture");
        linear::followed_by(&linear::terminal(), &linear_program(&table))
    }

    /// The arguments that steer some answer: a terminal request, an address
    /// (low or high half), fast open in each flags argument, nothing.
    fn argument_sets() -> Vec<[u64; 6]> {
        let fo = u64::from(MSG_FASTOPEN);
        vec![
            [0; 6],
            [3, 0x5412, 0, 0, 0, 0],
            [3, 0x541C, 0, 0, 0, 0],
            [3, 0x5401, 16, 0, 0, 0],
            [3, 1, 1, 0, 0x1000, 16],
            [3, 1, 1, 0, 1 << 40, 16],
            [3, 1, fo, 0, 0, 0],
            [3, 1, 1, fo, 0, 0],
            [3, 1, fo, fo, 0x1000, 16],
            // prctl: PR_SET_DUMPABLE 0, 1, and 0 with a high half.
            [4, 0, 0, 0, 0, 0],
            [4, 1, 0, 0, 0, 0],
            [4, 1 << 32, 0, 0, 0, 0],
        ]
    }

    #[test]
    fn connect_bind_addressed_sendto_and_every_sendmsg_reach_the_supervisor_in_every_convention() {
        let table = conventions().expect("a supported architecture");
        let (p, _) = program(&table, None).expect("jumps fit");
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
            // PR_SET_DUMPABLE 0 succeeds unperformed; the rest of prctl,
            // PR_SET_DUMPABLE 1 and a value the kernel refuses, pass.
            assert_eq!(run(&p, n.prctl, a, [4, 0, 0, 0, 0, 0]), RET_ERRNO);
            for args in [
                [4, 1, 0, 0, 0, 0],
                [4, 1 << 32, 0, 0, 0, 0],
                [3, 0, 0, 0, 0, 0],
            ] {
                assert_eq!(run(&p, n.prctl, a, args), RET_ALLOW, "{args:x?}");
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
    fn every_number_of_every_convention_gets_the_answer_of_the_two_linear_programs() {
        let p = NotifyFilter::new().expect("a supported architecture");
        let (p, reference) = (p.instructions(), reference());
        let table = conventions().expect("a supported architecture");
        let mut arches: Vec<u32> = table.iter().map(|n| n.arch).collect();
        arches.dedup();
        arches.push(0x1234);
        let mut answers = Vec::new();
        for arch in arches {
            for nr in (0..1024).chain(X32..X32 + 1024) {
                for args in argument_sets() {
                    let answer = run(p, nr, arch, args);
                    assert_eq!(
                        answer,
                        run(&reference, nr, arch, args),
                        "{arch:#x} {nr} {args:x?}"
                    );
                    if !answers.contains(&answer) {
                        answers.push(answer);
                    }
                }
            }
        }
        // Every answer was met: allow, notify, EPERM (a terminal request,
        // io_uring), EOPNOTSUPP, kill, success unperformed (PR_SET_DUMPABLE
        // 0), and ENOSYS where socketcall exists.
        let socketcall = table.iter().any(|n| n.socketcall.is_some());
        assert_eq!(answers.len(), 6 + usize::from(socketcall), "{answers:x?}");
    }

    /// `getpid`, a call of no interest, in the first convention of `arch`.
    fn getpid(arch: u32) -> u32 {
        if arch == AUDIT_ARCH_X86_64 { 39 } else { 172 }
    }

    #[test]
    fn the_kernel_s_emulation_at_install_stops_at_the_first_instruction_for_every_number() {
        let table = conventions().expect("a supported architecture");
        for p in [NotifyFilter::new(), NotifyFilter::without_key()] {
            let p = p.expect("a supported architecture");
            for n in &table {
                for nr in (0..600).chain(X32..X32 + 600) {
                    assert_eq!(
                        bpf::emulate_at_install(p.instructions(), nr, n.arch),
                        (None, 1),
                        "{:#x} {nr}",
                        n.arch
                    );
                }
            }
            // Without the first load the same walk allows the calls of no
            // interest, as the program does: the emulation above is the
            // kernel's, not one that gives up on anything.
            let rest = &p.instructions()[1..];
            let getpid = getpid(table[0].arch);
            assert_eq!(
                bpf::emulate_at_install(rest, getpid, table[0].arch).0,
                Some(RET_ALLOW)
            );
        }
    }

    #[test]
    fn the_calls_of_no_interest_take_under_half_the_chain_s_instructions() {
        let p = NotifyFilter::new().expect("a supported architecture");
        let (p, reference) = (p.instructions(), reference());
        let table = conventions().expect("a supported architecture");
        // `getpid`, a call of no interest, of the first convention: the
        // chain tested it against every call of interest there.
        let getpid = getpid(table[0].arch);
        let (answer, steps) = bpf::run(p, getpid, table[0].arch, [0; 6]);
        let (_, chain) = bpf::run(&reference, getpid, table[0].arch, [0; 6]);
        assert_eq!(answer, RET_ALLOW);
        assert!(steps <= 10 && chain >= 2 * steps, "{steps} vs {chain}");
        // The program runs on every call (the kernel caches no answer, see
        // above): over every number of each architecture's tables.
        let ioctls = terminal::ioctl_calls(Asm::default().label()).expect("ioctl numbers");
        let (mut tree, mut chain, mut deepest) = (0, 0, 0);
        for (arch, ioctl) in ioctls {
            let of_interest: Vec<u32> = table
                .iter()
                .filter(|n| n.arch == arch)
                .flat_map(actions)
                .map(|(nr, _)| nr)
                .chain(ioctl.iter().map(|(nr, _)| *nr))
                .collect();
            for nr in 0..512 {
                let (answer, steps) = bpf::run(p, nr, arch, [0; 6]);
                let (same, linear) = bpf::run(&reference, nr, arch, [0; 6]);
                assert_eq!(answer, same);
                (tree, chain) = (tree + steps, chain + linear);
            }
            // No call of no interest takes more than eleven (those of
            // interest go on to look at their arguments); x32's included.
            for nr in (0..1024).chain(X32..X32 + 1024) {
                if !of_interest.contains(&nr) {
                    deepest = deepest.max(bpf::run(p, nr, arch, [0; 6]).1);
                }
            }
        }
        assert!(2 * tree <= chain, "{tree} instructions vs {chain}");
        assert!(deepest <= 11, "{deepest}");
    }

    /// `sendmsg` with `key` as its fifth and sixth arguments.
    fn keyed_args(key: Key) -> [u64; 6] {
        let [fifth, sixth] = crate::sys::key_arguments(&key);
        [3, 0x1000, 0, 0, fifth as u64, sixth as u64]
    }

    /// `program` with `key` written where a child writes its own.
    fn with_key(filter: &NotifyFilter, key: Key) -> Vec<SockFilter> {
        let mut p = filter.instructions().to_vec();
        crate::sys::write_key(&mut p, filter.key_at.expect("keyed"), key);
        p
    }

    #[test]
    fn only_the_sendmsg_carrying_the_installed_key_passes_unnotified() {
        let table = conventions().expect("a supported architecture");
        let keyed = NotifyFilter::new().expect("a supported architecture");
        let key: Key = std::array::from_fn(|i| 0x5eed_0000 + i as u32);
        let p = with_key(&keyed, key);
        for n in &table {
            let a = n.arch;
            // Granted: the child's hand-over, in its own convention.
            if n.arch == table[0].arch && n.sendmsg & X32 == 0 {
                assert_eq!(run(&p, n.sendmsg, a, keyed_args(key)), RET_ALLOW);
            }
            // Refused the pass: each word wrong in turn, the words the
            // program was built with, no key, and the key on the other
            // calls that are the supervisor's.
            for wrong in 0..KEY_WORDS {
                let mut other = key;
                other[wrong] ^= 1;
                assert_eq!(
                    run(&p, n.sendmsg, a, keyed_args(other)),
                    RET_USER_NOTIF,
                    "{a:#x} word {wrong}"
                );
            }
            let built: Key = std::array::from_fn(|i| {
                keyed.instructions()[keyed.key_at.expect("keyed")[i]]
                    .parts()
                    .3
            });
            assert_eq!(run(&p, n.sendmsg, a, keyed_args(built)), RET_USER_NOTIF);
            assert_eq!(
                run(&p, n.sendmsg, a, [3, 0x1000, 0, 0, 0, 0]),
                RET_USER_NOTIF
            );
            for call in [n.sendmmsg, n.connect, n.bind] {
                assert_eq!(run(&p, call, a, keyed_args(key)), RET_USER_NOTIF);
            }
            assert_eq!(run(&p, n.sendto, a, keyed_args(key)), RET_USER_NOTIF);
        }
        // The program without a key notifies every sendmsg, the key's too.
        let keyless = NotifyFilter::without_key().expect("a supported architecture");
        assert_eq!(keyless.key_at, None);
        for n in &table {
            assert_eq!(
                run(keyless.instructions(), n.sendmsg, n.arch, keyed_args(key)),
                RET_USER_NOTIF
            );
        }
    }

    #[test]
    fn the_built_key_is_drawn_for_each_supervisor() {
        let (a, b) = (NotifyFilter::new(), NotifyFilter::new());
        let (a, b) = (a.expect("filter"), b.expect("filter"));
        assert_eq!(a.key_at, b.key_at);
        assert_ne!(a.built_key(), b.built_key());
    }

    /// The numbers are written out for every convention (a build knows only
    /// its own in `libc`): in this build's own, `libc`'s numbers get the
    /// answers, the terminal filter's `ioctl` check included.
    #[cfg(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    ))]
    #[test]
    fn this_build_s_own_calls_by_libc_s_numbers_get_their_answers() {
        let arch = conventions().expect("a supported architecture")[0].arch;
        let p = NotifyFilter::new().expect("a supported architecture");
        let answer =
            |nr: libc::c_long, args: [u64; 6]| run(p.instructions(), nr as u32, arch, args);
        for nr in [
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_sendmsg,
            libc::SYS_sendmmsg,
        ] {
            assert_eq!(answer(nr, [0; 6]), RET_USER_NOTIF, "{nr}");
        }
        assert_eq!(answer(libc::SYS_sendto, [0, 0, 0, 0, 1, 0]), RET_USER_NOTIF);
        assert_eq!(
            answer(libc::SYS_io_uring_setup, [0; 6]),
            RET_ERRNO | libc::EPERM as u32
        );
        let dumpable = libc::PR_SET_DUMPABLE as u64;
        assert_eq!(
            answer(libc::SYS_prctl, [dumpable, 0, 0, 0, 0, 0]),
            RET_ERRNO
        );
        assert_eq!(
            answer(libc::SYS_prctl, [dumpable, 1, 0, 0, 0, 0]),
            RET_ALLOW
        );
        let tiocsti = u64::from(crate::terminal::TIOCSTI);
        assert_eq!(
            answer(libc::SYS_ioctl, [0, tiocsti, 0, 0, 0, 0]),
            RET_ERRNO | libc::EPERM as u32
        );
        // Granted beside them: a read, an address-less send, another ioctl.
        assert_eq!(answer(libc::SYS_read, [0; 6]), RET_ALLOW);
        assert_eq!(answer(libc::SYS_sendto, [0; 6]), RET_ALLOW);
        assert_eq!(answer(libc::SYS_ioctl, [0, 0x5401, 0, 0, 0, 0]), RET_ALLOW);
    }

    #[test]
    fn every_jump_lands_inside_the_program() {
        let f = NotifyFilter::new().expect("a supported architecture");
        bpf::assert_jumps_inside(f.instructions());
    }
}
