//! A small assembler for the classic BPF programs this crate installs as
//! seccomp filters (the terminal filter, the connect supervisor's), and the
//! dispatch on the system-call number they share.
//!
//! A filter runs on every system call of the confined process, and once
//! more per call number and architecture when it is installed: the kernel
//! emulates it for each number to learn which ones it always allows
//! (`seccomp_cache_prepare`, with interrupts off). That emulation is much
//! of what installing a filter costs: a couple of nanoseconds an
//! instruction walked, for each of some 900 numbers on x86-64 (its own and
//! i386's); each instruction of the program costs about a tenth of a
//! microsecond more (checked, translated, compiled). So the number is not
//! tested against each call of interest in turn (a call of no interest
//! walked the whole chain, some twenty instructions) but found in a search
//! tree laid out for both costs: the long runs of calls of no interest
//! (between `bind` and `prctl`, and after it) are allowed after two or
//! three tests, and the calls of interest, close together, are told apart
//! below (see [`Asm::dispatch`]).
//!
//! Classic BPF jumps only forward, by at most 255 instructions: the
//! assembler resolves labels into such distances and refuses a program
//! where one does not fit.

use crate::terminal::{ARCH, JA, JEQ_K, LD_W_ABS, NR, RET_K, RET_KILL_PROCESS, SockFilter, X32};

/// `BPF_JMP | BPF_JGE | BPF_K` of `<linux/bpf_common.h>`.
pub(crate) const JGE_K: u16 = 0x05 | 0x30;

/// The numbers the kernel emulates a filter for when it is installed:
/// each below its table's size, under 512 on every architecture this
/// crate knows.
const EMULATED: u32 = 512;

/// What one more instruction in the program costs to install (the kernel
/// checks, translates and compiles each), in the units of
/// [`Part::weight`]: as much as 64 emulated numbers walking one more
/// instruction each (about 0.12 µs against 1.7 ns, measured on x86-64).
const INSTRUCTION: u64 = 64 * 1024;

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
    /// The number is found in the search tree that costs the least to
    /// install (see [`Layout`]). For the connect supervisor's filter on
    /// x86-64 the numbers the kernel emulates walk under eight
    /// instructions on average, where a tree balanced on the calls walked
    /// nearly ten, in a program one instruction shorter; installing it took
    /// 31 µs instead of 35 (a C loop of 1500 forked children, each
    /// installing one, on the machine of doc/performance.md).
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
    /// the accumulator (see [`Layout`]).
    fn tree(&mut self, calls: &[(u32, Label)], allow: Label) {
        let layout = Layout::new(calls);
        let last = layout.parts.len() - 1;
        match layout.target(0, last, allow) {
            Some(to) => self.insns.push(Insn::Goto(to)),
            None => self.subtree(&layout, 0, last, allow),
        }
    }

    /// Lays out the parts `a..=b` of `layout`, which need instructions: a
    /// leaf's `jeq`, or a `jge` and the two sides, the lower first (the
    /// `jge` falls through to it). Nothing falls into what follows: every
    /// last test jumps.
    fn subtree(&mut self, layout: &Layout, a: usize, b: usize, allow: Label) {
        match layout.split(a, b) {
            None => {
                let calls: Vec<(u32, Label)> = layout.parts[a..=b]
                    .iter()
                    .filter_map(|p| match p {
                        Part::Call(nr, to) => Some((*nr, *to)),
                        Part::Gap(..) => None,
                    })
                    .collect();
                // Only calls: the last one is what the others are not.
                let exact = calls.len() == b - a + 1;
                let tested = if exact { calls.len() - 1 } else { calls.len() };
                for (i, (nr, to)) in calls.iter().take(tested).enumerate() {
                    let no = match (i + 1 == tested, exact) {
                        (false, _) => To::Next,
                        (true, true) => To::Label(calls[tested].1),
                        (true, false) => To::Label(allow),
                    };
                    self.jump(JEQ_K, *nr, To::Label(*to), no);
                }
            }
            Some(s) => {
                let lower = layout.target(a, s, allow);
                let upper = layout.target(s + 1, b, allow);
                let upper_at = upper.unwrap_or_else(|| self.label());
                let no = lower.map_or(To::Next, To::Label);
                self.jump(JGE_K, layout.parts[s + 1].first(), To::Label(upper_at), no);
                if lower.is_none() {
                    self.subtree(layout, a, s, allow);
                }
                if upper.is_none() {
                    self.at(upper_at);
                    self.subtree(layout, s + 1, b, allow);
                }
            }
        }
    }

    /// The instructions, labels resolved into forward distances; `None`
    /// when a jump goes backwards, past 255 instructions or to a label
    /// never placed, or the program is longer than the kernel takes.
    pub(crate) fn finish(self) -> Option<Vec<SockFilter>> {
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
        Some(out)
    }
}

/// One table's numbers in order, cut into parts: each call of interest,
/// and each run of numbers between them, which are allowed.
#[derive(Debug, Clone, Copy)]
enum Part {
    Call(u32, Label),
    /// The numbers `first..=last`, none of interest.
    Gap(u32, u32),
}

