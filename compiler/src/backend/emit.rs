//! Instruction emission shared by every layer: checked DMA (with zero-fill of pads the
//! 4-bit pad fields cannot express, and coalescing of adjacent transfers), micro-op kernels
//! built from affine loop nests (deduplicated by content), and the token protocol of the
//! double-buffered pipeline.
//!
//! # Token protocol
//!
//! Within a layer, *chunks* (one input/weight tile pair and its GEMMs) alternate between the
//! two halves of INP and WGT, and *tiles* (one accumulator tile, its epilogue and its stores)
//! between the two halves of ACC:
//!
//! ```text
//! load    chunk i:  [pop g2l if i >= 2]  LOAD INP/WGT into half i%2       push l2g
//! compute chunk i:  pop l2g  GEMM (reads half i%2)   [push g2l if chunk i+2 exists]
//! compute tile j:   [pop s2g if j >= 2]  LOAD ACC tables, reset  ...chunks...  ALU epilogue  push g2s
//! store   tile j:   pop g2s  STORE from half j%2    [push s2g if tile j+2 exists]
//! ```
//!
//! A layer may move tile `j`'s `pop s2g` into tile `j-1`, between two of its chunks
//! ([`Pipeline::claim_next_half`]), to start work on tile `j`'s half there (a convolution's
//! accumulator reset on the ALU).
//!
//! Every push is matched by exactly one pop, and each pop's push comes earlier in the stream,
//! so the stream also runs in order on hardware that fetches instructions in order. Between
//! layers, [`Ctx::barrier`] makes compute wait for every store and the load module wait for
//! compute, so a layer may read what the previous one stored.

use std::collections::HashMap;

use isa::builder::{Buf, Kernel, Operand, ProgramBuilder, UopLoops};
use isa::{AluOp, HwConfig, MemType, Module, Uop};

use super::tiling::{Budget, MAX_DMA, MAX_ITER, MAX_PAD};
use super::BackendError;

/// One 2D DMA transfer: `y` rows of `x` elements, DRAM rows `stride` elements apart, starting
/// at element `elem` of `buf`, with zero padding `[top, bottom, left, right]` (LOAD only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dma {
    pub mem: MemType,
    pub sram: usize,
    pub buf: Buf,
    pub elem: usize,
    pub y: usize,
    pub x: usize,
    pub stride: usize,
    pub pad: [usize; 4],
}

impl Dma {
    /// A dense transfer of `x` elements.
    pub fn row(mem: MemType, sram: usize, buf: Buf, elem: usize, x: usize) -> Self {
        Dma {
            mem,
            sram,
            buf,
            elem,
            y: 1,
            x,
            stride: x,
            pad: [0; 4],
        }
    }

    /// SRAM elements written (loads) or read (stores).
    pub fn sram_len(&self) -> usize {
        (self.pad[0] + self.y + self.pad[1]) * (self.pad[2] + self.x + self.pad[3])
    }

    fn unpadded(&self) -> bool {
        self.pad == [0; 4]
    }
}

/// Merges consecutive unpadded transfers that continue each other in SRAM and DRAM.
pub fn coalesce(ops: Vec<Dma>) -> Vec<Dma> {
    let mut out: Vec<Dma> = Vec::with_capacity(ops.len());
    for mut d in ops {
        if d.y == 1 {
            d.stride = d.x;
        }
        if let Some(a) = out.last_mut() {
            if a.unpadded() && d.unpadded() && a.mem == d.mem && a.buf == d.buf {
                let contiguous_sram = d.sram == a.sram + a.y * a.x;
                // One longer row.
                if a.y == 1
                    && d.y == 1
                    && contiguous_sram
                    && d.elem == a.elem + a.x
                    && a.x + d.x <= MAX_DMA
                {
                    a.x += d.x;
                    a.stride = a.x;
                    continue;
                }
                // More rows of the same width.
                if contiguous_sram && d.x == a.x && d.elem > a.elem {
                    let stride = if a.y == 1 { d.elem - a.elem } else { a.stride };
                    let same_stride = d.y == 1 || d.stride == stride;
                    if stride >= a.x
                        && stride <= MAX_DMA
                        && d.elem == a.elem + a.y * stride
                        && same_stride
                        && a.y + d.y <= MAX_DMA
                    {
                        a.stride = stride;
                        a.y += d.y;
                        continue;
                    }
                }
            }
        }
        out.push(d);
    }
    out
}

