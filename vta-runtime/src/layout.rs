//! The packed DRAM layout of activation tensors, and packing between it and NCHW int8 tensors
//! on the host (lanes of 8 bits, or of 4 or 2 bits on a core with narrower inputs: the
//! tensor's int8 values must then fit those lanes).
//!
//! # Activations: `NCHW{b}n{c}c`
//!
//! An activation tensor `[N, C, H, W]` is stored as DRAM *elements* of `b = BATCH` rows by
//! `c` lanes (`c = BLOCK_IN` for tensors read by a convolution or dense layer through INP
//! loads, `c = BLOCK_OUT` for tensors written by STORE or read by ACC8 loads). Element
//! `(nb, cb, h, w)` holds samples `nb*b .. nb*b + b` and channels `cb*c .. cb*c + c` of pixel
//! `(h, w)`, lane `bi*c + ci` (the lane order and sub-byte packing of INP/OUT elements,
//! `isa::spec` section 2), and sits at element index
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
//! # Folded activations (im2col)
//!
//! A convolution over few input channels (an RGB image: 3 of 16 lanes used) wastes most of
//! its multiplies on padding lanes. A layout with a [`WindowFold`] packs the tensor the way such
//! a convolution reads it: every element holds a `kh x kw` window of the input with its
//! channels, *virtual channel* `v = (ky * kw + kx) * C + c` of window `(y, x)` being
//! `x[n, c, y * sh + ky - pad_top, x * sw + kx - pad_left]` (zero outside the input and for
//! `v >= kh * kw * C`). The packed tensor is the plain layout above of the *folded shape*
//! `[N, kh * kw * C, rows, cols]`, and the convolution becomes one with a smaller kernel over
//! it. The host produces it when it packs the tensor ([`ActLayout::pack`]); only a tensor the
//! host uploads can have it.
//!
//! # Digit planes
//!
//! A tensor whose values are wider than the lanes (the 8-bit logits of a layer on a 4-bit
//! core) can be stored as [`ActLayout::digits`] planes of `bits`-bit digits, `digits * bits =
//! 8`: plane `k` is the plain layout's channel blocks `k * CB .. (k + 1) * CB` (`CB =
//! ceil(C / block)`), and holds bits `k * bits ..` of every value; the planes below the top
//! one are read unsigned, the top one signed, so `v = sum_k digit_k * 2^(k * bits)`. The
//! accelerator writes such a tensor (one STORE per plane of the value shifted right, which
//! keeps its low bits) for the host to read ([`ActLayout::unpack`]).

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
    /// A convolution window folded into the channel axis (see the module documentation).
    pub fold: Option<WindowFold>,
    /// Bits per lane: 8, or the 4 or 2 of a core's narrower inputs and outputs.
    pub bits: usize,
    /// Digit planes: 1, or the `8 / bits` planes of a tensor whose values are wider than the
    /// lanes (see the module documentation).
    pub digits: usize,
}

/// A window of the input folded into the channel axis of each element (see the module
/// documentation).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowFold {
    /// Window rows and columns.
    pub kh: usize,
    pub kw: usize,
    /// Steps between windows, in input rows and columns.
    pub sh: usize,
    pub sw: usize,
    /// Zero rows above and zero columns left of the input.
    pub pad_top: usize,
    pub pad_left: usize,
    /// Windows down and across: the folded plane is `rows x cols` elements.
    pub rows: usize,
    pub cols: usize,
}

impl WindowFold {
    /// Input pixel `(h, w)` of window `(y, x)`'s virtual channel `v` (of `c` channels), with
    /// its channel, when it lies inside the `[h_in, w_in]` input.
    fn source(&self, c: usize, v: usize, y: usize, x: usize, hw: [usize; 2]) -> Option<[usize; 3]> {
        let (tap, ch) = (v / c, v % c);
        let (ky, kx) = (tap / self.kw, tap % self.kw);
        if ky >= self.kh {
            return None;
        }
        let h = (y * self.sh + ky).checked_sub(self.pad_top)?;
        let w = (x * self.sw + kx).checked_sub(self.pad_left)?;
        (h < hw[0] && w < hw[1]).then_some([ch, h, w])
    }
}

impl ActLayout {
    pub fn new(shape: [usize; 4], batch: usize, block: usize) -> Self {
        assert!(batch > 0 && block > 0, "empty element");
        ActLayout {
            shape,
            batch,
            block,
            fold: None,
            bits: 8,
            digits: 1,
        }
    }

