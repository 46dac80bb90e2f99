//! The quantized layers the accelerator runs, and their exact integer semantics.
//!
//! This is the contract between the front end (which lowers ONNX graphs, quantizing them, into
//! these layers) and the back end (which turns each layer into accelerator instructions). The
//! `reference` functions here define the result bit for bit: the integer reference executor
//! calls them, and every accelerator program must reproduce them exactly.
//!
//! Tensors are int8, NCHW (activations) or OIHW (weights); accumulation is int32 with
//! wrap-around; requantization is a fixed sequence of operations the accelerator's ALU runs.

use ndarray::{Array2, Array4, ArrayView4};

mod eltwise;
pub use eltwise::{BinaryOp, QAffine, QBinary, QConcat, QLeakyRelu, QSlice, QTable, QUpsample};

/// Requantization of an int32 accumulator to int8, as ALU-executable integer steps:
///
/// ```text
/// v = acc >> pre_shift                      (arithmetic)
/// v = clamp(v, acc_clamp)                   (when set)
/// v = wrap32(v * mul[c])                    (mul per output channel, or one for all)
/// v = (v + (1 << (shift - 1))) >> shift     (round half up; skipped when shift == 0)
/// v = v + zero_point
/// out = clamp(v, lo, hi)                    (activation clip and int8 range in one)
/// ```
///
/// `mul` is 16-bit (the ALU's immediate width); `shift` is below 32 (a rounding constant
/// beyond the 16-bit immediate comes from a constant row); `pre_shift` keeps `v * mul` within
/// 32 bits for large accumulators.
/// `acc_clamp` does the same without dropping bits: bounds beyond which every output
/// saturates anyway, so that no accumulator can overflow the product.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Requant {
    pub pre_shift: u8,
    /// `(lo, hi)` the pre-shifted accumulator is clamped to before the multiplication.
    pub acc_clamp: Option<(i32, i32)>,
    /// One multiplier for the whole tensor, or one per output channel.
    pub mul: Vec<i16>,
    pub shift: u8,
    pub zero_point: i8,
    pub lo: i8,
    pub hi: i8,
}

impl Requant {
    /// The identity on values already in int8 range (clamps everything else).
    pub fn identity() -> Self {
        Requant {
            pre_shift: 0,
            acc_clamp: None,
            mul: vec![1],
            shift: 0,
            zero_point: 0,
            lo: i8::MIN,
            hi: i8::MAX,
        }
    }

    /// The multiplier of output channel `c`.
    pub fn mul_of(&self, c: usize) -> i16 {
        if self.mul.len() == 1 {
            self.mul[0]
        } else {
            self.mul[c]
        }
    }

    /// Requantizes one accumulator of output channel `c`.
    pub fn apply(&self, acc: i32, c: usize) -> i8 {
        let mut v = acc >> self.pre_shift;
        if let Some((lo, hi)) = self.acc_clamp {
            v = v.max(lo).min(hi);
        }
        v = v.wrapping_mul(i32::from(self.mul_of(c)));
        if self.shift > 0 {
            v = v.wrapping_add(1 << (self.shift - 1)) >> self.shift;
        }
        v = v.wrapping_add(i32::from(self.zero_point));
        v.clamp(i32::from(self.lo), i32::from(self.hi)) as i8
    }
}

/// A 2D convolution: int8 input NCHW, int8 weights OIHW (I = in_channels / groups), int32
/// bias, requantized int8 output. Zero padding (the input's zero point is 0 by construction).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct QConv2d {
    pub name: String,
    /// [N, C, H, W] of the input.
    pub input_shape: [usize; 4],
    /// [O, C / groups, KH, KW].
    pub weight: Array4<i8>,
    /// One per output channel.
    pub bias: Vec<i32>,
    /// (height, width).
    pub stride: (usize, usize),
    /// [top, left, bottom, right].
    pub pad: [usize; 4],
    pub groups: usize,
    pub requant: Requant,
}