/// One affine dimension of a micro-op loop nest: its extent and the index steps of its
/// iterations. Dimensions that are not made hardware loops are enumerated as micro-ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim {
    pub ext: usize,
    pub dst: usize,
    pub src: usize,
    pub wgt: usize,
}

impl Dim {
    pub fn new(ext: usize, dst: usize, src: usize, wgt: usize) -> Self {
        Dim { ext, dst, src, wgt }
    }
}

/// One ALU instruction of [`Ctx::alu_group`], as [`Ctx::alu`] takes it.
#[derive(Debug, Clone)]
pub struct AluStep {
    pub op: AluOp,
    pub operand: Operand,
    pub dst: usize,
    pub src: usize,
    pub dims: Vec<Dim>,
}

/// What a layer's emission adds up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EmitStats {
    pub insns: usize,
    pub kernels: usize,
    pub kernel_uops: usize,
}

/// The program being built plus the state shared by all its layers.
pub struct Ctx {
    pub b: ProgramBuilder,
    pub cfg: HwConfig,
    pub budget: Budget,
    kernels: HashMap<Vec<Uop>, Kernel>,
    pub stats: EmitStats,
}

fn internal(what: String) -> BackendError {
    BackendError::Internal(what)
}

impl Ctx {
    pub fn new(cfg: &HwConfig) -> Self {
        Ctx {
            b: ProgramBuilder::new(cfg),
            cfg: cfg.clone(),
            budget: Budget::new(cfg),
            kernels: HashMap::new(),
            stats: EmitStats::default(),
        }
    }

    /// The kernel with these micro-ops, registered once.
    pub fn kernel(&mut self, uops: Vec<Uop>) -> Kernel {
        if let Some(k) = self.kernels.get(&uops) {
            return *k;
        }
        self.stats.kernels += 1;
        self.stats.kernel_uops += uops.len();
        let k = self.b.kernel(&uops);
        self.kernels.insert(uops, k);
        k
    }

    /// Runs `emit` as a trial, then undoes it, and makes the kernels it used resident, in
    /// its order, with as few LOAD UOPs as [`ProgramBuilder::preload`] can (before anything
    /// runs, rather than one before each first use: each LOAD UOP waits for an idle core).
    pub fn preload_for(
        &mut self,
        emit: impl FnOnce(&mut Ctx) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        let mark = self.b.mark();
        let (kernels, stats) = (self.kernels.clone(), self.stats);
        emit(self)?;
        let used = self.b.rewind(mark);
        self.kernels = kernels;
        self.stats = stats;
        let used: Vec<Kernel> = used.into_iter().map(|u| self.kernel(u)).collect();
        self.b.preload(&used);
        Ok(())
    }

    fn depth(&self, m: MemType) -> usize {
        self.cfg.depth(m) as usize
    }

    /// Emits a LOAD. Empty transfers become zero fills; pads above [`MAX_PAD`] rows become
    /// zero fills of their own.
    pub fn load(&mut self, d: Dma) -> Result<(), BackendError> {
        let total = d.sram_len();
        if total == 0 {
            return Ok(());
        }
        if d.sram + total > self.depth(d.mem) {
            return Err(internal(format!("{d:?} overflows the {} buffer", d.mem)));
        }
        if d.y == 0 || d.x == 0 {
            return self.zero_fill(d.mem, d.sram, d.buf, total);
        }
        let width = d.pad[2] + d.x + d.pad[3];
        let mut d = d;
        if d.pad[0] > MAX_PAD {
            self.zero_fill(d.mem, d.sram, d.buf, d.pad[0] * width)?;
            d.sram += d.pad[0] * width;
            d.pad[0] = 0;
        }
        if d.pad[1] > MAX_PAD {
            let at = d.sram + (d.pad[0] + d.y) * width;
            self.zero_fill(d.mem, at, d.buf, d.pad[1] * width)?;
            d.pad[1] = 0;
        }
        if d.pad[2] > MAX_PAD || d.pad[3] > MAX_PAD {
            return Err(internal(format!("{d:?}: x pad above {MAX_PAD}")));
        }
        if d.y > MAX_DMA || d.x > MAX_DMA || d.stride > MAX_DMA || d.sram > MAX_DMA {
            return Err(internal(format!("{d:?}: a DMA field overflows")));
        }
        self.b.load_padded(
            d.mem,
            d.sram as u32,
            d.buf,
            d.elem as u32,
            d.y as u16,
            d.x as u16,
            d.stride as u16,
            d.pad.map(|p| p as u8),
        );
        self.stats.insns += 1;
        Ok(())
    }

