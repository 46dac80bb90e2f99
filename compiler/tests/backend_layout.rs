//! Host packing: round trips and the exact placement of every value.

use compiler::backend::layout::{pack_acc_rows, ActLayout, WeightLayout};
use isa::rng::Rng;
use isa::HwConfig;
use ndarray::Array4;
use proptest::prelude::*;

fn tensor_of(shape: [usize; 4], seed: u64, bits: u32) -> Array4<i8> {
    let [n, c, h, w] = shape;
    let mut rng = Rng::new(seed);
    let half = 1i32 << (bits - 1);
    Array4::from_shape_simple_fn((n, c, h, w), || rng.range(-half, half - 1) as i8)
}

proptest! {
    #[test]
    fn activations_round_trip_and_pad_with_zeros(
        n in 1usize..6, c in 1usize..40, h in 1usize..6, w in 1usize..6,
        log_batch in 0u32..3, log_block in 0u32..5, log_bits in 1u32..4, seed in any::<u64>(),
    ) {
        let bits = 1usize << log_bits;
        prop_assume!(((1usize << (log_batch + log_block)) * bits).is_multiple_of(8));
        let l = ActLayout::new([n, c, h, w], 1 << log_batch, 1 << log_block).with_bits(bits);
        let x = tensor_of([n, c, h, w], seed, bits as u32);
        let bytes = l.pack(x.view()).unwrap();
        prop_assert_eq!(bytes.len(), l.elems() * l.elem_bytes());
        prop_assert_eq!(l.unpack(&bytes), x.clone());
        // every value sits at its documented element and lane; everything else is zero
        let lanes = l.batch * l.block;
        let mut expect = vec![0i32; bytes.len() * 8 / bits];
        for ((ni, ci, hi, wi), &v) in x.indexed_iter() {
            let e = ((ni / l.batch * l.c_blocks() + ci / l.block) * h + hi) * w + wi;
            expect[e * lanes + (ni % l.batch) * l.block + ci % l.block] = i32::from(v);
        }
        let mut packed = vec![0u8; bytes.len()];
        isa::lanes::pack_low(&expect, bits as u32, &mut packed);
        prop_assert_eq!(bytes, packed);
    }

    #[test]
    fn weights_are_block_diagonal_tiles(
        groups in 1usize..5, cg in 1usize..7, og in 1usize..7, k in 1usize..4,
        preset in 0usize..4, log_wgt in 1u32..4, seed in any::<u64>(),
    ) {
        let mut cfg = HwConfig::preset(["default", "batched", "rect", "small"][preset]).unwrap();
        cfg.log_wgt_width = log_wgt;
        let bits = 1u32 << log_wgt;
        let (o, c) = (og * groups, cg * groups);
        let wt = tensor_of([o, cg, k, k], seed, bits);
        let wl = WeightLayout::new(&cfg, o, c, groups, k, k);
        let bytes = wl.pack(wt.view(), groups);
        prop_assert_eq!(bytes.len(), wl.tiles * wl.tile_bytes());
        let (bo, bi) = (wl.block_out, wl.block_in);
        let mut lanes = vec![0i16; wl.tiles * bo * bi];
        isa::lanes::unpack_i16(&bytes, bits, &mut lanes);
        // decode every lane of every stored tile back to a dense [O, C, K, K] weight
        let mut dense = Array4::<i8>::zeros((o.div_ceil(bo) * bo, c.div_ceil(bi) * bi, k, k));
        for ob in 0..o.div_ceil(bo) {
            let (lo, hi) = wl.cb_range[ob];
            for cb in lo..hi {
                for ky in 0..k {
                    for kx in 0..k {
                        let t = wl.tile_index(ob, cb, ky, kx);
                        for n in 0..bo {
                            for kk in 0..bi {
                                dense[[ob * bo + n, cb * bi + kk, ky, kx]] = lanes[t * bo * bi + n * bi + kk] as i8;
                            }
                        }
                    }
                }
            }
        }
        for ((oc, ic, ky, kx), &v) in dense.indexed_iter() {
            let want = if oc < o && ic < c && oc / og == ic / cg { wt[[oc, ic - (oc / og) * cg, ky, kx]] } else { 0 };
            prop_assert_eq!(v, want, "lane ({}, {}, {}, {})", oc, ic, ky, kx);
        }
        // the stored ranges cover every block each output block's groups need
        for (ob, &(lo, hi)) in wl.cb_range.iter().enumerate() {
            for oc in ob * bo..((ob + 1) * bo).min(o) {
                let g = oc / og;
                prop_assert!(lo * bi <= g * cg && (g + 1) * cg <= hi * bi);
            }
        }
    }
}

#[test]
fn constant_rows_replicate_channels_across_the_batch() {
    let cfg = HwConfig::preset("rect").unwrap(); // BATCH 2, BLOCK_OUT 8
    let vals: Vec<i32> = (0..10).map(|i| i * 1000 - 3).collect();
    let b = pack_acc_rows(&cfg, &vals, 2);
    let lane = |row: usize, bb: usize, n: usize| {
        let at = ((row * 2 + bb) * 8 + n) * 4;
        i32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    };
    assert_eq!(b.len(), 2 * 2 * 8 * 4);
    assert_eq!(
        (lane(0, 1, 3), lane(1, 0, 1), lane(1, 1, 2)),
        (2997, 8997, 0)
    );
}
