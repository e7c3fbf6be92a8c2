//! A small assembler for the classic BPF programs this crate installs as
//! seccomp filters (the terminal filter, the connect supervisor's), and the
//! dispatch on the system-call number they share.
//!
//! A filter runs on every system call of the confined process (the
//! supervisor's stops the kernel's per-number cache at install: see
//! `connect::filter::program`). So the number is not tested against each
//! call of interest in turn (a call of no interest walked the whole chain,
//! some twenty instructions) but found in a search tree: `jge` splits on
//! the sorted numbers down to leaves of a few `jeq`, a handful of
//! instructions whatever the number.
//!
//! Classic BPF jumps only forward, by at most 255 instructions: the
//! assembler resolves labels into such distances and refuses a program
//! where one does not fit.

use crate::terminal::{ARCH, JA, JEQ_K, LD_W_ABS, NR, RET_K, RET_KILL_PROCESS, SockFilter};

/// `BPF_JMP | BPF_JGE | BPF_K` of `<linux/bpf_common.h>`.
pub(crate) const JGE_K: u16 = 0x05 | 0x30;

/// At most this many `jeq` at a leaf of the search tree: with fewer, the
/// tree's `jge` cost as much as the tests they spare.
const LEAF: usize = 3;

/// A place in the program, set by [`Asm::at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Label(usize);

/// Per `AUDIT_ARCH_*`, the calls that need more than being allowed, each
/// number with where it goes: what [`Asm::dispatch`] takes.
pub(crate) type Calls = Vec<(u32, Vec<(u32, Label)>)>;

/// Where a jump goes: the next instruction or a label.
#[derive(Debug, Clone, Copy)]
pub(crate) enum To {
    Next,
    Label(Label),
}

enum Insn {
    Op(u16, u32),
    Jump(u16, u32, To, To),
    /// `ja`: always to the label.
    Goto(Label),
    At(Label),
}

/// A program under construction.
#[derive(Default)]
pub(crate) struct Asm {
    insns: Vec<Insn>,
    labels: usize,
}

impl Asm {
    /// A new label, placed later with [`Asm::at`].
    pub(crate) fn label(&mut self) -> Label {
        self.labels += 1;
        Label(self.labels - 1)
    }

    /// Places `label` before the next instruction.
    pub(crate) fn at(&mut self, label: Label) {
        self.insns.push(Insn::At(label));
    }

    /// An instruction that does not jump.
    pub(crate) fn op(&mut self, code: u16, k: u32) {
        self.insns.push(Insn::Op(code, k));
    }

    /// `ret k`.
    pub(crate) fn ret(&mut self, k: u32) {
        self.op(RET_K, k);
    }

    /// A conditional jump: to `yes` when the test on the accumulator and
    /// `k` holds, else to `no`.
    pub(crate) fn jump(&mut self, code: u16, k: u32, yes: To, no: To) {
        self.insns.push(Insn::Jump(code, k, yes, no));
    }

    /// Loads the architecture and, for each of `table`'s, the number; each
    /// call listed goes to its label, any other to `allow`; an architecture
    /// not listed is killed. Each number is listed once an architecture.
    ///
    /// ```text
    ///     ld arch
    ///     for each arch:  jeq ARCH ? next : next_arch;  ld nr;  <tree over its calls>
    ///     ret KILL_PROCESS
    /// ```
    pub(crate) fn dispatch(&mut self, table: &[(u32, Vec<(u32, Label)>)], allow: Label) {
        self.op(LD_W_ABS, ARCH);
        for (arch, calls) in table {
            let other = self.label();
            self.jump(JEQ_K, *arch, To::Next, To::Label(other));
            self.op(LD_W_ABS, NR);
            let mut calls = calls.clone();
            calls.sort_by_key(|(nr, _)| *nr);
            self.tree(&calls, allow);
            self.at(other);
        }
        self.ret(RET_KILL_PROCESS);
    }