    /// `self` with lanes of `bits` (2, 4 or 8) bits.
    pub fn with_bits(self, bits: usize) -> Self {
        ActLayout { bits, ..self }
    }

    /// `self` stored as digit planes of its lanes' width, every int8 value held (see the
    /// module documentation).
    pub fn in_digits(self) -> Self {
        ActLayout {
            digits: 8 / self.bits,
            ..self
        }
    }

    /// `self` with window `fold` folded into the channel axis.
    pub fn folded(self, fold: WindowFold) -> Self {
        ActLayout {
            fold: Some(fold),
            ..self
        }
    }

    /// The shape of the plain layout the packed tensor has: the logical shape, for a
    /// folded layout `[N, kh * kw * C, rows, cols]`, for digit planes `[N, digits * CB *
    /// block, H, W]`.
    pub fn packed_shape(&self) -> [usize; 4] {
        let [n, c, h, w] = self.shape;
        match self.fold {
            None if self.digits > 1 => [n, self.digits * c.div_ceil(self.block) * self.block, h, w],
            None => [n, c, h, w],
            Some(f) => [n, f.kh * f.kw * c, f.rows, f.cols],
        }
    }

    /// The packed tensor's bytes, computed without overflow, or why the layout describes no
    /// tensor (a layout read from a file is checked so before anything is packed with it).
    pub fn checked_bytes(&self) -> Result<u64, String> {
        if self.batch == 0 || self.block == 0 || self.shape.contains(&0) {
            return Err(format!("an empty layout {self:?}"));
        }
        if ![2, 4, 8].contains(&self.bits)
            || !(self.batch * self.block * self.bits).is_multiple_of(8)
        {
            return Err(format!(
                "layout {self:?}: lanes of {} bits (2, 4 or 8) that fill whole bytes",
                self.bits
            ));
        }
        if self.digits != 1 && (self.digits * self.bits != 8 || self.fold.is_some()) {
            return Err(format!(
                "layout {self:?}: {} digit planes of {} bits (1, or planes of 8 bits in all, \
                 unfolded)",
                self.digits, self.bits
            ));
        }
        let too_big = || format!("layout {self:?} describes more than 2^64 bytes");
        let [n, c, h, w] = self.shape;
        let (c, h, w) = match self.fold {
            None if self.digits > 1 => (
                c.div_ceil(self.block)
                    .checked_mul(self.digits * self.block)
                    .ok_or_else(too_big)?,
                h,
                w,
            ),
            None => (c, h, w),
            Some(f) => {
                if [f.kh, f.kw, f.sh, f.sw, f.rows, f.cols].contains(&0) {
                    return Err(format!("an empty window fold {f:?}"));
                }
                let taps = f.kh.checked_mul(f.kw).ok_or_else(too_big)?;
                (taps.checked_mul(c).ok_or_else(too_big)?, f.rows, f.cols)
            }
        };
        let lanes = [
            n.div_ceil(self.batch),
            c.div_ceil(self.block),
            h,
            w,
            self.batch,
            self.block,
        ]
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
        .ok_or_else(too_big)?;
        Ok(lanes / 8 * self.bits as u64 + lanes % 8 * self.bits as u64 / 8)
    }

    /// The layout an INP load reads (`BATCH x BLOCK_IN` lanes of `INP_WIDTH`).
    pub fn inp(cfg: &HwConfig, shape: [usize; 4]) -> Self {
        Self::new(shape, cfg.batch() as usize, cfg.block_in() as usize)
            .with_bits(cfg.inp_width() as usize)
    }

    /// The layout STORE writes (`BATCH x BLOCK_OUT` lanes of `OUT_WIDTH = INP_WIDTH`) and
    /// ACC8 loads read (on a core with 8-bit inputs).
    pub fn out(cfg: &HwConfig, shape: [usize; 4]) -> Self {
        Self::new(shape, cfg.batch() as usize, cfg.block_out() as usize)
            .with_bits(cfg.inp_width() as usize)
    }

    /// The values one lane holds.
    pub fn lane_range(&self) -> (i8, i8) {
        let half = 1i16 << (self.bits - 1);
        ((-half) as i8, (half - 1) as i8)
    }

