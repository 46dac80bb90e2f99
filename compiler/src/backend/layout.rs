//! Host-side packing between the qlayer tensors (NCHW / OIHW, int8 and int32) and the DRAM
//! layouts the accelerator reads and writes.
//!
//! # Weights
//!
//! Convolution weights `[O, C/groups, KH, KW]` become WGT tiles of `BLOCK_OUT x BLOCK_IN` lanes
//! (lane `n*BLOCK_IN + k`: row `n` = output channel, column `k` = input channel), in the order
//! `[ob][cb][kh][kw]`, each tile's lanes packed at the config's weight width (`isa::spec`
//! section 2: two int4 or four int2 lanes a byte). A grouped convolution is stored block-diagonally: output-channel block
//! `ob` keeps only the input-channel blocks its groups touch (a contiguous range
//! [`WeightLayout::cb_range`]), and lanes pairing channels of different groups are zero. For
//! `groups == 1` this is exactly `[O/bo][I/bi][KH][KW]`.
//!
//! # Per-channel constants
//!
//! Biases, per-channel multipliers and other constants are ACC elements (`BATCH x BLOCK_OUT`
//! int32 lanes): row `ob` holds channels `ob*BLOCK_OUT ..` in every batch row.
//!
//! Activations are packed as `vta_runtime::layout::ActLayout` says.

pub use vta_runtime::layout::ActLayout;

use isa::HwConfig;
use ndarray::ArrayView4;

/// Where each output-channel block's weight tiles sit (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightLayout {
    pub block_out: usize,
    pub block_in: usize,
    pub kh: usize,
    pub kw: usize,
    /// Per output-channel block: the input-channel blocks `[lo, hi)` it reads.
    pub cb_range: Vec<(usize, usize)>,
    /// Per output-channel block: the index of its first tile.
    pub ob_offset: Vec<usize>,
    /// Tiles in all.
    pub tiles: usize,
    /// Bits per lane (`WGT_WIDTH`).
    pub bits: usize,
}

impl WeightLayout {
    /// The layout of `[o, c/groups, kh, kw]` weights of a convolution with `c` input channels.
    pub fn new(cfg: &HwConfig, o: usize, c: usize, groups: usize, kh: usize, kw: usize) -> Self {
        let (bo, bi) = (cfg.block_out() as usize, cfg.block_in() as usize);
        let (og, cg) = (o / groups, c / groups);
        let cob = o.div_ceil(bo);
        let mut cb_range = Vec::with_capacity(cob);
        let mut ob_offset = Vec::with_capacity(cob);
        let mut tiles = 0;
        for ob in 0..cob {
            let first = ob * bo;
            let last = ((ob + 1) * bo).min(o) - 1;
            let (g0, g1) = (first / og, last / og);
            let lo = g0 * cg / bi;
            let hi = ((g1 + 1) * cg).div_ceil(bi);
            cb_range.push((lo, hi));
            ob_offset.push(tiles);
            tiles += (hi - lo) * kh * kw;
        }
        WeightLayout {
            block_out: bo,
            block_in: bi,
            kh,
            kw,
            cb_range,
            ob_offset,
            tiles,
            bits: cfg.wgt_width() as usize,
        }
    }

    /// Tile index of `(ob, cb, ky, kx)`; `cb` must lie in `cb_range[ob]`.
    pub fn tile_index(&self, ob: usize, cb: usize, ky: usize, kx: usize) -> usize {
        let (lo, hi) = self.cb_range[ob];
        debug_assert!((lo..hi).contains(&cb));
        self.ob_offset[ob] + ((cb - lo) * self.kh + ky) * self.kw + kx
    }

    /// Lanes of one tile.
    pub fn tile_lanes(&self) -> usize {
        self.block_out * self.block_in
    }

    /// Bytes of one tile (a validated config's WGT elements are whole bytes).
    pub fn tile_bytes(&self) -> usize {
        self.tile_lanes() * self.bits / 8
    }

    /// The DRAM segment's shape: `[tiles, BLOCK_OUT, BLOCK_IN]` int8 lanes, or `[tiles,
    /// tile_bytes]` bytes for sub-byte lanes.
    pub fn segment_shape(&self) -> (isa::DType, Vec<usize>) {
        if self.bits == 8 {
            (
                isa::DType::I8,
                vec![self.tiles, self.block_out, self.block_in],
            )
        } else {
            (isa::DType::U8, vec![self.tiles, self.tile_bytes()])
        }
    }

