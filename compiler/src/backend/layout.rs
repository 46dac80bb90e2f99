//! Host-side packing between the qlayer tensors (NCHW / OIHW, int8 and int32) and the DRAM
//! layouts the accelerator reads and writes.
//!
//! # Activations: `NCHW{b}n{c}c`
//!
//! An activation tensor `[N, C, H, W]` is stored as DRAM *elements* of `b = BATCH` rows by
//! `c` lanes (`c = BLOCK_IN` for tensors read by a convolution or dense layer through INP
//! loads, `c = BLOCK_OUT` for tensors written by STORE or read by ACC8 loads). Element
//! `(nb, cb, h, w)` holds samples `nb*b .. nb*b + b` and channels `cb*c .. cb*c + c` of pixel
//! `(h, w)`, lane `bi*c + ci` (the lane order of INP/OUT elements, `isa::spec` section 2), and
//! sits at element index
//!
//! ```text
//! ((nb * CB + cb) * H + h) * W + w          CB = ceil(C / c), NB = ceil(N / b)
//! ```
//!
//! so one channel block of one sample block is an `H x W` plane of consecutive elements: a
//! spatial tile is one 2D strided DMA (`y` = rows, `x` = columns, `x_stride = W`), and the
//! convolution's zero padding comes from the LOAD pads. Padding channels (`C` up to a multiple of
//! `c`) and padding samples (`N` up to a multiple of `b`) are zero when packed on the host; in
//! tensors produced by the accelerator they hold unspecified values, which every consumer
//! ignores (convolutions multiply them by zero weights, element-wise layers keep them in their
//! own padding lanes). The output of one accelerator layer can therefore be the input of the
//! next without unpacking, as long as both use the same block (always when
//! `BLOCK_IN == BLOCK_OUT`).
//!
//! # Weights
//!
//! Convolution weights `[O, C/groups, KH, KW]` become WGT tiles of `BLOCK_OUT x BLOCK_IN` lanes
//! (lane `n*BLOCK_IN + k`: row `n` = output channel, column `k` = input channel), in the order
//! `[ob][cb][kh][kw]`. A grouped convolution is stored block-diagonally: output-channel block
//! `ob` keeps only the input-channel blocks its groups touch (a contiguous range
//! [`WeightLayout::cb_range`]), and lanes pairing channels of different groups are zero. For
//! `groups == 1` this is exactly `[O/bo][I/bi][KH][KW]`.
//!
//! # Per-channel constants
//!
//! Biases, per-channel multipliers and other constants are ACC elements (`BATCH x BLOCK_OUT`
//! int32 lanes): row `ob` holds channels `ob*BLOCK_OUT ..` in every batch row.

use isa::HwConfig;
use ndarray::{Array4, ArrayView4};

/// The packed layout of one activation tensor (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActLayout {
    /// Logical `[N, C, H, W]`.
    pub shape: [usize; 4],
    /// Samples per element (`BATCH`).
    pub batch: usize,
    /// Channels per element (`BLOCK_IN` or `BLOCK_OUT`).
    pub block: usize,
}

impl ActLayout {
    pub fn new(shape: [usize; 4], batch: usize, block: usize) -> Self {
        assert!(batch > 0 && block > 0, "empty element");
        ActLayout {
            shape,
            batch,
            block,
        }
    }

    /// The layout an INP load reads (`BATCH x BLOCK_IN` elements).
    pub fn inp(cfg: &HwConfig, shape: [usize; 4]) -> Self {
        Self::new(shape, cfg.batch() as usize, cfg.block_in() as usize)
    }

    /// The layout STORE writes and ACC8 loads read (`BATCH x BLOCK_OUT` elements).
    pub fn out(cfg: &HwConfig, shape: [usize; 4]) -> Self {
        Self::new(shape, cfg.batch() as usize, cfg.block_out() as usize)
    }

    /// Sample blocks `NB = ceil(N / BATCH)`.
    pub fn n_blocks(&self) -> usize {
        self.shape[0].div_ceil(self.batch)
    }

    /// Channel blocks `CB = ceil(C / block)`.
    pub fn c_blocks(&self) -> usize {
        self.shape[1].div_ceil(self.block)
    }

