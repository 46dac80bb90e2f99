//! The random program generator of the differential campaign: random valid programs with
//! random token choreography for any config, and the random memory timing and AXI stalls each
//! program runs with on the RTL. Everything is a function of a seed, so a campaign's unit is
//! its (config, program seed) pair.
//!
//! A program is `n` load -> compute -> store blocks over `k` scratchpad regions (k = 1: VTA's
//! single buffer, 2 or 3: virtual threads whose loads overlap another block's compute); block
//! `i` uses region `i mod k`. Tokens order exactly the accesses that conflict (load `i` after
//! compute `i - k` freed the region, compute `i` after load `i` and after store `i - k`,
//! store `i` after compute `i`), with random choices of where each pop and push sits (early or
//! late, on a real instruction or on a sync of its own), random extra round trips on any queue
//! (placed only where the queue is balanced, so they never shift which push a pop matches),
//! random shapes, strides, paddings and DRAM alignments, GEMM and every ALU op with random
//! micro-op loops, and ACC initialized by LOAD ACC, LOAD ACC8 or a reset. Every scratchpad
//! element a block reads was written in the same program, so the programs are race-free and
//! their results timing-independent (spec 5.5); the stream order is a valid schedule, so they
//! are deadlock-free.

use isa::builder::{Operand, ProgramBuilder, UopLoops};
use isa::rng::Rng;
use isa::{AluOp, DType, HwConfig, Insn, MemType, Module, Program, Queue, Uop};

use crate::rtl::{MemTiming, Stalls};

use super::DiffError;

/// The program builder with token bookkeeping and random choreography.
struct Gen {
    r: Rng,
    b: ProgramBuilder,
    /// Pushes minus pops issued so far, per queue of [`Queue::ALL`].
    balance: [i64; 4],
}

impl Gen {
    fn q(from: Module, to: Module) -> usize {
        Queue::between(from, to).expect("adjacent modules") as usize
    }

    fn push(&mut self, from: Module, to: Module) {
        // Sometimes on a sync instruction of its own rather than the last real one.
        if self.r.chance(20) {
            self.sync(from);
        }
        self.b.dep_push(from, to);
        self.balance[Self::q(from, to)] += 1;
    }

    fn pop(&mut self, from: Module, to: Module) {
        self.b.dep_pop(from, to);
        self.balance[Self::q(from, to)] -= 1;
        if self.r.chance(20) {
            self.sync(to);
        }
    }

    /// A sync instruction (moves nothing) on `m`, absorbing its pending pops.
    fn sync(&mut self, m: Module) {
        let insn = match m {
            Module::Load => Insn::Load(isa::MemInsn::sync(if self.r.chance(50) {
                MemType::Inp
            } else {
                MemType::Wgt
            })),
            Module::Compute => Insn::Load(isa::MemInsn::sync(MemType::Uop)),
            Module::Store => Insn::Store(isa::MemInsn::sync(MemType::Out)),
        };
        self.b.emit(insn);
    }

    /// With some probability, an extra round trip on a random queue that is balanced now:
    /// its push and pop then match each other.
    fn maybe_extra(&mut self) {
        if !self.r.chance(35) {
            return;
        }
        let q = self.r.range(0, 3) as usize;
        if self.balance[q] == 0 {
            let (from, to) = (Queue::ALL[q].from(), Queue::ALL[q].to());
            self.push(from, to);
            self.pop(from, to);
        }
    }
}

/// A rectangle of `rows x cols` SRAM elements written by one padded LOAD of
/// `(rows - pads) x (cols - pads)` elements: (y, x, pads).
fn padded_shape(r: &mut Rng, rows: u32, cols: u32) -> (u16, u16, [u8; 4]) {
    let p = |r: &mut Rng, n: u32| -> (u8, u8) {
        if n >= 2 && r.chance(40) {
            let a = r.range(0, (n - 1).min(2));
            let b = r.range(0, (n - 1 - a).min(2));
            (a as u8, b as u8)
        } else {
            (0, 0)
        }
    };
    let (y0, y1) = p(r, rows);
    let (x0, x1) = p(r, cols);
    (
        (rows - y0 as u32 - y1 as u32) as u16,
        (cols - x0 as u32 - x1 as u32) as u16,
        [y0, y1, x0, x1],
    )
}

