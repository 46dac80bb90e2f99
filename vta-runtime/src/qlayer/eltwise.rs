//! The element-wise quantized layers of edge CNNs, with their exact integer semantics:
//!
//! - [`QTable`]: any single-input function as a 256-entry int8 -> int8 table;
//! - [`QAffine`]: `requant(x * w[c] + b[c])`: per-channel or scalar Mul/Add/Sub/Div by
//!   constants, HardSigmoid, a clamp (Relu/Clip) on its own, a change of scale;
//! - [`QBinary`]: Add or Mul of two tensors, the second possibly broadcast over the plane
//!   (squeeze-and-excite), with zero points;
//! - [`QLeakyRelu`]: `requant(x >= 0 ? x * p : x * n[c])` (LeakyRelu, PRelu);
//! - [`QUpsample`]: nearest upsampling by integer factors (every cell repeated).
//!
//! Activations are int8 of rank 2 to 4 read as NCHW (missing trailing dimensions are 1, the
//! channel axis is 1), like [`super::QAdd`].

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::Requant;
use crate::ops::quantize_linear::quantize_value;

/// The NCHW dimensions of a rank-2..4 shape.
fn nchw(s: &[usize]) -> Result<[usize; 4], String> {
    if !(2..=4).contains(&s.len()) {
        return Err(format!("a rank-{} tensor (2 to 4 are supported)", s.len()));
    }
    let mut v = [1; 4];
    v[..s.len()].copy_from_slice(s);
    Ok(v)
}

/// Applies `f(value, channel)` to every element of an NCHW-like tensor.
fn per_channel(x: ArrayViewD<i8>, f: impl Fn(i8, usize) -> i8) -> ArrayD<i8> {
    let c = x.shape().get(1).copied().unwrap_or(1);
    let plane: usize = x.shape().iter().skip(2).product();
    let v: Vec<i8> = x
        .iter()
        .enumerate()
        .map(|(k, &v)| f(v, (k / plane.max(1)) % c.max(1)))
        .collect();
    ArrayD::from_shape_vec(IxDyn(x.shape()), v).expect("same shape")
}

/// A single-input function of an int8 tensor as a lookup table: `y = table[x + 128]`.
///
/// The table is data: how to run it (a CPU lookup, or an accelerator ALU with a lookup
/// table) is the back end's decision. [`QTable::build`] computes it from a float function and
/// the input and output quantization.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct QTable {
    pub name: String,
    /// What the table computes (`"Sigmoid"`, ...), for reports.
    pub function: String,
    /// 256 entries: entry `k` is the output for the input `k - 128`.
    pub table: Vec<i8>,
}

impl QTable {
    /// The table of `f` from int8 inputs with `real = in_scale * (q - in_zp)` to int8 outputs
    /// with `real = out_scale * (q - out_zp)`, clamped to `[lo, hi]`. Entry for input `q`:
    ///
    /// ```text
    /// x = (q - in_zp) as f32 * in_scale                       (the plan's Dequantize step)
    /// y = f(x)                                                (in f32)
    /// t = clamp(saturate(round_half_even(y / out_scale) + out_zp), lo, hi)
    ///                                                         (the plan's Quantize step)
    /// ```
    ///
    /// so a table layer is bit-identical to running `f` on the CPU between a dequantization
    /// and a quantization with the same parameters (and to ONNX's QDQ form
    /// `DequantizeLinear -> f -> QuantizeLinear`, up to the last bit of `f` itself).
    pub fn build(
        name: &str,
        function: &str,
        f: impl Fn(f32) -> f32,
        (in_scale, in_zp): (f32, i32),
        (out_scale, out_zp): (f32, i32),
        (lo, hi): (i8, i8),
    ) -> QTable {
        let table = (-128i32..=127)
            .map(|q| {
                let x = (q - in_zp) as f32 * in_scale;
                let t = quantize_value(f(x), out_scale, out_zp, -128, 127);
                t.clamp(i32::from(lo), i32::from(hi)) as i8
            })
            .collect();
        QTable {
            name: name.to_string(),
            function: function.to_string(),
            table,
        }
    }