    /// Writes `len` zero elements at `sram` (a LOAD whose rows are all padding).
    fn zero_fill(
        &mut self,
        mem: MemType,
        sram: usize,
        buf: Buf,
        len: usize,
    ) -> Result<(), BackendError> {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(MAX_DMA);
            if sram + done > MAX_DMA {
                return Err(internal("zero fill beyond the 16-bit sram_base".into()));
            }
            self.b.load_padded(
                mem,
                (sram + done) as u32,
                buf,
                0,
                0,
                n as u16,
                n as u16,
                [1, 0, 0, 0],
            );
            self.stats.insns += 1;
            done += n;
        }
        Ok(())
    }

    /// Emits a STORE from the OUT buffer.
    pub fn store(&mut self, d: Dma) -> Result<(), BackendError> {
        if d.y == 0 || d.x == 0 {
            return Ok(());
        }
        if !d.unpadded()
            || d.y > MAX_DMA
            || d.x > MAX_DMA
            || d.stride > MAX_DMA
            || d.sram + d.x * d.y > self.depth(MemType::Acc)
        {
            return Err(internal(format!("{d:?}: store fields overflow")));
        }
        self.b.store_2d(
            d.sram as u32,
            d.buf,
            d.elem as u32,
            d.y as u16,
            d.x as u16,
            d.stride as u16,
        );
        self.stats.insns += 1;
        Ok(())
    }

    /// Splits `dims` into up to two hardware loops (largest extents whose steps fit the
    /// loop-factor fields) and the rest, enumerated around `base` into micro-ops; returns the
    /// micro-ops and the loops.
    fn nest(
        &self,
        base: &[Uop],
        dims: &[Dim],
        gemm: bool,
    ) -> Result<(Vec<Uop>, UopLoops), BackendError> {
        let bits = |m| self.cfg.log_depth(m);
        let fits = |v: usize, m: MemType| v < (1usize << bits(m));
        let src_mem = if gemm { MemType::Inp } else { MemType::Acc };
        let loopable = |d: &Dim| {
            d.ext > 1
                && d.ext <= MAX_ITER
                && fits(d.dst, MemType::Acc)
                && fits(d.src, src_mem)
                && (!gemm || fits(d.wgt, MemType::Wgt))
        };
        let mut order: Vec<usize> = (0..dims.len()).filter(|&i| loopable(&dims[i])).collect();
        order.sort_by(|&a, &b| dims[b].ext.cmp(&dims[a].ext).then(a.cmp(&b)));
        let mut chosen: Vec<usize> = order.into_iter().take(2).collect();
        chosen.sort_unstable();
        let mut uops = base.to_vec();
        for (i, d) in dims.iter().enumerate() {
            if chosen.contains(&i) || d.ext == 1 {
                continue;
            }
            let mut next = Vec::with_capacity(uops.len() * d.ext);
            for k in 0..d.ext {
                for u in &uops {
                    next.push(Uop {
                        dst_idx: u.dst_idx + (k * d.dst) as u32,
                        src_idx: u.src_idx + (k * d.src) as u32,
                        wgt_idx: u.wgt_idx + (k * d.wgt) as u32,
                    });
                }
            }
            uops = next;
        }
        let lp = |i: Option<&usize>| i.map(|&i| dims[i]).unwrap_or(Dim::new(1, 0, 0, 0));
        let (outer, inner) = match chosen.len() {
            2 => (lp(chosen.first()), lp(chosen.get(1))),
            1 => (Dim::new(1, 0, 0, 0), lp(chosen.first())),
            _ => (Dim::new(1, 0, 0, 0), Dim::new(1, 0, 0, 0)),
        };
        let loops = UopLoops {
            iter_out: outer.ext as u16,
            iter_in: inner.ext as u16,
            dst: (outer.dst as u16, inner.dst as u16),
            src: (outer.src as u16, inner.src as u16),
            wgt: if gemm {
                (outer.wgt as u16, inner.wgt as u16)
            } else {
                (0, 0)
            },
        };
        // Every index the nest reaches must lie in its buffer.
        let reach = |u: &Uop, f: fn(&Uop) -> u32, s: fn(&Dim) -> usize| {
            f(u) as usize + (outer.ext - 1) * s(&outer) + (inner.ext - 1) * s(&inner)
        };
        for u in &uops {
            let dst = reach(u, |u| u.dst_idx, |d| d.dst);
            let src = reach(u, |u| u.src_idx, |d| d.src);
            let wgt = reach(u, |u| u.wgt_idx, |d| d.wgt);
            if dst >= self.depth(MemType::Acc)
                || src >= self.depth(src_mem)
                || (gemm && wgt >= self.depth(MemType::Wgt))
            {
                return Err(internal(format!(
                    "micro-op {u:?} with loops {loops:?} leaves its buffers"
                )));
            }
        }
        Ok((uops, loops))
    }

    /// GEMM (or a reset, which uses only `dst`) of `base` over `dims`; kernels longer than
    /// the budget's limit are split over several instructions.
    pub fn gemm(&mut self, base: &[Uop], dims: &[Dim], reset: bool) -> Result<(), BackendError> {
        let (uops, loops) = self.nest(base, dims, true)?;
        for k in self.pieces(&uops) {
            self.b.gemm(k, loops, reset);
            self.stats.insns += 1;
        }
        Ok(())
    }

    /// Zeroes the ACC rows `dst` reaches over `dims` (their `dst` steps): a GEMM reset, on
    /// the GEMM pipeline.
    pub fn reset(&mut self, dst: usize, dims: &[Dim]) -> Result<(), BackendError> {
        let uop = Uop {
            dst_idx: dst as u32,
            src_idx: 0,
            wgt_idx: 0,
        };
        self.gemm(&[uop], dims, true)
    }

    /// Copies activation rows loaded into INP from `src` into ACC at `dst` over `dims`
    /// (their `dst` and `src` steps), sign-extended as LOAD ACC8 would: a GEMM with the
    /// identity weight tile ([`super::layout::identity_tile`]) at WGT row `wgt`, onto
    /// destination rows that hold zeros. It runs on the GEMM core, beside the ALU, where a
    /// LOAD ACC8 would wait for the whole core to be idle.
    pub fn copy_rows(
        &mut self,
        dst: usize,
        src: usize,
        wgt: usize,
        dims: &[Dim],
    ) -> Result<(), BackendError> {
        let uop = Uop {
            dst_idx: dst as u32,
            src_idx: src as u32,
            wgt_idx: wgt as u32,
        };
        self.gemm(&[uop], dims, false)
    }

    /// `uops` as kernels within the budget's length limit.
    fn pieces(&mut self, uops: &[Uop]) -> Vec<Kernel> {
        let limit = self.budget.kernel_limit();
        uops.chunks(limit)
            .map(|piece| self.kernel(piece.to_vec()))
            .collect()
    }

    /// ALU `op` with destination rows from `dst` and operand rows from `src` (ignored for an
    /// immediate) over `dims`.
    pub fn alu(
        &mut self,
        op: AluOp,
        operand: Operand,
        dst: usize,
        src: usize,
        dims: &[Dim],
    ) -> Result<(), BackendError> {
        self.alu_group(&[AluStep {
            op,
            operand,
            dst,
            src,
            dims: dims.to_vec(),
        }])
    }

    /// ALU instructions in order, their kernels made resident first: the new ones then come
    /// in one LOAD UOP ([`ProgramBuilder::preload`]) rather than one before each instruction.
    pub fn alu_group(&mut self, steps: &[AluStep]) -> Result<(), BackendError> {
        let mut planned = Vec::new();
        for s in steps {
            let imm = matches!(s.operand, Operand::Imm(_));
            let base = Uop {
                dst_idx: s.dst as u32,
                src_idx: if imm { 0 } else { s.src as u32 },
                wgt_idx: 0,
            };
            let dims: Vec<Dim> = s
                .dims
                .iter()
                .map(|d| Dim::new(d.ext, d.dst, if imm { 0 } else { d.src }, 0))
                .collect();
            let (uops, loops) = self.nest(&[base], &dims, false)?;
            for k in self.pieces(&uops) {
                planned.push((k, loops, s.op, s.operand));
            }
        }
        let kernels: Vec<Kernel> = planned.iter().map(|p| p.0).collect();
        self.b.preload(&kernels);
        for (k, loops, op, operand) in planned {
            self.b.alu(k, loops, op, operand);
            self.stats.insns += 1;
        }
        Ok(())
    }

    /// Orders everything before it against everything after it: compute waits for every
    /// store, and the load module for compute.
    pub fn barrier(&mut self) {
        self.b.dep_push(Module::Store, Module::Compute);
        self.b.dep_pop(Module::Store, Module::Compute);
        self.b.dep_push(Module::Compute, Module::Load);
        self.b.dep_pop(Module::Compute, Module::Load);
    }
}

