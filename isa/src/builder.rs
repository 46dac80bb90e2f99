//! Building programs in Rust: "load a tile, run a GEMM loop over micro-ops, apply the ALU,
//! store" instead of raw bits, with micro-op kernels and dependency tokens handled for you.
//!
//! Tokens follow VTA's runtime: [`ProgramBuilder::dep_push`] sets the push flag on the last
//! instruction when it belongs to the producing module (else emits a sync NOP there);
//! [`ProgramBuilder::dep_pop`] leaves a pending pop that the next instruction of the consuming
//! module absorbs. [`ProgramBuilder::finish`] drains the pipeline into a FINISH the way VTA's
//! `Synchronize` does. Micro-op kernels are stored once in a `uops` DRAM segment and loaded into
//! the micro-op buffer on first use (a ring, as VTA's kernel cache).
//!
//! ```
//! use isa::builder::{Operand, ProgramBuilder, UopLoops};
//! use isa::{AluOp, DType, HwConfig, MemType, Module, Uop};
//!
//! let cfg = HwConfig::default();
//! let mut b = ProgramBuilder::new(&cfg);
//! let acc = b.input("acc", DType::I32, vec![4, 16], vec![0; 4 * 64]);
//! let out = b.output("out", DType::I8, vec![4, 16]);
//! b.load_2d(MemType::Acc, 0, acc, 0, 1, 4, 4);
//! let copy = b.kernel(&[Uop { dst_idx: 0, src_idx: 0, wgt_idx: 0 }]);
//! b.alu(copy, UopLoops::inner(4, 1, 1), AluOp::Max, Operand::Imm(0));
//! b.dep_push(Module::Compute, Module::Store);
//! b.dep_pop(Module::Compute, Module::Store);
//! b.store_2d(0, out, 0, 1, 4, 4);
//! let program = b.finish().unwrap();
//! assert_eq!(program.segments.len(), 3);
//! ```

use crate::config::HwConfig;
use crate::insn::{
    AluInsn, AluOp, DepFlags, GemmInsn, Insn, MemInsn, MemType, Module, Uop, UopLoop,
};
use crate::layout::{Codec, UOP_BYTES};
use crate::program::{DType, Program, Role};
use crate::tokens::{self, DepFlag, Queue};

/// A DRAM segment of the program being built, or a view of one: its bytes from an offset on
/// (a tensor that lives inside another one's segment, such as one input of a channel
/// concatenation written straight into the concatenation's output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buf {
    seg: usize,
    offset: u64,
}

impl Buf {
    /// The view of this buffer `bytes` further on; addresses computed from it must land on
    /// whole elements of the memory type they count ([`ProgramBuilder::addr`]).
    pub fn view(self, bytes: u64) -> Buf {
        Buf {
            seg: self.seg,
            offset: self.offset + bytes,
        }
    }

    /// Bytes from the start of its segment.
    pub fn offset(self) -> u64 {
        self.offset
    }
}

/// A micro-op kernel registered with [`ProgramBuilder::kernel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel(usize);

/// The two affine loops around a kernel: extents and per-iteration index steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UopLoops {
    pub iter_out: u16,
    pub iter_in: u16,
    /// (outer, inner) step of the ACC destination index.
    pub dst: (u16, u16),
    /// (outer, inner) step of the source index (INP for GEMM, ACC for ALU).
    pub src: (u16, u16),
    /// (outer, inner) step of the weight index (GEMM only).
    pub wgt: (u16, u16),
}

impl UopLoops {
    /// Run the kernel once.
    pub fn once() -> Self {
        UopLoops::inner(1, 0, 0)
    }
    /// One inner loop of `n` iterations stepping dst and src.
    pub fn inner(n: u16, dst_step: u16, src_step: u16) -> Self {
        UopLoops {
            iter_out: 1,
            iter_in: n,
            dst: (0, dst_step),
            src: (0, src_step),
            wgt: (0, 0),
        }
    }
}

/// The second ALU operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// A 16-bit signed immediate, sign-extended to every lane.
    Imm(i16),
    /// The ACC row addressed by the micro-op's `src_idx`.
    Tensor,
}

