//! The GEMM micro-op loop with AVX2 `vpmaddwd`, chosen at run time by [`super::gemm`] on x86-64
//! CPUs that have AVX2 (the portable loop is the reference it must equal bit for bit).
//!
//! The whole instruction loop is one `#[target_feature]` function with no closures, so that
//! every intrinsic is inlined into it: a per-micro-op AVX2 call, or a closure (which does not
//! inherit the target feature), costs a call per intrinsic and runs slower than the portable
//! loop. Its helpers are `unsafe fn`s with the same target feature (inlined into it), as Rust
//! before 1.86 requires of `#[target_feature]` functions.

use std::arch::x86_64::{
    __m128i, __m256i, _mm256_add_epi32, _mm256_cvtepi8_epi16, _mm256_loadu_si256,
    _mm256_madd_epi16, _mm256_set1_epi32, _mm256_setzero_si256, _mm256_sll_epi32, _mm256_sra_epi32,
    _mm256_storeu_si256, _mm_cvtsi32_si128, _mm_loadu_si128,
};

use isa::Uop;

use super::{Lane, Loop, Shape};

/// A stored WGT lane type the kernel reads 16 at a time, widened to i16.
pub(super) trait Wide16: Lane {
    /// The 16 lanes at `p`, as i16. Always inlined into the AVX2 kernel, whose target
    /// feature its intrinsics then share.
    ///
    /// # Safety
    /// The CPU must support AVX2 and 16 lanes must be readable at `p`.
    unsafe fn load16(p: *const Self) -> __m256i;
}

impl Wide16 for i8 {
    #[inline(always)]
    unsafe fn load16(p: *const i8) -> __m256i {
        // 16 bytes readable at `p` (the caller's promise); unaligned access.
        _mm256_cvtepi8_epi16(_mm_loadu_si128(p.cast()))
    }
}

impl Wide16 for i16 {
    #[inline(always)]
    unsafe fn load16(p: *const i16) -> __m256i {
        // 32 bytes readable at `p` (the caller's promise); unaligned access.
        _mm256_loadu_si256(p.cast())
    }
}

/// Whether [`gemm`] handles `sh`: output blocks of whole 8-lane vectors, input channels in
/// pairs.
pub(super) fn supports(sh: &Shape) -> bool {
    matches!(sh.block_out, 8 | 16 | 32 | 64) && sh.block_in.is_multiple_of(2)
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
/// a batch row's outputs stay in `V` registers while the input channel pairs stream
/// through. With BATCH = 1 they stay there across micro-ops with the same destination (a
/// convolution's micro-ops sum over the input blocks and kernel window into one ACC row):
/// the row is read and written back only when the destination changes. Deferring the
/// ACC_WIDTH wrap to then is exact: the low bits of a sum depend only on the low bits of
/// its terms.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn gemm_vectors<W: Wide16, const V: usize, const P: usize>(
    sh: &Shape,
    acc: &mut [i32],
    inp: &[i16],
    wgt: &[W],
    uops: &[Uop],
    lp: &Loop,
) {
    let (al, il, wl, bi) = (sh.acc_lanes, sh.inp_lanes, sh.wgt_lanes, sh.block_in);
    let pairs = if P > 0 { P } else { bi / 2 };
    // A tile holds `pairs` groups of 8 * V (output, pair) lane couples.
    debug_assert_eq!(wl, pairs * 16 * V);
    let shift = _mm_cvtsi32_si128(sh.acc_shift as i32);
    if al == 8 * V {
        // The ACC row in registers: its index, and its sums.
        let mut held: Option<usize> = None;
        let mut t = [_mm256_setzero_si256(); V];
        for o in 0..lp.iter_out {
            for i in 0..lp.iter_in {
                let d0 = o * lp.dst.0 + i * lp.dst.1;
                let s0 = o * lp.src.0 + i * lp.src.1;
                let w0 = o * lp.wgt.0 + i * lp.wgt.1;
                for u in uops {
                    let d = u.dst_idx as usize + d0;
                    if held != Some(d) {
                        if let Some(h) = held {
                            store_row(&mut acc[h * al..][..al], &t, shift);
                        }
                        t = load_row(&acc[d * al..][..al]);
                        held = Some(d);
                    }
                    let irow = &inp[(u.src_idx as usize + s0) * il..][..il];
                    let tile = &wgt[(u.wgt_idx as usize + w0) * wl..][..wl];
                    madd_row::<W, V>(&mut t, irow, tile, pairs);
                }
            }
        }
        if let Some(h) = held {
            store_row(&mut acc[h * al..][..al], &t, shift);
        }
        return;
    }
    for o in 0..lp.iter_out {
        for i in 0..lp.iter_in {
            let d0 = o * lp.dst.0 + i * lp.dst.1;
            let s0 = o * lp.src.0 + i * lp.src.1;
            let w0 = o * lp.wgt.0 + i * lp.wgt.1;
            for u in uops {
                let arow = &mut acc[(u.dst_idx as usize + d0) * al..][..al];
                let irow = &inp[(u.src_idx as usize + s0) * il..][..il];
                let tile = &wgt[(u.wgt_idx as usize + w0) * wl..][..wl];
                for (ab, ib) in arow.chunks_exact_mut(8 * V).zip(irow.chunks_exact(bi)) {
                    let mut t = load_row(ab);
                    madd_row::<W, V>(&mut t, ib, tile, pairs);
                    store_row(ab, &t, shift);
                }
            }
        }
    }
}

