//! The race detector: checks that a program's dependency tokens — not the order in which the
//! functional simulator happens to run the three modules — order every pair of conflicting
//! accesses by different modules. On hardware the modules run concurrently with timing that
//! depends on memory latency, so a pair the tokens leave unordered is a race: right by luck
//! here, wrong on a board.
//!
//! Happens-before is tracked with vector clocks over the three modules: a module's clock
//! ticks at each of its instructions; the n-th push on a queue carries the pusher's clock,
//! and the n-th pop on that queue joins it into the popper's. Each location keeps its last
//! write and, per module, its last read since; an access conflicts with an earlier one by
//! another module (write/write, write/read, read/write) unless the earlier one happened
//! before it.
//!
//! The shared locations: INP and WGT rows (written by load, read by GEMM), ACC rows (written
//! by compute, read by STORE as OUT rows), and DRAM (written by STORE, read by the loads of
//! both load and compute), in granules of the smallest DRAM element of INP, WGT, ACC and OUT.
//! The micro-op buffer and the activation table (`ALU_LUT`) are written and read by compute
//! alone, so they cannot race and are not tracked; an ALU LUTW writes only the table (its
//! `dst` is a table entry, not an ACC row). And FINISH, after which the host reads the
//! results, must come after every instruction of load and store.

use std::collections::{HashMap, VecDeque};

use isa::{AluOp, HwConfig, Insn, MemInsn, MemType, Module, Queue, Uop};

/// A vector clock: per module, how many of its instructions happened before.
type Clock = [u64; 3];

/// One access: its module, that module's clock at it, and the instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Access {
    module: usize,
    time: u64,
    index: usize,
}

#[derive(Debug, Clone, Copy, Default)]
struct Shadow {
    write: Option<Access>,
    reads: [Option<Access>; 3],
}

/// What the detector tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    Inp(u64),
    Wgt(u64),
    Acc(u64),
    /// A DRAM byte address (the start of its granule).
    Dram(u64),
    /// The end of the run: what the host reads after FINISH.
    Completion,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Inp(r) => write!(f, "INP row {r}"),
            Location::Wgt(r) => write!(f, "WGT row {r}"),
            Location::Acc(r) => write!(f, "ACC/OUT row {r}"),
            Location::Dram(a) => write!(f, "DRAM bytes at {a:#x}"),
            Location::Completion => write!(f, "the run's completion"),
        }
    }
}

/// A pair of conflicting accesses the tokens do not order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Race {
    pub location: Location,
    /// The access the simulator ran first: instruction index, module, whether it wrote.
    pub first: (usize, Module, bool),
    /// The access that conflicts with it.
    pub second: (usize, Module, bool),
}

/// The detector's state for one run.
pub struct RaceDetector {
    clocks: [Clock; 3],
    pushed: [VecDeque<Clock>; 4],
    current: [usize; 3],
    shadows: HashMap<Location, Shadow>,
    dram_granule: u64,
    elem_bytes: [u64; 5],
    race: Option<Race>,
}

fn module_index(m: Module) -> usize {
    m as usize
}

impl RaceDetector {
    pub fn new(cfg: &HwConfig) -> Self {
        let eb = |m| u64::from(cfg.elem_bytes(m));
        let elem_bytes = [
            eb(MemType::Inp),
            eb(MemType::Wgt),
            eb(MemType::Acc),
            eb(MemType::Out),
            eb(MemType::Uop),
        ];
        RaceDetector {
            clocks: [[0; 3]; 3],
            pushed: Default::default(),
            current: [0; 3],
            shadows: HashMap::new(),
            dram_granule: elem_bytes[..4].iter().copied().min().unwrap_or(1).max(1),
            elem_bytes,
            race: None,
        }
    }

    /// The first race found.
    pub fn race(&self) -> Option<&Race> {
        self.race.as_ref()
    }

    /// Instruction `index` of module `m` starts, having popped `pops`.
    pub fn begin(&mut self, m: Module, index: usize, pops: impl IntoIterator<Item = Queue>) {
        let mi = module_index(m);
        for q in pops {
            if let Some(c) = self.pushed[q as usize].pop_front() {
                for (mine, theirs) in self.clocks[mi].iter_mut().zip(c) {
                    *mine = (*mine).max(theirs);
                }
            }
        }
        self.clocks[mi][mi] += 1;
        self.current[mi] = index;
    }

    /// FINISH (instruction `index`, compute) retires: the host then reads the results, so
    /// every instruction of load and store must have happened before it, through tokens.
    pub fn finish(&mut self, index: usize, last: [Option<usize>; 3]) {
        if self.race.is_some() {
            return;
        }
        let c = self.clocks[module_index(Module::Compute)];
        for m in [Module::Load, Module::Store] {
            let mi = module_index(m);
            if c[mi] < self.clocks[mi][mi] {
                self.race = Some(Race {
                    location: Location::Completion,
                    first: (last[mi].unwrap_or(0), m, true),
                    second: (index, Module::Compute, false),
                });
                return;
            }
        }
    }

    /// Module `m`'s last instruction pushed a token on `q`.
    pub fn push(&mut self, m: Module, q: Queue) {
        self.pushed[q as usize].push_back(self.clocks[module_index(m)]);
    }