/// The double-buffering token protocol of one layer (see the module documentation), with
/// the contents of each half so that loads of data already in place are skipped.
pub struct Pipeline<K: PartialEq + Clone> {
    total_chunks: usize,
    total_tiles: usize,
    chunk: usize,
    tile: usize,
    inp: [Option<K>; 2],
    wgt: [Option<K>; 2],
    tab: [Option<K>; 2],
    /// The next tile's ACC half was waited for already ([`Pipeline::claim_next_half`]).
    next_claimed: bool,
    /// Chunks share INP and WGT halves, so a chunk's loads wait for the GEMMs of the chunk
    /// two before; without, every chunk has places of its own ([`Pipeline::own_places`]).
    shared_halves: bool,
}

impl<K: PartialEq + Clone> Pipeline<K> {
    pub fn new(total_tiles: usize, total_chunks: usize) -> Self {
        Pipeline {
            total_chunks,
            total_tiles,
            chunk: 0,
            tile: 0,
            inp: [None, None],
            wgt: [None, None],
            tab: [None, None],
            next_claimed: false,
            shared_halves: true,
        }
    }

    /// Every chunk's input and weights have places of their own (a resident tiling): the
    /// loads never overwrite what a GEMM still reads, so they run ahead without waiting.
    pub fn own_places(mut self) -> Self {
        self.shared_halves = false;
        self
    }