    /// The output for one input.
    pub fn lookup(&self, x: i8) -> i8 {
        self.table[(i32::from(x) + 128) as usize]
    }

    pub fn reference(&self, x: ArrayViewD<i8>) -> ArrayD<i8> {
        x.mapv(|v| self.lookup(v))
    }

    /// Checks the table's size.
    pub fn check(&self) -> Result<(), String> {
        if self.table.len() == 256 {
            Ok(())
        } else {
            Err(format!(
                "a table of {} entries (256 expected)",
                self.table.len()
            ))
        }
    }
}

/// A per-channel affine map with requantization:
/// `y = requant((x * weight[c]) + bias[c], c)` (wrapping int32; `weight` and `bias` hold one
/// value for every channel or one for all).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct QAffine {
    pub name: String,
    pub weight: Vec<i16>,
    pub bias: Vec<i32>,
    pub requant: Requant,
}

fn pick<T: Copy>(v: &[T], c: usize) -> T {
    if v.len() == 1 {
        v[0]
    } else {
        v[c]
    }
}

impl QAffine {
    /// The accumulator of one element of channel `c`.
    pub fn acc(&self, x: i8, c: usize) -> i32 {
        (i32::from(x) * i32::from(pick(&self.weight, c))).wrapping_add(pick(&self.bias, c))
    }

    pub fn reference(&self, x: ArrayViewD<i8>) -> ArrayD<i8> {
        per_channel(x, |v, c| self.requant.apply(self.acc(v, c), c))
    }

    /// Checks the per-channel vectors against `channels`.
    pub fn check(&self, channels: usize) -> Result<(), String> {
        for (what, n) in [
            ("weights", self.weight.len()),
            ("biases", self.bias.len()),
            ("multipliers", self.requant.mul.len()),
        ] {
            if n != 1 && n != channels {
                return Err(format!("{n} {what} for {channels} channels"));
            }
        }
        Ok(())
    }
}

/// What a [`QBinary`] computes from its two operands.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a' * mul_a + b' * mul_b`.
    Add,
    /// `a' * b'`.
    Mul,
}

/// Add or Mul of two int8 tensors with zero points and requantization:
/// `a' = a - zp_a`, `b' = b - zp_b`, `y = requant(Add: a' * mul_a + b' * mul_b | Mul: a' * b', c)`.
/// `b` has the shape of `a`, or `[N, C, 1, 1]` for a rank-4 `a` (broadcast over the plane,
/// as in squeeze-and-excite blocks).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct QBinary {
    pub name: String,
    pub op: BinaryOp,
    pub zp_a: i8,
    pub zp_b: i8,
    /// Operand multipliers of `Add` (1 for `Mul`).
    pub mul_a: i16,
    pub mul_b: i16,
    pub requant: Requant,
}

impl QBinary {
    /// Whether `b` of shape `sb` broadcasts to `a` of shape `sa` as this layer allows.
    pub fn operands_fit(sa: &[usize], sb: &[usize]) -> bool {
        sa == sb || (sa.len() == 4 && sb.len() == 4 && sb[..2] == sa[..2] && sb[2..] == [1, 1])
    }

    /// The accumulator of one element pair.
    pub fn acc(&self, a: i8, b: i8) -> i32 {
        let a = i32::from(a) - i32::from(self.zp_a);
        let b = i32::from(b) - i32::from(self.zp_b);
        match self.op {
            BinaryOp::Add => (a * i32::from(self.mul_a)).wrapping_add(b * i32::from(self.mul_b)),
            BinaryOp::Mul => a * b,
        }
    }

    pub fn reference(&self, a: ArrayViewD<i8>, b: ArrayViewD<i8>) -> Result<ArrayD<i8>, String> {
        if !Self::operands_fit(a.shape(), b.shape()) {
            return Err(format!(
                "operand shapes {:?} and {:?}: the second must equal the first or be [N, C, 1, 1]",
                a.shape(),
                b.shape()
            ));
        }
        let bb = b
            .broadcast(IxDyn(a.shape()))
            .ok_or("operands do not broadcast")?;
        let [_, c, h, w] = nchw(a.shape())?;
        let v: Vec<i8> = a
            .iter()
            .zip(bb.iter())
            .enumerate()
            .map(|(k, (&x, &y))| self.requant.apply(self.acc(x, y), (k / (h * w)) % c))
            .collect();
        Ok(ArrayD::from_shape_vec(IxDyn(a.shape()), v).expect("same shape"))
    }
}