    /// Elements in the plane of one (sample block, channel block): `H * W`.
    pub fn plane(&self) -> usize {
        self.shape[2] * self.shape[3]
    }

    /// DRAM elements of the whole tensor.
    pub fn elems(&self) -> usize {
        self.n_blocks() * self.c_blocks() * self.plane()
    }

    /// Bytes of one element (int8 lanes).
    pub fn elem_bytes(&self) -> usize {
        self.batch * self.block
    }

    /// Bytes of the whole packed tensor.
    pub fn bytes(&self) -> usize {
        self.elems() * self.elem_bytes()
    }

    /// Element index of `(nb, cb, h, w)`.
    pub fn elem_index(&self, nb: usize, cb: usize, h: usize, w: usize) -> usize {
        ((nb * self.c_blocks() + cb) * self.shape[2] + h) * self.shape[3] + w
    }

    /// Byte offset of the logical value `(n, c, h, w)`.
    pub fn byte_offset(&self, n: usize, c: usize, h: usize, w: usize) -> usize {
        let e = self.elem_index(n / self.batch, c / self.block, h, w);
        e * self.elem_bytes() + (n % self.batch) * self.block + c % self.block
    }

    /// The DRAM segment's shape: `[NB, CB, H, W, BATCH, block]`.
    pub fn segment_shape(&self) -> Vec<usize> {
        vec![
            self.n_blocks(),
            self.c_blocks(),
            self.shape[2],
            self.shape[3],
            self.batch,
            self.block,
        ]
    }

    /// Packs an NCHW tensor (padding lanes are zero).
    ///
    /// # Panics
    /// When `x` does not have [`ActLayout::shape`].
    pub fn pack(&self, x: ArrayView4<i8>) -> Vec<u8> {
        assert_eq!(x.shape(), &self.shape, "tensor shape vs layout");
        let mut out = vec![0u8; self.bytes()];
        for ((n, c, h, w), &v) in x.indexed_iter() {
            out[self.byte_offset(n, c, h, w)] = v as u8;
        }
        out
    }

    /// Unpacks the logical NCHW tensor, ignoring padding lanes.
    ///
    /// # Panics
    /// When `bytes` is shorter than [`ActLayout::bytes`].
    pub fn unpack(&self, bytes: &[u8]) -> Array4<i8> {
        assert!(bytes.len() >= self.bytes(), "packed tensor too short");
        let [n, c, h, w] = self.shape;
        Array4::from_shape_fn((n, c, h, w), |(n, c, h, w)| {
            bytes[self.byte_offset(n, c, h, w)] as i8
        })
    }
}

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
        }
    }

    /// Tile index of `(ob, cb, ky, kx)`; `cb` must lie in `cb_range[ob]`.
    pub fn tile_index(&self, ob: usize, cb: usize, ky: usize, kx: usize) -> usize {
        let (lo, hi) = self.cb_range[ob];
        debug_assert!((lo..hi).contains(&cb));
        self.ob_offset[ob] + ((cb - lo) * self.kh + ky) * self.kw + kx
    }

    /// Bytes of one tile (int8 lanes).
    pub fn tile_bytes(&self) -> usize {
        self.block_out * self.block_in
    }

    /// Packs OIHW weights of a convolution with `groups` groups.
    pub fn pack(&self, weight: ArrayView4<i8>, groups: usize) -> Vec<u8> {
        let (o, cg, kh, kw) = weight.dim();
        assert_eq!((kh, kw), (self.kh, self.kw), "kernel size vs layout");
        let og = o / groups;
        let tb = self.tile_bytes();
        let mut out = vec![0u8; self.tiles * tb];
        for ((oc, ic, ky, kx), &v) in weight.indexed_iter() {
            let g = oc / og;
            let c = g * cg + ic;
            let (ob, n) = (oc / self.block_out, oc % self.block_out);
            let (cb, k) = (c / self.block_in, c % self.block_in);
            let t = self.tile_index(ob, cb, ky, kx);
            out[t * tb + n * self.block_in + k] = v as u8;
        }
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