/// Why a built program is not valid.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("instruction {index} ({what}): {source}")]
    Insn {
        index: usize,
        what: String,
        source: crate::layout::IsaError,
    },
    #[error("micro-op kernel {kernel} has {len} micro-ops, more than the {depth}-entry buffer")]
    KernelTooLarge {
        kernel: usize,
        len: usize,
        depth: u32,
    },
    #[error("micro-op {index} of kernel {kernel}: {source}")]
    Uop {
        kernel: usize,
        index: usize,
        source: crate::layout::IsaError,
    },
    #[error("{0}")]
    Program(String),
}

struct KernelData {
    uops: Vec<Uop>,
    /// Index of its first micro-op in the `uops` segment.
    dram_index: u32,
    /// Where it sits in the micro-op buffer, if loaded and not since overwritten.
    resident: Option<u32>,
}

/// Builds a [`Program`] instruction by instruction.
pub struct ProgramBuilder {
    program: Program,
    kernels: Vec<KernelData>,
    /// Next free slot of the micro-op buffer ring.
    uop_cursor: u32,
    /// LOAD UOP instructions whose `dram_base` still needs the `uops` segment's offset.
    uop_fixups: Vec<usize>,
    /// Pop flags waiting for the next instruction of each module.
    pending_pop: [DepFlags; 3],
    /// Every kernel an instruction used, in order ([`ProgramBuilder::rewind`]).
    used: Vec<usize>,
}

/// A point of a [`ProgramBuilder`] to rewind to.
#[derive(Debug)]
pub struct Mark {
    insns: usize,
    segments: usize,
    kernels: usize,
    resident: Vec<Option<u32>>,
    uop_cursor: u32,
    uop_fixups: usize,
    pending_pop: [DepFlags; 3],
    used: usize,
}

impl ProgramBuilder {
    pub fn new(cfg: &HwConfig) -> Self {
        ProgramBuilder {
            program: Program {
                config: cfg.clone(),
                insns: Vec::new(),
                segments: Vec::new(),
            },
            kernels: Vec::new(),
            uop_cursor: 0,
            uop_fixups: Vec::new(),
            pending_pop: [DepFlags::NONE; 3],
            used: Vec::new(),
        }
    }

    /// The builder's state now, for [`ProgramBuilder::rewind`].
    pub fn mark(&self) -> Mark {
        Mark {
            insns: self.program.insns.len(),
            segments: self.program.segments.len(),
            kernels: self.kernels.len(),
            resident: self.kernels.iter().map(|k| k.resident).collect(),
            uop_cursor: self.uop_cursor,
            uop_fixups: self.uop_fixups.len(),
            pending_pop: self.pending_pop,
            used: self.used.len(),
        }
    }

    /// Undoes everything since `mark` (instructions, buffers, kernels registered, micro-op
    /// buffer contents, pending pops) and returns the micro-ops of the kernels used since,
    /// each once, in the order of first use: a trial emission, to preload what the real one
    /// will need. Buffers created since are gone: their `Buf`s must not be used again.
    pub fn rewind(&mut self, mark: Mark) -> Vec<Vec<Uop>> {
        let mut seen = std::collections::HashSet::new();
        let used = self.used[mark.used..]
            .iter()
            .filter(|&&k| seen.insert(k))
            .map(|&k| self.kernels[k].uops.clone())
            .collect();
        self.program.insns.truncate(mark.insns);
        self.program.segments.truncate(mark.segments);
        self.kernels.truncate(mark.kernels);
        for (k, r) in self.kernels.iter_mut().zip(mark.resident) {
            k.resident = r;
        }
        self.uop_cursor = mark.uop_cursor;
        self.uop_fixups.truncate(mark.uop_fixups);
        self.pending_pop = mark.pending_pop;
        self.used.truncate(mark.used);
        used
    }

    pub fn config(&self) -> &HwConfig {
        &self.program.config
    }

    /// Adds a DRAM segment.
    pub fn buffer(
        &mut self,
        name: &str,
        dtype: DType,
        shape: Vec<usize>,
        role: Role,
        init: Option<Vec<u8>>,
    ) -> Buf {
        self.program.push_segment(name, dtype, shape, role, init);
        Buf {
            seg: self.program.segments.len() - 1,
            offset: 0,
        }
    }

