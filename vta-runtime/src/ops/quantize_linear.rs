//! `QuantizeLinear`: `y = saturate(round_half_even(x / scale) + zero_point)`, per tensor or
//! per axis, to int8 or uint8 (ONNX's default without a zero point is uint8), or to a narrower
//! range held in those types: ONNX's int4/uint4/int2/uint2 outputs, and a Brevitas/QONNX
//! integer Clip fused into the saturation (`clamp(saturate8(q), lo, hi) = saturate_[lo, hi](q)`
//! for `[lo, hi]` inside the 8-bit range). The division is done in f32, as onnxruntime does.

use ndarray::{ArrayD, Dimension};

use super::kernels::round_half_even;
use super::TensorInfo;
use super::{arg, axis, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct QuantizeLinear {
    pub axis: i64,
    /// Output type when there is no zero-point input (opset 21 `output_dtype`, else uint8).
    pub default_dtype: DType,
    /// Saturation bounds narrower than the output type's (see the module doc), `None` for
    /// the type's own.
    #[serde(default)]
    pub range: Option<(i32, i32)>,
}

/// Per-tensor or per-axis quantization parameters, as given to Q/DQ-like ops.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct QParams {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i32>,
    /// The axis the parameters vary along (`None`: one value for the whole tensor).
    pub axis: Option<usize>,
}

impl QParams {
    /// Reads scale and zero point tensors for a tensor of shape `shape`: scalars (or
    /// one-element tensors) are per-tensor, 1-D tensors of `shape[axis]` values per axis.
    pub fn new(
        scale: &Tensor,
        zp: Option<&Tensor>,
        ax: i64,
        shape: &[usize],
    ) -> Result<QParams, String> {
        let s: Vec<f32> = scale.as_f32()?.iter().cloned().collect();
        let z: Vec<i32> = match zp {
            Some(z) => z.to_i64_vec().into_iter().map(|v| v as i32).collect(),
            None => vec![0; s.len()],
        };
        if s.len() != z.len() {
            return Err(format!("{} scales but {} zero points", s.len(), z.len()));
        }
        if s.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(format!("scales must be positive and finite, got {s:?}"));
        }
        let axis_ = if s.len() == 1 && scale.shape().len() <= 1 {
            None
        } else {
            if scale.shape().len() != 1 {
                return Err(format!(
                    "scale of shape {:?} is neither a scalar nor 1-D",
                    scale.shape()
                ));
            }
            let a = axis(ax, shape.len())?;
            if shape[a] != s.len() {
                return Err(format!(
                    "{} scales for axis {a} of size {}",
                    s.len(),
                    shape[a]
                ));
            }
            Some(a)
        };
        Ok(QParams {
            scale: s,
            zero_point: z,
            axis: axis_,
        })
    }

    /// Scale and zero point of the element at multi-index `idx`.
    pub fn at(&self, idx: &[usize]) -> (f32, i32) {
        let i = self.axis.map_or(0, |a| idx[a]);
        (self.scale[i], self.zero_point[i])
    }

    pub fn is_per_tensor(&self) -> bool {
        self.axis.is_none()
    }
}

/// Quantizes one value: `saturate(round_half_even(x / scale) + zp)` to `[lo, hi]`.
pub fn quantize_value(x: f32, scale: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    let q = round_half_even(x / scale) + zp as f32;
    if q.is_nan() {
        0
    } else {
        q.clamp(lo as f32, hi as f32) as i32
    }
}

/// The values of `dtype` a quantization saturates to.
pub fn dtype_range(dtype: DType) -> Result<(i32, i32), String> {
    match dtype {
        DType::I8 => Ok((-128, 127)),
        DType::U8 => Ok((0, 255)),
        DType::I32 => Ok((i32::MIN, i32::MAX)),
        other => Err(format!("cannot quantize to {other}")),
    }
}

/// Quantizes a float tensor to `dtype` (int8 or uint8).
pub fn quantize(x: &ArrayD<f32>, p: &QParams, dtype: DType) -> Result<Tensor, String> {
    quantize_in(x, p, dtype, dtype_range(dtype)?)
}

/// Quantizes a float tensor to the values `[lo, hi]` of `dtype` (int8 or uint8).
pub fn quantize_in(
    x: &ArrayD<f32>,
    p: &QParams,
    dtype: DType,
    (lo, hi): (i32, i32),
) -> Result<Tensor, String> {
    let mut q = ArrayD::<i32>::zeros(x.raw_dim());
    for (idx, v) in x.indexed_iter() {
        let (s, z) = p.at(idx.slice());
        q[&idx] = quantize_value(*v, s, z, lo, hi);
    }
    Ok(match dtype {
        DType::I8 => Tensor::I8(q.mapv(|v| v as i8)),
        DType::U8 => Tensor::U8(q.mapv(|v| v as u8)),
        _ => Tensor::I32(q),
    })
}

impl QuantizeLinear {
    fn out_dtype(&self, zp: Option<&TensorInfo>) -> DType {
        zp.map_or(self.default_dtype, |z| z.fact.dtype)
    }

    /// The values the output saturates to, for output type `dtype`: the narrower range if
    /// there is one (never wider than the type's).
    pub fn saturation(&self, dtype: DType) -> Result<(i32, i32), String> {
        let (lo, hi) = dtype_range(dtype)?;
        Ok(match self.range {
            Some((a, b)) => (a.max(lo), b.min(hi)),
            None => (lo, hi),
        })
    }
}

impl Op for QuantizeLinear {
    fn op_type(&self) -> &'static str {
        "QuantizeLinear"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "x")?;
        if !matches!(x.dtype, DType::F32 | DType::I32) {
            return Err(format!(
                "QuantizeLinear input must be float or int32, got {}",
                x.dtype
            ));
        }
        let zp = inputs.get(2).copied().flatten();
        let dt = self.out_dtype(zp);
        if !matches!(dt, DType::I8 | DType::U8) {
            return Err(format!("QuantizeLinear to {dt} is not supported"));
        }
        if let Some((lo, hi)) = self.range {
            let (a, b) = self.saturation(dt)?;
            if a > b {
                return Err(format!(
                    "saturation range [{lo}, {hi}] has no value of the output type {dt}"
                ));
            }
        }
        in_fact(inputs, 1, "y_scale")?;
        if let Some(s) = in_const(inputs, 1) {
            QParams::new(s, in_const(inputs, 2), self.axis, &x.shape)?;
        }
        Ok(vec![Fact::new(dt, x.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "x")?;
        let xf = x.cast(DType::F32);
        let zp = inputs.get(2).copied().flatten();
        let p = QParams::new(arg(inputs, 1, "y_scale")?, zp, self.axis, x.shape())?;
        let dt = zp.map_or(self.default_dtype, |z| z.dtype());
        Ok(vec![quantize_in(
            xf.as_f32()?,
            &p,
            dt,
            self.saturation(dt)?,
        )?])
    }

    op_boilerplate!();
}