    fn access(&mut self, m: Module, loc: Location, write: bool) {
        if self.race.is_some() {
            return;
        }
        let mi = module_index(m);
        let clock = self.clocks[mi];
        let now = Access {
            module: mi,
            time: clock[mi],
            index: self.current[mi],
        };
        let before = |a: &Access| a.module == mi || clock[a.module] >= a.time;
        let s = self.shadows.entry(loc).or_default();
        let conflict = s
            .write
            .filter(|w| !before(w))
            .map(|w| (w, true))
            .or_else(|| {
                if write {
                    s.reads
                        .iter()
                        .flatten()
                        .find(|r| !before(r))
                        .map(|r| (*r, false))
                } else {
                    None
                }
            });
        if let Some((a, wrote)) = conflict {
            self.race = Some(Race {
                location: loc,
                first: (a.index, Module::ALL[a.module], wrote),
                second: (now.index, m, write),
            });
            return;
        }
        if write {
            *s = Shadow {
                write: Some(now),
                reads: [None; 3],
            };
        } else {
            s.reads[mi] = Some(now);
        }
    }

    fn rows(&mut self, m: Module, loc: fn(u64) -> Location, start: u64, end: u64, write: bool) {
        for r in start..end {
            self.access(m, loc(r), write);
        }
    }

    /// The DRAM granules of a 2D transfer of `m` (rows of `x_size` elements, `x_stride` apart).
    fn dram(&mut self, module: Module, m: &MemInsn, write: bool) {
        let eb = match m.memory_type {
            MemType::Inp => self.elem_bytes[0],
            MemType::Wgt => self.elem_bytes[1],
            MemType::Acc => self.elem_bytes[2],
            MemType::Out | MemType::Acc8 => self.elem_bytes[3],
            MemType::Uop => self.elem_bytes[4],
        };
        let g = self.dram_granule;
        for y in 0..u64::from(m.y_size) {
            let first = (u64::from(m.dram_base) + y * u64::from(m.x_stride)) * eb;
            let last = first + u64::from(m.x_size) * eb;
            let mut at = first / g * g;
            while at < last {
                self.access(module, Location::Dram(at), write);
                at += g;
            }
        }
    }

    /// Records the accesses of `insn` (module `m`), which read micro-ops `uops` (GEMM, ALU).
    pub fn execute(&mut self, m: Module, insn: &Insn, uops: &[Uop]) {
        match insn {
            Insn::Load(l) if l.x_size > 0 => {
                self.dram(m, l, false);
                let width = u64::from(l.x_pad_0) + u64::from(l.x_size) + u64::from(l.x_pad_1);
                let rows = u64::from(l.y_pad_0) + u64::from(l.y_size) + u64::from(l.y_pad_1);
                let (start, end) = (
                    u64::from(l.sram_base),
                    u64::from(l.sram_base) + width * rows,
                );
                match l.memory_type {
                    MemType::Inp => self.rows(m, Location::Inp, start, end, true),
                    MemType::Wgt => self.rows(m, Location::Wgt, start, end, true),
                    MemType::Acc | MemType::Acc8 => self.rows(m, Location::Acc, start, end, true),
                    MemType::Uop | MemType::Out => {}
                }
            }
            Insn::Store(s) if s.x_size > 0 => {
                let start = u64::from(s.sram_base);
                let end = start + u64::from(s.x_size) * u64::from(s.y_size);
                self.rows(m, Location::Acc, start, end, false);
                self.dram(m, s, true);
            }
            Insn::Gemm(g) => {
                let lp = &g.lp;
                for i0 in 0..u64::from(lp.iter_out) {
                    for i1 in 0..u64::from(lp.iter_in) {
                        for u in uops {
                            let at = |base: u32, f: (u16, u16)| {
                                u64::from(base) + i0 * u64::from(f.0) + i1 * u64::from(f.1)
                            };
                            let dst = at(u.dst_idx, (lp.dst_factor_out, lp.dst_factor_in));
                            if !lp.reset_reg {
                                let src = at(u.src_idx, (lp.src_factor_out, lp.src_factor_in));
                                let wgt = at(u.wgt_idx, (g.wgt_factor_out, g.wgt_factor_in));
                                self.access(m, Location::Inp(src), false);
                                self.access(m, Location::Wgt(wgt), false);
                            }
                            self.access(m, Location::Acc(dst), true);
                        }
                    }
                }
            }
            Insn::Alu(a) => {
                let lp = &a.lp;
                let writes_acc = lp.reset_reg || a.op != AluOp::LutWrite;
                for i0 in 0..u64::from(lp.iter_out) {
                    for i1 in 0..u64::from(lp.iter_in) {
                        for u in uops {
                            let at = |base: u32, f: (u16, u16)| {
                                u64::from(base) + i0 * u64::from(f.0) + i1 * u64::from(f.1)
                            };
                            if !lp.reset_reg && !a.use_imm {
                                let src = at(u.src_idx, (lp.src_factor_out, lp.src_factor_in));
                                self.access(m, Location::Acc(src), false);
                            }
                            if writes_acc {
                                let dst = at(u.dst_idx, (lp.dst_factor_out, lp.dst_factor_in));
                                self.access(m, Location::Acc(dst), true);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}