    /// The search tree over `calls`, sorted by number, with the number in
    /// the accumulator: the left half laid out first (a `jge` falls
    /// through to it), then the right; a leaf's last `jeq` goes to `allow`
    /// when it fails, so no branch falls into the next.
    fn tree(&mut self, calls: &[(u32, Label)], allow: Label) {
        if calls.len() <= LEAF {
            for (i, (nr, to)) in calls.iter().enumerate() {
                let no = if i + 1 == calls.len() {
                    To::Label(allow)
                } else {
                    To::Next
                };
                self.jump(JEQ_K, *nr, To::Label(*to), no);
            }
            if calls.is_empty() {
                self.insns.push(Insn::Goto(allow));
            }
            return;
        }
        let (left, right) = calls.split_at(calls.len() / 2);
        let upper = self.label();
        self.jump(JGE_K, right[0].0, To::Label(upper), To::Next);
        self.tree(left, allow);
        self.at(upper);
        self.tree(right, allow);
    }

    /// The instructions, labels resolved into forward distances; `None`
    /// when a jump goes backwards, past 255 instructions or to a label
    /// never placed, or the program is longer than the kernel takes.
    pub(crate) fn finish(self) -> Option<Vec<SockFilter>> {
        self.finish_placing(&[]).map(|(program, _)| program)
    }

    /// [`Asm::finish`], with where each of `places` landed: the index of
    /// the instruction each label stands before.
    pub(crate) fn finish_placing(self, places: &[Label]) -> Option<(Vec<SockFilter>, Vec<usize>)> {
        let mut at = vec![None; self.labels];
        let mut pos = 0usize;
        for insn in &self.insns {
            match insn {
                Insn::At(Label(l)) => at[*l] = Some(pos),
                _ => pos += 1,
            }
        }
        // BPF_MAXINSNS.
        if pos > 4096 {
            return None;
        }
        let mut out = Vec::with_capacity(pos);
        for insn in &self.insns {
            let here = out.len();
            let distance = |to: To| -> Option<u8> {
                let target = match to {
                    To::Next => here + 1,
                    To::Label(Label(l)) => at[l]?,
                };
                u8::try_from(target.checked_sub(here + 1)?).ok()
            };
            match insn {
                Insn::Op(code, k) => out.push(SockFilter::new(*code, 0, 0, *k)),
                Insn::Jump(code, k, yes, no) => {
                    out.push(SockFilter::new(*code, distance(*yes)?, distance(*no)?, *k));
                }
                Insn::Goto(to) => {
                    let distance = u32::from(distance(To::Label(*to))?);
                    out.push(SockFilter::new(JA, 0, 0, distance));
                }
                Insn::At(_) => {}
            }
        }
        let places = places
            .iter()
            .map(|Label(l)| at[*l])
            .collect::<Option<Vec<usize>>>()?;
        Some((out, places))
    }
}

/// A classic BPF interpreter for the opcodes these programs use, for
/// tests: the answer for one `struct seccomp_data` (number, architecture,
/// arguments), and how many instructions it took.
#[cfg(test)]
pub(crate) fn run(program: &[SockFilter], nr: u32, arch: u32, args: [u64; 6]) -> (u32, usize) {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_ne_bytes());
    data[4..8].copy_from_slice(&arch.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    let load = |at: u32| {
        let at = at as usize;
        Some(u32::from_ne_bytes(data[at..at + 4].try_into().unwrap()))
    };
    match interpret(program, load) {
        (Some(answer), steps) => (answer, steps),
        (None, _) => unreachable!("every load is answered"),
    }
}