    /// ACC half of the current tile.
    pub fn acc_half(&self) -> usize {
        self.tile % 2
    }

    /// INP/WGT half of the current chunk.
    pub fn chunk_half(&self) -> usize {
        self.chunk % 2
    }

    /// Starts a tile: compute waits until the store of the tile two before has drained this
    /// ACC half. Returns whether the tile's constant rows (`key`) must be loaded.
    pub fn begin_tile(&mut self, ctx: &mut Ctx, tab_key: K) -> bool {
        if self.tile >= 2 && !self.next_claimed {
            ctx.b.dep_pop(Module::Store, Module::Compute);
        }
        self.next_claimed = false;
        let h = self.acc_half();
        let need = self.tab[h].as_ref() != Some(&tab_key);
        self.tab[h] = Some(tab_key);
        need
    }

    /// Inside a tile: compute waits until the next tile's ACC half is drained (what
    /// [`Pipeline::begin_tile`] would wait for), so that work on it can start early.
    pub fn claim_next_half(&mut self, ctx: &mut Ctx) {
        debug_assert!(
            self.tile + 1 < self.total_tiles,
            "the last tile has no next one"
        );
        if self.tile + 1 >= 2 && !self.next_claimed {
            ctx.b.dep_pop(Module::Store, Module::Compute);
        }
        self.next_claimed = true;
    }

