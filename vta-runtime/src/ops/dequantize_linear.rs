//! `DequantizeLinear`: `y = (x - zero_point) * scale` in f32, per tensor or per axis, from
//! int8, uint8 or int32. Never constant-folded: a DequantizeLinear of a constant is how
//! QDQ models carry their quantized weights.

use ndarray::{ArrayD, Dimension};

use super::quantize_linear::QParams;
use super::TensorInfo;
use super::{arg, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct DequantizeLinear {
    pub axis: i64,
}

/// Dequantizes an integer tensor.
pub fn dequantize(x: &Tensor, p: &QParams) -> Result<ArrayD<f32>, String> {
    let xi = x.to_i32_array()?;
    let mut y = ArrayD::<f32>::zeros(xi.raw_dim());
    for (idx, v) in xi.indexed_iter() {
        let (s, z) = p.at(idx.slice());
        y[&idx] = (v.wrapping_sub(z)) as f32 * s;
    }
    Ok(y)
}

impl Op for DequantizeLinear {
    fn op_type(&self) -> &'static str {
        "DequantizeLinear"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "x")?;
        if !matches!(x.dtype, DType::I8 | DType::U8 | DType::I32) {
            return Err(format!(
                "DequantizeLinear input must be int8, uint8 or int32, got {}",
                x.dtype
            ));
        }
        if let Some(z) = inputs.get(2).copied().flatten() {
            if z.fact.dtype != x.dtype {
                return Err(format!(
                    "zero point type {} differs from input type {}",
                    z.fact.dtype, x.dtype
                ));
            }
        }
        in_fact(inputs, 1, "x_scale")?;
        if let Some(s) = in_const(inputs, 1) {
            QParams::new(s, in_const(inputs, 2), self.axis, &x.shape)?;
        }
        Ok(vec![Fact::new(DType::F32, x.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "x")?;
        let p = QParams::new(
            arg(inputs, 1, "x_scale")?,
            inputs.get(2).copied().flatten(),
            self.axis,
            x.shape(),
        )?;
        Ok(vec![Tensor::F32(dequantize(x, &p)?)])
    }

    fn foldable(&self) -> bool {
        false
    }

    op_boilerplate!();
}