/// Random micro-op loops over a kernel of `len` micro-ops whose indices stay in
/// `[base, base + n)` of each buffer: (kernel, loops). `bases`/`ns` are (dst, src, wgt).
fn kernel(r: &mut Rng, len: u32, bases: [u32; 3], ns: [u32; 3]) -> (Vec<Uop>, UopLoops) {
    let iter_out = r.range(1, 3) as u16;
    let iter_in = r.range(1, 4) as u16;
    let factors = |r: &mut Rng, n: u32| -> (u16, u16) {
        let span = n.saturating_sub(1);
        let fo = r.range(0, (span / (iter_out as u32 * 2).max(1)).min(3)) as u16;
        let fi = r.range(0, (span / (iter_in as u32 * 2).max(1)).min(2)) as u16;
        if (iter_out as u32 - 1) * fo as u32 + (iter_in as u32 - 1) * fi as u32 >= n {
            (0, 0)
        } else {
            (fo, fi)
        }
    };
    let f: Vec<(u16, u16)> = ns.iter().map(|&n| factors(r, n)).collect();
    let reach =
        |(o, i): (u16, u16)| (iter_out as u32 - 1) * o as u32 + (iter_in as u32 - 1) * i as u32;
    let idx = |r: &mut Rng, k: usize| bases[k] + r.range(0, ns[k] - 1 - reach(f[k]));
    let uops = (0..len)
        .map(|_| Uop {
            dst_idx: idx(r, 0),
            src_idx: idx(r, 1),
            wgt_idx: idx(r, 2),
        })
        .collect();
    (
        uops,
        UopLoops {
            iter_out,
            iter_in,
            dst: f[0],
            src: f[1],
            wgt: f[2],
        },
    )
}

/// Scratchpad elements the generator needs at most, per buffer: regions of up to 4 x 4 INP
/// and ACC and 3 x 3 WGT elements, times up to 3 regions in flight.
const MIN_DEPTH: [(MemType, u32); 3] = [(MemType::Inp, 48), (MemType::Wgt, 27), (MemType::Acc, 48)];