impl QConv2d {
    /// [N, O, OH, OW] of the output.
    pub fn output_shape(&self) -> [usize; 4] {
        let [n, _, h, w] = self.input_shape;
        let [o, _, kh, kw] = self.weight.shape().try_into().expect("4-D weight");
        let oh = (h + self.pad[0] + self.pad[2] - kh) / self.stride.0 + 1;
        let ow = (w + self.pad[1] + self.pad[3] - kw) / self.stride.1 + 1;
        [n, o, oh, ow]
    }

    /// The int32 accumulators (bias included, before requantization).
    pub fn accumulate(&self, x: ArrayView4<i8>) -> Array4<i32> {
        let [n, o, oh, ow] = self.output_shape();
        let [_, c, h, w] = self.input_shape;
        let [_, cg, kh, kw] = self.weight.shape().try_into().expect("4-D weight");
        let og = o / self.groups;
        assert_eq!(x.shape(), &self.input_shape, "{}: input shape", self.name);
        assert_eq!(c, cg * self.groups, "{}: channels vs groups", self.name);
        let mut acc = Array4::<i32>::zeros((n, o, oh, ow));
        for b in 0..n {
            for oc in 0..o {
                let g = oc / og;
                for y in 0..oh {
                    for xo in 0..ow {
                        let mut s = self.bias[oc];
                        for ic in 0..cg {
                            for ky in 0..kh {
                                let iy = (y * self.stride.0 + ky) as isize - self.pad[0] as isize;
                                if iy < 0 || iy >= h as isize {
                                    continue;
                                }
                                for kx in 0..kw {
                                    let ix =
                                        (xo * self.stride.1 + kx) as isize - self.pad[1] as isize;
                                    if ix < 0 || ix >= w as isize {
                                        continue;
                                    }
                                    let xv = x[[b, g * cg + ic, iy as usize, ix as usize]];
                                    let wv = self.weight[[oc, ic, ky, kx]];
                                    s = s.wrapping_add(i32::from(xv) * i32::from(wv));
                                }
                            }
                        }
                        acc[[b, oc, y, xo]] = s;
                    }
                }
            }
        }
        acc
    }

    /// The exact output.
    pub fn reference(&self, x: ArrayView4<i8>) -> Array4<i8> {
        let acc = self.accumulate(x);
        Array4::from_shape_fn(acc.dim(), |(b, c, y, xo)| {
            self.requant.apply(acc[[b, c, y, xo]], c)
        })
    }
}

/// A fully connected layer: y = requant(x . W^T + bias), x int8 [N, K], W int8 [M, K].
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct QDense {
    pub name: String,
    pub weight: Array2<i8>,
    pub bias: Vec<i32>,
    pub requant: Requant,
}

impl QDense {
    pub fn reference(&self, x: &Array2<i8>) -> Array2<i8> {
        let acc = x.mapv(i32::from).dot(&self.weight.mapv(i32::from).t());
        Array2::from_shape_fn(acc.dim(), |(b, m)| {
            self.requant
                .apply(acc[[b, m]].wrapping_add(self.bias[m]), m)
        })
    }
}

/// Element-wise residual add of two int8 tensors of the same shape, each rescaled first:
/// `out = clamp(ra(a) + rb(b) ...)` expressed as `requant(a * ma + b * mb)` with 16-bit
/// multipliers applied in int32, then the shared `requant` (whose `mul` is per channel or 1).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct QAdd {
    pub name: String,
    pub mul_a: i16,
    pub mul_b: i16,
    pub requant: Requant,
}

impl QAdd {
    pub fn reference(&self, a: ArrayView4<i8>, b: ArrayView4<i8>) -> Array4<i8> {
        assert_eq!(a.shape(), b.shape(), "{}: operand shapes", self.name);
        Array4::from_shape_fn(a.dim(), |(n, c, y, x)| {
            let acc = (i32::from(a[[n, c, y, x]]) * i32::from(self.mul_a))
                .wrapping_add(i32::from(b[[n, c, y, x]]) * i32::from(self.mul_b));
            self.requant.apply(acc, c)
        })
    }
}