impl Part {
    fn first(&self) -> u32 {
        match *self {
            Part::Call(nr, _) | Part::Gap(nr, _) => nr,
        }
    }

    /// How much it matters that the numbers of this part walk few
    /// instructions: each number the kernel emulates counts 1024; each
    /// other that a table could hold (below 1024, and x32's, which are
    /// never emulated and run the filter on every call) 1, so that their
    /// paths stay short too.
    fn weight(&self) -> u64 {
        let (first, last) = match *self {
            Part::Call(nr, _) => (nr, nr),
            Part::Gap(first, last) => (first, last),
        };
        let within = |lo: u32, hi: u32| -> u64 {
            let (from, to) = (first.max(lo), last.min(hi));
            if from > to {
                0
            } else {
                u64::from(to - from) + 1
            }
        };
        1024 * within(0, EMULATED - 1)
            + within(EMULATED, 2 * EMULATED - 1)
            + within(X32, X32 + 2 * EMULATED - 1)
    }
}

/// The search tree over one table's calls that costs the least: the
/// instructions each number walks, weighted by [`Part::weight`], plus
/// [`INSTRUCTION`] for each instruction of the tree. Chosen over every way
/// to cut the parts in two with a `jge` or test them with `jeq` in a leaf
/// (a few dozen parts: a moment, once a filter is built).
struct Layout {
    parts: Vec<Part>,
    /// For parts `a..=b` (at `a * len + b`): the least cost, and where to
    /// cut (`Some(s)`: `a..=s` and `s + 1..=b`), or `None` for a leaf.
    best: Vec<(u64, Option<usize>)>,
}

impl Layout {
    fn new(calls: &[(u32, Label)]) -> Layout {
        let mut parts = Vec::with_capacity(2 * calls.len() + 1);
        let mut next = 0u32;
        for &(nr, to) in calls {
            if nr > next {
                parts.push(Part::Gap(next, nr - 1));
            }
            parts.push(Part::Call(nr, to));
            next = nr.saturating_add(1);
        }
        if calls.last().is_none_or(|&(nr, _)| nr < u32::MAX) {
            parts.push(Part::Gap(next, u32::MAX));
        }
        let len = parts.len();
        let mut layout = Layout {
            parts,
            best: vec![(0, None); len * len],
        };
        for width in 1..=len {
            for a in 0..=len - width {
                let b = a + width - 1;
                layout.best[a * len + b] = layout.choose(a, b);
            }
        }
        layout
    }

    /// The cheapest way to lay out parts `a..=b`, those within already
    /// chosen.
    fn choose(&self, a: usize, b: usize) -> (u64, Option<usize>) {
        let len = self.parts.len();
        let mut best = (self.leaf_cost(a, b), None);
        let weight: u64 = self.parts[a..=b].iter().map(Part::weight).sum();
        for s in a..b {
            let sides = self.best[a * len + s].0 + self.best[(s + 1) * len + b].0;
            let cost = weight + INSTRUCTION + sides;
            if cost < best.0 {
                best = (cost, Some(s));
            }
        }
        best
    }

    /// What a leaf over parts `a..=b` walks: each call the `jeq` up to its
    /// own, each other number all of them; with only calls, the last is
    /// not tested; a lone part is no test at all (see [`Layout::target`]).
    fn leaf_cost(&self, a: usize, b: usize) -> u64 {
        let parts = &self.parts[a..=b];
        if parts.len() == 1 {
            return 0;
        }
        let calls: Vec<u64> = parts
            .iter()
            .filter(|p| matches!(p, Part::Call(..)))
            .map(Part::weight)
            .collect();
        let gaps: u64 = parts
            .iter()
            .filter(|p| matches!(p, Part::Gap(..)))
            .map(Part::weight)
            .sum();
        let tests = (calls.len() - usize::from(calls.len() == parts.len())) as u64;
        let walked: u64 = (1..)
            .zip(&calls)
            .map(|(i, weight)| weight * tests.min(i))
            .sum();
        walked + (gaps + INSTRUCTION) * tests
    }

    /// Where the best tree for parts `a..=b` cuts them, if it does.
    fn split(&self, a: usize, b: usize) -> Option<usize> {
        self.best[a * self.parts.len() + b].1
    }

    /// Where a jump to parts `a..=b` can go straight, with no instruction
    /// of theirs: one call's label, or `allow` for one run of numbers.
    fn target(&self, a: usize, b: usize, allow: Label) -> Option<Label> {
        match (a == b, self.parts[a]) {
            (true, Part::Call(_, to)) => Some(to),
            (true, Part::Gap(..)) => Some(allow),
            (false, _) => None,
        }
    }
}