/// The `8 * V` lanes of `row` as `V` vectors.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load_row<const V: usize>(row: &[i32]) -> [__m256i; V] {
    assert!(row.len() >= 8 * V);
    let p = row.as_ptr().cast::<__m256i>();
    let mut t = [_mm256_setzero_si256(); V];
    for (v, tv) in t.iter_mut().enumerate() {
        // SAFETY: `row` holds at least 8 * V i32 lanes = V vectors (asserted); unaligned.
        *tv = unsafe { _mm256_loadu_si256(p.add(v)) };
    }
    t
}

/// Writes `t` to the `8 * V` lanes of `row`, each wrapped to ACC_WIDTH bits (`shift` =
/// `32 - ACC_WIDTH`).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn store_row<const V: usize>(row: &mut [i32], t: &[__m256i; V], shift: __m128i) {
    assert!(row.len() >= 8 * V);
    let p = row.as_mut_ptr().cast::<__m256i>();
    for (v, tv) in t.iter().enumerate() {
        let wrapped = _mm256_sra_epi32(_mm256_sll_epi32(*tv, shift), shift);
        // SAFETY: as in `load_row`.
        unsafe { _mm256_storeu_si256(p.add(v), wrapped) };
    }
}

/// `t += ib . tile^T` for one batch row: `ib` its `2 * pairs` input lanes, `tile` the WGT
/// tile (`16 * V * pairs` lanes).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn madd_row<W: Wide16, const V: usize>(
    t: &mut [__m256i; V],
    ib: &[i16],
    tile: &[W],
    pairs: usize,
) {
    assert!(ib.len() >= 2 * pairs && tile.len() >= 16 * V * pairs);
    let wp = tile.as_ptr();
    for p in 0..pairs {
        // SAFETY: 2p + 1 < ib.len() (asserted): the pair's two i16 lanes, read as one
        // unaligned i32 (little-endian: the even lane low).
        let pair = unsafe { ib.as_ptr().add(2 * p).cast::<i32>().read_unaligned() };
        let x = _mm256_set1_epi32(pair);
        for (v, tv) in t.iter_mut().enumerate() {
            // SAFETY: lanes 16 (p * V + v) .. + 16 lie inside the tile (asserted).
            let wv = unsafe { W::load16(wp.add(16 * (p * V + v))) };
            // Each pair's two i16 x i16 products and their sum wrap in i32 exactly as the
            // portable loop's wrapping adds.
            *tv = _mm256_add_epi32(*tv, _mm256_madd_epi16(x, wv));
        }
    }
}