/// For tests: what the kernel does with a program when it is installed
/// (`seccomp_is_const_allow`, Linux 5.11), which runs it for one number and
/// architecture as far as it can without the arguments: `Some(answer)`
/// when it reached one, `None` when it met a load of anything else; with
/// the instructions it went through.
#[cfg(test)]
pub(crate) fn emulate_at_install(
    program: &[SockFilter],
    nr: u32,
    arch: u32,
) -> (Option<u32>, usize) {
    interpret(program, |at| match at {
        NR => Some(nr),
        ARCH => Some(arch),
        _ => None,
    })
}

/// Runs `program`, `load` giving the word at an offset of `struct
/// seccomp_data`, or `None` to stop there.
#[cfg(test)]
fn interpret(program: &[SockFilter], load: impl Fn(u32) -> Option<u32>) -> (Option<u32>, usize) {
    const JSET_K: u16 = 0x45;
    const JGT_K: u16 = 0x25;
    let (mut pc, mut acc, mut steps) = (0usize, 0u32, 0usize);
    loop {
        let (code, jt, jf, k) = program[pc].parts();
        steps += 1;
        let branch = |taken: bool| 1 + usize::from(if taken { jt } else { jf });
        match code {
            LD_W_ABS => {
                let Some(word) = load(k) else {
                    return (None, steps);
                };
                acc = word;
                pc += 1;
            }
            JEQ_K => pc += branch(acc == k),
            JGE_K => pc += branch(acc >= k),
            JGT_K => pc += branch(acc > k),
            JSET_K => pc += branch(acc & k != 0),
            JA => pc += 1 + k as usize,
            RET_K => return (Some(k), steps),
            other => panic!("unexpected opcode {other:#x}"),
        }
    }
}

/// For tests: every jump of `program` lands inside it (the kernel's
/// checker refuses a program where one does not).
#[cfg(test)]
pub(crate) fn assert_jumps_inside(program: &[SockFilter]) {
    for (at, i) in program.iter().enumerate() {
        let (code, jt, jf, k) = i.parts();
        if code == JA {
            assert!(at + 1 + (k as usize) < program.len(), "at {at}");
        } else if code != RET_K && code != LD_W_ABS {
            assert!(at + 1 + usize::from(jt.max(jf)) < program.len(), "at {at}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::RET_ALLOW;

    /// A dispatch over `numbers` (each to its own answer `1000 + nr`).
    fn program(numbers: &[u32]) -> Vec<SockFilter> {
        let mut asm = Asm::default();
        let allow = asm.label();
        let answers: Vec<(u32, Label)> = numbers.iter().map(|n| (*n, asm.label())).collect();
        asm.dispatch(&[(7, answers.clone())], allow);
        for (nr, label) in answers {
            asm.at(label);
            asm.ret(1000 + nr);
        }
        asm.at(allow);
        asm.ret(RET_ALLOW);
        asm.finish().expect("jumps fit")
    }

    #[test]
    fn the_tree_finds_every_listed_number_and_allows_every_other() {
        for len in 0..=20u32 {
            let numbers: Vec<u32> = (0..len).map(|i| i * 3 + 1).rev().collect();
            let p = program(&numbers);
            for nr in 0..70 {
                let expected = if numbers.contains(&nr) {
                    1000 + nr
                } else {
                    RET_ALLOW
                };
                assert_eq!(run(&p, nr, 7, [0; 6]).0, expected, "{len} {nr}");
            }
            assert_eq!(run(&p, 1, 8, [0; 6]).0, RET_KILL_PROCESS);
        }
    }

    #[test]
    fn a_jump_too_long_is_refused() {
        // A jump over `between` instructions to the last one.
        let jumping_over = |between: usize| {
            let mut asm = Asm::default();
            let far = asm.label();
            asm.jump(JEQ_K, 0, To::Label(far), To::Next);
            for _ in 0..between {
                asm.ret(0);
            }
            asm.at(far);
            asm.ret(1);
            asm.finish()
        };
        assert!(jumping_over(256).is_none());
        // One instruction fewer fits.
        assert_eq!(jumping_over(255).map(|p| p[0].parts().1), Some(255));
    }
}
