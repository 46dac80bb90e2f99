//! The GEMM micro-op loop with AVX2 `vpmaddwd`, chosen at run time by [`super::gemm`] on x86-64
//! CPUs that have AVX2 (the portable loop is the reference it must equal bit for bit).
//!
//! The whole instruction loop is one `#[target_feature]` function with no closures, so that
//! every intrinsic is inlined into it: a per-micro-op AVX2 call, or a closure (which does not
//! inherit the target feature), costs a call per intrinsic and runs slower than the portable
//! loop.

use std::arch::x86_64::{
    __m256i, _mm256_add_epi32, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_set1_epi32,
    _mm256_setzero_si256, _mm256_sll_epi32, _mm256_sra_epi32, _mm256_storeu_si256,
    _mm_cvtsi32_si128,
};

use std::arch::x86_64::{_mm256_cvtepi8_epi16, _mm_loadu_si128};

use isa::Uop;

use super::{Lane, Loop, Shape};

/// A stored WGT lane type the kernel reads 16 at a time, widened to i16.
pub(super) trait Wide16: Lane {
    /// The 16 lanes at `p`, as i16.
    ///
    /// # Safety
    /// The CPU must support AVX2 and 16 lanes must be readable at `p`.
    unsafe fn load16(p: *const Self) -> __m256i;
}

impl Wide16 for i8 {
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load16(p: *const i8) -> __m256i {
        // SAFETY: 16 bytes are readable at `p` (the caller's promise); unaligned access.
        _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(p.cast()) })
    }
}

impl Wide16 for i16 {
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load16(p: *const i16) -> __m256i {
        // SAFETY: 32 bytes are readable at `p` (the caller's promise); unaligned access.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
}

/// Whether [`gemm`] handles `sh`: output blocks of whole 8-lane vectors, input channels in
/// pairs.
pub(super) fn supports(sh: &Shape) -> bool {
    matches!(sh.block_out, 8 | 16 | 32 | 64) && sh.block_in % 2 == 0
}

/// `acc[dst] += inp[src] . wgt[wgt]^T` for every micro-op of the loop.
///
/// # Safety
/// The CPU must support AVX2, and `supports(sh)` must hold.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gemm<W: Wide16>(
    sh: &Shape,
    acc: &mut [i32],
    inp: &[i16],
    wgt: &[W],
    uops: &[Uop],
    lp: &Loop,
) {
    // The usual input blocks get a fully unrolled pair loop; the others a counted one.
    macro_rules! by_block_in {
        ($v:literal) => {
            match sh.block_in {
                8 => gemm_vectors::<W, $v, 4>(sh, acc, inp, wgt, uops, lp),
                16 => gemm_vectors::<W, $v, 8>(sh, acc, inp, wgt, uops, lp),
                32 => gemm_vectors::<W, $v, 16>(sh, acc, inp, wgt, uops, lp),
                _ => gemm_vectors::<W, $v, 0>(sh, acc, inp, wgt, uops, lp),
            }
        };
    }
    match sh.block_out {
        8 => by_block_in!(1),
        16 => by_block_in!(2),
        32 => by_block_in!(4),
        64 => by_block_in!(8),
        n => unreachable!("avx2::supports refuses BLOCK_OUT {n}"),
    }
}

/// [`gemm`] with `BLOCK_OUT = 8 * V` and `BLOCK_IN = 2 * P` (`P = 0`: any even BLOCK_IN):
/// one batch row's outputs stay in `V` registers while the input channel pairs stream
/// through.
#[target_feature(enable = "avx2")]
#[inline]
fn gemm_vectors<W: Wide16, const V: usize, const P: usize>(
    sh: &Shape,
    acc: &mut [i32],
    inp: &[i16],
    wgt: &[W],
    uops: &[Uop],
    lp: &Loop,
) {
    let (al, il, wl, bi) = (sh.acc_lanes, sh.inp_lanes, sh.wgt_lanes, sh.block_in);
    let pairs = if P > 0 { P } else { bi / 2 };
    let wrap = sh.acc_shift != 0;
    let shift = _mm_cvtsi32_si128(sh.acc_shift as i32);
    for o in 0..lp.iter_out {
        for i in 0..lp.iter_in {
            let d0 = o * lp.dst.0 + i * lp.dst.1;
            let s0 = o * lp.src.0 + i * lp.src.1;
            let w0 = o * lp.wgt.0 + i * lp.wgt.1;
            for u in uops {
                let d = u.dst_idx as usize + d0;
                let s = u.src_idx as usize + s0;
                let w = u.wgt_idx as usize + w0;
                let arow = &mut acc[d * al..][..al];
                let irow = &inp[s * il..][..il];
                let tile = &wgt[w * wl..][..wl];
                // A tile holds `pairs` groups of 8 * V (output, pair) lane couples.
                debug_assert_eq!(tile.len(), pairs * 16 * V);
                for (ab, ib) in arow.chunks_exact_mut(8 * V).zip(irow.chunks_exact(bi)) {
                    let ap = ab.as_mut_ptr().cast::<__m256i>();
                    let mut t = [_mm256_setzero_si256(); V];
                    for (v, tv) in t.iter_mut().enumerate() {
                        // SAFETY: `ab` holds 8 * V i32 lanes = V vectors; unaligned access.
                        *tv = unsafe { _mm256_loadu_si256(ap.add(v)) };
                    }
                    let wp = tile.as_ptr();
                    for p in 0..pairs {
                        // SAFETY: 2p + 1 < bi = ib.len(): the pair's two i16 lanes, read as
                        // one unaligned i32 (little-endian: the even lane low).
                        let pair = unsafe { ib.as_ptr().add(2 * p).cast::<i32>().read_unaligned() };
                        let x = _mm256_set1_epi32(pair);
                        for (v, tv) in t.iter_mut().enumerate() {
                            // SAFETY: lanes 16 (p * V + v) .. + 16 lie inside the tile, which
                            // holds 16 * pairs * V lanes (above).
                            let wv = unsafe { W::load16(wp.add(16 * (p * V + v))) };
                            // Each pair's two i16 x i16 products and their sum wrap in i32
                            // exactly as the portable loop's wrapping adds.
                            *tv = _mm256_add_epi32(*tv, _mm256_madd_epi16(x, wv));
                        }
                    }
                    for (v, tv) in t.iter().enumerate() {
                        let sum = if wrap {
                            _mm256_sra_epi32(_mm256_sll_epi32(*tv, shift), shift)
                        } else {
                            *tv
                        };
                        // SAFETY: as for the loads above.
                        unsafe { _mm256_storeu_si256(ap.add(v), sum) };
                    }
                }
            }
        }
    }
}
