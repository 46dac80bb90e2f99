//! The packed DRAM layout of activation tensors, and packing between it and NCHW int8 tensors
//! on the host.
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

use isa::HwConfig;
use ndarray::{Array4, ArrayView4};

/// The packed layout of one activation tensor (see the module documentation).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
