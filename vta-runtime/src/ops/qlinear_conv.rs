//! `QLinearConv`: quantized 2-D convolution with ONNX's exact integer semantics:
//!
//! ```text
//! acc[o] = sum (x - x_zp) * (w[o] - w_zp[o]) + B[o]          (int32; padding reads x_zp)
//! y[o]   = saturate(round_half_even(acc[o] * M[o]) + y_zp),   M[o] = x_scale * w_scale[o] / y_scale
//! ```
//!
//! `M` and the product `acc * M` are computed in f32, as onnxruntime does; the result
//! reproduces ONNX's reference outputs exactly.

use ndarray::{ArrayD, Axis};

use super::conv::conv_fact;
use super::kernels::{conv2d, dims4, round_half_even, Window};
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct QLinearConv {
    pub window: Window,
    pub group: usize,
}

/// ONNX's requantization of an int32 accumulator: `saturate(round_half_even(acc * m) + zp)`
/// with the product in f32.
pub fn requantize_onnx(acc: i32, m: f32, zp: i32, dtype: DType) -> i32 {
    let (lo, hi) = int_range(dtype);
    let v = round_half_even(acc as f32 * m) + zp as f32;
    v.clamp(lo as f32, hi as f32) as i32
}

/// The value range of an integer type.
pub fn int_range(dtype: DType) -> (i32, i32) {
    match dtype {
        DType::I8 => (-128, 127),
        DType::U8 => (0, 255),
        _ => (i32::MIN, i32::MAX),
    }
}

/// Values of a per-tensor (one value) or per-channel parameter tensor, `n` of them.
pub fn per_channel_f32(t: &Tensor, n: usize, what: &str) -> Result<Vec<f32>, String> {
    let v: Vec<f32> = t.as_f32()?.iter().cloned().collect();
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        k if k == n => Ok(v),
        k => Err(format!("{what} has {k} values, expected 1 or {n}")),
    }
}

/// Integer per-tensor or per-channel parameter values, `n` of them.
pub fn per_channel_i32(t: Option<&Tensor>, n: usize, what: &str) -> Result<Vec<i32>, String> {
    let v: Vec<i32> = match t {
        None => vec![0],
        Some(t) => t.to_i64_vec().into_iter().map(|v| v as i32).collect(),
    };
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        k if k == n => Ok(v),
        k => Err(format!("{what} has {k} values, expected 1 or {n}")),
    }
}

/// `(x - x_zp)` as int32.
pub fn centered(x: &Tensor, zp: i32) -> Result<ArrayD<i32>, String> {
    Ok(x.to_i32_array()?.mapv(|v| v - zp))
}

/// `(w[o] - w_zp[o])` as int32, along axis 0.
pub fn centered_per_channel(w: &Tensor, zp: &[i32]) -> Result<ArrayD<i32>, String> {
    let mut w = w.to_i32_array()?;
    for (o, mut sub) in w.axis_iter_mut(Axis(0)).enumerate() {
        sub.mapv_inplace(|v| v - zp[o]);
    }
    Ok(w)
}

/// ONNX's `B` of a quantized convolution: one int32 per output channel.
fn bias_fits(shape: &[usize], out_channels: usize) -> Result<(), String> {
    if shape != [out_channels] {
        return Err(format!(
            "the bias B has shape {shape:?}; it must hold one value per output channel \
             ([{out_channels}])"
        ));
    }
    Ok(())
}

impl Op for QLinearConv {
    fn op_type(&self) -> &'static str {
        "QLinearConv"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "x")?;
        let w = in_fact(inputs, 3, "w")?;
        let yz = in_fact(inputs, 7, "y_zero_point")?;
        for (f, what) in [(x, "x"), (w, "w"), (yz, "y_zero_point")] {
            if !matches!(f.dtype, DType::I8 | DType::U8) {
                return Err(format!("{what} must be int8 or uint8, got {}", f.dtype));
            }
        }
        if let Some(b) = inputs.get(8).copied().flatten() {
            bias_fits(&b.fact.shape, w.shape.first().copied().unwrap_or(0))?;
        }
        Ok(vec![conv_fact(&self.window, self.group, x, w, yz.dtype)?])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "x")?;
        let xs = arg(inputs, 1, "x_scale")?.scalar_f32()?;
        let xz = arg(inputs, 2, "x_zero_point")?.to_i64_vec()[0] as i32;
        let w = arg(inputs, 3, "w")?;
        let (o, _, kh, kw) = dims4(w.shape(), "w")?;
        let ws = per_channel_f32(arg(inputs, 4, "w_scale")?, o, "w_scale")?;
        let wz = per_channel_i32(Some(arg(inputs, 5, "w_zero_point")?), o, "w_zero_point")?;
        let ys = arg(inputs, 6, "y_scale")?.scalar_f32()?;
        let yzt = arg(inputs, 7, "y_zero_point")?;
        let yz = yzt.to_i64_vec()[0] as i32;
        let bias: Option<Vec<i32>> = inputs
            .get(8)
            .copied()
            .flatten()
            .map(|b| b.to_i32_array().map(|a| a.iter().cloned().collect()))
            .transpose()?;
        if let Some(b) = &bias {
            bias_fits(&[b.len()], o)?;
        }
        let xc = centered(x, xz)?;
        let wc = centered_per_channel(w, &wz)?;
        let (_, _, h, wd) = dims4(x.shape(), "x")?;
        let geo = self.window.resolve((h, wd), (kh, kw))?;
        let acc = conv2d(&xc.view(), &wc.view(), bias.as_deref(), &geo, self.group, 0)?;
        let m: Vec<f32> = ws.iter().map(|&s| xs * s / ys).collect();
        let dt = yzt.dtype();
        let mut y = ArrayD::<i32>::zeros(acc.raw_dim());
        for (idx, &a) in acc.indexed_iter() {
            y[&idx] = requantize_onnx(a, m[idx[1]], yz, dt);
        }
        Ok(vec![match dt {
            DType::I8 => Tensor::I8(y.mapv(|v| v as i8)),
            _ => Tensor::U8(y.mapv(|v| v as u8)),
        }])
    }

    fn summary(&self) -> String {
        let mut s = self.window.summary();
        if self.group != 1 {
            s += &format!(" group {}", self.group);
        }
        s
    }

    op_boilerplate!();
}
