//! The micro-op loops of GEMM and ALU over the widened scratchpads. Every index has been
//! range-checked by the caller (`Fsim::check_indices`), so these loops only compute.

use isa::{AluOp, Uop};

/// Lane counts and the ACC wrap of one config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub block_in: usize,
    pub block_out: usize,
    /// Lanes of an INP row (`BATCH * BLOCK_IN`).
    pub inp_lanes: usize,
    /// Stored lanes of a WGT tile (`ceil(BLOCK_IN / 2) * 2 * BLOCK_OUT`, see [`wgt_slot`]).
    pub wgt_lanes: usize,
    /// Lanes of an ACC row (`BATCH * BLOCK_OUT`).
    pub acc_lanes: usize,
    /// `32 - ACC_WIDTH`: `(v << s) >> s` wraps an i32 to a signed ACC_WIDTH-bit value.
    pub acc_shift: u32,
    /// `LOG_ACC_WIDTH`.
    pub log_acc_width: u32,
}

impl Shape {
    #[inline(always)]
    fn wrap(&self, v: i32) -> i32 {
        (v << self.acc_shift) >> self.acc_shift
    }
}

/// The loop of one GEMM/ALU instruction with its index factors as `usize`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loop {
    pub iter_out: usize,
    pub iter_in: usize,
    pub dst: (usize, usize),
    pub src: (usize, usize),
    pub wgt: (usize, usize),
}

impl Loop {
    /// Calls `f(dst_offset, src_offset, wgt_offset)` for every (o, i) in execution order.
    #[inline(always)]
    fn for_each(&self, mut f: impl FnMut(usize, usize, usize)) {
        for o in 0..self.iter_out {
            for i in 0..self.iter_in {
                f(
                    o * self.dst.0 + i * self.dst.1,
                    o * self.src.0 + i * self.src.1,
                    o * self.wgt.0 + i * self.wgt.1,
                );
            }
        }
    }
}

/// Where lane (n, k) of a WGT tile lives in the simulator's tile storage: input channels in
/// pairs, each pair interleaved across the output channels (`[k / 2][n][k % 2]`), so that the
/// GEMM inner loop runs over n with paired multiply-adds (x86 `pmaddwd`). A tile takes
/// `ceil(BLOCK_IN / 2) * 2 * BLOCK_OUT` lanes; with BLOCK_IN = 1 the odd lanes stay zero.
#[inline(always)]
pub(crate) fn wgt_slot(block_out: usize, n: usize, k: usize) -> usize {
    (k / 2) * 2 * block_out + 2 * n + k % 2
}

/// `acc[dst] += inp[src] . wgt[wgt]^T` for every micro-op of the loop.
pub(crate) fn gemm(sh: &Shape, acc: &mut [i32], inp: &[i16], wgt: &[i16], uops: &[Uop], lp: &Loop) {
    match sh.block_out {
        1 => gemm_bo::<1>(sh, acc, inp, wgt, uops, lp),
        2 => gemm_bo::<2>(sh, acc, inp, wgt, uops, lp),
        4 => gemm_bo::<4>(sh, acc, inp, wgt, uops, lp),
        8 => gemm_bo::<8>(sh, acc, inp, wgt, uops, lp),
        16 => gemm_bo::<16>(sh, acc, inp, wgt, uops, lp),
        32 => gemm_bo::<32>(sh, acc, inp, wgt, uops, lp),
        64 => gemm_bo::<64>(sh, acc, inp, wgt, uops, lp),
        n => unreachable!("BLOCK_OUT {n} is refused by HwConfig::validate"),
    }
}