    /// An input segment with default contents (little-endian bytes).
    pub fn input(&mut self, name: &str, dtype: DType, shape: Vec<usize>, data: Vec<u8>) -> Buf {
        self.buffer(name, dtype, shape, Role::INPUT, Some(data))
    }

    /// A zero-initialized output segment.
    pub fn output(&mut self, name: &str, dtype: DType, shape: Vec<usize>) -> Buf {
        self.buffer(name, dtype, shape, Role::OUTPUT, None)
    }

    /// Registers a micro-op kernel; it is loaded into the micro-op buffer when first used.
    pub fn kernel(&mut self, uops: &[Uop]) -> Kernel {
        let dram_index = self.kernels.iter().map(|k| k.uops.len() as u32).sum();
        self.kernels.push(KernelData {
            uops: uops.to_vec(),
            dram_index,
            resident: None,
        });
        Kernel(self.kernels.len() - 1)
    }

    /// The `dram_base` of element `elem` (counted in elements of type `m`) of buffer `buf`,
    /// for instructions built by hand and passed to [`ProgramBuilder::emit`]. Panics when a
    /// view's offset is not a whole number of such elements (a bug in the caller).
    pub fn addr(&self, m: MemType, buf: Buf, elem: u32) -> u32 {
        let seg = &self.program.segments[buf.seg];
        let eb = u64::from(self.program.config.elem_bytes(m));
        assert!(
            buf.offset.is_multiple_of(eb),
            "a view {} bytes into segment '{}' is not a whole number of {eb}-byte {m:?} elements",
            buf.offset,
            seg.name
        );
        ((seg.offset + buf.offset) / eb) as u32 + elem
    }

    /// A 2D load into `mem`'s scratchpad at `sram`: `y` rows of `x` elements, DRAM rows
    /// `stride` elements apart starting `elem` elements into `buf`.
    pub fn load_2d(
        &mut self,
        mem: MemType,
        sram: u32,
        buf: Buf,
        elem: u32,
        y: u16,
        x: u16,
        stride: u16,
    ) {
        self.load_padded(mem, sram, buf, elem, y, x, stride, [0; 4]);
    }

    /// A 2D load with zero padding `[y_before, y_after, x_before, x_after]`.
    #[allow(clippy::too_many_arguments)]
    pub fn load_padded(
        &mut self,
        mem: MemType,
        sram: u32,
        buf: Buf,
        elem: u32,
        y: u16,
        x: u16,
        stride: u16,
        pad: [u8; 4],
    ) {
        let dram = self.addr(mem, buf, elem);
        let m = MemInsn::transfer(mem, sram as u16, dram, y, x, stride).padded(pad);
        self.emit(Insn::Load(m));
    }

    /// A 2D store from the OUT scratchpad at `sram` into `buf`.
    pub fn store_2d(&mut self, sram: u32, buf: Buf, elem: u32, y: u16, x: u16, stride: u16) {
        let dram = self.addr(MemType::Out, buf, elem);
        let m = MemInsn::transfer(MemType::Out, sram as u16, dram, y, x, stride);
        self.emit(Insn::Store(m));
    }

    /// GEMM over `kernel` inside `loops`; `reset` zeroes the addressed ACC rows instead.
    pub fn gemm(&mut self, kernel: Kernel, loops: UopLoops, reset: bool) {
        let lp = self.uop_loop(kernel, &loops, reset);
        self.emit(Insn::Gemm(GemmInsn {
            deps: DepFlags::NONE,
            lp,
            wgt_factor_out: loops.wgt.0,
            wgt_factor_in: loops.wgt.1,
        }));
    }

    /// ALU `op` over `kernel` inside `loops`.
    pub fn alu(&mut self, kernel: Kernel, loops: UopLoops, op: AluOp, operand: Operand) {
        let lp = self.uop_loop(kernel, &loops, false);
        let (use_imm, imm) = match operand {
            Operand::Imm(v) => (true, v),
            Operand::Tensor => (false, 0),
        };
        self.emit(Insn::Alu(AluInsn {
            deps: DepFlags::NONE,
            lp,
            op,
            use_imm,
            imm,
        }));
    }

