//! The micro-op loops of GEMM and ALU over the widened scratchpads. Every index has been
//! range-checked by the caller (`Fsim::check_indices`), so these loops only compute.

use isa::{AluOp, Uop};

#[cfg(target_arch = "x86_64")]
mod avx2;

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

/// The GEMM loop [`gemm`] runs on this CPU for `sh`: `"avx2"` or `"portable"`.
pub(crate) fn gemm_kernel_name(sh: &Shape) -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if avx2::supports(sh) && std::arch::is_x86_feature_detected!("avx2") {
        return "avx2";
    }
    let _ = sh;
    "portable"
}

/// The WGT scratchpad's lanes, sign-extended, in the tile order of [`wgt_slot`]: one byte
/// each for weights of at most 8 bits (half the cache footprint of i16: the default config's
/// 256 KiB buffer then fits a 512 KiB L2 cache with INP and ACC), else i16.
#[derive(Debug, Clone)]
pub(crate) enum WgtLanes {
    I8(Vec<i8>),
    I16(Vec<i16>),
}

impl WgtLanes {
    /// `len` zero lanes for weights of `bits` bits.
    pub fn new(bits: u32, len: usize) -> WgtLanes {
        if bits <= 8 {
            WgtLanes::I8(vec![0; len])
        } else {
            WgtLanes::I16(vec![0; len])
        }
    }

    /// Zeroes lanes `range`.
    pub fn zero(&mut self, range: std::ops::Range<usize>) {
        match self {
            WgtLanes::I8(v) => v[range].fill(0),
            WgtLanes::I16(v) => v[range].fill(0),
        }
    }

    /// Lane `i`.
    pub fn get(&self, i: usize) -> i16 {
        match self {
            WgtLanes::I8(v) => i16::from(v[i]),
            WgtLanes::I16(v) => v[i],
        }
    }

    /// Sets lane `i` to `v`, which fits the stored width.
    #[cfg(test)]
    pub fn set(&mut self, i: usize, v: i16) {
        match self {
            WgtLanes::I8(l) => l[i] = v as i8,
            WgtLanes::I16(l) => l[i] = v,
        }
    }

    /// Stores tiles `first..first + count` from `bytes`, their DRAM form: tiles of
    /// `BLOCK_OUT x BLOCK_IN` lanes of `bits` bits in natural order (row n = output channel),
    /// each into [`wgt_slot`] order; `scratch` holds the unpacked lanes where needed.
    pub fn write_tiles(
        &mut self,
        sh: &Shape,
        (first, count): (usize, usize),
        bytes: &[u8],
        bits: u32,
        scratch: &mut Vec<i16>,
    ) {
        let (bi, bo, wl) = (sh.block_in, sh.block_out, sh.wgt_lanes);
        let range = first * wl..(first + count) * wl;
        if let (WgtLanes::I8(l), 8, 0) = (&mut *self, bits, bi % 2) {
            // Bytes are lanes: move each input-channel pair of each row in one piece.
            for (tile, src) in l[range]
                .chunks_exact_mut(wl)
                .zip(bytes.chunks_exact(bo * bi))
            {
                for (n, row) in src.chunks_exact(bi).enumerate() {
                    for (kp, pair) in row.chunks_exact(2).enumerate() {
                        let at = kp * 2 * bo + 2 * n;
                        tile[at] = pair[0] as i8;
                        tile[at + 1] = pair[1] as i8;
                    }
                }
            }
            return;
        }
        fn scatter<T: Copy>(sh: &Shape, tiles: &mut [T], natural: &[i16], lane: impl Fn(i16) -> T) {
            let (bi, bo) = (sh.block_in, sh.block_out);
            for (tile, src) in tiles
                .chunks_exact_mut(sh.wgt_lanes)
                .zip(natural.chunks_exact(bo * bi))
            {
                for (n, row) in src.chunks_exact(bi).enumerate() {
                    for (k, &v) in row.iter().enumerate() {
                        tile[wgt_slot(bo, n, k)] = lane(v);
                    }
                }
            }
        }
        scratch.resize(count * bo * bi, 0);
        isa::lanes::unpack_i16(bytes, bits, scratch);
        match self {
            // The lanes were sign-extended from at most 8 bits: the cast keeps them.
            WgtLanes::I8(l) => scatter(sh, &mut l[range], scratch, |v| v as i8),
            WgtLanes::I16(l) => scatter(sh, &mut l[range], scratch, |v| v),
        }
    }
}

/// A stored WGT lane.
pub(crate) trait Lane: Copy + Into<i32> {}
impl Lane for i8 {}
impl Lane for i16 {}

/// `acc[dst] += inp[src] . wgt[wgt]^T` for every micro-op of the loop.
pub(crate) fn gemm(
    sh: &Shape,
    acc: &mut [i32],
    inp: &[i16],
    wgt: &WgtLanes,
    uops: &[Uop],
    lp: &Loop,
) {
    #[cfg(target_arch = "x86_64")]
    if avx2::supports(sh) && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 and the kernel supports the shape (both checked above).
        unsafe {
            match wgt {
                WgtLanes::I8(w) => avx2::gemm(sh, acc, inp, w, uops, lp),
                WgtLanes::I16(w) => avx2::gemm(sh, acc, inp, w, uops, lp),
            }
        }
        return;
    }
    match wgt {
        WgtLanes::I8(w) => gemm_portable(sh, acc, inp, w, uops, lp),
        WgtLanes::I16(w) => gemm_portable(sh, acc, inp, w, uops, lp),
    }
}