fn gemm_bo<const BO: usize>(
    sh: &Shape,
    acc: &mut [i32],
    inp: &[i16],
    wgt: &[i16],
    uops: &[Uop],
    lp: &Loop,
) {
    let (al, il, wl, bi) = (sh.acc_lanes, sh.inp_lanes, sh.wgt_lanes, sh.block_in);
    lp.for_each(|d0, s0, w0| {
        for u in uops {
            let d = u.dst_idx as usize + d0;
            let s = u.src_idx as usize + s0;
            let w = u.wgt_idx as usize + w0;
            let arow = &mut acc[d * al..][..al];
            let irow = &inp[s * il..][..il];
            let tile = &wgt[w * wl..][..wl];
            for (ab, ib) in arow.chunks_exact_mut(BO).zip(irow.chunks_exact(bi)) {
                let ab: &mut [i32; BO] = ab.try_into().expect("BO lanes");
                let mut t = *ab;
                for (p, wp) in tile.chunks_exact(2 * BO).enumerate() {
                    let a0 = i32::from(ib[2 * p]);
                    let a1 = ib.get(2 * p + 1).map_or(0, |&v| i32::from(v));
                    for n in 0..BO {
                        // Each i16 x i16 product fits i32 exactly; only the sums wrap.
                        let pair =
                            (a0 * i32::from(wp[2 * n])).wrapping_add(a1 * i32::from(wp[2 * n + 1]));
                        t[n] = t[n].wrapping_add(pair);
                    }
                }
                for n in 0..BO {
                    ab[n] = sh.wrap(t[n]);
                }
            }
        }
    });
}

/// Zeroes the ACC row of every micro-op's dst (GEMM or ALU with `reset_reg`).
pub(crate) fn reset(sh: &Shape, acc: &mut [i32], uops: &[Uop], lp: &Loop) {
    let al = sh.acc_lanes;
    lp.for_each(|d0, _, _| {
        for u in uops {
            let d = u.dst_idx as usize + d0;
            acc[d * al..][..al].fill(0);
        }
    });
}

/// `acc[dst] = op(acc[dst], imm or acc[src])` lane by lane for every micro-op of the loop.
pub(crate) fn alu(
    sh: &Shape,
    acc: &mut [i32],
    uops: &[Uop],
    lp: &Loop,
    op: AluOp,
    imm: Option<i32>,
) {
    let s = *sh;
    match op {
        AluOp::Min => alu_loop(sh, acc, uops, lp, imm, |x, y| x.min(y)),
        AluOp::Max => alu_loop(sh, acc, uops, lp, imm, |x, y| x.max(y)),
        AluOp::Add => alu_loop(sh, acc, uops, lp, imm, move |x, y| {
            s.wrap(x.wrapping_add(y))
        }),
        AluOp::Mul => alu_loop(sh, acc, uops, lp, imm, move |x, y| {
            s.wrap(x.wrapping_mul(y))
        }),
        AluOp::Shr => {
            // The amount is the operand's low LOG_ACC_WIDTH + 1 bits, read as signed.
            let amount_shift = 32 - (sh.log_acc_width + 1);
            let width = 32 - sh.acc_shift;
            alu_loop(sh, acc, uops, lp, imm, move |x, y| {
                let a = (y << amount_shift) >> amount_shift;
                if a >= 0 {
                    x >> a
                } else if a.unsigned_abs() >= width {
                    0
                } else {
                    s.wrap(x << a.unsigned_abs())
                }
            })
        }
        AluOp::Lut | AluOp::LutWrite => unreachable!("Fsim::alu runs the table operations"),
    }
}

#[inline(always)]
fn alu_loop(
    sh: &Shape,
    acc: &mut [i32],
    uops: &[Uop],
    lp: &Loop,
    imm: Option<i32>,
    f: impl Fn(i32, i32) -> i32 + Copy,
) {
    let al = sh.acc_lanes;
    lp.for_each(|d0, s0, _| {
        for u in uops {
            let d = u.dst_idx as usize + d0;
            if let Some(y) = imm {
                for x in &mut acc[d * al..][..al] {
                    *x = f(*x, y);
                }
                continue;
            }
            let s = u.src_idx as usize + s0;
            if s == d {
                for x in &mut acc[d * al..][..al] {
                    *x = f(*x, *x);
                }
            } else {
                let (dst, src) = if d < s {
                    let (lo, hi) = acc.split_at_mut(s * al);
                    (&mut lo[d * al..][..al], &hi[..al])
                } else {
                    let (lo, hi) = acc.split_at_mut(d * al);
                    (&mut hi[..al], &lo[s * al..][..al])
                };
                for (x, &y) in dst.iter_mut().zip(src) {
                    *x = f(*x, y);
                }
            }
        }
    });
}