    /// Makes `kernels` resident with as few LOAD UOPs as their DRAM placement allows: each
    /// run of them that is not resident and lies back to back in DRAM (kernels registered
    /// one after another, in that order) is loaded by one LOAD UOP into consecutive entries.
    /// On the accelerator every LOAD UOP waits for the execution core to drain and for the
    /// DMA, so a group of new kernels costs one such wait instead of one per kernel. Kernels
    /// are taken in the order given, which should be the order of their use: once they add
    /// up to half the buffer the rest are left to load at their use, so that preloaded
    /// kernels never evict each other (nor the kernels used just before).
    pub fn preload(&mut self, kernels: &[Kernel]) {
        let cap = (self.program.config.depth(MemType::Uop) / 2).max(1);
        let mut total = 0;
        let mut runs: Vec<Vec<usize>> = Vec::new();
        for &Kernel(k) in kernels {
            if self.kernels[k].resident.is_some() || runs.iter().any(|r| r.contains(&k)) {
                continue;
            }
            let len = self.kernels[k].uops.len() as u32;
            total += len;
            if total > cap {
                break;
            }
            let extends = runs.last().is_some_and(|run| {
                let last = &self.kernels[run[run.len() - 1]];
                last.dram_index + last.uops.len() as u32 == self.kernels[k].dram_index
            });
            match runs.last_mut() {
                Some(run) if extends => run.push(k),
                _ => runs.push(vec![k]),
            }
        }
        for run in runs {
            self.load_kernels(&run);
        }
    }

    /// Loads `run` (kernels back to back in DRAM) into consecutive micro-op buffer entries
    /// at the ring's cursor with one LOAD UOP, evicting the kernels it overwrites.
    fn load_kernels(&mut self, run: &[usize]) {
        let depth = self.program.config.depth(MemType::Uop);
        // A kernel that does not fit is reported by `finish`; clamp to keep going.
        let len = run
            .iter()
            .map(|&k| self.kernels[k].uops.len() as u32)
            .sum::<u32>()
            .min(depth);
        if self.uop_cursor + len > depth {
            self.uop_cursor = 0;
        }
        let at = self.uop_cursor;
        self.uop_cursor += len;
        for k in &mut self.kernels {
            if let Some(r) = k.resident {
                let klen = k.uops.len() as u32;
                if r < at + len && at < r + klen {
                    k.resident = None;
                }
            }
        }
        let dram = self.kernels[run[0]].dram_index;
        for &k in run {
            self.kernels[k].resident = Some(at + self.kernels[k].dram_index - dram);
        }
        let m = MemInsn::transfer(MemType::Uop, at as u16, dram, 1, len as u16, len as u16);
        self.uop_fixups.push(self.program.insns.len());
        self.emit(Insn::Load(m));
    }

    /// Makes `kernel` resident (emitting a LOAD UOP if needed) and returns its loop fields.
    fn uop_loop(&mut self, kernel: Kernel, loops: &UopLoops, reset: bool) -> UopLoop {
        let len = self.kernels[kernel.0].uops.len() as u32;
        if self.kernels[kernel.0].resident.is_none() {
            self.load_kernels(&[kernel.0]);
        }
        let start = self.kernels[kernel.0].resident.expect("just loaded");
        self.used.push(kernel.0);
        UopLoop {
            reset_reg: reset,
            uop_bgn: start as u16,
            uop_end: (start + len) as u16,
            iter_out: loops.iter_out,
            iter_in: loops.iter_in,
            dst_factor_out: loops.dst.0,
            dst_factor_in: loops.dst.1,
            src_factor_out: loops.src.0,
            src_factor_in: loops.src.1,
        }
    }

    /// Appends an instruction, giving it the pops pending on its module.
    pub fn emit(&mut self, mut insn: Insn) {
        let m = insn.module() as usize;
        let d = insn.deps_mut();
        let pending = std::mem::take(&mut self.pending_pop[m]);
        d.pop_prev |= pending.pop_prev;
        d.pop_next |= pending.pop_next;
        self.program.insns.push(insn);
    }

    /// The instructions emitted so far.
    pub fn insns(&self) -> &[Insn] {
        &self.program.insns
    }