    /// Sample blocks `NB = ceil(N / BATCH)`.
    pub fn n_blocks(&self) -> usize {
        self.shape[0].div_ceil(self.batch)
    }

    /// Channel blocks `CB = ceil(C / block)` (of the packed shape).
    pub fn c_blocks(&self) -> usize {
        self.packed_shape()[1].div_ceil(self.block)
    }

    /// Elements in the plane of one (sample block, channel block): `H * W` (of the packed
    /// shape).
    pub fn plane(&self) -> usize {
        let [_, _, h, w] = self.packed_shape();
        h * w
    }

    /// DRAM elements of the whole tensor.
    pub fn elems(&self) -> usize {
        self.n_blocks() * self.c_blocks() * self.plane()
    }

    /// Bytes of one element.
    pub fn elem_bytes(&self) -> usize {
        self.batch * self.block * self.bits / 8
    }

    /// Bytes of the whole packed tensor.
    pub fn bytes(&self) -> usize {
        self.elems() * self.elem_bytes()
    }

    /// Element index of `(nb, cb, h, w)` (of the packed shape).
    pub fn elem_index(&self, nb: usize, cb: usize, h: usize, w: usize) -> usize {
        let [_, _, ph, pw] = self.packed_shape();
        ((nb * self.c_blocks() + cb) * ph + h) * pw + w
    }

    /// Lane index of value `(n, c, h, w)` of the packed shape (for a plain layout, the
    /// logical value) in the whole tensor: its bits start at bit `lane * bits`.
    pub fn lane_index(&self, n: usize, c: usize, h: usize, w: usize) -> usize {
        let e = self.elem_index(n / self.batch, c / self.block, h, w);
        e * self.batch * self.block + (n % self.batch) * self.block + c % self.block
    }

    /// The packed channel of channel `c`'s digit `k` (digit planes).
    pub fn plane_channel(&self, k: usize, c: usize) -> usize {
        k * self.shape[1].div_ceil(self.block) * self.block + c
    }

    /// Offset of the byte holding value `(n, c, h, w)` (see [`ActLayout::lane_index`]).
    pub fn byte_offset(&self, n: usize, c: usize, h: usize, w: usize) -> usize {
        self.lane_index(n, c, h, w) * self.bits / 8
    }

    /// The DRAM segment's shape and lane type: `[NB, CB, H, W, BATCH, block]` int8 lanes, or
    /// `[NB, CB, H, W, element bytes]` bytes for narrower lanes (of the packed shape).
    pub fn segment_shape(&self) -> (isa::DType, Vec<usize>) {
        let [_, _, h, w] = self.packed_shape();
        let (nb, cb) = (self.n_blocks(), self.c_blocks());
        if self.bits == 8 {
            (isa::DType::I8, vec![nb, cb, h, w, self.batch, self.block])
        } else {
            (isa::DType::U8, vec![nb, cb, h, w, self.elem_bytes()])
        }
    }

    fn put(&self, out: &mut [u8], lane: usize, v: i8) {
        let bit = lane * self.bits;
        let mask = ((1u16 << self.bits) - 1) as u8;
        let b = &mut out[bit / 8];
        *b = (*b & !(mask << (bit % 8))) | (((v as u8) & mask) << (bit % 8));
    }

    fn get(&self, bytes: &[u8], lane: usize) -> i8 {
        let bit = lane * self.bits;
        let up = (8 - self.bits - bit % 8) as u32;
        ((bytes[bit / 8] << up) as i8) >> (8 - self.bits)
    }