/// The reference GEMM loop, for every shape and CPU.
fn gemm_portable<W: Lane>(
    sh: &Shape,
    acc: &mut [i32],
    inp: &[i16],
    wgt: &[W],
    uops: &[Uop],
    lp: &Loop,
) {
    match sh.block_out {
        1 => gemm_bo::<W, 1>(sh, acc, inp, wgt, uops, lp),
        2 => gemm_bo::<W, 2>(sh, acc, inp, wgt, uops, lp),
        4 => gemm_bo::<W, 4>(sh, acc, inp, wgt, uops, lp),
        8 => gemm_bo::<W, 8>(sh, acc, inp, wgt, uops, lp),
        16 => gemm_bo::<W, 16>(sh, acc, inp, wgt, uops, lp),
        32 => gemm_bo::<W, 32>(sh, acc, inp, wgt, uops, lp),
        64 => gemm_bo::<W, 64>(sh, acc, inp, wgt, uops, lp),
        n => unreachable!("BLOCK_OUT {n} is refused by HwConfig::validate"),
    }
}

fn gemm_bo<W: Lane, const BO: usize>(
    sh: &Shape,
    acc: &mut [i32],
    inp: &[i16],
    wgt: &[W],
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
                        let pair = (a0 * wp[2 * n].into()).wrapping_add(a1 * wp[2 * n + 1].into());
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

#[cfg(test)]
mod tests {
    use super::*;
    use isa::rng::Rng;

    /// Random buffers with many extreme lanes (`-2^(w-1)` and `2^(w-1) - 1`) so that pair
    /// sums and accumulators wrap.
    fn lanes_i16(rng: &mut Rng, n: usize, width: u32) -> Vec<i16> {
        let (lo, hi) = (-(1i32 << (width - 1)), (1i32 << (width - 1)) - 1);
        (0..n)
            .map(|_| match rng.below(4) {
                0 => lo as i16,
                1 => hi as i16,
                _ => rng.range(lo, hi) as i16,
            })
            .collect()
    }

    /// The loop chosen by [`gemm`] on this CPU equals the portable loop bit for bit, over
    /// block shapes, batches, operand and accumulator widths, loops and micro-op lists.
    #[test]
    fn dispatched_gemm_equals_portable() {
        let mut rng = Rng::new(13);
        for case in 0..400 {
            let batch = 1usize << rng.below(3);
            let block_in = 1usize << rng.below(7);
            let block_out = 1usize << rng.below(7);
            let width = [2, 4, 8, 16][rng.below(4) as usize];
            let acc_bits = [16u32, 32][rng.below(2) as usize];
            let sh = Shape {
                block_in,
                block_out,
                inp_lanes: batch * block_in,
                wgt_lanes: block_in.div_ceil(2) * 2 * block_out,
                acc_lanes: batch * block_out,
                acc_shift: 32 - acc_bits,
                log_acc_width: acc_bits.trailing_zeros(),
            };
            let (rows, tiles) = (24usize, 24usize);
            let inp = lanes_i16(&mut rng, rows * sh.inp_lanes, width);
            let mut wgt = lanes_i16(&mut rng, tiles * sh.wgt_lanes, width);
            if block_in % 2 == 1 {
                // The padding lane of each input-channel pair stays zero in the simulator.
                for t in wgt.chunks_exact_mut(sh.wgt_lanes) {
                    for n in 0..block_out {
                        t[wgt_slot(block_out, n, block_in)] = 0;
                    }
                }
            }
            let acc0: Vec<i32> = lanes_i16(&mut rng, rows * sh.acc_lanes, 16)
                .into_iter()
                .map(|v| i32::from(v) << (acc_bits - 16) >> (acc_bits - 16))
                .collect();
            let lp = Loop {
                iter_out: 1 + rng.below(3) as usize,
                iter_in: 1 + rng.below(3) as usize,
                dst: (rng.below(3) as usize, rng.below(2) as usize),
                src: (rng.below(3) as usize, rng.below(2) as usize),
                wgt: (rng.below(3) as usize, rng.below(2) as usize),
            };
            // Runs of micro-ops with one destination (as a convolution's), and changes.
            let mut dst = 0;
            let uops: Vec<Uop> = (0..1 + rng.below(12))
                .map(|_| {
                    if rng.chance(40) {
                        dst = rng.below(16) as u32;
                    }
                    Uop {
                        dst_idx: dst,
                        src_idx: rng.below(16) as u32,
                        wgt_idx: rng.below(16) as u32,
                    }
                })
                .collect();
            let mut want = acc0.clone();
            gemm_portable(&sh, &mut want, &inp, &wgt, &uops, &lp);
            let mut lanes = WgtLanes::new(width, wgt.len());
            for (i, &v) in wgt.iter().enumerate() {
                lanes.set(i, v);
            }
            let mut got = acc0;
            gemm(&sh, &mut got, &inp, &lanes, &uops, &lp);
            assert!(
                got == want,
                "case {case}: the {} GEMM loop differs from the portable one for {sh:?}, {lp:?}",
                gemm_kernel_name(&sh)
            );
        }
    }
}