    /// A sync instruction for `module`: moves no data, only carries tokens.
    fn nop(module: Module) -> Insn {
        match module {
            Module::Load => Insn::Load(MemInsn::sync(MemType::Inp)),
            Module::Compute => Insn::Load(MemInsn::sync(MemType::Uop)),
            Module::Store => Insn::Store(MemInsn::sync(MemType::Out)),
        }
    }

    /// Emits pending pops of `module` on a sync instruction of their own.
    fn commit_pops(&mut self, module: Module) {
        if !self.pending_pop[module as usize].is_empty() {
            self.emit(Self::nop(module));
        }
    }

    /// Signals a token from module `from` to the adjacent module `to`, after everything
    /// `from` has been given so far.
    pub fn dep_push(&mut self, from: Module, to: Module) {
        let flag = token_flag(from, to, true);
        self.commit_pops(from);
        let last_fits = self
            .program
            .insns
            .last()
            .is_some_and(|i| i.module() == from && !i.deps().get(flag));
        if !last_fits {
            self.emit(Self::nop(from));
        }
        let d = self
            .program
            .insns
            .last_mut()
            .expect("an instruction")
            .deps_mut();
        d.set(flag, true);
    }

    /// Makes the next instruction of module `to` wait for a token from the adjacent `from`.
    pub fn dep_pop(&mut self, from: Module, to: Module) {
        let flag = token_flag(from, to, false);
        if self.pending_pop[to as usize].get(flag) {
            self.commit_pops(to);
        }
        self.pending_pop[to as usize].set(flag, true);
    }

    /// Drains the pipeline (store and load signal compute, which waits for both), appends
    /// FINISH, stores the micro-op kernels in a `uops` segment, and checks the result.
    pub fn finish(mut self) -> Result<Program, BuildError> {
        self.dep_push(Module::Store, Module::Compute);
        self.dep_push(Module::Load, Module::Compute);
        self.dep_pop(Module::Store, Module::Compute);
        self.dep_pop(Module::Load, Module::Compute);
        self.emit(Insn::Finish(DepFlags::NONE));
        self.into_program()
    }

    /// The program as built, without draining the pipeline or adding FINISH: for streams
    /// whose tokens and FINISH were written by hand with [`ProgramBuilder::emit`].
    pub fn into_program(mut self) -> Result<Program, BuildError> {
        let cfg = self.program.config.clone();
        let codec = Codec::new(&cfg);
        if !self.kernels.is_empty() {
            let mut bytes = Vec::new();
            for (ki, k) in self.kernels.iter().enumerate() {
                if k.uops.len() > cfg.depth(MemType::Uop) as usize {
                    return Err(BuildError::KernelTooLarge {
                        kernel: ki,
                        len: k.uops.len(),
                        depth: cfg.depth(MemType::Uop),
                    });
                }
                for (index, u) in k.uops.iter().enumerate() {
                    let enc = codec.encode_uop(u).map_err(|source| BuildError::Uop {
                        kernel: ki,
                        index,
                        source,
                    })?;
                    bytes.extend(enc);
                }
            }
            let n = bytes.len() / UOP_BYTES;
            let offset = self.program.push_segment(
                "uops",
                DType::Uop,
                vec![n],
                Role::default(),
                Some(bytes),
            );
            let base = (offset / 4) as u32;
            for &i in &self.uop_fixups {
                if let Insn::Load(m) = &mut self.program.insns[i] {
                    m.dram_base += base;
                }
            }
        }
        for (index, insn) in self.program.insns.iter().enumerate() {
            codec.encode(insn).map_err(|source| BuildError::Insn {
                index,
                what: format!("{:?} on {}", insn.opcode(), insn.module().name()),
                source,
            })?;
        }
        self.program.validate().map_err(BuildError::Program)?;
        Ok(self.program)
    }
}

