//! Bit-sliced weights: a convolution or dense layer whose weights are wider than the core's
//! weight lanes (the 8-bit first and last layers of a 4-bit network) runs as several GEMM
//! passes over narrow weight *digits*, combined exactly in the accumulators. (Outputs wider
//! than the lanes are the other slicing, into digit planes: [`super::out_digits`].)
//!
//! Each weight is split into `passes` signed digits of the lane width `b`, radix `2^b`,
//! balanced: `d0 = ((w + 2^(b-1)) mod 2^b) - 2^(b-1)`, `w1 = (w - d0) / 2^b`, and so on, so
//! `w = sum_j 2^(b*j) * d_j` with every digit in the lane's `[-2^(b-1), 2^(b-1))`. The
//! number of passes is the fewest digits that represent every weight of the layer (8-bit
//! weights on 4-bit lanes need 2 when they lie in `[-136, 119]`, else 3).
//!
//! A tile then accumulates Horner-style, top digit first: the GEMMs of digit `D-1` into
//! reset accumulators, a left shift of the accumulators by `b` on the ALU (`SHR` by `-b`),
//! the GEMMs of digit `D-2` adding to them, and so on (`conv::emit`), which leaves
//! `sum_k x_k * w_k` in every accumulator before the usual epilogue. ACC arithmetic wraps
//! (GEMM sums, ADD and the left shift alike, `isa::spec` sections 1 and 8), so the result equals
//! the unsliced sum modulo `2^ACC_WIDTH`: bit-exact with the reference whenever that sum
//! is, whatever the intermediate values.

use ndarray::{Array4, ArrayView4};

use super::layout::WeightLayout;

/// Digit `j` (from 0, the least significant) of `w` in balanced signed radix `2^bits`.
pub fn digit(w: i32, bits: u32, j: u32) -> i32 {
    let half = 1i32 << (bits - 1);
    let mut rest = w;
    for _ in 0..j {
        let d = (rest + half).rem_euclid(1 << bits) - half;
        rest = (rest - d) >> bits;
    }
    (rest + half).rem_euclid(1 << bits) - half
}

/// The digits of `bits` bits that represent every one of `weights` (1: they fit the lanes).
pub fn passes<'a>(bits: u32, weights: impl IntoIterator<Item = &'a i8>) -> usize {
    let (lo, hi) = super::lane_range(bits);
    let (min, max) = weights.into_iter().fold((0i32, 0i32), |(a, b), &v| {
        (a.min(i32::from(v)), b.max(i32::from(v)))
    });
    // D balanced digits represent exactly [lo, hi] * (2^(b*D) - 1) / (2^b - 1).
    let mut d = 1;
    let (mut span_lo, mut span_hi) = (lo, hi);
    while min < span_lo || max > span_hi {
        span_lo = span_lo * (1 << bits) + lo;
        span_hi = span_hi * (1 << bits) + hi;
        d += 1;
    }
    d
}

/// The DRAM image of `passes` weight digits of OIHW `weight` in layout `wl`: digit `j`'s
/// tiles at tiles `j * wl.tiles ..`, each packed as [`WeightLayout::pack`] packs weights.
pub fn pack(wl: &WeightLayout, weight: ArrayView4<i8>, groups: usize, passes: usize) -> Vec<u8> {
    let bits = wl.bits as u32;
    (0..passes as u32)
        .flat_map(|j| {
            let d: Array4<i8> = weight.mapv(|w| digit(i32::from(w), bits, j) as i8);
            wl.pack(d.view(), groups)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_rebuild_every_int8_weight_within_the_lanes() {
        for bits in [2u32, 4, 8] {
            let (lo, hi) = crate::backend::lane_range(bits);
            for w in -128i32..=127 {
                let p = passes(bits, &[w as i8]);
                let mut sum = 0i64;
                for j in 0..p as u32 {
                    let d = digit(w, bits, j);
                    assert!((lo..=hi).contains(&d), "w {w} bits {bits} digit {j}: {d}");
                    sum += i64::from(d) << (bits * j);
                }
                assert_eq!(sum, i64::from(w), "w {w} bits {bits}");
                // One digit fewer does not represent it (when there is more than one).
                if p > 1 {
                    let top = digit(w, bits, p as u32 - 1);
                    assert_ne!(top, 0, "w {w} bits {bits}: {p} passes, top digit 0");
                }
            }
        }
    }

    #[test]
    fn passes_follow_the_weights_range() {
        assert_eq!(passes(8, &[-128, 127]), 1);
        assert_eq!(passes(4, &[-8, 7]), 1);
        assert_eq!(passes(4, &[-128, 119]), 2);
        assert_eq!(passes(4, &[120]), 3);
        assert_eq!(passes(4, &[-127, 127]), 3);
        assert_eq!(passes(2, &[-2, 1]), 1);
        assert_eq!(passes(2, &[-127, 127]), 5);
        assert_eq!(passes(4, &[]), 1);
    }
}