    /// Packs an NCHW tensor (padding lanes are zero; a folded layout gets every window).
    /// Fails, naming the first, when a value does not fit the lanes.
    ///
    /// # Panics
    /// When `x` does not have [`ActLayout::shape`].
    pub fn pack(&self, x: ArrayView4<i8>) -> Result<Vec<u8>, String> {
        assert_eq!(x.shape(), &self.shape, "tensor shape vs layout");
        let (lo, hi) = self.lane_range();
        if self.digits > 1 {
            let mut out = vec![0u8; self.bytes()];
            for ((n, c, h, w), &v) in x.indexed_iter() {
                for k in 0..self.digits {
                    let lane = self.lane_index(n, self.plane_channel(k, c), h, w);
                    // (`put` keeps the digit's low bits: below the top plane, its bits as
                    // they are)
                    self.put(&mut out, lane, (i16::from(v) >> (k * self.bits)) as i8);
                }
            }
            return Ok(out);
        }
        if let Some((at, v)) = x.indexed_iter().find(|(_, &v)| v < lo || v > hi) {
            return Err(format!(
                "value {v} at {at:?} does not fit the core's {}-bit lanes [{lo}, {hi}]",
                self.bits
            ));
        }
        let mut out = vec![0u8; self.bytes()];
        match self.fold {
            None => {
                for ((n, c, h, w), &v) in x.indexed_iter() {
                    self.put(&mut out, self.lane_index(n, c, h, w), v);
                }
            }
            Some(f) => {
                let [n, c, h, w] = self.shape;
                let [_, vc, rows, cols] = self.packed_shape();
                for b in 0..n {
                    for v in 0..vc {
                        for y in 0..rows {
                            for q in 0..cols {
                                if let Some([ch, ih, iw]) = f.source(c, v, y, q, [h, w]) {
                                    let lane = self.lane_index(b, v, y, q);
                                    self.put(&mut out, lane, x[[b, ch, ih, iw]]);
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Unpacks the logical NCHW tensor, ignoring padding lanes. A folded layout gives each
    /// value from the first window holding it, and zero for input pixels no window covers
    /// (which the convolution reading it never uses).
    ///
    /// # Panics
    /// When `bytes` is shorter than [`ActLayout::bytes`].
    pub fn unpack(&self, bytes: &[u8]) -> Array4<i8> {
        assert!(bytes.len() >= self.bytes(), "packed tensor too short");
        let [n, c, h, w] = self.shape;
        match self.fold {
            None if self.digits > 1 => Array4::from_shape_fn((n, c, h, w), |(n, c, h, w)| {
                let mask = (1i16 << self.bits) - 1;
                let top = self.digits - 1;
                let digit = |k: usize| {
                    i16::from(self.get(bytes, self.lane_index(n, self.plane_channel(k, c), h, w)))
                };
                let low: i16 = (0..top).map(|k| (digit(k) & mask) << (k * self.bits)).sum();
                (low + (digit(top) << (top * self.bits))) as i8
            }),
            None => Array4::from_shape_fn((n, c, h, w), |(n, c, h, w)| {
                self.get(bytes, self.lane_index(n, c, h, w))
            }),
            Some(f) => {
                let mut x = Array4::zeros((n, c, h, w));
                let mut seen = Array4::from_elem((n, c, h, w), false);
                let [_, vc, rows, cols] = self.packed_shape();
                for b in 0..n {
                    for y in 0..rows {
                        for q in 0..cols {
                            for v in 0..vc {
                                if let Some([ch, ih, iw]) = f.source(c, v, y, q, [h, w]) {
                                    if !seen[[b, ch, ih, iw]] {
                                        seen[[b, ch, ih, iw]] = true;
                                        x[[b, ch, ih, iw]] =
                                            self.get(bytes, self.lane_index(b, v, y, q));
                                    }
                                }
                            }
                        }
                    }
                }
                x
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 7x7 stride-2 window of an RGB image folded whole, and its columns only.
    #[test]
    fn folded_layouts_hold_every_window() {
        let x = Array4::from_shape_fn((2, 3, 9, 8), |(n, c, h, w)| {
            (n * 97 + c * 31 + h * 8 + w) as i8
        });
        let whole = WindowFold {
            kh: 7,
            kw: 7,
            sh: 2,
            sw: 2,
            pad_top: 3,
            pad_left: 3,
            rows: 5,
            cols: 4,
        };
        let columns = WindowFold {
            kh: 1,
            sh: 1,
            pad_top: 0,
            rows: 9,
            ..whole
        };
        for fold in [whole, columns] {
            let l = ActLayout::new([2, 3, 9, 8], 1, 16).folded(fold);
            assert_eq!(l.packed_shape(), [2, fold.kh * 7 * 3, fold.rows, 4]);
            let bytes = l.pack(x.view()).unwrap();
            assert_eq!(bytes.len(), l.bytes());
            for (y, q, ky, kx, c) in [(0, 0, 3, 3, 0), (2, 1, 0, 6, 2), (4, 3, 2, 0, 1)] {
                let ky = if fold.kh == 1 { 0 } else { ky };
                let v = (ky * fold.kw + kx) * 3 + c;
                let (h, w) = (y * fold.sh + ky - fold.pad_top, q * 2 + kx - 3);
                assert_eq!(bytes[l.byte_offset(1, v, y, q)] as i8, x[[1, c, h, w]]);
            }
            // a window reaching into the padding, and a padding lane
            assert_eq!(bytes[l.byte_offset(0, 0, 0, 0)], 0);
            let v_pad = fold.kh * fold.kw * 3;
            if v_pad % 16 != 0 {
                assert_eq!(bytes[l.byte_offset(0, v_pad, 1, 1)], 0);
            }
            // the windows cover every pixel here
            assert_eq!(l.unpack(&bytes), x);
            assert_eq!(l.checked_bytes(), Ok(l.bytes() as u64));
        }
        let empty = ActLayout::new([1, 3, 9, 8], 1, 16).folded(WindowFold { kh: 0, ..whole });
        assert!(empty.checked_bytes().is_err());
    }

    /// Sub-byte lanes: values round-trip at 4 and 2 bits, lane 0 in the lowest bits, and a
    /// value beyond the lanes is refused by name.
    #[test]
    fn narrow_lanes_pack_and_unpack() {
        for (bits, lo, hi) in [(4usize, -8i8, 7i8), (2, -2, 1)] {
            let x = Array4::from_shape_fn((3, 5, 2, 3), |(n, c, h, w)| {
                let span = (hi as i32 - lo as i32 + 1) as usize;
                (lo as i32 + ((n * 7 + c * 3 + h * 5 + w) % span) as i32) as i8
            });
            let l = ActLayout::new([3, 5, 2, 3], 2, 4).with_bits(bits);
            assert_eq!(l.lane_range(), (lo, hi));
            let bytes = l.pack(x.view()).unwrap();
            assert_eq!(bytes.len(), l.bytes());
            assert_eq!(l.bytes(), l.elems() * 2 * 4 * bits / 8);
            assert_eq!(l.checked_bytes(), Ok(l.bytes() as u64));
            assert_eq!(l.unpack(&bytes), x);
            let first = x[[0, 0, 0, 0]] as u8 & ((1u8 << bits) - 1);
            assert_eq!(bytes[0] & ((1u8 << bits) - 1), first);
            let mut wide = x.clone();
            wide[[2, 4, 1, 2]] = hi + 1;
            let e = l.pack(wide.view()).unwrap_err();
            assert!(
                e.contains(&format!("{}", hi + 1)) && e.contains("(2, 4, 1, 2)"),
                "{e}"
            );
        }
    }

    /// Every int8 value through digit planes of 4 and 2 bits: plane `k` holds the low bits of
    /// the value shifted right by `k` digits (what a STORE of the shifted accumulator
    /// writes), and unpacking gives the value back.
    #[test]
    fn digit_planes_hold_every_int8_value() {
        for bits in [4usize, 2] {
            let x = Array4::from_shape_fn((3, 43, 2, 3), |(n, c, h, w)| {
                ((n * 131 + c * 6 + h * 3 + w) % 256) as u8 as i8
            });
            let l = ActLayout::new([3, 43, 2, 3], 2, 16)
                .with_bits(bits)
                .in_digits();
            assert_eq!(l.digits, 8 / bits);
            assert_eq!(l.packed_shape(), [3, 48 * 8 / bits, 2, 3]);
            assert_eq!(l.checked_bytes(), Ok(l.bytes() as u64));
            let bytes = l.pack(x.view()).unwrap();
            assert_eq!(bytes.len(), l.bytes());
            let plain = ActLayout::new(l.packed_shape(), 2, 16).with_bits(bits);
            let lanes = plain.unpack(&bytes);
            let mask = (1i16 << bits) - 1;
            for ((n, c, h, w), &v) in x.indexed_iter() {
                for k in 0..l.digits {
                    let d = lanes[[n, l.plane_channel(k, c), h, w]];
                    assert_eq!(
                        i16::from(d) & mask,
                        (i16::from(v) >> (k * bits)) & mask,
                        "{v} digit {k} of {bits} bits"
                    );
                }
            }
            assert_eq!(l.unpack(&bytes), x);
        }
        let bad = ActLayout {
            digits: 3,
            ..ActLayout::new([1, 4, 2, 2], 1, 16).with_bits(4)
        };
        assert!(bad.checked_bytes().unwrap_err().contains("3 digit planes"));
    }
}