    /// Packs OIHW weights of a convolution with `groups` groups. Each weight must fit in
    /// [`WeightLayout::bits`] (wider weights are packed as digits that do,
    /// [`super::slice::pack`]).
    pub fn pack(&self, weight: ArrayView4<i8>, groups: usize) -> Vec<u8> {
        let (o, cg, kh, kw) = weight.dim();
        assert_eq!((kh, kw), (self.kh, self.kw), "kernel size vs layout");
        let og = o / groups;
        let tl = self.tile_lanes();
        let mut lanes = vec![0i32; self.tiles * tl];
        for ((oc, ic, ky, kx), &v) in weight.indexed_iter() {
            let g = oc / og;
            let c = g * cg + ic;
            let (ob, n) = (oc / self.block_out, oc % self.block_out);
            let (cb, k) = (c / self.block_in, c % self.block_in);
            let t = self.tile_index(ob, cb, ky, kx);
            lanes[t * tl + n * self.block_in + k] = i32::from(v);
        }
        let mut out = vec![0u8; self.tiles * self.tile_bytes()];
        isa::lanes::pack_low(&lanes, self.bits as u32, &mut out);
        out
    }
}

/// Packs per-channel int32 values into ACC elements: row `ob` holds `values[ob*BLOCK_OUT + n]`
/// in lane `(b, n)` for every batch row `b`; channels past the end are zero.
pub fn pack_acc_rows(cfg: &HwConfig, values: &[i32], rows: usize) -> Vec<u8> {
    let (bb, bo) = (cfg.batch() as usize, cfg.block_out() as usize);
    let mut out = Vec::with_capacity(rows * bb * bo * 4);
    for ob in 0..rows {
        for _ in 0..bb {
            for n in 0..bo {
                let v = values.get(ob * bo + n).copied().unwrap_or(0);
                out.extend(v.to_le_bytes());
            }
        }
    }
    out
}

/// One ACC element with every lane `v`.
pub fn acc_splat(cfg: &HwConfig, v: i32) -> Vec<u8> {
    let lanes = (cfg.batch() * cfg.block_out()) as usize;
    (0..lanes).flat_map(|_| v.to_le_bytes()).collect()
}

/// The weight tile with which a GEMM copies INP rows into ACC (`W[o][i] = 1` where `o == i`,
/// as `[BLOCK_OUT][BLOCK_IN]` lanes at the weight width): INP rows then hold an activation in
/// its packed layout, which needs `BLOCK_IN == BLOCK_OUT` and 8-bit inputs (the layout of
/// ACC8 loads and STOREs).
pub fn identity_tile(cfg: &HwConfig) -> Option<Vec<u8>> {
    let (bi, bo) = (cfg.block_in() as usize, cfg.block_out() as usize);
    if bi != bo || cfg.inp_width() != 8 {
        return None;
    }
    let lanes: Vec<i32> = (0..bo * bi).map(|k| i32::from(k / bi == k % bi)).collect();
    let mut out = vec![0u8; lanes.len() * cfg.wgt_width() as usize / 8];
    isa::lanes::pack_low(&lanes, cfg.wgt_width(), &mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_index_is_plane_major() {
        let l = ActLayout::new([3, 5, 2, 3], 2, 4);
        assert_eq!((l.n_blocks(), l.c_blocks()), (2, 2));
        assert_eq!(l.elem_index(1, 1, 1, 2), ((2 + 1) * 2 + 1) * 3 + 2);
        assert_eq!(
            l.byte_offset(1, 5, 0, 0),
            l.elem_index(0, 1, 0, 0) * 8 + 4 + 1
        );
    }

    #[test]
    fn depthwise_weights_keep_one_block_per_output_block() {
        let cfg = HwConfig::default();
        let wl = WeightLayout::new(&cfg, 40, 40, 40, 3, 3);
        assert_eq!(wl.cb_range, vec![(0, 1), (1, 2), (2, 3)]);
        assert_eq!(wl.tiles, 27);
        // groups of 12 channels straddle the 16-channel blocks
        let wl = WeightLayout::new(&cfg, 24, 24, 2, 1, 1);
        assert_eq!(wl.cb_range, vec![(0, 2), (0, 2)]);
    }
}