/// A random program for `cfg` drawn from `seed` (see the module docs). Fails only for a config
/// whose scratchpads are too small for the generator's regions.
pub fn program(cfg: &HwConfig, seed: u64) -> Result<Program, DiffError> {
    for (m, need) in MIN_DEPTH {
        if cfg.depth(m) < need {
            return Err(DiffError::Config(format!(
                "{cfg}: the {m} buffer has {} elements; the program generator needs at least \
                 {need}",
                cfg.depth(m)
            )));
        }
    }
    let mut g = Gen {
        r: Rng::new(seed),
        b: ProgramBuilder::new(cfg),
        balance: [0; 4],
    };
    // Regions in flight bound the tokens a queue holds at once (see `Gen::maybe_extra`);
    // they stay within its capacity, so that stream order remains a valid schedule.
    let k = g.r.range(1, cfg.token_queue_depth.min(3));
    let n = g.r.range(1, 5);
    let eb = |m: MemType| cfg.elem_bytes(m) as usize;
    // Region sizes (elements) and their row x column shapes for the LOADs.
    let (ir, ic) = (g.r.range(1, 4), g.r.range(1, 4));
    let (wr, wc) = (g.r.range(1, 3), g.r.range(1, 3));
    let (ar, ac) = (g.r.range(1, 4), g.r.range(1, 4));
    let (inp_n, wgt_n, acc_n) = (ir * ic, wr * wc, ar * ac);
    // Within MIN_DEPTH by construction.
    debug_assert!(k * inp_n <= cfg.depth(MemType::Inp) && k * wgt_n <= cfg.depth(MemType::Wgt));
    debug_assert!(k * acc_n <= cfg.depth(MemType::Acc));
    // DRAM sources: big enough for any LOAD at any offset.
    let src_elems = 96usize;
    let x = {
        let d = g.r.bytes(src_elems * eb(MemType::Inp));
        g.b.input("x", DType::I8, vec![d.len()], d)
    };
    let w = {
        let d = g.r.bytes(src_elems * eb(MemType::Wgt));
        g.b.input("w", DType::I8, vec![d.len()], d)
    };
    let a = {
        let d = g.r.bytes(src_elems * eb(MemType::Acc));
        g.b.input("a", DType::I8, vec![d.len()], d)
    };
    let out_elems = 112 * n as usize;
    let y =
        g.b.output("y", DType::I8, vec![out_elems * eb(MemType::Out)]);
    let mut out_at = 0u32;
    let alu_ops: Vec<AluOp> = AluOp::ALL
        .into_iter()
        .filter(|&o| o != AluOp::Mul || cfg.alu_mul)
        .collect();

    for i in 0..n {
        let reg = i % k;
        let (ib, wb, ab) = (reg * inp_n, reg * wgt_n, reg * acc_n);
        let later = i + k < n;

        // ---- load: the region's INP and WGT, fully, in random order ----
        if i >= k {
            g.pop(Module::Compute, Module::Load);
        }
        let wgt_first = g.r.chance(50);
        for step in 0..2 {
            let (mt, buf, base, rows, cols) = if (step == 0) == wgt_first {
                (MemType::Wgt, w, wb, wr, wc)
            } else {
                (MemType::Inp, x, ib, ir, ic)
            };
            let (yy, xx, pad) = padded_shape(&mut g.r, rows, cols);
            let stride = xx + g.r.range(0, 3) as u16;
            let off =
                g.r.range(0, 96 - (yy as u32 - 1) * stride as u32 - xx as u32);
            g.b.load_padded(mt, base, buf, off, yy, xx, stride, pad);
            if g.r.chance(25) {
                // A second LOAD over part of the region (the later one wins).
                let len = g.r.range(1, rows * cols);
                let at = g.r.range(0, rows * cols - len);
                let off = g.r.range(0, 96 - len);
                g.b.load_2d(mt, base + at, buf, off, 1, len as u16, len as u16);
            }
        }
        g.maybe_extra();
        g.push(Module::Load, Module::Compute);

        // ---- compute ----
        let early = g.r.chance(50);
        if early {
            g.pop(Module::Load, Module::Compute);
        }
        if i >= k {
            g.pop(Module::Store, Module::Compute);
        }
        // Initialize the ACC region: LOAD ACC or ACC8 (with padding), or a reset GEMM
        // (then perhaps an ALU op on the zeros).
        if g.r.chance(60) {
            let mt = if g.r.chance(30) {
                MemType::Acc8
            } else {
                MemType::Acc
            };
            let (yy, xx, pad) = padded_shape(&mut g.r, ar, ac);
            let stride = xx + g.r.range(0, 2) as u16;
            let off =
                g.r.range(0, 96 - (yy as u32 - 1) * stride as u32 - xx as u32);
            g.b.load_padded(mt, ab, a, off, yy, xx, stride, pad);
        } else {
            let kern = g.b.kernel(&[Uop {
                dst_idx: ab,
                src_idx: 0,
                wgt_idx: 0,
            }]);
            g.b.gemm(kern, UopLoops::inner(acc_n as u16, 1, 0), true);
            if g.r.chance(50) {
                let imm = g.r.range(0, 2000) as i16 - 1000;
                let kern = g.b.kernel(&[Uop {
                    dst_idx: ab,
                    src_idx: ab,
                    wgt_idx: 0,
                }]);
                let lp = UopLoops::inner(acc_n as u16, 1, 1);
                g.b.alu(kern, lp, AluOp::Add, Operand::Imm(imm));
            }
        }
        if !early {
            g.pop(Module::Load, Module::Compute);
        }
        let n_gemm = g.r.range(1, 3);
        let n_alu = g.r.range(0, 3);
        let mut ops: Vec<bool> = (0..n_gemm)
            .map(|_| true)
            .chain((0..n_alu).map(|_| false))
            .collect();
        // Random interleaving, the GEMMs' order kept.
        for j in (1..ops.len()).rev() {
            let s = g.r.range(0, j as u32) as usize;
            ops.swap(j, s);
        }
        let last_gemm = ops.iter().rposition(|&o| o).unwrap();
        let release_early = g.r.chance(50);
        for (j, &is_gemm) in ops.iter().enumerate() {
            if is_gemm {
                let len = g.r.range(1, 3);
                let (kern, lp) = kernel(&mut g.r, len, [ab, ib, wb], [acc_n, inp_n, wgt_n]);
                let kern = g.b.kernel(&kern);
                let reset = g.r.chance(10);
                g.b.gemm(kern, lp, reset);
            } else {
                let op = alu_ops[g.r.range(0, alu_ops.len() as u32 - 1) as usize];
                let len = g.r.range(1, 2);
                let (kern, mut lp) = kernel(&mut g.r, len, [ab, ab, 0], [acc_n, acc_n, 1]);
                lp.wgt = (0, 0);
                let kern = g.b.kernel(&kern);
                let operand = if g.r.chance(50) {
                    Operand::Imm(match op {
                        AluOp::Shr => g.r.range(0, 80) as i16 - 40,
                        AluOp::Mul => g.r.range(0, 400) as i16 - 200,
                        _ => g.r.range(0, 60000) as i16,
                    })
                } else {
                    Operand::Tensor
                };
                g.b.alu(kern, lp, op, operand);
            }
            if j == last_gemm && release_early && later {
                g.push(Module::Compute, Module::Load);
            }
            if g.r.chance(15) {
                g.maybe_extra();
            }
        }
        if !release_early && later {
            g.push(Module::Compute, Module::Load);
        }
        g.push(Module::Compute, Module::Store);

        // ---- store ----
        g.pop(Module::Compute, Module::Store);
        for _ in 0..g.r.range(1, 2) {
            let sy = g.r.range(1, ar.min(3));
            let sx = g.r.range(1, acc_n / sy);
            let stride = sx + g.r.range(0, 2);
            let s_base = ab + g.r.range(0, acc_n - sy * sx);
            out_at += g.r.range(0, 2);
            g.b.store_2d(s_base, y, out_at, sy as u16, sx as u16, stride as u16);
            out_at += (sy - 1) * stride + sx;
            assert!(out_at as usize <= out_elems, "output segment too small");
        }
        if later {
            g.push(Module::Store, Module::Compute);
        }
        g.maybe_extra();
    }
    assert_eq!(g.balance, [0; 4], "every token is popped");
    g.b.finish()
        .map_err(|e| DiffError::Generate(format!("{cfg}, program seed {seed}: {e}")))
}

/// The memory latency and bandwidth the program of `seed` runs with on the RTL.
pub fn timing(seed: u64) -> MemTiming {
    // A generator of its own (the seed salted), so that timing and program vary independently.
    let r = &mut Rng::new(seed ^ 0x7469_6d69_6e67);
    MemTiming {
        read_latency: r.range(1, 60),
        write_latency: r.range(1, 30),
        beat_interval: r.range(1, 4),
        max_outstanding: r.range(1, 8) as usize,
    }
}

/// The random AXI stalls the program of `seed` runs with on the RTL: none for three programs in
/// four, else 5 to 60% on every channel.
pub fn stalls(seed: u64) -> Option<Stalls> {
    let r = &mut Rng::new(!seed);
    r.chance(25)
        .then(|| Stalls::uniform(r.range(5, 60), r.next_u64()))
}