/// The flag that pushes (on `from`) or pops (on `to`) the queue from `from` to `to`; panics
/// if the modules are not adjacent (a bug in the caller).
fn token_flag(from: Module, to: Module, push: bool) -> DepFlag {
    let queue = Queue::between(from, to).unwrap_or_else(|| {
        panic!(
            "tokens flow only between adjacent modules (load-compute, compute-store), not {} -> {}",
            from.name(),
            to.name()
        )
    });
    let module = if push { from } else { to };
    tokens::legal_flags(module)
        .find(|&(f, q)| q == queue && f.is_push() == push)
        .map(|(f, _)| f)
        .expect("every queue is pushed and popped by a flag")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_are_absorbed_and_pushes_attach_to_the_producer() {
        let cfg = HwConfig::default();
        let mut b = ProgramBuilder::new(&cfg);
        let x = b.input("x", DType::I8, vec![16], vec![0; 16]);
        b.load_2d(MemType::Inp, 0, x, 0, 1, 1, 1);
        b.dep_push(Module::Load, Module::Compute);
        b.dep_pop(Module::Load, Module::Compute);
        let k = b.kernel(&[Uop::default()]);
        b.gemm(k, UopLoops::once(), true);
        let p = b.finish().unwrap();
        // load(push_next), load uop(pop_prev), gemm, store nop(push_prev), load nop(push_next),
        // finish(pop both)
        let deps: Vec<_> = p.insns.iter().map(|i| (i.module(), i.deps())).collect();
        assert!(deps[0].1.push_next);
        assert_eq!(deps[1].0, Module::Compute);
        assert!(deps[1].1.pop_prev, "the LOAD UOP absorbs the pending pop");
        assert!(!deps[2].1.pop_prev);
        let fin = p.insns.last().unwrap();
        assert!(matches!(fin, Insn::Finish(d) if d.pop_prev && d.pop_next));
        assert_eq!(p.segment("uops").unwrap().len(), 1);
    }

    #[test]
    fn a_view_addresses_its_segment_from_its_offset_on() {
        let cfg = HwConfig::default();
        let eb = u64::from(cfg.elem_bytes(MemType::Out));
        let mut b = ProgramBuilder::new(&cfg);
        let _first = b.output("first", DType::I8, vec![64]);
        let y = b.output("y", DType::I8, vec![4, 16]);
        let base = b.addr(MemType::Out, y, 0);
        let v = y.view(2 * eb);
        assert_eq!(v.offset(), 2 * eb);
        assert_eq!(b.addr(MemType::Out, v, 1), base + 3);
        assert_eq!(v.view(eb), y.view(3 * eb));
        let bad = std::panic::catch_unwind(|| b.addr(MemType::Out, y.view(1), 0));
        assert!(bad.is_err(), "a view inside an element is a caller's bug");
    }

    #[test]
    fn kernels_are_loaded_once_until_evicted() {
        let cfg = HwConfig::preset("small").unwrap();
        let depth = cfg.depth(MemType::Uop) as usize;
        let mut b = ProgramBuilder::new(&cfg);
        let a = b.kernel(&vec![Uop::default(); depth / 2 + 1]);
        let c = b.kernel(&vec![Uop::default(); depth / 2 + 1]);
        b.gemm(a, UopLoops::once(), true);
        b.gemm(a, UopLoops::once(), true);
        b.gemm(c, UopLoops::once(), true); // wraps to 0 and evicts `a`
        b.gemm(a, UopLoops::once(), true);
        let p = b.finish().unwrap();
        let uop_loads = p
            .insns
            .iter()
            .filter(|i| matches!(i, Insn::Load(m) if m.memory_type == MemType::Uop && m.x_size > 0))
            .count();
        assert_eq!(uop_loads, 3);
    }

    #[test]
    fn a_rewind_undoes_a_trial_and_reports_the_kernels_it_used() {
        let cfg = HwConfig::default();
        let mut b = ProgramBuilder::new(&cfg);
        let resident = b.kernel(&[uop(1)]);
        b.gemm(resident, UopLoops::once(), true);
        b.dep_pop(Module::Load, Module::Compute);
        let mark = b.mark();
        let before = (b.insns().to_vec(), b.kernels.len());
        let fresh = b.kernel(&[uop(2), uop(3)]);
        b.gemm(fresh, UopLoops::once(), false);
        b.gemm(resident, UopLoops::once(), false);
        b.gemm(fresh, UopLoops::once(), false);
        b.output("y", DType::I8, vec![16]);
        let used = b.rewind(mark);
        assert_eq!(used, vec![vec![uop(2), uop(3)], vec![uop(1)]]);
        assert_eq!((b.insns().to_vec(), b.kernels.len()), before);
        assert_eq!(b.program.segments.len(), 0);
        // The pending pop is there again, and the kernel still resident.
        b.gemm(resident, UopLoops::once(), false);
        let p = b.finish().unwrap();
        assert_eq!(uop_loads(&p).len(), 1);
        assert!(p.insns[2].deps().pop_prev);
    }

    /// A micro-op writing ACC row `d`.
    fn uop(d: u32) -> Uop {
        Uop {
            dst_idx: d,
            src_idx: 0,
            wgt_idx: 0,
        }
    }

    /// The LOAD UOPs of a program: (SRAM base, DRAM base, micro-ops).
    fn uop_loads(p: &Program) -> Vec<(u16, u32, u16)> {
        p.insns
            .iter()
            .filter_map(|i| match i {
                Insn::Load(m) if m.memory_type == MemType::Uop && m.x_size > 0 => {
                    Some((m.sram_base, m.dram_base, m.x_size))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn preloading_loads_kernels_back_to_back_in_dram_with_one_load() {
        let cfg = HwConfig::default();
        let mut b = ProgramBuilder::new(&cfg);
        let first = b.kernel(&[uop(1)]);
        b.gemm(first, UopLoops::once(), true);
        let (x, y, z) = (
            b.kernel(&[uop(2), uop(3)]),
            b.kernel(&[uop(4)]),
            b.kernel(&[uop(5); 3]),
        );
        // `first` is resident already and `y` is named twice: x, y and z are one run.
        b.preload(&[first, x, y, y, z]);
        for k in [first, x, y, z] {
            b.alu(k, UopLoops::once(), AluOp::Add, Operand::Imm(1));
        }
        let p = b.finish().unwrap();
        let base = uop_loads(&p)[0].1;
        // `first`, then x, y and z (DRAM 1..7) in one load into entries 1..7.
        assert_eq!(uop_loads(&p), vec![(0, base, 1), (1, base + 1, 6)]);
        let alus: Vec<(u16, u16)> = p
            .insns
            .iter()
            .filter_map(|i| match i {
                Insn::Alu(a) => Some((a.lp.uop_bgn, a.lp.uop_end)),
                _ => None,
            })
            .collect();
        assert_eq!(alus, vec![(0, 1), (1, 3), (3, 4), (4, 7)]);
    }

    #[test]
    fn preloading_stops_at_half_the_buffer_and_leaves_the_rest_to_their_use() {
        let cfg = HwConfig::preset("small").unwrap();
        let quarter = cfg.depth(MemType::Uop) as usize / 4;
        let mut b = ProgramBuilder::new(&cfg);
        let ks: Vec<Kernel> = (0..4)
            .map(|_| b.kernel(&vec![Uop::default(); quarter]))
            .collect();
        b.preload(&ks);
        for &k in &ks {
            b.gemm(k, UopLoops::once(), true);
        }
        let p = b.finish().unwrap();
        let q = quarter as u16;
        let loads: Vec<(u16, u16)> = uop_loads(&p).iter().map(|l| (l.0, l.2)).collect();
        // The first two in one load; the others at their use, each loaded once.
        assert_eq!(loads, vec![(0, 2 * q), (2 * q, q), (3 * q, q)]);
    }

    #[test]
    fn preloading_kernels_apart_in_dram_takes_a_load_for_each_run() {
        let cfg = HwConfig::default();
        let mut b = ProgramBuilder::new(&cfg);
        let (x, y, z) = (
            b.kernel(&[Uop::default()]),
            b.kernel(&[Uop::default(); 2]),
            b.kernel(&[Uop::default(); 3]),
        );
        // `z` then `x`: not back to back in that order; `y` follows `x`.
        b.preload(&[z, x, y]);
        for k in [x, y, z] {
            b.gemm(k, UopLoops::once(), true);
        }
        let p = b.finish().unwrap();
        let base = uop_loads(&p)[0].1 - 3;
        assert_eq!(uop_loads(&p), vec![(0, base + 3, 3), (3, base, 3)]);
    }
}