/// LeakyRelu / PRelu with requantization: `x' = x - zp`,
/// `y = requant(x' >= 0 ? x' * mul_pos : x' * mul_neg[c], c)`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct QLeakyRelu {
    pub name: String,
    pub zp: i8,
    pub mul_pos: i16,
    /// One slope multiplier for all channels (LeakyRelu) or one per channel (PRelu).
    pub mul_neg: Vec<i16>,
    pub requant: Requant,
}

impl QLeakyRelu {
    /// The accumulator of one element of channel `c`.
    pub fn acc(&self, x: i8, c: usize) -> i32 {
        let x = i32::from(x) - i32::from(self.zp);
        if x >= 0 {
            x * i32::from(self.mul_pos)
        } else {
            x * i32::from(pick(&self.mul_neg, c))
        }
    }

    pub fn reference(&self, x: ArrayViewD<i8>) -> ArrayD<i8> {
        per_channel(x, |v, c| self.requant.apply(self.acc(v, c), c))
    }
}

/// Nearest upsampling of an int8 NCHW tensor by integer factors:
/// `y[n, c, y, x] = x[n, c, y / fy, x / fx]` (no requantization: the data only moves).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct QUpsample {
    pub name: String,
    /// (vertical, horizontal) factors.
    pub factor: (usize, usize),
}

impl QUpsample {
    pub fn output_shape(&self, [n, c, h, w]: [usize; 4]) -> [usize; 4] {
        [n, c, h * self.factor.0, w * self.factor.1]
    }

    pub fn reference(&self, x: ndarray::ArrayView4<i8>) -> ndarray::Array4<i8> {
        let [n, c, h, w] = self.output_shape(x.dim().into());
        ndarray::Array4::from_shape_fn((n, c, h, w), |(b, ch, y, xx)| {
            x[[b, ch, y / self.factor.0, xx / self.factor.1]]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_dequantize_function_quantize() {
        let t = QTable::build(
            "t",
            "Tanh",
            f32::tanh,
            (0.05, 3),
            (1.0 / 127.0, -2),
            (-128, 127),
        );
        for q in -128i32..=127 {
            let x = (q - 3) as f32 * 0.05;
            let want = quantize_value(x.tanh(), 1.0 / 127.0, -2, -128, 127);
            assert_eq!(i32::from(t.lookup(q as i8)), want);
        }
        assert_eq!(t.check(), Ok(()));
    }

    #[test]
    fn layers_compute_their_formulas() {
        let r = Requant::identity();
        let aff = QAffine {
            name: "a".into(),
            weight: vec![2, -1],
            bias: vec![1, 5],
            requant: r.clone(),
        };
        let x = ArrayD::from_shape_vec(IxDyn(&[1, 2, 1, 2]), vec![3i8, -4, 10, 100]).unwrap();
        assert_eq!(
            aff.reference(x.view()).iter().copied().collect::<Vec<_>>(),
            [7, -7, -5, -95]
        );
        let mul = QBinary {
            name: "m".into(),
            op: BinaryOp::Mul,
            zp_a: 1,
            zp_b: -1,
            mul_a: 1,
            mul_b: 1,
            requant: r.clone(),
        };
        let b = ArrayD::from_shape_vec(IxDyn(&[1, 2, 1, 1]), vec![1i8, -2]).unwrap();
        // (3-1)(1+1), (-4-1)(1+1), (10-1)(-2+1), (100-1)(-2+1)
        assert_eq!(
            mul.reference(x.view(), b.view())
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [4, -10, -9, -99]
        );
        let lr = QLeakyRelu {
            name: "l".into(),
            zp: 0,
            mul_pos: 4,
            mul_neg: vec![1],
            requant: Requant { shift: 2, ..r },
        };
        assert_eq!(
            lr.reference(x.view()).iter().copied().collect::<Vec<_>>(),
            [3, -1, 10, 100]
        );
    }
}