/// A classic BPF interpreter for the opcodes these programs use, for
/// tests: the answer for one `struct seccomp_data` (number, architecture,
/// arguments), and how many instructions it took.
#[cfg(test)]
pub(crate) fn run(program: &[SockFilter], nr: u32, arch: u32, args: [u64; 6]) -> (u32, usize) {
    const JSET_K: u16 = 0x45;
    const JGT_K: u16 = 0x25;
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_ne_bytes());
    data[4..8].copy_from_slice(&arch.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    let (mut pc, mut acc, mut steps) = (0usize, 0u32, 0usize);
    loop {
        let (code, jt, jf, k) = program[pc].parts();
        steps += 1;
        let branch = |taken: bool| 1 + usize::from(if taken { jt } else { jf });
        match code {
            LD_W_ABS => {
                let at = k as usize;
                acc = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
                pc += 1;
            }
            JEQ_K => pc += branch(acc == k),
            JGE_K => pc += branch(acc >= k),
            JGT_K => pc += branch(acc > k),
            JSET_K => pc += branch(acc & k != 0),
            JA => pc += 1 + k as usize,
            RET_K => return (k, steps),
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
    /// Each call's answer (`1000 + nr`) and `allow`'s, after a dispatch.
    fn answered(mut asm: Asm, answers: Vec<(u32, Label)>, allow: Label) -> Vec<SockFilter> {
        for (nr, label) in answers {
            asm.at(label);
            asm.ret(1000u32.wrapping_add(nr));
        }
        asm.at(allow);
        asm.ret(RET_ALLOW);
        asm.finish().expect("jumps fit")
    }

    fn program(numbers: &[u32]) -> Vec<SockFilter> {
        let mut asm = Asm::default();
        let allow = asm.label();
        let answers: Vec<(u32, Label)> = numbers.iter().map(|n| (*n, asm.label())).collect();
        asm.dispatch(&[(7, answers.clone())], allow);
        answered(asm, answers, allow)
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

    /// x86-64's calls of interest to the connect supervisor, its own and x32's.
    #[rustfmt::skip]
    const X86_64_CALLS: [u32; 21] = [
        16, 42, 43, 44, 46, 49, 157, 288, 307, 425,
        X32 | 16, X32 | 42, X32 | 43, X32 | 44, X32 | 49, X32 | 157, X32 | 288, X32 | 425,
        X32 | 514, X32 | 518, X32 | 538,
    ];

    #[test]
    fn the_tree_is_right_at_every_edge_of_the_numbers() {
        let sets: [&[u32]; 6] = [
            &[0],
            &[u32::MAX],
            &[0, 1, 2, u32::MAX - 1, u32::MAX],
            &[5, 6, 7, 8, 9],
            &X86_64_CALLS,
            &[1, 511, 512, 513, 1023, X32, X32 | 1023],
        ];
        for numbers in sets {
            let p = program(numbers);
            let mut probes: Vec<u32> = (0..1100).chain(X32 - 2..X32 + 1100).collect();
            probes.extend([u32::MAX - 2, u32::MAX - 1, u32::MAX]);
            for nr in probes {
                let expected = if numbers.contains(&nr) {
                    1000u32.wrapping_add(nr)
                } else {
                    RET_ALLOW
                };
                assert_eq!(run(&p, nr, 7, [0; 6]).0, expected, "{numbers:?} {nr:#x}");
            }
        }
    }

    /// The tree the dispatch used to lay out, halving the calls down to
    /// leaves of three `jeq`: what the weighted one is measured against.
    fn balanced(numbers: &[u32]) -> Vec<SockFilter> {
        fn tree(asm: &mut Asm, calls: &[(u32, Label)], allow: Label) {
            if calls.len() <= 3 {
                for (i, (nr, to)) in calls.iter().enumerate() {
                    let no = if i + 1 == calls.len() {
                        To::Label(allow)
                    } else {
                        To::Next
                    };
                    asm.jump(JEQ_K, *nr, To::Label(*to), no);
                }
                return;
            }
            let (left, right) = calls.split_at(calls.len() / 2);
            let upper = asm.label();
            asm.jump(JGE_K, right[0].0, To::Label(upper), To::Next);
            tree(asm, left, allow);
            asm.at(upper);
            tree(asm, right, allow);
        }
        let mut asm = Asm::default();
        let allow = asm.label();
        let mut answers: Vec<(u32, Label)> = numbers.iter().map(|n| (*n, asm.label())).collect();
        answers.sort_by_key(|(nr, _)| *nr);
        asm.op(LD_W_ABS, ARCH);
        asm.op(LD_W_ABS, NR);
        tree(&mut asm, &answers, allow);
        answered(asm, answers, allow)
    }

    #[test]
    fn the_numbers_the_kernel_emulates_walk_less_and_the_program_is_no_longer() {
        let numbers = X86_64_CALLS;
        let (weighted, balanced) = (program(&numbers), balanced(&numbers));
        let walked =
            |p: &[SockFilter]| -> usize { (0..EMULATED).map(|nr| run(p, nr, 7, [0; 6]).1).sum() };
        let (ours, theirs) = (walked(&weighted), walked(&balanced));
        // The balanced program has no architecture test: one instruction
        // fewer on every walk, and in the program.
        assert!(
            5 * ours <= 4 * (theirs + EMULATED as usize),
            "{ours} vs {theirs}"
        );
        assert!(
            weighted.len() <= balanced.len() + 1,
            "{} vs {}",
            weighted.len(),
            balanced.len()
        );
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