/// Max pooling over int8 (no requantization needed: max commutes with the int8 scale).
/// Padding cells never win (they count as -128).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct QMaxPool {
    pub name: String,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    /// [top, left, bottom, right].
    pub pad: [usize; 4],
}

impl QMaxPool {
    pub fn output_hw(&self, h: usize, w: usize) -> (usize, usize) {
        (
            (h + self.pad[0] + self.pad[2] - self.kernel.0) / self.stride.0 + 1,
            (w + self.pad[1] + self.pad[3] - self.kernel.1) / self.stride.1 + 1,
        )
    }

    pub fn reference(&self, x: ArrayView4<i8>) -> Array4<i8> {
        let (n, c, h, w) = x.dim();
        let (oh, ow) = self.output_hw(h, w);
        Array4::from_shape_fn((n, c, oh, ow), |(b, ch, y, xo)| {
            let mut m = i8::MIN;
            for ky in 0..self.kernel.0 {
                for kx in 0..self.kernel.1 {
                    let iy = (y * self.stride.0 + ky) as isize - self.pad[0] as isize;
                    let ix = (xo * self.stride.1 + kx) as isize - self.pad[1] as isize;
                    if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                        m = m.max(x[[b, ch, iy as usize, ix as usize]]);
                    }
                }
            }
            m
        })
    }
}

/// Average pooling over the whole spatial extent, as a sum then a requantization
/// (`requant.mul`/`shift` encode 1/(H*W) times the scale change).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct QGlobalAvgPool {
    pub name: String,
    pub requant: Requant,
}

impl QGlobalAvgPool {
    pub fn reference(&self, x: ArrayView4<i8>) -> Array4<i8> {
        let (n, c, _, _) = x.dim();
        Array4::from_shape_fn((n, c, 1, 1), |(b, ch, _, _)| {
            let s: i32 = x
                .slice(ndarray::s![b, ch, .., ..])
                .iter()
                .map(|&v| i32::from(v))
                .sum();
            self.requant.apply(s, ch)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requant_rounds_half_up_and_clips() {
        let r = Requant {
            pre_shift: 0,
            acc_clamp: None,
            mul: vec![3],
            shift: 2,
            zero_point: 1,
            lo: 0,
            hi: 10,
        };
        // (5 * 3 + 2) >> 2 = 4, + 1 = 5
        assert_eq!(r.apply(5, 0), 5);
        assert_eq!(r.apply(-100, 0), 0);
        assert_eq!(r.apply(100, 0), 10);
    }

    #[test]
    fn the_accumulator_clamp_comes_before_the_multiplier() {
        let r = Requant {
            pre_shift: 0,
            acc_clamp: Some((-5000, 5000)),
            mul: vec![30000],
            shift: 20,
            zero_point: 0,
            lo: -128,
            hi: 127,
        };
        // Unclamped, 2^30 * 30000 would wrap; clamped, it saturates as the exact product does.
        assert_eq!(r.apply(1 << 30, 0), 127);
        assert_eq!(r.apply(-(1 << 30), 0), -128);
        assert_eq!(r.apply(700, 0), 20);
    }

    #[test]
    fn conv_1x1_is_a_matrix_product() {
        let w = Array4::from_shape_fn((2, 3, 1, 1), |(o, i, _, _)| (o as i8 + 1) * (i as i8 - 1));
        let conv = QConv2d {
            name: "c".into(),
            input_shape: [1, 3, 2, 2],
            weight: w,
            bias: vec![10, -10],
            stride: (1, 1),
            pad: [0; 4],
            groups: 1,
            requant: Requant::identity(),
        };
        let x = Array4::from_shape_fn((1, 3, 2, 2), |(_, c, y, xx)| (c + y + xx) as i8);
        let y = conv.reference(x.view());
        // out[o] = bias[o] + sum_i (o+1)(i-1) x[i] = bias + (o+1)(x2 - x0) = bias + 2(o+1)
        assert_eq!(y[[0, 0, 0, 0]], 12);
        assert_eq!(y[[0, 1, 1, 1]], -6);
    }
}