    /// Records that the next tile's ACC half holds the constant rows `tab_key` already
    /// (loaded with this tile's).
    pub fn next_half_holds(&mut self, tab_key: K) {
        self.tab[self.next_acc_half()] = Some(tab_key);
    }

    /// ACC half of the next tile.
    pub fn next_acc_half(&self) -> usize {
        (self.tile + 1) % 2
    }

    /// Starts the loads of a chunk; returns whether its input and its weights must be loaded.
    pub fn begin_chunk_loads(&mut self, ctx: &mut Ctx, inp_key: K, wgt_key: K) -> (bool, bool) {
        if self.chunk >= 2 && self.shared_halves {
            ctx.b.dep_pop(Module::Compute, Module::Load);
        }
        let h = self.chunk_half();
        let need_inp = self.inp[h].as_ref() != Some(&inp_key);
        let need_wgt = self.wgt[h].as_ref() != Some(&wgt_key);
        self.inp[h] = Some(inp_key);
        self.wgt[h] = Some(wgt_key);
        (need_inp, need_wgt)
    }

    /// Ends the loads of a chunk and makes compute wait for them.
    pub fn end_chunk_loads(&mut self, ctx: &mut Ctx) {
        ctx.b.dep_push(Module::Load, Module::Compute);
        ctx.b.dep_pop(Module::Load, Module::Compute);
    }

    /// After the chunk's GEMMs: frees its half for the chunk two later.
    pub fn end_chunk(&mut self, ctx: &mut Ctx) {
        if self.chunk + 2 < self.total_chunks && self.shared_halves {
            ctx.b.dep_push(Module::Compute, Module::Load);
        }
        self.chunk += 1;
    }

    /// After the epilogue: hands the tile to the store module.
    pub fn results_ready(&mut self, ctx: &mut Ctx) {
        ctx.b.dep_push(Module::Compute, Module::Store);
        ctx.b.dep_pop(Module::Compute, Module::Store);
    }

    /// After the tile's stores: frees its ACC half for the tile two later.
    pub fn end_tile(&mut self, ctx: &mut Ctx) {
        if self.tile + 2 < self.total_tiles {
            ctx.b.dep_push(Module::Store, Module::Compute);
        }
        self.tile += 1;
    }

    /// Checks that the protocol ran to completion.
    pub fn finish(&self) -> Result<(), BackendError> {
        if self.chunk != self.total_chunks || self.tile != self.total_tiles {
            return Err(internal(format!(
                "pipeline ended after {}/{} chunks and {}/{} tiles",
                self.chunk, self.total_chunks, self.tile, self.total_tiles
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_joins_rows_and_planes() {
        let cfg = HwConfig::default();
        let mut b = ProgramBuilder::new(&cfg);
        let buf = b.output("o", isa::DType::I8, vec![1024]);
        let rows: Vec<Dma> = (0..4)
            .map(|r| Dma::row(MemType::Out, r * 7, buf, r * 7, 7))
            .collect();
        assert_eq!(coalesce(rows), vec![Dma::row(MemType::Out, 0, buf, 0, 28)]);
        // rows 10 apart in DRAM, dense in SRAM: one 2D transfer
        let rows: Vec<Dma> = (0..4)
            .map(|r| Dma::row(MemType::Out, r * 7, buf, r * 10, 7))
            .collect();
        let c = coalesce(rows);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].y, c[0].x, c[0].stride), (4, 7, 10));
        // a gap in SRAM stops it
        let rows = vec![
            Dma::row(MemType::Out, 0, buf, 0, 7),
            Dma::row(MemType::Out, 8, buf, 7, 7),
        ];
        assert_eq!(coalesce(rows).len(), 2);
    }
}
